"""Documents longer than one sequence in run_classifier and its SavedModel (--long_text).

Three ways to fit text_a into max_seq_length (S) WordPieces:
- truncate (default): the reference's rule, untouched (input_pipeline.pack_pair);
- head_tail: the first --head_tokens pieces of text_a and as many of its last pieces
  as still fit (Sun et al. 2019 kept 128 + 382 of a 512 sequence);
- windows: text_a split into windows of the room left, --doc_stride pieces apart
  (input_pipeline.doc_spans, the rule run_squad and run_ner use); every window is a
  feature of its own carrying the example's index (DOCUMENT_INDEX); the logits of an
  example's windows are pooled (--window_pooling=mean|max) into one row, then
  softmaxed (classification) or read as the score (regression).

A pair keeps text_b as the reference's truncation would leave it beside a long text_a
(whole when it fits in half of the S - 3 pair room, else cut to that half, with a
warning), and text_a gets the rest. An example that fits is packed exactly as by
truncate in every mode.

`LongText` holds the settings; its Python side (`split`, `pool_columns`) makes and
pools run_classifier's features, its graph side (`graph_windows`, `graph_pool`) does
the same inside the exported SavedModel (serving.ServingModule), so served
probabilities equal test_results.tsv.

Contracts with the other modules (bert_tf2/tasks/long_text.py (run_classifier --long_text)):
define_flags(fv) (--long_text, --head_tokens, --doc_stride, --window_pooling; run_classifier
and export_saved_model); from_settings(part, max_seq_length) -> LongText(mode, head_tokens,
doc_stride, pooling), checked (ValueError naming the flag, or the file and key of a saved
value), defaults filled for max_seq_length; a flag not given takes the value of the
long_text.json that checkpoints.settings_file finds (fv's output_dir if it has one, else
beside init_checkpoint). unused_flags(lt) -> (flag, why) of the other modes' flags (warned).
LongText.split(example, tokens_a, tokens_b, max_seq_length) -> [(tokens_a, tokens_b)] that
input_pipeline.pack_pair packs without cutting (truncate: the tokens untouched); text_b
keeps input_pipeline.truncated_pair_lengths' share. glue_data._iter_features /
file_based_convert_examples_to_features take it as split= (and index_feature=DOCUMENT_INDEX
for windows: each record's example index). record_spec(spec) adds DOCUMENT_INDEX (windows);
pool_columns(columns of window rows) -> (pooled logits, real rows per example); pool(logits,
sorted rows) is the one pooling rule (segment mean / max), used by graph_pool too.
graph_windows(ids_a, ids_b, S) is split on RaggedTensors for
serving.ServingModule(long_text=...) (classifier only; serving_ids unpooled).
write_settings(output_dir, lt) (not for truncate, unless a file is there: it is rewritten) /
read_settings(path) (keys and value types checked).
"""
import collections
import json

from absl import flags
from absl import logging
import numpy as np
import tensorflow as tf

from bert_tf2 import fileutil
from bert_tf2 import input_pipeline
from bert_tf2.trainer import checkpoints

MODES = ("truncate", "head_tail", "windows")
POOLINGS = ("mean", "max")
DOCUMENT_INDEX = "document_index"
SETTINGS_FILE = "long_text.json"
_FLAG_NAMES = {"mode": "long_text", "head_tokens": "head_tokens", "doc_stride": "doc_stride",
               "pooling": "window_pooling"}
_WARNINGS_SHOWN = 5


def define_flags(fv, doc_stride_also=""):
    """Registers --long_text, --head_tokens, --doc_stride and --window_pooling on `fv`;
    `doc_stride_also`: a sentence on what else reads --doc_stride there (export_saved_model's
    tagger and squad)."""
    flags.DEFINE_string(
        "long_text", "truncate",
        "How a text_a longer than max_seq_length is fed: truncate (the reference: its "
        "first pieces), head_tail (its first --head_tokens pieces and its last ones) or "
        "windows (every window of max_seq_length, --doc_stride apart; one output per "
        "example from --window_pooling of the windows' logits).", flag_values=fv)
    flags.DEFINE_integer(
        "head_tokens", None,
        "--long_text=head_tail: pieces kept from the start of text_a, the rest of the "
        "room from its end (default: 128/510 of max_seq_length - 2, Sun et al.'s "
        "128 + 382 at 512).", flag_values=fv)
    flags.DEFINE_integer(
        "doc_stride", None,
        "--long_text=windows: pieces between the starts of two windows, as run_squad's "
        "--doc_stride (default: half of max_seq_length - 2)." + (
            " " + doc_stride_also if doc_stride_also else ""), flag_values=fv)
    flags.DEFINE_string(
        "window_pooling", "mean",
        "--long_text=windows: how an example's window logits become one: mean or max "
        "(per class; regression: of the scores).", flag_values=fv)


