"""Reads the tensors of a PyTorch checkpoint file (`torch.save`'s zip format, e.g. a
HuggingFace pytorch_model.bin) into numpy arrays, without torch.

The file is a zip archive: `<name>/data.pkl` is a pickle whose tensors point, by a
persistent id ("storage", storage class, key, device, element count), at the raw little- or
big-endian bytes in `<name>/data/<key>`. The pickle is read with an unpickler that knows only
the few callables such a file names (an OrderedDict, the tensor and parameter rebuilders, the
storage classes); anything else in it is refused, as torch.load(weights_only=True) refuses
it, so reading a file runs none of its code. Files of torch's legacy (pre-1.6, not zip)
format are refused in one line.
"""
import collections
import io
import pickle
import zipfile

import numpy as np

# torch's typed storage classes as a checkpoint names them, with their element type. bfloat16
# has no numpy type: its bytes are read as uint16 and widened to float32.
_STORAGES = {
    "DoubleStorage": np.float64, "FloatStorage": np.float32, "HalfStorage": np.float16,
    "BFloat16Storage": "bfloat16", "LongStorage": np.int64, "IntStorage": np.int32,
    "ShortStorage": np.int16, "CharStorage": np.int8, "ByteStorage": np.uint8,
    "BoolStorage": np.bool_,
}


class _Storage(object):
    """A storage class named by the pickle (stands for torch.FloatStorage, ...)."""

    def __init__(self, name):
        self.name = name
        self.dtype = _STORAGES[name]


def _rebuild_tensor(storage, offset, size, stride, *unused):
    """The tensor `size` / `stride` / `offset` (in elements) describe over `storage`."""
    if not size:
        return np.array(storage[offset])
    if any(s == 0 for s in size):
        return np.zeros(size, storage.dtype)
    last = offset + sum((n - 1) * s for n, s in zip(size, stride))
    if offset < 0 or last >= storage.size:
        raise ValueError("a tensor reaches past the end of its storage")
    view = np.lib.stride_tricks.as_strided(
        storage[offset:], shape=tuple(size),
        strides=tuple(s * storage.itemsize for s in stride), writeable=False)
    return np.array(view)


def _rebuild_parameter(data, *unused):
    return data


class _Unpickler(pickle.Unpickler):
    """Rebuilds the tensors of data.pkl from the archive's storage records."""

    _CALLABLES = {
        ("collections", "OrderedDict"): collections.OrderedDict,
        ("torch._utils", "_rebuild_tensor_v2"): _rebuild_tensor,
        ("torch._utils", "_rebuild_parameter"): _rebuild_parameter,
    }

    def __init__(self, data, read_record, byteorder):
        super().__init__(io.BytesIO(data))
        self._read_record = read_record
        self._byteorder = byteorder
        self._storages = {}

    def find_class(self, module, name):
        if module == "torch" and name in _STORAGES:
            return _Storage(name)
        found = self._CALLABLES.get((module, name))
        if found is None:
            raise pickle.UnpicklingError("it names %s.%s, which a file of tensors does not "
                                         "need (only tensors are read)" % (module, name))
        return found

    def persistent_load(self, pid):
        if not (isinstance(pid, tuple) and len(pid) == 5 and pid[0] == "storage"
                and isinstance(pid[1], _Storage)):
            raise pickle.UnpicklingError("unknown persistent id %r" % (pid[:2],))
        storage, key = pid[1], str(pid[2])
        if key not in self._storages:
            self._storages[key] = self._array(self._read_record(key), storage.dtype)
        return self._storages[key]

    def _array(self, raw, dtype):
        if dtype == "bfloat16":
            bits = np.frombuffer(raw, np.dtype(np.uint16).newbyteorder(self._byteorder))
            return (bits.astype(np.uint32) << 16).view(np.float32)
        return np.frombuffer(raw, np.dtype(dtype).newbyteorder(self._byteorder))


def load(path, read_bytes=None):
    """The object torch.save wrote to `path` (a dict of tensors), its tensors numpy arrays.

    read_bytes: reads the whole file (default: open(path, "rb")); ValueError in one line
    naming the file for anything but a zip-format file of tensors.
    """
    if read_bytes is None:
        with open(path, "rb") as f:
            content = f.read()
    else:
        content = read_bytes(path)
    if not zipfile.is_zipfile(io.BytesIO(content)):
        raise ValueError("%s is not a zip-format PyTorch file (torch >= 1.6 writes that; an "
                         "older file can be saved again with torch, or give model.safetensors)"
                         % path)
    try:
        with zipfile.ZipFile(io.BytesIO(content)) as archive:
            names = archive.namelist()
            pickles = [n for n in names if n.endswith("/data.pkl") and n.count("/") == 1]
            if len(pickles) != 1:
                raise ValueError("no <name>/data.pkl record")
            prefix = pickles[0][:-len("data.pkl")]
            byteorder = "<"
            if prefix + "byteorder" in names:
                byteorder = {"little": "<", "big": ">"}.get(
                    archive.read(prefix + "byteorder").decode("ascii", "replace").strip(), "?")
                if byteorder == "?":
                    raise ValueError("its byteorder record is neither little nor big")
            return _Unpickler(archive.read(pickles[0]),
                              lambda key: archive.read(prefix + "data/" + key),
                              byteorder).load()
    except (ValueError, KeyError, EOFError, pickle.UnpicklingError, zipfile.BadZipFile,
            TypeError, AttributeError, IndexError) as e:
        raise ValueError("cannot read PyTorch weights %s: %s" % (path, e)) from None
