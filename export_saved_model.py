r"""Exports a BERT checkpoint as a SavedModel that serves raw text.

    python export_saved_model.py --model_type=classifier --task_name=MRPC \
      --bert_config_file=$BERT_BASE_DIR/bert_config.json \
      --init_checkpoint=/tmp/mrpc_output --vocab_file=$BERT_BASE_DIR/vocab.txt \
      --do_lower_case=True --max_seq_length=128 --export_dir=/tmp/mrpc_saved_model

For TF Serving, --export_base=BASE instead of --export_dir writes BASE/<version> (a new
number, never an existing folder; --litert's models go beside it, in BASE/<version>.litert,
--openvino's and --onnx's in BASE/<version>.openvino and .onnx, each with a model repository
OpenVINO Model Server / Triton read: docs/openvino-onnx.md)
and --warmup_file=FILE its warm-up requests, assets.extra/tf_serving_warmup_requests
(bert_tf2/export/serving_layout.py, warmup.py; docs/serving.md).

From a training run's output folder (or its best/) --init_checkpoint and --export_dir are
enough: the model type, config, vocab, length, case and labels come from its files
(model_folder.py).

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

  --model_type=tagger (a run_ner model; each text one sentence, tagged as run_ner
  --do_predict tags it: serving_tagger.py)
    serving_default(text: string [B]) -> per word (ner_data.split_words' words: split at
        the six ASCII blanks only, as run_ner reads a CoNLL file's words and splits a str
        in predict(); padded to the longest text; an empty or blank text has none):
        word_tags [B, W] (run_ner's tag: the prediction at the word's first piece, in the
        window where it has the most context: a sentence of more than S - 2 pieces is cut
        into windows --doc_stride apart, the folder's (recorded in export_info.json); "O"
        for a word without pieces; a --crf model: the Viterbi tags of each window's words,
        as run_ner --crf predicts), word_start, word_end [B, W] (character range in the
        text), num_words [B]; and the entities, read from the tags with conlleval's
        rules: entity_type, entity_text, entity_start, entity_end [B, E], num_entities.

  --model_type=multiple_choice (a run_multiple_choice model)
    serving_default(context: string [B], endings: string [B, C]) -> probabilities,
        logits [B, C], predicted_choice [B]; each choice is [CLS] context [SEP] ending
        [SEP] (put SWAG's sent2 or a question in front of each ending).

  --model_type=masked_lm (fill-mask: a pretraining checkpoint's head, bert_tf2/export/masked_lm.py)
    serving_default(text: string [B], with literal [MASK]s) -> tokens string, token_ids
        int32, probabilities float32 [B, M, K] (per [MASK] in text order, M the request's
        most, K --fill_mask_top_k; slots past a row's masks: "", -1, 0), num_masks [B];
        masked_lm.Predictor's answers, its refusals failing the request in one line.

  --model_type=squad
    answer(question, context: string [B]) -> answer [B] string (run_squad's
        predictions.json answer over every window of the context), score [B] (start +
        end logit of that answer's n-best entry), start_logit, end_logit [B], start_position,
        end_position [B] (the best span's positions in its window; -1 when there is no
        valid span), window [B] (that window's index), num_windows [B], null_score [B]
        (the lowest [CLS] start + end over the windows), null_odds [B] (null_odds.json's);
    serving_default(question, context: string [B]) -> start_logits, end_logits [B, S],
        input_ids, input_mask, segment_ids [B, S] of the first window only.

From Python, the restored object has each signature as a method too:
`m = tf.saved_model.load(dir); m.serving_default(text_a, text_b)`,
`m.serving_text_a(text_a)`, `m.answer(question, context)`, ... (positional
arguments, no signature wrapper).

SQuAD. `answer` is run_squad.py --do_predict in the graph (serving_squad.py): the
context in windows --doc_stride apart, each [CLS] question [SEP] window [SEP] with the
question cut to --max_query_length, all windows through the model in one batch; per window
the --n_best_size best start and end positions, spans inside the window's context that
start where the window gives that piece the most context, at most --max_answer_length
pieces; the best sum of logits over all windows (ties: run_squad's order); with
--version_2_with_negative "" when the null score minus that span's score is above
--null_score_diff_threshold; the text mapped back to the context by get_final_text's rule.
--doc_stride, --max_query_length and --version_2_with_negative default to the model folder's
(model_settings.json, as run_squad trained), --n_best_size, --max_answer_length and
--null_score_diff_threshold to run_squad's defaults; export_info.json records all six.
`serving_default` stays one window (the reference's first), for callers that want logits.

In-graph tokenization: see tokenization_graph.py (core TensorFlow ops, exactly
FullTokenizer's ids; tensorflow_text is not needed to export, load or serve).
"""
from bert_tf2 import startup  # first, before tensorflow: a quiet C++ start-up (startup.py)
import os

from absl import flags
import tensorflow as tf

