"""The export itself: build the served model of a --model_type, load its checkpoint and
save the SavedModel with its export_info.json (export_saved_model.py's machinery).

Everything here takes plain values; export_saved_model.py turns its flags into them.
"""
import contextlib
import os
import tempfile
import unicodedata

from absl import logging
import tensorflow as tf
import tf_keras

from bert_tf2.encoder import attention
from bert_tf2.export import head_refusal
from bert_tf2.export import head_types
from bert_tf2.export import saved_model_dir
from bert_tf2.export import serving
from bert_tf2.export import tokenization_graph
from bert_tf2 import heads
from bert_tf2.trainer import checkpoints
from bert_tf2.trainer import model_folder

# --serving_dtype -> the Keras policy the served model is built under.
SERVING_POLICIES = {"fp32": "float32", "bf16": "mixed_bfloat16", "fp16": "mixed_float16"}


def load_weights(model, init_checkpoint, model_type):
    """Loads `init_checkpoint` into `model`; every model variable must be found.

    A classifier or SQuAD export of a checkpoint without the task's head would serve
    random outputs, so missing variables are an error here (unlike in training).
    """
    result = checkpoints.load_checkpoint(model, init_checkpoint)
    entry = head_types.find(model_type)
    if result.not_in_checkpoint:  # the runner that makes one (the masked LM's: its part_of's)
        makers = [e.runner for e in [entry] + [head_types.find(n) for n in entry.part_of]
                  if e.runner] if entry else []
        raise head_refusal.error(model_type, init_checkpoint, result.not_in_checkpoint,
                                 "a %s model is made by %s" % (model_type, makers[0]) if makers
                                 else "use a checkpoint of a %s model" % model_type)
    if entry is None:
        checkpoints.check_serves(model, init_checkpoint)  # another head's variables
    else:  # the head's own check (an encoder is served from any task's checkpoint)
        entry.check_checkpoint(model, init_checkpoint)
    return result


def _served_model(model_type, bert_config, init_checkpoint, labels, feature_layers,
                  lstm_units, crf, crf_tag_scheme):
    """The Keras model export() saves, built under the current policy, its checkpoint
    loaded (load_weights) and its weights in the form its matmuls read
    (weights_as_served)."""
    num_labels = len(labels) if labels is not None else None
    model = serving.build_model(model_type, bert_config, num_labels,
                                feature_layers=feature_layers, lstm_units=lstm_units,
                                crf=crf, crf_penalties=heads.crf_constraints(
                                    labels, crf_tag_scheme) if crf else None)
    load_weights(model, init_checkpoint, model_type)
    weights_as_served(model)
    return model


def weights_as_served(model):
    """Gives every attention layer of `model` its query / key / value kernels side by side
    (attention.SelfAttention.store_joint_projection) and, under a mixed policy
    (--serving_dtype bf16 / fp16), every Dense layer its kernel and bias in the layer's
    compute dtype, converted once here from the loaded float32 values. Otherwise each call
    of the SavedModel would put the three kernels side by side again (MiniLM, batch 1: 1.5
    ms of a 30 ms fp32 call) and, mixed, convert the float32 variables before its matmuls
    (6 of 31 ms of op time in bf16); the matmuls get the same values either way."""
    mixed = [layer for layer in model.submodules
             if getattr(layer, "compute_dtype", None) != getattr(layer, "variable_dtype", None)]
    for layer in mixed:
        if not isinstance(layer, tf_keras.layers.Dense):
            continue
        for attr in ("kernel", "bias"):
            variable = getattr(layer, attr)
            if variable is not None:
                setattr(layer, attr, tf.Variable(
                    tf.cast(variable, layer.compute_dtype), trainable=False,
                    name=variable.name.split(":")[0]))
    for layer in model.submodules:
        if isinstance(layer, attention.SelfAttention):
            layer.store_joint_projection()


@contextlib.contextmanager
def _global_policy(name):
    """The global Keras policy `name` inside, the caller's one restored after."""
    policy = tf_keras.mixed_precision.global_policy()
    tf_keras.mixed_precision.set_global_policy(name)
    try:
        yield
    finally:
        tf_keras.mixed_precision.set_global_policy(policy)


