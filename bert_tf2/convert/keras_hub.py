"""keras-hub BERT presets <-> our model folders, both ways (convert_keras_hub.py's work).

To keras-hub (`export_to_keras_hub`): a model folder of ours (a run's --output_dir or its
best/, a converted model, a Google TF1 release, a run_pretraining checkpoint) becomes a
folder that keras_hub's `from_preset` reads: an encoder as `BertBackbone`, a classifier
as `BertTextClassifier` (softmax / sigmoid / no activation for single-label, multi-label,
regression), a pretraining checkpoint as `BertMaskedLM`. keras-hub writes the files
itself (`save_to_preset`), so they are the files it reads; our `label_list.txt` and
`classifier_task.json` go beside them.

From keras-hub (`import_from_keras_hub`): a preset folder a `save_to_preset` wrote (a
backbone, a text classifier or a masked LM) becomes bert_model.ckpt (TF1 names),
bert_config.json and vocab.txt, as convert_hf_checkpoint.py --direction=from_hf writes,
and model_settings.json with the preset's casing and sequence length (a tokenizer whose
lowercase and strip_accents differ is refused: ours strips accents exactly when it
lower-cases). Both ways the folder is built aside and renamed into place.

keras-hub and Keras 3 are imported only inside these functions: the rest of bert-tf2
(tf_keras, Keras 2) never loads them. Every weight is moved as it is, only reshaped
(keras-hub's attention kernels are [hidden, heads, head size]); the one transpose is a
classifier's output layer, which TF1 stores as [labels, hidden].

What keras-hub's BERT fixes and we check: its encoder uses the tanh GELU and LayerNorm
epsilon 1e-12 (the reference's `"gelu"`); a model with another activation or epsilon
(`"gelu_exact"` after a HuggingFace conversion) is refused. Its masked-LM head uses the
exact erf GELU and epsilon 1e-5, which it does not let a preset change: the masked-LM
logits differ from ours (logged, measured in docs/keras-hub.md); the next-sentence head
has no place in BertMaskedLM and is left out.
"""
import json
import os
import sys

from absl import logging
import numpy as np
import tensorflow as tf

from bert import modeling
from bert_tf2 import fileutil
from bert_tf2.base import hf_names
from bert_tf2.base import output_folder
from bert_tf2.base.json_files import read_json_object
from bert_tf2.convert import hf_export
from bert_tf2.export import head_types
from bert_tf2.tasks import classifier_tasks
from bert_tf2.trainer import checkpoints
from bert_tf2.trainer import model_folder

EXTRA_HINT = "pip install 'bert-tf2[keras-hub]'"
MIN_PYTHON = (3, 11)  # keras-hub 0.32's requirement

# Our head (head_types.held_by) -> the keras-hub class its preset loads as (the registry's
# keras_hub_class); the backbone's is the encoder's, a task model holds one.
KERAS_HUB_CLASSES = {entry.name: entry.keras_hub_class for entry in head_types.ENTRIES
                     if entry.keras_hub_class}
_BACKBONE = "BertBackbone"

# The TF1 scopes inside bert/encoder/layer_N (the names hf_names.expected_shapes lists)
# -> the attribute path of that part in keras-hub's TransformerEncoder.
_ENCODER_LAYER_PARTS = {
    "attention/self/query": "_self_attention_layer._query_dense",
    "attention/self/key": "_self_attention_layer._key_dense",
    "attention/self/value": "_self_attention_layer._value_dense",
    "attention/output/dense": "_self_attention_layer._output_dense",
    "attention/output/LayerNorm": "_self_attention_layer_norm",
    "intermediate/dense": "_feedforward_intermediate_dense",
    "output/dense": "_feedforward_output_dense",
    "output/LayerNorm": "_feedforward_layer_norm",
}
# TF1 names outside the layers -> (keras-hub layer of the backbone, its weight).
_BACKBONE_WEIGHTS = {
    "bert/embeddings/word_embeddings": ("token_embedding", "embeddings"),
    "bert/embeddings/position_embeddings": ("position_embedding", "position_embeddings"),
    "bert/embeddings/token_type_embeddings": ("segment_embedding", "embeddings"),
    "bert/embeddings/LayerNorm/gamma": ("embeddings_layer_norm", "gamma"),
    "bert/embeddings/LayerNorm/beta": ("embeddings_layer_norm", "beta"),
    "bert/pooler/dense/kernel": ("pooled_dense", "kernel"),
    "bert/pooler/dense/bias": ("pooled_dense", "bias"),
}


