"""Writes BERT's per-token hidden states for lines of text, as JSON lines.

Command-line compatible with the original `extract_features.py`: each input
line is one text, or a pair written "text A ||| text B"; each output line is

  {"linex_index": N, "features": [{"token": "[CLS]", "layers": [{"index": -1,
   "values": [...]}, ...]}, ...]}

with one entry per real (non-padding) WordPiece, the layers named by --layers
(indexes into the encoder layers, -1 = last), values rounded to 6 decimals.

The input is processed in chunks (read, tokenize, run the model, write), so
memory does not grow with the input; the output file appears only once
complete.

Sentence vectors (new): with --pooling (or --output_format=npy and a model whose
sentence_embedding.json names a pooling) each line gets one vector instead,
pooling.pool over the --layers given (default: the last), as
{"linex_index": N, "embedding": [...]} lines or one float32 [lines, dim] .npy
array. `SentenceEncoder` does the same from Python.
"""
from bert_tf2 import startup  # first, before tensorflow: a quiet C++ start-up (startup.py)
import json
import os
import re
import time

from absl import flags
from absl import logging
import numpy as np
import tensorflow as tf

import modeling
import tokenization
from bert_tf2 import fileutil
from bert_tf2 import flags_common
from bert_tf2 import cli
from bert_tf2 import loaders
from bert_tf2 import input_pipeline
from bert_tf2 import logs
from bert_tf2 import settings as settings_lib
from bert_tf2.export import masked_lm
from bert_tf2.tasks import glue_data
from bert_tf2.tasks import pooling
from bert_tf2.trainer import checkpoints
from bert_tf2.trainer import progress
from bert_tf2.trainer import training

_REQUIRED_FLAGS = ("input_file", "output_file", "bert_config_file", "init_checkpoint",
                   "vocab_file")

# Input lines per chunk, as a multiple of --batch_size.
_BATCHES_PER_CHUNK = 16


def define_flags(fv):
    """Registers extract_features' flags on the FlagValues `fv`."""
    flags.DEFINE_string("input_file", None,
                        "Text file, one input per line ('A ||| B' for a pair).",
                        flag_values=fv)
    flags.DEFINE_string("output_file", None, "JSON-lines file to write.", flag_values=fv)
    flags.DEFINE_string("layers", "-1,-2,-3,-4",
                        "Comma-separated encoder layer indexes to output (-1 = last).",
                        flag_values=fv)
    flags_common.define_model_flags(fv, help_overrides={
        "init_checkpoint": "Checkpoint of the BERT model (TF1 or TF2 format)."})
    flags.DEFINE_integer("batch_size", 32, "Inputs per model call.", flag_values=fv)
    flags.DEFINE_bool(
        "trim_padding", True,
        "Batch inputs of similar length together and cut each batch to its longest "
        "input (rounded up to a multiple of 16): the same values with less work. "
        "--notrim_padding runs every batch at --max_seq_length.", flag_values=fv)
    flags_common.define_pooling_flags(fv)
    flags.DEFINE_enum(
        "output_format", "json", ["json", "npy"],
        "With sentence vectors: json = one {\"linex_index\", \"embedding\"} object per "
        "line; npy = one float32 [lines, dim] numpy array (np.load). npy without "
        "--pooling uses the pooling of the model's sentence_embedding.json.",
        flag_values=fv)
    flags.DEFINE_integer(
        "fill_mask_top_k", None,
        "Fill-mask (new): instead of features, write per input line (each with one or more "
        "[MASK]) the K likeliest WordPieces and their probabilities at each [MASK], "
        "{\"linex_index\", \"text\", \"masks\"}, from the checkpoint's masked-LM head "
        "(cls/predictions: a pretraining checkpoint). docs/fill-mask.md.", lower_bound=1,
        flag_values=fv)
    flags_common.define_tpu_flags(fv, with_tpu_name=False)
    flags.DEFINE_bool(
        "use_one_hot_embeddings", False,
        "Look embeddings up with a one-hot matrix product instead of a gather "
        "(faster on TPUs).", flag_values=fv)


# One field per flag above: run(Settings(input_file=..., output_file=..., ...)) from Python.
Settings = settings_lib.settings_class(define_flags, __name__)


