"""Robust statistics for step times and a noise-aware comparison of two runs.

Pure functions over sequences of floats: median, quantiles, IQR, MAD, and
``compare``, which calls a difference significant only when the two runs'
inter-quartile ranges do not overlap. No NumPy needed; no TensorFlow.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

#: Verdicts ``compare`` can return.
FASTER, SLOWER, NO_DIFFERENCE, TOO_FEW = ("faster", "slower", "no significant difference",
                                           "too few steps to tell")
MIN_STEPS_TO_COMPARE = 5


def _clean(values: Sequence[float]) -> list:
    xs = sorted(float(v) for v in values)
    if not xs:
        raise ValueError("values is empty; need at least one measurement")
    if any(math.isnan(x) for x in xs):
        raise ValueError("values contains NaN")
    return xs


def quantile(values: Sequence[float], q: float) -> float:
    """The ``q``-quantile with linear interpolation (NumPy's default method).

    Raises:
        ValueError: for an empty sequence, NaN, or ``q`` outside [0, 1].
    """
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"q={q!r} is not allowed; q must be in [0, 1]")
    xs = _clean(values)
    pos = (len(xs) - 1) * q
    lo = math.floor(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def median(values: Sequence[float]) -> float:
    """The median (0.5-quantile)."""
    return quantile(values, 0.5)


def iqr(values: Sequence[float]) -> tuple:
    """``(q1, q3)``: the 25th and 75th percentiles."""
    return quantile(values, 0.25), quantile(values, 0.75)


def mad(values: Sequence[float]) -> float:
    """Median absolute deviation from the median (unscaled)."""
    m = median(values)
    return median([abs(v - m) for v in values])


def percentiles(values: Sequence[float], qs: Sequence[float] = (5, 25, 50, 75, 95)) -> dict:
    """``{q: value}`` for each percentile ``q`` in 0..100."""
    return {q: quantile(values, q / 100.0) for q in qs}


@dataclass(frozen=True)
class Spread:
    """Median and inter-quartile range of one run's measurements."""

    median: float
    q1: float
    q3: float
    n: int

    @classmethod
    def of(cls, values: Sequence[float]) -> "Spread":
        q1, q3 = iqr(values)
        return cls(median(values), q1, q3, len(values))

    def overlaps(self, other: "Spread") -> bool:
        """True when the two IQRs share any point."""
        return self.q1 <= other.q3 and other.q1 <= self.q3


@dataclass(frozen=True)
class Comparison:
    """How a candidate run compares with a baseline run.

    ``speedup`` is baseline median / candidate median (> 1: the candidate is
    faster). ``verdict`` is one of ``faster``, ``slower``,
    ``no significant difference`` and ``too few steps to tell``.
    """

    speedup: float
    baseline: Spread
    candidate: Spread
    verdict: str

    @property
    def significant(self) -> bool:
        return self.verdict in (FASTER, SLOWER)

    def text(self) -> str:
        """e.g. ``"1.42x faster"`` or ``"1.03x: no significant difference"``."""
        if self.significant:
            factor = self.speedup if self.verdict == FASTER else 1.0 / self.speedup
            return f"{factor:.2f}x {self.verdict}"
        return f"{self.speedup:.2f}x: {self.verdict}"


def compare(baseline: Sequence[float], candidate: Sequence[float]) -> Comparison:
    """Compare two runs' per-step times.

    The difference is significant only when both runs have at least
    ``MIN_STEPS_TO_COMPARE`` steps and their IQRs do not overlap.

    Raises:
        ValueError: for empty input or a zero median.

    Example:
        >>> compare([2, 2, 2, 2, 2], [1, 1, 1, 1, 1]).text()
        '2.00x faster'
    """
    b, c = Spread.of(baseline), Spread.of(candidate)
    if c.median <= 0 or b.median <= 0:
        raise ValueError("step times must be positive to compute a speedup")
    speedup = b.median / c.median
    if min(b.n, c.n) < MIN_STEPS_TO_COMPARE:
        verdict = TOO_FEW
    elif b.overlaps(c):
        verdict = NO_DIFFERENCE
    else:
        verdict = FASTER if speedup > 1 else SLOWER
    return Comparison(speedup=speedup, baseline=b, candidate=c, verdict=verdict)
