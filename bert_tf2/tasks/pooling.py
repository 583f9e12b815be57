"""Sentence embeddings: one vector per input, pooled from BERT's per-token outputs.

`pool` is the one pooling rule of the project; extract_features (--pooling), the
exported encoder's `sentence_embedding` output and the tests all call it. Its modes
are those of sentence-transformers' Pooling module, over the real tokens of each
row (input_mask = 1: [CLS] and [SEP] count, padding does not):

  cls            the vector at position 0 ([CLS]);
  mean           the average over the real tokens;
  max            the per-dimension maximum over the real tokens;
  mean_sqrt_len  the sum over the real tokens divided by the square root of their count.

Several layers are concatenated along the hidden axis first (in the order given),
so "-1,-2,-3,-4" + cls is the paper's feature-based "concatenate the last four
layers". With `normalize`, the vector is divided by its L2 norm.

A model converted from a sentence-transformers folder carries its settings in
`sentence_embedding.json` beside the checkpoint (written by convert_hf_checkpoint.py,
read by extract_features.py and export_saved_model.py as their defaults):

  {"pooling": "mean", "normalize": true, "layers": [-1], "max_seq_length": 256,
   "do_lower_case": true}

Contracts with the other modules (bert_tf2/tasks/pooling.py):
pool(layers, input_mask, mode, normalize=False) -> [B, D] float32: the one pooling rule
(cls, mean, max, mean_sqrt_len over input_mask's tokens; a list of [B,S,H] layers is
concatenated first); used by extract_features.FeatureExtractor(pooling_spec=...),
serving.ServingModule (encoder: `sentence_embedding`, `embed`) and the tests.
PoolingSpec(mode, layers, normalize); read_settings(path) (None -> {}; the path from
checkpoints.settings_file; keys and types checked) / write_settings(folder, dict) of
`sentence_embedding.json`; sentence_transformers_settings(hf_dir, tokenizer_lower_case)
(convert_hf_checkpoint) and its inverse write_sentence_transformers(folder, settings,
hidden_size, max_seq_length) (the HF export), whose settings hf_export_settings(
init_checkpoint, notes) reads (head_classes.Encoder.hf_sentence). Python API:
extract_features.SentenceEncoder(model_dir, ...).encode(texts) -> [N, D];
extract_features.embed_features(features, extractor, batch_size) -> [N, D].
"""
import json
import os

import tensorflow as tf

from bert_tf2 import fileutil
from bert_tf2.trainer import checkpoints

POOLING_MODES = ("cls", "mean", "max", "mean_sqrt_len")
SETTINGS_FILE = "sentence_embedding.json"

# sentence-transformers' 1_Pooling/config.json keys -> our mode names.
_ST_MODES = {
    "pooling_mode_cls_token": "cls",
    "pooling_mode_mean_tokens": "mean",
    "pooling_mode_max_tokens": "max",
    "pooling_mode_mean_sqrt_len_tokens": "mean_sqrt_len",
}
_ST_TRANSFORMER = "sentence_transformers.models.Transformer"
_ST_POOLING = "sentence_transformers.models.Pooling"
_ST_NORMALIZE = "sentence_transformers.models.Normalize"


class PoolingSpec(object):
    """How to make one vector: the mode, the encoder layers (-1 = last), L2 or not."""

    def __init__(self, mode, layers=(-1,), normalize=False):
        if mode not in POOLING_MODES:
            raise ValueError("pooling mode %r is not one of %s"
                             % (mode, ", ".join(POOLING_MODES)))
        self.mode = mode
        self.layers = [int(x) for x in layers]
        self.normalize = bool(normalize)

    def to_dict(self):
        """The JSON form (export_info.json, sentence_embedding.json)."""
        return {"pooling": self.mode, "layers": list(self.layers),
                "normalize": self.normalize}

    def __repr__(self):
        return "PoolingSpec(%r, layers=%r, normalize=%r)" % (self.mode, self.layers,
                                                             self.normalize)


def pool(layers, input_mask, mode, normalize=False):
    """[B, D] float32 sentence vectors from per-token outputs (see the module docstring).

    Args:
      layers: a [B, S, H] tensor, or a list of them (concatenated: D = H x count).
      input_mask: [B, S], 1 at real tokens and 0 at padding.
      mode: one of POOLING_MODES.
      normalize: divide each vector by its L2 norm (at least 1e-12).
    """
    if isinstance(layers, (list, tuple)):
        hidden = tf.concat([tf.cast(x, tf.float32) for x in layers], axis=-1)
    else:
        hidden = tf.cast(layers, tf.float32)
    mask = tf.cast(input_mask, tf.float32)[:, :, tf.newaxis]
    if mode == "cls":
        vectors = hidden[:, 0]
    elif mode == "max":
        # Padding is pushed far below any activation so it never wins.
        vectors = tf.reduce_max(tf.where(mask > 0, hidden, -1e9), axis=1)
    elif mode in ("mean", "mean_sqrt_len"):
        total = tf.reduce_sum(hidden * mask, axis=1)
        count = tf.maximum(tf.reduce_sum(mask, axis=1), 1e-9)
        vectors = total / (count if mode == "mean" else tf.sqrt(count))
    else:
        raise ValueError("pooling mode %r is not one of %s" % (mode, ", ".join(POOLING_MODES)))
    if normalize:
        norm = tf.norm(vectors, axis=-1, keepdims=True)
        vectors = vectors / tf.maximum(norm, 1e-12)
    return vectors


