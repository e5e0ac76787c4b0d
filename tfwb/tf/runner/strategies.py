"""Distribution strategies from a RunConfig, and how each one splits the data.

``mirrored`` uses every GPU (or ``replicas`` of them), or, on a machine without one,
``replicas`` logical CPU devices (default 2) made by ``tfwb.tf.runner.devices.setup_devices``.
``tpu`` connects with ``TPUClusterResolver(tpu="local")`` (Colab's TPU VMs) and initialises
the TPU system once per process; when TensorFlow cannot drive the TPU, the error names the
installed TensorFlow and libtpu and the pair TensorFlow's release names (``tfwb.book.TPU_PAIR``).
``multi_worker`` is ``MultiWorkerMirroredStrategy`` in a process that has a
``TF_CONFIG`` (a worker); ``parameter_server`` is ``ParameterServerStrategy`` with a
``ClusterCoordinator`` in the cluster's ``chief`` (its workers and parameter servers
only serve). ``tfwb.run`` in any other process starts a local cluster for either
(``tfwb.tf.cluster.parent``). A knob the hardware cannot honour raises ``ValueError`` before
any work.

Every strategy trains on the same global batches: ``batch_size`` is the global batch,
each of the ``num_replicas_in_sync`` replicas gets ``batch_size / replicas`` examples of
it, and the loss is averaged over the global batch (``tf.nn.compute_average_loss`` in
``tfwb.tf.runner.train_step``), so one device, two mirrored replicas and two workers take the same
steps (``distribute`` picks the auto-shard policy that keeps it so across workers).
"""
from __future__ import annotations

import importlib.metadata as md
import os
import textwrap
from typing import List, Tuple

import tensorflow as tf

from tfwb import cluster_spec
from tfwb.book import TPU_PAIR
from tfwb.config import RunConfig
from tfwb.hardware import detect_tpu
from tfwb.tf.runner.devices import DEFAULT_CPU_REPLICAS, setup_devices, too_few_cpu_devices_message

_MIRRORED: dict = {}   # one MirroredStrategy per device list, reused across runs
_MULTI_WORKER: dict = {}   # this worker process's MultiWorkerMirroredStrategy, made once
_KEPT: list = []           # a worker's distributed iterators, never deleted (see _KeptIterators)
_PARAMETER_SERVER: dict = {}   # the chief's ParameterServerStrategy and ClusterCoordinator, made once
_TPU: dict = {}            # this process's TPUStrategy: the TPU system is initialised once per process
CLUSTER_STRATEGIES = ("multi_worker", "parameter_server")

#: The auto-shard policy a multi-worker run uses, and why (shown in the run's notes).
AUTO_SHARD_POLICY = "DATA"


