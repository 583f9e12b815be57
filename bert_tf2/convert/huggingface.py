"""HuggingFace BERT folders <-> ours: the import here, the export and the names beside it.

convert_hf_checkpoint.py's two directions (the face keeps its flags); every public name of
the three modules is importable from here:
- From HuggingFace (`convert`, this module): config.json, the weights (model.safetensors, a
  sharded model.safetensors.index.json, or pytorch_model.bin[.index.json], which
  torch_pickle reads without torch) and vocab.txt become a TF1-named checkpoint
  (bert_model.ckpt), bert_config.json and vocab.txt, plus sentence_embedding.json for a
  sentence-transformers folder and, on request, a TF2 checkpoint under tf2/.
- To HuggingFace (`export_to_hf`, bert_tf2/convert/hf_export.py): a model folder of ours (a
  training run's output folder or best/, a converted model, a Google TF1 release) becomes a
  folder that transformers' Auto classes load with no code of ours; see that function.
- The parameter names both ways, the shapes a config implies and a vocab's tokens:
  bert_tf2/base/hf_names.py (the heads read them too; convert/hf_names is its old path).

Activations: HuggingFace's "gelu" is the exact erf GELU ("gelu_exact" in
bert_config.json); its tanh approximations ("gelu_new", "gelu_pytorch_tanh",
"gelu_fast") are what the reference calls "gelu".
"""
import json
import os

from absl import logging
import numpy as np
import tensorflow as tf

from bert import modeling
from bert_tf2.base.json_files import read_json_object
from bert_tf2 import fileutil
from bert_tf2.base import output_folder
from bert_tf2.base import hf_names
from bert_tf2.convert import torch_pickle
from bert_tf2.export import head_types
from bert_tf2.tasks import classifier_tasks
from bert_tf2.tasks import pooling
from bert_tf2.trainer import checkpoints
from bert_tf2.trainer import model_folder
# The export and the name tables, importable from here as before.
from bert_tf2.convert.hf_export import (  # noqa: F401
    CRF_FILE, HF_HEADS, HfExport, export_to_hf, head_of, hf_config_of, hf_tensors_of,
    read_model_folder)
from bert_tf2.base.hf_names import (  # noqa: F401
    expected_shapes, hf_key_for, read_vocab_tokens, strip_prefix, tf1_name_for)

# HuggingFace activation name -> the name our modeling.get_activation knows.
_ACTIVATION_MAP = {
    "gelu": "gelu_exact",
    "gelu_new": "gelu",
    "gelu_pytorch_tanh": "gelu",
    "gelu_fast": "gelu",
    "relu": "relu",
    "tanh": "tanh",
    "linear": "linear",
}

# config.json values of HuggingFace's BertConfig for keys a file may leave out.
_HF_DEFAULTS = {
    "vocab_size": 30522,
    "hidden_size": 768,
    "num_hidden_layers": 12,
    "num_attention_heads": 12,
    "intermediate_size": 3072,
    "hidden_act": "gelu",
    "hidden_dropout_prob": 0.1,
    "attention_probs_dropout_prob": 0.1,
    "max_position_embeddings": 512,
    "type_vocab_size": 2,
    "initializer_range": 0.02,
    "layer_norm_eps": 1e-12,
}

_FLOAT_KEYS = ("hidden_dropout_prob", "attention_probs_dropout_prob", "initializer_range",
               "layer_norm_eps")

# Buffers PyTorch BERT saves next to its parameters; not weights.
_BUFFER_SUFFIXES = ("embeddings.position_ids", "embeddings.token_type_ids")

# Set aside by the import: both frameworks tie them to other weights.
_DECODER_WEIGHT = "cls.predictions.decoder.weight"
_DECODER_BIAS = "cls.predictions.decoder.bias"
# The TF1 name of the masked-LM head's output bias (HF's cls.predictions.bias, which the
# decoder's bias repeats).
_OUTPUT_BIAS = hf_names.tf1_name_for("cls.predictions.bias")[0]

_SAFETENSORS = "model.safetensors"
_SAFETENSORS_INDEX = "model.safetensors.index.json"
_TORCH_BIN = "pytorch_model.bin"
_TORCH_BIN_INDEX = "pytorch_model.bin.index.json"