# ---------------------------------------------------------------------------
# Input
# ---------------------------------------------------------------------------

# BertModel's pooler: no output of extract_features reads it.
_POOLER_VARIABLES = ("bert/pooler/dense/kernel", "bert/pooler/dense/bias")

class InputExample(object):
    """One input line: its 0-based line number and one or two texts."""

    def __init__(self, unique_id, text_a, text_b):
        self.unique_id = unique_id
        self.text_a = text_a
        self.text_b = text_b


class InputFeatures(object):
    """Model inputs of one line, with its WordPiece tokens ([CLS] ... [SEP])."""

    def __init__(self, unique_id, tokens, input_ids, input_mask, input_type_ids):
        self.unique_id = unique_id
        self.tokens = tokens
        self.input_ids = input_ids
        self.input_mask = input_mask
        self.input_type_ids = input_type_ids


# Greedy: a line with several " ||| " splits at the last one.
_PAIR_SEPARATOR = re.compile(r"^(.*) \|\|\| (.*)$")


def parse_line(line, unique_id):
    """An `InputExample` from one raw input line (surrounding whitespace dropped)."""
    line = tokenization.convert_to_unicode(line).strip()
    match = _PAIR_SEPARATOR.match(line)
    if match is None:
        return InputExample(unique_id, line, None)
    return InputExample(unique_id, match.group(1), match.group(2))


def iter_examples(input_file):
    """Yields an `InputExample` per line of `input_file`, numbered from 0.

    Lines end at "\\n" only; an empty line is an example with empty text.
    """
    with tf.io.gfile.GFile(input_file, "r") as reader:
        unique_id = 0
        while True:
            line = reader.readline()
            if not line:
                return
            yield parse_line(line, unique_id)
            unique_id += 1


def read_examples(input_file):
    """All examples of `input_file` as a list (see iter_examples)."""
    return list(iter_examples(input_file))


def _to_features(example, tokens_a, tokens_b, seq_length, tokenizer, log):
    tokens, input_ids, input_mask, type_ids = input_pipeline.pack_pair(
        tokens_a, tokens_b, seq_length, tokenizer)
    if log and logs.details_shown():
        glue_data.log_packed(("unique_id", example.unique_id), tokens, input_ids, input_mask,
                             ("input_type_ids", type_ids))
    return InputFeatures(example.unique_id, tokens, input_ids, input_mask, type_ids)


def convert_examples_to_features(examples, seq_length, tokenizer, first_index=0):
    """`InputFeatures` for `examples`: [CLS] A [SEP] (B [SEP]), truncated, zero-padded.

    A pair is cut to seq_length - 3 WordPieces by dropping tokens from the end
    of the longer text, a single text to seq_length - 2. The examples numbered
    below 5 (counting from `first_index`) are logged.
    """
    examples = list(examples)
    batch_tokenize = getattr(tokenizer, "tokenize_batch", None)
    pairs = [ex for ex in examples if ex.text_b]
    if batch_tokenize is not None and examples:
        tokenized = [list(t) for t in batch_tokenize(
            [ex.text_a for ex in examples] + [ex.text_b for ex in pairs])]
        tokens_a = tokenized[:len(examples)]
        tokens_b = iter(tokenized[len(examples):])
        tokens_b = [next(tokens_b) if ex.text_b else None for ex in examples]
    else:
        tokens_a = [tokenizer.tokenize(ex.text_a) for ex in examples]
        tokens_b = [tokenizer.tokenize(ex.text_b) if ex.text_b else None for ex in examples]
    return [_to_features(ex, a, b, seq_length, tokenizer, first_index + i < 5)
            for i, (ex, a, b) in enumerate(zip(examples, tokens_a, tokens_b))]


def input_fn_builder(features, seq_length):
    """The reference's input_fn(params) over in-memory `InputFeatures`.

    One pass in order, batches of params["batch_size"] (the last one partial) of
    int32 unique_ids [B] and input_ids, input_mask, input_type_ids [B, seq_length].
    """
    features = list(features)

    def column(name, shape):
        return np.array([getattr(f, name) for f in features], np.int32).reshape(shape)
    return input_pipeline.in_memory_input_fn({
        "unique_ids": column("unique_id", [-1]),
        "input_ids": column("input_ids", [-1, seq_length]),
        "input_mask": column("input_mask", [-1, seq_length]),
        "input_type_ids": column("input_type_ids", [-1, seq_length]),
    })