def _head_weights(head):
    """{TF1 name of `head`'s weights: (attribute path in the keras-hub task, its weight)}
    (the registry's keras_hub_weights)."""
    return {name: (path, weight)
            for name, path, weight in head_types.find(head).keras_hub_weights}


def _is_backbone(head):
    """Whether `head`'s keras-hub model is the BertBackbone itself (no task around it)."""
    return KERAS_HUB_CLASSES.get(head) == _BACKBONE

# Stored [units, hidden] in TF1, [hidden, units] in Keras.
_TRANSPOSED = ("output_weights",)

_PRESET_TOOL = "convert_keras_hub --direction=to_keras_hub"
_PRESET_OUTPUTS = ("config.json", "model.weights.h5", "task.json", "task.weights.h5",
                   "tokenizer.json", "preprocessor.json", "metadata.json", "assets/*",
                   fileutil.LABEL_LIST_FILE, classifier_tasks.TASK_FILE)
_FOLDER_TOOL = "convert_keras_hub --direction=from_keras_hub"
_FOLDER_OUTPUTS = ("bert_model.ckpt.*", "checkpoint", "bert_config.json", "vocab.txt",
                   fileutil.LABEL_LIST_FILE, classifier_tasks.TASK_FILE,
                   fileutil.MODEL_SETTINGS_FILE)


def check_python(version=None):
    """A ValueError on a Python older than keras-hub needs (3.11; `version`: sys.version_info)."""
    version = tuple(version or sys.version_info)
    if version[:2] < MIN_PYTHON:
        raise ValueError("convert_keras_hub.py needs keras-hub, which needs Python %d.%d or "
                         "later (this is Python %s)" % (MIN_PYTHON + (".".join(
                             str(n) for n in version[:3]),)))


def import_keras_hub():
    """The keras_hub module; a ValueError naming the extra when it is not installed."""
    check_python()
    try:
        import keras_hub  # pylint: disable=import-outside-toplevel
    except ImportError as e:
        raise ValueError("convert_keras_hub.py needs keras-hub (%s): %s"
                         % (EXTRA_HINT, e)) from None
    return keras_hub


def _attribute(obj, path):
    for part in path.split("."):
        obj = getattr(obj, part)
    return obj


def weight_table(task, head, num_layers):
    """{TF1 name: the keras-hub variable holding it} of a keras-hub BERT model.

    `task` is the BertBackbone itself (head "encoder") or the task model around it.
    """
    backbone = task if _is_backbone(head) else task.backbone
    table = {}
    for name, (layer, weight) in _BACKBONE_WEIGHTS.items():
        table[name] = getattr(backbone.get_layer(layer), weight)
    for n in range(num_layers):
        encoder_layer = backbone.get_layer("transformer_layer_%d" % n)
        for scope, path in _ENCODER_LAYER_PARTS.items():
            part = _attribute(encoder_layer, path)
            for weight in (("gamma", "beta") if scope.endswith("LayerNorm")
                           else ("kernel", "bias")):
                table["bert/encoder/layer_%d/%s/%s" % (n, scope, weight)] = getattr(part,
                                                                                    weight)
    for name, (path, weight) in _head_weights(head).items():
        table[name] = getattr(_attribute(task, path), weight)
    return table


def tf1_names(config, head):
    """Every TF1 name a `head` model of bert_config.json dict `config` moves, in order:
    hf_names.expected_shapes' encoder names, the pooler's, then the head's."""
    names = list(hf_names.expected_shapes(config))
    names += [name for name in _BACKBONE_WEIGHTS if name not in names]
    return names + list(_head_weights(head))


