"""The sweep: the fastest configuration on this machine that still trains correctly.

A search over a space of knobs (``{knob: values}``, checked against the knob table
``tfwb.config.KNOBS``), starting from a baseline (the naive configuration). Every
combination is a candidate. The search is successive halving:

1. Rung 0: every candidate runs ``min_steps`` measured steps.
2. A candidate *trains correctly* at a rung when its run finished (status ok) and its
   final loss (the mean of its last quarter of measured losses) lies at most
   ``loss_tolerance`` times the naive run's starting loss above the naive run's final
   loss after as many steps (same data, same weights): with 0.1 and a starting loss of
   2.3, up to 0.23 above. The allowance is a share of the starting loss, not of the
   final one, because runs that train the same way differ by a little noise (random
   augmentation in another order, rounding) that would be a huge share of a final
   loss near zero. One that trains better is never penalised. The others are pruned,
   with the reason.
3. Of those that train correctly, the fastest ``1/eta`` (by median time per training
   example: per step when the batch size does not change) go on to the next rung,
   which runs ``eta`` times as many steps. The others are pruned as slower.
4. At the last rung the finalists are compared, noise-aware: the fastest wins, and
   every other finalist whose difference from it is not significant
   (``tfwb.stats.compare``: spreads overlap or inside the run-to-run noise band) is
   reported as tied with it. The speedup over the naive run is measured the same way.

The naive configuration runs once, first, for as many steps as the last rung: its
losses give the reference at every rung (the same data in the same order from the
same weights, so its loss after ``n`` steps is what a run of ``n`` steps would
reach), and its step times the speedup. Every finished run is appended to a JSON-lines history as soon as it
ends (``tfwb.records.append_result``); ``resume=True`` reuses the runs already there
(matched by configuration), so an interrupted sweep (Ctrl-C) loses no finished run.

The runner is injected (default ``tfwb.run``), so the search logic runs without
TensorFlow in tests. Pure: this module imports neither TensorFlow nor any UI library.

Example:
    >>> result = sweep(RunConfig(workload="images"), {"prefetch": [False, True],
    ...                                               "cache": [False, True]})  # doctest: +SKIP
    >>> print(result.summary())                                                   # doctest: +SKIP
"""
from __future__ import annotations

import html
import itertools
import json
import math
import os
import signal
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from tfwb import report, stats
from tfwb.config import KNOBS, RunConfig
from tfwb.records import RunResult, append_result, load_results
from tfwb.workloads import get_workload

__all__ = ["sweep", "exhaustive", "check_space", "default_space", "candidates", "rung_steps",
           "final_loss", "run_key", "SweepProgress", "SweepResult", "Trial", "Candidate",
           "DEFAULT_SPACE", "FIXED_KNOBS"]

Runner = Callable[..., RunResult]          # runner(cfg, progress=cb) -> RunResult (tfwb.run)
ProgressFn = Callable[["SweepProgress"], None]

#: The label of the naive (baseline) configuration.
NAIVE = "naive"
#: Knobs a sweep never varies, and why (the message a space naming one gets).
FIXED_KNOBS: Mapping[str, str] = {
    "workload": "a sweep trains one workload; set it on the baseline (--workload)",
    "size": "a sweep trains one size; set it on the baseline (--size)",
    "steps": "the search sets each rung's steps (min_steps, eta)",
    "warmup_steps": "every run warms up as the baseline says; set it on the baseline",
    "seed": "candidates are compared on the same data and weights; set it on the baseline",
    "label": "the search labels each candidate by what it changes",
}
#: The space a sweep searches when given none: the speed knobs that leave the training
#: mathematically the same (up to rounding), over the values worth trying on any machine.
#: Knobs a workload does not honour are left out (``default_space``).
DEFAULT_SPACE: Tuple[Tuple[str, Tuple[Any, ...]], ...] = (
    ("prefetch", (False, True)),
    ("parallel_map", (False, True)),
    ("cache", (False, True)),
    ("mixed_precision", ("off", "mixed_bfloat16", "mixed_float16")),
    ("jit_compile", (False, True)),
)
#: Share of a run's measured losses (its last ones) averaged into its final loss.
FINAL_LOSS_SHARE = 0.25
#: What happened to a trial at a rung.
PROMOTED, SLOWER, WORSE, FAILED, FINALIST, WINNER = (
    "promoted", "pruned: slower", "pruned: trains worse", "pruned: failed", "finalist", "winner")


