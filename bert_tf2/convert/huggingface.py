"""HuggingFace BERT folders <-> ours: configs, parameter names, weights, whole folders.

Both directions of convert_hf_checkpoint.py live here (the face keeps its flags).

From HuggingFace (`convert`): config.json, the weights (model.safetensors, a sharded
model.safetensors.index.json, or pytorch_model.bin[.index.json], which torch_pickle reads
without torch) and vocab.txt become a TF1-named checkpoint
(bert_model.ckpt), bert_config.json and vocab.txt, plus sentence_embedding.json for a
sentence-transformers folder and, on request, a TF2 checkpoint under tf2/.

To HuggingFace (`export_to_hf`): a model folder of ours (a training run's output
folder or best/, a converted model, a Google TF1 release) becomes a folder that
transformers' Auto classes load with no code of ours; see that function.

Parameter names are accepted with or without the `bert.` prefix and with either
LayerNorm naming (`weight`/`bias` or the older `gamma`/`beta`). PyTorch linear
layers store their matrix as [out, in]; TF1 dense kernels are [in, out], so every
dense weight is transposed on the way. The output layers that TF1 keeps as
`output_weights` ([units, H]: next-sentence, classifier, SQuAD, tagger, multiple
choice) are stored as they come.

Activations: HuggingFace's "gelu" is the exact erf GELU ("gelu_exact" in
bert_config.json); its tanh approximations ("gelu_new", "gelu_pytorch_tanh",
"gelu_fast") are what the reference calls "gelu".
"""
import json
import os
import re
import tempfile

from absl import logging
import numpy as np
import tensorflow as tf

import modeling
from bert_tf2.base.json_files import read_json_object
from bert_tf2 import fileutil
from bert_tf2.convert import torch_pickle
from bert_tf2.export import head_types
from bert_tf2.tasks import classifier_tasks
from bert_tf2.tasks import long_text
from bert_tf2.tasks import ner_data
from bert_tf2.tasks import pooling
from bert_tf2.trainer import checkpoints
from bert_tf2 import heads
from bert_tf2.trainer import model_folder

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

_INT_KEYS = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
             "intermediate_size", "max_position_embeddings", "type_vocab_size")
_FLOAT_KEYS = ("hidden_dropout_prob", "attention_probs_dropout_prob", "initializer_range",
               "layer_norm_eps")

# Buffers PyTorch BERT saves next to its parameters; not weights.
_BUFFER_SUFFIXES = ("embeddings.position_ids", "embeddings.token_type_ids")

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
    for key in _INT_KEYS:
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
# Parameter names
# ---------------------------------------------------------------------------

_LAYER_RE = re.compile(r"^encoder\.layer\.(\d+)\.(.+)$")

# Scopes inside one transformer layer: HuggingFace module path -> TF1 scope.
_LAYER_SCOPES = {
    "attention.self.query": "attention/self/query",
    "attention.self.key": "attention/self/key",
    "attention.self.value": "attention/self/value",
    "attention.output.dense": "attention/output/dense",
    "attention.output.LayerNorm": "attention/output/LayerNorm",
    "intermediate.dense": "intermediate/dense",
    "output.dense": "output/dense",
    "output.LayerNorm": "output/LayerNorm",
}

# Scopes outside the layers (keys after dropping `bert.`) -> TF1 scope.
_OTHER_SCOPES = {
    "embeddings.LayerNorm": "bert/embeddings/LayerNorm",
    "pooler.dense": "bert/pooler/dense",
    "cls.predictions.transform.dense": "cls/predictions/transform/dense",
    "cls.predictions.transform.LayerNorm": "cls/predictions/transform/LayerNorm",
}

