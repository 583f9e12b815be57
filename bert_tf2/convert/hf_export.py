"""Ours -> HuggingFace: a model folder of ours as a folder transformers' Auto classes load.

convert_hf_checkpoint.py --direction=to_hf (bert_tf2/convert/huggingface.py re-exports these
names; its docstring describes the export's contract). export_to_hf(init_checkpoint,
output_dir, model_type=None, labels_file=None) -> {what: path}; HfExport resolves the head,
labels, casing, length and weights before a file is written; head_of names the head a
checkpoint holds; hf_config_of writes config.json's dict; hf_tensors_of the state dict
(dense kernels transposed back to PyTorch's [out, in]). The parameter names come from
base/hf_names, the head classes and head weights from the head registry (export/head_types.py).
"""
import json
import os
import re
import tempfile

from absl import logging
import numpy as np
import tensorflow as tf

from bert import modeling
from bert import tokenization
from bert_tf2.base.json_files import read_json_object
from bert_tf2 import fileutil
from bert_tf2 import loaders
from bert_tf2.base import hf_names
from bert_tf2.base import output_folder
from bert_tf2.export import head_types
from bert_tf2.tasks import ner_data
from bert_tf2.tasks import pooling
from bert_tf2.trainer import checkpoints
from bert_tf2.trainer import model_folder

# The heads an export writes (convert_hf_checkpoint --model_type's order, the registry's
# order, head_types.HF) and the transformers class of each (the registry's hf_class).
HF_HEADS = {name: head_types.find(name).hf_class for name in head_types.HF}

# Our hidden_act -> HuggingFace's name of the same function.
_HF_ACTIVATIONS = {"gelu": "gelu_new", "gelu_exact": "gelu", "relu": "relu", "tanh": "tanh",
                   "linear": "linear"}

# What the export writes (and, on a later export into the same folder, replaces).
_HF_TOOL = "convert_hf_checkpoint --direction=to_hf"
_HF_OUTPUTS = ("config.json", "model.safetensors", "vocab.txt", "tokenizer_config.json",
               "special_tokens_map.json", "crf_transitions.json", "modules.json",
               "sentence_bert_config.json", "1_Pooling/*", "2_Normalize/*")
# The classes whose folders transformers' fill-mask pipeline serves: [MASK] stays special.
_MASK_FILLERS = ("BertForPreTraining", "BertForMaskedLM")
_SPECIAL_TOKENS = {"unk_token": "[UNK]", "sep_token": "[SEP]", "pad_token": "[PAD]",
                   "cls_token": "[CLS]", "mask_token": "[MASK]"}
CRF_FILE = ner_data.HF_CRF_FILE


def head_of(names):
    """The head a checkpoint's TF1 model names hold (an HF_HEADS key; head_types.held_by)."""
    return head_types.held_by(names).name


def hf_config_of(config, head, labels=None, problem_type=None, pad_token_id=0):
    """bert_config.json dict -> HuggingFace's config.json dict for `head`; a key the file
    leaves out has the reference BertConfig's default (as when the model is built)."""
    if config.get("vocab_size") is None:
        raise ValueError("bert_config.json has no vocab_size (the one setting BertConfig "
                         "has no default for)")
    config = modeling.BertConfig.from_dict(config).to_dict()
    act = config.get("hidden_act", "gelu")
    if not isinstance(act, str) or act.lower() not in _HF_ACTIVATIONS:
        raise ValueError("bert_config.json: hidden_act %r has no HuggingFace name (known: %s)"
                         % (act, ", ".join(sorted(_HF_ACTIVATIONS))))
    out = {"architectures": [HF_HEADS[head]], "model_type": "bert",
           "hidden_act": _HF_ACTIVATIONS[act.lower()],
           "layer_norm_eps": float(config.get("layer_norm_eps", 1e-12)),
           "position_embedding_type": "absolute", "pad_token_id": pad_token_id,
           "torch_dtype": "float32"}
    for key in hf_names.INT_KEYS:
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
    wanted, shapes = head_types.find(head).hf_weights(config)
    held = set(contents.model_names())
    missing = [name for name in wanted if name not in held]
    if missing:
        raise ValueError("checkpoint %s lacks %d weight(s) of the %s model (%s), e.g. %s"
                         % (contents.path, len(missing), head, HF_HEADS[head],
                            ", ".join(missing[:3])))
    out = {}
    for name, key in wanted.items():
        value = np.asarray(contents.get(name), np.float32)
        if name in shapes and list(value.shape) != list(shapes[name]):
            raise ValueError("checkpoint %s: %s has shape %s, bert_config.json says %s"
                             % (contents.path, name, list(value.shape), shapes[name]))
        transpose = name.endswith("/kernel")  # TF1 dense [in, out] -> torch Linear [out, in]
        out[key] = np.ascontiguousarray(value.T if transpose else value)
    if "cls.predictions.bias" in out:  # the decoder's bias is the head's bias in HF's too
        out["cls.predictions.decoder.bias"] = out["cls.predictions.bias"].copy()
    return out


