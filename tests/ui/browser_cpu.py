"""The browser's CPU while a Workbench run is drawn: Chromium's processes sampled with psutil.

Used by tests/ui/test_lab.py (the budget: at most ``BROWSER_BUDGET`` of the machine's cores while a
run's measured steps run) and benchmarks/browser_decide.py (the same figure per run).

How it samples: a thread reads, every ``interval_s``, the CPU time (user + system) of every process
of this process's tree whose name or executable says ``chrom`` (the Chromium that Playwright started
here, its renderer, GPU and utility processes; never another session's browser), and keeps
``(wall time, cumulative CPU seconds)``. A process that ends keeps its last reading. The CPU spent
between two wall times is read off that curve by linear interpolation, and the share is that time
over the wall time times the machine's cores. CPU time is what the browser itself spent: other
programs on a loaded machine do not inflate it (they only stretch the wall time, which lowers the
share), so the figure holds on a busy CI machine too.

It also says when a run's measured steps ran: ``WINDOW_CODE`` is kernel code that wraps a
Workbench's runner with an observer writing the wall times of the end of warm-up and of the last
measured step of each run (``time.time()``, the clock this module samples on).
"""
from __future__ import annotations

import bisect
import json
import threading
import time
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import psutil

#: The most the browser may use of the machine's cores while a run's measured steps run (issue 34).
BROWSER_BUDGET = 0.02


def browser_processes() -> List[psutil.Process]:
    """This process's descendants whose name or executable says ``chrom``."""
    found = []
    for p in psutil.Process().children(recursive=True):
        try:
            name = p.name().lower()
            exe = (p.exe() or "").lower() if "chrom" not in name else name
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
        if "chrom" in name or "chrom" in exe:
            found.append(p)
    return found


class CpuTrace:
    """Cumulative CPU seconds of the browser's processes, sampled on a thread (a context manager).

    Args:
        interval_s: seconds between samples.

    Attributes:
        points: ``(time.time(), cumulative CPU seconds)`` per sample.
    """

    def __init__(self, interval_s: float = 0.1) -> None:
        self.interval_s = interval_s
        self.points: List[Tuple[float, float]] = []
        self._last: Dict[int, float] = {}
        self._procs: Dict[int, psutil.Process] = {}
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self.cores = psutil.cpu_count() or 1

    def sample(self) -> None:
        """Take one sample now."""
        for p in browser_processes():
            self._procs.setdefault(p.pid, p)
        for pid, p in list(self._procs.items()):
            try:
                t = p.cpu_times()
                self._last[pid] = t.user + t.system
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                del self._procs[pid]                  # ended: its last reading stays in _last
        self.points.append((time.time(), sum(self._last.values())))

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.sample()

    def __enter__(self) -> "CpuTrace":
        self.sample()
        self._thread = threading.Thread(target=self._loop, name="browser-cpu", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self.sample()

    def cpu_at(self, t: float) -> float:
        """Cumulative CPU seconds at wall time ``t``, interpolated between the samples around it."""
        times = [p[0] for p in self.points]
        if not times or t < times[0] or t > times[-1]:
            raise ValueError(f"t={t:.3f} is outside the samples ({times[0] if times else None} .. "
                             f"{times[-1] if times else None})")
        i = bisect.bisect_left(times, t)
        if times[i] == t or i == 0:
            return self.points[i][1]
        (t0, c0), (t1, c1) = self.points[i - 1], self.points[i]
        return c0 + (c1 - c0) * (t - t0) / (t1 - t0)

    def share(self, start: float, end: float) -> float:
        """The browser's CPU between wall times ``start`` and ``end``, as a share of all the machine's cores."""
        if end <= start:
            raise ValueError(f"end={end} must be after start={start}")
        return (self.cpu_at(end) - self.cpu_at(start)) / ((end - start) * self.cores)


#: Kernel code (format with ``wb`` and ``path``): wrap the Workbench's runner so that each run appends
#: ``{"start", "end", "status", "steps"}`` (the wall times of the end of warm-up and of the last measured
#: step's end) to the JSON list at ``path``.
WINDOW_CODE = """
import json as _json, time as _time
import tfwb as _tfwb
from tfwb.observers import Observer as _Observer

class _MeasuredWindow(_Observer):
    def on_run_start(self, run):
        self.start, self.end = None, None
    def on_warmup_end(self, run):
        self.start = _time.time()
    def on_step_end(self, run, step):
        if self.start is not None:
            self.end = _time.time()
    def on_run_end(self, run):
        try:
            with open({path!r}) as f:
                seen = _json.load(f)
        except OSError:
            seen = []
        seen.append({{"start": self.start, "end": self.end, "status": run.status, "steps": len(run.log.times_s)}})
        with open({path!r}, "w") as f:
            _json.dump(seen, f)

_inner = {wb}.controller._runner or _tfwb.run
{wb}.controller._runner = lambda cfg, observers: _inner(cfg, (*observers, _MeasuredWindow()))
"""


def read_windows(path: Path) -> List[dict]:
    """The windows ``WINDOW_CODE`` wrote (none yet: ``[]``)."""
    try:
        return json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return []


def wait_for_windows(path: Path, count: int, timeout_s: float) -> List[dict]:
    """Wait (sleeping, never polling the page) until ``path`` holds ``count`` windows."""
    deadline = time.monotonic() + timeout_s
    while True:
        windows = read_windows(path)
        if len(windows) >= count:
            return windows
        if time.monotonic() > deadline:
            raise TimeoutError(f"{path}: {len(windows)} of {count} runs ended within {timeout_s:.0f} s")
        time.sleep(0.2)


__all__ = ["BROWSER_BUDGET", "CpuTrace", "browser_processes", "WINDOW_CODE", "read_windows", "wait_for_windows"]