# Whole keys with a fixed TF1 name (no transpose).
_FIXED_NAMES = {
    "embeddings.word_embeddings.weight": "bert/embeddings/word_embeddings",
    "embeddings.position_embeddings.weight": "bert/embeddings/position_embeddings",
    "embeddings.token_type_embeddings.weight": "bert/embeddings/token_type_embeddings",
    "cls.predictions.bias": "cls/predictions/output_bias",
    "cls.seq_relationship.weight": "cls/seq_relationship/output_weights",
    "cls.seq_relationship.bias": "cls/seq_relationship/output_bias",
    # run_classifier's and run_squad's output layers ([units, H] in TF1 as in PyTorch).
    "classifier.weight": "output_weights",
    "classifier.bias": "output_bias",
    "qa_outputs.weight": "cls/squad/output_weights",
    "qa_outputs.bias": "cls/squad/output_bias",
}

# Handled separately: tied to other weights in both frameworks.
_DECODER_WEIGHT = "cls.predictions.decoder.weight"
_DECODER_BIAS = "cls.predictions.decoder.bias"


def strip_prefix(key):
    """Drops the `bert.` prefix HuggingFace's task models put on encoder weights."""
    return key[len("bert."):] if key.startswith("bert.") else key


def _param_name(scope, param):
    """(TF1 name, transpose) for parameter `param` of a dense or LayerNorm scope."""
    if scope.endswith("LayerNorm"):
        if param in ("weight", "gamma"):
            return scope + "/gamma", False
        if param in ("bias", "beta"):
            return scope + "/beta", False
        return None
    if param == "weight":
        return scope + "/kernel", True
    if param == "bias":
        return scope + "/bias", False
    return None


def tf1_name_for(key):
    """(TF1 name, transpose) for a HuggingFace parameter name, or None if unknown."""
    key = strip_prefix(key)
    if key in _FIXED_NAMES:
        return _FIXED_NAMES[key], False
    module, _, param = key.rpartition(".")
    match = _LAYER_RE.match(module)
    if match:
        layer, inner = match.group(1), match.group(2)
        if inner in _LAYER_SCOPES:
            scope = "bert/encoder/layer_%d/%s" % (int(layer), _LAYER_SCOPES[inner])
            return _param_name(scope, param)
        return None
    if module in _OTHER_SCOPES:
        return _param_name(_OTHER_SCOPES[module], param)
    return None


def hf_key_for(name):
    """The HuggingFace key (no `bert.` prefix, weight/bias naming) of an encoder TF1 name."""
    for key, tf1 in _FIXED_NAMES.items():
        if tf1 == name:
            return key
    scope, _, param = name.rpartition("/")
    param = {"kernel": "weight", "gamma": "weight", "beta": "bias"}.get(param, param)
    match = re.match(r"^bert/encoder/layer_(\d+)/(.+)$", scope)
    if match:
        for hf, tf1 in _LAYER_SCOPES.items():
            if tf1 == match.group(2):
                return "encoder.layer.%s.%s.%s" % (match.group(1), hf, param)
    for hf, tf1 in _OTHER_SCOPES.items():
        if tf1 == scope:
            return "%s.%s" % (hf, param)
    return name


def expected_shapes(config):
    """TF1 name -> shape of every encoder weight (embeddings, layers, pooler)."""
    h, i = config["hidden_size"], config["intermediate_size"]
    shapes = {
        "bert/embeddings/word_embeddings": [config["vocab_size"], h],
        "bert/embeddings/position_embeddings": [config["max_position_embeddings"], h],
        "bert/embeddings/token_type_embeddings": [config["type_vocab_size"], h],
        "bert/embeddings/LayerNorm/gamma": [h],
        "bert/embeddings/LayerNorm/beta": [h],
    }
    for n in range(config["num_hidden_layers"]):
        prefix = "bert/encoder/layer_%d/" % n
        for scope in ("attention/self/query", "attention/self/key", "attention/self/value",
                      "attention/output/dense"):
            shapes[prefix + scope + "/kernel"] = [h, h]
            shapes[prefix + scope + "/bias"] = [h]
        shapes[prefix + "intermediate/dense/kernel"] = [h, i]
        shapes[prefix + "intermediate/dense/bias"] = [i]
        shapes[prefix + "output/dense/kernel"] = [i, h]
        shapes[prefix + "output/dense/bias"] = [h]
        for scope in ("attention/output/LayerNorm", "output/LayerNorm"):
            shapes[prefix + scope + "/gamma"] = [h]
            shapes[prefix + scope + "/beta"] = [h]
    return shapes


