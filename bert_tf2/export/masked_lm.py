"""The masked-LM head (fill-mask) as one class: its inputs, its decoding, its doors.

`MaskedLM` is everything about the head a door needs (its Keras model is
heads.BertMaskedLM, beside the other task models; its registry entry, head_types
"masked_lm", names its HuggingFace class and weights); the doors call it:
- the Python API: `Predictor(model, ...).predict(texts)` and `predict(model, texts, ...)`
  (a model folder of run_pretraining, a TF1 pretraining checkpoint such as Google's
  release, or any folder with bert_config.json + vocab.txt beside a checkpoint that
  holds `cls/predictions/*`);
- a file of answers: extract_features.py --fill_mask_top_k=K (`write_answers`: one JSON
  line per input line);
- the HuggingFace export: convert_hf_checkpoint --direction=to_hf --model_type=masked_lm
  (BertForMaskedLM; the head registry's entry "masked_lm" names its class and weights);
- the SavedModel: export_saved_model --model_type=masked_lm; its serving_default takes
  raw strings (`text`) and gives each [MASK]'s top-k tokens, ids and probabilities
  (serving.py calls `graph_pieces`, `check_masks`, `top_k_outputs`, `served_answers`);
- LiteRT: --litert=fp32 / dynamic_int8 / int8 of that export, LiteRTPredictor(...).predict
  (texts) giving predict()'s answers (`litert_batch`, `litert_answers`: the texts encoded
  here in Python, the model's top-k decoded here);
- keras-hub: convert_keras_hub writes a pretraining checkpoint as a BertMaskedLM preset
  (its own transform's numerics: docs/keras-hub.md).

The math is the reference's get_masked_lm_output: the encoder's output at each [MASK]
position, a dense layer of hidden_size with the config's activation, LayerNorm, a product
with the word embedding table (tied output weights) plus `cls/predictions/output_bias`,
softmax over the vocabulary (heads.MaskedLMHead, the same layer run_pretraining trains).

What a text gives (the same at every door):
- `[MASK]` is written literally (upper case, as HuggingFace's tokenizer takes it); the
  text between the masks is tokenized as the classifier tokenizes a text. A text without
  a [MASK] is a ValueError naming it.
- Several [MASK]s in one text: one forward pass; each mask is answered on its own (its
  top-k given the others masked), in text order.
- One [MASK] is one WordPiece: the answers are vocabulary entries ("##ing" included); a
  word of several pieces needs as many [MASK]s.
- A single segment ([CLS] text [SEP], segment ids 0). A text longer than max_seq_length
  is cut as the classifier cuts one (its first max_seq_length - 2 pieces kept); a [MASK]
  beyond the cut is a ValueError naming the text, never a silently missing answer.
- Each answer: {"token", "token_id", "probability"} (float32 softmax), the top_k in
  descending probability, equal probabilities in vocabulary order; an id without a
  vocabulary entry (bert_config's vocab_size past the vocabulary) is the token UNNAMED.
"""
import json
import os

import numpy as np
import tensorflow as tf

from bert import modeling
from bert_tf2 import fileutil
from bert_tf2 import heads
from bert_tf2 import loaders
from bert_tf2.base import doors
from bert_tf2.export import graph_ops
from bert_tf2.export import head_refusal
from bert_tf2.tasks import predict_inputs
from bert_tf2.trainer import checkpoints

MASK = "[MASK]"
# The token of an answer whose id no vocabulary entry has (an earlier line of a duplicated
# token, or a row of a bert_config vocab_size larger than the vocabulary): every door
# names it so, its token_id kept.
UNNAMED = "[UNK]"
# The head's TF1 variables: run_pretraining's cls/predictions without the next-sentence
# head (the registry's entry, head_types, holds them with their HuggingFace keys,
# tests/test_head_registry.py checks they are these; the decoder's weight is the word
# embedding table, tied).
TF1_NAMES = ("cls/predictions/transform/dense/kernel", "cls/predictions/transform/dense/bias",
             "cls/predictions/transform/LayerNorm/gamma",
             "cls/predictions/transform/LayerNorm/beta", "cls/predictions/output_bias")
ANSWERS_FILE = "fill_mask_predictions.jsonl"


