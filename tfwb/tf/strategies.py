"""Distribution strategies from a RunConfig, and the logical CPU devices they need.

``mirrored`` uses every GPU, or, on a machine without one, logical CPU devices
(``cfg.replicas``, default 2). TensorFlow allows those only before its runtime
starts, so ``tfwb.tf.train`` calls ``ensure_cpu_replicas`` when it is imported;
this splits the CPU into logical devices for the whole process (the default
strategy still uses ``/CPU:0``). Set ``TFWB_CPU_REPLICAS=1`` to skip that.
``tpu`` connects with ``TPUClusterResolver(tpu="local")`` (Colab's TPU VMs).
A knob the hardware cannot honour raises ``ValueError`` before any work.
"""
from __future__ import annotations

import os

import tensorflow as tf

from ..config import RunConfig

DEFAULT_CPU_REPLICAS = 2
_MIRRORED: dict = {}   # one MirroredStrategy per device list, reused across runs


def ensure_cpu_replicas(n: int | None = None) -> int:
    """Split the CPU into ``n`` logical devices if TF's runtime has not started yet.

    Returns the number of logical CPU devices now visible. Never raises: once the
    runtime is up the split is impossible and the current count is returned.
    """
    n = n or int(os.environ.get("TFWB_CPU_REPLICAS", DEFAULT_CPU_REPLICAS))
    cpus = tf.config.list_physical_devices("CPU")
    if n > 1 and cpus and not tf.config.list_physical_devices("GPU"):
        try:
            tf.config.set_logical_device_configuration(
                cpus[0], [tf.config.LogicalDeviceConfiguration() for _ in range(n)])
        except RuntimeError:
            pass  # runtime already initialized: keep what is there
    return len(tf.config.list_logical_devices("CPU"))


def _tpu_strategy():
    try:
        resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu="local")
        tf.config.experimental_connect_to_cluster(resolver)
        tf.tpu.experimental.initialize_tpu_system(resolver)
    except (ValueError, RuntimeError, tf.errors.NotFoundError, tf.errors.InvalidArgumentError) as e:
        raise ValueError(f"strategy='tpu' but no TPU was found ({type(e).__name__}); "
                         "pick strategy='default' (or 'mirrored' on several GPUs), "
                         "or switch Colab to a TPU runtime") from None
    return tf.distribute.TPUStrategy(resolver)


def _mirrored(devices) -> tf.distribute.Strategy:
    """The process's MirroredStrategy over ``devices``.

    Built once and reused: a second MirroredStrategy over the same devices in one
    process breaks its collectives ("Shape mismatch in the collective instance")
    as soon as a run trains a different model.
    """
    key = tuple(devices)
    if key not in _MIRRORED:
        _MIRRORED[key] = tf.distribute.MirroredStrategy(list(key))
    return _MIRRORED[key]


def make_strategy(cfg: RunConfig) -> tf.distribute.Strategy:
    """The strategy ``cfg.strategy`` names.

    Raises:
        ValueError: when the machine cannot honour it (no TPU; too few CPU
            devices for ``replicas``; ``multi_worker`` outside a cluster).
    """
    if cfg.strategy == "default":
        return tf.distribute.get_strategy()
    if cfg.strategy == "tpu":
        return _tpu_strategy()
    if cfg.strategy == "mirrored":
        gpus = tf.config.list_logical_devices("GPU")
        if gpus:
            names = [d.name for d in gpus][: cfg.replicas or len(gpus)]
            return _mirrored(names)
        cpus = [d.name for d in tf.config.list_logical_devices("CPU")]
        want = cfg.replicas or DEFAULT_CPU_REPLICAS
        if len(cpus) < want:
            raise ValueError(
                f"strategy='mirrored' with replicas={want} needs {want} logical CPU devices, "
                f"but this process has {len(cpus)}: TensorFlow started before tfwb could split "
                "the CPU. Restart the kernel and import tfwb.tf.train before other TF work "
                f"(or set TFWB_CPU_REPLICAS={want}), or use replicas={len(cpus)}")
        return _mirrored(cpus[:want])
    # multi_worker
    if "TF_CONFIG" not in os.environ:
        raise ValueError("strategy='multi_worker' needs a cluster: set TF_CONFIG for each worker "
                         "process (chapter 05 shows a local two-process cluster); "
                         "in one process use 'mirrored' instead")
    return tf.distribute.MultiWorkerMirroredStrategy()