_POOLER_NAMES = ("bert/pooler/dense/kernel", "bert/pooler/dense/bias")


def _optional_shapes(config):
    """TF1 name -> shape of the pooler and the pretraining/SQuAD heads."""
    h = config["hidden_size"]
    return {
        "bert/pooler/dense/kernel": [h, h],
        "bert/pooler/dense/bias": [h],
        "cls/predictions/transform/dense/kernel": [h, h],
        "cls/predictions/transform/dense/bias": [h],
        "cls/predictions/transform/LayerNorm/gamma": [h],
        "cls/predictions/transform/LayerNorm/beta": [h],
        "cls/predictions/output_bias": [config["vocab_size"]],
        "cls/seq_relationship/output_weights": [2, h],
        "cls/seq_relationship/output_bias": [2],
        "cls/squad/output_weights": [2, h],
        "cls/squad/output_bias": [2],
    }


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
        if "cls/predictions/output_bias" not in out:
            out["cls/predictions/output_bias"] = bias
            origin["cls/predictions/output_bias"] = key
        elif not np.array_equal(out["cls/predictions/output_bias"], bias):
            logging.warning("%s differs from cls.predictions.bias; keeping the latter (BERT's "
                            "masked-LM head has one output bias)", key)
    _check_shapes(out, origin, hf_tensors, config, source)
    if found["decoder_weight"] is not None:
        key, weight = found["decoder_weight"]
        table = out["bert/embeddings/word_embeddings"]
        if weight.shape != table.shape or not np.array_equal(weight, table):
            logging.warning("%s is not tied to the word embeddings; BERT's masked-LM head uses "
                            "the word embeddings, so it is dropped", key)
    _log_what_is_missing(out, config, source, found, hf_tensors)
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
    shapes.update(_optional_shapes(config))
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


def _log_what_is_missing(out, config, source, found, hf_tensors):
    """Logs the pooler and heads the weights lack, and what was skipped."""
    for name in _POOLER_NAMES:
        if name not in out:
            logging.warning("No pooler weight %s in %s: the pooler keeps its random "
                            "initialisation when loaded", name, source)
    heads = {
        "masked-LM head (cls/predictions)": [n for n in _optional_shapes(config)
                                             if n.startswith("cls/predictions/")],
        "next-sentence head (cls/seq_relationship)": [
            "cls/seq_relationship/output_weights", "cls/seq_relationship/output_bias"],
    }
    for head, names in heads.items():
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


def read_vocab_tokens(path):
    """The tokens of a vocab.txt as tokenization.load_vocab reads them (each line stripped;
    a last empty line is no token): the import counts them, the export writes them."""
    with tf.io.gfile.GFile(path, "rb") as f:
        lines = [line.strip() for line in fileutil.split_lines(f.read().decode("utf-8"))]
    return lines[:-1] if lines and not lines[-1] else lines


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
    none is left over); a folder holding such files of another origin is refused.
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

    with fileutil.owned_outputs(output_dir, _TOOL, _OUTPUTS):
        written = _write_folder(hf_dir, output_dir, config, tensors, sentence_settings,
                                write_tf2)
        if task is not None:
            _write_task(output_dir, task)
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
    head = {"BertForSequenceClassification": "classifier",
            "BertForTokenClassification": "tagger"}.get(architectures[0])
    if head is None or "output_weights" not in tensors:
        return None
    if head == "tagger":
        for name in ("output_weights", "output_bias"):
            if name in tensors:
                tensors["tagger/" + name] = tensors.pop(name)
    rows = int(tensors.get("output_weights", tensors.get("tagger/output_weights")).shape[0])
    problem = hf_config.get("problem_type")
    task_type = None
    if head == "classifier":
        task_type = ("regression" if problem == "regression" or (problem is None and rows == 1)
                     else "multilabel" if problem == "multi_label_classification"
                     else "classification")
    labels = None if task_type == "regression" else _labels_of(hf_config, rows, config_path)
    values = {}
    lower = _log_casing(hf_dir)
    if lower is not None:
        values["do_lower_case"] = lower
    length = _model_max_length(hf_dir)
    if length is not None and length <= config["max_position_embeddings"]:
        values["max_seq_length"] = length
    if task_type:
        values["task_type"] = task_type
    return _HfTask("run_classifier" if head == "classifier" else "run_ner", labels,
                   task_type, values)


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


