"""The tf.distribute strategy and precision of a run, and what a replica step asks of them.

get_strategy builds the strategy a runner's settings ask for (TPU, mirrored GPUs,
several workers, one device); configure_precision sets the tf_keras mixed-precision
policy of --dtype; global_sum / num_replicas are what the replicated loss needs.
"""
import tensorflow as tf
import tf_keras

def _tpu_strategy(trainer):
    from official.common import distribute_utils
    tpu = getattr(trainer, "tpu_name", None) or getattr(trainer, "master", None) or ""
    zone = getattr(trainer, "tpu_zone", None)
    project = getattr(trainer, "gcp_project", None)
    if zone or project:
        resolver = tf.distribute.cluster_resolver.TPUClusterResolver(
            tpu=tpu, zone=zone, project=project)
        tf.config.experimental_connect_to_cluster(resolver)
        tf.tpu.experimental.initialize_tpu_system(resolver)
        return tf.distribute.TPUStrategy(resolver)
    return distribute_utils.get_distribution_strategy("tpu", tpu_address=tpu)


def get_strategy(trainer):
    """The tf.distribute strategy a runner's settings (a part with SETTINGS) ask for.

    --use_tpu (or --distribution_strategy=tpu) gives a TPUStrategy on
    --tpu_name/--master; mirrored runs on --num_gpus GPUs (default: all), or on
    every logical CPU device when there is no GPU; multi_worker_mirrored reads
    the cluster from TF_CONFIG. Without --distribution_strategy: tpu with
    --use_tpu, mirrored with more than one GPU, else one device.
    """
    from official.common import distribute_utils
    name = getattr(trainer, "distribution_strategy", None)
    use_tpu = getattr(trainer, "use_tpu", False)
    gpus = tf.config.list_logical_devices("GPU")
    num_gpus = getattr(trainer, "num_gpus", None)
    if num_gpus is None:
        num_gpus = len(gpus)
    if num_gpus > len(gpus):
        raise ValueError("--num_gpus=%d but only %d GPU(s) are visible" % (num_gpus, len(gpus)))
    if name is None:
        name = "tpu" if use_tpu else ("mirrored" if num_gpus > 1 else "one_device")
    if use_tpu and name != "tpu":
        raise ValueError("--use_tpu conflicts with --distribution_strategy=%s" % name)
    if name == "tpu":
        return _tpu_strategy(trainer)
    if name == "mirrored":
        if num_gpus:
            devices = ["/gpu:%d" % i for i in range(num_gpus)]
        else:
            devices = [d.name for d in tf.config.list_logical_devices("CPU")]
        return tf.distribute.MirroredStrategy(devices=devices)
    if name == "multi_worker_mirrored":
        return distribute_utils.get_distribution_strategy("multi_worker_mirrored")
    if name == "one_device":
        return tf.distribute.OneDeviceStrategy("/gpu:0" if num_gpus else "/cpu:0")
    raise ValueError("unknown --distribution_strategy=%s" % name)


_DTYPES = {"fp32": tf.float32, "fp16": tf.float16, "bf16": tf.bfloat16}


def configure_precision(dtype):
    """Sets the tf_keras mixed-precision policy of --dtype (fp32 | fp16 | bf16; None: fp32).

    Call before building models. Variables stay float32; LayerNorm, softmax and
    the losses run in float32 (modeling.py casts them).
    """
    from official.modeling import performance
    dtype = dtype or "fp32"
    if dtype not in _DTYPES:
        raise ValueError("--dtype must be one of %s, got %r" % (sorted(_DTYPES), dtype))
    performance.set_mixed_precision_policy(_DTYPES[dtype])
    # fp32 means fp32: TensorFloat-32 matmuls on recent GPUs would move outputs
    # by ~1e-3 away from the reference. The bf16/fp16 modes are the fast ones.
    tf.config.experimental.enable_tensor_float_32_execution(dtype != "fp32")
    return dtype


def set_seed(seed):
    """Seeds Python, numpy and TF (initialisers, dropout) when --seed is given."""
    if seed is not None:
        tf_keras.utils.set_random_seed(seed)


def is_chief(strategy):
    """False only on the non-chief workers of a multi-worker strategy."""
    resolver = getattr(strategy, "cluster_resolver", None)
    task_type = getattr(resolver, "task_type", None)
    if task_type in (None, "chief"):
        return True
    has_chief = "chief" in resolver.cluster_spec().as_dict()
    return task_type == "worker" and not has_chief and resolver.task_id == 0


def global_sum(value):
    """Sum of `value` over all replicas (identity outside a multi-replica step)."""
    ctx = tf.distribute.get_replica_context()
    if ctx is None or ctx.num_replicas_in_sync == 1:
        return value
    return ctx.all_reduce(tf.distribute.ReduceOp.SUM, value)


def num_replicas():
    """Replicas in sync in the current replica context (1 outside one)."""
    ctx = tf.distribute.get_replica_context()
    return 1 if ctx is None else ctx.num_replicas_in_sync
