"""The tune: diagnose a run, try the most promising change, keep it only if it is faster and still trains.

``tune(baseline, runner=..., compare=...)`` closes the loop between the diagnosis
(``tfwb.analysis.diagnosis``: what limits a run, and ``tfwb.advice``'s bound of what each knob can
gain) and measurement:

1. The start runs once (``runner(cfg, observers)``).
2. ``tfwb.search.tune_changes.rank_changes`` ranks the changes to the current best by their
   bound: input knobs by the input wait (``1 / (1 - wait)``), compute knobs (``jit_compile``,
   ``steps_per_execution``, ``mixed_precision``) by ``1 / MFU`` and the dtype peaks, so a
   compute-bound run still gets candidates. A change is skipped, with its reason, when its bound
   is within the noise (``stats.DEFAULT_NOISE``), when it cannot help this run (``cache`` on a
   run shorter than one epoch: every element is read once, and filling the cache costs a whole
   epoch), when this machine cannot honour it (``tfwb.expect`` expects it slower here: float16
   on a CPU without float16 arithmetic), or when it was tried already.
3. The top change is compared with the current best in an interleaved comparison (``compare``:
   alternating warm blocks, so the machine's drift cancels); "no significant difference" or
   slower reverts it at once; the comparison stops as soon as its answer to "faster or not?" is
   settled (``stats.faster_settled``: after two slower rounds of ten, nine of ten are out of
   reach), which changes no decision. Only a change called faster runs once, as long as the
   start, for its loss and its diagnosis: it is kept when it still trains
   (``tfwb.search.loss_rule.judge`` against the start run, at equal examples: the sweep's rule).
   A kept change becomes the best, and its run's diagnosis the next one. (Comparing first spares
   a run for every change that is not faster, the common case.)
4. It stops when no remaining change's bound exceeds the noise, after ``max_runs`` trials, or on
   Ctrl-C / a stop request (finished trials are kept and the result says so).

Every trial keeps only significantly faster changes, so the best is never slower than the
start. A *run* is one ``runner`` call: the start's, and the run of each change the comparison
called faster; the interleaved comparisons are counted apart, in seconds (``Tuning.compare_s``).
The runs go through the search's ``tfwb.search.recorder.RunRecorder`` (the stop flag, the
interrupt bridge, the history), as the sweep's do; progress arrives as the typed events of
``tfwb.search.tune_events``; the result is ``tfwb.search.tune_result.Tuning``.

The runner, the comparison and the epoch's length are handed in: ``tfwb.tune``
(``tfwb.tf.lab.tune.tune``) gives ``tfwb.run``, ``tfwb.compare_interleaved`` and the
workload's epoch, so this loop runs without TensorFlow in tests. Pure: no TensorFlow, no UI
library.

Example:
    >>> t = tune(RunConfig(workload="mlp"), max_runs=3, runner=run, compare=compare)   # doctest: +SKIP
    >>> print(t.text())                                                                 # doctest: +SKIP
"""
from __future__ import annotations

import math
import os
import time
from dataclasses import replace
from typing import Any, Callable, List, Optional, Sequence, Tuple

from tfwb import stats
from tfwb.advice import ADVICE
from tfwb.config import RunConfig, fast_mode
from tfwb.hardware import MachineLike
from tfwb.history import History
from tfwb.interrupts import INTERRUPTED
from tfwb.observers import Observer, StopFlag
from tfwb.records import RunResult
from tfwb.search.loss_rule import judge
from tfwb.search.recorder import RunRecorder, Runner, Stopped
from tfwb.search.tune_changes import Change, rank_changes
from tfwb.search.tune_events import ProgressFn, RoundDone, StartRun, TrialDone, TrialStarted, TuneDone, TuneEvent
from tfwb.search.tune_result import FAILED, KEPT, NOTHING_ABOVE_NOISE, REVERTED, SKIPPED, TuneTrial, Tuning