# ---------------------------------------------------------------------------
# Ours -> HuggingFace
# ---------------------------------------------------------------------------

# The heads an export writes (convert_hf_checkpoint --model_type's order) and, from the head
# registry, the transformers class of each, its head weights (TF1 name -> HF key) beside the
# encoder's, and the heads whose class has no pooler (add_pooling_layer=False).
_HF_ORDER = ("pretraining", "classifier", "tagger", "squad", "multiple_choice", "encoder")
HF_HEADS = {name: head_types.find(name).hf_class for name in _HF_ORDER}
_HEAD_KEYS = {name: dict(head_types.find(name).hf_head_keys) for name in _HF_ORDER}
_NO_POOLER = tuple(name for name in _HF_ORDER if not head_types.find(name).hf_pooler)

# Our hidden_act -> HuggingFace's name of the same function.
_HF_ACTIVATIONS = {"gelu": "gelu_new", "gelu_exact": "gelu", "relu": "relu", "tanh": "tanh",
                   "linear": "linear"}

# What the export writes (and, on a later export into the same folder, replaces).
_HF_TOOL = "convert_hf_checkpoint --direction=to_hf"
_HF_OUTPUTS = ("config.json", "model.safetensors", "vocab.txt", "tokenizer_config.json",
               "special_tokens_map.json", "crf_transitions.json", "modules.json",
               "sentence_bert_config.json", "1_Pooling/*", "2_Normalize/*")
_SPECIAL_TOKENS = {"unk_token": "[UNK]", "sep_token": "[SEP]", "pad_token": "[PAD]",
                   "cls_token": "[CLS]", "mask_token": "[MASK]"}
CRF_FILE = "crf_transitions.json"


def head_of(names):
    """The head a checkpoint's TF1 model names hold (an HF_HEADS key)."""
    names = set(names)
    if "tagger/output_weights" in names:
        return "tagger"
    for head in ("classifier", "squad", "multiple_choice"):
        if set(_HEAD_KEYS[head]) <= names:
            return head
    if "cls/predictions/output_bias" in names and "cls/seq_relationship/output_weights" in names:
        return "pretraining"
    return "encoder"


def hf_config_of(config, head, labels=None, problem_type=None, pad_token_id=0):
    """bert_config.json dict -> HuggingFace's config.json dict for `head`."""
    act = config.get("hidden_act", "gelu")
    if not isinstance(act, str) or act.lower() not in _HF_ACTIVATIONS:
        raise ValueError("bert_config.json: hidden_act %r has no HuggingFace name (known: %s)"
                         % (act, ", ".join(sorted(_HF_ACTIVATIONS))))
    out = {"architectures": [HF_HEADS[head]], "model_type": "bert",
           "hidden_act": _HF_ACTIVATIONS[act.lower()],
           "layer_norm_eps": float(config.get("layer_norm_eps", 1e-12)),
           "position_embedding_type": "absolute", "pad_token_id": pad_token_id,
           "torch_dtype": "float32"}
    for key in _INT_KEYS:
        out[key] = int(config[key])
    for key in ("hidden_dropout_prob", "attention_probs_dropout_prob", "initializer_range"):
        out[key] = float(config[key])
    if labels is not None:
        out["id2label"] = {str(i): str(label) for i, label in enumerate(labels)}
        out["label2id"] = {str(label): i for i, label in enumerate(labels)}
    if problem_type:
        out["problem_type"] = problem_type
    return out


