"""Pretraining step throughput: our training step vs tf-models-official's, same run.

Usage:
  python benchmarks/pretraining.py [--sizes mini,base] [--dtypes fp32,bf16] [--xla off,on]
      [--steps N] [--repeats R] [--quick]

ours: the step of training.Runner (the loop run_pretraining.py runs): forward pass,
  run_pretraining.pretraining_loss, backward pass, clip to global norm 1.0, our
  AdamWeightDecay (optimization.py); with XLA only forward + backward are compiled,
  as Runner does for --enable_xla.
peer: tf-models-official's legacy BERT pretraining model
  (official.legacy.bert.bert_models.pretrain_model: BertEncoder + BertPretrainer + its
  loss layer) trained as official.legacy.bert.model_training_utils does (tape, gradients,
  official.nlp.optimization.AdamWeightDecay, which clips to global norm 1.0), with the
  same jit_compile split as ours when XLA is on.

Both run under the same OneDeviceStrategy, `--steps` optimizer steps per tf.function
call on one identical synthetic batch (dropout 0.1 active), after a warm-up call that
traces and compiles. The calls of ours and of the peer alternate with two yardsticks:
  the step's matmuls alone (same shapes, TF's matmul kernels, nothing else), whose
  sequences/s no implementation on those kernels can pass: its ratio to the peer caps
  the achievable speed-up;
  one 2048^3 fp32 tf.matmul, the machine's matmul peak under the same load.
The table gives median sequences/s, and the model FLOP/s (formula: bench_util's
docstring) as a fraction of that peak.
"""
import dataclasses
import tempfile

import bench_util  # sets up sys.path
from bench_util import np, tf

SEQ_LENGTH = 128
MAX_PREDICTIONS = 20
BATCH_SIZES = {"tiny": 2, bench_util.QUICK_SIZE: 2, "mini": 16, "base": 4}


def synthetic_batch(cfg, batch_size, seq_length=SEQ_LENGTH, max_predictions=MAX_PREDICTIONS,
                    seed=0):
    """One pretraining batch with our feature names (numpy); the peer's are mapped from it."""
    input_ids, input_mask, segment_ids = bench_util.synthetic_tokens(
        batch_size, seq_length, cfg["vocab_size"], seed)
    rng = np.random.RandomState(seed + 1)
    positions = np.zeros([batch_size, max_predictions], np.int32)
    weights = np.zeros([batch_size, max_predictions], np.float32)
    for b in range(batch_size):
        length = int(input_mask[b].sum())
        count = min(max_predictions, max(1, int(round(length * 0.15))))
        positions[b, :count] = np.sort(rng.choice(np.arange(1, length), count, replace=False))
        weights[b, :count] = 1.0
    masked_ids = np.where(weights > 0, rng.randint(1, cfg["vocab_size"], positions.shape),
                          0).astype(np.int32)
    return {
        "input_ids": input_ids, "input_mask": input_mask, "segment_ids": segment_ids,
        "masked_lm_positions": positions, "masked_lm_ids": masked_ids,
        "masked_lm_weights": weights,
        "next_sentence_labels": rng.randint(0, 2, [batch_size, 1]).astype(np.int32),
    }


def _repeat(batch):
    return tf.data.Dataset.from_tensors(batch).repeat()


def build_ours(cfg, dtype, xla, batch, workdir):
    """Returns run(n): n steps of training.Runner's loop; the loss is fetched to sync."""
    from bert_tf2 import heads
    import modeling
    import run_pretraining
    from bert_tf2.trainer import training
    training.configure_precision(dtype)
    strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
    values = dict(output_dir=workdir, learning_rate=1e-4, num_train_steps=100000,
                  num_warmup_steps=1000, enable_xla=xla, dtype=dtype, seq_length=SEQ_LENGTH,
                  max_predictions_per_seq=MAX_PREDICTIONS, autograph=False)
    fields = {f.name for f in dataclasses.fields(training.RunConfig)}
    run_config = training.RunConfig(**{k: v for k, v in values.items() if k in fields})
    bert_config = modeling.BertConfig(**cfg)
    runner = training.Runner(strategy, lambda: heads.BertPretrainer(bert_config),
                             run_config)
    iterator = iter(strategy.distribute_datasets_from_function(lambda _: _repeat(batch)))
    train_loop = runner._make_train_loop(run_pretraining.pretraining_loss)  # pylint: disable=protected-access

    def run(n):
        return float(train_loop(iterator, tf.constant(n))["loss"])
    return run


def peer_features(batch):
    """Our synthetic batch under the input names of the tf-models pretraining model."""
    return {
        "input_word_ids": batch["input_ids"], "input_mask": batch["input_mask"],
        "input_type_ids": batch["segment_ids"],
        "masked_lm_positions": batch["masked_lm_positions"],
        "masked_lm_ids": batch["masked_lm_ids"],
        "masked_lm_weights": batch["masked_lm_weights"].astype(np.int32),
        "next_sentence_labels": batch["next_sentence_labels"],
    }


