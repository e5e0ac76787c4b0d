"""The worker processes of a local cluster as the parent sees them: started, read, watched, killed.

``WorkerProcess`` holds one process (its ``TF_CONFIG``, the steps and result it reported,
its stderr's tail, how it ended); ``worker_env`` is the environment it starts with (its
``TF_CONFIG``, its cores and GPUs, the cluster's network namespace); ``read_reports`` turns
its stdout into events (``tfwb.cluster_spec.REPORT`` lines, from ``tfwb.tf.cluster.worker``);
``kill_all`` ends every process group. ``tfwb.tf.cluster.parent`` drives them.
"""
from __future__ import annotations

import collections
import json
import os
import queue
import signal
import subprocess
import threading
import time
from typing import Deque, Dict, List, Optional, Sequence

import tfwb
from tfwb import cluster_spec
from tfwb.records import RunResult

REPORT = cluster_spec.REPORT


class WorkerProcess:
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


def read_reports(w: WorkerProcess, events: "queue.Queue") -> None:
    """Until ``w``'s stdout ends: each ``REPORT`` line onto ``events`` as ``(w, dict)``, other lines
    into ``w.other``; then ``(w, {"event": "eof"})``. A reader thread's target."""
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


def stopped_state(pid: int) -> Optional[str]:
    """Why ``pid`` may not answer: ``"stopped"``, ``"tracing-stop"``, ``"zombie"`` or ``"disk-sleep"``; else None."""
    try:
        import psutil

        status = psutil.Process(pid).status()
    except Exception:  # noqa: BLE001
        return None
    return status if status in ("stopped", "tracing-stop", "zombie", "disk-sleep") else None


def kill_all(workers: Sequence[WorkerProcess]) -> None:
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


def worker_env(tfc: cluster_spec.TFConfig, share: dict, machine_has_gpus: bool,
                netns_pid: Optional[int] = None) -> Dict[str, str]:
    """The environment a worker process starts with: its ``TF_CONFIG``, its cores (``share["cpus"]``),
    on a machine with GPUs its own (``share["gpus"]``, memory taken as needed), the cluster's network
    namespace (``netns_pid``), and this package on its ``PYTHONPATH``."""
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