def _to_keras(name, value, variable):
    value = np.asarray(value, np.float32)
    if name in _TRANSPOSED:
        value = value.T
    return value.reshape(tuple(variable.shape))


def _from_keras(name, variable, shape):
    value = np.asarray(variable.numpy(), np.float32)
    if name in _TRANSPOSED:
        return np.ascontiguousarray(value.T)
    return value.reshape(shape)


# ---------------------------------------------------------------------------
# Ours -> keras-hub
# ---------------------------------------------------------------------------

class PresetExport(object):
    """What export_to_keras_hub writes, resolved and checked before anything is written.

    head, config (bert_config.json), tensors ({TF1 name: array}), vocab (tokens),
    do_lower_case, max_seq_length, labels (a classifier's, None for regression),
    activation (a classifier's output activation), files ({name: path} of ours to copy),
    notes (one line each: what keras-hub does differently).
    """

    def __init__(self, init_checkpoint, do_lower_case=None):
        contents, found, self.config = hf_export.read_model_folder(init_checkpoint)
        names = contents.model_names()
        self.head = head_types.held_by(names).name
        if head_types.feature_based(names):
            self.head = "feature-based tagger"
        if self.head not in KERAS_HUB_CLASSES:
            raise ValueError("--init_checkpoint=%s holds a %s head, which keras-hub has no BERT "
                             "class for (it has BertBackbone, BertTextClassifier and "
                             "BertMaskedLM): serve it with export_saved_model.py"
                             % (init_checkpoint, self.head))
        self._check_numerics(found["bert_config_file"])
        self.notes = []
        entry = head_types.find(self.head)
        # The keras-hub task's own arguments (a classifier's outputs and activation).
        self.labels, self.task_arguments, self.files = entry.keras_hub_task(
            contents, found, init_checkpoint, self.notes)
        if entry.keras_hub_note:
            self.notes.append(entry.keras_hub_note)
        self.vocab = hf_export.read_vocab(found, self.config)
        self.do_lower_case = hf_export.export_casing(init_checkpoint, found, self.vocab,
                                                     do_lower_case, self.notes)
        self.max_seq_length = int(found.get("max_seq_length")
                                  or self.config["max_position_embeddings"])
        self.tensors = self._tensors(contents)

    def _check_numerics(self, config_path):
        act = self.config.get("hidden_act", "gelu")
        eps = float(self.config.get("layer_norm_eps", 1e-12))
        if act != "gelu":
            raise ValueError("%s: hidden_act %r: keras-hub's BertBackbone always uses the tanh "
                             "GELU (our \"gelu\"), so its outputs would differ from this "
                             "model's; not written" % (config_path, act))
        if eps != 1e-12:
            raise ValueError("%s: layer_norm_eps %r: keras-hub's BertBackbone always uses "
                             "1e-12; not written" % (config_path, eps))

    def _tensors(self, contents):
        shapes = dict(hf_names.expected_shapes(self.config))
        held = set(contents.model_names())
        out = {}
        for name in tf1_names(self.config, self.head):
            if name not in held:
                raise ValueError("checkpoint %s lacks %s, a weight of keras-hub's %s"
                                 % (contents.path, name, KERAS_HUB_CLASSES[self.head]))
            value = np.asarray(contents.get(name), np.float32)
            if name in shapes and list(value.shape) != list(shapes[name]):
                raise ValueError("checkpoint %s: %s has shape %s, bert_config.json says %s"
                                 % (contents.path, name, list(value.shape), shapes[name]))
            out[name] = value
        if self.labels is not None and out["output_weights"].shape[0] != len(self.labels):
            raise ValueError("checkpoint %s: output_weights has %d rows but the model's label "
                             "list has %d labels" % (contents.path,
                                                     out["output_weights"].shape[0],
                                                     len(self.labels)))
        return out


def backbone_config(config):
    """bert_config.json dict -> BertBackbone's constructor arguments."""
    return {"vocabulary_size": int(config["vocab_size"]),
            "num_layers": int(config["num_hidden_layers"]),
            "num_heads": int(config["num_attention_heads"]),
            "hidden_dim": int(config["hidden_size"]),
            "intermediate_dim": int(config["intermediate_size"]),
            "dropout": float(config.get("hidden_dropout_prob", 0.1)),
            "max_sequence_length": int(config["max_position_embeddings"]),
            "num_segments": int(config["type_vocab_size"])}


