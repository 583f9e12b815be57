r"""Exports a BERT checkpoint as a SavedModel that serves raw text.

    python export_saved_model.py --model_type=classifier --task_name=MRPC \
      --bert_config_file=$BERT_BASE_DIR/bert_config.json \
      --init_checkpoint=/tmp/mrpc_output --vocab_file=$BERT_BASE_DIR/vocab.txt \
      --do_lower_case=True --max_seq_length=128 --export_dir=/tmp/mrpc_saved_model

The exported signatures take strings. Tokenization runs inside the graph and gives
exactly the ids of `tokenization.FullTokenizer` (see tokenization_graph.py);
packing is that of the reference's feature conversion. The vocabulary travels as the
SavedModel asset `assets/vocab.txt`, so the directory is self-contained.

Signatures (B = batch, S = --max_seq_length, H = hidden size, L = layers):

  every model type
    serving_ids(input_ids, input_mask, segment_ids: int32 [B, S]) -> the model outputs
        below, for features made elsewhere (the reference's input_fn format);
    tokenize(text: string [B]) -> token_ids int32 [B, T] (-1 after the end of a row),
        num_tokens int32 [B]: the WordPiece ids of FullTokenizer.tokenize(text).

  --model_type=encoder, classifier
    serving_default(text_a, text_b: string [B]): [CLS] A [SEP] B [SEP]; an empty text_b
        (or one that tokenizes to nothing) means a single text: [CLS] A [SEP], exactly
        as the reference's `if example.text_b` / `if tokens_b` do;
    serving_text_a(text_a: string [B]): single texts only, for callers (such as
        saved_model_cli) that cannot leave an input out. TensorFlow signatures have no
        optional inputs, hence two signatures.

  --model_type=encoder
    embed(text: string [B]) -> sentence_embedding [B, D] only: the texts sorted by
        length and run --embed_batch_size at a time, each batch at its longest text
        instead of S, the vectors given back in request order (the same vectors, much
        less work for short texts): the fast way to get sentence vectors. Send many
        texts per request (hundreds or all of them) and it batches them as
        extract_features and sentence-transformers' encode do.

Request length (--trim_padding, default on but for squad): the classifier, tagger and
multiple-choice signatures pack each request to its longest row rounded up to a
multiple of 16 instead of S (the outputs do not depend on it); a squad export with
--trim_padding does too, its start/end logits then [B, bucket] and its answers
ranking real positions only. serving_ids and the encoder's serving_default always
take and give S positions.

  encoder outputs: sentence_embedding [B, D] (pooling.pool of --pooling over --layers,
    --normalize; defaults: the sentence_embedding.json beside --init_checkpoint, else
    mean over the last layer, not normalised), pooled_output [B, H] (the NSP pooler),
    sequence_output [B, S, H], encoder_layers
    [B, L, S, H] (batch first, so that TF Serving's row format accepts it; layer l is
    encoder_layers[:, l]), input_ids, input_mask, segment_ids [B, S].
  classifier outputs: probabilities [B, num_labels] (softmax of the logits, what
    run_classifier writes to test_results.tsv), logits, predicted_label [B] (the name
    of the most probable label) and labels [B, num_labels] (the task's label names, in
    output order, repeated for every row). A regression task (sts-b) outputs
    predictions [B] and logits instead. The labels and the kind of head: a built-in
    --task_name's, else the label_list.txt and classifier_task.json that the training
    run left beside --init_checkpoint (any task: csv/tsv/jsonl files, --processor; no
    --task_name needed), or --labels_file. A multi-label model (--task_name=multilabel,
    or --task_type=multilabel in training): probabilities [B, num_labels]
    (a sigmoid per label, run_classifier's test_results.tsv), logits, labels,
    predicted [B, num_labels] bool (probability >= --threshold) and predicted_labels
    [B] (the predicted names joined by ",", in label order; "" for none).
    With --long_text=head_tail or windows (see
    long_text.py) text_a is cut or windowed as run_classifier did; windows: logits are
    the --window_pooling of the windows' logits, one row per input (serving_ids takes
    packed windows and pools nothing).

  --model_type=tagger (a run_ner model; one window of S - 2 pieces)
    serving_default(text: string [B]) -> per word (BasicTokenizer's words, the way
        run_ner reads the words of a CoNLL line; padded to the longest text):
        word_tags [B, W] (run_ner's tag: the prediction at the word's first piece; "O"
        for words past the window), word_start, word_end [B, W] (character range in
        the text), num_words [B]; and the entities, read from the tags with conlleval's
        rules: entity_type, entity_text, entity_start, entity_end [B, E], num_entities.

  --model_type=multiple_choice (a run_multiple_choice model)
    serving_default(context: string [B], endings: string [B, C]) -> probabilities,
        logits [B, C], predicted_choice [B]; each choice is [CLS] context [SEP] ending
        [SEP] (put SWAG's sent2 or a question in front of each ending).

  --model_type=squad (one window: the reference's first window only)
    serving_default(question, context: string [B]) -> start_logits, end_logits [B, S],
        input_ids, input_mask, segment_ids [B, S];
    answer(question, context: string [B]) -> answer [B] string, score [B]
        (start + end logit), start_position, end_position [B] (token positions in the
        input; -1 when there is no valid span), null_score [B] (logits of [CLS]).

From Python, the restored object has each signature as a method too:
`m = tf.saved_model.load(dir); m.serving_default(text_a, text_b)`,
`m.serving_text_a(text_a)`, `m.answer(question, context)`, ... (positional
arguments, no signature wrapper).

SQuAD in one window. The input is [CLS] question [SEP] context [SEP] with the
question cut to --max_query_length tokens and the context to the room left
(S - len(question) - 3 tokens), which is the reference's first document window.
Contexts longer than that need run_squad.py's sliding windows (--doc_stride); the
rest of such a context is not seen. `answer` applies the reference's n-best rules to
that window: the --n_best_size best start and end positions (ties: lower position
first), pairs with both ends inside the context, start <= end and at most
--max_answer_length tokens, the best sum of logits (ties: the reference's order).
The answer text is cut from the original context: from the first character of the
start piece to the character before the next one that survives normalization after
the end piece, runs of the reference's whitespace (space, tab, CR, LF, U+202F)
squeezed to one space and the ends stripped. This is run_squad's answer whenever its
get_final_text succeeds; where that fails (the original words do not align with
their normalized form) run_squad returns the whole original words, this the
covered characters only.

In-graph tokenization: see tokenization_graph.py (core TensorFlow ops, exactly
FullTokenizer's ids; tensorflow_text is not needed to export, load or serve).
"""
from bert_tf2 import startup  # first, before tensorflow: a quiet C++ start-up (startup.py)
import contextlib
import tempfile
import unicodedata