# What a conversion manages in --output_dir: the files it writes, and the settings file it
# writes only for some models (never left from an earlier conversion of another model).
_OUTPUTS = ("bert_model.ckpt.*", "checkpoint", "bert_config.json", "vocab.txt",
            pooling.SETTINGS_FILE, "tf2/*", fileutil.LABEL_LIST_FILE,
            classifier_tasks.TASK_FILE, fileutil.MODEL_SETTINGS_FILE)


# ---------------------------------------------------------------------------
# config.json -> bert_config.json
# ---------------------------------------------------------------------------

def convert_config(hf_config, source="config.json"):
    """HuggingFace BertConfig dict -> bert_config.json dict (ValueError if unsupported).

    `source` names the file in error messages.
    """
    model_type = hf_config.get("model_type", "bert")
    if model_type != "bert":
        raise ValueError("%s: model_type %r is not supported (only \"bert\")"
                         % (source, model_type))
    position_type = hf_config.get("position_embedding_type", "absolute")
    if position_type != "absolute":
        raise ValueError("%s: position_embedding_type %r is not supported (only \"absolute\", "
                         "the learned position table of BERT)" % (source, position_type))
    for key in ("is_decoder", "add_cross_attention"):
        if hf_config.get(key):
            raise ValueError("%s: %s=true is not supported (BERT is an encoder without "
                             "cross-attention)" % (source, key))

    out = {}
    for key, default in _HF_DEFAULTS.items():
        if key in hf_config and hf_config[key] is not None:
            out[key] = hf_config[key]
        else:
            logging.info("%s has no %s; using HuggingFace's default %r", source, key, default)
            out[key] = default
    for key in hf_names.INT_KEYS:
        value = out[key]
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise ValueError("%s: %s must be a positive integer, got %r" % (source, key, value))
    for key in _FLOAT_KEYS:
        value = out[key]
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
            raise ValueError("%s: %s must be a non-negative number, got %r"
                             % (source, key, value))
        out[key] = float(value)

    act = out["hidden_act"]
    if not isinstance(act, str) or act.lower() not in _ACTIVATION_MAP:
        raise ValueError("%s: hidden_act %r is not supported (supported: %s)"
                         % (source, act, ", ".join(sorted(_ACTIVATION_MAP))))
    out["hidden_act"] = _ACTIVATION_MAP[act.lower()]
    if act.lower() != out["hidden_act"]:
        logging.info("hidden_act %r (HuggingFace) -> %r (bert_config.json)", act,
                     out["hidden_act"])

    config = modeling.BertConfig.from_dict(out)
    try:
        config.validate()
    except ValueError as e:
        raise ValueError("%s: %s" % (source, e)) from None
    return out


# ---------------------------------------------------------------------------
# Reading the weights
# ---------------------------------------------------------------------------

def _to_float32(value, path, key):
    value = np.asarray(value)
    if not np.issubdtype(value.dtype, np.floating):
        raise ValueError("%s: tensor %s has dtype %s, expected floating point"
                         % (path, key, value.dtype))
    return value.astype(np.float32)


def _read_safetensors(path):
    """{key: np.ndarray} of one .safetensors file (bfloat16 becomes float32)."""
    try:
        import safetensors
        from safetensors import safe_open
    except ImportError:
        raise ValueError("%s: reading .safetensors files needs the `safetensors` package "
                         "(pip install safetensors)" % path) from None
    format_error = getattr(safetensors, "SafetensorError", RuntimeError)
    tensors = {}
    try:
        with safe_open(path, framework="np") as f:
            keys = list(f.keys())
            bf16 = [k for k in keys if f.get_slice(k).get_dtype() == "BF16"]
            for key in keys:
                if key not in bf16:
                    tensors[key] = f.get_tensor(key)
        if bf16:
            # numpy has no bfloat16: let TensorFlow decode those tensors.
            with safe_open(path, framework="tf") as f:
                for key in bf16:
                    tensors[key] = tf.cast(f.get_tensor(key), tf.float32).numpy()
    except (format_error, OSError, RuntimeError, TypeError) as e:
        raise ValueError("cannot read safetensors file %s: %s" % (path, e)) from None
    return tensors


def _read_torch_bin(path):
    """{key: np.ndarray} of a pytorch_model.bin (read without torch: torch_pickle)."""
    def read_bytes(name):
        with tf.io.gfile.GFile(name, "rb") as f:
            return f.read()
    state = torch_pickle.load(path, read_bytes)
    if isinstance(state, dict) and "state_dict" in state and isinstance(state["state_dict"],
                                                                          dict):
        state = state["state_dict"]
    if not isinstance(state, dict):
        raise ValueError("%s does not hold a state dict (got %s)" % (path, type(state).__name__))
    tensors = {}
    for key, value in state.items():
        if not isinstance(value, np.ndarray):
            continue
        if np.issubdtype(value.dtype, np.floating):
            value = value.astype(np.float32)
        tensors[key] = value
    return tensors