# -- the search space -----------------------------------------------------------------------------
def default_space(workload: str = "images") -> Dict[str, Tuple[Any, ...]]:
    """``DEFAULT_SPACE`` without the knobs ``workload`` does not honour.

    Example:
        >>> sorted(default_space("mlp"))
        ['cache', 'jit_compile', 'mixed_precision', 'prefetch']
    """
    w = get_workload(workload)
    return {name: values for name, values in DEFAULT_SPACE if w.applies(name)}


def check_space(space: Mapping[str, Iterable[Any]], workload: str = "images") -> Dict[str, Tuple[Any, ...]]:
    """The space with every knob and value checked, values deduplicated in order.

    Args:
        space: ``{knob: values}``, e.g. ``{"prefetch": [False, True]}``.
        workload: the workload the sweep trains (a knob it does not honour is refused).

    Returns:
        ``{knob: tuple of values}`` in the given order.

    Raises:
        ValueError: for an empty space, an unknown knob (listing the knobs), a knob the
            search sets itself (``FIXED_KNOBS``, saying why), a knob the workload does
            not honour, no values, or a value the knob does not allow (naming the knob,
            the value and what is allowed).

    Example:
        >>> check_space({"prefetch": [True, False, True]})
        {'prefetch': (True, False)}
    """
    if not isinstance(space, Mapping) or not space:
        raise ValueError(f"space={space!r} is not allowed; space must be a non-empty mapping of "
                         "knob -> values, e.g. {'prefetch': [False, True]}")
    w = get_workload(workload)
    out: Dict[str, Tuple[Any, ...]] = {}
    for name, values in space.items():
        if name not in KNOBS:
            raise ValueError(f"knob {name!r} is not a RunConfig field; a space may name: "
                             + ", ".join(n for n in KNOBS if n not in FIXED_KNOBS))
        if name in FIXED_KNOBS:
            raise ValueError(f"knob {name!r} cannot be swept: {FIXED_KNOBS[name]}")
        if not w.applies(name):
            raise ValueError(f"knob {name!r} does not apply to workload {workload!r} (its data does not "
                             "honour it): leave it out of the space")
        if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
            raise ValueError(f"space[{name!r}]={values!r} is not allowed; give a list of values, "
                             f"e.g. [{KNOBS[name].format(getattr(RunConfig(_check_workload=False), name))!s}, ...]")
        checked: List[Any] = []
        for value in values:
            value = KNOBS[name].check(name, value)
            if not any(value == v and type(value) is type(v) for v in checked):
                checked.append(value)
        if not checked:
            raise ValueError(f"space[{name!r}] is empty; give at least one value ({KNOBS[name].allowed()})")
        out[name] = tuple(checked)
    return out


@dataclass(frozen=True)
class Candidate:
    """One configuration of the space.

    Attributes:
        index: its position in the space's product order (0-based).
        config: the RunConfig (its ``label`` says what it changes).
        changes: ``{knob: value}`` where it differs from the baseline (``{}``: the naive one).
    """

    index: int
    config: RunConfig
    changes: Mapping[str, Any]

    @property
    def label(self) -> str:
        return self.config.label

    @property
    def is_naive(self) -> bool:
        return not self.changes


def label_for(config: RunConfig, baseline: RunConfig) -> str:
    """What ``config`` changes from ``baseline``, short (``"prefetch, cache"``), or ``"naive"``."""
    items = report.short_changes(config, baseline)
    return ", ".join(items) if items else NAIVE


