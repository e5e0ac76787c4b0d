"""The search: successive halving for the fastest configuration that still trains correctly.

``sweep(baseline, space)`` follows ``tfwb.search.plan`` (the candidates and the steps of
each rung, ``tfwb.search.rungs``):

1. The naive configuration runs once, first, for as many steps as the last rung: its
   losses give the reference at every rung (the same data in the same order from the
   same weights, so its loss after ``n`` steps is what a run of ``n`` steps would
   reach), and its step times the speedup.
2. Rung 0: every candidate runs ``min_steps`` measured steps.
3. A candidate *trains correctly* at a rung by ``tfwb.search.loss_rule``: its run finished,
   and after as many training examples as the naive run saw in a run of the rung's length
   (the smaller batch's count, warm-up included: equal work, not equal steps) its loss
   lies at most ``loss_tolerance`` times the naive run's loss *drop* over that work above
   the naive run's loss. With 0.1 it achieved at least 90 % of the naive run's drop from
   the same starting loss. Where the naive run's loss did not drop, the allowance is
   zero: the candidate must end at or below it (the result names such rungs). One that
   trains better is never penalised. The others are pruned, with the reason.
4. Of those that train correctly, the fastest ``1/eta`` (by median time per training
   example: per step when the batch size does not change) go on to the next rung,
   which runs ``eta`` times as many steps. The others are pruned as slower.
5. At the last rung the finalists are compared, noise-aware: the fastest wins, and
   every other finalist whose difference from it is not significant
   (``tfwb.stats.compare``) is reported as tied with it. The speedup over the naive
   run is measured the same way.

The runner is called as every caller calls one, ``runner(cfg, observers)``: the
sweep's step progress is a ``tfwb.observers.Progress`` observer and its stop a
``tfwb.observers.StopFlag``. Ctrl-C or a kernel interrupt sets that flag through
``tfwb.interrupts.InterruptBridge``: the run ends after its current step as
``"interrupted"`` and the sweep ends there, keeping every run that finished. Every
finished run is appended to a ``tfwb.history.History`` as soon as it ends (the flag,
the bridge and the history are the search's ``tfwb.search.recorder.RunRecorder``);
``resume=True`` reuses the runs already there (matched by configuration).

The runner is handed in (``tfwb.sweep``, ``tfwb.tf.lab.sweep.sweep``, gives ``tfwb.run``),
so the search runs without TensorFlow in tests. Pure: this module imports neither TensorFlow nor any UI library.

Example:
    >>> result = sweep(RunConfig(workload="images"), {"prefetch": [False, True],
    ...                                               "cache": [False, True]})  # doctest: +SKIP
    >>> print(result.summary())                                                   # doctest: +SKIP
"""
from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from tfwb import stats
from tfwb.config import RunConfig
from tfwb.history import History
from tfwb.observers import Observer, Progress, StopFlag
from tfwb.analysis.pairs import other_cpu_pct
from tfwb.records import RunResult
from tfwb.search.rungs import Plan, plan
from tfwb.search.progress import SweepProgress
from tfwb.search.recorder import INTERRUPTED, RunRecorder, Runner, Stopped
from tfwb.search.loss_rule import judge
from tfwb.search.result import (FAILED, FINALIST, PROMOTED, SLOWER, WINNER, WORSE, SweepResult, Trial,
                                example_times_s)
from tfwb.search.space import run_key

__all__ = ["sweep", "exhaustive", "GridResult", "Runner", "ProgressFn", "INTERRUPTED"]

#: Called with a ``SweepProgress`` before and after every run and after every step.
ProgressFn = Callable[[SweepProgress], None]