def _read_sharded(index_path, read_one):
    index = read_json_object(index_path)
    weight_map = index.get("weight_map")
    if not isinstance(weight_map, dict) or not weight_map:
        raise ValueError("%s has no weight_map" % index_path)
    folder = os.path.dirname(index_path)
    tensors = {}
    for shard in sorted(set(weight_map.values())):
        shard_path = os.path.join(folder, shard)
        if not tf.io.gfile.exists(shard_path):
            raise ValueError("%s names shard %s, which does not exist" % (index_path, shard))
        tensors.update(read_one(shard_path))
    return tensors


def read_hf_weights(hf_dir):
    """(path of the weights, {key: array}) from the first weight format found in hf_dir."""
    candidates = (
        (_SAFETENSORS, _read_safetensors),
        (_SAFETENSORS_INDEX, lambda p: _read_sharded(p, _read_safetensors)),
        (_TORCH_BIN, _read_torch_bin),
        (_TORCH_BIN_INDEX, lambda p: _read_sharded(p, _read_torch_bin)),
    )
    for name, reader in candidates:
        path = os.path.join(hf_dir, name)
        if tf.io.gfile.exists(path):
            logging.info("Reading weights from %s", path)
            return path, reader(path)
    raise ValueError("%s holds no weights: expected one of %s"
                     % (hf_dir, ", ".join(name for name, _ in candidates)))


# ---------------------------------------------------------------------------
# Conversion
# ---------------------------------------------------------------------------

def convert_weights(hf_tensors, config, source="weights"):
    """HuggingFace {key: array} -> {TF1 name: float32 array}.

    Missing encoder weights and shape mismatches are ValueErrors naming `source`
    and the key; a missing pooler or missing pretraining heads and unknown keys
    are logged.
    """
    out, origin, found = _map_tensors(hf_tensors, source)
    if found["decoder_bias"] is not None:
        key, bias = found["decoder_bias"]
        if _OUTPUT_BIAS not in out:
            out[_OUTPUT_BIAS] = bias
            origin[_OUTPUT_BIAS] = key
        elif not np.array_equal(out[_OUTPUT_BIAS], bias):
            logging.warning("%s differs from cls.predictions.bias; keeping the latter (BERT's "
                            "masked-LM head has one output bias)", key)
    _check_shapes(out, origin, hf_tensors, config, source)
    if found["decoder_weight"] is not None:
        key, weight = found["decoder_weight"]
        table = out["bert/embeddings/word_embeddings"]
        if weight.shape != table.shape or not np.array_equal(weight, table):
            logging.warning("%s is not tied to the word embeddings; BERT's masked-LM head uses "
                            "the word embeddings, so it is dropped", key)
    _log_what_is_missing(out, source, found, hf_tensors)
    return out


def _map_tensors(hf_tensors, source):
    """Every tensor under its TF1 name (transposed where TF1 stores the transpose).

    Returns (out, origin: TF1 name -> HF key, found: the decoder weight and bias set
    aside, and the unknown keys and buffers).
    """
    out, origin = {}, {}
    found = {"unknown": [], "buffers": [], "decoder_weight": None, "decoder_bias": None}
    for key in sorted(hf_tensors):
        value = hf_tensors[key]
        short = strip_prefix(key)
        if short.endswith(_BUFFER_SUFFIXES):
            found["buffers"].append(key)
            continue
        if short in (_DECODER_WEIGHT, _DECODER_BIAS):
            which = "decoder_weight" if short == _DECODER_WEIGHT else "decoder_bias"
            found[which] = (key, _to_float32(value, source, key))
            continue
        target = tf1_name_for(key)
        if target is None:
            found["unknown"].append(key)
            continue
        name, transpose = target
        if name in out:
            raise ValueError("%s: %s and %s both map to %s" % (source, origin[name], key, name))
        value = _to_float32(value, source, key)
        if transpose:
            if value.ndim != 2:
                raise ValueError("%s: %s has shape %s, expected a matrix"
                                 % (source, key, list(value.shape)))
            value = value.T
        out[name] = np.ascontiguousarray(value)
        origin[name] = key
    return out, origin, found


