"""The names HuggingFace's BERT and ours give the same weights, and the shapes a config implies.

Both directions of convert_hf_checkpoint.py read these tables (huggingface.convert and
hf_export.export_to_hf), and so do convert/keras_hub.py and the heads' HF weights
(export/head_classes.ModelType.hf_weights): they live here, below convert/ and export/
(tests/test_layout.py FLOORS), so the heads read them without an import up to convert/.
bert_tf2.convert.hf_names gives the same names as before.
- tf1_name_for(HF key) -> (TF1 name, transpose) and hf_key_for(TF1 name) -> HF key, from
  one table. Keys are accepted with or without the `bert.` prefix HF's task models add
  (strip_prefix), and LayerNorm parameters as `weight`/`bias` or the older
  `gamma`/`beta`. A PyTorch Linear holds its matrix as [out, in] and a TF1 dense kernel
  as [in, out]: every dense kernel is transposed on the way; the output layers TF1 keeps
  as `output_weights` [units, H] (next sentence, classifier, SQuAD, tagger, multiple
  choice) are already in PyTorch's order and move as they are.
- expected_shapes(config): every encoder weight's shape; optional_shapes(config): the
  pooler's (POOLER_NAMES) and the pretraining and SQuAD heads'.
- INT_KEYS: the config.json entries that are integers in both formats.
- read_vocab_tokens(path): a vocab.txt's tokens, as tokenization.load_vocab counts them.
"""
import re

import tensorflow as tf

from bert_tf2 import fileutil

INT_KEYS = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
            "intermediate_size", "max_position_embeddings", "type_vocab_size")


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


POOLER_NAMES = ("bert/pooler/dense/kernel", "bert/pooler/dense/bias")


def optional_shapes(config):
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


def read_vocab_tokens(path):
    """The tokens of a vocab.txt as tokenization.load_vocab reads them (each line stripped;
    a last empty line is no token): the import counts them, the export writes them."""
    with tf.io.gfile.GFile(path, "rb") as f:
        lines = [line.strip() for line in fileutil.split_lines(f.read().decode("utf-8"))]
    return lines[:-1] if lines and not lines[-1] else lines
