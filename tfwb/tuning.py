"""Tune: diagnose a run, try the most promising change, keep it only if it is faster and still trains.

``tune(baseline)`` closes the loop between the diagnosis (``tfwb.diagnosis``: what limits a
run, and ``tfwb.advice``'s bound of what each knob can gain) and measurement:

1. The start runs once (``runner(cfg, observers)``, ``tfwb.run`` by default).
2. ``candidates`` ranks the changes to the current best by their bound: input knobs by the
   input wait (``1 / (1 - wait)``), compute knobs (``jit_compile``, ``steps_per_execution``,
   ``mixed_precision``) by ``1 / MFU`` and the dtype peaks, so a compute-bound run still gets
   candidates. A change is skipped, with its reason, when its bound is within the noise
   (``stats.DEFAULT_NOISE``), when it cannot help this run (``cache`` on a run shorter than one
   epoch: every element is read once, and filling the cache costs a whole epoch), when this
   machine cannot honour it (``tfwb.expect`` expects it slower here: float16 on a CPU without
   float16 arithmetic), or when it was tried already.
3. The top candidate is compared with the current best in an interleaved comparison
   (``tfwb.compare_interleaved``: alternating warm blocks, so the machine's drift cancels);
   "no significant difference" or slower reverts it at once; the comparison stops as soon as
   its answer to "faster or not?" is settled (``stats.faster_settled``: after two slower rounds
   of ten, nine of ten are out of reach), which changes no decision. Only a candidate called faster
   runs once, as long as the start, for its loss and its diagnosis: it is kept when it still
   trains (``tfwb.search.loss_rule.judge`` against the start run, at equal examples: the
   sweep's rule). A kept candidate becomes the best, and its run's diagnosis the next one.
   (Comparing first spares a run for every change that is not faster, the common case.)
4. It stops when no remaining candidate's bound exceeds the noise, after ``max_runs`` trials,
   or on Ctrl-C / a stop request (finished trials are kept and the result says so).

Every trial keeps only significantly faster changes, so the best is never slower than the
start. A *run* is one ``runner`` call: the start's, and the run of each candidate the comparison
called faster; the interleaved comparisons are counted apart, in seconds (``Tuning.compare_s``).

The runner and the comparison are injected (``runner=``, ``compare=``), so the loop runs
without TensorFlow in tests. Pure: no TensorFlow, no UI library.

Example:
    >>> t = tune(RunConfig(workload="mlp"), max_runs=3)     # doctest: +SKIP
    >>> print(t.text())                                      # doctest: +SKIP
"""
from __future__ import annotations

import html
import math
import os
import time
from dataclasses import dataclass, replace
from typing import Any, Callable, Dict, List, Optional, Sequence, Set, Tuple

from tfwb import advice, expect, stats
from tfwb import knobs as _knobs
from tfwb.advice import Bound, speedup_text
from tfwb.bottleneck import MODERATE_INPUT_FRACTION
from tfwb.config import RunConfig, fast_mode
from tfwb.analysis.diagnosis import INPUT_BOUND_KNOBS, Diagnosis, bound, diagnose
from tfwb.hardware import Machine, MachineLike
from tfwb.history import History
from tfwb.interrupts import InterruptBridge
from tfwb.observers import Observer, StopFlag
from tfwb.records import RunResult
from tfwb.search.loss_rule import judge
from tfwb.workloads import SOURCE_KNOBS, get_workload

__all__ = ["tune", "check_arguments", "candidates", "Candidate", "Trial", "Tuning", "KEPT", "REVERTED", "SKIPPED",
           "FAILED", "COMPUTE_TUNED", "DEFAULT_TOLERANCE", "FAST_ROUNDS"]

KEPT, REVERTED, SKIPPED, FAILED = "kept", "reverted", "skipped", "failed"
#: Compute knobs tried on any run (bounded by ``1 / MFU`` and the dtype peaks), beside the input knobs.
COMPUTE_TUNED = ("steps_per_execution", "jit_compile", "mixed_precision")
POLICIES = ("mixed_bfloat16", "mixed_float16")
#: The sweep's default ``loss_tolerance`` (``tfwb.sweep``).
DEFAULT_TOLERANCE = 0.10
#: Interleaved rounds per trial in small mode (``TFWB_FAST=1``); elsewhere the comparison's default.
FAST_ROUNDS = 10
#: Steps left out before each measured turn of an input knob's comparison: a prefetch buffer that
#: filled during the other configuration's turn is drained first (``tfwb.tf.lab.side_by_side``).
INPUT_SETTLE_STEPS = 4
INTERRUPTED = "interrupted by the user"

