"""Masked-LM + next-sentence pretraining and evaluation (the reference's run_pretraining.py).

Reads the TFRecords of create_pretraining_data.py, trains BERT with the
reference's loss and optimizer under any tf.distribute strategy, and writes
output_dir/eval_results.txt with the reference's keys.

With --packed_sequences it reads the packed rows of create_pretraining_data.py
--pack_sequences (several instances per row, each attending only to itself):
the masked-LM loss is the reference's formula over the same masked tokens, and
the next-sentence loss and accuracy are means over the real instances
(next_sentence_weights), so a packed batch scores what its instances would
unpacked.
"""
from bert_tf2 import startup  # first, before tensorflow: a quiet C++ start-up (startup.py)
import os

import numpy as np
import tensorflow as tf
from absl import flags
from absl import logging

import modeling
from bert_tf2.base import path_match
from bert_tf2.base import tf1_variables
from bert_tf2 import fileutil
from bert_tf2 import flags_common
from bert_tf2 import cli
from bert_tf2 import heads
from bert_tf2 import loaders
from bert_tf2 import input_pipeline
from bert_tf2 import settings as settings_lib
from bert_tf2.pretraining import pretraining_records
from bert_tf2.trainer import model_folder
from bert_tf2.trainer import training
from bert_tf2.trainer import training_record


def define_flags(fv):
    """Registers run_pretraining's flags (the reference's, plus the TF2 ones) on `fv`."""
    flags.DEFINE_string("input_file", None,
                        "Input TF example files (can be a glob or comma separated).",
                        flag_values=fv)
    flags.DEFINE_string("output_dir", None,
                        "The output directory where the model checkpoints will be written.",
                        flag_values=fv)
    flags_common.define_model_flags(
        fv, ("bert_config_file", "init_checkpoint", "max_seq_length"), help_overrides={
            "max_seq_length": "Sequence length of the pretraining records; must match the data."})
    flags.DEFINE_integer("max_predictions_per_seq", 20,
                         "Maximum number of masked LM predictions per sequence; must match "
                         "the data.", flag_values=fv)
    flags.DEFINE_bool("do_train", False, "Whether to run training.", flag_values=fv)
    flags.DEFINE_bool("do_eval", False, "Whether to run eval on the dev set.", flag_values=fv)
    flags.DEFINE_integer("train_batch_size", 32, "Total batch size for training.",
                         flag_values=fv)
    flags.DEFINE_integer("eval_batch_size", 8, "Total batch size for eval.", flag_values=fv)
    flags.DEFINE_float("learning_rate", 5e-5, "The initial learning rate for Adam.",
                       flag_values=fv)
    flags.DEFINE_integer("num_train_steps", 100000, "Number of training steps.",
                         flag_values=fv)
    flags.DEFINE_integer("num_warmup_steps", 10000, "Number of warmup steps.", flag_values=fv)
    flags.DEFINE_integer("max_eval_steps", 100, "Maximum number of eval steps.",
                         flag_values=fv)
    flags.DEFINE_bool("packed_sequences", False,
                      "The input records are packed rows (create_pretraining_data.py "
                      "--pack_sequences): several instances per row, with position_ids, "
                      "instance_ids and next_sentence_positions/weights. The instances "
                      "per row are read from the records.", flag_values=fv)
    flags_common.define_training_flags(fv)


# One field per flag above: run(Settings(input_file=..., do_eval=True, ...)) from Python.
Settings = settings_lib.settings_class(define_flags, __name__)
# The task settings this runner's model folders keep beside do_lower_case and
# max_seq_length (model_folder.task_settings reads them from this file).
FOLDER_SETTINGS = ("max_predictions_per_seq",)


# ---------------------------------------------------------------------------
# Data
# ---------------------------------------------------------------------------