class MaskedLM(object):
    """The fill-mask head: a tokenizer, a max_seq_length and top_k; encode() texts into
    features, decode() the model's probabilities into answers (module docstring)."""

    def __init__(self, tokenizer, max_seq_length, top_k=5, names=None):
        check_at_least(max_seq_length, "max_seq_length", 3)
        check_at_least(top_k, "top_k")
        if MASK not in tokenizer.vocab:
            raise ValueError("the vocabulary has no %s token: it cannot fill masks" % MASK)
        self.tokenizer = tokenizer
        self.max_seq_length = max_seq_length
        self.top_k = min(top_k, id_count(tokenizer.vocab))
        self.inv_vocab = {i: t for t, i in tokenizer.vocab.items()}
        self.inv_vocab.update(names or {})  # an export's tokens behind asset placeholders

    def token_of(self, token_id):
        """The vocabulary entry of `token_id`, UNNAMED for an id that has none."""
        return self.inv_vocab.get(int(token_id), UNNAMED)

    def pieces(self, text, where):
        """[CLS] pieces [SEP] of one text (cut to max_seq_length) and its mask positions."""
        if not isinstance(text, str):
            raise ValueError("%s: expected a str, got %s" % (where, type(text).__name__))
        parts = text.split(MASK)
        if len(parts) < 2:
            raise ValueError("%s has no %s to fill: %r" % (where, MASK, text[:80]))
        pieces = []
        for number, part in enumerate(parts):
            if number:
                pieces.append(MASK)
            pieces.extend(self.tokenizer.tokenize(part))
        kept = self.max_seq_length - 2
        cut = [i for i, piece in enumerate(pieces) if piece == MASK and i >= kept]
        if cut:
            raise ValueError("%s: its %s at word piece %d is past max_seq_length=%d (the first "
                             "%d pieces of a text are read)" % (where, MASK, cut[0] + 1,
                                                                self.max_seq_length, kept))
        tokens = ["[CLS]"] + pieces[:kept] + ["[SEP]"]
        return tokens, [i for i, token in enumerate(tokens) if token == MASK]

    def encode(self, texts, first=0):
        """Features of a batch of texts (padded to the batch's longest) and each text's
        number of masks; `first` is the index of texts[0] in the caller's list."""
        rows = [self.pieces(text, "texts[%d]" % (first + i)) for i, text in enumerate(texts)]
        length = max(len(tokens) for tokens, _ in rows)
        width = max(len(positions) for _, positions in rows)
        ids = np.zeros([len(rows), length], np.int32)
        mask = np.zeros([len(rows), length], np.int32)
        positions = np.zeros([len(rows), width], np.int32)
        for row, (tokens, where) in enumerate(rows):
            ids[row, :len(tokens)] = self.tokenizer.convert_tokens_to_ids(tokens)
            mask[row, :len(tokens)] = 1
            positions[row, :len(where)] = where
        features = {"input_ids": ids, "input_mask": mask, "segment_ids": np.zeros_like(ids),
                    "masked_lm_positions": positions}
        return features, [len(where) for _, where in rows]

    def decode_top_k(self, token_ids, probabilities, counts):
        """Answers per text of the top-k the SavedModel / LiteRT give: token_ids and
        probabilities [N, W, K] (slot m of a row: its m-th [MASK]), counts [N]."""
        return [[[{"token": self.token_of(i), "token_id": int(i), "probability": float(p)}
                  for i, p in zip(token_ids[row][slot], probabilities[row][slot])]
                 for slot in range(int(count))] for row, count in enumerate(counts)]

    def decode(self, probabilities, counts):
        """Answers per text, per mask: the top_k {"token", "token_id", "probability"}."""
        probabilities = np.asarray(probabilities, np.float32)
        answers = []
        for row, count in enumerate(counts):
            per_mask = []
            for slot in range(count):
                p = probabilities[row, slot]
                best = top_ids(p, self.top_k)
                per_mask.append([{"token": self.token_of(i), "token_id": int(i),
                                  "probability": float(p[i])} for i in best])
            answers.append(per_mask)
        return answers


def top_ids(p, k):
    """The ids of the k highest of `p` (1-D), highest first, a tie in the lower id first:
    np.argsort(-p, kind="stable")[:k] (and tf.math.top_k's order, the SavedModel's),
    without sorting the whole vocabulary: the fewer than k values above the k-th highest
    are sorted, then come the lowest ids of those equal to it (a tie keeps id order)."""
    if k >= p.size:
        return np.argsort(-p, kind="stable")[:k]
    negated = -p
    kth = np.partition(negated, k - 1)[k - 1]
    if np.isnan(kth):  # NaNs among the k: the whole sort places them (last)
        return np.argsort(negated, kind="stable")[:k]
    above = np.flatnonzero(negated < kth)
    above = above[np.argsort(negated[above], kind="stable")]
    return np.concatenate([above, np.flatnonzero(negated == kth)[:k - above.size]])


