"""Optimizer update throughput on BERT-sized variables: our AdamWeightDecay vs tf-models'.

Usage:
  python benchmarks/optimizer.py [--sizes mini,base] [--repeats R] [--quick] [--kernels SIZE]

One update = clip to global norm 1.0 + AdamWeightDecay apply over every trainable variable
of BertPretrainer (same shapes and names, gradients fixed), inside a tf.function:
  ours, fused (default)   optimization.create_optimizer(..., clip_norm=1.0) as
                          training.Runner uses it, with or without --enable_xla: the fused
                          update (XLA over the variables: a few computations on CPU, one per
                          device on GPU/TPU) with the clipping scale folded in, within a few
                          ulp of the TF1 update;
  ours, fused, clip before  clip_gradients, then the fused update;
  ours, op by op          fused=False: the TF1 update op for op (a dozen elementwise passes
                          per variable), bit for bit the reference's;
  ours, op by op + jit    fused=False, jit_compile=True: what --enable_xla gave before the
                          fused update (each variable's arithmetic compiled on its own);
  peer                    official.nlp.optimization.create_optimizer("adamw"): Keras Adam's
                          fused ResourceApplyAdam kernel (with bias correction, unlike the
                          reference) plus a weight-decay pass, clipping inside.
Rows: the default against the peer; the other paths of ours against our default (their
cost; not counted as wins or losses in benchmarks/README.md).
--kernels SIZE prints, instead, what one update costs in kernels for SIZE's variables: ops
in the update's TensorFlow graph, XLA computations launched per step, and kernels
(fusions and other instructions) in their optimized HLO on this machine.
"""
import argparse
import re

import bench_util
from bench_util import np, tf

MEASURE = "optimizer update (clip + AdamWeightDecay)"

# name -> (create_optimizer keyword arguments, clip_gradients before apply_gradients,
#          row label).  The first two are measured in --quick mode too.
VARIANTS = {
    "fused": (dict(clip_norm=1.0), False,
              "ours: fused, clip inside (default: what training.Runner runs)"),
    "op_by_op": (dict(fused=False), True, "ours: TF1 op by op (--nofused_optimizer)"),
    "fused_clip_outside": (dict(), True, "ours: fused, clip_gradients before it"),
    "op_by_op_jit": (dict(fused=False, jit_compile=True), True,
                     "ours: op by op, per-variable jit (--nofused_optimizer --enable_xla)"),
}


def _variables(cfg):
    """Plain variables with the shapes and names of BertPretrainer's trainable ones."""
    from bert_tf2 import heads
    import modeling
    model = heads.BertPretrainer(modeling.BertConfig(**cfg))
    model(heads.dummy_features())
    specs = [(v.name.split(":")[0], v.shape) for v in model.trainable_variables]
    bench_util.release_models()
    rng = np.random.RandomState(0)
    variables = [tf.Variable(rng.normal(0, 0.02, shape).astype(np.float32), name=name)
                 for name, shape in specs]
    grads = [tf.constant(rng.normal(0, 1e-3, shape).astype(np.float32)) for _, shape in specs]
    return variables, grads


def update_function(variables, grads, kwargs, clip_first):
    """The tf.function of one update of ours (built optimizer, fixed gradients)."""
    import optimization
    opt = optimization.create_optimizer(1e-4, 100000, 1000, **kwargs)
    opt.build(variables)

    @tf.function
    def update():
        """Clip (unless the optimizer does) and apply; returns the step counter."""
        clipped = optimization.clip_gradients(grads, 1.0) if clip_first else grads
        opt.apply_gradients(zip(clipped, variables), experimental_aggregate_gradients=False)
        return opt.iterations

    return update


def build_peer(variables, grads):
    """One update of tf-models-official's AdamWeightDecay (it clips to norm 1.0 itself)."""
    from official.nlp import optimization as peer_optimization
    opt = peer_optimization.create_optimizer(1e-4, 100000, 1000)

    @tf.function
    def update():
        """Apply (clipping inside); returns the step counter."""
        opt.apply_gradients(zip(grads, variables))
        return opt.iterations

    return lambda: update().numpy()