def parse_layers(text, num_hidden_layers=None, flag="--layers"):
    """'-1,-2' -> [-1, -2]; with num_hidden_layers, each index must name an encoder layer."""
    try:
        indexes = [int(x) for x in str(text).split(",")]
    except ValueError:
        raise ValueError("%s must be comma-separated integers, got %r" % (flag, text)) from None
    if num_hidden_layers is not None:
        for index in indexes:
            if not -num_hidden_layers <= index < num_hidden_layers:
                raise ValueError("%s: index %d is out of range for a model with %d layers"
                                 % (flag, index, num_hidden_layers))
    return indexes


# ---------------------------------------------------------------------------
# Settings beside a checkpoint
# ---------------------------------------------------------------------------

# Keys of sentence_embedding.json and the Python types of their values.
_SETTING_TYPES = {"pooling": str, "layers": list, "normalize": bool, "max_seq_length": int,
                  "do_lower_case": bool}


def read_settings(path):
    """The dict of a sentence_embedding.json ({} for None; checkpoints.settings_file finds
    the one beside a checkpoint); ValueError naming the file and the bad setting."""
    if not path:
        return {}
    settings = fileutil.read_json(path)
    if not isinstance(settings, dict) or settings.get("pooling") not in POOLING_MODES:
        raise ValueError("%s: \"pooling\" must be one of %s" % (path, ", ".join(POOLING_MODES)))
    for key, value in sorted(settings.items()):
        kind = _SETTING_TYPES.get(key)
        if kind is None:
            raise ValueError("%s: unknown setting %r (known: %s)"
                             % (path, key, ", ".join(sorted(_SETTING_TYPES))))
        wrong = not isinstance(value, kind) or (kind is int and isinstance(value, bool)) or (
            kind is list and not all(isinstance(x, int) and not isinstance(x, bool)
                                     for x in value))
        if wrong:
            raise ValueError("%s: %s=%s is not %s" % (path, key, json.dumps(value), {
                str: "a string", list: "a list of layer indexes", bool: "true or false",
                int: "an integer"}[kind]))
    return settings


def write_settings(folder, settings):
    """Writes `settings` as folder/sentence_embedding.json; returns its path."""
    path = os.path.join(folder, SETTINGS_FILE)
    with fileutil.atomic_open(path, "w") as f:
        f.write(json.dumps(settings, indent=2, sort_keys=True) + "\n")
    return path


def hf_export_settings(init_checkpoint, notes):
    """The sentence_embedding.json beside `init_checkpoint` when a HuggingFace export can
    write it as sentence-transformers modules (the encoder's; head_classes.Encoder), else
    None: there is none, or it pools other layers than the last (a line in `notes`)."""
    path = checkpoints.file_beside(init_checkpoint, SETTINGS_FILE)
    if not path:
        return None
    settings = read_settings(path)
    if list(settings.get("layers", [-1])) != [-1]:
        notes.append("%s pools layers %s; sentence-transformers' Pooling reads the last layer "
                     "only: its modules are not written" % (path, settings["layers"]))
        return None
    return settings


def write_sentence_transformers(folder, settings, hidden_size, max_seq_length):
    """Writes the sentence-transformers modules of `settings` (a sentence_embedding.json
    dict whose layers are [-1]) into `folder`, beside a BertModel: modules.json (Transformer,
    Pooling, and Normalize when settings normalize), 1_Pooling/config.json and
    sentence_bert_config.json. The casing stays the tokenizer's (its own files).
    Returns {what: name inside folder}, the inverse of sentence_transformers_settings."""
    if list(settings.get("layers", [-1])) != [-1]:
        raise ValueError("sentence-transformers pools the last layer only, not layers %s"
                         % (settings["layers"],))
    modules = [{"idx": 0, "name": "0", "path": "", "type": _ST_TRANSFORMER},
               {"idx": 1, "name": "1", "path": "1_Pooling", "type": _ST_POOLING}]
    if settings.get("normalize"):
        modules.append({"idx": 2, "name": "2", "path": "2_Normalize", "type": _ST_NORMALIZE})
    pooling_config = {key: settings["pooling"] == mode for key, mode in _ST_MODES.items()}
    pooling_config["word_embedding_dimension"] = int(hidden_size)
    files = {"modules": ("modules.json", modules),
             "pooling_config": (os.path.join("1_Pooling", "config.json"), pooling_config),
             "sentence_bert_config": ("sentence_bert_config.json", {
                 "max_seq_length": int(settings.get("max_seq_length", max_seq_length)),
                 "do_lower_case": False})}
    for name, value in files.values():
        path = os.path.join(folder, name)
        tf.io.gfile.makedirs(os.path.dirname(path))
        with fileutil.atomic_open(path, "w") as f:
            f.write(json.dumps(value, indent=2, sort_keys=True) + "\n")
    return {what: name for what, (name, _) in files.items()}