def feature_spec(settings, max_instances_per_row=None):
    """The records' feature spec: the reference's, or packed rows' with --packed_sequences.

    settings: a Settings (or a part of one) with packed_sequences, max_seq_length and
      max_predictions_per_seq.
    max_instances_per_row: instances per packed row (needed with --packed_sequences).
    """
    if not settings.packed_sequences:
        return input_pipeline.pretraining_features(settings.max_seq_length,
                                                   settings.max_predictions_per_seq)
    return pretraining_records.packed_features(settings.max_seq_length,
                                               settings.max_predictions_per_seq,
                                               max_instances_per_row)


def dataset_fn_for(settings, input_files, is_training, spec=None, trim_padding=False):
    """dataset_fn over the pretraining records (repeated: both loops run a set number of steps).

    settings: a Settings (or a part of one) with the batch sizes, the seed and, without
      `spec`, what feature_spec reads.
    spec: the records' feature spec (default: the reference's, feature_spec(settings)).
    trim_padding: each batch cut to its longest row (the masked positions lie in the
    real tokens, so the losses do not change); no length buckets (the metrics do
    not depend on the order).
    """
    spec = spec or feature_spec(settings)
    batch_size = settings.train_batch_size if is_training else settings.eval_batch_size

    def dataset_fn(input_context=None):
        # Evaluation repeats the files, as the reference does, because it runs a
        # fixed number of steps (max_eval_steps).
        return input_pipeline.make_dataset(input_files, spec, batch_size, is_training,
                                           input_context=input_context, repeat=True,
                                           seed=settings.seed, trim=trim_padding)
    return dataset_fn


def input_fn_builder(input_files, max_seq_length, max_predictions_per_seq, is_training,
                     num_cpu_threads=4):
    """The reference's input_fn(params) over create_pretraining_data's records.

    Batches of params["batch_size"] (the remainder dropped) of the reference's
    features, int64 read as int32; training shuffles the files, reads up to
    num_cpu_threads of them at once and shuffles the records; evaluation reads the
    files in order. Both repeat forever (the reference's loops run set steps).
    """
    def input_fn(params):
        return input_pipeline.make_dataset(
            input_files, input_pipeline.pretraining_features(max_seq_length,
                                                             max_predictions_per_seq),
            params["batch_size"], is_training, repeat=True, num_cpu_threads=num_cpu_threads)
    return input_fn


def _decode_record(record, name_to_features):
    """The reference's record decoder (its name and arguments): a dict, int64 as int32."""
    return input_pipeline.decode_record(record, name_to_features)


# ---------------------------------------------------------------------------
# The reference's graph-style heads (code written against its run_pretraining)
# ---------------------------------------------------------------------------
gather_indexes = modeling.gather_indexes


def get_masked_lm_output(bert_config, input_tensor, output_weights, positions, label_ids,
                         label_weights):
    """Masked-LM head and loss at `positions` [B, P] of input_tensor [B, S, H], the
    output layer tied to output_weights [V, H]: (loss, per-position loss [B * P],
    log_probs [B * P, V]); variables `cls/predictions/...`."""
    with tf1_variables.tf1_variable_scope("cls"):
        logits = heads.MaskedLMHead(bert_config)(
            modeling.gather_indexes(input_tensor, positions), output_weights)
    log_probs = tf.nn.log_softmax(logits, axis=-1)
    loss, per_example_loss = heads.masked_lm_loss(
        log_probs, tf.reshape(label_ids, [-1]), tf.reshape(label_weights, [-1]))
    return loss, per_example_loss, log_probs


def get_next_sentence_output(bert_config, input_tensor, labels):
    """Next-sentence head and loss on the pooled output [B, H]: (loss, per-example
    loss [B], log_probs [B, 2]); variables `cls/seq_relationship/...`."""
    with tf1_variables.tf1_variable_scope("cls"):
        logits = heads.OutputProjection(2, bert_config.initializer_range,
                                        "seq_relationship")(input_tensor)
    log_probs = tf.nn.log_softmax(logits, axis=-1)
    loss, per_example_loss = heads.next_sentence_loss(log_probs, labels)
    return loss, per_example_loss, log_probs