class LongText(collections.namedtuple("LongText",
                                      ["mode", "head_tokens", "doc_stride", "pooling"])):
    """Resolved settings (head_tokens and doc_stride filled in for max_seq_length)."""

    @property
    def windows(self):
        """Whether an example may give several features (and pooled outputs)."""
        return self.mode == "windows"

    def to_dict(self):
        """The settings as a plain dict (what long_text.json holds)."""
        return dict(self._asdict())

    # -- Python side (run_classifier) ----------------------------------------

    def split(self, example, tokens_a, tokens_b, max_seq_length):
        """[(tokens_a, tokens_b)] of the features of one example, each fitting S.

        truncate: the tokens as they are (pack_pair cuts them as the reference does).
        """
        if self.mode == "truncate":
            return [(tokens_a, tokens_b)]
        room = max_seq_length - 2
        if tokens_b:
            pair_room = max_seq_length - 3
            _, keep_b = input_pipeline.truncated_pair_lengths(len(tokens_a), len(tokens_b), pair_room)
            if keep_b < len(tokens_b):
                _warn("example %s: text_b has %d pieces, more than the %d a pair of %d "
                      "leaves it: cut to them, as --long_text=truncate would"
                      % (getattr(example, "guid", "?"), len(tokens_b), keep_b, pair_room))
            tokens_b = tokens_b[:keep_b]
            room = pair_room - keep_b
        if len(tokens_a) <= room:
            return [(tokens_a, tokens_b)]
        if self.mode == "head_tail":
            head = min(self.head_tokens, room)
            tail = room - head
            return [(tokens_a[:head] + tokens_a[len(tokens_a) - tail:], tokens_b)]
        return [(tokens_a[span.start:span.start + span.length], tokens_b)
                for span in input_pipeline.doc_spans(len(tokens_a), room,
                                                     min(self.doc_stride, room))]

    def record_spec(self, spec):
        """The feature spec of the record files (windows: + DOCUMENT_INDEX)."""
        if not self.windows:
            return spec
        return dict(spec, **{DOCUMENT_INDEX: tf.io.FixedLenFeature([], tf.int64)})

    def pool_columns(self, columns):
        """Window rows -> (pooled logits [N, C], columns of one row per example).

        `columns`: numpy arrays over the window rows of a run, padding rows included:
        logits, DOCUMENT_INDEX, is_real_example, label_ids and batch_ids. An example's
        label is that of its windows, its batch the batch of its first window; the
        result has only real rows (is_real_example 1).
        """
        real = np.asarray(columns["is_real_example"]) > 0
        documents = np.asarray(columns[DOCUMENT_INDEX], np.int64)[real]
        order = np.argsort(documents, kind="stable")
        documents = documents[order]
        num = int(documents[-1]) + 1 if documents.size else 0
        if documents.size and not np.array_equal(np.unique(documents), np.arange(num)):
            raise RuntimeError("the window rows do not cover examples 0..%d" % (num - 1))
        logits = np.asarray(columns["logits"], np.float32)[real][order]
        pooled = self.pool(tf.constant(logits), tf.constant(documents)).numpy()
        first = np.searchsorted(documents, np.arange(num))
        pooled_columns = {
            key: np.asarray(columns[key])[real][order][first]
            for key in ("label_ids", "batch_ids") if key in columns}
        pooled_columns["is_real_example"] = np.ones([num], np.int64)
        return pooled, pooled_columns

    # -- both sides ------------------------------------------------------------

    def pool(self, logits, rows):
        """[W, C] window logits, [W] sorted example ids (each id 0.. present) -> [N, C]."""
        if self.pooling == "max":
            return tf.math.segment_max(logits, rows)
        return tf.math.segment_mean(logits, rows)

    # -- graph side (serving.ServingModule) --------------------------------------

    def graph_windows(self, ids_a, ids_b, seq_length):
        """What `split` does, on RaggedTensors [B, (pieces)] of ids, in the graph.

        Returns (window_a, window_b, rows): RaggedTensors [W, (pieces)] that
        serving.pack_inputs packs without cutting anything, and [W] int64 the input
        row of each window (sorted).
        """
        len_a = ids_a.row_lengths()
        len_b = ids_b.row_lengths()
        pair_room = seq_length - 3
        _, pair_b = input_pipeline.truncated_pair_lengths(len_a, len_b, pair_room)
        keep_b = tf.where(len_b > 0, pair_b, 0)
        room = tf.where(len_b > 0, pair_room - keep_b, tf.cast(seq_length - 2, tf.int64))
        if self.mode == "head_tail":
            rows = tf.range(ids_a.nrows())
            keep = tf.minimum(len_a, room)
            positions = tf.ragged.range(keep)
            skipped = tf.gather(len_a - keep, positions.value_rowids())
            head = tf.gather(tf.minimum(tf.cast(self.head_tokens, tf.int64), room),
                             positions.value_rowids())
            flat = positions.flat_values
            source = tf.where(flat < head, flat, flat + skipped)
            window_a = positions.with_flat_values(
                tf.gather(ids_a.flat_values,
                          source + tf.gather(ids_a.row_starts(), positions.value_rowids())))
        else:
            stride = tf.maximum(tf.minimum(tf.cast(self.doc_stride, tf.int64), room), 1)
            extra = tf.maximum(len_a - room, 0)
            counts = 1 + (extra + stride - 1) // stride
            rows = tf.repeat(tf.range(ids_a.nrows()), counts)
            starts = tf.ragged.range(counts).flat_values * tf.gather(stride, rows)
            lengths = tf.minimum(tf.gather(len_a, rows) - starts, tf.gather(room, rows))
            window_a = _ragged_slices(ids_a, rows, starts, lengths)
        window_b = _ragged_slices(ids_b, rows, tf.zeros_like(rows), tf.gather(keep_b, rows))
        return window_a, window_b, rows

    def graph_pool(self, logits, rows):
        """[W, C] window logits -> [B, C] (head_tail: one window a row, as they are)."""
        if not self.windows:
            return logits
        return self.pool(logits, rows)