from absl import flags
from absl import logging
import tensorflow as tf
import tf_keras

import tokenization
from bert_tf2.export import saved_model_dir
from bert_tf2.export import serving
from bert_tf2.export import tokenization_graph
from bert_tf2 import fileutil
from bert_tf2 import flags_common
from bert_tf2.tasks import classifier_tasks
from bert_tf2.tasks import long_text
from bert_tf2.tasks import multilabel_data
from bert_tf2.tasks import ner_data
from bert_tf2.trainer import checkpoints

MODEL_TYPES = serving.MODEL_TYPES
# --serving_dtype -> the Keras policy the served model is built under.
SERVING_POLICIES = {"fp32": "float32", "bf16": "mixed_bfloat16", "fp16": "mixed_float16"}

_REQUIRED_FLAGS = ("model_type", "bert_config_file", "init_checkpoint", "vocab_file",
                   "export_dir")


# ---------------------------------------------------------------------------
# Flags
# ---------------------------------------------------------------------------

def define_flags(fv):
    """Registers the exporter's flags on the FlagValues `fv`."""
    flags.DEFINE_enum("model_type", None, list(MODEL_TYPES),
                      "What to export: the bare encoder, or a run_classifier, run_squad, "
                      "run_ner (tagger) or run_multiple_choice model.", flag_values=fv)
    flags_common.define_model_flags(fv, help_overrides={
        "init_checkpoint": "Checkpoint to export (TF1 or TF2; a file prefix or a directory "
                           "such as a run_classifier --output_dir, whose latest checkpoint "
                           "is used)."})
    flags.DEFINE_string("export_dir", None,
                        "Directory the SavedModel is written to (made if missing). An "
                        "earlier export there is replaced: what the export wrote, while "
                        "files added to it (such as TF Serving's "
                        "assets.extra/tf_serving_warmup_requests) are kept; any other "
                        "existing file or folder is an error.",
                        flag_values=fv)
    flags.DEFINE_string("task_name", None,
                        "--model_type=classifier: a built-in run_classifier task, which "
                        "fixes the labels, or multilabel (default: the task the training "
                        "run left in classifier_task.json and label_list.txt beside "
                        "--init_checkpoint; any other name is free).", flag_values=fv)
    flags.DEFINE_string("xnli_language", "zh", "Language of --task_name=xnli.",
                        flag_values=fv)
    # --model_type=classifier: run_classifier's --long_text and its flags (default: the
    # long_text.json the run left beside --init_checkpoint, else truncate).
    long_text.define_flags(fv)
    flags.DEFINE_string("labels_file", None,
                        "--model_type=tagger or classifier: the label list, in output "
                        "order (default: label_list.txt beside --init_checkpoint, as "
                        "run_ner and run_classifier write it in their --output_dir).",
                        flag_values=fv)
    multilabel_data.define_flags(fv)  # --threshold
    flags.DEFINE_bool("feature_based", False, "--model_type=tagger: a run_ner "
                      "--feature_based model (give its --layers and --lstm_units too).",
                      flag_values=fv)
    flags.DEFINE_string("layers", "-1,-2,-3,-4", "--feature_based: run_ner's --layers; "
                        "--model_type=encoder: the layers of sentence_embedding.",
                        flag_values=fv)
    flags_common.define_pooling_flags(fv)
    flags.DEFINE_integer("lstm_units", 768, "--feature_based: run_ner's --lstm_units.",
                         flag_values=fv)
    flags.DEFINE_integer("max_query_length", 64,
                         "--model_type=squad: questions are cut to this many tokens.",
                         flag_values=fv)
    flags.DEFINE_integer("max_answer_length", 30,
                         "--model_type=squad: longest answer, in tokens.", flag_values=fv)
    flags.DEFINE_integer("n_best_size", 20,
                         "--model_type=squad: how many best start and end positions the "
                         "answer is chosen from.", flag_values=fv)
    flags.DEFINE_bool("trim_padding", None,
                      "Pack each request to its longest row, rounded up to a multiple of "
                      "16 (as the runners' evaluation batches), instead of "
                      "--max_seq_length: the same outputs with less work. Default: on for "
                      "--model_type=classifier, tagger and multiple_choice, off for squad "
                      "(--trim_padding there: start/end logits [B, bucket] and answers "
                      "ranking real positions only, as run_squad --trim_padding). "
                      "--notrim_padding: every request at --max_seq_length. The encoder's "
                      "serving_default always runs at --max_seq_length, its embed always "
                      "trimmed.", flag_values=fv)
    flags.DEFINE_enum("serving_dtype", "fp32", list(SERVING_POLICIES),
                      "Precision the served model computes in. fp32 (default): the "
                      "checkpoint's float32 numbers, as the command-line tools give them. "
                      "bf16 / fp16: Keras mixed precision, as the runners' --dtype: the "
                      "weights stay float32 in the SavedModel, matmuls and the layers "
                      "around them run in bf16 / fp16, LayerNorm, softmax and every "
                      "output in float32; faster where the hardware has bf16 / fp16 "
                      "units (CPUs with AMX or avx512_bf16, GPUs, TPUs), outputs close "
                      "to fp32's but not equal (README: Serve it). Input and output "
                      "signatures are the same.", flag_values=fv)
    flags.DEFINE_integer("embed_batch_size", 32,
                         "--model_type=encoder: the embed signature sorts a request's texts "
                         "by length and runs them this many at a time, each batch at its "
                         "longest text (sentence vectors in the request's order).",
                         flag_values=fv)