#: ``runner(cfg, observers) -> RunResult`` (``tfwb.run``).
Runner = Callable[[RunConfig, Sequence[Observer]], RunResult]
#: ``compare(best, candidate, rounds=..., settle_steps=..., progress=..., stop_early=...) -> stats.RoundsComparison``.
Comparer = Callable[..., stats.RoundsComparison]


# -- candidates ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Candidate:
    """One change to try, with its bound, or the reason it is skipped.

    Attributes:
        knob, value: the RunConfig change.
        bound: its ``tfwb.advice.Bound`` on the run it was ranked for.
        skip: ``""`` when worth a trial, else why not (one clause).
    """

    knob: str
    value: Any
    bound: Bound
    skip: str = ""
    #: Why it ranks where it does beyond its bound (``""``: its bound alone), e.g. a cache before equal bounds.
    order_note: str = ""

    @property
    def change(self) -> str:
        """``jit_compile=True``, ``mixed_precision='mixed_bfloat16'``."""
        return f"{self.knob}={self.value!r}"

    @property
    def rank(self) -> Tuple[int, float]:
        """Sort key, best first: known bounds by size, then unknown ones. A bound that is not strict (an
        input knob on a CPU, where the pipeline also takes cores from the step) can be beaten, so it ranks
        by its size like a strict one: on a run waiting 69 % for input, 3.2x goes before a strict 1.3x."""
        b = self.bound
        return (0 if b.speedup is not None else 1, -(b.speedup or 0.0))


def _applies(cfg: RunConfig) -> Callable[[str], bool]:
    try:
        return get_workload(cfg.workload).applies
    except ValueError:                      # a saved result's workload, not registered here
        return lambda knob: knob not in SOURCE_KNOBS


def _offers(cfg: RunConfig, machine: Machine) -> List[Tuple[str, Any]]:
    """Every ``(knob, value)`` worth bounding for ``cfg``: input knobs ``ADVICE`` suggests, compute knobs."""
    declared, applies = _knobs.table(type(cfg)), _applies(cfg)
    out: List[Tuple[str, Any]] = []
    for knob, entry in advice.ADVICE.items():
        if entry.suggest is None or knob not in declared or not applies(knob):
            continue
        if knob == "mixed_precision":
            out.extend((knob, p) for p in POLICIES if cfg.mixed_precision == "off")
            continue
        if declared[knob].role in ("source", "pipeline") and cfg.data_source == "memory":
            continue                        # staged batches: no pipeline to change
        if declared[knob].role not in ("source", "pipeline") and knob not in COMPUTE_TUNED:
            continue
        offer = entry.suggest(knob, cfg, machine)
        if offer is not None:
            out.append((knob, offer[0]))
    return out


def run_examples(cfg: RunConfig) -> int:
    """Training examples a run of ``cfg`` reads, warm-up included.

    Example:
        >>> run_examples(RunConfig(batch_size=64, steps=40, warmup_steps=5))
        2880
    """
    return sum(cfg.calls) * cfg.steps_per_execution * cfg.batch_size


