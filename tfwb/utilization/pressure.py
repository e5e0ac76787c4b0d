"""What the kernel measured of waiting over a span: was this process kept from a CPU?

Owns the delay probe (``start_delay_probe``) and the parsers of the files it reads. "Other
programs used X % of the CPU" counts a browser that drew on an idle core as much as one that
took this process's core; these signals count waiting instead:

* ``psi_some``: Linux pressure stall information, ``/proc/pressure/cpu``: the share of the span's
  wall time in which at least one runnable task (of any program, this one's included) waited for
  a CPU (the difference of the ``some ... total=`` microsecond counter over the span).
* ``cgroup_some``: the same for this process's cgroup v2 (``cpu.pressure`` of the cgroup named in
  ``/proc/self/cgroup``'s ``0::`` line, under ``/sys/fs/cgroup`` or ``/sys/fs/cgroup/unified``).
* ``steal``: the share of CPU time a hypervisor gave to other guests (``/proc/stat``'s ``steal``).
* ``run_wait``: the time this process's threads sat runnable in the run queue
  (``/proc/self/task/*/schedstat``, second field; threads that ended within the span are not
  counted) over the span's wall time, at most 1: the sum of the threads' waits, so an upper
  bound of the share of the span in which any of them waited (its own threads' contention
  included, other programs' waiting not).
* ``cpu_per_wall``: this process's CPU time over the span's wall time on those cores (``cores``).

Each is ``None`` where its file is absent (macOS, old kernels, no cgroup v2). Nothing is read
at import. The readings are shares (0..1) so that a record stays small; ``tfwb.analysis.pairs``
turns them into a run's delay and ``tfwb.stats.compare`` decides with it.

Example:
    >>> stop = start_delay_probe()
    >>> sorted(stop())
    ['cgroup_some', 'cores', 'cpu_per_wall', 'psi_some', 'run_wait', 'steal', 'wall_s']
"""
from __future__ import annotations

import os
import time
from typing import Callable, Dict, Optional, Tuple

__all__ = ["parse_psi", "parse_cgroup_v2_path", "cgroup_pressure_file", "parse_stat_steal",
           "parse_schedstat_wait", "start_delay_probe", "DELAY_KEYS"]

#: The keys of ``start_delay_probe``'s reading (``RunResult.extras["delay"]``).
DELAY_KEYS = ("wall_s", "psi_some", "cgroup_some", "steal", "run_wait", "cpu_per_wall", "cores")


def parse_psi(text: str) -> Optional[Dict[str, float]]:
    """The ``some`` line of a PSI file: ``{"avg10", "avg60", "avg300", "total_us"}``.

    Returns None when the text has no well-formed ``some`` line.

    Example:
        >>> parse_psi("some avg10=1.50 avg60=0.20 avg300=0.00 total=12345\\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0")
        {'avg10': 1.5, 'avg60': 0.2, 'avg300': 0.0, 'total_us': 12345.0}
    """
    for line in text.splitlines():
        parts = line.split()
        if not parts or parts[0] != "some":
            continue
        fields = dict(p.split("=", 1) for p in parts[1:] if "=" in p)
        try:
            return {"avg10": float(fields["avg10"]), "avg60": float(fields["avg60"]),
                    "avg300": float(fields["avg300"]), "total_us": float(fields["total"])}
        except (KeyError, ValueError):
            return None
    return None


def parse_cgroup_v2_path(text: str) -> Optional[str]:
    """This process's cgroup v2 path from ``/proc/self/cgroup`` (the ``0::/path`` line), or None.

    Example:
        >>> parse_cgroup_v2_path("4:memory:/a\\n0::/user.slice/x.scope\\n")
        '/user.slice/x.scope'
        >>> parse_cgroup_v2_path("4:memory:/a\\n") is None
        True
    """
    for line in text.splitlines():
        if line.startswith("0::"):
            path = line[3:].strip()
            return path or None
    return None


def cgroup_pressure_file(cgroup_text: str, root: str = "/sys/fs/cgroup") -> Optional[str]:
    """The ``cpu.pressure`` file of the cgroup ``cgroup_text`` (``/proc/self/cgroup``) names, if it exists.

    Looked for under ``root`` (a pure cgroup v2 mount) and ``root/unified`` (the hybrid layout).
    """
    path = parse_cgroup_v2_path(cgroup_text)
    if path is None:
        return None
    for base in (root, os.path.join(root, "unified")):
        candidate = os.path.join(base, path.lstrip("/"), "cpu.pressure")
        if os.path.isfile(candidate):
            return candidate
    return None


