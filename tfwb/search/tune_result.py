"""What the tune found: ``TuneTrial`` (one change tried or skipped) and ``Tuning`` (the whole tune).

``tfwb.search.tune_loop.tune`` returns a ``Tuning``: every trial in order (kept, reverted or
failed, with its bound, its interleaved comparison and the reason), the changes left skipped
with their reason, the best configuration and its run, and the costs. Its ``text()`` is what
the command prints and the Workbench shows; ``to_dict()`` is the command's ``--json``.

Pure data and its text: no TensorFlow, no UI library.
"""
from __future__ import annotations

import html
import math
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple

from tfwb import stats
from tfwb.advice import Bound, speedup_text
from tfwb.config import RunConfig
from tfwb.records import RunResult
from tfwb.search.tune_changes import compute_tuned

__all__ = ["TuneTrial", "Tuning", "KEPT", "REVERTED", "SKIPPED", "FAILED", "NOTHING_ABOVE_NOISE"]

KEPT, REVERTED, SKIPPED, FAILED = "kept", "reverted", "skipped", "failed"
#: Why a tune stops when no change is left above the noise (``Tuning.stop``).
NOTHING_ABOVE_NOISE = "no change is left that could gain more than the noise here"


@dataclass(frozen=True)
class TuneTrial:
    """One change tried (or skipped) on the way.

    Attributes:
        knob, value: the RunConfig change; ``change``: it in words (``"jit_compile=True"``).
        bound: the ``tfwb.advice.Bound`` it was ranked by (None: none).
        speedup, ci_low, ci_high: the interleaved comparison against the best so far (> 1:
            faster), with its confidence interval; None when not compared.
        comparison: the comparison's text (``RoundsComparison.text()``), or ``""``.
        decision: ``"kept"``, ``"reverted"``, ``"skipped"`` or ``"failed"``.
        reason: why, in words.
        result: the candidate's run (None: it did not run).
        compare_s: seconds the comparison took.
        rounds: the rounds it measured (None: not compared); fewer than
            ``stats.MIN_ROUNDS_TO_COMPARE`` when it stopped early, and then ``ci_low``..``ci_high``
            is only the range of its rounds.
    """

    knob: str
    value: Any
    change: str
    bound: Optional[Bound]
    decision: str
    reason: str
    speedup: Optional[float] = None
    ci_low: Optional[float] = None
    ci_high: Optional[float] = None
    comparison: str = ""
    result: Optional[RunResult] = None
    compare_s: float = 0.0
    rounds: Optional[int] = None

    def bound_text(self) -> str:
        """``"at most 1.9x"``, ``"bound unknown"``."""
        if self.bound is None or self.bound.speedup is None:
            return "bound unknown"
        return f"at most {speedup_text(self.bound.speedup)}" + ("" if self.bound.strict else " (not strict)")

    def measured_text(self) -> str:
        """``"1.32x (CI 1.25-1.40x)"``, ``"0.85x over 2 rounds (0.84-0.85x)"`` (too few rounds for an
        interval: the comparison stopped early), or ``"not measured"``."""
        if self.speedup is None:
            return "not measured"
        if self.ci_low is None:
            return f"{self.speedup:.2f}x"
        spread = f"{self.ci_low:.2f}-{self.ci_high:.2f}x"
        if self.rounds is not None and self.rounds < stats.MIN_ROUNDS_TO_COMPARE:
            return f"{self.speedup:.2f}x over {self.rounds} rounds ({spread})"
        return f"{self.speedup:.2f}x (CI {spread})"

    def line(self) -> str:
        """One line: change, bound, measured, decision and reason.

        Example:
            >>> TuneTrial("prefetch", True, "prefetch=True", None, "reverted", "no significant difference").line()
            'prefetch=True: bound unknown; measured not measured; reverted: no significant difference'
        """
        return f"{self.change}: {self.bound_text()}; measured {self.measured_text()}; {self.decision}: {self.reason}"



