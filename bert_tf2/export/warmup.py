"""TF Serving's warm-up file: assets.extra/tf_serving_warmup_requests, written by
export_saved_model.py --warmup_file / --warmup_examples.

TF Serving (--enable_model_warmup, on by default) replays that file's requests when it
loads a version, before the version takes traffic: the first client request then finds
the graphs traced and the tables loaded (without it the first request took 1.2 s here,
5.5 s under load, instead of ~20 ms). The file is a TFRecord file, one record per
request, each a serialized `tensorflow.serving.PredictionLog` whose `predict_log.request`
is a `PredictRequest` (model_spec.name, model_spec.signature_name, and the inputs as
TensorProtos). The tensorflow-serving-api package is not needed: the few wrapper fields
are written here in protobuf's wire format, the tensors with TensorFlow's own TensorProto
(field numbers: prediction_log.proto, predict.proto, model.proto of tensorflow/serving;
read_requests reads them back).
"""
import json
import os
import re

import numpy as np
import tensorflow as tf
from tensorflow.core.framework import tensor_pb2

from bert_tf2 import fileutil
from bert_tf2.export import head_types
from bert_tf2.export import masked_lm
from bert_tf2.tasks import file_data
from bert_tf2.tasks import ner_data
from bert_tf2.tasks import squad_data

WARMUP_FILE = "assets.extra/tf_serving_warmup_requests"
# TF Serving refuses to load a version whose warm-up file holds more records.
MAX_REQUESTS = 1000

# Field numbers of TF Serving's messages (tensorflow_serving/apis/*.proto).
_PREDICTION_LOG_PREDICT_LOG = 6  # PredictionLog.predict_log
_PREDICT_LOG_REQUEST = 1  # PredictLog.request
_REQUEST_MODEL_SPEC, _REQUEST_INPUTS = 1, 2  # PredictRequest.model_spec, .inputs (a map)
_SPEC_NAME, _SPEC_SIGNATURE = 1, 3  # ModelSpec.name, .signature_name
_MAP_KEY, _MAP_VALUE = 1, 2  # a map entry's key and value
_LENGTH_DELIMITED, _VARINT = 2, 0  # wire types

# The data formats a warm-up file may have besides plain lines, by the head's signature
# kind: the formats --calibration_file / --agreement_file take (ids_step).
_TEXT_TABLES = {".tsv": file_data.read_tsv, ".csv": file_data.read_csv,
                ".jsonl": file_data.read_jsonl}

# (kind, name, default, help), as settings_lib.define_flag_table reads them.
FLAGS = (
    ("string", "warmup_file", None,
     "Write TF Serving's warm-up requests (assets.extra/tf_serving_warmup_requests, replayed "
     "by the server before a version takes traffic) made of this file's examples: plain "
     "text, one request per line, its inputs tab-separated in the signature's order "
     "(text_a[<TAB>text_b]; a tagger's text; question<TAB>context; context<TAB>ending...; "
     "masked_lm: a text with [MASK]s); "
     "or the format --calibration_file takes for the model type (.tsv / .csv / .jsonl with "
     "--litert_columns, SQuAD .json, CoNLL .conll / .iob). See docs/serving.md."),
    ("integer", "warmup_examples", None,
     "How many examples of --warmup_file make warm-up requests (default: all, at most "
     "%d requests). Without --warmup_file: the first N of --agreement_file, else "
     "--calibration_file." % MAX_REQUESTS),
)

# An example's fields, the requests it makes and its data formats: the head's signature
# kind in the registry (request_kinds.SIGNATURES).


def check(settings):
    """The warm-up flags' checks before any work (ValueError naming the flag)."""
    if settings.warmup_examples is not None and settings.warmup_examples < 1:
        raise ValueError("--warmup_examples must be >= 1, got %d" % settings.warmup_examples)
    if settings.warmup_file:
        _check_file("--warmup_file", settings.warmup_file)
    elif settings.warmup_examples is not None and not (
            settings.agreement_file or settings.calibration_file):
        raise ValueError("--warmup_examples needs --warmup_file (or the --litert "
                         "--agreement_file / --calibration_file to take them from)")