from bert import tokenization  # ours, whatever tokenization.py a user's folder holds
from bert_tf2.export import exporter
from bert_tf2.export import head_types
from bert_tf2.export import ids_step
from bert_tf2.export import export_flags
from bert_tf2.export import serving_layout
from bert_tf2.export import warmup
# The export with plain values, and the SavedModel folder (an export replaces only an earlier
# export, and keeps what was added to it); their names stay importable from here.
from bert_tf2.export.exporter import export, load_weights  # noqa: F401
from bert_tf2.export.saved_model_dir import (  # noqa: F401
    INFO_FILE, check_export_dir, write_saved_model)
from bert_tf2.export import saved_model_dir
from bert_tf2.export import serving
from bert_tf2 import fileutil
from bert_tf2 import flags_common
from bert_tf2 import cli
from bert_tf2 import loaders
from bert_tf2.tasks import pooling
from bert_tf2 import settings as settings_lib
from bert_tf2.tasks import long_text
from bert_tf2.tasks import multilabel_data
from bert_tf2.trainer import model_folder

MODEL_TYPES = serving.MODEL_TYPES
SERVING_POLICIES = exporter.SERVING_POLICIES

_REQUIRED_FLAGS = ("model_type", "bert_config_file", "init_checkpoint", "vocab_file")


def define_flags(fv):
    """Registers the exporter's flags on the FlagValues `fv`."""
    flags.DEFINE_enum("model_type", None, list(MODEL_TYPES),
                      "What to export: %s (default: the type of the runner in "
                      "--init_checkpoint's model_settings.json)."
                      % head_types.described(head_types.SERVED), flag_values=fv)
    flags_common.define_model_flags(fv, help_overrides={
        "init_checkpoint": "Checkpoint to export (TF1 or TF2; a file prefix or a directory "
                           "such as a run_classifier --output_dir, whose latest checkpoint "
                           "is used). A training run's output folder (or its best/) is the "
                           "model: the config, vocab, length, case and task settings it "
                           "saved are the defaults of those flags."})
    settings_lib.define_flag_table(
        fv, export_flags.EXPORT_FLAGS + serving_layout.FLAGS + warmup.FLAGS)
    # --model_type=classifier: run_classifier's --long_text and its flags (default: the
    # long_text.json the run left beside --init_checkpoint, else truncate).
    long_text.define_flags(fv, doc_stride_also=(
        "--model_type=tagger / squad: run_ner's / run_squad's windows over a long sentence or "
        "context, pieces apart (default: the model folder's --doc_stride, else 128)."))
    multilabel_data.define_flags(fv)  # --threshold
    flags_common.define_pooling_flags(fv)
    settings_lib.define_flag_table(fv, export_flags.MODEL_TYPE_FLAGS)
    ids_step.define_flags(fv)


# One field per flag above: run(Settings(model_type="encoder", ...)) from Python.
Settings = settings_lib.settings_class(define_flags, __name__)


@startup.keeps_process_settings
def run(settings):
    """Exports the model the settings describe; returns a settings_lib.Result (the
    export directory and the files written there).

    `settings`: a Settings, or the parsed flags of define_flags.
    """
    settings = Settings.of(settings)
    # The model folder of --init_checkpoint (a training run's output_dir or best/, a
    # converted model) fills what the user left out: config, vocab, length, case, the
    # model type and the task's settings.
    folder = model_folder.defaults(settings.part(*model_folder.SETTINGS),
                                   type_of_runner=head_types.type_of_runner)
    settings = settings.with_defaults(folder)
    settings.require(*_REQUIRED_FLAGS)
    if settings.model_type in MODEL_TYPES:  # the head's own defaults (fill-mask: a length)
        settings = settings.with_defaults(
            head_types.get(settings.model_type).export_defaults(settings, folder))
    saved = pooling.model_folder_settings(settings.init_checkpoint)  # pooling
    bert_config, labels, multilabel, target = _check_settings(settings)
    ids_examples = ids_step.read_examples(settings, labels)
    warmup_rows = warmup.read_rows(settings, ids_step.parse_columns(settings))
    ids_outputs = {}
    ids_runtimes = bool(ids_step.given(settings))

    def after_save(module, folder):
        # Into the export being written (saved_model_dir.write_saved_model's temporary
        # folder): its names, which the export checks before it replaces --export_dir.
        written = []
        if warmup_rows:
            found = warmup.requests(settings.model_type, warmup_rows, module.signatures())
            # replayed through the saved export itself, as TF Serving will (refused here)
            warmup.replay(folder, found)
            written.append(warmup.write(folder, serving_layout.model_name(target, settings),
                                        found))
            print("Warm-up requests (%s): %s" % (warmup.WARMUP_FILE, warmup.describe(found)))
        if ids_runtimes:  # --litert, --openvino, --onnx
            ids_outputs.update(ids_step.export(
                settings, folder, module, ids_examples,
                version=os.path.basename(target.rstrip("/")) if settings.export_base else None))
            written += sorted(set(ids_outputs.values()))
        return written

    export_dir = export(
        settings.model_type, bert_config, settings.init_checkpoint, settings.vocab_file,
        settings.do_lower_case, settings.max_seq_length, target, labels=labels,
        max_query_length=settings.max_query_length,
        max_answer_length=settings.max_answer_length, n_best_size=settings.n_best_size,
        squad_rules=_squad_rules(settings), lstm_units=settings.lstm_units,
        threshold=settings.threshold if multilabel else None,
        long_text_settings=_long_text(settings), trim_padding=settings.trim_padding,
        embed_batch_size=settings.embed_batch_size, serving_dtype=settings.serving_dtype,
        after_save=after_save if ids_runtimes or warmup_rows else None,
        new_version=bool(settings.export_base), fill_mask_top_k=settings.fill_mask_top_k,
        **head_types.get(settings.model_type).export_kwargs(settings, folder, saved,
                                                            bert_config))
    # A TF Serving version's ids-in files are beside it (saved_model_dir.SIDE_SUFFIXES).
    outputs = dict(exporter.output_files(export_dir), **{
        name: os.path.join(export_dir + (saved_model_dir.SIDE_SUFFIXES[ids_step.runtime_of(
            name)] if settings.export_base else ""), relative)
        for name, relative in ids_outputs.items()})
    if warmup_rows:
        outputs["warmup_requests"] = os.path.join(export_dir, warmup.WARMUP_FILE)
    return settings_lib.Result(output_dir=export_dir, outputs=outputs)


