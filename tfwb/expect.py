"""Say what an experiment should show before it runs, and afterwards whether it did.

Every experiment in the book states an expectation for this hardware first, then
prints a ``Check``: what was expected, what was measured (with the noise verdict
from ``tfwb.stats.compare``), and whether the two agree. Pure: no TensorFlow.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

from . import stats

DIRECTIONS = ("faster", "slower", "no significant difference", "not slower", "not faster")


@dataclass(frozen=True)
class Check:
    """An expectation and the measurement that tests it."""

    claim: str
    expected: str
    comparison: Optional[stats.Comparison]
    agreed: Optional[bool]

    def __str__(self) -> str:
        if self.comparison is None:
            return f"Expected: {self.claim} ({self.expected}). Measured: nothing to compare (a run failed)."
        verdict = "agreed" if self.agreed else "did NOT agree"
        if self.comparison.verdict == stats.TOO_FEW:
            verdict = "too few steps to tell"
        return (f"Expected: {self.claim} ({self.expected}). "
                f"Measured: {self.comparison.text()}. Result: {verdict}.")


def _times(x) -> Optional[Sequence[float]]:
    if hasattr(x, "step_times_s"):
        return x.step_times_s if getattr(x, "ok", True) and x.step_times_s else None
    return x


def check(claim: str, baseline, candidate, expected: str) -> Check:
    """Compare ``candidate`` with ``baseline`` and test the expectation.

    Args:
        claim: the sentence being tested, e.g. "prefetch hides the input wait".
        baseline, candidate: RunResults, or sequences of per-step seconds.
        expected: one of ``faster``, ``slower``, ``no significant difference``,
            ``not slower``, ``not faster`` (the candidate relative to the baseline).

    Raises:
        ValueError: for an unknown ``expected``.

    Example:
        >>> print(check("caching helps", [2.0] * 9, [1.0] * 9, "faster"))
        Expected: caching helps (faster). Measured: 2.00x faster. Result: agreed.
    """
    if expected not in DIRECTIONS:
        raise ValueError(f"expected={expected!r} is not allowed; one of {DIRECTIONS}")
    b, c = _times(baseline), _times(candidate)
    if not b or not c:
        return Check(claim, expected, None, None)
    cmp = stats.compare(b, c)
    if cmp.verdict == stats.TOO_FEW:
        agreed = None
    elif expected == "not slower":
        agreed = cmp.verdict != stats.SLOWER
    elif expected == "not faster":
        agreed = cmp.verdict != stats.FASTER
    else:
        agreed = cmp.verdict == expected
    return Check(claim, expected, cmp, agreed)
