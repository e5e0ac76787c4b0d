"""A local cluster: worker processes on this machine, on TensorFlow's own distributed runtime.

``tfwb.run(RunConfig(strategy="multi_worker", workers=2))`` (or ``"parameter_server"``)
in a process that is not part of a cluster (no ``TF_CONFIG``) comes here: the
local cluster is a second runner, ``run_cluster(cfg, observers)``, on the same
lifecycle as the single-process one (``tfwb.lifecycle``: observers driven on the
chief's reported steps, one step log -> RunResult conversion). ``run_cluster``:

1. checks what it can before any work: the machine can host ``workers`` processes
   (a CPU core each, a GPU each where there are GPUs, memory), the workload can be
   imported by another process, the global batch divides among the replicas. Workers
   take GPU memory as they need it (``TF_FORCE_GPU_ALLOW_GROWTH=true``); with fewer
   GPUs than workers, or GPUs whose memory this process's runtime already holds
   (``holds_gpu_memory``), every worker runs on the CPU and the result's notes say why;
2. chooses free loopback ports (checked) and writes each worker's ``TF_CONFIG``
   (``tfwb.cluster_spec.local``: worker 0 is the chief), and gives the cluster a private
   network: TensorFlow's gRPC servers listen on every interface (``0.0.0.0``; no
   option binds them to loopback, see ``tfwb.cluster_spec``), so every process of the
   cluster runs in one network namespace whose only interface is loopback, made by a
   small holder process (``tfwb.cluster_spec.hold_private_network``). Where the system
   allows no namespace (a container's seccomp profile, AppArmor's restriction on user
   namespaces, not Linux), ``TFWB_CLUSTER_NETWORK`` decides: ``auto`` (default) runs on
   every interface and says so in the result's notes and a warning, ``private``
   refuses to start, ``open`` skips the namespace on purpose;
3. starts ``workers`` processes of ``python -m tfwb worker --report``: each reads its
   ``TF_CONFIG``, creates ``MultiWorkerMirroredStrategy`` (TensorFlow's gRPC runtime
   and collectives: nothing home-made), runs the same RunConfig with ``tfwb.run``
   (``tfwb.tf.cluster.worker.worker_main``) and reports its steps, as lines on its stdout, while it runs;
4. watches them: a worker that exits early, crashes or is killed ends the run at
   once (measured: 0.3 s from a SIGKILL to the failed result); one that reports no
   step for ``step_timeout_s`` (default 60 s) after its first is taken as hung (the
   cluster gets ``start_timeout_s``, default 300 s, to start and finish every
   worker's first step); either way every worker process is killed (its whole
   process group) and the run is recorded as ``failed`` with a message naming the
   worker, how it ended and the tail of its output, keeping the steps the chief
   reported before;
5. gathers the workers' results into one ``RunResult``: the chief's step times,
   losses and samples, ``replicas`` = every worker's replicas together, and in
   ``extras["cluster"]`` each worker's step times, the cluster's start time and
   whether every worker reported identical losses (they all-reduce the same loss).

``parameter_server`` runs ``ParameterServerStrategy`` with a ``ClusterCoordinator``: the
cluster is a chief (it runs ``tfwb.run`` and reports, as a worker does above),
``workers`` workers and one ps, which only serve (``tfwb.tf.cluster.worker.serve``) and are killed when the
chief is done; any of them ending early fails the run the same way.

Each worker is pinned to its own share of the CPU cores (and of the GPUs), like a
host of its own; a worker dies with the process that started it (Linux parent-death
signal), so a kernel that dies leaves no orphans. Ctrl-C or a kernel interrupt stops
every worker and records the run as ``interrupted``. The same worker entry point runs
on real machines: ``python -m tfwb worker`` with ``TF_CONFIG`` set by you (README,
"Running across machines").
"""
from __future__ import annotations

import collections
import dataclasses
import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from typing import Any, Deque, Dict, List, Optional, Sequence, Tuple