# ---------------------------------------------------------------------------
# Export
# ---------------------------------------------------------------------------

def load_weights(model, init_checkpoint, model_type):
    """Loads `init_checkpoint` into `model`; every model variable must be found.

    A classifier or SQuAD export of a checkpoint without the task's head would serve
    random outputs, so missing variables are an error here (unlike in training).
    """
    result = checkpoints.load_checkpoint(model, init_checkpoint)
    if result.not_in_checkpoint:
        raise ValueError(
            "checkpoint %s lacks %d variable(s) of the %s model, e.g. %s (is it a "
            "checkpoint of a fine-tuned %s model?)"
            % (init_checkpoint, len(result.not_in_checkpoint), model_type,
               ", ".join(result.not_in_checkpoint[:3]), model_type))
    return result


# The SavedModel folder (bert_tf2/export/saved_model_dir.py): an export replaces only an
# earlier export, and keeps what was added to it.
INFO_FILE = saved_model_dir.INFO_FILE
check_export_dir = saved_model_dir.check_export_dir
write_saved_model = saved_model_dir.write_saved_model


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
           pooling_spec=None, threshold=None, long_text_settings=None, trim_padding=None,
           embed_batch_size=32, serving_dtype="fp32"):
    """Builds, loads and saves the serving model; returns export_dir.

    Args:
      bert_config: a modeling.BertConfig.
      labels: classifier: the task's label list ([None] for regression); tagger: the
        tag list.
      feature_layers, lstm_units: a feature-based tagger's layers and LSTM size.
      pooling_spec: encoder: the pooling.PoolingSpec of sentence_embedding.
      threshold: a multi-label classifier (sigmoid outputs): its --threshold.
      long_text_settings: classifier: a long_text.LongText (None: truncate).
      trim_padding, embed_batch_size: see serving.ServingModule (None: its default
        for model_type).
      serving_dtype: "fp32", "bf16" or "fp16" (see the --serving_dtype flag).
    """
    if serving_dtype not in SERVING_POLICIES:
        raise ValueError("--serving_dtype must be one of %s, got %r"
                         % (", ".join(SERVING_POLICIES), serving_dtype))
    # The policy asked for, whatever policy a run in the same process left behind
    # (--dtype=bf16 / fp16 set the global one).
    with _global_policy(SERVING_POLICIES[serving_dtype]):
        num_labels = len(labels) if labels is not None else None
        model = serving.build_model(model_type, bert_config, num_labels,
                                    feature_layers=feature_layers, lstm_units=lstm_units)
        load_weights(model, init_checkpoint, model_type)
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
                embed_batch_size=embed_batch_size)
            info = {
                "model_type": model_type,
                "do_lower_case": bool(do_lower_case),
                "max_seq_length": max_seq_length,
                "bert_config": bert_config.to_dict(),
                "init_checkpoint": str(init_checkpoint),
                "signatures": sorted(module.signatures()),
                "unicode_version": unicodedata.unidata_version,
                "trim_padding": module.trim_padding,
                "serving_dtype": serving_dtype,
            }
            if labels is not None:
                info["labels"] = [None if label is None else str(label) for label in labels]
            if threshold is not None:
                info["multilabel_threshold"] = threshold
            if pooling_spec is not None:
                info["sentence_embedding"] = pooling_spec.to_dict()
                info["embed_batch_size"] = module.embed_batch_size
            if long_text_settings is not None:
                info["long_text"] = long_text_settings.to_dict()
            if model_type == "squad":
                info.update(max_query_length=max_query_length, max_answer_length=max_answer_length,
                            n_best_size=n_best_size)
            write_saved_model(module, export_dir, info)
    logging.info("Exported the %s model to %s", model_type, export_dir)
    return export_dir