def candidates(result: RunResult, diagnosis: Optional[Diagnosis] = None, hardware: Optional[MachineLike] = None,
               tried: Sequence[Tuple[str, Any]] = (), noise: stats.NoiseBand = stats.DEFAULT_NOISE, *,
               epoch_examples: Optional[Callable[[RunConfig], Optional[int]]] = None,
               input_reference: Optional[RunResult] = None) -> Tuple[Tuple[Candidate, ...], Tuple[Candidate, ...]]:
    """The changes worth a trial on ``result``'s run, best bound first, and those skipped, with why.

    Args:
        result: the measured run of the current best configuration.
        diagnosis: its ``tfwb.diagnosis.Diagnosis`` (computed when None); its suggestions'
            bounds are reused.
        hardware: the machine (default: read from the result's fingerprint).
        tried: ``(knob, value)`` pairs already tried (skipped as such).
        noise: bounds within this band cannot show in a measurement (skipped).
        epoch_examples: ``epoch_examples(cfg) -> examples in one epoch or None``; ``cache`` is
            skipped for a run shorter than one epoch. None: the epoch is not known.
        input_reference: an earlier run of the same pipeline that measured its input wait, for the
            input knobs' bounds when ``result`` did not (a run of several steps a call).

    Returns:
        ``(to_try, skipped)``: ``Candidate`` tuples; ``to_try`` ranked: known bounds largest first
        (one that is not strict, an input knob on a CPU, by its size too), unknown ones last; on
        equal bounds, ``cache`` first on a run that reads its data at least twice (it removes work,
        the others overlap it), and steps per call before XLA (it compiles nothing).

    Example:
        >>> from tfwb.records import RunResult
        >>> gpu = {"gpus": [{"name": "G", "compute_capability": [9, 0]}]}
        >>> r = RunResult(config=RunConfig(data_source="memory"), step_times_s=(1.0,) * 8,
        ...               input_wait_s=(0.0,) * 8, fingerprint=gpu, mfu=0.5)
        >>> [c.change for c in candidates(r)[0]][:2]      # equal bounds: the one that compiles nothing first
        ['steps_per_execution=8', 'jit_compile=True']
    """
    cfg = result.config
    machine = advice.machine_of(result) if hardware is None else Machine.of(hardware)
    diagnosis = diagnosis if diagnosis is not None else diagnose(result, machine)
    tried_set = {(k, repr(v)) for k, v in tried}
    offers = _offers(cfg, machine)
    offers_cache = any(knob == "cache" for knob, _ in offers)
    epoch = epoch_examples(cfg) if epoch_examples is not None and offers_cache else None
    to_try: List[Candidate] = []
    skipped: List[Candidate] = []
    for knob, value in offers:
        measured = result
        if knob in INPUT_BOUND_KNOBS and result.input_wait_fraction is None and input_reference is not None:
            measured = input_reference      # this run did not measure its wait (several steps a call)
        b = diagnosis.bound_for(knob)
        if b is None or b.value != value or measured is not result:
            b = bound(measured, knob, value)
        skip = _skip_reason(measured, cfg, knob, value, b, machine, tried_set, noise, epoch)
        (skipped if skip else to_try).append(Candidate(knob, value, b, skip))
    # On equal bounds, the change that removes work first: the input knobs share 1 / (1 - wait), and of them
    # only a cache removes work (the decoding of every epoch after the first), where the others overlap it,
    # so it goes first on a run that reads its data at least twice; on a CPU it also frees the cores the
    # pipeline took from the step. Steps per call and XLA share 1 / (wait + MFU): the one that compiles
    # nothing first.
    reuses = bool(epoch) and run_examples(cfg) >= 2 * epoch
    if reuses:
        note = (f"it goes before the input knobs of equal bound: this run reads its data "
                f"{run_examples(cfg) / epoch:.0f} times, and a cache removes the decoding of every epoch after the "
                "first, which the others only overlap with the step")
        to_try = [replace(c, order_note=note) if c.knob == "cache" else c for c in to_try]
    to_try.sort(key=lambda c: (*c.rank, not (c.knob == "cache" and reuses), c.knob != "steps_per_execution",
                               advice.ADVICE[c.knob].priority(cfg)))
    return tuple(to_try), tuple(skipped)


def _skip_reason(result: RunResult, cfg: RunConfig, knob: str, value: Any, b: Bound, machine: Machine,
                 tried: Set[Tuple[str, str]], noise: stats.NoiseBand, epoch: Optional[int]) -> str:
    """Why ``knob=value`` is not worth a trial on ``cfg`` (``""``: it is); ``result``: the run its bound read;
    ``epoch``: examples in one epoch (None: not known)."""
    if (knob, repr(value)) in tried:
        return "tried already"
    if knob in expect.RULES:
        e = expect.expected_for(machine, knob, value, result)
        if e.direction == expect.SLOWER:
            return f"this machine cannot honour it: {e.why}"
    if b.speedup is not None and noise.contains(max(b.speedup, 1.0)):
        # A bound that is not strict (an input knob on a CPU: the pipeline shares the cores with the
        # step) rules a knob out only where the run hardly waits; the generator source is left to try.
        quiet = (result.input_wait_fraction or 0.0) < MODERATE_INPUT_FRACTION and knob != "data_source"
        if b.strict or quiet:
            return f"its bound {speedup_text(b.speedup)} is within the noise (\u00b1{noise.pct:.0f} %): {b.text}"
    if knob == "cache" and epoch is not None:
        need = run_examples(cfg)
        if need < epoch:
            return (f"the run reads {need:,} examples, less than one epoch ({epoch:,}): every element is read "
                    "once, so a cache cannot be reused, and filling it costs a whole epoch")
    return ""


