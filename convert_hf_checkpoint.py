"""Converts BERT between HuggingFace's folder format and ours, either way.

--direction=from_hf (the default): a HuggingFace BERT folder (--hf_dir: config.json,
model.safetensors or pytorch_model.bin, vocab.txt) becomes, in --output_dir:
  bert_model.ckpt.{index,data-*} + checkpoint  TF1 variable names, like Google's
                                               released checkpoints;
  bert_config.json                             the reference's config keys (plus
                                               layer_norm_eps);
  vocab.txt                                    copied unchanged;
  tf2/bert_model.*  (with --write_tf2)         a tf.train.Checkpoint(model=BertModel);
  sentence_embedding.json                      only for a sentence-transformers folder
                                               (modules.json): its pooling, normalisation,
                                               max_seq_length and casing.

--direction=to_hf: a model folder of ours (--init_checkpoint: a training run's
--output_dir or its best/, a converted model, a Google TF1 release folder) becomes a
folder that transformers' Auto classes load with no code of ours: config.json (with
`architectures` for the head, the label words, `problem_type`), model.safetensors,
vocab.txt and the tokenizer files (same ids as our tokenizer, model_max_length = the
folder's max_seq_length, the folder's casing or --do_lower_case where it records none); a
sentence-embedding model also gets the sentence-transformers layout, and a --crf tagger its
transition matrix in crf_transitions.json. The head comes from what the checkpoint holds
(--model_type overrides):

  pretraining      BertForPreTraining           (masked LM + next sentence)
  classifier       BertForSequenceClassification (multi-label, regression included)
  tagger           BertForTokenClassification
  squad            BertForQuestionAnswering
  multiple_choice  BertForMultipleChoice
  encoder          BertModel (with the pooler)

The machinery is bert_tf2/convert/huggingface.py (the import; the export in hf_export.py,
names and transposes in bert_tf2/base/hf_names.py); this face keeps the flags.
"""
from bert_tf2 import startup  # first, before tensorflow: a quiet C++ start-up (startup.py)

import tensorflow as tf  # noqa: F401  pylint: disable=unused-import

from bert_tf2 import cli
from bert_tf2 import settings as settings_lib
from bert_tf2.convert import huggingface

# The converter's functions, importable from here as before.
from bert_tf2.convert.huggingface import (  # noqa: F401
    convert, convert_config, convert_weights, expected_shapes, export_to_hf, hf_key_for,
    read_hf_weights, strip_prefix, tf1_name_for, write_tf2_checkpoint)


def define_flags(fv):
    """Registers convert_hf_checkpoint's flags on the FlagValues `fv`."""
    settings_lib.define_flag_table(fv, _FLAGS)


# (kind, name, default, help[, choices]), as settings_lib.define_flag_table reads them.
_FLAGS = (
    ("enum", "direction", "from_hf",
     "from_hf: --hf_dir (a HuggingFace folder) -> --output_dir (our checkpoint, "
     "bert_config.json, vocab.txt). to_hf: --init_checkpoint (a model folder of ours) -> "
     "--output_dir (a folder transformers' Auto classes load).", ("from_hf", "to_hf")),
    ("string", "hf_dir", None,
     "--direction=from_hf: HuggingFace BERT directory: config.json, model.safetensors (or "
     "pytorch_model.bin, read without torch) and vocab.txt."),
    ("string", "output_dir", None,
     "Where to write: bert_model.ckpt, bert_config.json and vocab.txt (from_hf); "
     "config.json, model.safetensors and the tokenizer files (to_hf)."),
    ("bool", "write_tf2", False,
     "--direction=from_hf: also write a TF2 checkpoint (tf.train.Checkpoint(model="
     "BertModel)) under output_dir/tf2/."),
    ("string", "init_checkpoint", None,
     "--direction=to_hf: the model folder (or a checkpoint in one) to write in "
     "HuggingFace's format: a training run's output folder or best/, a converted "
     "model, a Google TF1 release (bert_config.json and vocab.txt beside it)."),
    ("enum", "model_type", None,
     "--direction=to_hf: the head to write (default: the one the checkpoint holds; "
     "encoder writes BertModel, whatever head the checkpoint has).", huggingface.HF_HEADS),
    ("string", "labels_file", None,
     "--direction=to_hf: the label list of a classifier or tagger whose folder has no "
     "label_list.txt (where it has one, the same labels in its order)."),
    ("bool", "do_lower_case", None,
     "--direction=to_hf: the model's casing, written into tokenizer_config.json (default: "
     "what the folder's model_settings.json says, else True, the reference's default; "
     "False for a cased model, e.g. a run_pretraining folder of one). A value that "
     "contradicts the folder's own record is used, with a warning line."),
)


Settings = settings_lib.settings_class(define_flags, __name__)

# Flags that only one direction reads: given with the other, a one-line error.
_ONLY = {"from_hf": ("hf_dir", "write_tf2"),
         "to_hf": ("init_checkpoint", "model_type", "labels_file", "do_lower_case")}


@startup.keeps_process_settings
def run(settings):
    """Converts as the settings say.

    Args:
      settings: a Settings, or convert_hf_checkpoint's parsed flags.
    Returns:
      a settings.Result: output_dir, and outputs — from_hf: {"checkpoint": the TF1
      prefix, "bert_config_file", "vocab_file", and where written "tf2_checkpoint" and
      "sentence_embedding"}; to_hf: {"config", "weights", "vocab", ... every file
      written, by what it is}.
    """
    settings = Settings.of(settings)
    settings.refuse_other_modes("direction", _ONLY)
    if settings.direction == "to_hf":
        settings.require("init_checkpoint", "output_dir")
        outputs = export_to_hf(settings.init_checkpoint, settings.output_dir,
                               model_type=settings.model_type,
                               labels_file=settings.labels_file,
                               do_lower_case=settings.do_lower_case)
        return settings_lib.Result(output_dir=settings.output_dir, outputs=outputs)
    settings.require("hf_dir", "output_dir")
    written = convert(settings.hf_dir, settings.output_dir, write_tf2=settings.write_tf2)
    outputs = {"checkpoint": written["checkpoint"], "bert_config_file": written["config"],
               "vocab_file": written["vocab"], "tf2_checkpoint": written["tf2"],
               "sentence_embedding": written["sentence_embedding"]}
    return settings_lib.Result(
        output_dir=settings.output_dir,
        outputs={key: path for key, path in outputs.items() if path is not None})


def main():
    """Console entry point."""
    cli.run_cli(define_flags, run)


if __name__ == "__main__":
    main()