def build_peer(cfg, dtype, xla, batch):
    """Returns run(n): n steps of tf-models-official's legacy BERT pretraining step."""
    from official.legacy.bert import bert_models
    from official.legacy.bert import configs
    from official.nlp import optimization as peer_optimization
    bench_util.set_policy(dtype)
    strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
    with strategy.scope():
        model, _ = bert_models.pretrain_model(configs.BertConfig(**cfg), SEQ_LENGTH,
                                              MAX_PREDICTIONS)
        optimizer = peer_optimization.create_optimizer(1e-4, 100000, 1000)
    variables = model.trainable_variables

    def gradients(features):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(model(features, training=True))
        return loss, tape.gradient(loss, variables)

    if xla:
        gradients = tf.function(gradients, jit_compile=True)

    def replicated_step(features):
        loss, grads = gradients(features)
        optimizer.apply_gradients(zip(grads, variables))
        return loss

    @tf.function
    def train_steps(iterator, steps):
        loss = strategy.run(replicated_step, args=(next(iterator),))
        for _ in tf.range(steps - 1):
            loss = strategy.run(replicated_step, args=(next(iterator),))
        return loss

    iterator = iter(strategy.distribute_datasets_from_function(
        lambda _: _repeat(peer_features(batch))))

    def run(n):
        return float(train_steps(iterator, tf.constant(n)))
    return run


def measure(size, dtype, xla, steps, repeats, batch_size=None, peak_size=2048):
    """Rows for one configuration: sequences/s and fraction of the fp32 matmul peak."""
    cfg = bench_util.model_config(size)
    batch_size = batch_size or BATCH_SIZES[size]
    batch = synthetic_batch(cfg, batch_size)
    with tempfile.TemporaryDirectory(prefix="bench_pretraining_") as workdir:
        ours = build_ours(cfg, dtype, xla, batch, workdir)
        peer = build_peer(cfg, dtype, xla, batch)
        ours(1)  # traces (and with XLA compiles) outside the timings
        peer(1)
        floor = bench_util.matmul_floor(bench_util.step_matmuls(
            cfg, batch_size, SEQ_LENGTH, MAX_PREDICTIONS, training=True),
            tf.bfloat16 if dtype == "bf16" else tf.float32)
        peak, peak_flops = bench_util.peak_matmul(n=peak_size)
        times = bench_util.interleaved(
            {"ours": lambda: ours(steps), "peer": lambda: peer(steps),
             "floor": lambda: [floor() for _ in range(steps)], "peak": peak}, repeats)
    bench_util.set_policy("fp32")
    bench_util.release_models()
    ours_rate, peer_rate, floor_rate = (steps * batch_size / bench_util.median(times[k])
                                        for k in ("ours", "peer", "floor"))
    peak_flops /= bench_util.median(times["peak"])
    config = "%s L%d H%d b%d s%d p%d %s xla=%s" % (
        size, cfg["num_hidden_layers"], cfg["hidden_size"], batch_size, SEQ_LENGTH,
        MAX_PREDICTIONS, dtype, "on" if xla else "off")
    rows = [bench_util.row("pretraining step", config, ours_rate, peer_rate, "sequences/s"),
            # "ours" here is the step's matmuls alone: no implementation on the same
            # kernels gets past it, so this ratio caps the one above.
            bench_util.row("pretraining step bound: its matmuls alone", config, floor_rate,
                           peer_rate, "sequences/s")]
    flops_per_seq = bench_util.training_flops(cfg, 1, SEQ_LENGTH, MAX_PREDICTIONS)
    rows.append(bench_util.row("pretraining FLOP/s / fp32 matmul peak", config,
                               ours_rate * flops_per_seq / peak_flops,
                               peer_rate * flops_per_seq / peak_flops, "fraction"))
    return rows


def run(sizes=("mini", "base"), dtypes=("fp32", "bf16"), xla=(False, True), steps=3,
        repeats=5, quick=False, log=print):
    """Runs every (size, dtype, xla) combination; returns rows of bench_results.json.

    quick: bench_util.QUICK_SIZE (one-layer "tiny"), one dtype and XLA off, 1 step x 2
    repeats (a smoke test).
    """
    return bench_util.model_sweep(measure, sizes, dtypes, xla, steps, repeats, quick, log)


def main(argv=None):
    """Runs the pretraining-step benchmark over the sizes, dtypes and XLA settings asked for."""
    return bench_util.model_sweep_main(
        __doc__.split("\n")[0], run, argv, sizes="mini,base", xla="off,on", count_flag="steps",
        count_help=(3, "optimizer steps per timed call"))


if __name__ == "__main__":
    main()