def pretraining_loss(model, features, is_training):
    """The reference's loss (masked-LM + next sentence) and accuracies.

    The masked-LM loss is normalised by the sum of masked_lm_weights over the
    GLOBAL batch, so that any number of replicas gives the one-device value.
    """
    out = model(features, training=is_training)
    # From the logits: the same loss as masked_lm_loss(masked_lm_log_probs, ...)
    # to float32 rounding, with a fused kernel for the [B, P, V] softmax part.
    logits = out["masked_lm_logits"]
    weights = tf.cast(features["masked_lm_weights"], tf.float32)
    _, mlm_per_example = heads.masked_lm_loss_from_logits(
        logits, features["masked_lm_ids"], weights)
    denominator = training.global_sum(tf.reduce_sum(weights)) + 1e-5
    mlm_loss = tf.reduce_sum(weights * mlm_per_example) / denominator * training.num_replicas()
    if "next_sentence_weights" in features:
        nsp_loss, nsp_accuracy = _packed_next_sentence(out, features)
    else:
        nsp_loss, _ = heads.next_sentence_loss(out["next_sentence_log_probs"],
                                                  features["next_sentence_labels"])
        nsp_correct = tf.cast(tf.equal(
            tf.argmax(out["next_sentence_log_probs"], -1, output_type=tf.int32),
            tf.reshape(features["next_sentence_labels"], [-1])), tf.float32)
        nsp_accuracy = tf.reduce_mean(nsp_correct)
    mlm_correct = tf.cast(tf.equal(tf.argmax(logits, -1, output_type=tf.int32),
                                   features["masked_lm_ids"]), tf.float32)
    metrics = {
        "masked_lm_loss": mlm_loss,
        "next_sentence_loss": nsp_loss,
        "masked_lm_accuracy": tf.reduce_sum(mlm_correct * weights) / (tf.reduce_sum(weights)
                                                                      + 1e-5),
        "next_sentence_accuracy": nsp_accuracy,
    }
    return mlm_loss + nsp_loss, metrics


def _packed_next_sentence(out, features):
    """(loss, accuracy) of the next-sentence task on packed rows: weighted instance means.

    The loss is sum(w * nll) over the GLOBAL batch's instances / their number
    (like the masked-LM loss, any number of replicas gives the one-device value).
    """
    log_probs = out["next_sentence_log_probs"]  # [B, K, 2]
    weights = tf.cast(features["next_sentence_weights"], tf.float32)
    _, per_instance = heads.weighted_next_sentence_loss(
        log_probs, features["next_sentence_labels"], weights)
    count = tf.maximum(training.global_sum(tf.reduce_sum(weights)), 1e-5)
    loss = tf.reduce_sum(weights * per_instance) / count * training.num_replicas()
    correct = tf.cast(tf.equal(tf.argmax(log_probs, -1, output_type=tf.int32),
                               tf.cast(features["next_sentence_labels"], tf.int32)),
                      tf.float32)
    accuracy = tf.reduce_sum(correct * weights) / tf.maximum(tf.reduce_sum(weights), 1e-5)
    return loss, accuracy


def eval_outputs(model, features):
    """Per-example values the reference's eval metrics are computed from.

    Packed rows give the next-sentence values per instance [B, K], with their
    next_sentence_weights (1 on real instances).
    """
    out = model(features, training=False)
    log_probs = out["masked_lm_log_probs"]
    nsp_log_probs = out["next_sentence_log_probs"]
    mlm_loss, mlm_per_example = heads.masked_lm_loss(
        log_probs, features["masked_lm_ids"], features["masked_lm_weights"])
    labels = features["next_sentence_labels"]
    packed = "next_sentence_weights" in features
    if packed:
        nsp_loss, nsp_per_example = heads.weighted_next_sentence_loss(
            nsp_log_probs, labels, features["next_sentence_weights"])
    else:
        nsp_loss, nsp_per_example = heads.next_sentence_loss(nsp_log_probs, labels)
        labels = tf.reshape(labels, [-1])
    outputs = {
        "masked_lm_example_loss": mlm_per_example,
        "masked_lm_predictions": tf.argmax(log_probs, -1, output_type=tf.int32),
        "masked_lm_ids": features["masked_lm_ids"],
        "masked_lm_weights": features["masked_lm_weights"],
        "next_sentence_example_loss": nsp_per_example,
        "next_sentence_predictions": tf.argmax(nsp_log_probs, -1, output_type=tf.int32),
        "next_sentence_labels": labels,
        # The batch's total loss, repeated per example so it survives the
        # concatenation over replicas (one replica's view of the mean).
        "batch_loss": tf.fill([tf.shape(log_probs)[0]], mlm_loss + nsp_loss),
    }
    if packed:
        outputs["next_sentence_weights"] = features["next_sentence_weights"]
    return outputs


