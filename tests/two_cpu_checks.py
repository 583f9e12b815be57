"""The checks that need two logical CPUs, in ONE child process per test run.

Logical devices must be set before TensorFlow runs its first op, so these checks cannot
run in pytest's own process. test_optimization.py (AdamWeightDecay, fused and op by op,
dense and sparse gradients, under MirroredStrategy against a one-device oracle),
test_fused_optimizer.py (the fused adamw and lamb updates inside a LossScaleOptimizer on
two replicas) and test_run_ner.py (run_ner's token and CRF losses of each replica's part
of a batch) used a child each (four TensorFlow start-ups); results() starts one child
per test run that runs all five checks: the first caller pays for it, later ones (in this
process or another xdist worker) read its answer.

`python tests/two_cpu_checks.py REPO_ROOT` is the child: it prints RESULT{json}.
"""
import json
import os
import subprocess
import sys

_ANSWER = {}


def results(tmp_path_factory):
    """{"mirrored": {"op_by_op"|"fused": {...}}, "loss_scaling": {"adamw"|"lamb": {...}},
    "ner_loss": {...}}:
    the child's answer, made once per test run (tests/trained.py's built_once: under
    pytest-xdist the first worker to ask runs the child, the other reads its answer)."""
    if not _ANSWER:
        import trained  # pylint: disable=import-outside-toplevel
        _, answer = trained.built_once(trained.shared_root(tmp_path_factory),
                                       "two_cpu_checks", lambda folder: _run_child())
        _ANSWER.update(answer)
    return _ANSWER


def _run_child():
    from conftest import HANG_GUARD_SECONDS  # pylint: disable=import-outside-toplevel
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", TF_USE_LEGACY_KERAS="1",
               CUDA_VISIBLE_DEVICES="")
    proc = subprocess.run([sys.executable, os.path.abspath(__file__), root],
                          capture_output=True, text=True, env=env,
                          timeout=HANG_GUARD_SECONDS, check=False)
    lines = [l for l in proc.stdout.splitlines() if l.startswith("RESULT")]
    assert proc.returncode == 0 and lines, proc.stdout + proc.stderr[-4000:]
    return json.loads(lines[-1][len("RESULT"):])


def _mirrored(tf, np, strategy, optimization, fused):
    """3 AdamWeightDecay steps on two replicas (dense and IndexedSlices gradients, other
    on each replica) against one device given the replicas' summed gradients."""
    init = {"m/bert/dense/kernel": np.arange(6, dtype=np.float32).reshape(3, 2) / 10,
            "m/bert/LayerNorm/gamma": np.ones(2, np.float32),
            "m/bert/word_embeddings": np.full((4, 2), 0.5, np.float32)}
    rng = np.random.RandomState(0)
    per_replica = [[rng.normal(size=v.shape).astype(np.float32)
                    for v in init.values()] for _ in range(2)]
    emb_ids = [tf.constant([1, 3]), tf.constant([3, 3])]
    emb_vals = [tf.constant(rng.normal(size=(2, 2)), tf.float32) for _ in range(2)]

    with strategy.scope():
        variables = [tf.Variable(v, name=n) for n, v in init.items()]
        opt = optimization.create_optimizer(0.1, 10, 1, fused=fused)

    def replica_fn():
        rid = tf.distribute.get_replica_context().replica_id_in_sync_group
        dense = [tf.where(rid == 0, tf.constant(a), tf.constant(b))
                 for a, b in zip(*per_replica)]
        ids = tf.where(rid == 0, emb_ids[0], emb_ids[1])
        vals = tf.where(rid == 0, emb_vals[0], emb_vals[1])
        grads = [dense[0], dense[1], tf.IndexedSlices(vals, ids, tf.constant([4, 2]))]
        opt.apply_gradients(zip(grads, variables))

    @tf.function
    def step():
        strategy.run(replica_fn)

    for _ in range(3):
        step()

    # Single-device oracle: the default aggregation sums replica gradients.
    single = [tf.Variable(v, name=n) for n, v in init.items()]
    ref = optimization.create_optimizer(0.1, 10, 1, fused=fused)
    summed = [per_replica[0][i] + per_replica[1][i] for i in range(2)]
    emb = np.zeros((4, 2), np.float32)
    for ids, vals in zip(emb_ids, emb_vals):
        np.add.at(emb, ids.numpy(), vals.numpy())
    for _ in range(3):
        ref.apply_gradients(zip([tf.constant(summed[0]), tf.constant(summed[1]),
                                 tf.constant(emb)], single))

    out = {"iterations": int(opt.iterations.numpy()), "max_diff": 0.0,
           "replicas_agree": True, "slot_names": sorted(opt.slot_tf1_names())}
    for var, want in zip(variables, single):
        comps = [c.numpy() for c in strategy.experimental_local_results(var)]
        out["replicas_agree"] &= bool(np.array_equal(comps[0], comps[1]))
        out["max_diff"] = max(out["max_diff"], float(np.abs(comps[1] - want.numpy()).max()))
        slots = [c.numpy() for c in strategy.experimental_local_results(
            opt.get_slot(var, "adam_v"))]
        out["replicas_agree"] &= bool(np.array_equal(slots[0], slots[1]))
    return out