def _model_files(model, vocab_file, bert_config_file, do_lower_case, max_seq_length):
    """(checkpoint prefix, config path, vocab path, casing, length) of `model`."""
    path = os.fspath(model)
    prefix = checkpoints.resolve_checkpoint(path, "model")
    config = bert_config_file or checkpoints.file_beside(path, fileutil.CONFIG_FILE)
    vocab = vocab_file or checkpoints.file_beside(path, fileutil.VOCAB_FILE)
    for what, value in (("bert_config_file", config), ("vocab_file", vocab)):
        if not value:
            raise ValueError("model=%s has no %s beside it: pass %s" % (
                path, fileutil.CONFIG_FILE if what == "bert_config_file" else
                fileutil.VOCAB_FILE, what))
    saved = checkpoints.file_beside(path, fileutil.MODEL_SETTINGS_FILE)
    found = fileutil.read_json(saved) if saved else {}
    if do_lower_case is None:
        do_lower_case = bool(found.get("do_lower_case", True))
    if max_seq_length is None:
        max_seq_length = default_length(found, config)
    return prefix, config, vocab, do_lower_case, max_seq_length


def id_count(vocab):
    """How many ids the vocabulary `vocab` (token -> id) uses: its highest id + 1 (a token
    on several lines has the last one's id; the earlier ones' ids have no token)."""
    return max(vocab.values()) + 1


def check_vocab_size(vocab, vocab_size, vocab_file, config_file):
    """ValueError when the vocabulary has ids the model has no row for. A vocab_size larger
    than the vocabulary is the reference's too: its extra rows are never an input, and an
    answer that is one of them is UNNAMED."""
    if id_count(vocab) > vocab_size:
        raise ValueError("vocab_file=%s has ids up to %d; bert_config_file=%s says vocab_size "
                         "%d: the model has no row for ids past %d"
                         % (vocab_file, id_count(vocab) - 1, config_file, vocab_size,
                            vocab_size - 1))


def default_length(folder_settings, bert_config_file):
    """The length every fill-mask door takes when none is given: the folder's
    model_settings.json (`folder_settings`), else the config's max_position_embeddings."""
    return folder_settings.get("max_seq_length") or modeling.BertConfig.from_json_file(
        bert_config_file).max_position_embeddings


# The features predict() hands the model: any batch, any length, any number of masks.
_FEATURE_SPECS = {name: tf.TensorSpec([None, None], tf.int32, name=name) for name in (
    "input_ids", "input_mask", "segment_ids", "masked_lm_positions")}