def _check_shapes(out, origin, hf_tensors, config, source):
    """Every weight has the shape config.json implies; every encoder weight is there."""
    shapes = expected_shapes(config)
    shapes.update(hf_names.optional_shapes(config))
    for name, value in out.items():
        want = shapes.get(name)
        if want is not None and list(value.shape) != want:
            raise ValueError(
                "%s: %s has shape %s (as %s) but config.json implies %s"
                % (source, origin[name], list(hf_tensors[origin[name]].shape), name, want))
    missing = [name for name in expected_shapes(config) if name not in out]
    if missing:
        raise ValueError("%s lacks %d encoder weight(s) the config implies, e.g. %s "
                         "(is num_hidden_layers right? is this a BERT model?)"
                         % (source, len(missing),
                            ", ".join("%s (-> %s)" % (hf_key_for(n), n) for n in missing[:5])))
    layer_keys = [n for n in out if n.startswith("bert/encoder/layer_")]
    extra = sorted({int(n.split("/")[2][len("layer_"):]) for n in layer_keys}
                   - set(range(config["num_hidden_layers"])))
    if extra:
        raise ValueError("%s has weights for encoder layer(s) %s but config.json says "
                         "num_hidden_layers=%d" % (source, extra, config["num_hidden_layers"]))


def _pretraining_heads():
    """{what: TF1 names} of the pre-training heads an HF folder may carry: the registry's
    masked-LM head, and the rest of the pre-training head it is part of (next sentence)."""
    masked = head_types.find("masked_lm")
    names = [name for name, _ in masked.hf_head_keys]
    rest = [name for name, _ in head_types.find(masked.part_of[0]).hf_head_keys
            if name not in names]
    return {"masked-LM head (cls/predictions)": names,
            "next-sentence head (cls/seq_relationship)": rest}


def _log_what_is_missing(out, source, found, hf_tensors):
    """Logs the pooler and heads the weights lack, and what was skipped."""
    for name in hf_names.POOLER_NAMES:
        if name not in out:
            logging.warning("No pooler weight %s in %s: the pooler keeps its random "
                            "initialisation when loaded", name, source)
    for head, names in _pretraining_heads().items():
        have = [n for n in names if n in out]
        if not have:
            logging.info("No %s in %s (fine for fine-tuning and feature extraction)",
                         head, source)
        elif len(have) < len(names):
            logging.warning("Incomplete %s in %s: missing %s", head, source,
                            ", ".join(n for n in names if n not in out))
    if found["buffers"]:
        logging.info("Skipped %d buffer(s) that are not weights: %s", len(found["buffers"]),
                     ", ".join(found["buffers"]))
    for key in found["unknown"]:
        logging.warning("Unknown key in %s, not converted: %s %s", source, key,
                        list(np.shape(hf_tensors[key])))
    logging.info("Converted %d tensors (%d unknown keys skipped)", len(out),
                 len(found["unknown"]))


def _copy_vocab(hf_dir, output_dir, config):
    src = os.path.join(hf_dir, "vocab.txt")
    dst = os.path.join(output_dir, "vocab.txt")
    tf.io.gfile.copy(src, dst, overwrite=True)
    lines = read_vocab_tokens(src)
    if len(lines) > config["vocab_size"]:
        logging.warning("%s has %d entries but vocab_size is %d: ids past %d cannot be "
                        "embedded", src, len(lines), config["vocab_size"],
                        config["vocab_size"] - 1)
    elif len(lines) < config["vocab_size"]:
        logging.info("%s has %d entries, fewer than vocab_size %d (padded embedding table)",
                     src, len(lines), config["vocab_size"])
    return dst


def _log_casing(hf_dir):
    """tokenizer_config.json's do_lower_case (logged), None when it does not say."""
    path = os.path.join(hf_dir, "tokenizer_config.json")
    if not tf.io.gfile.exists(path):
        return None
    try:
        lower = read_json_object(path).get("do_lower_case")
    except ValueError:
        return None
    if isinstance(lower, bool):
        logging.info("tokenizer_config.json: do_lower_case=%s; pass --do_lower_case=%s to the "
                     "BERT tools", lower, lower)
        return lower
    return None


