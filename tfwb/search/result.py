"""What a sweep found: ``SweepResult`` and its ``Trial``s, and how they read as text, Markdown and HTML.

A ``Trial`` is one candidate's runs through the rungs and what the search decided at
each (``PROMOTED``, ``SLOWER``, ``WORSE``, ``FAILED``, ``FINALIST``, ``WINNER``) and why.
A ``SweepResult`` holds every trial, the naive reference run, the winner, the
finalists tied with it and the winner's speedup over the naive run; it renders itself
(``summary``, ``table_text``, ``markdown``, ``_repr_html_``, ``to_dict``) and explains
the winner knob by knob against ``tfwb.expect`` (``explain``). A run is judged by the
loss rule (``tfwb.search.loss_rule``: the naive run's loss drop, at equal examples seen) and
ranked by ``RunResult.per_example_s`` and ``example_times_s`` (every step's time per example, for the noise-aware comparison).

Pure: no TensorFlow, no UI library. Charts of a result are ``tfwb.ui.charts.candidates``.

Example:
    >>> example_times_s(RunResult(config=RunConfig(batch_size=2), step_times_s=[0.2, 0.4]))
    [0.1, 0.2]
"""
from __future__ import annotations

import html
import math
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from tfwb import expect, stats
from tfwb import render
from tfwb.config import RunConfig
from tfwb.hardware import MachineLike, describe
from tfwb.records import RunResult
from tfwb.search.loss_rule import Verdict, rule_text
from tfwb.search.space import NAIVE, Candidate, run_key

__all__ = ["PROMOTED", "SLOWER", "WORSE", "FAILED", "FINALIST", "WINNER", "example_times_s", "Trial",
           "SweepResult"]

#: What happened to a trial at a rung.
PROMOTED, SLOWER, WORSE, FAILED, FINALIST, WINNER = (
    "promoted", "pruned: slower", "pruned: trains worse", "pruned: failed", "finalist", "winner")


# -- scoring a run --------------------------------------------------------------------------------
def example_times_s(result: RunResult) -> List[float]:
    """A run's measured step times divided by its batch: seconds per training example, one per step.

    What the search ranks and compares by (``stats.compare`` needs every step's; the median
    is ``RunResult.per_example_s``).

    Example:
        >>> example_times_s(RunResult(config=RunConfig(batch_size=4), step_times_s=[0.4, 0.8]))
        [0.1, 0.2]
    """
    batch = result.config.batch_size
    return [t / batch for t in result.step_times_s]


# -- trials and the result ---------------------------------------------------------------------------
@dataclass
class Trial:
    """A candidate's runs through the rungs, and what the search decided at each.

    Attributes:
        candidate: the configuration.
        runs: ``{rung: RunResult}``.
        outcome: ``{rung: one of PROMOTED, SLOWER, WORSE, FAILED, FINALIST, WINNER}``.
        reason: ``{rung: why}``, in words.
        loss: ``{rung: loss}``: its loss where it was compared with the naive run (after as
            many examples, ``tfwb.search.loss_rule``).
        verdicts: ``{rung: tfwb.search.loss_rule.Verdict}``: the loss rule's verdict and its figures.
    """

    candidate: Candidate
    runs: Dict[int, RunResult] = field(default_factory=dict)
    outcome: Dict[int, str] = field(default_factory=dict)
    reason: Dict[int, str] = field(default_factory=dict)
    loss: Dict[int, Optional[float]] = field(default_factory=dict)
    verdicts: Dict[int, Verdict] = field(default_factory=dict)

    @property
    def label(self) -> str:
        return self.candidate.label

    @property
    def config(self) -> RunConfig:
        return self.candidate.config

    @property
    def last_rung(self) -> Optional[int]:
        """The highest rung it ran at (``None``: never ran)."""
        return max(self.runs) if self.runs else None

    @property
    def status(self) -> str:
        """What became of it: its outcome at its last rung (``"not run"`` if it never ran)."""
        r = self.last_rung
        if r is None:
            return "not run"
        return self.outcome.get(r, "not decided")

    def median_s(self, rung: int) -> Optional[float]:
        """Median step time at ``rung`` (``None`` when that run measured nothing)."""
        res = self.runs.get(rung)
        return res.median_step_s if res is not None and res.ok else None

    def per_example_s(self, rung: int) -> Optional[float]:
        """Median seconds per training example at ``rung`` (what the search ranks by)."""
        res = self.runs.get(rung)
        return res.per_example_s if res is not None and res.ok else None