class Predictor(doors.Door):
    """A masked language model loaded once, filling [MASK]s of texts in memory.

        predictor = bert_tf2.export.masked_lm.Predictor("uncased_L-12_H-768_A-12/bert_model.ckpt")
        predictor.predict("paris is the [MASK] of france.")
        # -> [[[{"token": "capital", "token_id": 3007, "probability": 0.99}, ...]]]

    Args:
      model: a checkpoint (a folder with a checkpoint state file or one .index, or a file
        prefix) holding the pretraining head cls/predictions/* (run_pretraining's output,
        a Google release, an imported HF BertForMaskedLM / BertForPreTraining).
      top_k: answers per [MASK] (default 5).
      max_seq_length: default: the folder's model_settings.json, else the config's
        max_position_embeddings.
      vocab_file, bert_config_file, do_lower_case: default: the folder's files (beside
        the checkpoint), lower-casing unless its model_settings.json says otherwise.
      batch_size: texts per forward pass.

    predict(texts) -> one list per text (a str is one text), of one list per [MASK] in
    text order, of the top_k answers (module docstring: what a text gives). One predictor
    serves any number of threads; its lifecycle (built ready: the model's step traced
    once, for every shape, when it is made; refused after fork; no signal handler) is
    doors.Door's.
    """

    def __init__(self, model, top_k=5, max_seq_length=None, vocab_file=None,
                 bert_config_file=None, do_lower_case=None, batch_size=32):
        check_at_least(batch_size, "batch_size")
        self.open_door("masked_lm.Predictor")
        prefix, config_file, vocab_file, do_lower_case, max_seq_length = _model_files(
            model, vocab_file, bert_config_file, do_lower_case, max_seq_length)
        config = loaders.load_bert_config(config_file, max_seq_length)
        tokenizer = loaders.load_tokenizer(vocab_file, do_lower_case)
        check_vocab_size(tokenizer.vocab, config.vocab_size, vocab_file, config_file)
        self.head = MaskedLM(tokenizer, max_seq_length, top_k)
        self.batch_size = batch_size
        self.checkpoint = prefix
        self.model = heads.BertMaskedLM(config)
        self.model(heads.dummy_features(), training=False)
        lacking = [n for n in checkpoints.missing_variables(self.model, prefix, "model")]
        if lacking:  # what the checkpoint is instead, and how it is exported
            raise head_refusal.error("masked_lm", prefix, lacking, "fill-mask needs a "
                                     "pretraining checkpoint (run_pretraining's, a Google "
                                     "release)")
        checkpoints.load_checkpoint(self.model, prefix, log=False, flag="model")
        # Traced as written (no AutoGraph), as the runners' steps are, once, here, for
        # every batch, length and number of masks (a first call from several threads at
        # once traced it per thread, per new length).
        self._run = tf.function(lambda f: self.model(f, training=False)["probabilities"],
                                input_signature=[_FEATURE_SPECS], autograph=False
                                ).get_concrete_function()
        # (its tokenizer's batch path is not built: encode() tokenizes text by text)

    def describe_door(self):
        """The refusals' name: the class and its checkpoint."""
        return "masked_lm.Predictor of %s" % self.checkpoint

    def predict(self, texts):
        """Answers of each text (class docstring); a str is one text, [] gives []; texts
        as every runner's predict() takes them (a list, tuple, generator, pandas Series,
        numpy array, a DataFrame's "text" column or its one column)."""
        self.check_usable()
        texts = texts_of(texts)
        answers = []
        for first in range(0, len(texts), self.batch_size):
            features, counts = self.head.encode(texts[first:first + self.batch_size], first)
            probabilities = self._run({k: tf.constant(v) for k, v in features.items()})
            answers.extend(self.head.decode(probabilities.numpy(), counts))
        return answers


def texts_of(texts):
    """The list of texts predict() is given (Predictor.predict's docstring: a str is one
    text), with its one-line ValueErrors; LiteRTPredictor reads its argument so too."""
    if isinstance(texts, str):
        return [texts]
    if predict_inputs.is_frame(texts):  # a frame of one column: its texts
        return predict_inputs.frame_columns(texts, "texts", [("text",)])[0]
    # as every predict() reads its argument: one ValueError for None, a set, ...
    return predict_inputs.items(texts, "texts")


def predict(model, texts, top_k=5, **settings):
    """Predictor(model, top_k, **settings).predict(texts): one call."""
    return Predictor(model, top_k, **settings).predict(texts)


def read_texts(path, line_numbers=False):
    """The texts of a fill-mask input file: one per line, empty lines skipped; a line
    without [MASK] is a ValueError naming the file and line. `line_numbers`: also the
    line number of each, as [(number, text)]."""
    texts = []
    with tf.io.gfile.GFile(path, "r") as f:
        for number, line in enumerate(f, 1):
            line = line.rstrip("\r\n")
            if not line.strip():
                continue
            if MASK not in line:
                raise ValueError("%s, line %d: no %s to fill" % (path, number, MASK))
            texts.append((number, line) if line_numbers else line)
    return texts


def write_answers(predictor, input_path, output_path):
    """Fills every text of `input_path` (read_texts) and writes one JSON line per text,
    {"linex_index": N (0, 1, ... over the texts), "text", "masks": [[answer, ...] per
    [MASK]]}, to `output_path` (whole or not at all); returns the number of texts."""
    texts = read_texts(input_path)
    answers = predictor.predict(texts)
    with fileutil.atomic_open(output_path, "w") as f:
        for index, (text, masks) in enumerate(zip(texts, answers)):
            f.write(json.dumps({"linex_index": index, "text": text, "masks": masks},
                               ensure_ascii=False) + "\n")
    return len(texts)