def _write_sentence_settings(hf_dir, output_dir, settings, config):
    """Records a sentence-transformers model's pooling beside the checkpoint (or nothing)."""
    if settings is None:
        return None
    if settings.get("max_seq_length", 0) > config["max_position_embeddings"]:
        raise ValueError("%s: max_seq_length %d is longer than the model's %d positions"
                         % (os.path.join(hf_dir, "sentence_bert_config.json"),
                            settings["max_seq_length"], config["max_position_embeddings"]))
    path = pooling.write_settings(output_dir, settings)
    logging.info("sentence-transformers model: wrote %s (%s); extract_features.py and "
                 "export_saved_model.py use it as their defaults", path,
                 json.dumps(settings, sort_keys=True))
    return path


def write_tf2_checkpoint(config_dict, tf1_prefix, output_dir):
    """Builds a BertModel, loads `tf1_prefix` into it and writes output_dir/bert_model."""
    config = modeling.BertConfig.from_dict(config_dict)
    model = modeling.BertModel(config)
    ids = np.zeros([1, 2], np.int32)
    model(ids, np.ones_like(ids), ids)
    result = checkpoints.load_checkpoint(model, tf1_prefix)
    if result.not_in_checkpoint:
        logging.warning("TF2 checkpoint: %d variable(s) keep their random initialisation: %s",
                        len(result.not_in_checkpoint), ", ".join(result.not_in_checkpoint))
    tf.io.gfile.makedirs(output_dir)
    prefix = tf.train.Checkpoint(model=model).write(os.path.join(output_dir, "bert_model"))
    with tf.io.gfile.GFile(os.path.join(output_dir, "checkpoint"), "w") as f:
        name = os.path.basename(prefix)
        f.write('model_checkpoint_path: "%s"\nall_model_checkpoint_paths: "%s"\n' % (name, name))
    return prefix


_TOOL = "convert_hf_checkpoint"


def convert(hf_dir, output_dir, write_tf2=False):
    """Converts `hf_dir`; returns {"checkpoint", "config", "vocab", "tf2", "names",
    "sentence_embedding" (path or None)}.

    output_dir: a new folder, or one an earlier conversion wrote (its files are replaced,
    none is left over); a folder holding such files of another origin is refused. The
    folder is built beside output_dir and renamed into place (output_folder.write_outputs_aside):
    a stop at any moment leaves the earlier conversion whole.
    """
    if not tf.io.gfile.isdir(hf_dir):
        raise ValueError("--hf_dir %s is not a directory" % hf_dir)
    config_path = os.path.join(hf_dir, "config.json")
    if not tf.io.gfile.exists(config_path):
        raise ValueError("%s not found (a HuggingFace model directory has config.json)"
                         % config_path)
    hf_config = read_json_object(config_path)
    config = convert_config(hf_config, source=config_path)
    if not tf.io.gfile.exists(os.path.join(hf_dir, "vocab.txt")):
        raise ValueError("%s not found: the WordPiece vocabulary is needed by every BERT tool"
                         % os.path.join(hf_dir, "vocab.txt"))
    sentence_settings = pooling.sentence_transformers_settings(
        hf_dir, tokenizer_lower_case=_log_casing(hf_dir))
    weights_path, hf_tensors = read_hf_weights(hf_dir)
    tensors = convert_weights(hf_tensors, config, source=weights_path)
    del hf_tensors
    task = _task_of(hf_config, config_path, hf_dir, config, tensors)

    def build(folder):
        paths = _write_folder(hf_dir, folder, config, tensors, sentence_settings, write_tf2)
        if task is not None:
            _write_task(folder, task)
        return paths

    written = output_folder.write_outputs_aside(output_dir, _TOOL, _OUTPUTS, build)
    return dict(written, names=sorted(tensors))


class _HfTask(object):
    """What a fine-tuned HuggingFace folder says of its task, kept in our model folder so
    that it goes back the same way (export_to_hf): runner ("run_classifier" or
    "run_ner"), labels (config.json's id2label in id order; None for regression),
    task_type (a classifier's), and values (model_settings.json: do_lower_case and
    max_seq_length, tokenizer_config.json's casing and model_max_length)."""

    def __init__(self, runner, labels, task_type, values):
        self.runner, self.labels, self.task_type, self.values = runner, labels, task_type, values


