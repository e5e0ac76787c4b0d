"""The checks: an expectation stated before a measurement, and whether the measurement agreed.

- ``ab(claim, expected)``: an A/B expectation; ``.check(baseline, candidate)`` compares two
  runs (``tfwb.stats.compare``: medians, spreads, run-to-run noise).
- ``at_least`` / ``at_most`` / ``equal``: a threshold (or exact) expectation on one measured
  value; ``.check(value)``.
- ``unjudged``: a value printed with no fixed expectation here, and why.
- ``Expected`` (``tfwb.advice.directions``): the direction a rule gives a change on one machine;
  ``ab`` takes it as its expectation.

Each ``.check`` returns a ``Check`` whose ``str`` is one sentence:
``Expected: <claim> (<expected>). Measured: <what>. Result: agreed.``
A measurement that did not happen (a failed run, ``None``, NaN) reads "cannot tell",
with why, never "did NOT agree".

Pure: no TensorFlow; knows nothing about machines or knobs.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Optional, Sequence, Union

from tfwb import stats
from tfwb.advice.directions import DIRECTIONS, FASTER, NOT_FASTER, NOT_SLOWER, SAME, SLOWER, Expected
from tfwb.bottleneck import MODERATE_INPUT_FRACTION
from tfwb.analysis.pairs import compare_runs
from tfwb.records import RunResult

AGREED, DISAGREED, CANNOT_TELL = "agreed", "did NOT agree", "cannot tell"


# -- results ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Check:
    """An expectation and the measurement that tests it.

    Attributes:
        claim (str): the sentence being tested.
        expected (str): what was expected, e.g. ``"faster"`` or ``"at least 5x"``.
        comparison (stats.Comparison | stats.RoundsComparison | None): for A/B checks.
        agreed (bool | None): whether the measurement agreed; ``None`` when it cannot
            tell (a run failed, too few steps, no expectation to test).
        measured (str): what was measured, in words (``""``: nothing).
        note (str): why the result is what it is when that is not obvious.
        value (float | None): the measured value of a threshold check.
    """

    claim: str
    expected: str
    comparison: Any = None
    agreed: Optional[bool] = None
    measured: str = ""
    note: str = ""
    value: Optional[float] = None

    @property
    def result(self) -> str:
        """``"agreed"``, ``"did NOT agree"`` or why it cannot tell."""
        if self.agreed is True:
            return AGREED
        if self.agreed is False:
            return DISAGREED
        verdict = getattr(self.comparison, "verdict", None)
        if verdict in (stats.TOO_FEW, getattr(stats, "TOO_FEW_ROUNDS", stats.TOO_FEW)):
            return verdict
        return CANNOT_TELL

    def __str__(self) -> str:
        measured = self.measured or "nothing to compare"
        result = self.result
        if self.note:
            result += f" ({self.note})"
        return f"Expected: {self.claim} ({self.expected}). Measured: {measured}. Result: {result}."


# -- the three kinds of expectation ----------------------------------------------------------
def _times(x: Any) -> Optional[Sequence[float]]:
    """Per-step seconds of a RunResult (None if it failed), a CallTimes, or a sequence."""
    if hasattr(x, "step_times_s"):
        return x.step_times_s if getattr(x, "ok", True) and x.step_times_s else None
    if hasattr(x, "times_s"):
        return x.times_s or None
    return x


def not_measured(*runs: Any) -> str:
    """Why there is nothing to compare: the first run that failed, and how; or ``"nothing measured"``.

    Example:
        >>> not_measured([0.1], None)
        'nothing measured'
    """
    for x in runs:
        status = getattr(x, "status", None)
        if status is not None and not getattr(x, "ok", True):
            label = getattr(getattr(x, "config", None), "label", "") or "a run"
            error = (getattr(x, "error", None) or "").strip()
            if len(error) > 160:
                error = error[:157] + "..."
            return f"nothing measured: {label} {status}" + (f" ({error})" if error else "")
    return "nothing measured"


def _input_share(x: Any) -> Optional[float]:
    frac = getattr(x, "input_wait_fraction", None)
    return frac if isinstance(frac, (int, float)) else None


def _hidden_by_input(runs: Sequence[Any], share: float) -> str:
    """Why a compute claim cannot be judged when its runs waited on input, and what to do."""
    sources = {getattr(getattr(r, "config", None), "data_source", None) for r in runs}
    if sources == {"memory"}:
        # Staged batches: the wait counted is above the iterator's own floor, so what is left is
        # next() delayed by something else on the same cores (other programs, the runtime's threads).
        return (f"the runs waited on input up to {share:.0%} of the time although their batches were "
                "staged in memory: the iterator's next() was delayed beyond its own floor (other work "
                "on the same cores), which hides a change in compute: run it again on a quieter machine")
    return (f"the runs waited on input up to {share:.0%} of the time, which hides a "
            "change in compute: measure it with data_source='memory'")


def _agrees(expected: str, verdict: str) -> Optional[bool]:
    if verdict not in (FASTER, SLOWER, SAME):
        return None                       # too few steps / rounds to tell
    if expected == NOT_SLOWER:
        return verdict != SLOWER
    if expected == NOT_FASTER:
        return verdict != FASTER
    return verdict == expected


@dataclass(frozen=True)
class AB:
    """An A/B expectation: the candidate is ``expected`` relative to the baseline.

    Build with ``ab()`` or ``change()``. ``str(e)`` states the expectation (print it
    before the runs); ``e.check(...)`` tests it.

    Attributes:
        claim (str): what is being tested.
        expected (str | None): one of ``DIRECTIONS``; ``None``: nothing to test here.
        why (str): the reason, shown before the runs.
        compute (bool): a compute lesson (precision, XLA...): a disagreement while either
            run waited on input is reported as "cannot tell", since the pipeline hides it.
        bound (tfwb.advice.Bound | None): the most the change can gain on the baseline run
            (Amdahl's law on its measured step). A gain measured beyond it (and beyond the
            noise band) is not the mechanism at work: the check says "cannot tell" (the
            machine drifted between the runs), never "agreed".
    """

    claim: str
    expected: Optional[str]
    why: str = ""
    compute: bool = False
    bound: Any = None

    def __post_init__(self) -> None:
        if self.expected is not None and self.expected not in DIRECTIONS:
            raise ValueError(f"expected={self.expected!r} is not allowed; one of {DIRECTIONS}")

    def __str__(self) -> str:
        head = f"Expecting: {self.claim}: " + (self.expected or "no fixed direction")
        return head + (f" ({self.why})." if self.why else ".")

    def check(self, baseline: Any, candidate: Any = None, *,
              noise: Optional[stats.NoiseBand] = None) -> Check:
        """Test the expectation.

        Args:
            baseline, candidate: RunResults, ``CallTimes`` or sequences of per-step
                seconds; or, alone, a finished comparison (``stats.Comparison``,
                ``stats.RoundsComparison`` from ``compare_interleaved``).
            noise (stats.NoiseBand | None, default None): the run-to-run band for
                ``stats.compare`` (its default when None). Two RunResults are compared as the
                history table compares them (``tfwb.analysis.pairs.compare_runs``: per example when the
                batches differ; "cannot tell" when other programs used the CPU during either
                run or a run drifted), so a page never shows two verdicts for one pair.

        Returns:
            A ``Check``; ``agreed`` is None when a run failed or there were too few steps.
        """
        expected = self.expected or "no fixed direction"
        if candidate is None and hasattr(baseline, "verdict"):
            cmp, runs = baseline, ()
        else:
            b, c = _times(baseline), _times(candidate)
            if not b or not c:
                return Check(self.claim, expected, None, None, not_measured(baseline, candidate))
            if isinstance(baseline, RunResult) and isinstance(candidate, RunResult):
                cmp = compare_runs(baseline, candidate, noise=noise)    # the history table's decision, load included
            else:
                cmp = stats.compare(b, c) if noise is None else stats.compare(b, c, noise=noise)
            runs = (baseline, candidate)
        if self.expected is None:
            return Check(self.claim, expected, cmp, None, cmp.text(),
                         "no fixed expectation on this hardware")
        agreed = _agrees(self.expected, cmp.verdict)
        note = ""
        beyond = _beyond_bound(self.bound, cmp)
        if agreed is not None and beyond:
            agreed, note = None, beyond
        shares = [s for s in map(_input_share, runs) if s is not None]
        if agreed is False and self.compute and shares and max(shares) >= MODERATE_INPUT_FRACTION:
            agreed = None
            note = _hidden_by_input(runs, max(shares))
        return Check(self.claim, expected, cmp, agreed, cmp.text(), note)


def _beyond_bound(bound: Any, cmp: Any) -> str:
    """Why a faster verdict is not the change's doing: it beats the change's own bound by more than the noise."""
    limit = getattr(bound, "speedup", None)
    if limit is None or getattr(cmp, "verdict", None) != FASTER:
        return ""
    noise = getattr(getattr(cmp, "noise", None), "pct", 0.0) or 0.0
    if cmp.speedup <= limit * (1.0 + noise / 100.0):
        return ""
    why = ("the machine drifted between the runs" if getattr(bound, "strict", True) else
           "more than removing the input wait can explain: the machine drifted, or the pipeline's own "
           "CPU work was slowing the step")
    return (f"measured {cmp.speedup:.2f}x faster, beyond the {limit:.2f}x its mechanism allows ({why}); "
            f"{stats.INTERLEAVE_HINT}")


def ab(claim: str, expected: Union[str, Expected, None], *, compute: bool = False) -> AB:
    """An A/B expectation.

    Args:
        claim (str): what is tested, e.g. ``"prefetch hides the input wait"``.
        expected (str | Expected | None): a direction from ``DIRECTIONS`` (the candidate
            relative to the baseline), or an ``Expected`` from ``expected_for`` (its
            reason is kept), or None for "no fixed expectation".
        compute (bool, default False): the claim is about compute (see ``AB.compute``).

    Raises:
        ValueError: for an unknown direction.

    Example:
        >>> e = ab("caching helps", "faster")
        >>> print(e.check([2.0] * 9, [1.0] * 9))
        Expected: caching helps (faster). Measured: 2.00x faster. Result: agreed.
    """
    if isinstance(expected, Expected):
        return AB(claim, expected.direction, expected.why, compute)
    return AB(claim, expected, "", compute)


def check(claim: str, baseline: Any, candidate: Any, expected: str) -> Check:
    """``ab(claim, expected).check(baseline, candidate)`` in one call (``tfwb.check``).

    Example:
        >>> print(check("caching helps", [2.0] * 9, [1.0] * 9, "faster"))
        Expected: caching helps (faster). Measured: 2.00x faster. Result: agreed.
    """
    return ab(claim, expected).check(baseline, candidate)


def _number(value: float) -> str:
    if value != value or math.isinf(value):
        return str(value)
    size = abs(value)
    if size >= 100 or float(value).is_integer():
        return f"{value:,.0f}"
    if size >= 10:
        return f"{value:.1f}"
    if size >= 0.01:
        return f"{value:.2f}"
    return f"{value:.2g}"


def _with_unit(value: float, unit: str) -> str:
    text = _number(value)
    if not unit:
        return text
    return text + unit if unit in ("x", "%") else f"{text} {unit}"


@dataclass(frozen=True)
class Threshold:
    """A measured value is expected at least / at most a limit. Build with ``at_least``/``at_most``."""

    claim: str
    limit: float
    at_least: bool
    unit: str = ""
    why: str = ""

    @property
    def expected(self) -> str:
        return ("at least " if self.at_least else "at most ") + _with_unit(self.limit, self.unit)

    def __str__(self) -> str:
        return f"Expecting: {self.claim}: {self.expected}" + (f" ({self.why})." if self.why else ".")

    def check(self, value: Optional[float]) -> Check:
        """Test ``value`` (in the limit's unit); ``None`` or NaN: cannot tell."""
        if value is None or value != value:
            return Check(self.claim, self.expected, None, None, "nothing measured")
        value = float(value)
        agreed = value >= self.limit if self.at_least else value <= self.limit
        return Check(self.claim, self.expected, None, agreed, _with_unit(value, self.unit), value=value)


def at_least(claim: str, limit: float, unit: str = "", *, why: str = "") -> Threshold:
    """Expect a measured value of at least ``limit``.

    Args:
        claim (str): what is tested, e.g. ``"the first call costs more than later ones"``.
        limit (float): the smallest value that agrees (inclusive).
        unit (str, default ""): shown after numbers; ``"x"`` and ``"%"`` attach without a space.
        why (str, default ""): the reason, shown by ``str()``.

    Example:
        >>> print(at_least("the first call traces", 5, "x").check(38.2))
        Expected: the first call traces (at least 5x). Measured: 38.2x. Result: agreed.
    """
    return Threshold(claim, float(limit), True, unit, why)


def at_most(claim: str, limit: float, unit: str = "", *, why: str = "") -> Threshold:
    """Expect a measured value of at most ``limit`` (inclusive). See ``at_least``.

    Example:
        >>> print(at_most("the input wait", 5, "%").check(12.5))
        Expected: the input wait (at most 5%). Measured: 12.5%. Result: did NOT agree.
    """
    return Threshold(claim, float(limit), False, unit, why)


@dataclass(frozen=True)
class Equal:
    """A measured value (a verdict, a count) is expected to equal ``value``. Build with ``equal``."""

    claim: str
    value: Any
    why: str = ""

    def __str__(self) -> str:
        return f"Expecting: {self.claim}: {self.value}" + (f" ({self.why})." if self.why else ".")

    def check(self, measured: Any) -> Check:
        """Test ``measured``; ``None`` (a measurement that did not happen) or NaN: cannot tell.

        Example:
            >>> print(equal("every worker reported the same losses", True).check(None))
            Expected: every worker reported the same losses (True). Measured: nothing measured. Result: cannot tell.
        """
        if measured is None or (isinstance(measured, float) and measured != measured):
            return Check(self.claim, str(self.value), None, None, "nothing measured")
        return Check(self.claim, str(self.value), None, measured == self.value, str(measured))


def equal(claim: str, value: Any, *, why: str = "") -> Equal:
    """Expect a measured value to equal ``value`` exactly (counts, verdicts, orders).

    Example:
        >>> print(equal("take(4).cache() reads each file once", 4).check(4))
        Expected: take(4).cache() reads each file once (4). Measured: 4. Result: agreed.
    """
    return Equal(claim, value, why)


@dataclass(frozen=True)
class Unjudged:
    """A measured value with no fixed expectation on this hardware: printed, never judged.

    Build with ``unjudged``; ``precision_memory`` returns one where the hardware gives
    nothing to expect (a CPU's process memory).
    """

    claim: str
    why: str
    unit: str = ""

    @property
    def expected(self) -> str:
        return "no fixed expectation"

    def __str__(self) -> str:
        return f"Expecting: {self.claim}: no fixed expectation ({self.why})."

    def check(self, value: Optional[float] = None) -> Check:
        """Report ``value`` (``None``: nothing measured); the result is always "cannot tell"."""
        if value is None or value != value:
            return Check(self.claim, self.expected, None, None, "nothing measured", self.why)
        return Check(self.claim, self.expected, None, None, _with_unit(float(value), self.unit), self.why,
                     value=float(value))


def unjudged(claim: str, why: str, unit: str = "") -> Unjudged:
    """A value to measure and print with no fixed expectation here, and why.

    Example:
        >>> print(unjudged("peak RSS ratio", "RSS counts the whole process", "x").check(1.02))
        ... # doctest: +NORMALIZE_WHITESPACE
        Expected: peak RSS ratio (no fixed expectation). Measured: 1.02x.
        Result: cannot tell (RSS counts the whole process).
    """
    return Unjudged(claim, why, unit)