import tfwb
from tfwb import cluster_spec
from tfwb.config import RunConfig
from tfwb.interrupts import InterruptBridge
from tfwb.lifecycle import Lifecycle, new_run_id, now_iso
from tfwb.observers import Observer
from tfwb.records import RunResult
from tfwb.analysis.pairs import loss_gap
from tfwb.tf.runner.strategies import CLUSTER_STRATEGIES, cpu_cores, in_worker
from tfwb.tf.workloads.image_files import ensure_images
from tfwb.workloads import Ref, get_workload

REPORT = cluster_spec.REPORT
#: Seconds the cluster has from starting its processes until every worker finished its first step
#: (TensorFlow imported, cluster joined, model built, step traced).
START_TIMEOUT_S = 300.0
#: Seconds a worker may go without reporting a step, after its first, before it counts as hung.
STEP_TIMEOUT_S = 60.0
#: Memory one worker process needs (TensorFlow, a small model, its pipeline), for the capacity check.
WORKER_MEMORY_MIB = 700
EXIT_PORT_TAKEN = cluster_spec.EXIT_PORT_TAKEN
PORT_ATTEMPTS = 3
POLL_S = 0.05


# -- what the parent checks before any work ----------------------------------------------------
def _visible_gpus() -> List[str]:
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


def _gpus_held(config: Any = None, started: Optional[bool] = None) -> bool:
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
    gpus = _visible_gpus()
    if gpus and (workers > len(gpus) or _gpus_held()):
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


# -- the parent side -------------------------------------------------------------------------------
class _Worker:
    """One worker process as the parent sees it."""

    def __init__(self, index: int, tfc: cluster_spec.TFConfig, proc: subprocess.Popen, err_path: str,
                 reports: bool = True) -> None:
        self.index, self.tfc, self.proc, self.err_path = index, tfc, proc, err_path
        self.reports = reports         # trains and reports steps (a parameter_server's workers and ps serve)
        self.name = "the chief" if tfc.task_type == "chief" else f"{tfc.task_type} {tfc.task_index}"
        self.other: Deque[str] = collections.deque(maxlen=20)   # stdout lines that are not reports
        self.ready_s: Optional[float] = None
        self.started_s: Optional[float] = None
        self.replicas: Optional[int] = None
        self.steps: List[dict] = []
        self.result: Optional[RunResult] = None
        self.error: Optional[str] = None
        self.eof = False
        self.last_seen = time.perf_counter()
        self.reader: Optional[threading.Thread] = None

    def tail(self, limit: int = 600) -> str:
        """The last lines the process wrote (stderr, then stray stdout), for a message."""
        try:
            with open(self.err_path, "rb") as fh:
                fh.seek(0, os.SEEK_END)
                fh.seek(max(0, fh.tell() - 8192))
                text = fh.read().decode(errors="replace")
        except OSError:
            text = ""
        lines = [ln.strip() for ln in text.splitlines() + list(self.other) if ln.strip()]
        lines = [ln for ln in lines if not ln.startswith(("WARNING: All log messages before absl",
                                                          "I0000 ", "W0000 "))]
        out = " | ".join(lines[-4:])
        return out[-limit:]

    def ended(self) -> str:
        """How the process ended: ``was killed by SIGKILL`` / ``exited with status 1``."""
        rc = self.proc.returncode
        if rc is not None and rc < 0:
            try:
                return f"was killed by {signal.Signals(-rc).name}"
            except ValueError:
                return f"was killed by signal {-rc}"
        return f"exited with status {rc}"


def _reader(w: _Worker, events: "queue.Queue") -> None:
    for raw in w.proc.stdout:
        line = raw.decode(errors="replace").rstrip("\n")
        if line.startswith(REPORT):
            try:
                events.put((w, json.loads(line[len(REPORT):])))
                continue
            except json.JSONDecodeError:
                pass
        w.other.append(line)
    events.put((w, {"event": "eof"}))


