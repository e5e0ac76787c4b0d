"""Distribution strategies from a RunConfig.

``mirrored`` uses every GPU (or ``replicas`` of them), or, on a machine without one,
``replicas`` logical CPU devices (default 2) made by ``tfwb.tf.devices.setup_devices``.
``tpu`` connects with ``TPUClusterResolver(tpu="local")`` (Colab's TPU VMs).
A knob the hardware cannot honour raises ``ValueError`` before any work.
"""
from __future__ import annotations

import os

import tensorflow as tf

from ..config import RunConfig
from .devices import DEFAULT_CPU_REPLICAS, setup_devices, too_few_cpu_devices_message

_MIRRORED: dict = {}   # one MirroredStrategy per device list, reused across runs


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
        if tf.config.list_physical_devices("GPU"):      # does not start the runtime
            gpus = [d.name for d in tf.config.list_logical_devices("GPU")]
            if cfg.replicas and cfg.replicas > len(gpus):
                raise ValueError(f"replicas={cfg.replicas} is not allowed here; this machine has "
                                 f"{len(gpus)} GPU(s): use replicas <= {len(gpus)} or None (all)")
            return _mirrored(gpus[: cfg.replicas or len(gpus)])
        want = cfg.replicas or DEFAULT_CPU_REPLICAS
        setup_devices(max(want, DEFAULT_CPU_REPLICAS))   # no-op once the runtime has started
        cpus = [d.name for d in tf.config.list_logical_devices("CPU")]
        if len(cpus) < want:
            raise ValueError(too_few_cpu_devices_message(want, len(cpus)))
        if cfg.jit_compile and want > 1:
            raise ValueError(
                "jit_compile=True with strategy='mirrored' over logical CPU devices is not allowed: XLA "
                "cannot compile a step whose variables live on another CPU device (TensorFlow's XLA known "
                "issue 'tf.Variable on a different device'). Pick jit_compile=False, or strategy='default' "
                "to measure XLA")
        return _mirrored(cpus[:want])
    # multi_worker
    if "TF_CONFIG" not in os.environ:
        raise ValueError("strategy='multi_worker' needs a cluster: set TF_CONFIG for each worker "
                         "process (chapter 05 shows a local two-process cluster); "
                         "in one process use 'mirrored' instead")
    return tf.distribute.MultiWorkerMirroredStrategy()