# The reference's name, for code that imported it from extract_features.
_truncate_seq_pair = input_pipeline.truncate_seq_pair


def parse_layers(text, num_hidden_layers=None):
    """'-1,-2' -> [-1, -2]; each index must name an encoder layer."""
    return pooling.parse_layers(text, num_hidden_layers)


# ---------------------------------------------------------------------------
# Output
# ---------------------------------------------------------------------------

def feature_json(feature, layer_indexes, layer_outputs):
    """The output line (without newline) of one input.

    Args:
      feature: its `InputFeatures`.
      layer_indexes: the --layers values.
      layer_outputs: one [seq_length, hidden] array per entry of layer_indexes.
    """
    tokens = []
    for position, token in enumerate(feature.tokens):
        layers = []
        for index, output in zip(layer_indexes, layer_outputs):
            values = [round(v, 6) for v in output[position].tolist()]
            layers.append({"index": index, "values": values})
        tokens.append({"token": token, "layers": layers})
    return json.dumps({"linex_index": feature.unique_id, "features": tokens})


def embedding_json(unique_id, vector):
    """The output line (without newline) of one sentence vector.

    Nine significant digits: the float32 value read back exactly.
    """
    values = ",".join("%.9g" % v for v in vector.tolist())
    return '{"linex_index": %d, "embedding": [%s]}' % (unique_id, values)


# ---------------------------------------------------------------------------
# Model
# ---------------------------------------------------------------------------

class FeatureExtractor(object):
    """A BERT encoder loaded from a checkpoint, returning chosen encoder layers.

    With `pooling` (a pooling.PoolingSpec) it returns one output instead: the
    [batch, dim] sentence vectors of pooling.pool over pooling.layers.
    With `skip_padding` the encoder runs on the real tokens only
    (modeling.set_skip_padding): the same values at every real token, zeros at the
    padding positions, which neither the JSON lines nor the pooling read. Without it,
    its attention stops at each batch's last real key (modeling.set_key_trimming: the
    same values at every position; it runs on this process's CPU or GPU, never XLA).
    """

    def __init__(self, bert_config, init_checkpoint, layer_indexes, seq_length,
                 use_one_hot_embeddings=False, pooling_spec=None, skip_padding=False):
        self.layer_indexes = list(layer_indexes)
        self.pooling = pooling_spec
        self.model = modeling.BertModel(bert_config,
                                        use_one_hot_embeddings=use_one_hot_embeddings)
        dummy = tf.zeros([1, seq_length], tf.int32)
        self.model(dummy, tf.ones_like(dummy), dummy, training=False)
        # Every encoder variable the features come from must be found (a task checkpoint's
        # head is left aside; the pooler, which no output reads, may be absent: a converted
        # model without one).
        checkpoints.check_serves(self.model, init_checkpoint, "--init_checkpoint",
                                 unused_too=False, may_lack=_POOLER_VARIABLES)
        checkpoints.load_checkpoint(self.model, init_checkpoint)
        modeling.set_skip_padding(self.model, skip_padding)
        modeling.set_key_trimming(self.model)
        self.seq_length = seq_length
        # Any length up to seq_length: trimmed batches share one graph.
        spec = tf.TensorSpec([None, None], tf.int32)
        # Traced as written, as the runners' steps are (training.step_function): the
        # encoder and pooling use tf.cond / tf.while_loop where they branch on tensors.
        self._encode = training.run_function(self._layers, input_signature=[spec, spec, spec],
                                             autograph=False)

    def _layers(self, input_ids, input_mask, input_type_ids):
        outputs = self.model(input_ids, input_mask, input_type_ids, training=False)
        all_layers = outputs["all_encoder_layers"]
        if self.pooling is not None:
            spec = self.pooling
            return [pooling.pool([all_layers[i] for i in spec.layers], input_mask, spec.mode,
                                 spec.normalize)]
        return [tf.cast(all_layers[i], tf.float32) for i in self.layer_indexes]

    def __call__(self, features, length=None):
        """One [len(features), length, hidden] numpy array per layer index.

        (With pooling: one [len(features), dim] array.)

        `length` (default seq_length) cuts the inputs to their first `length`
        positions; it must cover every real token of `features`.
        """
        length = self.seq_length if length is None else length

        def column(name):
            return tf.constant(np.array([getattr(f, name)[:length] for f in features],
                                        np.int32))
        outputs = self._encode(column("input_ids"), column("input_mask"),
                               column("input_type_ids"))
        return [o.numpy() for o in outputs]