def alive(pid: int) -> bool:
    """True while ``pid`` is a live process; a zombie (ended, not yet reaped) counts as ended."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _stopped_state(pid: int) -> Optional[str]:
    try:
        import psutil

        status = psutil.Process(pid).status()
    except Exception:  # noqa: BLE001
        return None
    return status if status in ("stopped", "tracing-stop", "zombie", "disk-sleep") else None


class _ClusterFailed(Exception):
    """The cluster must stop: a worker crashed, hung or could not start."""


class _PortTaken(Exception):
    """A worker found its port taken before it started (retry with other ports)."""


def _kill(workers: Sequence[_Worker]) -> None:
    """SIGKILL every worker's process group and wait for each process to end."""
    for w in workers:
        if w.proc.poll() is None:
            try:
                os.killpg(w.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                try:
                    w.proc.kill()
                except ProcessLookupError:
                    pass
    for w in workers:
        try:
            w.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        if w.reader is not None:
            w.reader.join(timeout=5)
        if w.proc.stdout is not None:
            w.proc.stdout.close()


class PrivateNetwork:
    """The local cluster's network namespace: a holder process its workers join (``tfwb.cluster_spec``).

    ``PrivateNetwork.start()`` returns a holder whose namespace is ready, or one with
    ``pid`` None and ``why`` saying why there is none; ``close()`` ends the holder.
    """

    def __init__(self, proc: Optional[subprocess.Popen], how: str = "", why: str = "") -> None:
        self.proc, self.how, self.why = proc, how, why

    @property
    def pid(self) -> Optional[int]:
        return self.proc.pid if self.proc is not None and self.how else None

    @classmethod
    def start(cls, timeout_s: float = 20.0) -> "PrivateNetwork":
        env = dict(os.environ, TFWB_PARENT_PID=str(os.getpid()))
        package_root = os.path.dirname(os.path.dirname(os.path.abspath(tfwb.__file__)))
        env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH", "")) if p)
        try:
            proc = subprocess.Popen(
                [sys.executable, "-c", "import sys, tfwb.cluster_spec as t; sys.exit(t.hold_private_network())"],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env,
                start_new_session=True)
        except OSError as e:
            return cls(None, why=f"no holder process ({e})")
        lines: "queue.Queue" = queue.Queue()
        threading.Thread(target=lambda: lines.put(proc.stdout.readline()), daemon=True).start()
        try:
            line = lines.get(timeout=timeout_s).decode(errors="replace").strip()
        except queue.Empty:
            line = f"@tfwb-network failed: no answer within {timeout_s:g} s"
        if line.startswith(cluster_spec.NETWORK_READY):
            return cls(proc, how=line.split(":", 1)[1].strip())
        network = cls(proc, why=line.split(":", 1)[1].strip() if ":" in line else (line or "the holder ended"))
        network.close()
        return network

    def close(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            self.proc.kill()
        self.proc.wait(timeout=10)
        for pipe in (self.proc.stdin, self.proc.stdout):
            if pipe is not None:
                pipe.close()


def _worker_env(tfc: cluster_spec.TFConfig, share: dict, machine_has_gpus: bool,
                netns_pid: Optional[int] = None) -> Dict[str, str]:
    env = dict(os.environ)
    env.update({
        "TF_CONFIG": tfc.to_json(),
        "TFWB_CPU_REPLICAS": "1",                 # a worker on a CPU is one device
        "TFWB_WORKER_CPUS": ",".join(str(c) for c in share["cpus"]),
        "TFWB_PARENT_PID": str(os.getpid()),
        "PYTHONUNBUFFERED": "1",
    })
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    env.pop(cluster_spec.NETNS_ENV, None)
    if netns_pid is not None:
        env[cluster_spec.NETNS_ENV] = str(netns_pid)
    if machine_has_gpus:         # its own GPUs; none for a parameter_server's chief and ps
        env["CUDA_VISIBLE_DEVICES"] = ",".join(share["gpus"])
        env["TF_FORCE_GPU_ALLOW_GROWTH"] = "true"    # take GPU memory as it is needed, not all at start
    package_root = os.path.dirname(os.path.dirname(os.path.abspath(tfwb.__file__)))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, os.getcwd(), env.get("PYTHONPATH", "")) if p)
    return env