def _write_safetensors(tensors, path):
    try:
        from safetensors.numpy import save_file  # pylint: disable=import-outside-toplevel
    except ImportError:
        raise ValueError("writing %s needs the safetensors package: pip install "
                         "'bert-tf2[hf]' (or pip install safetensors)" % path) from None
    try:
        save_file(tensors, path, metadata={"format": "pt"})
    except Exception as e:  # safetensors' SafetensorError: its I/O error as the OSError it is
        number = re.search(r"\(os error (\d+)\)", str(e))
        if type(e).__name__ != "SafetensorError" or not number:
            raise
        raise OSError(int(number.group(1)), str(e), path) from None


def _tokenizer_files(folder, vocab_lines, do_lower_case, max_seq_length, head):
    """tokenizer_config.json and special_tokens_map.json: transformers' BertTokenizer with
    our casing and length (its accent rule follows the casing, as the reference's).

    Ours reads a [CLS], [SEP], [MASK] typed in a text as text; so does transformers' with
    split_special_tokens, except for a masked-LM head (_MASK_FILLERS), whose fill-mask
    pipeline finds its [MASK]s by their id, as our fill-mask finds them by their name.
    """
    missing = [token for token in _SPECIAL_TOKENS.values() if token not in vocab_lines]
    if missing:
        raise ValueError("the vocabulary lacks %s: HuggingFace's BertTokenizer needs them"
                         % ", ".join(missing))
    tokenizer = dict(_SPECIAL_TOKENS, tokenizer_class="BertTokenizer",
                     do_lower_case=bool(do_lower_case), strip_accents=None,
                     tokenize_chinese_chars=True, model_max_length=int(max_seq_length),
                     clean_up_tokenization_spaces=False,
                     split_special_tokens=HF_HEADS[head] not in _MASK_FILLERS)
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


def read_vocab(found, config):
    """The tokens of the model folder's vocab.txt (`found`: read_model_folder's); ValueError
    when it has more entries than bert_config.json's vocab_size (ids past the embeddings)."""
    vocab = hf_names.read_vocab_tokens(found["vocab_file"])
    if len(vocab) > int(config["vocab_size"]):
        raise ValueError("the vocabulary %s has %d entries but the model only %d (vocab_size "
                         "in bert_config.json)" % (found["vocab_file"], len(vocab),
                                                   int(config["vocab_size"])))
    return vocab


def export_casing(init_checkpoint, found, vocab, do_lower_case=None, notes=None):
    """The casing an export writes (HuggingFace's tokenizer_config.json, keras-hub's preset).

    The model folder's record (`found`, model_folder.read: model_settings.json or
    sentence_embedding.json) first; else `do_lower_case` (the converter's --do_lower_case);
    else the reference's default True, with a line in `notes` (longer when the vocabulary
    `vocab` looks cased: loaders.looks_cased). A `do_lower_case` that contradicts the
    record is used, with the runners' and the export's one warning line (a setting given
    wins: model_folder.warn_given_wins); a value that contradicts a Google release's
    folder name (tokenization.validate_case_matches_checkpoint) is a one-line ValueError.
    """
    recorded = found.get("do_lower_case")
    if recorded is not None:
        if do_lower_case is not None and bool(do_lower_case) != recorded:
            _, sources = model_folder.read(init_checkpoint)
            model_folder.warn_given_wins("--do_lower_case=%s" % bool(do_lower_case), recorded,
                                         sources.get("do_lower_case", init_checkpoint))
            return bool(do_lower_case)
        return recorded
    value = True if do_lower_case is None else bool(do_lower_case)
    tokenization.validate_case_matches_checkpoint(value, init_checkpoint)
    if do_lower_case is None and notes is not None:
        cased = loaders.cased_entries(vocab)
        notes.append(
            "the folder does not say its casing: lower-casing (the reference's "
            "--do_lower_case default)%s" % (
                "; its vocab.txt looks cased (%d of %d entries hold upper-case letters, e.g. "
                "%s): pass --do_lower_case=False for a cased model"
                % (len(cased), len(vocab), ", ".join(cased[:3]))
                if loaders.looks_cased(vocab) else ""))
    return value