@dataclass(frozen=True)
class SweepResult:
    """What a sweep found.

    Attributes:
        baseline: the naive configuration (``size`` resolved).
        space: the knobs and values searched.
        rung_steps: measured steps per rung.
        eta: the factor between rungs (steps grow by it; 1/eta of the candidates go on).
        loss_tolerance: how far above the naive run's loss a candidate's may be, after as
            many training examples, and still count as training correctly, as a share of the
            naive run's loss drop over them (``tfwb.search.loss_rule``).
        trials: every candidate, in the space's order.
        naive: the naive run, as long as the last rung (``None`` if the sweep stopped before it).
        skipped: combinations RunConfig refused, ``(changes, reason)``.
        winner: the fastest finalist (``None`` when none finished the last rung).
        tied: finalists within noise of the winner.
        speedup: the winner against the naive run at the last rung (``stats.Comparison``
            of time per example; ``speedup > 1``: the winner is faster).
        noise: the run-to-run band the comparisons used.
        interrupted: True when the sweep was stopped (Ctrl-C) before it finished.
        error: why the sweep could not go on (the naive run failed), else ``None``.
        runs: runs made in this call; ``reused``: runs taken from the history (resume).
        elapsed_s: wall time of this call.
        history: the JSON-lines file every run went to (``None``: none).
    """

    baseline: RunConfig
    space: Mapping[str, Tuple[Any, ...]]
    rung_steps: Tuple[int, ...]
    eta: int
    loss_tolerance: float
    trials: Tuple[Trial, ...]
    naive: Optional[RunResult]
    skipped: Tuple[Tuple[Dict[str, Any], str], ...] = ()
    winner: Optional[Trial] = None
    tied: Tuple[Trial, ...] = ()
    speedup: Optional[stats.Comparison] = None
    noise: stats.NoiseBand = stats.DEFAULT_NOISE
    interrupted: bool = False
    error: Optional[str] = None
    runs: int = 0
    reused: int = 0
    elapsed_s: float = 0.0
    history: Optional[str] = None

    # -- derived ------------------------------------------------------------------------
    @property
    def finished(self) -> bool:
        """True when the search ran to the end (not interrupted, no error)."""
        return not self.interrupted and self.error is None

    @property
    def finalists(self) -> Tuple[Trial, ...]:
        """Trials that trained correctly at the last rung, fastest first."""
        return tuple(t for t in self._ranked() if t.status in (FINALIST, WINNER))

    @property
    def flat_rungs(self) -> Tuple[int, ...]:
        """Rungs (0-based) where the naive run's loss did not drop over a candidate's work, so the
        loss rule allowed nothing there (``tfwb.search.loss_rule``: the candidate had to end at or below it)."""
        return tuple(sorted({r for t in self.trials for r, v in t.verdicts.items() if v.flat}))

    def loss_rule(self) -> str:
        """The loss rule this sweep judged by, in one sentence (``tfwb.search.loss_rule.rule_text``)."""
        return rule_text(self.loss_tolerance)

    @property
    def per_batch(self) -> bool:
        """True when the space changes the batch size (times are then per example)."""
        return "batch_size" in self.space and len(self.space["batch_size"]) > 1

    def _ranked(self) -> List[Trial]:
        def key(t: Trial):
            r = t.last_rung
            pe = t.per_example_s(r) if r is not None else None
            return (-(r if r is not None else -1), pe if pe is not None else math.inf, t.candidate.index)
        return sorted(self.trials, key=key)

    def rows(self) -> List[Dict[str, Any]]:
        """One row per candidate, furthest rung first, then fastest: the table's content.

        Keys: ``candidate``, ``index``, ``rung`` (last, 1-based), ``steps``, ``median_ms`` (at
        its last rung), ``per_example_us``, ``loss``, ``status``, ``reason``, and
        ``medians_ms`` (per rung).
        """
        out = []
        for t in self._ranked():
            r = t.last_rung
            med = t.median_s(r) if r is not None else None
            pe = t.per_example_s(r) if r is not None else None
            out.append({
                "candidate": t.label, "index": t.candidate.index,
                "rung": None if r is None else r + 1,
                "steps": None if r is None else self.rung_steps[r],
                "median_ms": None if med is None else med * 1e3,
                "per_example_us": None if pe is None else pe * 1e6,
                "loss": t.loss.get(r) if r is not None else None,
                "status": t.status, "reason": t.reason.get(r, "") if r is not None else "",
                "medians_ms": {rr + 1: (t.median_s(rr) or math.nan) * 1e3 for rr in sorted(t.runs)},
            })
        return out

    # -- text -----------------------------------------------------------------------------
    def __repr__(self) -> str:
        """One line (the dataclass default would print every run of every candidate)."""
        return f"<SweepResult: {self.summary()}>"

    def summary(self) -> str:
        """A few sentences: the winner, its speedup over naive, ties, the search's cost."""
        n = len(self.trials)
        cost = (f"{n} candidates, {len(self.rung_steps)} rungs of {'/'.join(map(str, self.rung_steps))} "
                f"steps: {self.runs} runs in {self.elapsed_s:.0f} s"
                + (f" (+{self.reused} reused from the history)" if self.reused else ""))
        if self.error:
            return f"The sweep stopped: {self.error}. {cost}."
        if self.interrupted:
            where = f" (every finished run is in {self.history}; resume to go on)" if self.history else ""
            return f"The sweep was interrupted{where}. {cost}."
        if self.winner is None:
            return ("No candidate trained correctly through the last rung: keep the naive configuration. "
                    f"{cost}.")
        w = self.winner
        last = len(self.rung_steps) - 1
        text = f"Winner: {w.label} ({self._time_text(w, last)} at {self.rung_steps[last]} steps)"
        if self.speedup is not None:
            text += f"; against the naive run ({self._time_text(None, last)}): {self.speedup.text()}"
        text += "."
        if self.speedup is not None and self.speedup.verdict == stats.SLOWER:
            text += (" The naive run was faster than the winner at the last rung: keep the naive configuration "
                     "(the first rungs were too short, or too noisy, to rank it).")
        if self.tied:
            text += " Within noise of it: " + "; ".join(t.label for t in self.tied) + "."
        return f"{text} {cost}.{self._flat_text()}"

    def _flat_text(self) -> str:
        """A sentence naming the rungs where the loss rule allowed nothing ("" when none)."""
        if not self.flat_rungs:
            return ""
        where = ", ".join(f"rung {r + 1} ({self.rung_steps[r]} steps)" for r in self.flat_rungs)
        return (f" At {where} the naive run's loss did not drop, so the loss rule allowed nothing there: a "
                "candidate passed only at or below the naive run's loss (too short a rung to tell training "
                "from not training).")

    def _time_text(self, trial: Optional[Trial], rung: int) -> str:
        if trial is None:
            res = self.naive
            med = res.median_step_s if res is not None and res.ok else None
            pe = res.per_example_s if res is not None and res.ok else None
        else:
            med, pe = trial.median_s(rung), trial.per_example_s(rung)
        if med is None:
            return "no time"
        if self.per_batch and pe is not None:
            return f"{pe * 1e6:.1f} us per example"
        return f"median {med * 1e3:.1f} ms/step"

    def explain(self, hardware: Optional[MachineLike] = None) -> List[str]:
        """Why the winner wins: each of its knobs, measured against the winner without it.

        Two kinds of line, each comparing the winner with the candidate that differs from
        it in one knob only, at the highest rung both ran:

        - every knob the winner sets away from the baseline (``"prefetch=True (...)"``):
          the winner against itself with that knob as the baseline has it;
        - every other value of the space the winner did not take
          (``"jit_compile=True instead (...)"``): that candidate against the winner.

        Where ``hardware`` is given and ``tfwb.expect`` knows the knob, the line states
        what the change was expected to do on this machine (``tfwb.expect.change``) and
        whether the measurement agreed: ``"Expected: ... Measured: ... Result: agreed."``.

        Args:
            hardware: ``tfwb.hardware.detect()`` output (``None``: measurements only).

        Returns:
            The lines, the winner's own knobs first; ``[]`` without a winner.
        """
        if self.winner is None:
            return []
        w = self.winner
        lines = []
        for name, value in w.candidate.changes.items():
            lines.append(self._one_knob(hardware, name, value, w.config.replace(**{name: getattr(self.baseline, name)}),
                                        kept=True))
        for name, values in self.space.items():
            mine = getattr(w.config, name)
            for value in values:
                same = value == mine and type(value) is type(mine)
                if same or (name in w.candidate.changes and value == getattr(self.baseline, name)):
                    continue
                lines.append(self._one_knob(hardware, name, value, w.config.replace(**{name: value}), kept=False))
        return lines

    def _one_knob(self, hardware: Optional[MachineLike], name: str, value: Any, other_cfg: RunConfig, *,
                  kept: bool) -> str:
        """One line of ``explain``: the winner against ``other_cfg`` (the winner with one knob changed)."""
        w = self.winner
        last = len(self.rung_steps) - 1
        by_key = {run_key(t.config): t.runs for t in self.trials}
        if self.naive is not None:
            by_key.setdefault(run_key(self.baseline), {last: self.naive})
        other = by_key.get(run_key(other_cfg), {})
        common = [r for r in sorted(set(w.runs) & set(other)) if w.runs[r].ok and other[r].ok]
        head = f"{name}={value!r}" + ("" if kept else " instead")
        if not common:
            return (f"{head}: the candidate that differs from the winner only there did not finish a run "
                    "(or was not in the space), so this knob's part was not measured on its own.")
        r = common[-1]
        mine, theirs = w.runs[r], other[r]
        where = f"rung {r + 1}, {self.rung_steps[r]} steps, " + (
            f"against '{theirs.config.label}'" if kept else "against the winner")
        before, after = (theirs, mine) if kept else (mine, theirs)     # the change goes from `before` to `after`
        exp = None
        if hardware is not None and name in expect.KNOWN:
            try:
                exp = expect.change(hardware, before, **{name: getattr(after.config, name)})
            except ValueError:         # a change back to a knob's off value has no expectation of its own
                exp = None
        if exp is not None:
            return f"{head} ({where}): {exp.check(before, after, noise=self.noise)}"
        cmp = stats.compare(example_times_s(before), example_times_s(after), noise=self.noise)
        return f"{head} ({where}): measured {cmp.text()}" + (
            " (no hardware expectation for it)." if hardware is not None else ".")

    def table_text(self) -> str:
        """The candidates as a plain-text table (``rows()``)."""
        headers, body = self._table()
        widths = [max(len(h), *(len(r[i]) for r in body)) if body else len(h) for i, h in enumerate(headers)]
        line = "  ".join(h.ljust(w) for h, w in zip(headers, widths))
        rule = "  ".join("-" * w for w in widths)
        return "\n".join([line, rule] + ["  ".join(c.ljust(w) for c, w in zip(r, widths)) for r in body])

    def _table(self) -> Tuple[List[str], List[List[str]]]:
        unit = "us/example" if self.per_batch else "ms/step"
        headers = ["#", "candidate"] + [f"rung {r + 1} ({s} steps) {unit}" for r, s in enumerate(self.rung_steps)] \
            + ["loss (equal examples)", "outcome"]
        body = []
        naive = ["-", f"{NAIVE} (reference)"] + [""] * (len(self.rung_steps) - 1) + [self._cell(self.naive)]
        loss = self.naive.final_loss() if self.naive is not None else None
        naive += [f"{_num(loss, 3)} (its last steps)" if loss is not None else "",
                  f"reference: one run of {self.rung_steps[-1]} steps; each candidate's loss is compared with "
                  "its loss after as many examples as the candidate saw"]
        body.append(naive)
        for t in self._ranked():
            row = [str(t.candidate.index + 1), t.label]
            for r in range(len(self.rung_steps)):
                row.append(self._cell(t.runs.get(r)))
            r = t.last_rung
            loss = t.loss.get(r) if r is not None else None
            status = t.status + (f" ({t.reason[r]})" if r is not None and t.reason.get(r) else "")
            row += [_num(loss, 3), status]
            body.append(row)
        return headers, body

    def _cell(self, res: Optional[RunResult]) -> str:
        if res is None:
            return ""
        if not res.ok:
            return res.status
        if self.per_batch:
            return _num(res.per_example_s * 1e6, 1)
        return _num(res.median_step_s * 1e3, 1)

    def markdown(self, hardware: Optional[MachineLike] = None, *,
                 charts: Sequence[Tuple[str, str]] = ()) -> str:
        """The sweep as a Markdown report: summary, explanation, charts, the table.

        Args:
            hardware: for the explanation's expectations (``tfwb.hardware.detect()``).
            charts: ``(title, relative path)`` of PNG files to show.
        """
        b = self.baseline
        lines = [f"# Sweep: {b.workload} ({b.size}), batch {b.batch_size}", ""]
        if hardware is not None:
            lines += [f"Machine: {describe(hardware)}.", ""]
        lines += [self.summary(), ""]
        lines += ["## The search", "",
                  "- Space: " + "; ".join(f"`{k}` in {', '.join(repr(v) for v in vs)}" for k, vs in self.space.items()),
                  f"- Successive halving, eta = {self.eta}: rungs of {', '.join(map(str, self.rung_steps))} "
                  f"measured steps (after {b.warmup_steps} warm-up steps each); the fastest 1/{self.eta} of the "
                  "candidates that train correctly go on to the next rung.",
                  f"- Trains correctly: {self.loss_rule()}. A loss is the mean of the last quarter of a "
                  "run's losses up to that point.",
                  f"- Final comparison: `tfwb.stats.compare` of time per example, run-to-run noise band "
                  f"{self.noise.text()}.", ""]
        if self.skipped:
            lines += [f"- Skipped {len(self.skipped)} combinations RunConfig refuses, e.g. "
                      f"{self.skipped[0][0]}: {self.skipped[0][1]}", ""]
        why = self.explain(hardware)
        if why:
            lines += ["## Why the winner wins", ""] + [f"- {w}" for w in why] + [""]
        for title, path in charts:
            lines += [f"## {title}", "", f"![{title}]({path})", ""]
        headers, body = self._table()
        lines += ["## Every candidate", "", "| " + " | ".join(headers) + " |",
                  "|" + "---|" * len(headers)]
        lines += ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in body]
        return "\n".join(lines) + "\n"

    def html(self) -> str:
        """The summary and the table of every candidate, as HTML (what a notebook shows for it)."""
        headers, body = self._table()
        return f"<p>{html.escape(self.summary())}</p>" + render.simple_html_table(headers, body)

    def _repr_html_(self) -> str:
        return self.html()

    def to_dict(self) -> dict:
        """The sweep's decisions as JSON-ready data (the runs themselves live in the history)."""
        last = len(self.rung_steps) - 1
        return {
            "baseline": self.baseline.to_dict(),
            "space": {k: list(v) for k, v in self.space.items()},
            "rung_steps": list(self.rung_steps), "eta": self.eta, "loss_tolerance": self.loss_tolerance,
            "loss_rule": self.loss_rule(), "flat_rungs": [r + 1 for r in self.flat_rungs],
            "winner": self.winner.label if self.winner else None,
            "winner_changes": dict(self.winner.candidate.changes) if self.winner else None,
            "winner_median_ms": (self.winner.median_s(last) or math.nan) * 1e3 if self.winner else None,
            "naive_median_ms": (self.naive.median_step_s * 1e3
                                if self.naive is not None and self.naive.ok else None),
            "speedup": self.speedup.speedup if self.speedup else None,
            "speedup_verdict": self.speedup.verdict if self.speedup else None,
            "tied": [t.label for t in self.tied],
            "candidates": len(self.trials), "runs": self.runs, "reused": self.reused,
            "elapsed_s": self.elapsed_s, "interrupted": self.interrupted, "error": self.error,
            "noise_pct": self.noise.pct,
            "rows": [{k: v for k, v in row.items() if k != "medians_ms"} for row in self.rows()],
        }


def _num(value: Optional[float], digits: int) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "-"
    return f"{value:.{digits}f}"