def build_keras_hub_model(export):
    """The keras-hub model of a PresetExport, its weights set from ours."""
    keras_hub = import_keras_hub()
    models = keras_hub.models
    backbone = models.BertBackbone(**backbone_config(export.config))
    # The reference strips accents exactly when it lower-cases; keras-hub's WordPiece
    # tokenizer keeps them unless told (strip_accents is saved in tokenizer.json).
    tokenizer = models.BertTokenizer(vocabulary=list(export.vocab),
                                     lowercase=bool(export.do_lower_case),
                                     strip_accents=bool(export.do_lower_case))
    model = backbone
    if not _is_backbone(export.head):
        # The task class and its preprocessor (keras-hub names them <class>Preprocessor).
        name = KERAS_HUB_CLASSES[export.head]
        preprocessor = getattr(models, name + "Preprocessor")(
            tokenizer, sequence_length=export.max_seq_length)
        model = getattr(models, name)(backbone, preprocessor=preprocessor,
                                      **export.task_arguments)
    table = weight_table(model, export.head, int(export.config["num_hidden_layers"]))
    for name, variable in table.items():
        variable.assign(_to_keras(name, export.tensors[name], variable))
    return model, tokenizer


def export_to_keras_hub(init_checkpoint, output_dir, do_lower_case=None):
    """Writes the model folder `init_checkpoint` as a keras-hub preset in `output_dir`.

    The casing is the folder's (`do_lower_case` where it does not say:
    hf_export.export_casing). Everything is resolved and checked first; keras-hub's save_to_preset writes the
    preset into a folder beside `output_dir`, renamed into place once whole
    (output_folder.write_outputs_aside). `output_dir` must be new or a folder this export
    wrote before. Returns {file name: path} of the files written.
    """
    export = PresetExport(init_checkpoint, do_lower_case)
    _refuse_other_files(output_dir, _PRESET_OUTPUTS, "keras-hub export")
    for note in export.notes:
        logging.warning("%s", note)
    model, tokenizer = build_keras_hub_model(export)

    def build(folder):
        model.save_to_preset(folder)
        if _is_backbone(export.head):
            tokenizer.save_to_preset(folder)
        for name, path in export.files.items():
            tf.io.gfile.copy(path, os.path.join(folder, name), overwrite=True)
        return {name: os.path.join(folder, name) for name in _files_of(folder)}

    outputs = output_folder.write_outputs_aside(output_dir, _PRESET_TOOL, _PRESET_OUTPUTS, build)
    outputs.pop(output_folder.OUTPUTS_RECORD, None)
    logging.info("Wrote a keras-hub %s preset (%s) to %s", KERAS_HUB_CLASSES[export.head],
                 export.head, output_dir)
    return outputs


def _files_of(folder):
    out = []
    for root, _, files in os.walk(folder):
        out += [os.path.relpath(os.path.join(root, name), folder) for name in files]
    return sorted(out)


def _refuse_other_files(output_dir, patterns, what):
    """A ValueError when `output_dir` holds anything the conversion does not write."""
    if not tf.io.gfile.isdir(output_dir):
        return
    ours = {pattern.split("/")[0] for pattern in patterns} | {output_folder.OUTPUTS_RECORD}
    other = sorted(name.rstrip("/") for name in tf.io.gfile.listdir(output_dir)
                   if name.rstrip("/") not in ours and not name.startswith("bert_model.ckpt."))
    if other:
        raise ValueError("--output_dir=%s holds %s, which the %s does not write: choose a "
                         "new or empty folder (nothing there is changed)"
                         % (output_dir, ", ".join(other[:3]) + (", ..." if len(other) > 3
                                                               else ""), what))


# ---------------------------------------------------------------------------
# keras-hub -> ours
# ---------------------------------------------------------------------------