class SentenceEncoder(object):
    """Sentence vectors from Python, as `extract_features.py --pooling` writes them.

        encoder = SentenceEncoder("minilm_tf")   # a convert_hf_checkpoint --output_dir
        vectors = encoder.encode(["A man plays a guitar.", "Someone makes music."])

    `model_dir` holds bert_config.json, vocab.txt and the checkpoint; its
    sentence_embedding.json (if any) gives the defaults of every argument left at
    None. Without one, pooling defaults to "mean" over the last layer, no
    normalisation, max_seq_length 128 and do_lower_case True.
    """

    def __init__(self, model_dir=None, pooling_mode=None, normalize=None, layers=None,
                 max_seq_length=None, do_lower_case=None, batch_size=32,
                 bert_config_file=None, init_checkpoint=None, vocab_file=None):
        init_checkpoint = init_checkpoint or model_dir
        settings = pooling.read_settings(checkpoints.settings_file(pooling.SETTINGS_FILE,
                                                                   init_checkpoint))

        def pick(value, key, default):
            return settings.get(key, default) if value is None else value
        bert_config = modeling.BertConfig.from_json_file(
            bert_config_file or os.path.join(model_dir, "bert_config.json"))
        layers = pooling.parse_layers(",".join(str(x) for x in pick(layers, "layers", [-1])),
                                      bert_config.num_hidden_layers, flag="layers")
        self.spec = pooling.PoolingSpec(pick(pooling_mode, "pooling", "mean"), layers,
                                        pick(normalize, "normalize", False))
        self.max_seq_length = pick(max_seq_length, "max_seq_length", 128)
        if self.max_seq_length > bert_config.max_position_embeddings:
            raise ValueError("max_seq_length=%d is longer than the model's %d positions"
                             % (self.max_seq_length, bert_config.max_position_embeddings))
        self.tokenizer = tokenization.FullTokenizer(
            vocab_file or os.path.join(model_dir, "vocab.txt"),
            do_lower_case=pick(do_lower_case, "do_lower_case", True))
        self.batch_size = batch_size
        self.extractor = FeatureExtractor(bert_config, init_checkpoint, layers,
                                          self.max_seq_length, pooling_spec=self.spec,
                                          skip_padding=True)

    def encode(self, texts):
        """[len(texts), dim] float32 vectors; a text is a string or an (a, b) pair."""
        examples = [InputExample(i, *(t if isinstance(t, (tuple, list)) else (t, None)))
                    for i, t in enumerate(texts)]
        if not examples:
            raise ValueError("no texts to encode")
        features = convert_examples_to_features(examples, self.max_seq_length,
                                                self.tokenizer, first_index=5)
        return embed_features(features, self.extractor, self.batch_size)


# ---------------------------------------------------------------------------
# The run
# ---------------------------------------------------------------------------

def _chunks(iterable, size):
    chunk = []
    for item in iterable:
        chunk.append(item)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


@startup.keeps_process_settings
def run(settings):
    """Reads input_file, writes output_file; returns a settings_lib.Result naming it
    (outputs["output_file"]).

    `settings`: a Settings, or the parsed flags of define_flags.
    """
    settings = Settings.of(settings)
    if settings.fill_mask_top_k is not None:
        return _fill_masks(settings)
    settings, bert_config, layer_indexes, spec = _check_settings(settings)
    tokenizer = loaders.load_tokenizer(settings.vocab_file, settings.do_lower_case)
    # Full float32 matmuls (no TF32 on recent GPUs): the values are written with
    # 6 decimals and should be those of the original float32 model.
    tf.config.experimental.enable_tensor_float_32_execution(False)
    extractor = FeatureExtractor(bert_config, settings.init_checkpoint, layer_indexes,
                                 settings.max_seq_length, settings.use_one_hot_embeddings, spec,
                                 skip_padding=settings.trim_padding)
    if spec is None:
        written = _write_features(settings, tokenizer, extractor, layer_indexes)
    else:
        logging.info("Sentence vectors: %s", spec)
        written = _write_embeddings(settings, tokenizer, extractor)
    logging.info("Wrote %d lines to %s", written, settings.output_file)
    return settings_lib.Result(outputs={"output_file": settings.output_file})