def hf_tensors_of(contents, config, head):
    """{HF key: float32 array} of `head`'s model from a CheckpointContents.

    ValueError naming the checkpoint when an encoder or head weight is missing or has
    another shape than the config says.
    """
    prefix = "" if head == "encoder" else "bert."
    wanted = {name: prefix + hf_key_for(name) for name in expected_shapes(config)}
    shapes = dict(expected_shapes(config))
    if head not in _NO_POOLER:
        wanted.update({name: prefix + hf_key_for(name) for name in _POOLER_NAMES})
        shapes.update({name: _optional_shapes(config)[name] for name in _POOLER_NAMES})
    wanted.update(_HEAD_KEYS[head])
    held = set(contents.model_names())
    missing = [name for name in wanted if name not in held]
    if missing:
        raise ValueError("checkpoint %s lacks %d weight(s) of the %s model (%s), e.g. %s"
                         % (contents.path, len(missing), head, HF_HEADS[head],
                            ", ".join(missing[:3])))
    shapes.update({name: s for name, s in _optional_shapes(config).items() if name in wanted})
    out = {}
    for name, key in wanted.items():
        value = np.asarray(contents.get(name), np.float32)
        if name in shapes and list(value.shape) != list(shapes[name]):
            raise ValueError("checkpoint %s: %s has shape %s, bert_config.json says %s"
                             % (contents.path, name, list(value.shape), shapes[name]))
        transpose = name.endswith("/kernel")  # TF1 dense [in, out] -> torch Linear [out, in]
        out[key] = np.ascontiguousarray(value.T if transpose else value)
    if head == "pretraining":  # the decoder's bias is the head's bias in HF's module too
        out["cls.predictions.decoder.bias"] = out["cls.predictions.bias"].copy()
    return out


def _write_safetensors(tensors, path):
    try:
        from safetensors.numpy import save_file  # pylint: disable=import-outside-toplevel
    except ImportError:
        raise ValueError("writing %s needs the safetensors package: pip install "
                         "'bert-tf2[hf]' (or pip install safetensors)" % path) from None
    save_file(tensors, path, metadata={"format": "pt"})


def _tokenizer_files(folder, vocab_lines, do_lower_case, max_seq_length):
    """tokenizer_config.json and special_tokens_map.json: transformers' BertTokenizer with
    our casing and length (its accent rule follows the casing, as the reference's)."""
    missing = [token for token in _SPECIAL_TOKENS.values() if token not in vocab_lines]
    if missing:
        raise ValueError("the vocabulary lacks %s: HuggingFace's BertTokenizer needs them"
                         % ", ".join(missing))
    tokenizer = dict(_SPECIAL_TOKENS, tokenizer_class="BertTokenizer",
                     do_lower_case=bool(do_lower_case), strip_accents=None,
                     tokenize_chinese_chars=True, model_max_length=int(max_seq_length),
                     clean_up_tokenization_spaces=False)
    _write_json(os.path.join(folder, "tokenizer_config.json"), tokenizer)
    _write_json(os.path.join(folder, "special_tokens_map.json"), dict(_SPECIAL_TOKENS))


def _write_json(path, value):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(json.dumps(value, indent=2, sort_keys=True) + "\n")


def read_model_folder(init_checkpoint):
    """(CheckpointContents, the folder's files {setting: path}, bert_config.json's dict) of
    a model folder an export reads; ValueError naming --init_checkpoint when the folder lacks
    bert_config.json or vocab.txt."""
    contents = checkpoints.CheckpointContents(init_checkpoint, "--init_checkpoint")
    found, _ = model_folder.read(init_checkpoint)
    for key, name in (("bert_config_file", "bert_config.json"), ("vocab_file", "vocab.txt")):
        if key not in found:
            raise ValueError("--init_checkpoint=%s has no %s beside it (a model folder "
                             "holds bert_config.json and vocab.txt)" % (init_checkpoint, name))
    return contents, found, read_json_object(found["bert_config_file"])