def measure(size, repeats, variants=tuple(VARIANTS)):
    """Rows of updates/s, ours (each variant) over the peer's, for one model size."""
    cfg = bench_util.model_config(size)
    variables, grads = _variables(cfg)
    functions = {"peer": build_peer(variables, grads)}
    for name in variants:
        kwargs, clip_first, _ = VARIANTS[name]
        functions[name] = (lambda f: lambda: f().numpy())(
            update_function(variables, grads, kwargs, clip_first))
    for function in functions.values():
        function()
    times = bench_util.interleaved(functions, repeats)
    rate = {k: 1.0 / bench_util.median(v) for k, v in times.items()}
    params = sum(int(np.prod(v.shape)) for v in variables)
    config = "%s (%.1fM parameters), %s" % (size, params / 1e6, "%s")
    # The default against the peer; every other path of ours against our default (what
    # choosing it costs), or against the peer when the default was not measured.
    rows = []
    for name in variants:
        if name == "fused" or "fused" not in rate:
            rows.append(bench_util.row(MEASURE, config % VARIANTS[name][2], rate[name],
                                       rate["peer"], "updates/s"))
        else:
            rows.append(bench_util.row(MEASURE, config % VARIANTS[name][2] + ", vs ours fused "
                                       "(default)", rate[name], rate["fused"], "updates/s",
                                       against="ours"))
    return rows


# --------------------------------------------------------------------------- #
# Kernel counts
# --------------------------------------------------------------------------- #
_NOT_KERNELS = ("parameter", "constant", "tuple", "get-tuple-element", "bitcast")
# Graph ops that launch no device kernel: bookkeeping, variable reads and writes (a
# resource assign hands over the buffer), function calls (counted apart).
_NOT_COMPUTE = {"Placeholder", "Const", "NoOp", "Identity", "IdentityN", "ReadVariableOp",
                "AssignVariableOp", "VarHandleOp", "PartitionedCall",
                "StatefulPartitionedCall"}


def _graph_ops(graph, seen=None):
    """Ops in `graph` and, recursively, in the function bodies it calls.

    Returns (TF ops outside XLA, those of them that compute (launch a kernel),
    names of the XLA-compiled functions called).
    """
    seen = set() if seen is None else seen
    count, compute, xla = 0, 0, []
    for op in graph.get_operations():
        count += 1
        compute += op.type not in _NOT_COMPUTE
        for attr in ("f", "then_branch", "else_branch", "body", "cond"):
            try:
                name = op.get_attr(attr).name
            except (ValueError, AttributeError):
                continue
            function = graph._get_function(name)  # pylint: disable=protected-access
            if function is None:
                continue
            if function.definition.attr["_XlaMustCompile"].b:
                xla.append(name)
            elif name not in seen:
                seen.add(name)
                inner, inner_compute, inner_xla = _graph_ops(function.graph, seen)
                count, compute = count + inner, compute + inner_compute
                xla += inner_xla
    return count, compute, xla


def _hlo_kernels(hlo_text, kinds=None):
    """Instructions of the ENTRY computation that run as kernels, and the fusions among them.

    (A "call" of XLA:CPU wraps one fusion split across threads.)  `kinds`, if a
    dict, is incremented per instruction kind.
    """
    entry = hlo_text[hlo_text.index("\nENTRY"):]
    ops = re.findall(r"^\s+(?:ROOT )?%\S+ = \S+ ([a-z-]+)\(", entry, flags=re.M)
    kernels = [op for op in ops if op not in _NOT_KERNELS]
    for op in kernels if kinds is not None else ():
        kinds[op] = kinds.get(op, 0) + 1
    return len(kernels), sum(op in ("fusion", "call") for op in kernels)