def _fill_masks(settings):
    """--fill_mask_top_k: masked_lm.write_answers over --input_file."""
    settings.require(*_REQUIRED_FLAGS)
    settings.refuse_unused([(name, "with --fill_mask_top_k (its answers are the masked-LM "
                                   "head's, not features)")
                            for name in ("layers", "pooling", "normalize", "output_format")])
    fileutil.check_output_file(settings.output_file, "--output_file")
    fileutil.check_utf8(settings.input_file, "--input_file")
    fileutil.prepare_output_file(settings.output_file, "--output_file",
                                 inputs=[("--input_file", settings.input_file)])
    given = {name: getattr(settings, name) for name in ("max_seq_length", "do_lower_case")
             if settings.given(name)}  # else the folder's (model_settings.json, the config)
    predictor = masked_lm.Predictor(
        settings.init_checkpoint, settings.fill_mask_top_k, vocab_file=settings.vocab_file,
        bert_config_file=settings.bert_config_file, batch_size=settings.batch_size, **given)
    written = masked_lm.write_answers(predictor, settings.input_file, settings.output_file)
    logging.info("Filled the masks of %d lines into %s", written, settings.output_file)
    return settings_lib.Result(outputs={"output_file": settings.output_file})


def _check_settings(settings):
    """Checks the settings, the input and the output path before any work (the model is
    loaded after); returns (settings, bert_config, layer indexes, pooling spec).

    The returned settings take max_seq_length and do_lower_case from the model's
    sentence_embedding.json where the user left them out; the pooling spec is None for
    the reference's per-token output.
    """
    settings.require(*_REQUIRED_FLAGS)
    if settings.batch_size < 1:
        raise ValueError("--batch_size must be positive")
    # The reference's TPU flags, accepted as it did: this port runs on the local devices.
    settings.refuse_unused([(name, "here: extract_features runs on the local devices (CPU/GPU)")
                            for name in ("use_tpu", "master", "num_tpu_cores")], warn_only=True)
    fileutil.check_output_file(settings.output_file, "--output_file")
    saved = pooling.model_folder_settings(settings.init_checkpoint)
    settings = settings.with_defaults({k: saved[k] for k in ("max_seq_length", "do_lower_case")
                                       if k in saved})
    bert_config = loaders.load_bert_config(settings.bert_config_file,
                                           settings.max_seq_length)
    mode = settings.pooling
    if mode is None and settings.output_format == "npy":
        mode = saved.get("pooling")
        if mode is None:
            raise ValueError("--output_format=npy writes sentence vectors: give --pooling "
                             "(no %s beside --init_checkpoint names one)"
                             % pooling.SETTINGS_FILE)
    if mode is None:
        settings.refuse_unused([(
            "normalize", "without sentence vectors (--pooling): the per-token output is "
                         "written as the model computes it")])
        layers, spec = parse_layers(settings.layers, bert_config.num_hidden_layers), None
    else:
        spec = pooling.chosen_spec(settings.part("layers", "normalize"), saved, mode,
                                   bert_config.num_hidden_layers)
        layers = spec.layers
    fileutil.check_utf8(settings.input_file, "--input_file")
    if spec is not None and tf.io.gfile.stat(settings.input_file).length == 0:
        raise ValueError("--input_file %s is empty: there is no line to embed"
                         % settings.input_file)
    fileutil.prepare_output_file(settings.output_file, "--output_file",
                                 inputs=[("--input_file", settings.input_file)])
    return settings, bert_config, layers, spec