def run(fv):
    """Exports the model the flags describe; returns the export directory."""
    bert_config, labels, multilabel = _check_flags(fv)
    layers = ([int(x) for x in fv.layers.split(",")]
              if fv.model_type == "tagger" and fv.feature_based else None)
    return export(fv.model_type, bert_config, fv.init_checkpoint, fv.vocab_file,
                  fv.do_lower_case, fv.max_seq_length, fv.export_dir, labels=labels,
                  max_query_length=fv.max_query_length,
                  max_answer_length=fv.max_answer_length, n_best_size=fv.n_best_size,
                  feature_layers=layers, lstm_units=fv.lstm_units,
                  pooling_spec=_pooling_spec(fv, bert_config),
                  threshold=fv.threshold if multilabel else None,
                  long_text_settings=_long_text(fv), trim_padding=fv.trim_padding,
                  embed_batch_size=fv.embed_batch_size, serving_dtype=fv.serving_dtype)


def _long_text(fv):
    """A classifier's long_text.LongText (flags, else long_text.json), None for truncate."""
    if fv.model_type != "classifier" or multilabel_data.is_multilabel(fv.task_name):
        return None
    result = long_text.from_flags(fv, fv.max_seq_length)
    return None if result.mode == "truncate" else result


def _pooling_spec(fv, bert_config):
    """The encoder's sentence_embedding: flags, else sentence_embedding.json, else mean."""
    if fv.model_type != "encoder":
        return None
    settings = flags_common.apply_checkpoint_settings(fv)
    mode = fv.pooling or settings.get("pooling", "mean")
    return flags_common.pooling_from_flags(fv, settings, mode, bert_config.num_hidden_layers)


