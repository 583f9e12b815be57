"""Optimizer update throughput on BERT-sized variables: our AdamWeightDecay vs tf-models'.

Usage:
  python benchmarks/optimizer.py [--sizes mini,base] [--repeats R] [--quick]

One update = clip to global norm 1.0 + AdamWeightDecay apply over every trainable variable
of BertPretrainer (same shapes and names, gradients fixed), inside a tf.function:
  ours (default)    optimization.AdamWeightDecay as training.Runner uses it without XLA:
                    the TF1 update, op for op (a dozen elementwise passes per variable),
                    bit for bit the reference's;
  ours (jit)        AdamWeightDecay(jit_compile=True), what --enable_xla turns on: the same
                    arithmetic fused by XLA into one pass per variable (last-bit
                    differences: XLA contracts multiply-adds);
  peer              official.nlp.optimization.create_optimizer("adamw"): Keras Adam's fused
                    ResourceApplyAdam kernel (with bias correction, unlike the reference)
                    plus a weight-decay pass.
On a small batch the update is a large part of a training step (see the pretraining rows).
"""
import argparse

import bench_util
from bench_util import np, tf


def _variables(cfg):
    """Plain variables with the shapes and names of BertPretrainer's trainable ones."""
    import modeling
    model = modeling.BertPretrainer(modeling.BertConfig(**cfg))
    model(modeling.dummy_features())
    specs = [(v.name.split(":")[0], v.shape) for v in model.trainable_variables]
    bench_util.release_models()
    rng = np.random.RandomState(0)
    variables = [tf.Variable(rng.normal(0, 0.02, shape).astype(np.float32), name=name)
                 for name, shape in specs]
    grads = [tf.constant(rng.normal(0, 1e-3, shape).astype(np.float32)) for _, shape in specs]
    return variables, grads


def build_ours(variables, grads, jit_compile):
    import optimization
    opt = optimization.create_optimizer(1e-4, 100000, 1000, jit_compile=jit_compile)
    opt.build(variables)

    @tf.function
    def update():
        clipped = optimization.clip_gradients(grads, 1.0)
        opt.apply_gradients(zip(clipped, variables), experimental_aggregate_gradients=False)
        return opt.iterations

    return lambda: update().numpy()


def build_peer(variables, grads):
    from official.nlp import optimization as peer_optimization
    opt = peer_optimization.create_optimizer(1e-4, 100000, 1000)

    @tf.function
    def update():
        opt.apply_gradients(zip(grads, variables))  # clips to global norm 1.0 itself
        return opt.iterations

    return lambda: update().numpy()


def measure(size, repeats):
    cfg = bench_util.model_config(size)
    variables, grads = _variables(cfg)
    functions = {"ours": build_ours(variables, grads, False),
                 "ours_jit": build_ours(variables, grads, True),
                 "peer": build_peer(variables, grads)}
    for function in functions.values():
        function()
    times = bench_util.interleaved(functions, repeats)
    rate = {k: 1.0 / bench_util.median(v) for k, v in times.items()}
    params = sum(int(np.prod(v.shape)) for v in variables)
    config = "%s (%.1fM parameters), %s" % (size, params / 1e6, "%s")
    return [
        bench_util.row("optimizer update (clip + AdamWeightDecay)",
                       config % "ours: TF1 op by op (default)", rate["ours"], rate["peer"],
                       "updates/s"),
        bench_util.row("optimizer update (clip + AdamWeightDecay)",
                       config % "ours: jit_compile (--enable_xla)", rate["ours_jit"],
                       rate["peer"], "updates/s"),
    ]


def run(sizes=("mini", "base"), repeats=5, quick=False, log=print):
    if quick:
        sizes, repeats = ("tiny",), 2
    return bench_util.sweep([(size, repeats) for size in sizes], measure, log)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="mini,base")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    rows = run(bench_util.csv_list(args.sizes), args.repeats, args.quick, log=None)
    print(bench_util.format_table(rows))


if __name__ == "__main__":
    main()
