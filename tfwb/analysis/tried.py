"""What was already tried: the one-knob changes measured so far, and what each measured.

Two sources say it. The history: a run whose configuration differs by one knob from the closest
earlier finished run (the fewest knobs apart, the latest on a tie: the configuration it was made
from, kept or reverted) tried that knob's change against it, with the verdict of the pair (its
interleaved one when the pair was decided so: ``Versus.decided``). A tune's trials
(``tfwb.search.tune_result.TuneTrial``, read by their fields: kept, reverted or failed, with the
interleaved speed-up): a reverted trial made no run, so only the tune knows it.

``tfwb.analysis.diagnosis.reorder`` reads them, so the next suggestion is not a change just measured
and not kept. Pure: no TensorFlow, no UI library.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, List, Optional, Sequence, Tuple

from tfwb import stats
from tfwb.analysis.pairs import compare_runs
from tfwb.analysis.rows import HistoryRow

__all__ = ["Tried", "from_history", "from_trials", "SETTLED"]

#: Verdicts that settle a change: measured, and not faster.
SETTLED = (stats.SLOWER, stats.NO_DIFFERENCE, "failed")


@dataclass(frozen=True)
class Tried:
    """One change measured against the configuration it was made from.

    Attributes:
        knob, value: the change.
        verdict: ``stats.FASTER``, ``stats.SLOWER``, ``stats.NO_DIFFERENCE``, a "cannot tell" verdict,
            or ``"failed"`` (the run with it failed).
        speedup: the measured speed-up (> 1: faster), ``None`` when not measured.
        where: where it was measured, in words (``"tune trial 2"``, ``"run #5 against #3"``).
    """

    knob: str
    value: Any
    verdict: str
    speedup: Optional[float] = None
    where: str = ""

    @property
    def kept(self) -> bool:
        """It was measured faster."""
        return self.verdict == stats.FASTER

    @property
    def settled(self) -> bool:
        """It was measured and not faster (slower, no difference, or it failed)."""
        return self.verdict in SETTLED

    def text(self) -> str:
        """``"tune trial 2 measured 1.11x slower"``, ``"run #5 against #3: cannot tell: ..."``.

        Example:
            >>> Tried("interleave", True, "slower", 0.9, "tune trial 2").text()
            'interleave=True: tune trial 2 measured 1.11x slower'
        """
        what = f"{self.knob}={self.value!r}: {self.where}"
        if self.verdict == "failed":
            return f"{what}: the run failed"
        if self.speedup is None or not self.speedup > 0:
            return f"{what}: {self.verdict}"
        said = stats.ratio_text(self.speedup)
        if self.verdict == stats.NO_DIFFERENCE:
            said += ", no significant difference"
        elif self.verdict not in (stats.FASTER, stats.SLOWER):
            said += f" ({self.verdict})"
        return f"{what} measured {said}"


def _closest(rows: Sequence[HistoryRow], position: int) -> Optional[HistoryRow]:
    """The earlier finished row whose configuration is the fewest knobs from ``rows[position]``'s (latest on a tie)."""
    config = rows[position].result.config
    best, best_n = None, None
    for row in rows[:position]:
        if not row.ok:
            continue
        n = len(config.diff(row.result.config))
        if best_n is None or n <= best_n:
            best, best_n = row, n
    return best


def _verdict(row: HistoryRow, reference: HistoryRow) -> Tuple[str, Optional[float]]:
    for v in (row.versus_previous, row.versus_baseline):
        if v is not None and v.reference == reference.index:
            if v.decided is not None:
                return v.decided.verdict, v.decided.speedup
            if v.comparison is not None:
                return v.comparison.verdict, v.comparison.speedup
    c = compare_runs(reference.result, row.result, noise=row.noise)
    return (c.verdict, c.speedup) if c is not None else (stats.TOO_FEW, None)


def from_history(rows: Sequence[HistoryRow]) -> Tuple[Tried, ...]:
    """The one-knob changes the history measured, in order (see the module docstring).

    A failed run that changed one knob from the closest finished run counts as that change, failed.

    Example:
        >>> from_history([])
        ()
    """
    found: List[Tried] = []
    for i, row in enumerate(rows):
        reference = _closest(rows, i)
        if reference is None or (not row.ok and row.status != "failed"):
            continue
        diff = row.result.config.diff(reference.result.config)
        if len(diff) != 1:
            continue
        (knob, value), = diff.items()
        where = f"run #{row.index} against #{reference.index}"
        if not row.ok:
            found.append(Tried(knob, value, "failed", None, where))
            continue
        verdict, speedup = _verdict(row, reference)
        found.append(Tried(knob, value, verdict, speedup, where))
    return tuple(found)


def from_trials(trials: Sequence[Any]) -> Tuple[Tried, ...]:
    """A tune's trials (``Tuning.trials``: ``TuneTrial``s, or anything with ``knob``, ``value``, ``decision``
    and ``speedup``) as ``Tried``: kept is faster, failed is failed, reverted is slower when it measured
    below 1 and no difference otherwise (the interleaved comparison did not call it faster).

    Example:
        >>> from types import SimpleNamespace
        >>> t = SimpleNamespace(knob="interleave", value=True, decision="reverted", speedup=0.9)
        >>> from_trials([t])[0].text()
        'interleave=True: tune trial 1 measured 1.11x slower'
    """
    found = []
    for number, t in enumerate(trials, 1):
        decision, speedup = getattr(t, "decision", ""), getattr(t, "speedup", None)
        if decision == "kept":
            verdict = stats.FASTER
        elif decision == "failed":
            verdict = "failed"
        elif decision == "reverted":
            verdict = stats.SLOWER if speedup is not None and speedup < 1 else stats.NO_DIFFERENCE
        else:
            continue                     # skipped: not tried
        found.append(Tried(t.knob, t.value, verdict, speedup, f"tune trial {number}"))
    return tuple(found)