def compute_eval_metrics(batches):
    """The reference's eval metrics from the per-example values of every batch."""
    cat = {k: np.concatenate([b[k] for b in batches]) for k in batches[0]}
    w = cat["masked_lm_weights"].astype(np.float64)
    wsum = max(w.sum(), 1e-12)
    mlm_correct = (cat["masked_lm_predictions"] == cat["masked_lm_ids"]).astype(np.float64)
    nsp_correct = cat["next_sentence_predictions"] == cat["next_sentence_labels"]
    if "next_sentence_weights" in cat:  # packed rows: the mean over real instances
        nsp_w = cat["next_sentence_weights"].astype(np.float64)
        nsp_wsum = max(nsp_w.sum(), 1e-12)
        nsp_accuracy = (nsp_correct * nsp_w).sum() / nsp_wsum
        nsp_loss = (cat["next_sentence_example_loss"] * nsp_w).sum() / nsp_wsum
    else:
        nsp_accuracy = np.mean(nsp_correct)
        nsp_loss = np.mean(cat["next_sentence_example_loss"])
    return {
        "masked_lm_accuracy": np.float32((mlm_correct * w).sum() / wsum),
        "masked_lm_loss": np.float32((cat["masked_lm_example_loss"] * w).sum() / wsum),
        "next_sentence_accuracy": np.float32(nsp_accuracy),
        "next_sentence_loss": np.float32(nsp_loss),
        # Estimator reports the mean over eval steps of the step's loss.
        "loss": np.float32(np.mean([np.mean(b["batch_loss"]) for b in batches])),
    }


# ---------------------------------------------------------------------------
# The run
# ---------------------------------------------------------------------------

@startup.keeps_process_settings
def run(settings):
    """Pre-trains and/or evaluates as do_train / do_eval ask; returns a settings_lib.Result
    (the eval results as metrics, eval_results.txt and the latest checkpoint as outputs).

    `settings`: a Settings, or the parsed flags of define_flags.
    """
    settings = Settings.of(settings)
    bert_config, input_files, spec = _check_settings(settings)
    trainer = settings.part(*training.SETTINGS)
    training.set_seed(settings.seed)
    training.configure_precision(settings.dtype)
    strategy = training.get_strategy(trainer)
    config = training.RunConfig.from_settings(trainer, record=training_record.of(
        settings.part(*training_record.SETTINGS), files=input_files)
        if settings.do_train else None, autograph=False)
    runner = training.Runner(strategy, lambda: heads.BertPretrainer(bert_config), config,
                             for_training=settings.do_train)
    result = settings_lib.Result(output_dir=settings.output_dir)
    if settings.do_train:
        # No vocab flag here: the config and the data's lengths.
        model_folder.write(settings.output_dir, "run_pretraining", settings.bert_config_file,
                           None, settings.part(*model_folder.SETTINGS).values())
        _train(settings, runner, input_files, spec)
        result.outputs["checkpoint"] = path_match.latest_checkpoint(settings.output_dir)
    if settings.do_eval:
        result.metrics = _evaluate(settings, runner, input_files, spec)
        result.outputs["eval_results"] = os.path.join(settings.output_dir, "eval_results.txt")
    result.update(training.outcome(runner))  # global step, steps trained
    return result