# ---------------------------------------------------------------------------
# The head in a graph: the SavedModel's signature and the LiteRT model (serving.py)
# ---------------------------------------------------------------------------
# The outputs of the head on packed ids (serving_ids, LiteRT), each [B, W, K] (W: the width
# of the ids, K: top_k): slot m of a row is the row's m-th [MASK] in text order; the slots
# past its num_masks hold token id -1 and probability 0. serving_default gives them cut to
# the request's most masks, M, with the tokens as strings.
OUTPUTS = ("token_ids", "probabilities", "num_masks")


def check_at_least(value, name, least=1):
    """ValueError naming `name` unless value is an integer >= least (top_k, a length)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise ValueError("%s=%r: expected an integer >= %d" % (name, value, least))


def mask_id_of(tokenizer):
    """The id of [MASK] in an InGraphTokenizer's vocabulary asset (ValueError without)."""
    path = tokenizer.vocab_file.asset_path.numpy().decode("utf-8")
    with tf.io.gfile.GFile(path) as f:
        lines = [line.rstrip("\n") for line in f]
    if MASK not in lines:
        raise ValueError("the vocabulary has no %s token: it cannot fill masks" % MASK)
    return lines.index(MASK)


def graph_pieces(tokenizer, texts, mask_id):
    """(ids RaggedTensor [B, (pieces)], number of [MASK]s [B]) of texts, as MaskedLM.pieces
    makes them: the text split at each literal [MASK], the parts tokenized, a [MASK] id
    between two parts."""
    parts = tf.strings.split(texts, sep=MASK)
    part_ids = tokenizer.tokenize(parts.flat_values)
    # A [MASK] after every part but its text's last.
    last = tf.gather(parts.row_limits(), graph_ops.value_rowids(parts)) - 1
    after = tf.cast(tf.range(tf.size(last, out_type=tf.int64)) < last, tf.int64)
    masks = tf.RaggedTensor.from_row_lengths(
        tf.fill([tf.reduce_sum(after)], tf.cast(mask_id, part_ids.dtype)), after)
    joined = tf.concat([part_ids, masks], axis=1)
    ids = tf.RaggedTensor.from_row_lengths(joined, parts.row_lengths()).merge_dims(1, 2)
    return ids, tf.cast(tf.maximum(parts.row_lengths() - 1, 0), tf.int32)


def check_masks(texts_masks, input_ids, mask_id, max_seq_length):
    """An op failing the request (one line naming the rows) when a text has no [MASK], or
    one past max_seq_length's cut: MaskedLM.pieces' two ValueErrors."""
    kept = tf.reduce_sum(tf.cast(tf.equal(input_ids, mask_id), tf.int32), axis=1)
    none = tf.reshape(tf.where(tf.equal(texts_masks, 0)), [-1])
    cut = tf.reshape(tf.where(tf.not_equal(kept, texts_masks)), [-1])
    return [tf.debugging.Assert(tf.equal(tf.size(none), 0), [
        "input text: no %s to fill in row(s):" % MASK, none], summarize=10),
            tf.debugging.Assert(tf.equal(tf.size(cut), 0), [
                "input text: a %s past max_seq_length=%d (the first %d pieces of a text are "
                "read) in row(s):" % (MASK, max_seq_length, max_seq_length - 2), cut],
                summarize=10)]


def top_k_outputs(model, features, mask_id, top_k):
    """The head on packed ids (heads.BertMaskedLM `model`; the [MASK] ids are its positions),
    in ops LiteRT has kernels for: OUTPUTS (above)."""
    ids = features["input_ids"]
    width = ids.shape[1] if ids.shape[1] is not None else tf.shape(ids)[1]
    is_mask = tf.equal(ids, mask_id)
    num_masks = tf.reduce_sum(tf.cast(is_mask, tf.int32), axis=1)
    most = tf.maximum(tf.reduce_max(tf.concat([num_masks, [0]], axis=0)), 1)
    order = tf.range(width)[tf.newaxis, :]
    # The masks' positions in order, then the other positions (slots the answers leave out).
    key = tf.cast(tf.where(is_mask, order, order + width), tf.float32)
    positions = tf.math.top_k(-key, k=most).indices
    probabilities = model(dict(features, masked_lm_positions=positions),
                          training=False)["probabilities"]
    values, token_ids = tf.math.top_k(tf.cast(probabilities, tf.float32), k=top_k)
    # (expand_dims: LiteRT has no kernel for a bool tensor's strided slice with a new axis)
    valid = tf.expand_dims(tf.range(most)[tf.newaxis, :] < num_masks[:, tf.newaxis], -1)
    pad = [[0, 0], [0, width - most], [0, 0]]
    return {"token_ids": tf.reshape(tf.pad(tf.where(valid, token_ids, -1), pad,
                                           constant_values=-1), [-1, width, top_k]),
            "probabilities": tf.reshape(tf.pad(tf.where(valid, values, 0.0), pad),
                                        [-1, width, top_k]),
            "num_masks": num_masks}


