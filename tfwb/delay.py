"""What a run's measured waiting can explain: the bound of a slow-down owed to a delay.

Owns the arithmetic behind "a ratio the measured delay cannot explain". A run's delay is the share
(0..1) of its measured wall time it may have been kept waiting for a CPU (``tfwb.analysis.pairs.delay_of``,
from the kernel's counters that ``tfwb.utilization.pressure`` reads); ``tfwb.stats.compare`` asks
``explains`` whether a pair's ratio could be the delay's doing before it says "cannot tell".

Pure: no imports from tfwb.
"""
from __future__ import annotations

import math
from typing import Tuple

__all__ = ["delay_bound", "explains"]


def delay_bound(delay: float) -> float:
    """The largest slow-down a run kept waiting ``delay`` (0..1) of its wall time can owe to the waiting.

    While nothing of the run waited (``1 - delay`` of its time) it went at its quiet pace, so its
    quiet time is at least that share of the measured one: the waiting explains at most
    ``1 / (1 - delay)``; ``inf`` at 1.

    Raises:
        ValueError: for a delay outside [0, 1].

    Example:
        >>> delay_bound(0.5), delay_bound(0.0)
        (2.0, 1.0)
    """
    if not 0.0 <= delay <= 1.0:
        raise ValueError(f"delay={delay!r} is not allowed; it must be a share in [0, 1]")
    return math.inf if delay >= 1.0 else 1.0 / (1.0 - delay)


def explains(speedup: float, delays: Tuple[float, float], *, busy_share: float, band_pct: float) -> bool:
    """Whether the delays of (baseline, candidate) could explain the ratio ``speedup`` (baseline / candidate).

    Runs that both waited less than ``busy_share`` explain nothing. Otherwise the slower side's
    ``delay_bound``, widened by the run-to-run band (``band_pct`` percent), is the largest ratio the
    waiting can explain: a pair whose slower side waited at most d cannot owe a ratio beyond it to
    the delay. A delayed faster side only hides a difference, so any ratio inside that bound stays
    undecided too.

    Example:
        >>> explains(5.0, (0.3, 0.0), busy_share=0.1, band_pct=10), explains(1.2, (0.3, 0.0), busy_share=0.1, band_pct=10)
        (False, True)
        >>> explains(1.2, (0.01, 0.02), busy_share=0.1, band_pct=10)
        False
    """
    if max(delays) < busy_share:
        return False
    slower = delays[0] if speedup > 1 else delays[1]
    factor = max(speedup, 1.0 / speedup)
    return factor <= delay_bound(min(1.0, max(0.0, slower))) * (1.0 + band_pct / 100.0)