# -- trials and the result ------------------------------------------------------------------------
@dataclass(frozen=True)
class Trial:
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
            >>> Trial("prefetch", True, "prefetch=True", None, "reverted", "no significant difference").line()
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
    trials: Tuple[Trial, ...] = ()
    skipped: Tuple[Trial, ...] = ()
    runs: int = 1
    compare_s: float = 0.0
    wall_s: float = 0.0
    interrupted: bool = False
    stop: str = ""
    max_runs: int = 4
    start_reused: bool = False

    @property
    def kept(self) -> Tuple[Trial, ...]:
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
        lines = [f"trial {i}: {t.line()}" for i, t in enumerate(self.trials, 1)]
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
        on = [f"{k}={getattr(self.best, k)!r}" for k in COMPUTE_TUNED if getattr(self.best, k) != getattr(defaults, k)]
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
        end = [line for line in self.text().splitlines() if not line.startswith("trial ")]
        return (f"<table><tr>{head}</tr>{rows}</table><p>"
                + "<br>".join(html.escape(line) for line in end) + "</p>")


NOTHING_ABOVE_NOISE = "no change is left that could gain more than the noise here"


# -- the loop ---------------------------------------------------------------------------------------
class _Stopped(Exception):
    """The user stopped the tune."""


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


def _failed_text(result: RunResult) -> str:
    return f"{result.status}: {result.error or result.stop_reason or 'no measured steps'}"