class _Runs:
    """Runs by configuration: reused from the history, or made now (through the search's ``RunRecorder``)."""

    def __init__(self, recorder: RunRecorder, previous: Sequence[RunResult],
                 progress: Optional[ProgressFn], ahead: "_Ahead") -> None:
        self.recorder, self.progress, self.ahead = recorder, progress, ahead
        self.done: Dict[str, RunResult] = {}
        for res in previous:
            if res.status in ("ok", "failed", "diverged") and res.stop_reason is None:   # cut short: run again
                self.done[run_key(res.config)] = res
        self.reused = 0
        self.used: Dict[str, RunResult] = {}
        self.where = (0, 1, 0)               # rung, rungs, steps
        self.planned = 0

    @property
    def made(self) -> int:
        """Runs made now (not reused)."""
        return self.recorder.made

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
        """The run of ``cfg``: reused, or made now. Raises ``Stopped`` once the user stopped the sweep."""
        key = run_key(cfg)
        if key in self.used:
            return self.used[key]
        if self.progress is not None:
            self.planned = self.ahead.planned(self)
        if key in self.done:
            res = self.done[key]
            self.reused += 1
        else:
            self.recorder.check()            # stopped between runs
            self.report(cfg.label)
            observers: List[Observer] = [self.recorder.flag]
            if self.progress is not None:
                observers.append(Progress(lambda done, total: self.report(cfg.label, done, total)))
            res = self.recorder.record(cfg, observers)   # cut short: Stopped, not recorded; run again on resume
        self.used[key] = res
        self.report()
        return res


class _Ahead:
    """Where the sweep is (its rung, the trials still in it), and how many runs it may still make."""

    def __init__(self, base: RunConfig, steps: Tuple[int, ...], rungs: int, eta: int,
                 trials: Sequence[Trial]) -> None:
        self.base, self.steps, self.rungs, self.eta = base, steps, rungs, eta
        self.naive_trial = next((t for t in trials if t.candidate.is_naive), None)
        self.rung = 0
        self.alive: List[Trial] = list(trials)

    def planned(self, runs: _Runs) -> int:
        """Runs done plus the runs still ahead if every rung keeps 1/eta (an upper bound)."""
        r, steps, rungs = self.rung, self.steps, self.rungs
        ahead = {run_key(self.base.replace(steps=steps[-1]))}
        ahead.update(run_key(t.config.replace(steps=steps[r])) for t in self.alive)
        remaining = sum(1 for k in ahead if k not in runs.used)
        n = len(self.alive)
        for rr in range(r + 1, rungs):
            n = max(1, math.ceil(n / self.eta))
            remaining += n - (1 if rr == rungs - 1 and self.naive_trial in self.alive else 0)
        return runs.count + remaining


def _check_tolerance(loss_tolerance: Any) -> None:
    if (isinstance(loss_tolerance, bool) or not isinstance(loss_tolerance, (int, float))
            or not math.isfinite(loss_tolerance) or loss_tolerance < 0):
        raise ValueError(f"loss_tolerance={loss_tolerance!r} is not allowed; loss_tolerance must be a "
                         "finite number >= 0 (0.1: up to 10 % of the naive run's loss drop above "
                         "its loss, after as many examples)")


def _rank(trials: Iterable[Trial], rung: int) -> List[Trial]:
    """Fastest first (median time per example at ``rung``), ties in the space's order."""
    return sorted(trials, key=lambda t: (t.per_example_s(rung), t.candidate.index))


def _decide_rung(alive: List[Trial], r: int, steps: int, last: bool, eta: int, naive: RunResult,
                 tolerance: float) -> List[Trial]:
    """Judge every trial's run at rung ``r`` (``tfwb.search.loss_rule``); return those that go on (the finalists
    at the last rung)."""
    good = []
    for t in alive:
        verdict = judge(t.runs[r], naive, steps, tolerance)
        t.verdicts[r] = verdict
        t.loss[r] = verdict.loss
        if verdict.passed:
            good.append(t)
        else:
            t.outcome[r] = FAILED if not t.runs[r].ok else WORSE
            t.reason[r] = verdict.reason
    good = _rank(good, r)
    if last:
        for t in good:
            t.outcome[r] = FINALIST
        return good
    keep = max(1, math.ceil(len(good) / eta)) if good else 0
    for i, t in enumerate(good):
        flat = f"; {t.verdicts[r].reason}" if t.verdicts[r].flat else ""
        if i < keep:
            t.outcome[r] = PROMOTED
            t.reason[r] = f"rank {i + 1} of {len(good)}{flat}"
        else:
            t.outcome[r] = SLOWER
            t.reason[r] = f"rank {i + 1} of {len(good)}; the fastest {keep} went on{flat}"
    return good[:keep]