@dataclass(frozen=True, repr=False)
class Tuning:
    """What ``tune`` did: every trial, the best configuration found, and what is left.

    Attributes:
        start, start_result: the configuration tuned and its run.
        best, best_result: the best configuration found (``start`` when nothing was kept) and its run.
        trials: the changes tried, in order (kept, reverted or failed).
        skipped: the changes left at the end, each with why it was not (or no longer) worth a trial.
        runs: runner calls: the start's, and each candidate's that its comparison called faster.
        compare_s: seconds spent in interleaved comparisons (not counted in ``runs``).
        wall_s: seconds the whole tune took.
        interrupted: True when Ctrl-C or a stop request ended it (finished trials are kept).
        stop: why it stopped, in words.
        max_runs: the trial budget it had.
        start_reused: True when the start's run was given (``tune(start_result=...)``), not run
            again: ``runs`` then counts candidate runs only.
    """

    start: RunConfig
    start_result: RunResult
    best: RunConfig
    best_result: RunResult
    trials: Tuple[TuneTrial, ...] = ()
    skipped: Tuple[TuneTrial, ...] = ()
    runs: int = 1
    compare_s: float = 0.0
    wall_s: float = 0.0
    interrupted: bool = False
    stop: str = ""
    max_runs: int = 4
    start_reused: bool = False

    @property
    def kept(self) -> Tuple[TuneTrial, ...]:
        return tuple(t for t in self.trials if t.decision == KEPT)

    @property
    def gain(self) -> float:
        """Best over start: the product of the kept trials' interleaved speedups (1.0: none kept)."""
        return math.prod(t.speedup for t in self.kept if t.speedup) if self.kept else 1.0

    def changes(self) -> Dict[str, Any]:
        """The knobs ``best`` sets apart from ``start``."""
        return {t.knob: getattr(self.best, t.knob) for t in self.kept}

    def headroom(self) -> str:
        """What limits the best run now: its MFU and its input wait, in words."""
        r = self.best_result
        parts = []
        if r.mfu:
            parts.append(f"MFU {r.mfu * 100:.0f} % of this machine's {r.compute_dtype} peak")
        wait = r.input_wait_fraction
        if wait is not None:
            parts.append(f"input wait {wait * 100:.0f} % of the step")
        return "; ".join(parts) if parts else "MFU and input wait not measured"

    def table(self) -> List[Dict[str, Any]]:
        """One row per trial and skipped change: change, bound, measured, decision, reason."""
        return [{"change": t.change, "bound": t.bound_text(), "measured": t.measured_text(),
                 "decision": t.decision, "reason": t.reason} for t in self.trials + self.skipped]

    def to_dict(self) -> Dict[str, Any]:
        """JSON-ready: the start and best configurations, the trials and skipped changes, the costs."""
        return {"start": self.start.to_dict(), "best": self.best.to_dict(), "changes": self.changes(),
                "gain": self.gain, "runs": self.runs, "compare_s": self.compare_s, "wall_s": self.wall_s,
                "interrupted": self.interrupted, "stop": self.stop, "max_runs": self.max_runs,
                "headroom": self.headroom(),
                "trials": [dict(row, speedup=t.speedup, ci_low=t.ci_low, ci_high=t.ci_high, compare_s=t.compare_s,
                                bound_speedup=t.bound.speedup if t.bound is not None else None)
                           for row, t in zip(self.table(), self.trials + self.skipped)]}

    def text(self) -> str:
        """Every trial, then best against start, the headroom left, and why no further knob can take it.

        Example:
            >>> print(t.text())     # doctest: +SKIP
            trial 1: steps_per_execution=8: at most 3.1x; measured 1.41x (CI 1.35-1.50x); kept: ...
        """
        return "\n".join([f"trial {i}: {t.line()}" for i, t in enumerate(self.trials, 1)] + [self.closing_text()])

    def closing_text(self) -> str:
        """``text()`` after its trial lines: best against start, the runs, the headroom left, and why no
        further knob can take it (or that the tune was interrupted)."""
        lines = []
        if self.kept:
            what = ", ".join(t.change for t in self.kept)
            lines.append(f"best: {what}: {self.gain:.2f}x faster than the start (the product of the kept "
                         "trials' interleaved gains)")
        else:
            lines.append("best: the start itself (no change was kept)")
        if self.start_reused:
            made = "candidates called faster; the start's run was given, not run again"
        else:
            made = "the start" + (f" and {self.runs - 1} candidate{'s' if self.runs > 2 else ''} called faster"
                                  if self.runs > 1 else "")
        lines.append(f"runs: {self.runs} ({made}), plus {self.compare_s:.0f} s of interleaved comparisons; "
                     f"{self.wall_s:.0f} s in all")
        if self.interrupted:
            n = len(self.trials)
            kept = ("no trial had finished" if n == 0 else "its 1 finished trial is kept" if n == 1
                    else f"its {n} finished trials are kept")
            lines.append(f"interrupted: {kept}; tune again from the best to go on")
            return "\n".join(lines)
        lines.append(f"headroom left: {self.headroom()}")
        why = [f"{t.change}: {t.reason}" for t in self.skipped]
        defaults = type(self.best)(_check_workload=False)
        on = [f"{k}={getattr(self.best, k)!r}" for k in compute_tuned(type(self.best))
              if getattr(self.best, k) != getattr(defaults, k)]
        if on:
            why.insert(0, f"{' and '.join(on)} {'is' if len(on) == 1 else 'are'} already set")
        if not self.trials and self.stop == NOTHING_ABOVE_NOISE:
            lines.append("nothing to gain here, because " + ("; ".join(why) or "no knob tfwb tunes applies to "
                                                              "this run"))
        else:
            lines.append(f"stopped: {self.stop}")
            lines.extend(f"- {w}" for w in why)
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.text()

    def __repr__(self) -> str:
        best = ", ".join(t.change for t in self.kept) or "the start"
        state = "interrupted" if self.interrupted else "done"
        return (f"<Tuning {state}: {len(self.trials)} trials, best {best} ({self.gain:.2f}x), {self.runs} runs, "
                f"{self.wall_s:.0f} s>")

    def _repr_html_(self) -> str:
        """The trials as a table, then the closing text (a notebook shows this for a bare ``tuning``)."""
        head = "".join(f"<th>{h}</th>" for h in ("change", "bound", "measured", "decision", "reason"))
        rows = "".join("<tr>" + "".join(f"<td>{html.escape(str(v))}</td>" for v in row.values()) + "</tr>"
                       for row in self.table())
        end = self.closing_text().splitlines()
        return (f"<table><tr>{head}</tr>{rows}</table><p>"
                + "<br>".join(html.escape(line) for line in end) + "</p>")