def tune(baseline: RunConfig, *, max_runs: int = 4, history_path: "Optional[os.PathLike[str] | str]" = None,
         rounds: Optional[int] = None, tolerance: Optional[float] = None, observers: Sequence[Observer] = (),
         progress: Optional[Callable[[str], None]] = None, runner: Optional[Runner] = None,
         compare: Optional[Comparer] = None, noise: Optional[stats.NoiseBand] = None,
         stop: Optional[StopFlag] = None, hardware: Optional[MachineLike] = None,
         epoch_examples: Optional[Callable[[RunConfig], Optional[int]]] = None,
         clock: Callable[[], float] = time.perf_counter, start_result: Optional[RunResult] = None,
         on_round: Optional[Callable[[str, int, int], None]] = None) -> Tuning:
    """Diagnose, try the change with the largest bound, keep it only if faster and still training; repeat.

    See the module docstring for the loop. A *run* is one call of the runner (the start's, and
    the run of each candidate its comparison called faster); each trial's interleaved comparison
    is counted apart, in seconds (``Tuning.compare_s``).

    Args:
        baseline: the configuration to start from.
        max_runs: the most trials (changes compared; each costs a comparison, and a run when faster), >= 1.
        history_path: a JSON-lines file every run is appended to as it ends (nothing in it is rewritten).
        rounds: interleaved rounds per trial (>= 6); default 10 in small mode (``TFWB_FAST=1``),
            else the comparison's own default.
        tolerance: the loss rule's tolerance (``tfwb.search.loss_rule``; default 0.1).
        observers: given to every run, besides the stop flag.
        progress: called with one line of text as the tune goes (each trial's start and verdict).
        runner: ``runner(cfg, observers) -> RunResult``; default ``tfwb.run``.
        compare: ``compare(best, candidate, rounds=, settle_steps=, progress=, stop_early=) ->
            stats.RoundsComparison``; default ``tfwb.compare_interleaved``.
        noise: bounds within this band are not worth a trial (default ``stats.DEFAULT_NOISE``).
        stop: a ``StopFlag`` another thread (a Stop button) may set; Ctrl-C sets it too.
        hardware: the machine (default: read from each run's fingerprint).
        epoch_examples: ``epoch_examples(cfg) -> int | None``, to skip ``cache`` on a run shorter
            than an epoch; default ``tfwb.tf.lab.tune.epoch_examples`` with the default runner,
            else unknown.
        clock: seconds, for ``wall_s`` and ``compare_s``.
        start_result: a finished run of ``baseline`` (its label aside) to start from instead of running
            it again, e.g. the naive run a chapter already made; it is not appended to the history again.
        on_round: called as ``on_round(change, rounds_done, rounds)`` after each round of a trial's
            comparison (a progress bar: a trial runs nothing else until it is decided).

    Returns:
        A ``Tuning``; its ``best`` is never a configuration measured slower than the start.

    Raises:
        ValueError: ``max_runs`` below 1, bad ``rounds`` or ``tolerance`` (naming the value and what is
            allowed), or a ``history_path`` that cannot be written.
        RuntimeError: when the baseline run fails (naming the workload and the run's error; the
            run is in the history).
        TypeError: for a baseline that is not a RunConfig.

    Example:
        >>> t = tune(RunConfig(workload="mlp", data_source="memory"), max_runs=2)   # doctest: +SKIP
        >>> t.best.diff(t.start)                                                    # doctest: +SKIP
        {'steps_per_execution': 8}
    """
    t0 = clock()
    tolerance = DEFAULT_TOLERANCE if tolerance is None else tolerance
    check_arguments(baseline, max_runs, tolerance, rounds)
    if start_result is not None:
        if not isinstance(start_result, RunResult) or not start_result.ok:
            raise ValueError(f"start_result must be a finished run of the baseline, got "
                             f"{getattr(start_result, 'status', type(start_result).__name__)!r}")
        if start_result.config.diff(baseline):
            raise ValueError("start_result is a run of another configuration; it differs from the baseline in "
                             f"{start_result.config.diff(baseline)}: give a run of the baseline, or none")
    if rounds is None and fast_mode():
        rounds = FAST_ROUNDS
    noise = stats.DEFAULT_NOISE if noise is None else noise
    store = History(history_path) if history_path is not None else None
    if store is not None:
        store.ensure_writable()
    if runner is None:
        from tfwb import run as runner                       # TensorFlow loads now, not at import
        if epoch_examples is None:
            from tfwb.tf.lab.tune import epoch_examples
    if compare is None:
        from tfwb import compare_interleaved as compare
    flag = StopFlag(INTERRUPTED) if stop is None else stop
    say = progress if progress is not None else (lambda line: None)

    def run_one(cfg: RunConfig) -> RunResult:
        nonlocal runs
        if flag.is_set:
            raise _Stopped()
        res = runner(cfg, [*observers, flag])
        runs += 1
        if store is not None:
            store.append(res)
        if res.status == "interrupted" or (flag.is_set and res.stop_reason is not None):
            raise _Stopped()
        return res

    trying = [""]

    def rounds_done(done: int, total: int) -> None:
        if flag.is_set:
            raise _Stopped()
        if on_round is not None:
            on_round(trying[0], done, total)

    def settled(best_times: Sequence[float], cand_times: Sequence[float], total: int) -> bool:
        # A trial asks only "faster or not": once the answer cannot change, the remaining rounds are not run
        # (a change that loses stops after a few rounds; the decision is the one all the rounds would give).
        return stats.faster_settled(best_times, cand_times, total) is not None

    trials: List[Trial] = []
    tried: List[Tuple[str, Any]] = []
    compare_s, runs, interrupted, why_stop = 0.0, 0, False, ""
    skipped: Tuple[Candidate, ...] = ()
    start_res: Optional[RunResult] = None
    best_cfg = baseline
    best_res: Optional[RunResult] = None
    with InterruptBridge(lambda: flag.set(INTERRUPTED, interrupted=True), inline=True):
        try:
            if start_result is not None:
                start_res = start_result                     # checked above: a finished run of the baseline
                say(f"start: the given run of {baseline.label or baseline.workload}")
            else:
                say(f"start: running {baseline.label or baseline.workload}")
                start_res = runner(baseline, [*observers, flag])
                runs = 1
                if store is not None:
                    store.append(start_res)
            if start_res.status == "interrupted":
                raise KeyboardInterrupt
            if not start_res.ok:
                raise RuntimeError(f"tune: the baseline run of workload {baseline.workload!r} did not finish "
                                   f"({_failed_text(start_res)}), so there is nothing to tune from"
                                   + (f"; it is in {store.path}" if store is not None else ""))
            best_res = wait_ref = start_res
            while True:
                ranked, skipped = candidates(best_res, None, hardware, tried, noise, epoch_examples=epoch_examples,
                                             input_reference=wait_ref)
                if not ranked:
                    why_stop = NOTHING_ABOVE_NOISE
                    break
                if len(trials) >= max_runs:
                    why_stop = f"max_runs={max_runs} trials done"
                    skipped = skipped + tuple(replace(c, skip=f"not tried: max_runs={max_runs} reached")
                                              for c in ranked)
                    break
                c = ranked[0]
                tried.append((c.knob, c.value))
                cand_cfg = best_cfg.replace(**{c.knob: c.value}, label="")
                say(f"trying {c.change}: {c.bound.text}" + (f"; {c.order_note}" if c.order_note else ""))
                trying[0] = c.change
                took = [0.0]
                try:
                    trial = _decide(c, start_res, best_cfg, cand_cfg, baseline.steps, tolerance, took,
                                    lambda a, b, settle: compare(a, b, rounds=rounds, settle_steps=settle,
                                                                 progress=rounds_done, stop_early=settled),
                                    run_one, clock)
                finally:                                 # an interrupted comparison's seconds count too
                    compare_s += took[0]
                if trial.decision == KEPT:
                    best_cfg, best_res = cand_cfg, trial.result
                    if best_res.input_wait_fraction is not None:
                        wait_ref = best_res
                trials.append(trial)
                say(f"trial {len(trials)}: {trial.line()}")
        except (_Stopped, KeyboardInterrupt):
            interrupted = True
            why_stop = "interrupted"
    if start_res is None or best_res is None:
        raise KeyboardInterrupt("tune: interrupted during the baseline run; nothing was tuned")
    skipped_trials = tuple(Trial(c.knob, c.value, c.change, c.bound, SKIPPED, c.skip) for c in skipped
                           if (c.knob, c.value) not in tried)     # the tried ones are trials
    return Tuning(start=baseline, start_result=start_res, best=best_cfg, best_result=best_res,
                  trials=tuple(trials), skipped=() if interrupted else skipped_trials, runs=runs,
                  compare_s=compare_s, wall_s=clock() - t0, interrupted=interrupted, stop=why_stop,
                  max_runs=max_runs, start_reused=start_result is not None)