def export(model_type, bert_config, init_checkpoint, vocab_file, do_lower_case,
           max_seq_length, export_dir, labels=None, max_query_length=64,
           max_answer_length=30, n_best_size=20, feature_layers=None, lstm_units=768,
           crf=False, crf_tag_scheme="none", pooling_spec=None, threshold=None,
           long_text_settings=None, trim_padding=None, embed_batch_size=32,
           serving_dtype="fp32", after_save=None, doc_stride=None,
           squad_rules=None, new_version=False, fill_mask_top_k=5):
    """Builds, loads and saves the serving model; returns export_dir.

    Args:
      bert_config: a modeling.BertConfig.
      labels: classifier: the task's label list ([None] for regression); tagger: the
        tag list.
      feature_layers, lstm_units: a feature-based tagger's layers and LSTM size.
      crf: a run_ner --crf tagger (Viterbi tags).
      crf_tag_scheme: its --crf_tag_scheme (iob2 or none: heads.crf_constraints).
      pooling_spec: encoder: the pooling.PoolingSpec of sentence_embedding.
      threshold: a multi-label classifier (sigmoid outputs): its --threshold.
      long_text_settings: classifier: a long_text.LongText (None: truncate).
      trim_padding, embed_batch_size, fill_mask_top_k (top_k): serving.ServingModule's.
      serving_dtype: "fp32", "bf16" or "fp16" (see the --serving_dtype flag).
      doc_stride: tagger: run_ner's --doc_stride, its windows (None: run_ner's default).
      squad_rules: squad: a serving_squad.SquadRules (None: max_query_length,
        max_answer_length, n_best_size and run_squad's other defaults).
      after_save: called as after_save(module, folder) once the SavedModel is saved in
        the temporary folder that then replaces export_dir, the serving.ServingModule
        still loaded (--litert converts it), under attention.portable_graphs as the
        SavedModel was traced; returns the names (relative to folder) of the files it
        wrote there, checked before the rename. Its failure leaves an earlier export as
        it was.
      new_version: export_dir is a new TF Serving version (refused if it exists).

    Returns:
      export_dir.
    """
    if serving_dtype not in SERVING_POLICIES:
        raise ValueError("--serving_dtype must be one of %s, got %r"
                         % (", ".join(SERVING_POLICIES), serving_dtype))
    # The policy asked for, whatever policy a run in the same process left behind
    # (--dtype=bf16 / fp16 set the global one).
    with _global_policy(SERVING_POLICIES[serving_dtype]):
        model = _served_model(model_type, bert_config, init_checkpoint, labels,
                              feature_layers, lstm_units, crf, crf_tag_scheme)
        with tempfile.TemporaryDirectory() as asset_dir:
            tokenizer = tokenization_graph.InGraphTokenizer(vocab_file, do_lower_case, asset_dir)
            if tokenizer.vocab_size > bert_config.vocab_size:
                raise ValueError("the vocabulary %s has %d entries but the model only %d "
                                 "(vocab_size in bert_config.json)"
                                 % (vocab_file, tokenizer.vocab_size, bert_config.vocab_size))
            module = serving.ServingModule(
                model_type, model, tokenizer, max_seq_length, labels=labels,
                max_query_length=max_query_length, max_answer_length=max_answer_length,
                n_best_size=n_best_size, pooling_spec=pooling_spec, threshold=threshold,
                long_text=long_text_settings, trim_padding=trim_padding,
                embed_batch_size=embed_batch_size, doc_stride=doc_stride,
                squad_rules=squad_rules, top_k=fill_mask_top_k)
            info = export_info(module, bert_config, init_checkpoint, do_lower_case,
                               serving_dtype, labels, long_text_settings)
            # The vocabulary the graph's table reads (assets/vocab.txt), for the readers of
            # the export that tokenize outside the graph (LiteRTPredictor): another file
            # there would give other ids.
            info["vocab"] = model_folder.file_checksum(os.path.join(asset_dir, "vocab.txt"))

            def before_rename(folder):
                """The files checked before the rename: the vocabulary, after_save's."""
                if after_save is None:
                    return [saved_model_dir.VOCAB_FILE]
                # LiteRT converts the graph it traces: the portable one, as the SavedModel's.
                with attention.portable_graphs():
                    written = list(after_save(module, folder) or ())
                return [saved_model_dir.VOCAB_FILE] + written

            saved_model_dir.write_saved_model(module, export_dir, info, before_rename,
                                              new_only=new_version)
    logging.info("Exported the %s model to %s", model_type, export_dir)
    return export_dir


def export_info(module, bert_config, init_checkpoint, do_lower_case, serving_dtype,
                labels=None, long_text_settings=None):
    """What assets.extra/export_info.json records of an export.

    Args:
      module: the serving.ServingModule saved (model type, lengths, pooling, threshold).
      bert_config, init_checkpoint, do_lower_case, serving_dtype, labels,
        long_text_settings: as export() took them.

    Returns:
      a JSON-ready dict.
    """
    info = {
        "model_type": module.model_type,
        "do_lower_case": bool(do_lower_case),
        "max_seq_length": module.max_seq_length,
        "bert_config": bert_config.to_dict(),
        # Its name only: the export is copied to other machines, where the training
        # folder's absolute path means nothing and tells what it should not.
        "init_checkpoint": os.path.basename(str(init_checkpoint).rstrip("/")),
        "signatures": sorted(module.signatures()),
        "unicode_version": unicodedata.unidata_version,
        "trim_padding": module.trim_padding,
        "serving_dtype": serving_dtype,
    }
    if labels is not None:
        info["labels"] = [None if label is None else str(label) for label in labels]
    if module.threshold is not None:
        info["multilabel_threshold"] = module.threshold
    if module.pooling_spec is not None:
        info["sentence_embedding"] = module.pooling_spec.to_dict()
        info["embed_batch_size"] = module.embed_batch_size
    if long_text_settings is not None:
        info["long_text"] = long_text_settings.to_dict()
    info.update(module.head.export_info(module))  # the head's own (tagger, SQuAD, fill-mask)
    return info


def output_files(export_dir):
    """{what: path} of the files an export writes in `export_dir` (a run's Result.outputs)."""
    export_dir = str(export_dir).rstrip("/")
    return {"saved_model": export_dir + "/saved_model.pb",
            "vocab": "%s/%s" % (export_dir, saved_model_dir.VOCAB_FILE),
            "export_info": "%s/%s" % (export_dir, saved_model_dir.INFO_FILE)}