def _preset_json(preset_dir, name, required=True):
    path = os.path.join(preset_dir, name)
    if not tf.io.gfile.exists(path):
        if required:
            raise ValueError("--preset_dir=%s has no %s (a keras-hub preset folder holds "
                             "config.json, model.weights.h5 and tokenizer.json)"
                             % (preset_dir, name))
        return None
    return read_json_object(path)


def _class_name(record, path):
    name = record.get("class_name") if isinstance(record, dict) else None
    if not isinstance(name, str):
        raise ValueError("%s: no class_name" % path)
    return name


def read_preset(preset_dir):
    """(head, bert_config.json dict, vocab tokens, lowercase) of a keras-hub BERT preset;
    a ValueError naming the file for anything else."""
    if not tf.io.gfile.isdir(preset_dir):
        raise ValueError("--preset_dir=%s is not a directory" % preset_dir)
    config_path = os.path.join(preset_dir, "config.json")
    record = _preset_json(preset_dir, "config.json")
    if _class_name(record, config_path) != "BertBackbone":
        raise ValueError("%s: class_name %r; only keras-hub's BertBackbone (a BERT preset) is "
                         "converted" % (config_path, record.get("class_name")))
    task = _preset_json(preset_dir, "task.json", required=False)
    head = "encoder"
    if task is not None:
        task_class = _class_name(task, os.path.join(preset_dir, "task.json"))
        heads = {cls: head for head, cls in KERAS_HUB_CLASSES.items()}
        if task_class not in heads or task_class == "BertBackbone":
            raise ValueError("%s: class_name %r has no model of ours (converted: %s)"
                             % (os.path.join(preset_dir, "task.json"), task_class,
                                ", ".join(sorted(KERAS_HUB_CLASSES.values()))))
        head = heads[task_class]
    values = record.get("config") or {}
    try:
        config = {"vocab_size": int(values["vocabulary_size"]),
                  "hidden_size": int(values["hidden_dim"]),
                  "num_hidden_layers": int(values["num_layers"]),
                  "num_attention_heads": int(values["num_heads"]),
                  "intermediate_size": int(values["intermediate_dim"]),
                  "hidden_act": "gelu",
                  "hidden_dropout_prob": float(values.get("dropout", 0.1)),
                  "attention_probs_dropout_prob": float(values.get("dropout", 0.1)),
                  "max_position_embeddings": int(values["max_sequence_length"]),
                  "type_vocab_size": int(values.get("num_segments", 2)),
                  "initializer_range": 0.02,
                  "layer_norm_eps": 1e-12}
    except (KeyError, TypeError, ValueError) as e:
        raise ValueError("%s: the BertBackbone config lacks or mistypes %s"
                         % (config_path, e)) from None
    try:
        modeling.BertConfig.from_dict(config).validate()
    except ValueError as e:
        raise ValueError("%s: %s" % (config_path, e)) from None
    vocab_path = os.path.join(preset_dir, "assets", "tokenizer", "vocabulary.txt")
    if not tf.io.gfile.exists(vocab_path):
        raise ValueError("%s not found: the preset's WordPiece vocabulary" % vocab_path)
    return (head, config, hf_names.read_vocab_tokens(vocab_path),
            preset_preprocessing(preset_dir, config))


def preset_preprocessing(preset_dir, config):
    """{"do_lower_case", "max_seq_length"} of a preset's tokenizer.json and
    preprocessor.json (each left out where the preset does not say it); a ValueError when
    the tokenizer's casing and accents are a pair our tokenizer (the reference's) cannot
    follow: it strips accents exactly when it lower-cases, keras-hub sets both apart."""
    out = {}
    tokenizer_path = os.path.join(preset_dir, "tokenizer.json")
    tokenizer = (_preset_json(preset_dir, "tokenizer.json", required=False) or {})
    values = tokenizer.get("config") if isinstance(tokenizer.get("config"), dict) else {}
    if "lowercase" in values:
        lowercase = bool(values["lowercase"])
        strip_accents = bool(values.get("strip_accents", False))  # keras-hub's default
        if strip_accents != lowercase:
            raise ValueError(
                "%s: lowercase %s with strip_accents %s, which bert-tf2's tokenizer (the "
                "reference's) cannot follow: it strips accents exactly when it lower-cases, so "
                "texts with accents would get other token ids; set \"strip_accents\": %s there "
                "to accept that, then convert again" % (
                    tokenizer_path, json.dumps(lowercase), json.dumps(strip_accents),
                    json.dumps(lowercase)))
        out["do_lower_case"] = lowercase
    else:
        logging.warning("%s does not say the tokenizer's casing: later runs take "
                        "--do_lower_case as given (the reference's default: True)",
                        tokenizer_path)
    preprocessor = _preset_json(preset_dir, "preprocessor.json", required=False) or {}
    values = preprocessor.get("config") if isinstance(preprocessor.get("config"), dict) else {}
    length = values.get("sequence_length")
    if isinstance(length, int) and not isinstance(length, bool) and \
            0 < length <= config["max_position_embeddings"]:
        out["max_seq_length"] = length
    return out