def _ragged_slices(ids, rows, starts, lengths):
    """RaggedTensor [W, (lengths)]: ids[rows[w]][starts[w]:starts[w] + lengths[w]]."""
    positions = tf.ragged.range(starts, starts + lengths)
    offsets = tf.gather(ids.row_starts(), tf.gather(rows, positions.value_rowids()))
    return positions.with_flat_values(tf.gather(ids.flat_values, positions.flat_values + offsets))


def _warn(message):
    shown = _warn.__dict__.setdefault("shown", 0)
    if shown < _WARNINGS_SHOWN:
        logging.warning(message)
    elif shown == _WARNINGS_SHOWN:
        logging.warning("(further text_b warnings not shown)")
    _warn.shown = shown + 1


# ---------------------------------------------------------------------------
# Flags -> settings
# ---------------------------------------------------------------------------

# The settings from_settings reads (a part of a runner's settings).
SETTINGS = ("long_text", "head_tokens", "doc_stride", "window_pooling", "init_checkpoint",
            "output_dir")


def from_settings(chosen, max_seq_length):
    """The checked LongText of the settings (SETTINGS); one the user did not give takes the
    value of the long_text.json of the model the run uses (checkpoints.settings_file:
    --output_dir's, else the one beside --init_checkpoint), else its default.

    A bad value is a ValueError naming where it came from: the flag, or the file.
    """
    path = checkpoints.settings_file(SETTINGS_FILE, getattr(chosen, "init_checkpoint", None),
                                     getattr(chosen, "output_dir", None))
    settings = read_settings(path)
    values, shown = {}, {}
    for key, name in _FLAG_NAMES.items():
        if key in settings and not chosen.given(name):
            values[key] = settings[key]
            shown[key] = "%s: %s=%s" % (path, key, values[key])
        else:
            values[key] = getattr(chosen, name)
            shown[key] = "--%s=%s" % (name, values[key])
    if settings:
        logging.info("Long texts: %s", "; ".join(shown[key] for key in sorted(shown)))
    _check(values, shown, max_seq_length)
    head, stride = values["head_tokens"], values["doc_stride"]
    room = max_seq_length - 2
    if head is None:
        head = int(round(room * 128.0 / 510.0))
    if stride is None:
        stride = max(1, room // 2)
    return LongText(values["mode"], head, stride, values["pooling"])


def unused_flags(long_text):
    """(flag, why) pairs of the flags `long_text`'s mode leaves without effect, for
    Settings.refuse_unused."""
    why = "with long_text mode %s (it is read by --long_text=%%s)" % long_text.mode
    pairs = []
    if long_text.mode != "head_tail":
        pairs.append(("head_tokens", why % "head_tail"))
    if not long_text.windows:
        pairs += [("doc_stride", why % "windows"), ("window_pooling", why % "windows")]
    return pairs


def _check(values, shown, max_seq_length):
    """ValueError naming the source (`shown`: "--flag=value" or "file: key=value") of the
    first value out of range."""
    if values["mode"] not in MODES:
        raise ValueError("%s: must be one of %s" % (shown["mode"], ", ".join(MODES)))
    if values["pooling"] not in POOLINGS:
        raise ValueError("%s: must be one of %s" % (shown["pooling"], ", ".join(POOLINGS)))
    room = max_seq_length - 2
    for key, low, what in (("head_tokens", 0, "the pieces of one window"),
                           ("doc_stride", 1, "at most one window of pieces")):
        value = values[key]
        if value is not None and not low <= value <= room:
            hint = ("" if shown[key].startswith("--") else
                    "; pass --%s, or the --max_seq_length the model was trained with"
                    % _FLAG_NAMES[key])
            raise ValueError("%s must be between %d and max_seq_length - 2 = %d (%s)%s"
                             % (shown[key], low, room, what, hint))


def write_settings(folder, long_text):
    """Leaves SETTINGS_FILE in `folder` (a training run's output_dir) for the later runs
    and the export, so that they read the text as this run did.

    Not for truncate in a folder without one: a default run's outputs stay those of the
    reference. A file already there is rewritten, truncate included, so that it never
    describes other checkpoints than the folder's.
    """
    path = "%s/%s" % (str(folder).rstrip("/"), SETTINGS_FILE)
    if long_text.mode == "truncate" and not tf.io.gfile.exists(path):
        return None
    with fileutil.atomic_open(path, "w") as f:
        f.write(json.dumps(long_text.to_dict(), indent=2, sort_keys=True) + "\n")
    return path


# The type each setting of a SETTINGS_FILE must have (None allowed for the numbers).
_SETTING_TYPES = {"mode": str, "pooling": str, "head_tokens": int, "doc_stride": int}


def mode_for_door(init_checkpoint, model_class, door_truncates):
    """The --long_text mode of the run_classifier folder of `init_checkpoint` for a door that
    holds one text per input (a HuggingFace / keras-hub export): ValueError for windows, which
    `model_class` cannot express; (mode, note) with a note for head_tail, which
    `door_truncates` (what the door's tokenizer does instead) says, else None."""
    mode = read_settings(checkpoints.file_beside(init_checkpoint, SETTINGS_FILE)).get(
        "mode", "truncate")
    if mode == "windows":
        raise ValueError("--init_checkpoint=%s was trained with --long_text=windows (one "
                         "prediction pooled over a text's windows), which %s cannot express: "
                         "serve it with export_saved_model.py" % (init_checkpoint, model_class))
    note = None
    if mode == "head_tail":
        note = ("--long_text=head_tail: %s instead of keeping its head and tail"
                % door_truncates)
    return mode, note


def read_settings(path):
    """The dict of a SETTINGS_FILE ({} for None); ValueError naming a broken file."""
    if not path:
        return {}
    settings = fileutil.read_json(path)
    unknown = sorted(set(settings) - set(_FLAG_NAMES)) if isinstance(settings, dict) else []
    if not isinstance(settings, dict) or unknown:
        raise ValueError("%s: unknown settings %s (known: %s)"
                         % (path, unknown, ", ".join(sorted(_FLAG_NAMES))))
    for key, value in sorted(settings.items()):
        kind = _SETTING_TYPES[key]
        if not (isinstance(value, kind) and not isinstance(value, bool)
                or value is None and kind is int):
            raise ValueError("%s: %s=%s is not %s" % (path, key, json.dumps(value),
                                                      "an integer" if kind is int
                                                      else "a string"))
    return settings