def candidates(baseline: RunConfig, space: Mapping[str, Sequence[Any]]
               ) -> Tuple[List[Candidate], List[Tuple[Dict[str, Any], str]]]:
    """Every configuration of ``space`` applied to ``baseline``, and the combinations refused.

    Combinations ``RunConfig`` refuses (e.g. ``jit_compile=True`` with ``execution="eager"``)
    are skipped with the reason; duplicates (a combination equal to another) appear once.

    Returns:
        ``(candidates, skipped)``; ``skipped`` holds ``(changes, reason)`` pairs.
    """
    names = list(space)
    out: List[Candidate] = []
    skipped: List[Tuple[Dict[str, Any], str]] = []
    seen = set()
    for combo in itertools.product(*(space[n] for n in names)):
        change = dict(zip(names, combo))
        try:
            cfg = baseline.replace(**change)
        except ValueError as e:
            skipped.append((change, str(e)))
            continue
        key = run_key(cfg)
        if key in seen:
            continue
        seen.add(key)
        diff = {k: v for k, v in cfg.diff(baseline).items()}
        cfg = cfg.replace(label=label_for(cfg, baseline))
        out.append(Candidate(len(out), cfg, diff))
    return out, skipped


def rung_steps(min_steps: int, eta: int, rungs: int, multiple: int = 1) -> Tuple[int, ...]:
    """Measured steps per rung: ``min_steps * eta**r``, rounded up to a multiple of ``multiple``.

    ``multiple`` is the least common multiple of the ``steps_per_execution`` values in
    the space, so every candidate runs exactly the rung's steps (a call runs whole blocks).

    Example:
        >>> rung_steps(10, 3, 3)
        (10, 30, 90)
        >>> rung_steps(10, 3, 2, multiple=4)
        (12, 32)
    """
    return tuple(-(-(min_steps * eta ** r) // multiple) * multiple for r in range(rungs))


def run_key(cfg: RunConfig) -> str:
    """The identity of a run in a history: its whole configuration but the label."""
    data = cfg.to_dict()
    data.pop("label", None)
    return json.dumps(data, sort_keys=True, default=str)


def final_loss(result: RunResult, steps: Optional[int] = None) -> Optional[float]:
    """Mean of the last quarter (at least one) of a run's measured losses; NaN if any is not finite.

    Args:
        result: the run.
        steps: count only its first ``steps`` measured training steps (what a run of that
            many steps would have ended on); ``None``: all of them.

    Returns:
        The mean; ``None`` when the run measured no loss.

    Example:
        >>> final_loss(RunResult(config=RunConfig(), losses=[4.0, 3.0, 2.0, 1.0]))
        1.0
        >>> final_loss(RunResult(config=RunConfig(), losses=[4.0, 3.0, 2.0, 1.0]), steps=2)
        3.0
    """
    losses = list(result.losses)
    if steps is not None:
        losses = losses[:max(1, steps // max(result.steps_per_call, 1))]
    if not losses:
        return None
    tail = losses[-max(1, math.ceil(len(losses) * FINAL_LOSS_SHARE)):]
    if not all(math.isfinite(v) for v in tail):
        return math.nan
    return sum(tail) / len(tail)


def per_example_s(result: RunResult) -> List[float]:
    """A run's measured step times divided by its batch: seconds per training example."""
    batch = result.config.batch_size
    return [t / batch for t in result.step_times_s]


# -- progress ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class SweepProgress:
    """Where a sweep is, for a progress bar.

    Attributes:
        runs_done: runs finished (reused ones included).
        runs_planned: runs the search expects in all (it shrinks as candidates are pruned).
        rung / rungs: the current rung (0-based; -1 while the naive reference runs, first) and
            how many there are.
        steps: measured steps of the current rung.
        label: the configuration running now (``""`` between runs).
        step / step_total: steps done in the current run (warm-up included) and its total.
        finished: True in the last report.
        stopped: in the last report, why the sweep ended early (``"interrupted"``, or the
            naive run failed); ``""`` when it ran to the end.
    """

    runs_done: int
    runs_planned: int
    rung: int
    rungs: int
    steps: int
    label: str = ""
    step: int = 0
    step_total: int = 0
    finished: bool = False
    stopped: str = ""

    @property
    def fraction(self) -> float:
        """Share of the planned runs done, counting the current run's steps."""
        part = self.step / self.step_total if self.step_total else 0.0
        return min(1.0, (self.runs_done + part) / max(self.runs_planned, 1))

    def text(self) -> str:
        """e.g. ``"run 5/27, rung 1/3 (30 steps): prefetch, cache: step 12/35"``.

        Example:
            >>> SweepProgress(4, 27, 0, 3, 10, "prefetch", 3, 15).text()
            'run 5/27, rung 1/3 (10 steps): prefetch: step 3/15'
        """
        if self.finished:
            return f"{self.stopped or 'done'}: {self.runs_done} runs"
        where = (f"the naive reference ({self.steps} steps)" if self.rung < 0 else
                 f"rung {self.rung + 1}/{self.rungs} ({self.steps} steps)")
        head = f"run {min(self.runs_done + 1, self.runs_planned)}/{self.runs_planned}, {where}"
        if self.label:
            head += f": {self.label}"
            if self.step_total:
                head += f": step {self.step}/{self.step_total}"
        return head


# -- trials and the result ---------------------------------------------------------------------------
@dataclass
class Trial:
    """A candidate's runs through the rungs, and what the search decided at each.

    Attributes:
        candidate: the configuration.
        runs: ``{rung: RunResult}``.
        outcome: ``{rung: one of PROMOTED, SLOWER, WORSE, FAILED, FINALIST, WINNER}``.
        reason: ``{rung: why}``, in words.
        loss: ``{rung: final loss}``.
    """

    candidate: Candidate
    runs: Dict[int, RunResult] = field(default_factory=dict)
    outcome: Dict[int, str] = field(default_factory=dict)
    reason: Dict[int, str] = field(default_factory=dict)
    loss: Dict[int, Optional[float]] = field(default_factory=dict)

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
        return stats.median(per_example_s(res)) if res is not None and res.ok else None


@dataclass(frozen=True)
class SweepResult:
    """What a sweep found.

    Attributes:
        baseline: the naive configuration (``size`` resolved).
        space: the knobs and values searched.
        rung_steps: measured steps per rung.
        eta: the factor between rungs (steps grow by it; 1/eta of the candidates go on).
        loss_tolerance: how far above the naive run's final loss a candidate's may be
            and still count as training correctly, as a share of the naive run's
            starting loss.
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
        return f"{text} {cost}."

    def _time_text(self, trial: Optional[Trial], rung: int) -> str:
        if trial is None:
            res = self.naive
            med = res.median_step_s if res is not None and res.ok else None
            pe = stats.median(per_example_s(res)) if res is not None and res.ok else None
        else:
            med, pe = trial.median_s(rung), trial.per_example_s(rung)
        if med is None:
            return "no time"
        if self.per_batch and pe is not None:
            return f"{pe * 1e6:.1f} us per example"
        return f"median {med * 1e3:.1f} ms/step"

    def explain(self, hardware: Optional[Mapping[str, Any]] = None) -> List[str]:
        """Why the winner wins: each of its knobs, measured against the winner without it.

        Two kinds of line, each comparing the winner with the candidate that differs from
        it in one knob only, at the highest rung both ran:

        - every knob the winner sets away from the baseline (``"prefetch=True (...)"``):
          the winner against itself with that knob as the baseline has it;
        - every other value of the space the winner did not take
          (``"jit_compile=True instead (...)"``): that candidate against the winner.

        Where ``hardware`` is given and ``tfwb.expect`` knows the knob, the line states
        what the change was expected to do on this machine (``tfwb.expect.knob``) and
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

    def _one_knob(self, hardware: Optional[Mapping[str, Any]], name: str, value: Any, other_cfg: RunConfig, *,
                  kept: bool) -> str:
        """One line of ``explain``: the winner against ``other_cfg`` (the winner with one knob changed)."""
        from tfwb import expect

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
                exp = expect.knob(hardware, before, **{name: getattr(after.config, name)})
            except ValueError:         # a change back to a knob's off value has no expectation of its own
                exp = None
        if exp is not None:
            return f"{head} ({where}): {exp.check(before, after, noise=self.noise)}"
        cmp = stats.compare(per_example_s(before), per_example_s(after), noise=self.noise)
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
            + ["final loss", "outcome"]
        body = []
        naive = ["-", f"{NAIVE} (reference)"] + [""] * (len(self.rung_steps) - 1) + [self._cell(self.naive)]
        loss = final_loss(self.naive) if self.naive is not None else None
        naive += [_num(loss, 3), f"reference: one run of {self.rung_steps[-1]} steps"]
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
            return _num(stats.median(per_example_s(res)) * 1e6, 1)
        return _num(res.median_step_s * 1e3, 1)

    def markdown(self, hardware: Optional[Mapping[str, Any]] = None, *,
                 charts: Sequence[Tuple[str, str]] = ()) -> str:
        """The sweep as a Markdown report: summary, explanation, charts, the table.

        Args:
            hardware: for the explanation's expectations (``tfwb.hardware.detect()``).
            charts: ``(title, relative path)`` of PNG files to show.
        """
        from tfwb.hardware import describe

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
                  f"- Trains correctly: the run finished and its final loss (mean of its last quarter of "
                  f"losses) lies at most {self.loss_tolerance:.0%} of the naive run's starting loss above "
                  "the naive run's final loss after as many steps.",
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

    def _repr_html_(self) -> str:
        headers, body = self._table()
        return (f"<p>{html.escape(self.summary())}</p>" + report.simple_html_table(headers, body))

    def to_dict(self) -> dict:
        """The sweep's decisions as JSON-ready data (the runs themselves live in the history)."""
        last = len(self.rung_steps) - 1
        return {
            "baseline": self.baseline.to_dict(),
            "space": {k: list(v) for k, v in self.space.items()},
            "rung_steps": list(self.rung_steps), "eta": self.eta, "loss_tolerance": self.loss_tolerance,
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


# -- the search --------------------------------------------------------------------------------------
class _Stop(Exception):
    """A run was interrupted: the sweep stops after keeping what finished."""


def _check_int(name: str, value: Any, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name}={value!r} is not allowed; {name} must be an integer >= {minimum}")
    return value


def _lcm(values: Iterable[int]) -> int:
    out = 1
    for v in values:
        out = out * v // math.gcd(out, v)
    return out


class _Interrupts:
    """Ctrl-C (or a kernel interrupt) during a sweep becomes a stop at the next step boundary.

    A ``KeyboardInterrupt`` raised wherever SIGINT happens to land can be lost: when
    it lands in a weakref or garbage-collection callback (TensorFlow runs many),
    Python prints "Exception ignored" and the sweep runs on to its end. So, on the
    main thread, the sweep holds a SIGINT handler that only records the request;
    ``check()`` raises ``KeyboardInterrupt`` at a safe point (after each step of a
    run, and before each run), where the runner records the run as interrupted. A
    second Ctrl-C raises at once. The previous handler is restored afterwards.
    Elsewhere (not the main thread) nothing is installed and SIGINT acts as usual.
    """

    def __init__(self) -> None:
        self.requested = False
        self._previous: Any = None
        self._installed = False

    def __enter__(self) -> "_Interrupts":
        if threading.current_thread() is threading.main_thread():
            try:
                self._previous = signal.signal(signal.SIGINT, self._handle)
                self._installed = True
            except ValueError:                 # not allowed here (an embedded interpreter)
                pass
        return self

    def _handle(self, signum: int, frame: Any) -> None:
        if self.requested:                     # asked twice: do not wait for the step
            raise KeyboardInterrupt
        self.requested = True

    def check(self) -> None:
        if self.requested:
            raise KeyboardInterrupt

    def __exit__(self, *exc: Any) -> None:
        if self._installed:
            signal.signal(signal.SIGINT, self._previous)


class _Runs:
    """Runs by configuration: reused from the history, or made (and appended) now."""

    def __init__(self, runner: Runner, history: Optional[str], previous: Sequence[RunResult],
                 progress: Optional[ProgressFn], plan: Callable[[], int],
                 interrupts: Optional[_Interrupts] = None) -> None:
        self.runner, self.history, self.progress, self.plan = runner, history, progress, plan
        self.interrupts = interrupts or _Interrupts()
        self.done: Dict[str, RunResult] = {}
        for res in previous:
            if res.status in ("ok", "failed", "diverged"):       # interrupted runs are run again
                self.done[run_key(res.config)] = res
        self.made = 0
        self.reused = 0
        self.used: Dict[str, RunResult] = {}
        self.where = (0, 1, 0)               # rung, rungs, steps
        self.planned = 0

    @property
    def count(self) -> int:
        return len(self.used)

    def report(self, label: str = "", step: int = 0, total: int = 0, finished: bool = False,
               stopped: str = "") -> None:
        if self.progress is not None:
            rung, rungs, steps = self.where
            planned = self.count if finished and not stopped else max(self.planned, self.count)
            self.progress(SweepProgress(self.count, planned, rung, rungs, steps, label, step, total, finished,
                                        stopped))

    def get(self, cfg: RunConfig) -> RunResult:
        key = run_key(cfg)
        if key in self.used:
            return self.used[key]
        if self.progress is not None:
            self.planned = self.plan()
        if key in self.done:
            res = self.done[key]
            self.reused += 1
        else:
            self.interrupts.check()          # Ctrl-C between runs
            self.report(cfg.label)

            def on_step(done: int, total: int) -> None:
                self.interrupts.check()      # Ctrl-C during a run: the runner records it interrupted
                self.report(cfg.label, done, total)

            try:
                res = self.runner(cfg, progress=on_step)
            except KeyboardInterrupt:
                raise _Stop() from None
            if res.status == "interrupted":
                raise _Stop()
            self.made += 1
            if self.history:
                append_result(self.history, res)
        self.used[key] = res
        self.report()
        return res


def start_loss(result: RunResult) -> Optional[float]:
    """A run's first loss (warm-up included): the scale ``loss_tolerance`` is a share of."""
    losses = list(result.warmup_losses) + list(result.losses)
    return losses[0] if losses and math.isfinite(losses[0]) else None


def _judge(trial_loss: Optional[float], res: RunResult, ref_loss: Optional[float],
           start: Optional[float], tolerance: float) -> Tuple[bool, str]:
    """``(trains correctly, reason if not)``."""
    if not res.ok:
        return False, f"{res.status}: {res.error or 'no measured steps'}"
    if trial_loss is None or not math.isfinite(trial_loss):
        return False, "the loss was not finite"
    if ref_loss is not None and math.isfinite(ref_loss):
        scale = abs(start) if start is not None else abs(ref_loss)
        if trial_loss > ref_loss + tolerance * scale:
            return False, (f"final loss {trial_loss:.3g} vs the naive run's {ref_loss:.3g}: "
                           f"+{trial_loss - ref_loss:.3g} > {tolerance:.0%} of its starting loss {scale:.3g}")
    return True, ""


def sweep(baseline: Optional[RunConfig] = None, space: Optional[Mapping[str, Iterable[Any]]] = None, *,
          min_steps: int = 10, eta: int = 3, rungs: int = 3, loss_tolerance: float = 0.10,
          noise: Optional[stats.NoiseBand] = None, runner: Optional[Runner] = None,
          history: "Optional[os.PathLike | str]" = None, resume: bool = False,
          progress: Optional[ProgressFn] = None,
          clock: Callable[[], float] = time.perf_counter) -> SweepResult:
    """Find the fastest configuration of ``space`` that still trains correctly, by successive halving.

    The naive configuration runs first, once, as long as the last rung (the loss
    reference for every rung and the speedup's baseline); then every candidate runs
    ``min_steps`` steps, and the fastest 1/``eta`` of those that train correctly run
    ``eta`` times longer, rung after rung (see the module docstring).

    Args:
        baseline: the naive configuration every candidate changes (default ``RunConfig()``);
            its workload, size, batch size, warm-up and seed hold for every run.
        space: ``{knob: values}``; default ``default_space(baseline.workload)``.
        min_steps: measured steps at the first rung.
        eta: steps grow by this factor per rung, and 1/eta of the candidates go on.
        rungs: how many rungs (the last runs ``min_steps * eta**(rungs-1)`` steps).
        loss_tolerance: how far a candidate's final loss may lie above the naive run's
            after as many steps and still count as training correctly, as a share of the
            naive run's starting loss (its first loss).
        noise: run-to-run noise band for the final comparison (``tfwb.stats.DEFAULT_NOISE``).
        runner: ``runner(cfg, progress=cb) -> RunResult``; default ``tfwb.run``.
        history: a JSON-lines file every finished run is appended to as it ends.
        resume: reuse the runs already in ``history`` (matched by configuration).
        progress: called with a ``SweepProgress`` before and after every run and after
            every step of it.
        clock: seconds, for ``elapsed_s``.

    Returns:
        A ``SweepResult``. Ctrl-C during a run stops the sweep: the result has
        ``interrupted=True`` and every finished run is in ``history``. When the naive
        run fails, ``error`` says why and nothing is judged.

    Raises:
        ValueError: a bad knob or value in ``space`` (naming them and what is allowed), bad
            search settings, a space with no valid combination, or a ``history`` that already
            holds runs while ``resume`` is False.

    Example:
        >>> r = sweep(RunConfig(workload="mlp"), {"prefetch": [False, True]}, min_steps=5)  # doctest: +SKIP
        >>> r.winner.label                                                                 # doctest: +SKIP
        'prefetch'
    """
    t0 = clock()
    baseline = RunConfig() if baseline is None else baseline
    if not isinstance(baseline, RunConfig):
        raise ValueError(f"baseline must be a RunConfig, got {type(baseline).__name__}")
    _check_int("min_steps", min_steps, 1)
    _check_int("eta", eta, 2)
    _check_int("rungs", rungs, 1)
    if (isinstance(loss_tolerance, bool) or not isinstance(loss_tolerance, (int, float))
            or not math.isfinite(loss_tolerance) or loss_tolerance < 0):
        raise ValueError(f"loss_tolerance={loss_tolerance!r} is not allowed; loss_tolerance must be a "
                         "finite number >= 0 (0.1: up to 10 % of the naive run's starting loss above "
                         "its final loss)")
    noise = stats.DEFAULT_NOISE if noise is None else noise
    space = default_space(baseline.workload) if space is None else check_space(space, baseline.workload)
    baseline = baseline.replace(size=baseline.resolved_size, label=NAIVE)
    cands, skipped = candidates(baseline, space)
    if not cands:
        raise ValueError("no combination of the space is a valid RunConfig: "
                         + "; ".join(f"{c}: {why}" for c, why in skipped[:3]))
    steps = rung_steps(min_steps, eta, rungs,
                       _lcm([c.config.steps_per_execution for c in cands] + [baseline.steps_per_execution]))
    path = os.fspath(history) if history is not None else None
    previous: List[RunResult] = []
    if path is not None and os.path.exists(path):
        previous = load_results(path)
        if previous and not resume:
            raise ValueError(f"history={path!r} already holds {len(previous)} runs; pass resume=True to "
                             "reuse them, or pick another file")
    if runner is None:
        from tfwb import run as runner          # tfwb.run: TensorFlow loads now, not at import

    trials = [Trial(c) for c in cands]
    naive_trial = next((t for t in trials if t.candidate.is_naive), None)
    alive = list(trials)
    rung = {"now": 0}

    def planned() -> int:
        """Runs done plus the runs still ahead if every rung keeps 1/eta (an upper bound)."""
        r = rung["now"]
        ahead = {run_key(baseline.replace(steps=steps[-1]))}
        ahead.update(run_key(t.config.replace(steps=steps[r])) for t in alive)
        remaining = sum(1 for k in ahead if k not in runs.used)
        n = len(alive)
        for rr in range(r + 1, rungs):
            n = max(1, math.ceil(n / eta))
            remaining += n - (1 if rr == rungs - 1 and naive_trial in alive else 0)
        return runs.count + remaining

    interrupts = _Interrupts()
    runs = _Runs(runner, path, previous, progress, planned, interrupts)
    naive: Optional[RunResult] = None
    interrupted, error = False, None
    try:
        interrupts.__enter__()
        runs.where = (-1, rungs, steps[-1])
        naive = runs.get(baseline.replace(steps=steps[-1]))
        if not naive.ok:
            error = (f"the naive run did not finish ({naive.status}: {naive.error or 'no measured steps'}), "
                     "so there is no loss to judge the others by")
        for r, n_steps in enumerate(steps if error is None else ()):
            rung["now"] = r
            runs.where = (r, rungs, n_steps)
            ref_loss, start = final_loss(naive, n_steps), start_loss(naive)
            for t in alive:
                res = runs.get(t.config.replace(steps=n_steps))
                t.runs[r] = res
                t.loss[r] = final_loss(res) if res.ok else None
            good = []
            for t in alive:
                ok, why = _judge(t.loss[r], t.runs[r], ref_loss, start, loss_tolerance)
                if ok:
                    good.append(t)
                else:
                    t.outcome[r] = FAILED if not t.runs[r].ok else WORSE
                    t.reason[r] = why
            good.sort(key=lambda t: (t.per_example_s(r), t.candidate.index))
            if r == rungs - 1:
                for t in good:
                    t.outcome[r] = FINALIST
                alive = good
                break
            keep = max(1, math.ceil(len(good) / eta)) if good else 0
            for i, t in enumerate(good):
                if i < keep:
                    t.outcome[r] = PROMOTED
                    t.reason[r] = f"rank {i + 1} of {len(good)}"
                else:
                    t.outcome[r] = SLOWER
                    t.reason[r] = f"rank {i + 1} of {len(good)}; the fastest {keep} went on"
            alive = good[:keep]
            if not alive:
                break
    except (_Stop, KeyboardInterrupt):    # Ctrl-C in a run, or between runs: keep what finished
        interrupted = True
    finally:
        interrupts.__exit__()
    winner, tied, speedup = None, (), None
    last = rungs - 1
    if not interrupted and error is None and alive and all(last in t.runs for t in alive):
        finalists = sorted((t for t in alive if t.outcome.get(last) == FINALIST),
                           key=lambda t: (t.per_example_s(last), t.candidate.index))
        if finalists:
            winner = finalists[0]
            winner.outcome[last] = WINNER
            best = per_example_s(winner.runs[last])
            tied_list = []
            for t in finalists[1:]:
                cmp = stats.compare(per_example_s(t.runs[last]), best, noise=noise)
                if cmp.verdict == stats.FASTER:
                    t.reason[last] = f"the winner is {cmp.text()}"
                else:
                    told = cmp.verdict == stats.NO_DIFFERENCE
                    t.reason[last] = (f"{'tied with' if told else 'not told apart from'} the winner "
                                      f"({cmp.text()})")
                    tied_list.append(t)
            tied = tuple(tied_list)
            speedup = stats.compare(per_example_s(naive), best, noise=noise)
            winner.reason[last] = f"against naive: {speedup.text()}"
    runs.report(finished=True, stopped="interrupted" if interrupted else "stopped: the naive run failed"
                if error else "")
    return SweepResult(baseline=baseline, space=space, rung_steps=steps, eta=eta,
                       loss_tolerance=float(loss_tolerance), trials=tuple(trials), naive=naive,
                       skipped=tuple(skipped), winner=winner, tied=tied, speedup=speedup, noise=noise,
                       interrupted=interrupted, error=error, runs=runs.made, reused=runs.reused,
                       elapsed_s=clock() - t0, history=path)


# -- the exhaustive grid (for comparison) --------------------------------------------------------------
@dataclass(frozen=True)
class GridResult:
    """Every candidate at one length: what a sweep is measured against.

    Attributes:
        steps: measured steps of every run.
        trials: every candidate with its one run (rung 0), judged like a sweep's last rung.
        naive: the naive run.
        best: the fastest candidate that trains correctly (``None``: none).
        elapsed_s: wall time.
    """

    steps: int
    trials: Tuple[Trial, ...]
    naive: Optional[RunResult]
    best: Optional[Trial]
    elapsed_s: float


def exhaustive(baseline: Optional[RunConfig] = None, space: Optional[Mapping[str, Iterable[Any]]] = None, *,
               steps: int = 90, loss_tolerance: float = 0.10, runner: Optional[Runner] = None,
               history: "Optional[os.PathLike | str]" = None, resume: bool = False,
               progress: Optional[ProgressFn] = None,
               clock: Callable[[], float] = time.perf_counter) -> GridResult:
    """Run every candidate of ``space`` for ``steps`` steps and pick the fastest that trains correctly.

    The naive way a sweep replaces (``benchmarks/sweep.py`` compares the two): same
    space, same correctness rule, same ranking, no pruning. A one-rung ``sweep`` with
    ``min_steps=steps`` does exactly this.

    Raises:
        ValueError: as ``sweep``.
    """
    t0 = clock()
    result = sweep(baseline, space, min_steps=steps, eta=2, rungs=1, loss_tolerance=loss_tolerance,
                   runner=runner, history=history, resume=resume, progress=progress, clock=clock)
    best = result.winner
    return GridResult(steps=result.rung_steps[0], trials=result.trials, naive=result.naive,
                      best=best, elapsed_s=clock() - t0)