def _final(alive: List[Trial], last: int, naive: RunResult, noise: stats.NoiseBand
           ) -> Tuple[Optional[Trial], Tuple[Trial, ...], Optional[stats.Comparison]]:
    """The winner among the finalists, those tied with it, and its speedup over the naive run."""
    finalists = _rank((t for t in alive if t.outcome.get(last) == FINALIST), last)
    if not finalists:
        return None, (), None
    winner = finalists[0]
    winner.outcome[last] = WINNER
    best = example_times_s(winner.runs[last])
    tied = []

    def loads(a: RunResult, b: RunResult) -> Tuple[Optional[float], Optional[float]]:
        return other_cpu_pct(a), other_cpu_pct(b)        # a busy pair cannot tell (tfwb.analysis.pairs)

    for t in finalists[1:]:
        cmp = stats.compare(example_times_s(t.runs[last]), best, noise=noise,
                            other_cpu_pct=loads(t.runs[last], winner.runs[last]))
        if cmp.verdict == stats.FASTER:
            t.reason[last] = f"the winner is {cmp.text()}"
        else:
            told = cmp.verdict == stats.NO_DIFFERENCE
            t.reason[last] = f"{'tied with' if told else 'not told apart from'} the winner (the winner: {cmp.text()})"
            tied.append(t)
    speedup = stats.compare(example_times_s(naive), best, noise=noise, other_cpu_pct=loads(naive, winner.runs[last]))
    winner.reason[last] = f"against naive: {speedup.text()}"
    return winner, tuple(tied), speedup