__all__ = ["tune", "check_arguments", "Comparer", "Runner", "DEFAULT_TOLERANCE", "FAST_ROUNDS"]

#: The sweep's default ``loss_tolerance`` (``tfwb.sweep``).
DEFAULT_TOLERANCE = 0.10
#: Interleaved rounds per trial in small mode (``TFWB_FAST=1``); elsewhere the comparison's default.
FAST_ROUNDS = 10

#: ``compare(best, candidate, rounds=..., settle_steps=..., progress=..., stop_early=...) -> stats.RoundsComparison``.
Comparer = Callable[..., stats.RoundsComparison]


def check_arguments(baseline: Any, max_runs: Any, tolerance: float = DEFAULT_TOLERANCE,
                    rounds: Optional[int] = None) -> None:
    """Raise for arguments ``tune`` does not allow (TypeError: a baseline that is not a RunConfig; ValueError:
    ``max_runs`` below 1, ``tolerance`` or ``rounds`` out of range), naming the value and what is allowed."""
    if not isinstance(baseline, RunConfig):
        raise TypeError(f"baseline must be a RunConfig, got {type(baseline).__name__}")
    if isinstance(max_runs, bool) or not isinstance(max_runs, int) or max_runs < 1:
        raise ValueError(f"max_runs={max_runs!r} is not allowed; max_runs must be an integer >= 1 "
                         "(the most candidate runs to try)")
    if not (isinstance(tolerance, (int, float)) and math.isfinite(tolerance) and tolerance >= 0):
        raise ValueError(f"tolerance={tolerance!r} is not allowed; a finite number >= 0 (0.1: the candidate "
                         "achieves at least 90 % of the start run's loss drop)")
    if rounds is not None and (isinstance(rounds, bool) or not isinstance(rounds, int)
                               or rounds < stats.MIN_ROUNDS_TO_COMPARE):
        raise ValueError(f"rounds={rounds!r} is not allowed; rounds must be an integer >= "
                         f"{stats.MIN_ROUNDS_TO_COMPARE} (fewer cannot decide)")


def _check_start(baseline: RunConfig, start_result: Optional[RunResult]) -> None:
    """Raise ValueError unless ``start_result`` is None or a finished run of ``baseline`` (its label aside)."""
    if start_result is None:
        return
    if not isinstance(start_result, RunResult) or not start_result.ok:
        raise ValueError(f"start_result must be a finished run of the baseline, got "
                         f"{getattr(start_result, 'status', type(start_result).__name__)!r}")
    if start_result.config.diff(baseline):
        raise ValueError("start_result is a run of another configuration; it differs from the baseline in "
                         f"{start_result.config.diff(baseline)}: give a run of the baseline, or none")


def _failed_text(result: RunResult) -> str:
    return f"{result.status}: {result.error or result.stop_reason or 'no measured steps'}"


def _settled(best_times: Sequence[float], cand_times: Sequence[float], total: int) -> bool:
    """A trial asks only "faster or not": once the answer cannot change, the remaining rounds are not run
    (a change that loses stops after a few rounds; the decision is the one all the rounds would give)."""
    return stats.faster_settled(best_times, cand_times, total) is not None