def _decide(c: Candidate, start_res: RunResult, best_cfg: RunConfig, cand_cfg: RunConfig, steps: int,
            tolerance: float, took: List[float], compare: Callable[..., Any], run: Callable[[RunConfig], RunResult],
            clock: Callable[[], float]) -> Trial:
    """One trial: the interleaved comparison against the best so far first (``took[0]``: its seconds);
    only a candidate it calls faster runs, for its loss (the loss rule against the start) and its
    diagnosis. Failed (the comparison or the run), reverted (not faster, or does not train), or kept."""
    tc = clock()
    try:
        cmp = compare(best_cfg, cand_cfg, INPUT_SETTLE_STEPS if c.knob in INPUT_BOUND_KNOBS else 1)
    except (_Stopped, KeyboardInterrupt):
        raise
    except Exception as e:        # e.g. a knob this configuration cannot be built with
        return Trial(c.knob, c.value, c.change, c.bound, FAILED, f"the comparison failed: {type(e).__name__}: {e}")
    finally:
        took[0] = clock() - tc
    measured = dict(speedup=cmp.speedup, ci_low=cmp.low, ci_high=cmp.high, comparison=cmp.text(), compare_s=took[0],
                    rounds=cmp.rounds)
    if cmp.stopped_early and cmp.verdict != stats.FASTER:
        need = stats.rounds_to_call_faster(cmp.planned_rounds)
        why = (f"interleaved against the best so far: it can no longer be called faster, so the comparison "
               f"stopped after {cmp.rounds} of {cmp.planned_rounds} rounds (faster in {cmp.faster_rounds} of "
               f"them; {cmp.planned_rounds} rounds call a change faster only when it is faster in {need})")
    else:
        why = (f"interleaved against the best so far: {cmp.verdict} "
               f"(faster in {cmp.faster_rounds} of {cmp.rounds} rounds)")
    if cmp.verdict != stats.FASTER:
        return Trial(c.knob, c.value, c.change, c.bound, REVERTED, why, **measured)
    res = run(cand_cfg)
    if not res.ok:
        return Trial(c.knob, c.value, c.change, c.bound, FAILED, f"faster, but its run {_failed_text(res)}",
                     result=res, **measured)
    verdict = judge(res, start_res, steps=steps, tolerance=tolerance)
    if not verdict.passed:
        return Trial(c.knob, c.value, c.change, c.bound, REVERTED,
                     f"faster, but it does not train as the start does: {verdict.reason}", result=res, **measured)
    return Trial(c.knob, c.value, c.change, c.bound, KEPT, why, result=res, **measured)