class HfExport(object):
    """What export_to_hf writes, resolved from the model folder before anything is written.

    head, config (HF's config.json), tensors ({HF key: array}), vocab_file,
    do_lower_case, max_seq_length, crf (the crf_transitions.json dict or None),
    sentence (the sentence-transformers settings or None), notes (one line each:
    what HF does differently).
    """

    def __init__(self, init_checkpoint, model_type=None, labels_file=None):
        contents, found, config = read_model_folder(init_checkpoint)
        names = contents.model_names()
        held = head_of(names)
        self.notes = []
        if any(name.startswith("bilstm_") for name in names):
            raise ValueError("--init_checkpoint=%s is a feature-based tagger (a BiLSTM over "
                             "concatenated layers), which no HuggingFace class holds: serve it "
                             "with export_saved_model.py" % init_checkpoint)
        head = model_type or held
        if head != "encoder" and head != held:
            raise ValueError("--model_type=%s: checkpoint %s holds a %s head, not a %s one"
                             % (head, contents.path, held, head))
        if model_type is None and held == "encoder":
            self.notes.append("%s holds no task head: writing the encoder (BertModel with "
                              "the pooler)" % contents.path)
        labels, problem_type = None, None
        self.crf = None
        if head == "classifier":
            labels, problem_type = self._classifier_labels(found, init_checkpoint, labels_file)
        elif head == "tagger":
            labels = self._tagger_labels(found, init_checkpoint, labels_file, contents)
        width = {"classifier": "output_weights", "tagger": "tagger/output_weights"}.get(head)
        if width and labels is not None and contents.shapes[width][0] != len(labels):
            raise ValueError("checkpoint %s: %s has %d rows but the model's label list has "
                             "%d labels" % (contents.path, width, contents.shapes[width][0],
                                            len(labels)))
        self.head = head
        self.vocab_file = found["vocab_file"]
        self.vocab = read_vocab_tokens(self.vocab_file)
        pad = self.vocab.index("[PAD]") if "[PAD]" in self.vocab else 0
        self.config = hf_config_of(config, head, labels, problem_type, pad)
        if problem_type == "regression":
            self.config["num_labels"] = 1
        if self.crf:
            self.config["bert_tf2_crf_file"] = CRF_FILE
        self.do_lower_case = found.get("do_lower_case")
        if self.do_lower_case is None:
            self.do_lower_case = True
            self.notes.append("the folder does not say its casing: lower-casing (the "
                              "reference's --do_lower_case default)")
        self.max_seq_length = int(found.get("max_seq_length") or config["max_position_embeddings"])
        self.sentence = self._sentence_settings(init_checkpoint, head)
        self.tensors = hf_tensors_of(contents, config, head)

    def _classifier_labels(self, found, init_checkpoint, labels_file):
        """(labels or None for regression, HF's problem_type) of a classifier's folder;
        refuses --long_text=windows, notes head_tail and multi-label."""
        task = _Namespace(task_name=found.get("task_name"), labels_file=labels_file,
                          xnli_language=found.get("xnli_language") or "zh",
                          init_checkpoint=init_checkpoint,
                          threshold=found.get("threshold", 0.5))
        labels, multilabel = classifier_tasks.export_task(task)
        regression = labels == [None]
        problem_type = ("regression" if regression else "multi_label_classification"
                        if multilabel else "single_label_classification")
        if regression:
            labels = None
        _, note = long_text.mode_for_door(init_checkpoint, "BertForSequenceClassification",
                                          "HuggingFace's tokenizer truncates the end of a "
                                          "long text")
        if note:
            self.notes.append(note)
        if multilabel:
            self.notes.append("multi-label: a label applies where its sigmoid is >= %s "
                              "(transformers' pipeline needs function_to_apply='sigmoid' "
                              "and that threshold)" % task.threshold)
        return labels, problem_type

    def _tagger_labels(self, found, init_checkpoint, labels_file, contents):
        """A tagger's labels (--labels_file, else its folder's); a --crf tagger's
        transitions go to self.crf."""
        path = labels_file or checkpoints.file_beside(init_checkpoint,
                                                      ner_data.LABELS_FILE_NAME)
        if not path:
            raise ValueError("--init_checkpoint=%s holds a tagger but no %s beside it: "
                             "pass --labels_file" % (init_checkpoint,
                                                     ner_data.LABELS_FILE_NAME))
        labels = ner_data.read_labels(path)
        if "crf/transitions" in contents.model_names():
            scheme = found.get("crf_tag_scheme") or "none"
            if scheme not in heads.TAG_SCHEMES[1:]:
                scheme = "none"
            self.crf = _crf_record(contents.get("crf/transitions"), labels, scheme,
                                   heads.crf_constraints(labels, scheme))
            self.notes.append("--crf tagger: transformers decodes by argmax, which can "
                              "differ from our Viterbi; %s holds the transitions"
                              % CRF_FILE)
        return labels

    def _sentence_settings(self, init_checkpoint, head):
        """The sentence_embedding.json settings when they can be written as
        sentence-transformers modules (None otherwise, with a note why not)."""
        path = checkpoints.file_beside(init_checkpoint, pooling.SETTINGS_FILE)
        if head != "encoder" or not path:
            return None
        settings = pooling.read_settings(path)
        if list(settings.get("layers", [-1])) != [-1]:
            self.notes.append("%s pools layers %s; sentence-transformers' Pooling reads the "
                              "last layer only: its modules are not written"
                              % (path, settings["layers"]))
            return None
        return settings