class _TuneLoop:
    """One tune's state (the best so far, the trials, the changes tried) and its steps, one method each."""

    def __init__(self, baseline: RunConfig, recorder: RunRecorder, compare: Comparer,
                 observers: Sequence[Observer], emit: ProgressFn, *, max_runs: int, rounds: Optional[int],
                 tolerance: float, noise: stats.NoiseBand, hardware: Optional[MachineLike],
                 epoch_examples: Optional[Callable[[RunConfig], Optional[int]]],
                 clock: Callable[[], float]) -> None:
        self.baseline, self.recorder, self.compare, self.emit, self.clock = (
            baseline, recorder, compare, emit, clock)
        self.observers = [*observers, recorder.flag]
        self.max_runs, self.rounds, self.tolerance, self.noise = max_runs, rounds, tolerance, noise
        self.hardware, self.epoch_examples = hardware, epoch_examples
        self.trials: List[TuneTrial] = []
        self.tried: List[Tuple[str, Any]] = []
        self.skipped: Tuple[Change, ...] = ()
        self.compare_s, self.interrupted, self.why_stop = 0.0, False, ""
        self.start_res: Optional[RunResult] = None
        self.best_cfg = baseline
        self.best_res: Optional[RunResult] = None
        self.wait_ref: Optional[RunResult] = None     # the last run that measured its input wait
        self.trying = ""                              # the change under comparison, for RoundDone

    def run(self, start_result: Optional[RunResult]) -> None:
        """The whole loop, under the interrupt bridge; a stop ends it with the finished trials kept."""
        with self.recorder.bridge():
            try:
                self.start(start_result)
                while True:
                    change = self.next_change()
                    if change is None:
                        break
                    self.attempt(change)
            except (Stopped, KeyboardInterrupt):
                self.interrupted, self.why_stop = True, "interrupted"

    def start(self, given: Optional[RunResult]) -> None:
        """The start's run (or the given one); raise when it did not finish."""
        b = self.baseline
        if given is not None:
            self.start_res = given                     # checked by tune: a finished run of the baseline
            self.emit(StartRun(b.label or b.workload, reused=True))
        else:
            self.emit(StartRun(b.label or b.workload))
            self.start_res = self.recorder.record(b, self.observers, stop=False)
        if self.start_res.status == "interrupted":
            raise KeyboardInterrupt
        if not self.start_res.ok:
            store = self.recorder.history
            raise RuntimeError(f"tune: the baseline run of workload {b.workload!r} did not finish "
                               f"({_failed_text(self.start_res)}), so there is nothing to tune from"
                               + (f"; it is in {store.path}" if store is not None else ""))
        self.best_res = self.wait_ref = self.start_res

    def next_change(self) -> Optional[Change]:
        """The change to try next, or None (with ``why_stop``): none above the noise, or ``max_runs`` reached."""
        ranked, self.skipped = rank_changes(self.best_res, None, self.hardware, self.tried, self.noise,
                                            epoch_examples=self.epoch_examples, input_reference=self.wait_ref)
        if not ranked:
            self.why_stop = NOTHING_ABOVE_NOISE
            return None
        if len(self.trials) >= self.max_runs:
            self.why_stop = f"max_runs={self.max_runs} trials done"
            self.skipped = self.skipped + tuple(replace(c, skip=f"not tried: max_runs={self.max_runs} reached")
                                                for c in ranked)
            return None
        return ranked[0]

    def attempt(self, c: Change) -> None:
        """One trial of ``c``: decided, kept as the best when it is, told as it starts and ends."""
        self.tried.append((c.knob, c.value))
        cand_cfg = self.best_cfg.replace(**{c.knob: c.value}, label="")
        self.emit(TrialStarted(len(self.trials) + 1, c))
        self.trying = c.change
        trial = self.decide(c, cand_cfg)
        if trial.decision == KEPT:
            self.best_cfg, self.best_res = cand_cfg, trial.result
            if self.best_res.input_wait_fraction is not None:
                self.wait_ref = self.best_res
        self.trials.append(trial)
        self.emit(TrialDone(len(self.trials), trial))

    def round_done(self, done: int, total: int) -> None:
        """The comparison's progress: stop between rounds once asked to, else tell the round."""
        self.recorder.check()
        self.emit(RoundDone(self.trying, done, total))

    def decide(self, c: Change, cand_cfg: RunConfig) -> TuneTrial:
        """The interleaved comparison against the best so far first; only a change it calls faster runs, for
        its loss (the loss rule against the start) and its diagnosis. Failed (the comparison or the run),
        reverted (not faster, or does not train), or kept. The comparison's seconds count, even when stopped."""
        tc = self.clock()
        took = 0.0
        try:
            cmp = self.compare(self.best_cfg, cand_cfg, rounds=self.rounds,
                               settle_steps=ADVICE[c.knob].tune.settle_steps,
                               progress=self.round_done, stop_early=_settled)
        except (Stopped, KeyboardInterrupt):
            raise
        except Exception as e:        # e.g. a knob this configuration cannot be built with
            return TuneTrial(c.knob, c.value, c.change, c.bound, FAILED,
                             f"the comparison failed: {type(e).__name__}: {e}")
        finally:
            took = self.clock() - tc
            self.compare_s += took
        return self.judge(c, cand_cfg, cmp, took)

    def judge(self, c: Change, cand_cfg: RunConfig, cmp: stats.RoundsComparison, took: float) -> TuneTrial:
        """The trial once compared: reverted when not faster; else its run, judged by the loss rule."""
        measured = dict(speedup=cmp.speedup, ci_low=cmp.low, ci_high=cmp.high, comparison=cmp.text(),
                        compare_s=took, rounds=cmp.rounds)
        if cmp.stopped_early and cmp.verdict != stats.FASTER:
            need = stats.rounds_to_call_faster(cmp.planned_rounds)
            why = (f"interleaved against the best so far: it can no longer be called faster, so the comparison "
                   f"stopped after {cmp.rounds} of {cmp.planned_rounds} rounds (faster in {cmp.faster_rounds} of "
                   f"them; {cmp.planned_rounds} rounds call a change faster only when it is faster in {need})")
        else:
            why = (f"interleaved against the best so far: {cmp.verdict} "
                   f"(faster in {cmp.faster_rounds} of {cmp.rounds} rounds)")
        if cmp.verdict != stats.FASTER:
            return TuneTrial(c.knob, c.value, c.change, c.bound, REVERTED, why, **measured)
        res = self.recorder.run(cand_cfg, self.observers)
        if not res.ok:
            return TuneTrial(c.knob, c.value, c.change, c.bound, FAILED, f"faster, but its run {_failed_text(res)}",
                             result=res, **measured)
        verdict = judge(res, self.start_res, steps=self.baseline.steps, tolerance=self.tolerance)
        if not verdict.passed:
            return TuneTrial(c.knob, c.value, c.change, c.bound, REVERTED,
                             f"faster, but it does not train as the start does: {verdict.reason}", result=res,
                             **measured)
        return TuneTrial(c.knob, c.value, c.change, c.bound, KEPT, why, result=res, **measured)

    def result(self, t0: float, start_reused: bool) -> Tuning:
        """The ``Tuning``; raise KeyboardInterrupt when the start's run itself was interrupted."""
        if self.start_res is None or self.best_res is None:
            raise KeyboardInterrupt("tune: interrupted during the baseline run; nothing was tuned")
        skipped = tuple(TuneTrial(c.knob, c.value, c.change, c.bound, SKIPPED, c.skip) for c in self.skipped
                        if (c.knob, c.value) not in self.tried)     # the tried ones are trials
        return Tuning(start=self.baseline, start_result=self.start_res, best=self.best_cfg,
                      best_result=self.best_res, trials=tuple(self.trials),
                      skipped=() if self.interrupted else skipped, runs=self.recorder.made,
                      compare_s=self.compare_s, wall_s=self.clock() - t0, interrupted=self.interrupted,
                      stop=self.why_stop, max_runs=self.max_runs, start_reused=start_reused)