def _check_file(flag, path):
    if not tf.io.gfile.exists(path) or tf.io.gfile.isdir(path):
        raise ValueError("%s=%s does not exist (or is not a file)" % (flag, path))


def read_rows(settings, columns):
    """The warm-up examples the settings name, read before any work: a list of tuples of
    strings (one example's inputs in the signature's order), or None when no warm-up
    file is asked for. `columns`: the (text_a, text_b, label) columns of a text table."""
    if settings.warmup_file:
        flag, path, data = "--warmup_file", settings.warmup_file, None
    elif settings.warmup_examples is not None:
        flag = "--agreement_file" if settings.agreement_file else "--calibration_file"
        path, data = getattr(settings, flag[2:]), True
    else:
        return None
    kind = head_types.signature_of(settings.model_type)
    ending = os.path.splitext(path)[1].lower()
    in_format = kind.data_format and (kind.any_ending or ending in kind.data_endings or (
        data and kind.always_data))
    try:
        if in_format:
            rows = [row if isinstance(row, _Row) else _Row(row, "example %d" % number)
                    for number, row in enumerate(
                        _ROW_READERS[kind.data_format](path, ending, columns), 1)]
        else:
            rows = [_Row(line.split("\t"), "line %d" % number) for number, line in
                    enumerate(fileutil.split_lines(fileutil.read_text(path)), 1)
                    if line.strip()]
    except (ValueError, KeyError, TypeError, UnicodeDecodeError) as e:
        text = str(e)  # a reader's line may name the file itself ("PATH, line 3: ...")
        raise ValueError("%s=%s" % (flag, text) if text.startswith(str(path)) else
                         "%s=%s: %s" % (flag, path, text)) from None
    rows = rows[:settings.warmup_examples]
    if not rows:
        raise ValueError("%s=%s: no examples" % (flag, path))
    for row in rows:
        row.source = "%s=%s" % (flag, path)
    least, most, in_words = kind.fields
    for number, row in enumerate(rows, 1):
        if not least <= len(row) <= most:
            raise ValueError("%s=%s: example %d has %d tab-separated field(s), a request of "
                             "this model is %s" % (flag, path, number, len(row), in_words))
    _check_count(rows, len(kind.requests))
    return rows