def sentence_transformers_settings(model_dir, tokenizer_lower_case=None):
    """The settings a sentence-transformers folder defines, or None when it is not one.

    Reads modules.json (Transformer, Pooling, optional Normalize), the Pooling
    config and sentence_bert_config.json. do_lower_case is the WordPiece tokenizer's
    casing (`tokenizer_lower_case`, from tokenizer_config.json) or the
    sentence-transformers lower-casing of the text, whichever lowers. Anything else
    (a Dense layer, a pooling mode or mix of modes we do not have) is a ValueError
    naming it.
    """
    modules_path = os.path.join(model_dir, "modules.json")
    if not tf.io.gfile.exists(modules_path):
        return None
    modules = fileutil.read_json(modules_path)
    types = [m.get("type", "") if isinstance(m, dict) else "" for m in modules or []]
    if not types or types[0] != _ST_TRANSFORMER or _ST_POOLING not in types:
        raise ValueError("%s: expected a Transformer module followed by a Pooling module, "
                         "got %s" % (modules_path, ", ".join(types) or "nothing"))
    for kind in types:
        if kind not in (_ST_TRANSFORMER, _ST_POOLING, _ST_NORMALIZE):
            raise ValueError("%s: module %s is not supported (only Transformer, Pooling and "
                             "Normalize)" % (modules_path, kind))
    pooling_dir = modules[types.index(_ST_POOLING)].get("path", "1_Pooling")
    config_path = os.path.join(model_dir, pooling_dir, "config.json")
    config = fileutil.read_json(config_path)
    chosen = [key for key, value in sorted(config.items())
              if key.startswith("pooling_mode") and value is True]
    unknown = [key for key in chosen if key not in _ST_MODES]
    if unknown or len(chosen) != 1:
        raise ValueError("%s: pooling %s is not supported (one of %s)"
                         % (config_path, " + ".join(chosen) or "none",
                            ", ".join(sorted(_ST_MODES))))
    settings = {"pooling": _ST_MODES[chosen[0]], "layers": [-1],
                "normalize": _ST_NORMALIZE in types}
    bert_config_path = os.path.join(model_dir, "sentence_bert_config.json")
    if tf.io.gfile.exists(bert_config_path):
        st_config = fileutil.read_json(bert_config_path)
        if st_config.get("max_seq_length"):
            settings["max_seq_length"] = int(st_config["max_seq_length"])
        lower = bool(st_config.get("do_lower_case")) or bool(tokenizer_lower_case)
        settings["do_lower_case"] = lower
    elif tokenizer_lower_case is not None:
        settings["do_lower_case"] = bool(tokenizer_lower_case)
    return settings


def model_folder_settings(init_checkpoint, output_dir=None):
    """The sentence_embedding.json of --init_checkpoint's model ({} when none), found by
    checkpoints.settings_file.

    Its max_seq_length and do_lower_case are the defaults of those settings: pass it
    to the face's `settings.with_defaults(...)`, so values the user gave win.
    """
    return read_settings(checkpoints.settings_file(
        SETTINGS_FILE, init_checkpoint, output_dir))


def chosen_spec(chosen, saved, mode, num_hidden_layers):
    """The PoolingSpec of `mode` with the settings' layers / normalize or `saved`'s.

    `chosen`: settings with layers and normalize; `saved`: model_folder_settings().
    layers counts only when given (its default is the per-token output's); else the
    saved layers, else the last layer.
    """
    if chosen.given("layers"):
        layers = parse_layers(chosen.layers, num_hidden_layers)
    else:
        layers = parse_layers(",".join(str(x) for x in saved.get("layers", [-1])),
                              num_hidden_layers, flag="layers of %s" % SETTINGS_FILE)
    normalize = chosen.normalize if chosen.given("normalize") else saved.get("normalize", False)
    return PoolingSpec(mode, layers, normalize)
