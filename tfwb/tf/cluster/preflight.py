"""What a local cluster checks before any work: can this machine host it, can the workers import its workload.

``tfwb.tf.cluster.parent.run_cluster`` asks here first: each process's share of the cores
and GPUs (``placement``, refusing more workers than the machine can host), why the workers
run on the CPU where they do (``cpu_note``: too few GPUs, or GPUs whose memory this process's
runtime holds, ``holds_gpu_memory``), and how a worker registers a workload that is not
built in (``workload_spec``). Nothing here starts a process or TensorFlow's runtime.
"""
from __future__ import annotations

import os
from typing import Any, Dict, List, Optional, Sequence

from tfwb.tf.runner.strategies import cpu_cores
from tfwb.workloads import Ref, get_workload

#: Memory one worker process needs (TensorFlow, a small model, its pipeline), for the capacity check.
WORKER_MEMORY_MIB = 700


def visible_gpus() -> List[str]:
    """This process's GPUs as ``CUDA_VISIBLE_DEVICES`` entries (no runtime start)."""
    import tensorflow as tf

    n = len(tf.config.list_physical_devices("GPU"))
    given = os.environ.get("CUDA_VISIBLE_DEVICES")
    ids = [g.strip() for g in given.split(",") if g.strip()] if given else [str(i) for i in range(n)]
    return ids[:n]


def holds_gpu_memory(runtime_started: bool, growth: Sequence[bool], limited: Sequence[bool],
                     environ: Optional[Dict[str, str]] = None) -> bool:
    """Whether a process's TensorFlow runtime holds (nearly) all the memory of one of its GPUs.

    When TensorFlow's runtime starts, its allocator reserves nearly all of each visible GPU's
    memory, unless memory growth is on for that GPU (``tf.config.experimental.set_memory_growth``
    before the start, or ``TF_FORCE_GPU_ALLOW_GROWTH=true`` in the environment, which TensorFlow's
    allocator reads and which overrides the setting) or the GPU was given logical devices with a
    memory limit. A worker process started on such a card finds it full.

    Args:
        runtime_started: whether the process's runtime has started (before that nothing is held).
        growth: per visible GPU, whether memory growth is set on it.
        limited: per visible GPU, whether logical devices with a memory limit were configured on it.
        environ: the process's environment (default ``os.environ``).

    Returns:
        True when the runtime started and some GPU has neither growth nor a limit.

    Example:
        >>> holds_gpu_memory(True, [False], [False], {}), holds_gpu_memory(False, [False], [False], {})
        (True, False)
        >>> holds_gpu_memory(True, [False], [False], {"TF_FORCE_GPU_ALLOW_GROWTH": "true"})
        False
    """
    env = os.environ if environ is None else environ
    if not runtime_started or env.get("TF_FORCE_GPU_ALLOW_GROWTH", "").strip().lower() == "true":
        return False
    return any(not g and not lim for g, lim in zip(growth, limited))


def gpus_held(config: Any = None, started: Optional[bool] = None) -> bool:
    """Whether this process's TensorFlow runtime holds all the memory of a GPU (``holds_gpu_memory``).

    ``config`` stands in for ``tf.config`` and ``started`` for whether the runtime started
    (the tests' fakes); by default both are read from TensorFlow, without starting it.
    """
    if config is None:
        import tensorflow as tf

        config = tf.config
    gpus = config.list_physical_devices("GPU")
    if not gpus:
        return False
    if started is None:
        from tensorflow.python.eager import context   # whether the runtime started: no public call says it

        started = getattr(context.context(), "_context_handle", None) is not None
    growth = [bool(config.experimental.get_memory_growth(g)) for g in gpus]
    limited = [any(getattr(d, "memory_limit", None) for d in (config.get_logical_device_configuration(g) or ()))
               for g in gpus]
    return holds_gpu_memory(started, growth, limited)


def _available_mib() -> Optional[float]:
    try:
        import psutil

        return psutil.virtual_memory().available / 2**20
    except Exception:  # noqa: BLE001 - no psutil, or no figure: skip the memory check
        return None


def _split(items: Sequence, parts: int) -> List[list]:
    k, extra = divmod(len(items), parts)
    out, i = [], 0
    for p in range(parts):
        n = k + (1 if p < extra else 0)
        out.append(list(items[i:i + n]))
        i += n
    return out