class _Namespace(object):
    def __init__(self, **values):
        self.__dict__.update(values)


def _crf_record(transitions, labels, scheme, penalties):
    """crf_transitions.json: the learned transitions and what our Viterbi adds to them."""
    transitions = np.asarray(transitions, np.float32)
    record = {"labels": list(labels), "tag_scheme": scheme,
              "transitions": transitions.tolist(),
              "about": "transitions[i][j]: the score of tag labels[j] after labels[i]. Our "
                       "Viterbi decodes each sentence's first word pieces with "
                       "viterbi_transitions and start_scores (the tag scheme's forbidden "
                       "moves at -10000); argmax over the logits can differ."}
    if penalties is None:
        record["viterbi_transitions"] = transitions.tolist()
        record["start_scores"] = [0.0] * len(labels)
    else:
        record["viterbi_transitions"] = (transitions + penalties[0]).tolist()
        record["start_scores"] = penalties[1].tolist()
    return record


def export_to_hf(init_checkpoint, output_dir, model_type=None, labels_file=None):
    """Writes the model folder `init_checkpoint` as a HuggingFace folder in `output_dir`.

    The head is the checkpoint's (`model_type` may ask for "encoder", or name the head
    it holds); everything is resolved and checked before a file is written.
    `output_dir` must be new or a folder this export wrote before (anything else there
    is refused, nothing changed). The new folder is built whole beside it
    (OUTPUT_DIR.tmp-XXXXXXXX) and renamed into its place (fileutil.replace_folder): a
    stop at any moment leaves the earlier export or the new one, never a mix; a kill
    between the two renames leaves the earlier one as OUTPUT_DIR.old-XXXXXXXX, which the
    next export puts back first. An `output_dir` that is a symlink has its target
    replaced, the link kept. Returns {what: path} of the files written.
    """
    export = HfExport(init_checkpoint, model_type, labels_file)
    target = _export_target(output_dir)
    fileutil.recover_folder(target)
    _refuse_other_files(target, output_dir)
    fileutil.check_outputs(target, _HF_TOOL, _HF_OUTPUTS)
    for note in export.notes:
        logging.warning("%s", note)
    parent = os.path.dirname(target)
    if parent:
        tf.io.gfile.makedirs(parent)
    temp = fileutil.temp_name(target)
    try:
        written = _build_hf_folder(export, temp)
        fileutil.record_outputs(temp, _HF_TOOL, _HF_OUTPUTS)
    except BaseException:
        fileutil.remove(temp)
        raise
    fileutil.replace_folder(temp, target)
    logging.info("Wrote %s (%s) to %s", HF_HEADS[export.head], export.head, output_dir)
    return {what: os.path.join(str(output_dir), name) for what, name in written.items()}


