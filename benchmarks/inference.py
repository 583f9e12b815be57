"""Inference throughput (extract_features-style forward pass): ours vs tf-models-official.

Usage:
  python benchmarks/inference.py [--sizes base] [--dtypes fp32,bf16] [--xla off]
      [--batches N] [--repeats R] [--quick]

ours: modeling.BertModel called as extract_features.py calls it (a tf.function with an
  input signature, training=False) returning every encoder layer as float32.
peer: tf-models-official's official.nlp.modeling.networks.BertEncoder with the same
  configuration (dict outputs), returning its `encoder_outputs` as float32.

Both see the same synthetic batch (random ids, padded rows); `--batches` forward passes
per timed call, the calls of ours and the peer alternating after a warm-up call on the
batch's first row, with the forward pass's matmuls alone (the bound of any
implementation on TF's matmul kernels) and one 2048^3 fp32 tf.matmul (the peak under the
same load). The table gives median sequences/s and the model FLOP/s as a fraction of
that peak (formula: bench_util's docstring).
"""

import bench_util
from bench_util import tf

SEQ_LENGTH = 128
BATCH_SIZE = 8


def _forward_fn(call, xla):
    spec = tf.TensorSpec([None, None], tf.int32)
    return tf.function(call, input_signature=[spec, spec, spec], jit_compile=xla or None)


def build_ours(cfg, dtype, xla, tokens):
    """Returns run(n): n forward passes of our BertModel on `tokens` (ids, mask, types)."""
    import modeling
    from bert_tf2.trainer import training
    training.configure_precision(dtype)
    model = modeling.BertModel(modeling.BertConfig(**cfg))

    def layers(input_ids, input_mask, input_type_ids):
        outputs = model(input_ids, input_mask, input_type_ids, training=False)
        return [tf.cast(x, tf.float32) for x in outputs["all_encoder_layers"]]

    # As our prediction loops and exports trace it: no AutoGraph rewrite of the model's
    # Python (the same graph; the model needs none), less tracing before the timings.
    return _runner(_forward_fn(tf.autograph.experimental.do_not_convert(layers), xla), tokens)


def build_peer(cfg, dtype, xla, tokens):
    """Returns run(n): n forward passes of tf-models-official's BertEncoder."""
    from official.modeling import tf_utils
    from official.nlp.modeling import networks
    bench_util.set_policy(dtype)
    encoder = networks.BertEncoder(
        vocab_size=cfg["vocab_size"], hidden_size=cfg["hidden_size"],
        num_layers=cfg["num_hidden_layers"], num_attention_heads=cfg["num_attention_heads"],
        max_sequence_length=cfg["max_position_embeddings"],
        type_vocab_size=cfg["type_vocab_size"], inner_dim=cfg["intermediate_size"],
        inner_activation=tf_utils.get_activation(cfg["hidden_act"]),
        output_dropout=cfg["hidden_dropout_prob"],
        attention_dropout=cfg["attention_probs_dropout_prob"], dict_outputs=True)

    def layers(input_ids, input_mask, input_type_ids):
        outputs = encoder(dict(input_word_ids=input_ids, input_mask=input_mask,
                               input_type_ids=input_type_ids), training=False)
        return [tf.cast(x, tf.float32) for x in outputs["encoder_outputs"]]

    return _runner(_forward_fn(layers, xla), tokens)


def _runner(forward, tokens):
    tensors = [tf.constant(t) for t in tokens]
    first_row = [t[:1] for t in tensors]

    def run(n, warm_up=False):
        """n forward passes over the batch (warm_up: one over its first row)."""
        for _ in range(n):
            outputs = forward(*(first_row if warm_up else tensors))
        return float(outputs[-1][0, 0, 0])  # waits for the last pass
    return run


def measure(size, dtype, xla, batches, repeats, batch_size=BATCH_SIZE, peak_size=2048):
    """Rows for one configuration: sequences/s and fraction of the fp32 matmul peak."""
    cfg = bench_util.model_config(size)
    tokens = bench_util.synthetic_tokens(batch_size, SEQ_LENGTH, cfg["vocab_size"])
    ours = build_ours(cfg, dtype, xla, tokens)
    peer = build_peer(cfg, dtype, xla, tokens)
    # The warm-up call traces each side on one row (their signatures take any batch): a
    # whole batch of tf-models-official's bf16 forward took 45 s on an AVX2 CPU.
    ours(1, warm_up=True)
    peer(1, warm_up=True)
    floor = bench_util.matmul_floor(
        bench_util.step_matmuls(cfg, batch_size, SEQ_LENGTH, training=False),
        tf.bfloat16 if dtype == "bf16" else tf.float32)
    peak, peak_flops = bench_util.peak_matmul(n=peak_size)
    times = bench_util.interleaved(
        {"ours": lambda: ours(batches), "peer": lambda: peer(batches),
         "floor": lambda: [floor() for _ in range(batches)], "peak": peak}, repeats)
    bench_util.set_policy("fp32")
    bench_util.release_models()
    ours_rate, peer_rate, floor_rate = (batches * batch_size / bench_util.median(times[k])
                                        for k in ("ours", "peer", "floor"))
    peak_flops /= bench_util.median(times["peak"])
    config = "%s L%d H%d b%d s%d %s xla=%s" % (size, cfg["num_hidden_layers"],
                                              cfg["hidden_size"], batch_size, SEQ_LENGTH,
                                              dtype, "on" if xla else "off")
    rows = [bench_util.row("inference forward", config, ours_rate, peer_rate, "sequences/s"),
            bench_util.row("inference bound: its matmuls alone", config, floor_rate, peer_rate,
                           "sequences/s")]
    flops_per_seq = bench_util.forward_flops(cfg, 1, SEQ_LENGTH)
    rows.append(bench_util.row("inference FLOP/s / fp32 matmul peak", config,
                               ours_rate * flops_per_seq / peak_flops,
                               peer_rate * flops_per_seq / peak_flops, "fraction"))
    return rows


def run(sizes=("base",), dtypes=("fp32", "bf16"), xla=(False,), batches=2, repeats=5,
        quick=False, log=print):
    """Runs every (size, dtype, xla) combination; returns rows of bench_results.json.

    quick: bench_util.QUICK_SIZE (one-layer "tiny") in fp32 without XLA, 1 batch x 2
    repeats (a smoke test).
    """
    return bench_util.model_sweep(measure, sizes, dtypes, xla, batches, repeats, quick, log)


def main(argv=None):
    """Runs the inference benchmark over the sizes, dtypes and XLA settings asked for."""
    return bench_util.model_sweep_main(
        __doc__.split("\n")[0], run, argv, sizes="base", xla="off", count_flag="batches",
        count_help=(2, "forward passes per timed call"))


if __name__ == "__main__":
    main()