def placement(workers: int, parameter_server: bool = False) -> List[dict]:
    """Each process's share of this machine: ``{"cpus": [core ids], "gpus": [CUDA ids]}``.

    One entry per worker; with ``parameter_server`` also the chief first and the ps last
    (both on every core, no GPU: they coordinate and hold variables, the workers compute),
    in the order of ``tfwb.cluster_spec.local``.

    With fewer GPUs than workers (one Colab T4, one A100) every worker runs on the CPU
    (no GPU at all, ``cpu_note`` says why) instead of two workers sharing a card. So does
    every worker when this process's runtime already holds its GPUs' memory (started
    without memory growth, ``holds_gpu_memory``): a worker would start on a full card.

    Raises:
        ValueError: when the machine cannot host ``workers`` processes: more than its
            CPU cores, or more than its free memory holds (``WORKER_MEMORY_MIB`` each).
            The message says what it has and what to pick.
    """
    try:
        cores = sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = list(range(cpu_cores()))
    if workers > len(cores):
        raise ValueError(f"workers={workers} is more than this machine can host: it has {len(cores)} CPU "
                         f"core(s) for this process, and each local worker needs one of its own; use "
                         f"workers <= {len(cores)}, or run workers on more machines (python -m tfwb worker)")
    gpus = visible_gpus()
    if gpus and (workers > len(gpus) or gpus_held()):
        gpus = []                 # too few GPUs, or this process holds them: every worker on the CPU (cpu_note)
    free = _available_mib()
    extra = 2 if parameter_server else 0
    if free is not None and (workers + extra) * WORKER_MEMORY_MIB > free:
        raise ValueError(f"workers={workers} is more than this machine can host: each process of the cluster "
                         f"needs about {WORKER_MEMORY_MIB} MiB and {free:.0f} MiB are free; use workers <= "
                         f"{max(1, int(free // WORKER_MEMORY_MIB) - extra)}")
    gpu_parts = _split(gpus, workers) if gpus else [[] for _ in range(workers)]
    shares = [{"cpus": c, "gpus": g} for c, g in zip(_split(cores, workers), gpu_parts)]
    if parameter_server:
        shares = [{"cpus": cores, "gpus": []}, *shares, {"cpus": cores, "gpus": []}]
    return shares


def cpu_note(workers: int, gpus: int, held: bool = False) -> Optional[str]:
    """Why a cluster of ``workers`` runs on the CPU of a machine with ``gpus`` GPUs (None: it does not).

    Two workers on one GPU would not show distribution: MultiWorkerMirroredStrategy's
    all-reduce on GPUs (NCCL) refuses two processes on one device, and two CUDA contexts
    that share its memory and compute measure their contention. On the CPU each worker
    has cores of its own, like a host, and the cluster's mechanics (start-up, all-reduce,
    identical losses) are what they are across machines. With ``held`` (this process's
    runtime holds its GPUs' memory, ``holds_gpu_memory``) the workers run on the CPU too.

    Example:
        >>> cpu_note(2, 2) is None, cpu_note(2, 1)[:44]
        (True, 'every worker runs on the CPU: this machine h')
        >>> cpu_note(2, 2, held=True)[:60]
        'every worker runs on the CPU: this process already holds the'
    """
    if gpus and held and workers <= gpus:
        return ("every worker runs on the CPU: this process already holds the memory of its GPU(s) (its "
                "TensorFlow runtime started without memory growth and reserved nearly all of each card), so a "
                "worker started on one would find it full. To give the workers the GPUs, set "
                "TF_FORCE_GPU_ALLOW_GROWTH=true before this process's first TensorFlow work (or "
                "tf.config.experimental.set_memory_growth(gpu, True) before the runtime starts), or start the "
                "cluster from a process whose TensorFlow runtime has not started on the GPUs")
    if not gpus or workers <= gpus:
        return None
    return (f"every worker runs on the CPU: this machine has {gpus} GPU(s) for {workers} workers, and workers "
            "do not share a card (the GPU all-reduce, NCCL, refuses two processes on one device, and two "
            "processes on one card measure their contention, not distribution); each worker has its own "
            f"CPU core(s), like a host. With one GPU per worker (workers <= {gpus}) each gets its own")


def workload_spec(name: str) -> Optional[dict]:
    """How a worker process registers workload ``name`` (``None`` for a built-in).

    Raises:
        ValueError: for a workload registered with Python callables (another process
            cannot import a lambda or a notebook's function) or a loss that is neither
            ``None`` nor a Keras loss object; the message says how to register it instead.
    """
    w = get_workload(name)
    if w.builtin:
        return None
    if not isinstance(w.model_fn, Ref) or not isinstance(w.data_fn, Ref) or w.source_fn is not None:
        raise ValueError(
            f"workload={name!r} was registered with Python callables, which the worker processes of a "
            f"cluster cannot import: register it with 'module:attribute' strings, e.g. "
            f"tfwb.register_workload({name!r}, model_fn='mypkg.work:model', data_fn='mypkg.work:data'), "
            "from a module the workers can import (on their sys.path or PYTHONPATH)")
    loss = None
    if w.loss is not None:
        import keras

        if not isinstance(w.loss, keras.losses.Loss):
            raise ValueError(f"workload={name!r} has a loss function the worker processes cannot receive "
                             f"({type(w.loss).__name__}); use None or a Keras loss object")
        loss = keras.losses.serialize(w.loss)
    return {"name": name, "model_fn": w.model_fn.target, "data_fn": w.data_fn.target, "loss": loss,
            "description": w.description}
