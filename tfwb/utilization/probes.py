"""Probes: small readers of one kind of utilization, each returning Sample fields.

Owns the probe protocol and the CPU/RAM probe on psutil (the fake probe for tests is in
``tests/nvml_fakes.py``).
The NVML probe lives in ``tfwb.nvml`` so that all NVML calls stay in one place.
"""
from __future__ import annotations

import os
import time
from typing import Any, Callable, Dict, Optional, Protocol, Tuple, runtime_checkable

#: Fields of ``tfwb.records.Sample`` that a probe may return (``t_s`` is the sampler's).
PROBE_FIELDS = ("cpu_process_pct", "cpu_system_pct", "rss_mib", "gpu_util_pct", "gpu_mem_used_mib")


@runtime_checkable
class Probe(Protocol):
    """What the Sampler needs from a probe.

    ``read()`` returns some of ``PROBE_FIELDS`` (GPU fields as tuples, one entry per GPU,
    ``None`` where a GPU refused a field); it may raise, and the Sampler records the error.
    ``close()`` releases what the probe holds; the Sampler calls it once, at stop.
    """

    def read(self) -> Dict[str, Any]: ...

    def close(self) -> None: ...


class PsutilProbe:
    """This process's CPU and resident memory, and the whole machine's CPU, via psutil.

    CPU figures are averages since the previous read (the first read: since construction,
    where both counters are primed; psutil's own first ``cpu_percent`` would be a
    meaningless 0). The kernel counts CPU time in ticks of about 10 ms, so a read less than
    ``min_window_s`` after the previous one gives ``None`` for both CPU fields and keeps
    the window open for the next read.

    Args:
        pid (int | None, default None): the process to watch; ``None`` is this process.
        min_window_s (float, default 0.02): shortest window that yields CPU figures.
        psutil_module (module | None, default None): psutil itself, or a stand-in for tests;
            ``None`` imports psutil.
        clock (callable() -> float, default time.monotonic): wall-clock seconds for the
            CPU windows (a fake clock makes the figures exact in tests).

    Returns from ``read()``:
        ``cpu_process_pct`` (% of one core; can exceed 100 with several threads busy),
        ``cpu_system_pct`` (% of all cores), ``rss_mib``.

    Raises:
        ImportError: psutil is not installed.
        psutil.NoSuchProcess: ``pid`` does not exist.

    Example:
        >>> probe = PsutilProbe()
        >>> sorted(probe.read())
        ['cpu_process_pct', 'cpu_system_pct', 'rss_mib']
    """

    def __init__(self, pid: Optional[int] = None, min_window_s: float = 0.02,
                 psutil_module: Any = None, clock: Callable[[], float] = time.monotonic) -> None:
        if psutil_module is None:
            import psutil as psutil_module
        self._psutil = psutil_module
        self._clock = clock
        self._process = psutil_module.Process(pid)
        self.min_window_s = float(min_window_s)
        self._prime()

    def _prime(self) -> None:
        self._last_wall_s = self._clock()
        self._last_process_s = _process_cpu_s(self._process.cpu_times())
        self._last_system = self._psutil.cpu_times()

    def read(self) -> Dict[str, Any]:
        out: Dict[str, Any] = {"cpu_process_pct": None, "cpu_system_pct": None,
                               "rss_mib": self._process.memory_info().rss / 2**20}
        wall_s = self._clock() - self._last_wall_s
        if wall_s >= self.min_window_s:
            process_s = _process_cpu_s(self._process.cpu_times()) - self._last_process_s
            out["cpu_process_pct"] = round(max(0.0, 100.0 * process_s / wall_s), 2)
            out["cpu_system_pct"] = _busy_pct(self._last_system, self._psutil.cpu_times())
            self._prime()
        return out

    def close(self) -> None:
        """Nothing to release; here for the protocol."""


def _process_cpu_s(times: Any) -> float:
    """User plus system CPU seconds of a ``Process.cpu_times()`` reading."""
    return float(times.user) + float(times.system)


def _busy_pct(before: Any, after: Any) -> Optional[float]:
    """Whole-machine CPU busy % between two ``psutil.cpu_times()`` readings.

    Counted as psutil's own ``cpu_percent`` counts it (idle and iowait are not busy; guest
    time is already inside user time), but from our own previous reading, so that two
    probes, or other code calling ``psutil.cpu_percent``, cannot disturb each other.
    Returns None when no clock tick passed in between.
    """
    def total_and_busy(t: Any) -> "tuple[float, float]":
        total = sum(t) - getattr(t, "guest", 0.0) - getattr(t, "guest_nice", 0.0)
        return total, total - t.idle - getattr(t, "iowait", 0.0)

    total0, busy0 = total_and_busy(before)
    total1, busy1 = total_and_busy(after)
    if total1 <= total0:
        return None
    return round(min(100.0, max(0.0, 100.0 * (busy1 - busy0) / (total1 - total0))), 2)


def start_load_probe() -> Callable[[], Optional[float]]:
    """Starts reading the CPU time other programs take; the function it returns ends the
    reading: their share (0..1) of this process's cores since the start, or None.

    As psutil's machine-wide ``cpu_percent`` counts busy time (idle and iowait are not busy),
    over this process's cores (its affinity), from psutil's CPU times read here (so that a
    sampler calling ``cpu_percent`` meanwhile cannot disturb it), minus this process's own
    CPU time (``Process().cpu_times()``). The peak benchmark marks a figure measured under
    load with it; a chapter's setup says how busy the machine is before its time estimate.

    Example:
        >>> stop = start_load_probe()
        >>> share = stop()
        >>> share is None or 0.0 <= share <= 1.0
        True
    """
    try:
        import psutil

        process = psutil.Process()
        cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None

        def read() -> Tuple[float, float, float]:
            per_cpu = psutil.cpu_times(percpu=True)
            if cores and max(cores) < len(per_cpu):
                per_cpu = [per_cpu[i] for i in cores]
            total = busy = 0.0
            for t in per_cpu:
                all_s = sum(t) - getattr(t, "guest", 0.0) - getattr(t, "guest_nice", 0.0)
                total += all_s
                busy += all_s - t.idle - getattr(t, "iowait", 0.0)
            own = process.cpu_times()
            return total, busy, float(own.user) + float(own.system)

        start = read()
    except Exception:  # noqa: BLE001 - no psutil, no /proc: the figure is not marked either way
        return lambda: None

    def stop() -> Optional[float]:
        try:
            end = read()
        except Exception:  # noqa: BLE001
            return None
        total = end[0] - start[0]
        if total <= 0:
            return None
        return min(1.0, max(0.0, ((end[1] - start[1]) - (end[2] - start[2])) / total))

    return stop



def other_programs_cpu_pct(seconds: float = 0.5) -> Optional[float]:
    """The share (0-100) of this process's cores other programs used over the next ``seconds``.

    Sleeps meanwhile; ``None`` where psutil cannot read the CPU times.
    """
    stop = start_load_probe()
    time.sleep(seconds)
    share = stop()
    return None if share is None else 100.0 * share
