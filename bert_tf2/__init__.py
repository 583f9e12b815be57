"""bert-tf2's machinery, below the reference's scripts at the repository root.

Sub-packages by concern (the reference's own module names stay at the top level):
  base/         what modeling.py and optimization.py stand on (TF1 variable names, the fused update)
  text/         what tokenization.py stands on (code point tables, the tensorflow_text batch path)
  trainer/      the training loop, checkpoints and resume
  tasks/        task data importable without a runner (GLUE-style, multi-label, long documents,
                SQuAD, NER, multiple choice, sentence pooling)
  pretraining/  create_pretraining_data's corpus reader, random draws, records, shards, Beam
  optim/        optimization.py's TF2 optimizers: schedule, AdamWeightDecay, LAMB, the Keras bridge
  export/       the SavedModel module and the in-graph tokenizer
and, shared by all of them: heads (the task models on modeling's encoder), startup (import
first), fileutil (files in and out), cli (the process around a command line run),
flags_common (the flag groups of every script), loaders (the BertConfig and tokenizer a run
loads) and input_pipeline (TFRecords and tf.data).
Importing this package imports nothing else, so `from bert_tf2 import startup` stays the
cheap first import of every script.
"""
