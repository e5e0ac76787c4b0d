"""Bounded CPU load beside a measurement: what a reader's shared 2-core machine does to it.

``Load(pattern, duration_s)`` starts local processes that keep cores busy and end by
themselves after ``duration_s`` (and are killed when the ``with`` block ends, whichever comes
first): nothing outlives the test or benchmark that made it, and nothing touches the network.

Patterns:

* ``"quiet"``: nothing.
* ``"bursty"``: one core busy in bursts: ``BURST_ON_S`` of spinning, then ``BURST_OFF_S`` idle
  (a browser rendering, a notebook autosaving, another kernel's cell).
* ``"one"``: one core busy all the time.
* ``"both"``: every core busy all the time (``os.cpu_count()`` spinners).

Tests import it as ``from loadgen import Load`` (tests/ is on ``sys.path``); benchmarks put
tests/ on ``sys.path`` first.

Example:
    >>> with Load("quiet", 1.0) as load:
    ...     load.processes
    0
"""
from __future__ import annotations

import os
import subprocess
import sys
import time
from typing import List, Optional

PATTERNS = ("quiet", "bursty", "one", "both")
BURST_ON_S = 0.4
BURST_OFF_S = 0.6

_SPIN = """
import sys, time
end = time.monotonic() + float(sys.argv[1])
on, off = float(sys.argv[2]), float(sys.argv[3])
while time.monotonic() < end:
    t = time.monotonic() + on
    while time.monotonic() < t:
        pass
    if off > 0:
        time.sleep(min(off, max(0.0, end - time.monotonic())))
"""


class Load:
    """A bounded CPU load (see the module docstring).

    Args:
        pattern: one of ``PATTERNS``.
        duration_s: each process ends by itself after this many seconds (at most 3600).

    Raises:
        ValueError: for an unknown pattern or a duration outside (0, 3600].
    """

    def __init__(self, pattern: str, duration_s: float) -> None:
        if pattern not in PATTERNS:
            raise ValueError(f"pattern={pattern!r} is not allowed; pattern must be one of {', '.join(PATTERNS)}")
        if not 0 < duration_s <= 3600:
            raise ValueError(f"duration_s={duration_s!r} is not allowed; it must be in (0, 3600]")
        self.pattern, self.duration_s = pattern, float(duration_s)
        self._procs: List[subprocess.Popen] = []

    @property
    def processes(self) -> int:
        """How many load processes are running now."""
        return sum(1 for p in self._procs if p.poll() is None)

    def start(self) -> "Load":
        on, off, n = {"quiet": (0, 0, 0), "bursty": (BURST_ON_S, BURST_OFF_S, 1),
                      "one": (self.duration_s, 0, 1), "both": (self.duration_s, 0, os.cpu_count() or 1)}[self.pattern]
        for _ in range(n):
            self._procs.append(subprocess.Popen([sys.executable, "-c", _SPIN, str(self.duration_s), str(on), str(off)],
                                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL))
        return self

    def stop(self, timeout_s: Optional[float] = 5.0) -> None:
        """End every load process (killed if it does not end within ``timeout_s``)."""
        for p in self._procs:
            if p.poll() is None:
                p.terminate()
        deadline = time.monotonic() + (timeout_s or 0.0)
        for p in self._procs:
            try:
                p.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        self._procs = []

    def __enter__(self) -> "Load":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