def _failed_before_start(cfg: RunConfig, error: BaseException, raise_errors: bool, started_at: str) -> RunResult:
    if raise_errors:
        raise error
    return RunResult(config=cfg, status="failed", error=f"{type(error).__name__}: {error}",
                     examples_per_step=cfg.batch_size, started_at=started_at, run_id=new_run_id())


def run_cluster(cfg: RunConfig, observers: Sequence[Observer] = (), *, raise_errors: bool = False,
                dataset: Any = None, start_timeout_s: float = START_TIMEOUT_S,
                step_timeout_s: float = STEP_TIMEOUT_S) -> RunResult:
    """Run ``cfg`` on ``cfg.workers`` worker processes on this machine and gather one result.

    Args:
        cfg: the knobs; ``strategy`` must be ``"multi_worker"`` or ``"parameter_server"``.
        observers: run in this process on the chief's reported steps (``Progress``, a
            target loss, a Stop button: a stop they request ends every worker and keeps
            the steps so far; with ``interrupted=True`` the run is ``"interrupted"``);
            ``run.extras["cluster"]`` holds the workers' ``pids`` and ``addresses`` from
            the start. Observers that act on the training process itself (a profiler
            window) cannot reach the workers.
        raise_errors: raise instead of returning a failed result (``RuntimeError`` for a
            worker that crashed or hung, ``ValueError`` for a bad request).
        dataset: must be ``None``: a dataset object cannot reach other processes.
        start_timeout_s: seconds for every worker to start and finish its first step
            (TensorFlow imported, cluster joined, model built, step traced).
        step_timeout_s: seconds a worker may report no step, after its first, before it
            counts as hung.

    Returns:
        The gathered RunResult (see the module docstring); ``failed`` with a message
        naming the worker when one crashed, hung or could not start, ``interrupted`` on
        Ctrl-C. No worker process outlives this call.

    Raises:
        ValueError: (only with ``raise_errors``) for a request that cannot run here.
        RuntimeError: (only with ``raise_errors``) when a worker crashed or hung.
    """
    started_at = now_iso()
    try:
        if cfg.strategy not in CLUSTER_STRATEGIES:
            raise ValueError(f"strategy={cfg.strategy!r}: a local cluster runs strategy "
                             f"{' or '.join(map(repr, CLUSTER_STRATEGIES))}")

        if in_worker():
            raise ValueError("this process is already a worker of a cluster (TF_CONFIG is set: "
                             f"{cluster_spec.from_environ().who}); a worker cannot start a cluster of its own. "
                             f"Here tfwb.run(strategy={cfg.strategy!r}) runs this process's part; start "
                             "local clusters from a process without TF_CONFIG")
        if dataset is not None:
            raise ValueError(f"run(dataset=...) cannot reach the worker processes of strategy={cfg.strategy!r} "
                             "(a dataset object does not cross processes): register a workload whose "
                             "data_fn builds it, named by a 'module:attribute' string")
        ps = cfg.strategy == "parameter_server"
        shares = placement(cfg.workers, parameter_server=ps)
        spec = workload_spec(cfg.workload)
        per_worker = max(1, len(shares[1 if ps else 0]["gpus"]))
        replicas = per_worker if ps else per_worker * cfg.workers     # trained in sync on one batch
        if cfg.batch_size % replicas:
            raise ValueError(f"batch_size={cfg.batch_size} must be a multiple of the {replicas} replicas of "
                             f"strategy={cfg.strategy!r} with workers={cfg.workers} (the global batch is split "
                             "evenly among them)")
        if cfg.workload == "images":
            ensure_images(cfg.resolved_size, cfg.seed)   # once here, not raced by every worker
        network = open_network(cluster_spec.network_mode())
    except ValueError as e:
        return _failed_before_start(cfg, e, raise_errors, started_at)
    sent = cfg.replace(size=cfg.resolved_size)           # what size='auto' means in this process
    job = _Cluster(cfg, sent, spec, shares, observers, start_timeout_s, step_timeout_s,
                   started_at, raise_errors)
    job.network = network
    visible = _visible_gpus()
    on_cpu = cpu_note(cfg.workers, len(visible), held=bool(visible) and _gpus_held())
    if on_cpu:
        job.notes.append(on_cpu)
    # Ctrl-C / a kernel interrupt on the main thread becomes the run's stop request, so it can never
    # be lost in a garbage-collection callback or a reader thread's moment: every worker is then ended
    # and the run is "interrupted" (a second Ctrl-C raises KeyboardInterrupt at once).
    with InterruptBridge(job.life.interrupt, inline=True):
        return job.run()