def kernel_counts(size="base"):
    """Rows {variant, graph_ops, compute_ops, xla_launches, hlo_kernels, hlo_fusions}.

    graph_ops: every op of the update's TF graph (nested non-XLA functions
    included); compute_ops: those that launch a kernel (not reads, assigns,
    constants or calls); xla_launches: XLA computations run per step;
    hlo_kernels / hlo_fusions: instructions of their optimized HLO (this machine's
    backend) that run as kernels, and the fusions among them.
    """
    import optimization
    variables, grads = _variables(bench_util.model_config(size))
    clipped = optimization.clip_gradients(grads, 1.0)
    rows = []
    for name, kwargs, label in [
            ("op_by_op", dict(fused=False), "TF1 op by op (fused=False)"),
            ("op_by_op_jit", dict(fused=False, jit_compile=True),
             "per-variable jit (fused=False, jit_compile)"),
            ("fused_batched", dict(fused_grouping="batched", clip_norm=1.0),
             "fused, batched XLA calls (auto on CPU), clip scale passed in"),
            ("fused_device", dict(fused_grouping="device", clip_norm=1.0),
             "fused, one XLA call per device (auto on GPU/TPU), clip inside")]:
        update = update_function(variables, grads, kwargs, "clip_norm" not in kwargs)
        graph_ops, compute_ops, xla_calls = _graph_ops(update.get_concrete_function().graph)
        kernels = fusions = 0
        if name.startswith("fused"):
            kernels, fusions = _fused_hlo_counts(optimization, variables, clipped, kwargs)
        elif name == "op_by_op_jit":
            for var, grad in zip(variables, clipped):
                k, f = _per_variable_hlo_counts(optimization, var, grad)
                kernels, fusions = kernels + k, fusions + f
        rows.append(dict(variant=label, graph_ops=graph_ops, compute_ops=compute_ops,
                         xla_launches=len(xla_calls),
                         hlo_kernels=kernels, hlo_fusions=fusions))
    return rows


def _fused_hlo_counts(optimization, variables, grads, kwargs, kinds=None):
    """HLO kernels and fusions of all the fused update's XLA computations of one step.

    The computations are those the optimizer launches on a CPU device with these
    settings (AdamWeightDecay.fused_hlo); `kinds`, if a dict, counts the kernels by kind.
    """
    opt = optimization.create_optimizer(1e-4, 100000, 1000, **kwargs)
    opt.build(variables)
    kernels = fusions = 0
    for hlo in opt.fused_hlo(grads, variables, kwargs.get("fused_grouping")):
        k, f = _hlo_kernels(hlo, kinds)
        kernels, fusions = kernels + k, fusions + f
    return kernels, fusions


def _per_variable_hlo_counts(optimization, var, grad):
    """HLO kernels and fusions of the per-variable jit update of one variable."""
    return _hlo_kernels(optimization.per_variable_hlo(grad, var))


def format_kernel_table(size, rows):
    """The kernel counts as a text table."""
    lines = ["one update (clip + AdamWeightDecay) of BERT-%s's variables:" % size,
             "%-62s %9s %11s %12s %11s %11s" % ("variant", "graph ops", "compute ops",
                                                "XLA launches", "HLO kernels", "HLO fusions")]
    for r in rows:
        lines.append("%-62s %9d %11d %12d %11d %11d" % (
            r["variant"], r["graph_ops"], r["compute_ops"], r["xla_launches"],
            r["hlo_kernels"], r["hlo_fusions"]))
    return "\n".join(lines)


def run(sizes=("mini", "base"), repeats=5, quick=False, log=print):
    """Rows of every size (quick: QUICK_SIZE, the default and op-by-op variants, 2 repeats)."""
    if quick:
        return bench_util.sweep([(bench_util.QUICK_SIZE, 2, ("fused", "op_by_op"))], measure, log)
    return bench_util.sweep([(size, repeats) for size in sizes], measure, log)


def main(argv=None):
    """Command line: the table of rows, or the kernel counts with --kernels."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="mini,base")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--kernels", default=None, metavar="SIZE",
                        help="print the kernel counts of one update for this model size")
    args = parser.parse_args(argv)
    if args.kernels:
        print(format_kernel_table(args.kernels, kernel_counts(args.kernels)))
        return
    rows = run(bench_util.csv_list(args.sizes), args.repeats, args.quick, log=None)
    print(bench_util.format_table(rows))


if __name__ == "__main__":
    main()