def _task_of(hf_config, config_path, hf_dir, config, tensors):
    """The _HfTask of a BertForSequenceClassification or BertForTokenClassification
    folder (a tagger's head renamed to tagger/ in `tensors`), None for the others (a
    pre-trained model gets no model_settings.json: its length would become the default
    of the runs that use it)."""
    architectures = hf_config.get("architectures") or [None]
    entry = head_types.of_hf_class(architectures[0])
    if entry is None or entry.label_variable is None:  # a head without a label list
        return None
    # The head's HF keys convert to hf_names' TF1 names (classifier.weight: output_weights);
    # a head whose own names differ (the tagger's tagger/...) gets its weights moved there.
    converted = {name: hf_names.tf1_name_for(key)[0] for name, key in entry.hf_head_keys}
    if converted[entry.label_variable] not in tensors:
        return None
    for name, source in converted.items():
        if source != name and source in tensors:
            tensors[name] = tensors.pop(source)
    rows = int(tensors[entry.label_variable].shape[0])
    task_type = entry.task_type_of(hf_config.get("problem_type"), rows)
    labels = (_labels_of(hf_config, rows, config_path) if classifier_tasks.has_labels(task_type)
              else None)
    values = {}
    lower = _log_casing(hf_dir)
    if lower is not None:
        values["do_lower_case"] = lower
    length = _model_max_length(hf_dir)
    if length is not None and length <= config["max_position_embeddings"]:
        values["max_seq_length"] = length
    if task_type:
        values["task_type"] = task_type
    return _HfTask(entry.runner, labels, task_type, values)


def _labels_of(hf_config, rows, source):
    """config.json's id2label as a list in id order, when it names the `rows` outputs
    0..rows-1 (else None, with a line: the export then needs --labels_file)."""
    id2label = hf_config.get("id2label")
    try:
        labels = {int(key): str(value) for key, value in (id2label or {}).items()}
    except (AttributeError, TypeError, ValueError):
        labels = {}
    if sorted(labels) != list(range(rows)) or len(set(labels.values())) != rows:
        logging.warning("%s: id2label does not name the head's %d outputs 0..%d by distinct "
                        "labels: no %s written (pass --labels_file to export it)",
                        source, rows, rows - 1, fileutil.LABEL_LIST_FILE)
        return None
    return [labels[i] for i in range(rows)]


def _model_max_length(hf_dir):
    """tokenizer_config.json's model_max_length when it is a length (transformers writes
    a huge number for "no limit"), else None."""
    path = os.path.join(hf_dir, "tokenizer_config.json")
    if not tf.io.gfile.exists(path):
        return None
    try:
        value = read_json_object(path).get("model_max_length")
    except ValueError:
        return None
    if isinstance(value, int) and not isinstance(value, bool) and 0 < value < 1 << 20:
        return value
    return None


def _write_task(output_dir, task):
    """label_list.txt, classifier_task.json (a classifier) and model_settings.json."""
    if task.labels:
        fileutil.write_label_list(os.path.join(output_dir, fileutil.LABEL_LIST_FILE),
                                  task.labels)
    if task.task_type:
        with fileutil.atomic_open(os.path.join(output_dir, classifier_tasks.TASK_FILE)) as f:
            f.write(json.dumps({"task_type": task.task_type}, indent=2) + "\n")
    model_folder.write(output_dir, task.runner, None, None, task.values)


def _write_folder(hf_dir, output_dir, config, tensors, sentence_settings, write_tf2):
    """Writes the converted folder; returns the paths convert() returns."""
    vocab_path = _copy_vocab(hf_dir, output_dir, config)
    settings_path = _write_sentence_settings(hf_dir, output_dir, sentence_settings, config)
    config_out = os.path.join(output_dir, "bert_config.json")
    with tf.io.gfile.GFile(config_out, "w") as f:
        f.write(json.dumps(config, indent=2, sort_keys=True) + "\n")
    prefix = checkpoints.write_tf1_checkpoint(tensors, os.path.join(output_dir,
                                                                    "bert_model.ckpt"))
    logging.info("Wrote %s (%d tensors), %s and %s", prefix, len(tensors), config_out,
                 vocab_path)
    tf2_prefix = None
    if write_tf2:
        tf2_prefix = write_tf2_checkpoint(config, prefix, os.path.join(output_dir, "tf2"))
        _write_sentence_settings(hf_dir, os.path.dirname(tf2_prefix), sentence_settings,
                                 config)
        logging.info("Wrote TF2 checkpoint %s", tf2_prefix)
    return {"checkpoint": prefix, "config": config_out, "vocab": vocab_path,
            "tf2": tf2_prefix, "sentence_embedding": settings_path}