def served_answers(outputs, tokens, tokenizer=None):
    """serving_default's outputs of top_k_outputs' `outputs`: cut to the request's most
    masks, with each token id's piece (`tokens`: a table id -> piece; -1 -> ""); the ids
    no entry of the InGraphTokenizer `tokenizer` has (its unnamed_ids(), and those from its
    vocab_size on: rows of a larger bert_config vocab_size) are UNNAMED."""
    most = tf.reduce_max(tf.concat([outputs["num_masks"], [0]], axis=0))
    token_ids = outputs["token_ids"][:, :most]
    pieces = tokens.lookup(tf.cast(token_ids, tf.int64))
    if tokenizer is not None:
        no_token = token_ids >= tokenizer.vocab_size
        unnamed = tokenizer.unnamed_ids()
        if len(unnamed):
            no_token |= tf.reduce_any(tf.equal(token_ids[..., tf.newaxis], unnamed), axis=-1)
        pieces = tf.where(no_token, UNNAMED, pieces)
        renamed = tokenizer.renamed_tokens()
        if renamed:  # their asset lines are placeholders: their own names, as do_predict's
            hit = tf.equal(token_ids[..., tf.newaxis], list(renamed))
            names = tf.gather(list(renamed.values()), tf.argmax(tf.cast(hit, tf.int32), -1))
            pieces = tf.where(tf.reduce_any(hit, axis=-1), names, pieces)
    return {"tokens": pieces, "token_ids": token_ids,
            "probabilities": outputs["probabilities"][:, :most],
            "num_masks": outputs["num_masks"]}


# ---------------------------------------------------------------------------
# LiteRT: the texts encoded in Python, the model's top-k decoded (litert_predictor.py)
# ---------------------------------------------------------------------------

def litert_batch(texts, tokenizer, max_seq_length):
    """({"input_ids", "input_mask", "segment_ids": int32 [N, max_seq_length]}, counts) of
    texts, as MaskedLM.encode makes them (its ValueErrors), at the model's full length."""
    head = MaskedLM(tokenizer, max_seq_length)
    if not texts:
        return {k: np.zeros([0, max_seq_length], np.int32)
                for k in ("input_ids", "input_mask", "segment_ids")}, []
    features, counts = head.encode(texts)
    room = max_seq_length - features["input_ids"].shape[1]
    return {k: np.pad(features[k], [[0, 0], [0, room]])
            for k in ("input_ids", "input_mask", "segment_ids")}, counts


def litert_answers(outputs, counts, predictor):
    """predict()'s answers of a LiteRT model's OUTPUTS on litert_batch's features, by the
    LiteRTPredictor `predictor`: its tokenizer (litert_predictor.asset_tokenizer) has no
    entry for the placeholder lines of the export's vocabulary asset, and export_info's
    "token_names" (export_info below) names the tokens behind them."""
    if not counts:
        return []
    names = {int(i): name for i, name in predictor.info.get("token_names", {}).items()}
    head = MaskedLM(predictor.tokenizer, predictor.max_seq_length, names=names)
    return head.decode_top_k(outputs["token_ids"], outputs["probabilities"], counts)


def export_info(top_k, tokenizer):
    """export_info.json's fields of a fill-mask export: fill_mask_top_k, and token_names
    ({"id": token}) when the InGraphTokenizer `tokenizer` holds tokens no word can give
    (their asset lines are placeholders; the LiteRT door names them from here)."""
    names = tokenizer.renamed_tokens()
    info = {"fill_mask_top_k": top_k}
    if names:
        info["token_names"] = {str(i): token for i, token in names.items()}
    return info


def litert_token_ids(outputs, counts):
    """The top-k token ids per text, per [MASK] of OUTPUTS (what the LiteRT report
    compares)."""
    return [[[int(i) for i in outputs["token_ids"][row][slot]] for slot in range(count)]
            for row, count in enumerate(counts)]