def _check_count(rows, per_row):
    """ValueError when `rows` make more requests than TF Serving loads."""
    if len(rows) * per_row > MAX_REQUESTS:
        raise ValueError("%s: %d warm-up requests, TF Serving loads at most %d: give "
                         "--warmup_examples=%d or fewer" % (
                             getattr(rows[0], "source", None) or "--warmup_file",
                             len(rows) * per_row, MAX_REQUESTS, MAX_REQUESTS // per_row))


class _Row(tuple):
    """A warm-up example's fields (strings, in the signature's order); .where: its place
    in the file ("line 3", "example 2"), .source: the flag and file ("--warmup_file=w.txt")."""

    def __new__(cls, fields, where):
        row = super().__new__(cls, fields)
        row.where, row.source = where, None
        return row


def _table_rows(path, ending, columns):
    """(text_a[, text_b]) of every row of a .tsv / .csv / .jsonl file of texts."""
    wanted = [c for c in columns[:2] if c]
    return [tuple(_text(row, c) for c in wanted)
            for row in _TEXT_TABLES[ending](path, wanted, [])]


def _conll_rows(path, ending, columns):
    """(sentence,) of every sentence of a CoNLL file, its words joined by spaces."""
    del ending, columns
    return [(" ".join(s.words),) for s in
            ner_data.read_conll(path, require_tags=False).sentences]


def _text(row, column):
    value = row.fields.get(column)
    if not isinstance(value, str):
        raise ValueError("%s: %r is %r, not a text" % (row.where(), column, value))
    return value


def _squad_rows(path, ending=None, columns=None):
    """(question, context) of every question of a SQuAD JSON file, in file order."""
    del ending, columns
    return [(qa["question"], paragraph["context"])
            for article in squad_data.load_squad_json(path)
            for paragraph in article.get("paragraphs", [])
            for qa in paragraph.get("qas", [])]


# The readers of warm-up rows by data format (request_kinds.Signature.data_format).
_ROW_READERS = {"table": _table_rows, "conll": _conll_rows, "squad_json": _squad_rows,
                # a line without [MASK] would fail the version's load: refused here
                "masked_texts": lambda path, ending, columns: [
                    _Row((text,), "line %d" % number)
                    for number, text in masked_lm.read_texts(path, line_numbers=True)]}


def signature_names(model_type, signatures):
    """The signatures a warm-up example of `model_type` calls, in order: its signature
    kind's requests, then every other signature its room declares (serving_functions: the
    encoder's embed, the ranker's rank) that the export has (`signatures`: the module's
    {name: function}). Read from the registry: a head's new signature needs no edit here."""
    kind = head_types.signature_of(model_type)
    own = [function[0] for function in head_types.find(model_type).serving_functions]
    return list(kind.requests) + [name for name in own
                                  if name not in kind.requests and name in signatures]


def requests(model_type, rows, signatures):
    """[(signature name, {input: numpy array of bytes})] of the warm-up rows: per row one
    request (batch 1) per signature of signature_names. `signatures`: the module's
    {name: concrete function}, whose inputs each request gives (the kind's inputs, and
    those the room's warmup_inputs makes for its own signatures). Each request has .row,
    the row it is made of (read_rows' rows have .where, .source)."""
    kind = head_types.signature_of(model_type)
    entry = head_types.find(model_type)
    names = signature_names(model_type, signatures)
    _check_count(rows, len(names))
    found = []
    for row in rows:
        fields = [t.encode("utf-8") for t in row]
        inputs = dict(kind.inputs(fields), **entry.warmup_inputs(fields))
        for name in names:
            wanted = input_names(signatures[name])
            if not wanted <= set(inputs):
                raise ValueError("--warmup_file: the %s signature takes %s, a row gave %s"
                                 % (name, ", ".join(sorted(wanted)), ", ".join(sorted(inputs))))
            found.append(_Request(name, {k: np.array(inputs[k], dtype=object)
                                         for k in sorted(wanted)}, row))
    return found


class _Request(tuple):
    """(signature name, inputs) of one warm-up request; .row: the row it is made of."""

    def __new__(cls, name, inputs, row):
        request = super().__new__(cls, (name, inputs))
        request.row = row
        return request


def replay(folder, found):
    """Calls each request `found` (requests()) through the export in `folder` as TF Serving
    does when it loads the version (the SavedModel loaded here, each request on its own):
    a request it fails would keep the version from loading. ValueError naming the file, the
    line (or example) and the signature, with the export's own error line."""
    loaded = fileutil.load_saved_model(folder)
    for request in found:
        name, inputs = request
        try:
            loaded.signatures[name](**{k: tf.constant(v) for k, v in inputs.items()})
        except (tf.errors.OpError, ValueError, TypeError) as e:
            row = getattr(request, "row", None)
            first = _error_line(getattr(e, "message", None) or str(e))
            raise ValueError("%s: %s fails the export's %s signature, so TF Serving would not "
                             "load the version: %s" % (
                                 getattr(row, "source", None) or "--warmup_file",
                                 getattr(row, "where", None) or "a request", name,
                                 first)) from None


def input_names(function):
    """The input names of a signature: a concrete function, or a tf.function with an input
    signature whose specs are all named (read off it: no trace; after the export's save,
    get_concrete_function traces the whole signature again, outside the save's context)."""
    if hasattr(function, "structured_input_signature"):
        specs = tf.nest.flatten(function.structured_input_signature)
    else:
        specs = tf.nest.flatten(function.input_signature or ())
        if not specs or any(spec.name is None for spec in specs):
            specs = tf.nest.flatten(function.get_concrete_function().structured_input_signature)
    return {spec.name for spec in specs}


def _varint(value):
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _field(number, payload):
    """A length-delimited field (a message, string or bytes) in protobuf's wire format."""
    return _varint(number << 3 | _LENGTH_DELIMITED) + _varint(len(payload)) + payload


def prediction_log(model_name, signature_name, inputs):
    """The serialized PredictionLog of one PredictRequest (bytes)."""
    spec = _field(_SPEC_NAME, model_name.encode("utf-8")) + _field(
        _SPEC_SIGNATURE, signature_name.encode("utf-8"))
    request = _field(_REQUEST_MODEL_SPEC, spec)
    for key in sorted(inputs):
        tensor = tf.make_tensor_proto(inputs[key]).SerializeToString()
        request += _field(_REQUEST_INPUTS, _field(_MAP_KEY, key.encode("utf-8"))
                          + _field(_MAP_VALUE, tensor))
    return _field(_PREDICTION_LOG_PREDICT_LOG, _field(_PREDICT_LOG_REQUEST, request))


def write(folder, model_name, found):
    """Writes the requests `found` (requests()) as WARMUP_FILE in the export `folder`;
    returns WARMUP_FILE."""
    path = os.path.join(folder, WARMUP_FILE)
    tf.io.gfile.makedirs(os.path.dirname(path))
    with tf.io.TFRecordWriter(path) as writer:
        for name, inputs in found:
            writer.write(prediction_log(model_name, name, inputs))
    return WARMUP_FILE


def _fields(data):
    """{field number: [values]} of a serialized message (bytes of length-delimited
    fields, ints of varints); ValueError on another wire type."""
    found, at = {}, 0

    def varint():
        nonlocal at
        value, shift = 0, 0
        while True:
            byte = data[at]
            at += 1
            value |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                return value

    while at < len(data):
        key = varint()
        if key & 7 == _VARINT:
            value = varint()
        elif key & 7 == _LENGTH_DELIMITED:
            size = varint()
            value, at = bytes(data[at:at + size]), at + size
        else:
            raise ValueError("unexpected wire type %d" % (key & 7))
        found.setdefault(key >> 3, []).append(value)
    return found


def read_requests(path):
    """The requests of a warm-up file: [(model name, signature name, {input: numpy
    array})], read with this module's field numbers (for tests and for checking a file)."""
    found = []
    for record in tf.data.TFRecordDataset(path).as_numpy_iterator():
        log = _fields(record)
        (request,) = _fields(log[_PREDICTION_LOG_PREDICT_LOG][0])[_PREDICT_LOG_REQUEST]
        request = _fields(request)
        spec = _fields(request[_REQUEST_MODEL_SPEC][0])
        inputs = {}
        for entry in request.get(_REQUEST_INPUTS, []):
            entry = _fields(entry)
            inputs[entry[_MAP_KEY][0].decode("utf-8")] = tf.make_ndarray(
                tensor_pb2.TensorProto.FromString(entry[_MAP_VALUE][0]))
        found.append((spec[_SPEC_NAME][0].decode("utf-8"),
                      spec[_SPEC_SIGNATURE][0].decode("utf-8"), inputs))
    return found


def describe(found):
    """One line for the log: how many requests of which signatures."""
    counts = {}
    for name, _ in found:
        counts[name] = counts.get(name, 0) + 1
    return json.dumps(counts, sort_keys=True)


# TensorFlow's lines around an op's error, none of them the error itself.
_FRAME_LINES = re.compile(r"^(Graph execution error:|Detected at node|<stack traces|\[\[)")


def _error_line(message):
    """The line of a signature's error that says what went wrong: an assertion's text (the
    export's own refusals, without the batch's row numbers), else its first line that is
    not TensorFlow's framing."""
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    for line in lines:
        if line.startswith("assertion failed: ["):
            text = line[len("assertion failed: ["):]
            return re.sub(r"\s*in row\(s\):\]\s*\[[\d\s]*\]$|\]$", "", text)
    return next((line for line in lines if not _FRAME_LINES.match(line)), "an error")