def _loss_scaling(tf, np, tf_keras, strategy, optimization, fused_calls, kind):
    """3 steps of the fused `kind` update in a LossScaleOptimizer on two replicas, each
    holding half of the summed gradient, against one device given the sum."""
    del fused_calls[:]

    def make():
        opt = optimization.create_optimizer(0.1, 10, 1, optimizer_type=kind, clip_norm=1.0)
        return tf_keras.mixed_precision.LossScaleOptimizer(opt, dynamic=False,
                                                           initial_scale=8.0)

    init = {"m/bert/dense/kernel": np.arange(6, dtype=np.float32).reshape(3, 2) / 10,
            "m/bert/LayerNorm/gamma": np.ones(2, np.float32)}
    rng = np.random.RandomState(0)
    grads = [[rng.normal(size=v.shape).astype(np.float32) for v in init.values()]
             for _ in range(3)]
    with strategy.scope():
        variables = [tf.Variable(v, name=n) for n, v in init.items()]
        opt = make()

    @tf.function
    def step(g):
        def replica_fn():
            opt.apply_gradients(zip([x / 2 for x in g], variables))
        strategy.run(replica_fn)

    single = [tf.Variable(v, name=n) for n, v in init.items()]
    ref = make()
    for g in grads:
        step(g)
        ref.apply_gradients(zip([tf.constant(x) for x in g], single))
    out = {"fused_calls": len(fused_calls), "max_diff": 0.0, "agree": True}
    for var, want in zip(variables, single):
        comps = [c.numpy() for c in strategy.experimental_local_results(var)]
        out["agree"] &= bool(np.array_equal(comps[0], comps[1]))
        out["max_diff"] = max(out["max_diff"], float(np.abs(comps[0] - want.numpy()).max()))
    out["iterations"] = int(opt.iterations.numpy())
    return out


def _ner_losses(tf, np, strategy, run_ner):
    """run_ner.token_loss and crf_loss of a batch of 4 windows on one device, and of each
    replica's two windows (replica 0 holds 1 + 2 labelled pieces, replica 1 5 + 4; with
    --crf's weights, window 1 has none), on seeded random logits, labels and transitions."""
    rng = np.random.RandomState(0)
    logits = rng.normal(size=(4, 5, 3)).astype(np.float32)
    labels = rng.randint(0, 3, size=(4, 5)).astype(np.int32)
    weights = np.zeros((4, 5), np.float32)
    weights[0, :1] = weights[1, :2] = weights[2, :] = weights[3, 1:] = 1
    transitions = rng.normal(size=(3, 3)).astype(np.float32)
    crf_weights = weights.copy()
    crf_weights[1] = 0

    def on_replicas(loss, arrays):
        def replica_loss():
            r = tf.distribute.get_replica_context().replica_id_in_sync_group
            return loss(*[tf.gather(tf.constant(a), [2 * r, 2 * r + 1]) for a in arrays])
        return [float(x) for x in
                strategy.experimental_local_results(strategy.run(replica_loss))]

    def crf(part_logits, part_labels, part_weights):
        return run_ner.crf_loss(part_logits, transitions, part_labels, part_weights)

    return {"replicas": on_replicas(run_ner.token_loss, (logits, labels, weights)),
            "one": float(run_ner.token_loss(*map(tf.constant, (logits, labels, weights)))),
            "crf_replicas": on_replicas(crf, (logits, labels, crf_weights)),
            "crf_one": float(crf(*map(tf.constant, (logits, labels, crf_weights))))}


def _child(root):
    import numpy as np  # pylint: disable=import-outside-toplevel
    import tensorflow as tf  # pylint: disable=import-outside-toplevel
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(
        cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    import tf_keras  # pylint: disable=import-outside-toplevel
    sys.path.insert(0, root)
    from bert_tf2.base import fused_update  # pylint: disable=import-outside-toplevel
    import optimization  # pylint: disable=import-outside-toplevel
    import run_ner  # pylint: disable=import-outside-toplevel
    fused_calls = []
    original = fused_update.fused_step
    fused_update.fused_step = lambda *a: fused_calls.append(1) or original(*a)
    strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    answer = {
        "mirrored": {name: _mirrored(tf, np, strategy, optimization, fused)
                     for name, fused in (("op_by_op", False), ("fused", True))},
        "loss_scaling": {kind: _loss_scaling(tf, np, tf_keras, strategy, optimization,
                                             fused_calls, kind)
                         for kind in ("adamw", "lamb")},
        "ner_loss": _ner_losses(tf, np, strategy, run_ner)}
    print("RESULT" + json.dumps(answer))


if __name__ == "__main__":
    _child(sys.argv[1])
