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

This module starts, watches and gathers (steps 3 to 5); step 1's checks are
``tfwb.tf.cluster.preflight``, step 2's private network ``tfwb.tf.cluster.network``, and the
worker processes (their environment, their reports, their end) ``tfwb.tf.cluster.processes``.
"""
from __future__ import annotations

import dataclasses
import json
import os
import queue
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from typing import Any, Dict, List, Optional, Sequence

from tfwb import cluster_spec
from tfwb.config import RunConfig
from tfwb.interrupts import InterruptBridge
from tfwb.lifecycle import Lifecycle, new_run_id, now_iso
from tfwb.observers import Observer
from tfwb.records import RunResult
from tfwb.analysis.pairs import loss_gap
from tfwb.tf.cluster import preflight
from tfwb.tf.cluster.network import PrivateNetwork, network_note, open_network
from tfwb.tf.cluster.preflight import cpu_note, placement, workload_spec
from tfwb.tf.cluster.processes import WorkerProcess, kill_all, read_reports, stopped_state, worker_env
from tfwb.tf.runner.strategies import CLUSTER_STRATEGIES, in_worker
from tfwb.tf.workloads.image_files import ensure_images
from tfwb.renamed import forward

#: Seconds the cluster has from starting its processes until every worker finished its first step
#: (TensorFlow imported, cluster joined, model built, step traced).
START_TIMEOUT_S = 300.0
#: Seconds a worker may go without reporting a step, after its first, before it counts as hung.
STEP_TIMEOUT_S = 60.0
EXIT_PORT_TAKEN = cluster_spec.EXIT_PORT_TAKEN
PORT_ATTEMPTS = 3
POLL_S = 0.05


class _ClusterFailed(Exception):
    """The cluster must stop: a worker crashed, hung or could not start."""


class _PortTaken(Exception):
    """A worker found its port taken before it started (retry with other ports)."""


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
    visible = preflight.visible_gpus()
    on_cpu = cpu_note(cfg.workers, len(visible), held=bool(visible) and preflight.gpus_held())
    if on_cpu:
        job.notes.append(on_cpu)
    # Ctrl-C / a kernel interrupt on the main thread becomes the run's stop request, so it can never
    # be lost in a garbage-collection callback or a reader thread's moment: every worker is then ended
    # and the run is "interrupted" (a second Ctrl-C raises KeyboardInterrupt at once).
    with InterruptBridge(job.life.interrupt, inline=True):
        return job.run()


class _Cluster:
    """One local cluster run: start, watch, gather, stop (``run_cluster``)."""

    def __init__(self, cfg, sent, spec, shares, observers, start_timeout_s, step_timeout_s,
                 started_at, raise_errors) -> None:
        self.cfg, self.sent, self.spec, self.shares = cfg, sent, spec, shares
        self.start_timeout_s, self.step_timeout_s = start_timeout_s, step_timeout_s
        self.started_at, self.raise_errors = started_at, raise_errors
        self.events: "queue.Queue" = queue.Queue()
        self.workers: List[WorkerProcess] = []
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
        has_gpus = bool(preflight.visible_gpus())
        for tfc, share in zip(tfcs, self.shares):
            err_path = os.path.join(self.tmp, f"{tfc.task_type}-{tfc.task_index}.stderr")
            with open(err_path, "wb") as err:
                proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, stdin=subprocess.DEVNULL,
                                        env=worker_env(tfc, share, has_gpus,
                                                        self.network.pid if self.network else None),
                                        start_new_session=True)
            w = WorkerProcess(len(self.workers), tfc, proc, err_path, reports=not ps or tfc.task_type == "chief")
            w.reader = threading.Thread(target=read_reports, args=(w, self.events),
                                        name=f"tfwb-worker-{w.index}-reader", daemon=True)
            w.reader.start()
            self.workers.append(w)
        self.state.extras["cluster"] = {"pids": [w.proc.pid for w in self.workers],
                                        "addresses": [t.address for t in tfcs]}

    # -- watching ---------------------------------------------------------------------------
    def _on_event(self, w: WorkerProcess, ev: dict) -> None:
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

    def _steps_text(self, w: WorkerProcess) -> str:
        if not w.reports:
            return "while the chief was training" if self.log.times_s else "before the chief's first step"
        total = self.state.total_steps // self.state.steps_per_call
        return f"after {len(w.steps)} of {total} steps" if w.started_s is not None else "before it started"

    def _tails(self, workers: Sequence[WorkerProcess]) -> str:
        parts = [f"{w.name}'s last output: {t}" for w in workers for t in [w.tail()] if t]
        return ("; " + "; ".join(parts)) if parts else ""

    def _crash_message(self, w: WorkerProcess) -> str:
        why = w.error or (f"its run {w.result.status}: {w.result.error}" if w.result is not None else None)
        text = f"{w.name} (pid {w.proc.pid}, {w.tfc.address}) {w.ended()} {self._steps_text(w)}"
        if why:
            text += f": {why}"
        return text + self._tails([w] if not why else [])

    def _hang_message(self, silent: Sequence[WorkerProcess]) -> str:
        stopped = [(w, s) for w in self.workers for s in [stopped_state(w.proc.pid)] if s]
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
                    kill_all(self.workers)
                    if attempt + 1 == PORT_ATTEMPTS:
                        raise _ClusterFailed(f"every try to start the cluster found a chosen port taken ({e})")
                    self.notes.append(f"a chosen port was taken before worker start ({e}); retried with new ports")
        except _ClusterFailed as e:
            t_detect = time.perf_counter()
            kill_all(self.workers)
            failed, failure = True, e
            error = (f"{e}. Every worker process was stopped ({time.perf_counter() - t_detect:.1f} s after the "
                     f"failure was seen, {self.clock():.1f} s after the cluster started)")
        except KeyboardInterrupt:
            kill_all(self.workers)
            self.life.interrupt()                 # the same stop as a Stop button's
        except BaseException as e:   # an observer failed, or this process is going down
            kill_all(self.workers)
            failed, error, failure = True, f"{type(e).__name__}: {e}", e
        finally:
            kill_all(self.workers)      # a no-op for processes already gone
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


#: Names that moved in tfwb 0.3, served here with a DeprecationWarning until 0.4 (``tfwb.renamed.forward``).
__getattr__ = forward(__name__, {
    **dict.fromkeys(("holds_gpu_memory", "WORKER_MEMORY_MIB"), "tfwb.tf.cluster.preflight"),
    **dict.fromkeys(("alive", "REPORT"), "tfwb.tf.cluster.processes"),
})