def _write_features(settings, tokenizer, extractor, layer_indexes):
    """Streams the input through the model a chunk at a time into the JSONL output."""
    chunk_size = settings.batch_size * _BATCHES_PER_CHUNK
    start = time.time()
    written = 0
    with fileutil.atomic_open(settings.output_file, "w") as writer, \
            progress.Stage("predict") as display:
        for examples in _chunks(iter_examples(settings.input_file), chunk_size):
            features = convert_examples_to_features(examples, settings.max_seq_length,
                                                    tokenizer, first_index=written)
            lines = _feature_lines(features, extractor, layer_indexes, settings.batch_size,
                                   settings.trim_padding)
            writer.write("".join(line + "\n" for line in lines))
            written += len(features)
            display.update(-(-written // settings.batch_size), written)
            if logs.details_shown():
                logging.info("Processed %d lines (%.1f lines/s)", written,
                             written / max(time.time() - start, 1e-9))
    return written


def _write_embeddings(settings, tokenizer, extractor):
    """One vector per input line: JSON lines as chunks go, or one .npy at the end."""
    chunk_size = settings.batch_size * _BATCHES_PER_CHUNK
    npy = settings.output_format == "npy"
    start = time.time()
    vectors = []
    written = 0
    with fileutil.atomic_open(settings.output_file, "wb" if npy else "w") as writer, \
            progress.Stage("predict") as display:
        for examples in _chunks(iter_examples(settings.input_file), chunk_size):
            features = convert_examples_to_features(examples, settings.max_seq_length,
                                                    tokenizer, first_index=written)
            chunk = embed_features(features, extractor, settings.batch_size,
                                   settings.trim_padding)
            if npy:
                vectors.append(chunk)
            else:
                writer.write("".join(embedding_json(f.unique_id, v) + "\n"
                                     for f, v in zip(features, chunk)))
            written += len(features)
            display.update(-(-written // settings.batch_size), written)
            if logs.details_shown():
                logging.info("Embedded %d lines (%.1f lines/s)", written,
                             written / max(time.time() - start, 1e-9))
        if npy:
            np.save(writer, np.concatenate(vectors, axis=0))
    return written


def embed_features(features, extractor, batch_size, trim_padding=True):
    """[len(features), dim] float32 vectors of a pooling FeatureExtractor, in input order.

    Trimmed batches run at their longest input's exact length (sentence-transformers'
    padding): a pooled vector is the same at any padded length, and one graph takes
    every length.
    """
    vectors = [None] * len(features)
    for index, outputs in layer_outputs(features, extractor, batch_size, trim_padding,
                                        bucket_width=1):
        vectors[index] = outputs[0]
    return np.stack(vectors).astype(np.float32, copy=False)


def layer_outputs(features, extractor, batch_size, trim_padding,
                  bucket_width=input_pipeline.DEFAULT_BUCKET_WIDTH):
    """Yields (index into `features`, [one [length, hidden] array per layer]) in batch order.

    With trim_padding the features are batched longest first and each batch runs
    cut to input_pipeline.bucket_length of its longest input (length >= every
    real token); otherwise batches of consecutive features run at the full length.
    """
    if trim_padding:
        lengths = [len(f.tokens) for f in features]
        batches = input_pipeline.length_sorted_batches(lengths, batch_size)
    else:
        batches = [range(i, min(i + batch_size, len(features)))
                   for i in range(0, len(features), batch_size)]
    for indexes in batches:
        batch = [features[i] for i in indexes]
        length = None
        if trim_padding:
            length = input_pipeline.bucket_length(max(len(f.tokens) for f in batch),
                                                  extractor.seq_length, bucket_width)
        outputs = extractor(batch, length)
        for row, index in enumerate(indexes):
            yield int(index), [o[row] for o in outputs]


def _feature_lines(features, extractor, layer_indexes, batch_size, trim_padding):
    """The output lines of `features`, in their order."""
    lines = [None] * len(features)
    for index, outputs in layer_outputs(features, extractor, batch_size, trim_padding):
        lines[index] = feature_json(features[index], layer_indexes, outputs)
    return lines


def main():
    """Console entry point."""
    cli.run_cli(define_flags, run)


if __name__ == "__main__":
    main()