def cpu_cores() -> int:
    """CPU cores this process may use (its affinity), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def in_worker() -> bool:
    """True in a process that is a worker of a cluster: it has a ``TF_CONFIG``."""
    return "TF_CONFIG" in os.environ


def tpu_versions() -> dict:
    """``{"tensorflow", "tensorflow-tpu", "libtpu"}``: the installed version of each (None when absent).

    ``"tensorflow"`` is the running TensorFlow's own version; the other two are what pip
    installed (``tensorflow-tpu`` is TensorFlow's TPU build; any other build cannot drive a TPU).
    """
    def version(name):
        try:
            return md.version(name)
        except md.PackageNotFoundError:
            return None

    return {"tensorflow": tf.__version__, "tensorflow-tpu": version("tensorflow-tpu"), "libtpu": version("libtpu")}


def tpu_unavailable_message(attached: bool, versions: dict, error: str) -> str:
    """Why ``strategy='tpu'`` cannot run here, with the versions and the fix.

    Args:
        attached: whether a TPU looks attached (``tfwb.hardware.detect_tpu``).
        versions: ``tpu_versions()``.
        error: what TensorFlow raised, as ``"Type: message"`` (first line).

    Example:
        >>> print(tpu_unavailable_message(True, {"tensorflow": "2.20.0", "tensorflow-tpu": "2.20.0",
        ...                                      "libtpu": "0.0.21.1"}, "NotFoundError: No TPU platform found"))
        ... # doctest: +NORMALIZE_WHITESPACE
        strategy='tpu': a TPU is attached, but TensorFlow cannot drive it: TensorFlow 2.20.0 (tensorflow-tpu
        2.20.0) with libtpu 0.0.21.1 (NotFoundError: No TPU platform found). TensorFlow's release pairs
        tensorflow-tpu==2.20.0 with libtpu==0.0.14: pip install tensorflow-tpu==2.20.0 libtpu==0.0.14, then
        restart the kernel (on Colab the book's first cell does it).
    """
    pair = " ".join(f"{n}=={v}" for n, v in TPU_PAIR.items())
    build = (f"tensorflow-tpu {versions['tensorflow-tpu']}" if versions.get("tensorflow-tpu")
             else "not TensorFlow's TPU build, tensorflow-tpu")
    libtpu = f"libtpu {versions['libtpu']}" if versions.get("libtpu") else "no libtpu"
    have = f"TensorFlow {versions.get('tensorflow')} ({build}) with {libtpu}"
    if not attached:
        return (f"strategy='tpu' needs a TPU, and this machine has no TPU attached (no /dev/accel*, no "
                f"/dev/vfio device group without a GPU, no TPU_NAME); here: {have} ({error}): "
                "pick strategy='default' (or 'mirrored' on several GPUs), or run on a TPU VM (Colab: a TPU runtime)")
    return (f"strategy='tpu': a TPU is attached, but TensorFlow cannot drive it: {have} ({error}). "
            f"TensorFlow's release pairs {' with '.join(pair.split())}: pip install {pair}, then restart "
            "the kernel (on Colab the book's first cell does it).")


def _tpu_strategy():
    """The process's ``TPUStrategy``: the TPU system is initialised once per process, then reused.

    (A second ``initialize_tpu_system`` would wipe the TPU's memory, variables included.)
    """
    if "strategy" in _TPU:
        return _TPU["strategy"]
    try:
        resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu="local")
        tf.config.experimental_connect_to_cluster(resolver)
        tf.tpu.experimental.initialize_tpu_system(resolver)
    except (ValueError, RuntimeError, tf.errors.OpError) as e:
        first_line = (str(e).strip().splitlines() or [""])[0]
        error = f"{type(e).__name__}: {textwrap.shorten(first_line, 160, placeholder=' ...')}"
        has_gpu = bool(tf.config.list_physical_devices("GPU"))
        raise ValueError(tpu_unavailable_message(detect_tpu(has_gpu=has_gpu), tpu_versions(), error)) from None
    _TPU["strategy"] = tf.distribute.TPUStrategy(resolver)
    return _TPU["strategy"]


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


def check_cpu_replicas(replicas: int) -> None:
    """Raise ``ValueError`` when ``replicas`` logical CPU devices would outnumber the cores.

    Logical CPU devices share the cores: more replicas than cores only queue for them.
    """
    cores = cpu_cores()
    if replicas > cores:
        raise ValueError(f"replicas={replicas} is more than this machine can host: it has no GPU and "
                         f"{cores} CPU core(s), and each logical CPU replica needs a core of its own; "
                         f"use replicas <= {cores}")


def multi_worker_strategy() -> tf.distribute.Strategy:
    """This worker process's ``MultiWorkerMirroredStrategy``, created on first use.

    It must be created before TensorFlow's runtime starts (TF configures its collective
    ops then): ``tfwb.run`` creates it first thing in a worker, and so does
    ``python -m tfwb worker``. Later calls return the same strategy (a second one in
    one process is not allowed).

    Raises:
        ValueError: without a ``TF_CONFIG``, with a malformed one, or when the runtime
            had already started in this process.
    """
    if "strategy" in _MULTI_WORKER:
        return _MULTI_WORKER["strategy"]
    if not in_worker():
        raise ValueError("strategy='multi_worker' needs a cluster: in this process tfwb.run starts a "
                         "local one by itself; a process of your own cluster needs TF_CONFIG "
                         "(python -m tfwb worker; see the README's 'Running across machines')")
    cluster_spec.from_environ()                        # a clear message for a bad TF_CONFIG
    try:
        strategy = tf.distribute.MultiWorkerMirroredStrategy()
    except RuntimeError as e:
        if "program startup" not in str(e):
            raise
        raise ValueError("strategy='multi_worker' in a worker process must come before any other "
                         "TensorFlow work in it (TensorFlow sets its collective ops up when its runtime "
                         "starts): run it first, as python -m tfwb worker does") from None
    _MULTI_WORKER["strategy"] = strategy
    return strategy


def parameter_server_strategy() -> tf.distribute.Strategy:
    """The chief's ``ParameterServerStrategy`` (with its ``ClusterCoordinator``), created on first use.

    Variables live on the ``ps`` tasks; the chief builds the model and schedules each
    step on a free worker (``coordinate``). Keras 3 models and optimizers work under
    it in tfwb's custom loop (``model.fit`` is not used).

    Raises:
        ValueError: without a (well-formed) ``TF_CONFIG``, or when this process is not
            the cluster's ``chief`` (workers and parameter servers only serve).
    """
    if "strategy" in _PARAMETER_SERVER:
        return _PARAMETER_SERVER["strategy"]
    if not in_worker():
        raise ValueError("strategy='parameter_server' needs a cluster: in this process tfwb.run starts a "
                         "local one by itself; in your own cluster run it on the chief (TF_CONFIG task "
                         "'chief'), with python -m tfwb worker serving on the workers and ps")
    tfc = cluster_spec.from_environ()
    if tfc.task_type != "chief" or "ps" not in tfc.cluster:
        raise ValueError(f"strategy='parameter_server' trains on the cluster's chief, with 'ps' tasks; this is "
                         f"{tfc.who} of a cluster with jobs {', '.join(tfc.cluster)}: a worker or ps only "
                         "serves (python -m tfwb worker does that by itself)")
    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    strategy = tf.distribute.ParameterServerStrategy(resolver)
    _PARAMETER_SERVER["coordinator"] = tf.distribute.coordinator.ClusterCoordinator(strategy)
    _PARAMETER_SERVER["strategy"] = strategy
    return strategy


def prepare(cfg: RunConfig) -> None:
    """Do what must happen before TensorFlow's runtime starts: a cluster process's strategy.

    ``tfwb.run`` calls this before anything else touches TensorFlow; a no-op for
    every strategy that runs in one process.
    """
    if cfg.strategy == "multi_worker" and in_worker():
        multi_worker_strategy()
    elif cfg.strategy == "parameter_server" and in_worker():
        parameter_server_strategy()


def is_parameter_server(strategy) -> bool:
    return isinstance(strategy, tf.distribute.ParameterServerStrategy)


def coordinate(strategy, step, takes_iterator: bool):
    """The step as the runner calls it: under ``parameter_server``, scheduled on a worker.

    ``ClusterCoordinator.schedule`` sends the step (reading its batch from that worker's
    own copy of the pipeline) to a free worker and returns at once; tfwb fetches its loss
    before the next step, so one step is in flight at a time and a step's time is its
    round trip chief -> worker -> parameter servers. Any other strategy: unchanged.

    Returns:
        ``(step, takes_iterator)``.
    """
    if not is_parameter_server(strategy):
        return step, takes_iterator
    coordinator = _PARAMETER_SERVER["coordinator"]
    if takes_iterator:
        remote = step
    else:
        @tf.function
        def remote(iterator):
            x, y = next(iterator)
            return step(x, y)

    def scheduled(iterator):
        return coordinator.schedule(remote, args=(iterator,)).fetch()

    scheduled.experimental_get_tracing_count = remote.experimental_get_tracing_count
    return scheduled, True


def check_precision(cfg: RunConfig) -> None:
    """Raise ``ValueError`` for a precision policy the strategy's devices cannot run at all.

    TPUs have no float16 arithmetic (their matrix units compute in bfloat16), so
    ``mixed_float16`` with ``strategy='tpu'`` fails here, before any TPU is contacted,
    instead of falling back in silence. On a CPU float16 runs (slowly); chapter 03 measures it.
    """
    if cfg.strategy == "tpu" and cfg.mixed_precision == "mixed_float16":
        raise ValueError("mixed_precision='mixed_float16' is not allowed with strategy='tpu': TPUs have no "
                         "float16 arithmetic (their matrix units compute in bfloat16); pick "
                         "mixed_precision='mixed_bfloat16', or 'off'")


def check_tpu(cfg: RunConfig) -> None:
    """Raise ``ValueError`` for what ``strategy='tpu'`` cannot run, before any TPU is contacted.

    A TPU runs compiled programs only: ``TPUStrategy.run`` of an eager step would go
    through ``tf.function`` anyway, so ``execution='eager'`` would not measure eager execution.
    Then ``check_precision``.
    """
    if cfg.strategy == "tpu" and cfg.execution == "eager":
        raise ValueError("execution='eager' is not allowed with strategy='tpu': a TPU runs only compiled "
                         "programs (TPUStrategy compiles the step whatever execution says), so eager "
                         "execution cannot be measured there; pick execution='graph', or strategy='default' "
                         "to measure eager execution on the host")
    check_precision(cfg)


def make_strategy(cfg: RunConfig) -> tf.distribute.Strategy:
    """The strategy ``cfg.strategy`` names.

    Raises:
        ValueError: when the machine cannot honour it (no TPU; more replicas than GPUs
            or CPU cores; too few CPU devices for ``replicas``; ``multi_worker`` or
            ``parameter_server`` outside a cluster).
    """
    if cfg.strategy == "default":
        return tf.distribute.get_strategy()
    if cfg.strategy == "tpu":
        check_tpu(cfg)              # before connecting to anything
        return _tpu_strategy()
    if cfg.strategy == "parameter_server":
        return parameter_server_strategy()
    if cfg.strategy == "mirrored":
        if tf.config.list_physical_devices("GPU"):      # does not start the runtime
            gpus = [d.name for d in tf.config.list_logical_devices("GPU")]
            if cfg.replicas and cfg.replicas > len(gpus):
                raise ValueError(f"replicas={cfg.replicas} is not allowed here; this machine has "
                                 f"{len(gpus)} GPU(s): use replicas <= {len(gpus)} or None (all)")
            return _mirrored(gpus[: cfg.replicas or len(gpus)])
        want = cfg.replicas or DEFAULT_CPU_REPLICAS
        check_cpu_replicas(want)
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
    return multi_worker_strategy()


def workers_in_sync(strategy: tf.distribute.Strategy) -> int:
    """How many worker processes train under ``strategy`` (1 outside a cluster)."""
    if is_parameter_server(strategy):
        return max(1, len(cluster_spec.from_environ().cluster.get("worker", ())))
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or not isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
        return 1
    spec = resolver.cluster_spec().as_dict()
    return max(1, len(spec.get("chief", ())) + len(spec.get("worker", ())))


def distribute(strategy: tf.distribute.Strategy, dataset: tf.data.Dataset, cfg: RunConfig
               ) -> Tuple[object, List[str]]:
    """``dataset`` (global batches) as ``strategy`` feeds it to its replicas, and notes saying how.

    Across workers the auto-shard policy is set to ``DATA`` explicitly: every worker
    runs the whole pipeline and keeps its own replicas' slices of each global batch,
    so the cluster trains on exactly the batches one device would. (``FILE`` would give
    each worker its own files: less reading, but other batches; ``AUTO`` picks ``FILE``
    for a reader dataset and falls back to ``DATA`` with a warning otherwise.)

    Returns:
        The dataset itself under the default strategy, else the distributed dataset.
    """
    replicas = strategy.num_replicas_in_sync
    if strategy is tf.distribute.get_strategy():
        return dataset, []
    per_replica = cfg.batch_size // replicas
    notes = [f"strategy={cfg.strategy!r}: global batch {cfg.batch_size} = {replicas} replica(s) x "
             f"{per_replica} examples; the loss is averaged over the global batch",
             f"strategy={cfg.strategy!r}: the distributed dataset prefetches to each replica's device, "
             "whatever the prefetch knob says"]
    workers = workers_in_sync(strategy)
    if is_parameter_server(strategy):
        notes = [f"strategy='parameter_server': {workers} worker(s) train asynchronously, each step on a full "
                 f"batch of {cfg.batch_size} from that worker's own copy of the pipeline (not sharded: with "
                 "one seed the workers read the same batches in turn); variables live on the ps task",
                 "strategy='parameter_server': one step in flight at a time (its loss is fetched before the "
                 "next is scheduled), so a step's time is its round trip chief -> worker -> ps; the strategy's "
                 "throughput comes from many steps in flight. Batches are read on the workers: input wait "
                 "is not recorded"]
        return _PARAMETER_SERVER["coordinator"].create_per_worker_dataset(dataset), notes
    if workers > 1:
        opts = tf.data.Options()
        opts.experimental_distribute.auto_shard_policy = getattr(
            tf.data.experimental.AutoShardPolicy, AUTO_SHARD_POLICY)
        dataset = dataset.with_options(opts)
        notes.append(f"auto-shard policy {AUTO_SHARD_POLICY} over {workers} workers: each worker runs the "
                     "whole pipeline and keeps its replicas' slices of every global batch, so the cluster "
                     "trains on the same batches as one device (FILE would split the files instead: less "
                     "reading per worker, different batches)")
        return _KeptIterators(strategy.experimental_distribute_dataset(dataset)), notes
    return strategy.experimental_distribute_dataset(dataset), notes


class _KeptIterators:
    """A distributed dataset whose iterators live as long as the (worker) process.

    Deleting an iterator of a dataset distributed across workers blocks for seconds
    (measured here: 0.3 to 13 s, on whichever worker ends last), which a worker would
    spend after its last step, before it can report. A worker process runs one
    configuration and ends (``python -m tfwb worker`` ends with ``os._exit``), so its
    iterators are simply never deleted.
    """

    def __init__(self, dataset) -> None:
        self._dataset = dataset

    def __iter__(self):
        iterator = iter(self._dataset)
        _KEPT.append(iterator)
        return iterator

    def __getattr__(self, name):
        return getattr(self._dataset, name)


def distribution_facts(cfg: RunConfig, strategy: tf.distribute.Strategy) -> dict:
    """``{"strategy", "replicas", "workers", "global_batch", "per_replica_batch", "auto_shard_policy"}``."""
    replicas = strategy.num_replicas_in_sync
    workers = workers_in_sync(strategy)
    sharded = workers > 1 and not is_parameter_server(strategy)
    return {"strategy": cfg.strategy, "replicas": replicas, "workers": workers,
            "global_batch": cfg.batch_size, "per_replica_batch": cfg.batch_size // replicas,
            "auto_shard_policy": AUTO_SHARD_POLICY if sharded else None}