def open_network(mode: str) -> Optional[PrivateNetwork]:
    """The cluster's private network for ``mode`` (``tfwb.cluster_spec.NETWORK_MODES``); None: every interface.

    Raises:
        ValueError: with ``mode="private"`` where this system allows no network namespace.
    """
    if mode == "open":
        return None
    network = PrivateNetwork.start()
    if network.pid is None and mode == "private":
        raise ValueError(f"{cluster_spec.NETWORK_ENV}=private, and this system allows no private network for the "
                         f"cluster ({network.why}): TensorFlow's servers would listen on every interface "
                         "(0.0.0.0). Allow unprivileged user namespaces (or run as root), or set "
                         f"{cluster_spec.NETWORK_ENV}=auto to run on every interface with a warning")
    return network


def network_note(network: Optional[PrivateNetwork], seconds: Optional[float] = None) -> Tuple[dict, str]:
    """``({"private": bool, "how" or "why"}, note)``: where the cluster's servers could be reached from.

    Example:
        >>> network_note(None)[0]
        {'private': False, 'why': 'TFWB_CLUSTER_NETWORK=open'}
    """
    if network is not None and network.pid is not None:
        return ({"private": True, "how": network.how},
                f"the cluster's gRPC servers listened in a private network ({network.how} whose only "
                "interface is loopback): its processes reached each other on 127.0.0.1 and nothing outside "
                "the cluster could reach them (TensorFlow binds its servers to 0.0.0.0)")
    why = (f"this system allows no private network namespace: {network.why}" if network is not None
           else f"{cluster_spec.NETWORK_ENV}=open")
    during = f" for {seconds:.0f} s" if seconds is not None else ""
    return ({"private": False, "why": why},
            f"the cluster's gRPC servers listened on every network interface of this machine{during} "
            f"(TensorFlow binds them to 0.0.0.0; {why}): any host that could reach this machine could have "
            "sent them TensorFlow work, file reads and writes included. Set "
            f"{cluster_spec.NETWORK_ENV}=private to refuse instead, or allow unprivileged user namespaces")