def _check_flags(fv):
    """Checks the flags before any work.

    Returns (bert_config, labels or None, multilabel): a classifier's labels and
    kind of head come from classifier_tasks.export_task.
    """
    flags_common.require(fv, _REQUIRED_FLAGS)
    flags_common.apply_checkpoint_settings(fv)
    labels, multilabel = None, False
    if fv.model_type == "classifier":
        labels, multilabel = classifier_tasks.export_task(fv)
    elif fv.model_type == "tagger":
        labels = _tagger_labels(fv)
    tokenization.validate_case_matches_checkpoint(fv.do_lower_case, fv.init_checkpoint)
    bert_config = flags_common.bert_config_from_flags(fv)
    bert_config.validate()
    if fv.max_seq_length < 3:
        raise ValueError("--max_seq_length must be at least 3")
    flags_common.refuse_unused(fv, unused_flags(fv, multilabel))
    if fv.model_type == "classifier" and not multilabel:
        # As run_classifier: another mode's flags warned (one command line for every mode).
        flags_common.refuse_unused(fv, long_text.unused_flags(
            long_text.from_flags(fv, fv.max_seq_length)), warn_only=True)
    if fv.model_type == "squad":
        for name in ("max_query_length", "max_answer_length", "n_best_size"):
            if getattr(fv, name) < 1:
                raise ValueError("--%s must be at least 1" % name)
        if fv.max_seq_length <= fv.max_query_length + 3:
            raise ValueError(
                "The max_seq_length (%d) must be greater than max_query_length (%d) + 3"
                % (fv.max_seq_length, fv.max_query_length))
    if not tf.io.gfile.exists(fv.vocab_file):
        raise ValueError("--vocab_file %s does not exist" % fv.vocab_file)
    check_export_dir(fv.export_dir.rstrip("/"))
    fileutil.make_parent_folder(fv.export_dir, "--export_dir")
    return bert_config, labels, multilabel


# The flags each --model_type reads (beyond the model flags and --export_dir).
_FLAGS_OF_TYPE = {
    "encoder": ("layers", "pooling", "normalize"),
    "classifier": ("task_name", "xnli_language", "labels_file", "threshold", "long_text",
                   "head_tokens", "doc_stride", "window_pooling"),
    "squad": ("max_query_length", "max_answer_length", "n_best_size"),
    "tagger": ("labels_file", "feature_based", "layers", "lstm_units"),
    "multiple_choice": (),
}


def unused_flags(fv, multilabel=False):
    """(flag, why) pairs of the flags this export would not read (refused when given);
    `multilabel`: the classifier to export is a multi-label one."""
    read = set(_FLAGS_OF_TYPE[fv.model_type])
    pairs = [(name, "with --model_type=%s" % fv.model_type)
             for names in _FLAGS_OF_TYPE.values() for name in names if name not in read]
    classifier = fv.model_type == "classifier"
    for name, used, why in (
            ("threshold", multilabel, "without a multi-label classifier"),
            ("xnli_language", (fv.task_name or "").lower() == "xnli", "without --task_name=xnli"),
            ("layers", fv.model_type != "tagger" or fv.feature_based, "without --feature_based"),
            ("lstm_units", fv.feature_based, "without --feature_based")):
        if name in read and not used:
            pairs.append((name, why))
    if classifier and multilabel:
        pairs += [(name, "with a multi-label classifier (its runs read texts as truncate)")
                  for name in ("long_text", "head_tokens", "doc_stride", "window_pooling")]
    return list(dict(pairs).items())


def _tagger_labels(fv):
    """--labels_file, else the label_list.txt run_ner left beside the checkpoint."""
    path = fv.labels_file or checkpoints.settings_file(ner_data.LABELS_FILE_NAME,
                                                       fv.init_checkpoint)
    if not path:
        raise ValueError("--model_type=tagger needs the tag list: pass --labels_file "
                         "(no %s beside --init_checkpoint)" % ner_data.LABELS_FILE_NAME)
    return ner_data.read_labels(path)


def main():
    """Console entry point."""
    flags_common.run_cli(define_flags, run)


if __name__ == "__main__":
    main()