def sweep(baseline: Optional[RunConfig] = None, space: Optional[Mapping[str, Iterable[Any]]] = None, *,
          min_steps: int = 10, eta: int = 3, rungs: int = 3, loss_tolerance: float = 0.10,
          noise: Optional[stats.NoiseBand] = None, runner: Runner,
          history: "Optional[os.PathLike[str] | str]" = None, resume: bool = False,
          progress: Optional[ProgressFn] = None, stop: Optional[StopFlag] = None,
          clock: Callable[[], float] = time.perf_counter) -> SweepResult:
    """Find the fastest configuration of ``space`` that still trains correctly, by successive halving.

    The naive configuration runs first, once, as long as the last rung (the loss
    reference for every rung and the speedup's baseline); then every candidate runs
    ``min_steps`` steps, and the fastest 1/``eta`` of those that train correctly run
    ``eta`` times longer, rung after rung (see the module docstring; ``plan`` shows the
    candidates and rungs without running anything).

    Args:
        baseline: the naive configuration every candidate changes (default ``RunConfig()``);
            its workload, size, batch size, warm-up and seed hold for every run.
        space: ``{knob: values}``; default ``default_space(baseline.workload)``.
        min_steps: measured steps at the first rung.
        eta: steps grow by this factor per rung, and 1/eta of the candidates go on.
        rungs: how many rungs (the last runs ``min_steps * eta**(rungs-1)`` steps).
        loss_tolerance: how far a candidate's loss may lie above the naive run's, after as
            many training examples, and still count as training correctly, as a share of the
            naive run's loss drop over those examples (``tfwb.search.loss_rule``; 0.1: the candidate
            achieves at least 90 % of the naive run's drop; no drop: no allowance).
        noise: run-to-run noise band for the final comparison (``tfwb.stats.DEFAULT_NOISE``).
        runner: ``runner(cfg, observers) -> RunResult`` (``tfwb.sweep`` gives ``tfwb.run``).
        history: a JSON-lines file (``tfwb.history.History``) every finished run is
            appended to as it ends.
        resume: reuse the runs already in ``history`` (matched by configuration).
        progress: called with a ``SweepProgress`` before and after every run and after
            every step of it.
        stop: a ``StopFlag`` another thread (a Stop button) may set to end the sweep after
            the current step; the sweep sets it on Ctrl-C or a kernel interrupt. Default:
            a fresh one.
        clock: seconds, for ``elapsed_s``.

    Returns:
        A ``SweepResult``. A stop (Ctrl-C, a kernel interrupt, ``stop.set()``) ends the
        sweep after the current step: the result has ``interrupted=True`` and every
        finished run is in ``history``. When the naive run fails, ``error`` says why and
        nothing is judged.

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
    _check_tolerance(loss_tolerance)
    p: Plan = plan(baseline, space, min_steps=min_steps, eta=eta, rungs=rungs)
    noise = stats.DEFAULT_NOISE if noise is None else noise
    steps, base = p.rung_steps, p.baseline
    store = History(history) if history is not None else None
    previous: List[RunResult] = store.load() if store is not None else []
    if previous and not resume:
        raise ValueError(f"history={store.path!r} already holds {len(previous)} runs; pass resume=True to "
                         "reuse them, or pick another file")

    trials = [Trial(c) for c in p.candidates]
    at = _Ahead(base, steps, rungs, eta, trials)
    recorder = RunRecorder(runner, store, StopFlag() if stop is None else stop, resumable=True)
    runs = _Runs(recorder, previous, progress, at)
    naive: Optional[RunResult] = None
    interrupted, error = False, None
    try:
        with recorder.bridge():
            runs.where = (-1, rungs, steps[-1])
            naive = runs.get(base.replace(steps=steps[-1]))
            if not naive.ok:
                error = (f"the naive run did not finish ({naive.status}: {naive.error or 'no measured steps'}), "
                         "so there is no loss to judge the others by")
            for r, n_steps in enumerate(steps if error is None else ()):
                at.rung = r
                runs.where = (r, rungs, n_steps)
                for t in at.alive:
                    res = runs.get(t.config.replace(steps=n_steps))
                    t.runs[r] = res
                at.alive = _decide_rung(at.alive, r, n_steps, r == rungs - 1, eta, naive, loss_tolerance)
                if not at.alive:
                    break
    except (Stopped, KeyboardInterrupt):  # a stop, or a KeyboardInterrupt a runner let through: keep what finished
        interrupted = True
    winner, tied, speedup = None, (), None
    if not interrupted and error is None and at.alive and all(rungs - 1 in t.runs for t in at.alive):
        winner, tied, speedup = _final(at.alive, rungs - 1, naive, noise)
    runs.report(finished=True, stopped="interrupted" if interrupted else "stopped: the naive run failed"
                if error else "")
    return SweepResult(baseline=base, space=p.space, rung_steps=steps, eta=eta,
                       loss_tolerance=float(loss_tolerance), trials=tuple(trials), naive=naive,
                       skipped=p.skipped, winner=winner, tied=tied, speedup=speedup, noise=noise,
                       interrupted=interrupted, error=error, runs=runs.made, reused=runs.reused,
                       elapsed_s=clock() - t0, history=store.path if store is not None else None)


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
               steps: int = 90, loss_tolerance: float = 0.10, runner: Runner,
               history: "Optional[os.PathLike[str] | str]" = None, resume: bool = False,
               progress: Optional[ProgressFn] = None,
               clock: Callable[[], float] = time.perf_counter) -> GridResult:
    """Run every candidate of ``space`` for ``steps`` steps and pick the fastest that trains correctly.

    The naive way a sweep replaces (``benchmarks/sweep.py`` compares the two): same
    space, same correctness rule, same ranking, no pruning. A one-rung ``sweep`` with
    ``min_steps=steps`` does exactly this.

    Args:
        baseline, space, loss_tolerance, runner, history, resume, progress, clock: as ``sweep``.
        steps: measured steps of every run.

    Returns:
        A ``GridResult``.

    Raises:
        ValueError: as ``sweep``.
    """
    t0 = clock()
    result = sweep(baseline, space, min_steps=steps, eta=2, rungs=1, loss_tolerance=loss_tolerance,
                   runner=runner, history=history, resume=resume, progress=progress, clock=clock)
    return GridResult(steps=result.rung_steps[0], trials=result.trials, naive=result.naive,
                      best=result.winner, elapsed_s=clock() - t0)