class _Cluster:
    """One local cluster run: start, watch, gather, stop (``run_cluster``)."""

    def __init__(self, cfg, sent, spec, shares, observers, start_timeout_s, step_timeout_s,
                 started_at, raise_errors) -> None:
        self.cfg, self.sent, self.spec, self.shares = cfg, sent, spec, shares
        self.start_timeout_s, self.step_timeout_s = start_timeout_s, step_timeout_s
        self.started_at, self.raise_errors = started_at, raise_errors
        self.events: "queue.Queue" = queue.Queue()
        self.workers: List[_Worker] = []
        self.t0 = time.perf_counter()
        self.life = Lifecycle(cfg, observers, clock=self.clock)
        self.life.started_at = started_at
        self.log, self.state = self.life.log, self.life.state
        self.start_s: Optional[float] = None
        self.tmp = tempfile.mkdtemp(prefix="tfwb-cluster-")
        self.notes: List[str] = []
        self.network: Optional[PrivateNetwork] = None
        self.network_facts: Dict[str, Any] = {}

    def clock(self) -> float:
        return time.perf_counter() - self.t0

    # -- starting -------------------------------------------------------------------------
    def _spawn(self) -> None:
        ps = self.cfg.strategy == "parameter_server"
        tfcs = cluster_spec.local(self.cfg.workers, parameter_servers=1 if ps else 0)
        config_path = os.path.join(self.tmp, "config.json")
        with open(config_path, "w") as fh:
            json.dump(self.sent.to_dict(), fh)
        cmd = [sys.executable, "-m", "tfwb", "worker", "--report", "--config", config_path]
        if self.spec:
            cmd += ["--workload-spec", json.dumps(self.spec)]
        self.workers = []
        self.t0 = time.perf_counter()
        has_gpus = bool(_visible_gpus())
        for tfc, share in zip(tfcs, self.shares):
            err_path = os.path.join(self.tmp, f"{tfc.task_type}-{tfc.task_index}.stderr")
            with open(err_path, "wb") as err:
                proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, stdin=subprocess.DEVNULL,
                                        env=_worker_env(tfc, share, has_gpus,
                                                        self.network.pid if self.network else None),
                                        start_new_session=True)
            w = _Worker(len(self.workers), tfc, proc, err_path, reports=not ps or tfc.task_type == "chief")
            w.reader = threading.Thread(target=_reader, args=(w, self.events),
                                        name=f"tfwb-worker-{w.index}-reader", daemon=True)
            w.reader.start()
            self.workers.append(w)
        self.state.extras["cluster"] = {"pids": [w.proc.pid for w in self.workers],
                                        "addresses": [t.address for t in tfcs]}

    # -- watching ---------------------------------------------------------------------------
    def _on_event(self, w: _Worker, ev: dict) -> None:
        now = time.perf_counter()
        w.last_seen = now
        kind = ev.get("event")
        if kind == "ready":
            w.ready_s = now - self.t0
        elif kind == "started":
            w.started_s = now - self.t0
            w.replicas = ev.get("replicas")
        elif kind == "step":
            w.steps.append(ev)
            if w.index == 0:
                self._chief_step(ev)
        elif kind == "result":
            w.result = RunResult.from_dict(ev["result"])
        elif kind == "error":
            w.error = ev.get("message")
        elif kind == "eof":
            w.eof = True

    def _chief_step(self, ev: dict) -> None:
        if not self.life.started:
            self.life.start()
        log = self.log
        log.times_s.append(ev["time_s"])
        log.starts_s.append(ev["start_s"])
        log.losses.append(ev["loss"])
        if "wait_s" in ev:
            log.waits_s.append(ev["wait_s"])
        if "grad_norm" in ev:
            log.grad_norms.append(ev["grad_norm"])
            log.loss_scales.append(ev["loss_scale"])
        self.life.step_end(ev["step"])

    def _check(self) -> bool:
        """True when every reporting process finished; raises ``_ClusterFailed`` / ``_PortTaken``."""
        now = time.perf_counter()
        reporting = [w for w in self.workers if w.reports]
        for w in self.workers:
            if not w.eof:                   # its end-of-output comes after every line it wrote
                continue
            try:
                rc = w.proc.wait(timeout=2)
            except subprocess.TimeoutExpired:
                continue
            if rc == EXIT_PORT_TAKEN and w.started_s is None:
                raise _PortTaken(w.tail())
            if not w.reports and not all(x.eof for x in reporting):
                raise _ClusterFailed(self._crash_message(w))       # a server ended while the chief trains
            if w.reports and (w.result is None or w.result.status not in ("ok", "diverged")):
                raise _ClusterFailed(self._crash_message(w))
        if all(w.eof for w in reporting):
            return True
        late = [w for w in reporting if not w.steps and not w.eof]
        if late and now - self.t0 > self.start_timeout_s:
            down = [w for w in self.workers if w.ready_s is None and not w.reports]
            raise _ClusterFailed(
                f"the cluster did not start within start_timeout_s={self.start_timeout_s:g} s: "
                + "; ".join(f"{w.name} ({w.tfc.address}) " + (
                    "set up but did not finish its first step" if w.started_s is not None else
                    "joined but did not finish setting up" if w.ready_s is not None else "never came up")
                    for w in late)
                + "".join(f"; {w.name} ({w.tfc.address}) never came up" for w in down)
                + self._tails(late + down))
        silent = [w for w in reporting if w.steps and not w.eof and now - w.last_seen > self.step_timeout_s]
        if silent:
            raise _ClusterFailed(self._hang_message(silent))
        return False

    def _steps_text(self, w: _Worker) -> str:
        if not w.reports:
            return "while the chief was training" if self.log.times_s else "before the chief's first step"
        total = self.state.total_steps // self.state.steps_per_call
        return f"after {len(w.steps)} of {total} steps" if w.started_s is not None else "before it started"

    def _tails(self, workers: Sequence[_Worker]) -> str:
        parts = [f"{w.name}'s last output: {t}" for w in workers for t in [w.tail()] if t]
        return ("; " + "; ".join(parts)) if parts else ""

    def _crash_message(self, w: _Worker) -> str:
        why = w.error or (f"its run {w.result.status}: {w.result.error}" if w.result is not None else None)
        text = f"{w.name} (pid {w.proc.pid}, {w.tfc.address}) {w.ended()} {self._steps_text(w)}"
        if why:
            text += f": {why}"
        return text + self._tails([w] if not why else [])

    def _hang_message(self, silent: Sequence[_Worker]) -> str:
        stopped = [(w, s) for w in self.workers for s in [_stopped_state(w.proc.pid)] if s]
        parts = [f"{w.name} (pid {w.proc.pid}) is {s}" for w, s in stopped]
        names = ", ".join(w.name for w in silent)
        wait = ("the others wait for it in every all-reduce" if self.cfg.strategy == "multi_worker"
                else "the chief waits for the step it scheduled")
        return (f"{names} reported no step for step_timeout_s={self.step_timeout_s:g} s (hung: "
                + ("; ".join(parts) if parts else f"a process stopped answering, or the network between them "
                   f"failed; {wait}") + "); last steps: "
                + ", ".join(f"{w.name} at {len(w.steps)}" for w in self.workers if w.reports))

    # -- the whole run --------------------------------------------------------------------------
    def run(self) -> RunResult:
        failed, error = False, None
        failure: Optional[BaseException] = None
        try:
            for attempt in range(PORT_ATTEMPTS):
                self._spawn()
                try:
                    while not self._check():
                        try:
                            w, ev = self.events.get(timeout=POLL_S)
                        except queue.Empty:
                            continue
                        self._on_event(w, ev)
                        trainers = [x for x in self.workers if x.reports]
                        if self.start_s is None and trainers and all(x.started_s is not None for x in trainers):
                            self.start_s = max(x.started_s for x in trainers)
                        if self.state.stop_reason is not None:
                            break
                    break
                except _PortTaken as e:
                    _kill(self.workers)
                    if attempt + 1 == PORT_ATTEMPTS:
                        raise _ClusterFailed(f"every try to start the cluster found a chosen port taken ({e})")
                    self.notes.append(f"a chosen port was taken before worker start ({e}); retried with new ports")
        except _ClusterFailed as e:
            t_detect = time.perf_counter()
            _kill(self.workers)
            failed, failure = True, e
            error = (f"{e}. Every worker process was stopped ({time.perf_counter() - t_detect:.1f} s after the "
                     f"failure was seen, {self.clock():.1f} s after the cluster started)")
        except KeyboardInterrupt:
            _kill(self.workers)
            self.life.interrupt()                 # the same stop as a Stop button's
        except BaseException as e:   # an observer failed, or this process is going down
            _kill(self.workers)
            failed, error, failure = True, f"{type(e).__name__}: {e}", e
        finally:
            _kill(self.workers)      # a no-op for processes already gone
            if self.network is not None:
                self.network.close()
            shutil.rmtree(self.tmp, ignore_errors=True)
        self.network_facts, note = network_note(self.network, self.clock())
        self.notes.insert(0, note)
        if not self.network_facts["private"] and self.network is not None:
            warnings.warn(note, RuntimeWarning, stacklevel=3)
        chief = self.workers[0].result if self.workers else None
        whole = not failed and self.state.stop_reason is None and chief is not None
        if self.state.stop_reason is not None and not failed:
            self.notes.append(f"stopped ({self.state.stop_reason}): every worker process was stopped")
        self.life.end(chief.status if whole else self.life.status(failed))
        result = self._gather(self.state.status, error, whole)
        if failure is not None and self.raise_errors:
            if isinstance(failure, _ClusterFailed):
                raise RuntimeError(error) from None
            raise failure
        return result

    def _cluster_facts(self) -> dict:
        chief = self.workers[0] if self.workers else None
        facts: Dict[str, Any] = {
            "workers": self.cfg.workers,
            "tasks": [w.name for w in self.workers],
            "addresses": [w.tfc.address for w in self.workers],
            "pids": [w.proc.pid for w in self.workers],
            "exit_codes": [w.proc.returncode for w in self.workers],
            "cpus": [s["cpus"] for s in self.shares],
            "gpus": [s["gpus"] for s in self.shares],
            "start_s": self.start_s,
            "network": self.network_facts,
            "ready_s": [w.ready_s for w in self.workers],
            "started_s": [w.started_s for w in self.workers],
            "worker_step_times_s": [], "worker_median_step_s": [],
        }
        results = [w.result for w in self.workers if w.reports]
        if all(r is not None for r in results) and results:
            facts["worker_step_times_s"] = [list(r.step_times_s) for r in results]
            facts["worker_median_step_s"] = [r.median_step_s for r in results]
            gaps = [loss_gap(chief.result, r) or 0.0 for r in results[1:]]
            same_length = all(len(r.all_losses) == len(chief.result.all_losses) for r in results)
            if len(results) > 1:           # multi_worker: every worker all-reduces the same loss
                facts["largest_loss_difference"] = max(gaps, default=0.0)
                facts["losses_identical"] = same_length and not any(gaps)
        return facts

    def _gather(self, status: str, error: Optional[str], whole: bool) -> RunResult:
        """The cluster's RunResult: the chief's own, when every worker ran to the end
        (``whole``); else built from the steps the chief reported (``tfwb.lifecycle``)."""
        cfg = self.cfg
        facts = self._cluster_facts()
        chief = self.workers[0].result if self.workers else None
        loopback = f"TF_CONFIG on loopback: {', '.join(facts['addresses'])}"
        if cfg.strategy == "multi_worker":
            notes = [f"multi_worker: a local cluster of {cfg.workers} worker process(es) on this machine "
                     f"({loopback}), each pinned to its own CPU core(s); step times, losses and samples are "
                     "the chief's (worker 0), every worker's step times are in extras['cluster']"]
        else:
            notes = [f"parameter_server: a local cluster of a chief, {cfg.workers} worker(s) (each pinned to its "
                     f"own CPU core(s)) and one ps on this machine ({loopback}); the chief coordinates and "
                     "reports, its step times, losses and samples are the result's"]
        if self.start_s is not None:
            notes.append(f"cluster start: {self.start_s:.1f} s from starting the processes until every "
                         "trainer had imported TensorFlow, joined the cluster and built the model")
        notes += self.notes
        if whole:
            if facts.get("losses_identical") is False:
                notes.append(f"the workers' losses differ by up to {facts['largest_loss_difference']:.3g} "
                             "(they all-reduce the same loss, so they should be identical)")
            failed = [w for w in self.workers if w.result is not None and w.result.status != chief.status]
            if failed:
                notes.append("; ".join(f"{w.name}: {w.result.status}: {w.result.error}" for w in failed))
            # What observers in this process added (notes, extras) joins the chief's; the gathered facts win.
            return dataclasses.replace(
                chief, config=cfg, setup_s=self.start_s if self.start_s is not None else chief.setup_s,
                started_at=self.started_at, run_id=new_run_id(),
                notes=tuple(notes) + chief.notes + tuple(self.state.notes),
                extras={**self.state.extras, **chief.extras, "cluster": facts},
                error=(f"{self.workers[0].name}: {chief.error}" if chief.error else None))
        # Failed, interrupted or stopped: what the chief reported before the end.
        replicas = self.workers[0].replicas if self.workers else None   # num_replicas_in_sync of the chief
        return self.life.result(status, error, setup_s=self.start_s or 0.0, notes=notes,
                                extras={"cluster": facts}, replicas=replicas)