def load_preset_tensors(preset_dir, head, config):
    """{TF1 name: float32 array} of the preset's weights, loaded by keras-hub."""
    keras_hub = import_keras_hub()
    cls = getattr(keras_hub.models, KERAS_HUB_CLASSES[head])
    if _is_backbone(head):
        model = cls.from_preset(preset_dir)
    else:
        model = cls.from_preset(preset_dir, preprocessor=None)
    table = weight_table(model, head, config["num_hidden_layers"])
    shapes = dict(hf_names.expected_shapes(config))
    h = config["hidden_size"]
    shapes.update({"bert/pooler/dense/kernel": [h, h], "bert/pooler/dense/bias": [h]})
    out = {}
    for name, variable in table.items():
        shape = shapes.get(name, [int(d) for d in variable.shape])
        if name in _TRANSPOSED:
            shape = shape[::-1]
        out[name] = _from_keras(name, variable, shape)
    return out


def import_from_keras_hub(preset_dir, output_dir):
    """Converts the keras-hub preset `preset_dir` into a model folder of ours in
    `output_dir`; returns {"checkpoint", "config", "vocab", and "labels"/"task" when
    the preset carries them}."""
    head, config, vocab, preprocessing = read_preset(preset_dir)
    if len(vocab) != config["vocab_size"]:
        logging.warning("%s: %d tokens for vocabulary_size %d", preset_dir, len(vocab),
                        config["vocab_size"])
    _refuse_other_files(output_dir, _FOLDER_OUTPUTS, "keras-hub import")
    tensors = load_preset_tensors(preset_dir, head, config)
    entry = head_types.find(head)
    files = entry.keras_hub_files(preset_dir, output_dir, tensors)  # a classifier's labels

    def build(folder):
        with tf.io.gfile.GFile(os.path.join(folder, "bert_config.json"), "w") as f:
            f.write(json.dumps(config, indent=2, sort_keys=True) + "\n")
        with tf.io.gfile.GFile(os.path.join(folder, "vocab.txt"), "w") as f:
            f.write("".join(token + "\n" for token in vocab))
        for name, path in files.items():
            tf.io.gfile.copy(path, os.path.join(folder, name), overwrite=True)
        if preprocessing:
            # After vocab.txt and label_list.txt: model_settings.json records their checksums.
            model_folder.write(folder, head_types.folder_runner(entry), None, None,
                               preprocessing)
        checkpoints.write_tf1_checkpoint(tensors, os.path.join(folder, "bert_model.ckpt"))
        return {name: os.path.join(folder, name) for name in _files_of(folder)}

    written = output_folder.write_outputs_aside(output_dir, _FOLDER_TOOL, _FOLDER_OUTPUTS, build)
    outputs = {"checkpoint": os.path.join(output_dir, "bert_model.ckpt"),
               "config": written["bert_config.json"], "vocab": written["vocab.txt"]}
    for key, name in (("labels", fileutil.LABEL_LIST_FILE), ("task", classifier_tasks.TASK_FILE)):
        if name in written:
            outputs[key] = written[name]
    logging.info("Wrote %s (%s, %d tensors) to %s", outputs["checkpoint"], head, len(tensors),
                 output_dir)
    return outputs