def _check_settings(settings):
    """Checks the settings before any work; returns (bert_config, input files, feature spec)."""
    if not settings.do_train and not settings.do_eval:
        raise ValueError("At least one of `do_train` or `do_eval` must be True.")
    settings.require("bert_config_file", "input_file", "output_dir")
    if settings.do_train and settings.num_train_steps < 1:
        raise ValueError("--num_train_steps=%d: nothing would be trained (must be >= 1)"
                         % settings.num_train_steps)
    bert_config = loaders.load_bert_config(settings.bert_config_file,
                                           settings.max_seq_length)
    input_files = fileutil.expand_input_files(settings.input_file)
    spec = feature_spec(settings, check_packing(input_files[0], settings.packed_sequences))
    seq_flag = "--max_seq_length=%d" % settings.max_seq_length
    masked_flag = "--max_predictions_per_seq=%d" % settings.max_predictions_per_seq
    if settings.packed_sequences:
        masked_flag += " times the record's instances per row"
    input_pipeline.check_record_lengths(
        input_files[0], spec,
        {name: masked_flag if name.startswith("masked_lm") else seq_flag for name in spec})
    logging.info("*** Input Files ***")
    for path in input_files:
        logging.info("  %s", path)
    return bert_config, input_files, spec


def check_packing(path, packed_sequences):
    """Checks --packed_sequences against the first record of `path`.

    Returns the instances per row of packed records (the length of their
    next_sentence_positions; 1 for an empty file), None for unpacked ones.

    Raises:
      ValueError: naming the file and the flag, when the records are packed and
        the flag is not set, or the other way round.
    """
    keys, per_row = None, 1
    for raw in tf.data.TFRecordDataset([path]).take(1):
        feature = tf.train.Example.FromString(raw.numpy()).features.feature
        keys = set(feature)
        if "next_sentence_positions" in feature:
            per_row = len(feature["next_sentence_positions"].int64_list.value)
    packed = keys is not None and any(
        name in keys for name in pretraining_records.PACKED_ONLY_FEATURES)
    if keys is not None and packed != bool(packed_sequences):
        if packed:
            raise ValueError("%s holds packed records (create_pretraining_data.py "
                             "--pack_sequences): pass --packed_sequences" % path)
        raise ValueError("%s holds unpacked records (no instance_ids feature): drop "
                         "--packed_sequences, or write them with create_pretraining_data.py "
                         "--pack_sequences" % path)
    if not packed_sequences:
        return None
    logging.info("Packed records: %d instances per row", per_row)
    return per_row


def _train(settings, runner, input_files, spec=None):
    """Runs --num_train_steps optimizer steps (continuing from a checkpoint in output_dir)."""
    logging.info("***** Running training *****")
    logging.info("  Batch size = %d", settings.train_batch_size)
    runner.train(dataset_fn_for(settings, input_files, is_training=True, spec=spec,
                                trim_padding=runner.trim_padding),
                 pretraining_loss, global_batch_size=settings.train_batch_size)


def _evaluate(settings, runner, input_files, spec=None):
    """Runs --max_eval_steps eval batches and writes eval_results.txt; returns its values."""
    logging.info("***** Running evaluation *****")
    logging.info("  Batch size = %d", settings.eval_batch_size)
    dataset_fn = dataset_fn_for(settings, input_files, is_training=False, spec=spec,
                                trim_padding=runner.trim_padding)
    batches = list(runner.predict(dataset_fn, eval_outputs, max_steps=settings.max_eval_steps,
                                  stage="eval"))
    results = compute_eval_metrics(batches)
    results["global_step"] = runner.global_step
    fileutil.write_eval_results(os.path.join(settings.output_dir, "eval_results.txt"), results)
    return results


def main():
    """Console entry point."""
    cli.run_cli(define_flags, run)


if __name__ == "__main__":
    main()