def _export_target(output_dir):
    """The folder the export replaces: `output_dir`, or the target of a symlink
    `output_dir` (the link kept); a link to something else than a folder is refused."""
    output_dir = str(output_dir).rstrip("/") or "/"
    if "://" in output_dir or not os.path.islink(output_dir):
        return output_dir
    target = os.path.realpath(output_dir)
    if not os.path.isdir(target):
        raise ValueError("--output_dir=%s is a symlink to %s, which is not a folder: point it "
                         "at a folder, or remove the link" % (output_dir, target))
    logging.info("--output_dir=%s is a symlink: the export replaces its target %s (the link "
                 "is kept)", output_dir, target)
    return target


def _build_hf_folder(export, folder):
    """Writes every file of `export` into the new `folder` (beside the target; on another
    file system by way of a local scratch folder); returns {what: name inside it}."""
    if "://" not in folder:
        return _write_hf_files(export, folder)
    scratch = tempfile.mkdtemp(prefix="bert_tf2_hf_")
    try:
        written = _write_hf_files(export, scratch)
        for name in written.values():
            target = os.path.join(folder, name)
            tf.io.gfile.makedirs(os.path.dirname(target))
            tf.io.gfile.copy(os.path.join(scratch, name), target, overwrite=True)
    finally:
        fileutil.remove(scratch)
    return written


def _refuse_other_files(folder, output_dir):
    """A ValueError when `folder` (--output_dir, or its target) holds anything but what an
    export writes there (a file of that name it did not write is check_outputs'
    refusal)."""
    if not tf.io.gfile.isdir(folder):
        return
    ours = {pattern.split("/")[0] for pattern in _HF_OUTPUTS} | {fileutil.OUTPUTS_RECORD}
    other = sorted(name.rstrip("/") for name in tf.io.gfile.listdir(folder)
                   if name.rstrip("/") not in ours)
    if other:
        raise ValueError("--output_dir=%s holds %s, which the HuggingFace export does not "
                         "write: choose a new or empty folder (nothing there is changed)"
                         % (output_dir, ", ".join(other[:3]) + (", ..." if len(other) > 3
                                                               else "")))


def _write_hf_files(export, folder):
    """Writes every file of `export` into `folder`; returns {what: name inside it}."""
    written = {"config": "config.json", "weights": "model.safetensors", "vocab": "vocab.txt",
               "tokenizer_config": "tokenizer_config.json",
               "special_tokens_map": "special_tokens_map.json"}
    os.makedirs(folder, exist_ok=True)
    _write_json(os.path.join(folder, "config.json"), export.config)
    with open(os.path.join(folder, "vocab.txt"), "w", encoding="utf-8") as f:
        f.write("".join(token + "\n" for token in export.vocab))
    _tokenizer_files(folder, export.vocab, export.do_lower_case, export.max_seq_length)
    if export.crf:
        _write_json(os.path.join(folder, CRF_FILE), export.crf)
        written["crf_transitions"] = CRF_FILE
    if export.sentence:
        written.update(pooling.write_sentence_transformers(
            folder, export.sentence, export.config["hidden_size"], export.max_seq_length))
    _write_safetensors(export.tensors, os.path.join(folder, "model.safetensors"))
    return written
