"""Converts BERT between keras-hub's preset folders and our model folders, either way.

--direction=to_keras_hub: a model folder of ours (--init_checkpoint: a training run's
--output_dir or its best/, a converted model, a Google TF1 release, a run_pretraining
checkpoint) becomes a keras-hub preset folder in --output_dir, as keras-hub's own
save_to_preset writes it (config.json, model.weights.h5, tokenizer.json,
assets/tokenizer/vocabulary.txt, metadata.json; task.json, task.weights.h5 and
preprocessor.json for a task), loaded with no code of ours by

  BertBackbone.from_preset(folder)        any encoder (the pooler included)
  BertTextClassifier.from_preset(folder)  a run_classifier folder (label_list.txt and
                                          classifier_task.json beside)
  BertMaskedLM.from_preset(folder)        a pretraining checkpoint (masked LM only)

A tagger, SQuAD or multiple-choice head has no keras-hub class and is refused.

--direction=from_keras_hub: a keras-hub BERT preset folder (--preset_dir: a backbone,
text classifier or masked LM preset) becomes bert_model.ckpt (TF1 names),
bert_config.json and vocab.txt in --output_dir, which every script of ours takes.

keras-hub (Keras 3) is imported only here, when the face runs: pip install
'bert-tf2[keras-hub]'. The machinery is bert_tf2/convert/keras_hub.py.
"""
from bert_tf2 import startup  # first, before tensorflow: a quiet C++ start-up (startup.py)

import tensorflow as tf  # noqa: F401  pylint: disable=unused-import

from bert_tf2 import cli
from bert_tf2 import settings as settings_lib
from bert_tf2.convert import keras_hub


def define_flags(fv):
    """Registers convert_keras_hub's flags on the FlagValues `fv`."""
    settings_lib.define_flag_table(fv, _FLAGS)


# (kind, name, default, help[, choices]), as settings_lib.define_flag_table reads them.
_FLAGS = (
    ("enum", "direction", "to_keras_hub",
     "to_keras_hub: --init_checkpoint (a model folder of ours) -> --output_dir (a keras-hub "
     "preset folder). from_keras_hub: --preset_dir (a keras-hub BERT preset) -> "
     "--output_dir (our checkpoint, bert_config.json, vocab.txt).",
     ("to_keras_hub", "from_keras_hub")),
    ("string", "init_checkpoint", None,
     "--direction=to_keras_hub: the model folder (or a checkpoint in one) to write as a "
     "keras-hub preset: a training run's output folder or best/, a converted model, a "
     "Google TF1 release (bert_config.json and vocab.txt beside it)."),
    ("string", "preset_dir", None,
     "--direction=from_keras_hub: a keras-hub BERT preset folder as save_to_preset writes "
     "it (config.json, model.weights.h5, tokenizer.json, assets/tokenizer/vocabulary.txt)."),
    ("string", "output_dir", None,
     "Where to write: the preset's files (to_keras_hub); bert_model.ckpt, bert_config.json "
     "and vocab.txt (from_keras_hub). New, or a folder this converter wrote before."),
    ("bool", "do_lower_case", None,
     "--direction=to_keras_hub: the model's casing, the preset tokenizer's lowercase and "
     "strip_accents (default: what the folder's model_settings.json says, else True, the "
     "reference's default; False for a cased model, e.g. a run_pretraining folder of one). "
     "A value that contradicts the folder's own record is used, with a warning line."),
)


Settings = settings_lib.settings_class(define_flags, __name__)

# Flags that only one direction reads: given with the other, a one-line error.
_ONLY = {"to_keras_hub": ("init_checkpoint", "do_lower_case"),
         "from_keras_hub": ("preset_dir",)}


@startup.keeps_process_settings
def run(settings):
    """Converts as the settings say.

    Args:
      settings: a Settings, or convert_keras_hub's parsed flags.
    Returns:
      a settings.Result: output_dir, and outputs — to_keras_hub: {file name in the
      preset: path}; from_keras_hub: {"checkpoint": the TF1 prefix, "bert_config_file",
      "vocab_file", and "labels_file" / "task_file" for a classifier that carries them}.
    """
    settings = Settings.of(settings)
    keras_hub.check_python()
    settings.refuse_other_modes("direction", _ONLY)
    if settings.direction == "to_keras_hub":
        settings.require("init_checkpoint", "output_dir")
        outputs = keras_hub.export_to_keras_hub(settings.init_checkpoint, settings.output_dir,
                                                do_lower_case=settings.do_lower_case)
        return settings_lib.Result(output_dir=settings.output_dir, outputs=outputs)
    settings.require("preset_dir", "output_dir")
    written = keras_hub.import_from_keras_hub(settings.preset_dir, settings.output_dir)
    names = {"checkpoint": "checkpoint", "config": "bert_config_file", "vocab": "vocab_file",
             "labels": "labels_file", "task": "task_file"}
    return settings_lib.Result(output_dir=settings.output_dir,
                               outputs={names[key]: path for key, path in written.items()})


def main():
    """Console entry point."""
    cli.run_cli(define_flags, run)


if __name__ == "__main__":
    main()