def _ignore(event: TuneEvent) -> None:
    """The default ``progress``: nothing."""


def tune(baseline: RunConfig, *, runner: Runner, compare: Comparer, max_runs: int = 4,
         history_path: "Optional[os.PathLike[str] | str]" = None, rounds: Optional[int] = None,
         tolerance: Optional[float] = None, observers: Sequence[Observer] = (),
         progress: Optional[ProgressFn] = None, noise: Optional[stats.NoiseBand] = None,
         stop: Optional[StopFlag] = None, hardware: Optional[MachineLike] = None,
         epoch_examples: Optional[Callable[[RunConfig], Optional[int]]] = None,
         clock: Callable[[], float] = time.perf_counter, start_result: Optional[RunResult] = None) -> Tuning:
    """Diagnose, try the change with the largest bound, keep it only if faster and still training; repeat.

    See the module docstring for the loop. A *run* is one call of the runner (the start's, and
    the run of each change its comparison called faster); each trial's interleaved comparison
    is counted apart, in seconds (``Tuning.compare_s``).

    Args:
        baseline: the configuration to start from.
        runner: ``runner(cfg, observers) -> RunResult`` (``tfwb.tune`` gives ``tfwb.run``).
        compare: ``compare(best, candidate, rounds=, settle_steps=, progress=, stop_early=) ->
            stats.RoundsComparison`` (``tfwb.tune`` gives ``tfwb.compare_interleaved``).
        max_runs: the most trials (changes compared; each costs a comparison, and a run when faster), >= 1.
        history_path: a JSON-lines file every run is appended to as it ends (nothing in it is rewritten).
        rounds: interleaved rounds per trial (>= 6); default 10 in small mode (``TFWB_FAST=1``),
            else the comparison's own default.
        tolerance: the loss rule's tolerance (``tfwb.search.loss_rule``; default 0.1).
        observers: given to every run, besides the stop flag.
        progress: called with each event of ``tfwb.search.tune_events`` as the tune goes: the start,
            each trial's start, each round of its comparison, its verdict, and the end.
        noise: bounds within this band are not worth a trial (default ``stats.DEFAULT_NOISE``).
        stop: a ``StopFlag`` another thread (a Stop button) may set; Ctrl-C sets it too.
        hardware: the machine (default: read from each run's fingerprint).
        epoch_examples: ``epoch_examples(cfg) -> int | None``, to skip ``cache`` on a run shorter
            than an epoch (``tfwb.tune`` gives ``tfwb.tf.lab.tune.epoch_examples`` with ``tfwb.run``);
            None: unknown.
        clock: seconds, for ``wall_s`` and ``compare_s``.
        start_result: a finished run of ``baseline`` (its label aside) to start from instead of running
            it again, e.g. the naive run a chapter already made; it is not appended to the history again.

    Returns:
        A ``Tuning``; its ``best`` is never a configuration measured slower than the start.

    Raises:
        ValueError: ``max_runs`` below 1, bad ``rounds`` or ``tolerance`` (naming the value and what is
            allowed), or a ``history_path`` that cannot be written.
        RuntimeError: when the baseline run fails (naming the workload and the run's error; the
            run is in the history).
        TypeError: for a baseline that is not a RunConfig.
    """
    t0 = clock()
    tolerance = DEFAULT_TOLERANCE if tolerance is None else tolerance
    check_arguments(baseline, max_runs, tolerance, rounds)
    _check_start(baseline, start_result)
    if rounds is None and fast_mode():
        rounds = FAST_ROUNDS
    store = History(history_path) if history_path is not None else None
    if store is not None:
        store.ensure_writable()
    recorder = RunRecorder(runner, store, StopFlag(INTERRUPTED) if stop is None else stop, resumable=False)
    emit = progress if progress is not None else _ignore
    loop = _TuneLoop(baseline, recorder, compare, observers, emit, max_runs=max_runs, rounds=rounds,
                     tolerance=tolerance, noise=stats.DEFAULT_NOISE if noise is None else noise,
                     hardware=hardware, epoch_examples=epoch_examples, clock=clock)
    loop.run(start_result)
    result = loop.result(t0, start_reused=start_result is not None)
    emit(TuneDone(result))
    return result