class HfExport(object):
    """What export_to_hf writes, resolved from the model folder before anything is written.

    head, config (HF's config.json), tensors ({HF key: array}), vocab_file,
    do_lower_case, max_seq_length, crf (the crf_transitions.json dict or None),
    sentence (the sentence-transformers settings or None), notes (one line each:
    what HF does differently).
    """

    def __init__(self, init_checkpoint, model_type=None, labels_file=None, do_lower_case=None):
        asked = head_types.get(model_type, head_types.HF) if model_type else None
        contents, found, config = read_model_folder(init_checkpoint)
        names = contents.model_names()
        held = head_types.held_by(names)
        self.notes = []
        if head_types.feature_based(names):
            raise ValueError("--init_checkpoint=%s is a feature-based tagger (a BiLSTM over "
                             "concatenated layers), which no HuggingFace class holds: serve it "
                             "with export_saved_model.py" % init_checkpoint)
        entry = asked or held
        head = entry.name
        # An encoder is written from any checkpoint; a head from its own (or one holding it).
        if not entry.written_from(held):
            raise ValueError("--model_type=%s: checkpoint %s holds a %s head, not a %s one"
                             % (head, contents.path, held.name, head))
        if model_type is None and not held.hf_head_keys:
            self.notes.append("%s holds no task head: writing the encoder (BertModel with "
                              "the pooler)" % contents.path)
        labels, fields, self.crf = entry.hf_task(contents, found, init_checkpoint, labels_file,
                                                 self.notes)
        width = entry.label_variable
        if width and labels is not None and contents.shapes[width][0] != len(labels):
            raise ValueError("checkpoint %s: %s has %d rows but the model's label list has "
                             "%d labels" % (contents.path, width, contents.shapes[width][0],
                                            len(labels)))
        self.head = head
        self.vocab_file = found["vocab_file"]
        self.vocab = read_vocab(found, config)
        pad = self.vocab.index("[PAD]") if "[PAD]" in self.vocab else 0
        self.config = hf_config_of(config, head, labels, pad_token_id=pad)
        self.config.update(fields)  # the head's own: a classifier's problem_type, ...
        if self.crf:
            self.config["bert_tf2_crf_file"] = CRF_FILE
        self.do_lower_case = export_casing(init_checkpoint, found, self.vocab, do_lower_case,
                                           self.notes)
        self.max_seq_length = int(found.get("max_seq_length") or config["max_position_embeddings"])
        self.sentence = entry.hf_sentence(init_checkpoint, self.notes)
        self.tensors = hf_tensors_of(contents, config, head)


def export_to_hf(init_checkpoint, output_dir, model_type=None, labels_file=None,
                 do_lower_case=None):
    """Writes the model folder `init_checkpoint` as a HuggingFace folder in `output_dir`.

    The head is the checkpoint's (`model_type` may ask for "encoder", or name the head
    it holds); the casing the folder's (`do_lower_case` where it does not say:
    export_casing); everything is resolved and checked before a file is written.
    `output_dir` must be new or a folder this export wrote before (anything else there
    is refused, nothing changed). The new folder is built whole and put in its place by
    output_folder.write_outputs_aside (the converters' one rule: a stop at any moment
    leaves the earlier export or the new one, never a mix; a mount point filled in place;
    the folder's permissions kept). An `output_dir` that is a symlink has its target
    replaced, the link kept. Returns {what: path} of the files written.
    """
    export = HfExport(init_checkpoint, model_type, labels_file, do_lower_case)
    target = _export_target(output_dir)
    fileutil.recover_folder(target)
    _refuse_other_files(target, output_dir)
    output_folder.check_outputs(target, _HF_TOOL, _HF_OUTPUTS)
    for note in export.notes:
        logging.warning("%s", note)
    written = output_folder.write_outputs_aside(
        target, _HF_TOOL, _HF_OUTPUTS, lambda temp: _build_hf_folder(export, temp))
    logging.info("Wrote %s (%s) to %s", HF_HEADS[export.head], export.head, output_dir)
    return {what: os.path.join(str(output_dir), name) for what, name in written.items()}


def _export_target(output_dir):
    """The folder the export replaces: `output_dir`, or the target of a symlink
    `output_dir` (the link kept); a link to something else than a folder is refused."""
    target = fileutil.folder_behind_link(output_dir, "--output_dir")
    if target != (str(output_dir).rstrip("/") or "/"):
        logging.info("--output_dir=%s is a symlink: the export replaces its target %s (the "
                     "link is kept)", output_dir, target)
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
    ours = {pattern.split("/")[0] for pattern in _HF_OUTPUTS} | {output_folder.OUTPUTS_RECORD}
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
    _tokenizer_files(folder, export.vocab, export.do_lower_case, export.max_seq_length,
                     export.head)
    if export.crf:
        _write_json(os.path.join(folder, CRF_FILE), export.crf)
        written["crf_transitions"] = CRF_FILE
    if export.sentence:
        written.update(pooling.write_sentence_transformers(
            folder, export.sentence, export.config["hidden_size"], export.max_seq_length))
    _write_safetensors(export.tensors, os.path.join(folder, "model.safetensors"))
    return written