def _check_settings(settings):
    """Checks the settings before any work.

    Returns (bert_config, labels or None, multilabel, the folder to write): a
    classifier's labels and kind of head come from its head's export_labels.
    """
    # The flags' enums, for settings made in Python (absl checked those of a command line).
    for name, choices in (("model_type", MODEL_TYPES), ("serving_dtype", SERVING_POLICIES)):
        if getattr(settings, name) not in choices:
            raise ValueError("--%s must be one of %s, got %r"
                             % (name, ", ".join(choices), getattr(settings, name)))
    head = head_types.get(settings.model_type)
    labels, multilabel = head.export_labels(settings)  # and its checks of its own flags
    tokenization.validate_case_matches_checkpoint(settings.do_lower_case,
                                                  settings.init_checkpoint)
    bert_config = loaders.load_bert_config(settings.bert_config_file,
                                           settings.max_seq_length)
    bert_config.validate()
    if settings.max_seq_length < 3:
        raise ValueError("--max_seq_length must be at least 3")
    settings.refuse_unused(unused_flags(settings, multilabel))
    ids_step.check(settings, multilabel, _long_text(settings) is not None)
    head.check_export(settings, multilabel)
    squad_rules = _squad_rules(settings)
    if squad_rules is not None:
        squad_rules.check(settings.max_seq_length)
        asked = [module.RUNTIME for _, module, _ in ids_step.given(settings)]
        if settings.trim_padding and asked:
            raise ValueError(
                "--trim_padding with %s: the squad head's %s door ranks every "
                "position of a window (run_squad without --trim_padding), its answer() would "
                "rank the real ones only; export one of the two without the other"
                % (asked[0].flag, asked[0].name))
    if not tf.io.gfile.exists(settings.vocab_file):
        raise ValueError("--vocab_file %s does not exist" % settings.vocab_file)
    if settings.do_lower_case:
        loaders.warn_if_cased(tokenization.load_vocab(settings.vocab_file), settings.vocab_file)
    warmup.check(settings)
    serving_layout.check(settings)
    target = serving_layout.target(settings)
    check_export_dir(target.rstrip("/"))
    fileutil.make_parent_folder(target, "--export_base" if settings.export_base else "--export_dir")
    return bert_config, labels, multilabel, target


# The flags each --model_type reads (beyond the model flags and --export_dir).
_FLAGS_OF_TYPE = {name: head_types.find(name).flags for name in MODEL_TYPES}

def unused_flags(settings, multilabel=False):
    """(flag, why) pairs of the flags this export would not read (refused when given);
    `settings`: a Settings; `multilabel`: the classifier to export is a multi-label one."""
    model_type = settings.model_type
    read = set(_FLAGS_OF_TYPE[model_type])
    pairs = [(name, "with --model_type=%s" % model_type)
             for names in _FLAGS_OF_TYPE.values() for name in names if name not in read]
    pairs += head_types.get(model_type).unused_flags(settings, multilabel)  # its own flags
    if not ids_step.given(settings):
        pairs += [(name, "without --litert, --openvino or --onnx")
                  for name in ids_step.FLAGS_OF_IDS
                  if name != "litert_columns" or not settings.warmup_file]
    return list(dict(pairs).items())


def _squad_rules(settings):
    """--model_type=squad: run_squad's prediction settings (serving_squad.SquadRules):
    given, else the model folder's (filled in by run()), else run_squad's defaults."""
    return head_types.get(settings.model_type).answer_rules(settings)


def _long_text(settings):
    """A classifier's long_text.LongText (settings, else long_text.json), None for truncate."""
    return head_types.get(settings.model_type).long_text_of(settings)


def main():
    """Console entry point."""
    cli.run_cli(define_flags, run)


if __name__ == "__main__":
    main()