def parse_stat_steal(text: str) -> Optional[Tuple[float, float]]:
    """``(total, steal)`` clock ticks of ``/proc/stat``'s ``cpu`` line (guest time is inside user time).

    Returns None without a ``cpu`` line; steal is 0 on kernels that do not report it.

    Example:
        >>> parse_stat_steal("cpu  100 0 50 800 10 0 5 35 0 0\\ncpu0 1 2 3 4\\n")
        (1000.0, 35.0)
    """
    for line in text.splitlines():
        parts = line.split()
        if parts and parts[0] == "cpu":
            try:
                values = [float(v) for v in parts[1:]]
            except ValueError:
                return None
            if len(values) < 4:
                return None
            total = sum(values[:8])                 # user..steal; guest and guest_nice are inside user/nice
            return total, (values[7] if len(values) > 7 else 0.0)
    return None


def parse_schedstat_wait(text: str) -> Optional[float]:
    """Seconds a thread sat runnable in the run queue, from its ``schedstat`` (``run_ns wait_ns slices``).

    Example:
        >>> parse_schedstat_wait("936637 2905358 1")
        0.002905358
    """
    parts = text.split()
    if len(parts) < 2:
        return None
    try:
        return int(parts[1]) / 1e9
    except ValueError:
        return None


def _read(path: str) -> Optional[str]:
    try:
        with open(path, encoding="ascii", errors="replace") as f:
            return f.read()
    except OSError:
        return None


def _psi_total_s(path: Optional[str]) -> Optional[float]:
    text = _read(path) if path else None
    parsed = parse_psi(text) if text else None
    return None if parsed is None else parsed["total_us"] / 1e6


def _thread_waits(proc: str) -> Optional[Dict[str, float]]:
    task_dir = os.path.join(proc, "self", "task")
    try:
        tids = os.listdir(task_dir)
    except OSError:
        return None
    waits: Dict[str, float] = {}
    for tid in tids:
        text = _read(os.path.join(task_dir, tid, "schedstat"))
        wait = parse_schedstat_wait(text) if text else None
        if wait is not None:
            waits[tid] = wait
    return waits or None


def _cores() -> int:
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


def _share(before: Optional[float], after: Optional[float], over: float) -> Optional[float]:
    if before is None or after is None or over <= 0:
        return None
    return round(min(1.0, max(0.0, (after - before) / over)), 4)


def start_delay_probe(proc: str = "/proc", cgroup_root: str = "/sys/fs/cgroup",
                      clock: Callable[[], float] = time.monotonic,
                      process_cpu_s: Callable[[], float] = time.process_time) -> Callable[[], Dict[str, Optional[float]]]:
    """Starts reading the kernel's waiting counters; the function it returns ends the span.

    Args:
        proc: where procfs is mounted (a tmp folder in tests).
        cgroup_root: where the cgroup hierarchy is mounted.
        clock: wall-clock seconds.
        process_cpu_s: this process's CPU seconds (user + system, every thread).

    Returns:
        ``stop()``, which returns a dict of ``DELAY_KEYS``: ``wall_s`` and ``cores`` (the cores
        this process may use), and each signal as a share 0..1 of the span (see the module
        docstring), ``None`` where it cannot be read. Never raises.
    """
    cgroup_text = _read(os.path.join(proc, "self", "cgroup")) or ""
    cgroup_file = cgroup_pressure_file(cgroup_text, cgroup_root) if cgroup_text else None
    psi_file = os.path.join(proc, "pressure", "cpu")
    cores = _cores()

    def snapshot() -> Dict[str, object]:
        stat_text = _read(os.path.join(proc, "stat"))
        return {"wall": clock(), "cpu": process_cpu_s(), "psi": _psi_total_s(psi_file),
                "cgroup": _psi_total_s(cgroup_file), "stat": parse_stat_steal(stat_text) if stat_text else None,
                "waits": _thread_waits(proc)}

    start = snapshot()

    def stop() -> Dict[str, Optional[float]]:
        end = snapshot()
        wall = float(end["wall"]) - float(start["wall"])                    # type: ignore[arg-type]
        steal = None
        if start["stat"] is not None and end["stat"] is not None:
            (t0, s0), (t1, s1) = start["stat"], end["stat"]                  # type: ignore[misc]
            steal = _share(s0, s1, t1 - t0)
        run_wait = None
        if start["waits"] is not None and end["waits"] is not None:
            w0, w1 = start["waits"], end["waits"]
            waited = sum(w - w0.get(tid, 0.0) for tid, w in w1.items())      # type: ignore[union-attr]
            run_wait = _share(0.0, waited, wall)
        return {"wall_s": round(wall, 6), "psi_some": _share(start["psi"], end["psi"], wall),  # type: ignore[arg-type]
                "cgroup_some": _share(start["cgroup"], end["cgroup"], wall),                  # type: ignore[arg-type]
                "steal": steal, "run_wait": run_wait,
                "cpu_per_wall": _share(start["cpu"], end["cpu"], wall * cores),              # type: ignore[arg-type]
                "cores": float(cores)}

    return stop
