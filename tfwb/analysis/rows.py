"""The history as typed rows: one frozen ``HistoryRow`` per run, holding data, not sentences.

``history_rows`` compares each run with the baseline (``pick_baseline``) and with the previous
finished run of the same workload size, through ``tfwb.analysis.pairs.compare_runs`` and the
noise band of ``tfwb.analysis.noise``; each comparison is a ``Versus`` (the
``tfwb.stats.Comparison`` with the pair's context: which run it is against, per example or per
step, the two batches). A run that applied the previous run's suggestion carries that
suggestion's ``Bound`` (``tfwb.analysis.diagnosis``) and whether the gain went above it beyond
the noise. The words (verdicts, notes, the tables) are rendered afterwards by ``tfwb.render``.

Pure: no TensorFlow, no UI library.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from tfwb import stats
from tfwb.analysis.decisions import per_example_rounds
from tfwb.analysis.diagnosis import Bound, Diagnosis, diagnose
from tfwb.analysis.noise import noise_band
from tfwb.analysis.pairs import (arithmetic_changes, busy, compare_runs, final_loss_gap, other_cpu_pct, per_example,
                                 workload_size)
from tfwb.config import RunConfig
from tfwb.records import RunResult

__all__ = ["Versus", "HistoryRow", "history_rows", "pick_baseline", "BASELINE", "Decided"]

#: The comparison kind of the baseline's own row.
BASELINE = "baseline"

#: ``decided(reference_config, run_config)``: the interleaved comparison of the pair (the run as the
#: candidate), or ``None`` (``tfwb.analysis.decisions.Decisions.get``).
Decided = Callable[[RunConfig, RunConfig], Optional[stats.RoundsComparison]]


@dataclass(frozen=True)
class Versus:
    """One run against another (its ``reference``, 1-based): the comparison and the pair's context.

    Attributes:
        reference: the index of the run it is compared with.
        reference_is_baseline: whether that run is the baseline.
        comparison: ``compare_runs`` of the pair; ``None`` when a run measured nothing or
            the two ran different workload sizes.
        per_example: whether the batches differ, so time per example was compared.
        batches: ``(this run's global batch, the reference's)``.
        other_size: this run's workload size when the reference ran another one (not compared).
        decided: the interleaved comparison of the pair's two configurations, when one was
            measured; every front end shows it instead of the separate-run comparison.
    """

    reference: int
    reference_is_baseline: bool
    comparison: Optional[stats.Comparison]
    per_example: bool = False
    batches: Tuple[int, int] = (0, 0)
    other_size: Optional[str] = None
    decided: Optional[stats.RoundsComparison] = None

    @property
    def kind(self) -> Optional[str]:
        """The verdict's kind (``stats.FASTER``, ``stats.SLOWER``, ...): the interleaved one when ``decided``
        is set, else the separate runs'; ``None`` without either."""
        if self.decided is not None:
            return self.decided.verdict
        return self.comparison.verdict if self.comparison is not None else None

    @property
    def speedup(self) -> Optional[float]:
        """The reference's time over this run's (per example when the batches differ): the interleaved
        comparison's median ratio when ``decided`` is set, else the separate runs' medians' ratio."""
        if self.decided is not None:
            return self.decided.speedup
        return self.comparison.speedup if self.comparison is not None else None


@dataclass(frozen=True)
class HistoryRow:
    """What the history says about one run, as data.

    Attributes:
        index, label, status, error: the run's 1-based position, its label, status and error
            (``None`` for ok runs; the status when a failed run gave no error).
        changes: the knobs that differ from the baseline configuration (``RunConfig.diff``).
        median_ms, q1_ms, q3_ms, iqr_ms, examples_per_s, input_wait_pct (0-100), mfu,
            datasheet_mfu: numbers, ``None`` where the run measured nothing (MFU: ok runs only).
        flops_uncounted: the layers whose FLOPs could not be counted.
        is_baseline: the run is the baseline.
        versus_baseline: its ``Versus`` the baseline (``None``: the baseline itself, a failed
            run, or no baseline).
        previous: the index of the previous finished run of the same size, or ``None``.
        previous_changes: the knobs that differ from it.
        versus_previous: its ``Versus`` that run (ok runs only).
        prev_arithmetic: the ``ARITHMETIC_KNOBS`` that changed against it.
        loss_gap: ``final_loss_gap(previous, run)`` when they did and both have losses.
        bound: the ``Bound`` of the previous run's suggestion this run applied, else ``None``.
        bound_alone: that suggestion was the only change (its gain can be scored).
        bound_exceeded: the gain went above a strict bound beyond the noise band.
        noise: the run-to-run band the verdicts used.
        other_cpu_pct: the CPU share other programs took during the run (``None``: unknown).
        diagnosis: ``tfwb.diagnose`` of it (ok runs only).
        result: the run itself.
    """

    index: int
    label: str
    status: str
    error: Optional[str]
    changes: Dict[str, Any]
    median_ms: Optional[float]
    q1_ms: Optional[float]
    q3_ms: Optional[float]
    iqr_ms: Optional[float]
    examples_per_s: Optional[float]
    input_wait_pct: Optional[float]
    mfu: Optional[float]
    datasheet_mfu: Optional[float]
    flops_uncounted: List[str]
    is_baseline: bool
    versus_baseline: Optional[Versus]
    noise: stats.NoiseBand
    other_cpu_pct: Optional[float]
    diagnosis: Optional[Diagnosis]
    result: RunResult = field(repr=False, compare=False)
    previous: Optional[int] = None
    previous_changes: Dict[str, Any] = field(default_factory=dict)
    versus_previous: Optional[Versus] = None
    prev_arithmetic: List[str] = field(default_factory=list)
    loss_gap: Optional[Tuple[float, float, int]] = None
    bound: Optional[Bound] = None
    bound_alone: bool = False
    bound_exceeded: bool = False

    @property
    def ok(self) -> bool:
        """Whether the run finished."""
        return self.status == "ok"

    @property
    def comparison(self) -> Optional[str]:
        """The kind of the verdict against the baseline: ``BASELINE`` for the baseline itself."""
        if self.is_baseline:
            return BASELINE
        return self.versus_baseline.kind if self.versus_baseline is not None else None

    @property
    def speedup(self) -> Optional[float]:
        """The baseline's median over this run's (1.0 for the baseline)."""
        if self.is_baseline:
            return 1.0
        return self.versus_baseline.speedup if self.versus_baseline is not None else None

    @property
    def per_example(self) -> bool:
        """Whether the verdict against the baseline compares time per example."""
        return bool(self.versus_baseline is not None and self.versus_baseline.comparison is not None
                    and self.versus_baseline.per_example)

    @property
    def prev_comparison(self) -> Optional[str]:
        """The kind of the verdict against the previous run."""
        return self.versus_previous.kind if self.versus_previous is not None else None

    @property
    def prev_speedup(self) -> Optional[float]:
        """The previous run's median over this run's."""
        return self.versus_previous.speedup if self.versus_previous is not None else None

    @property
    def prev_per_example(self) -> bool:
        """Whether the verdict against the previous run compares time per example."""
        return bool(self.versus_previous is not None and self.versus_previous.comparison is not None
                    and self.versus_previous.per_example)


def pick_baseline(results: Sequence[RunResult],
                  config: Optional[RunConfig] = None) -> Optional[RunResult]:
    """The result others are compared with.

    A busy baseline (other programs used the CPU during it: ``tfwb.analysis.pairs.busy``) would make
    every verdict against it "cannot tell". So when the chosen run was busy, the last quiet run of
    the same configuration stands in for it (the Workbench's first run often draws the widget for the
    first time while it runs); with none, the busy one stays, and an interleaved comparison
    (the Workbench's Decide) still decides against it.

    Args:
        results: runs in order.
        config: the intended baseline configuration; when given, the first ok result
            that ran exactly this configuration (``label`` ignored) wins.

    Returns:
        That result (or the last quiet run of its configuration, when it was busy), else the first ok
        result (likewise), else ``None``.

    Example:
        >>> pick_baseline([]) is None
        True
        >>> busy = RunResult(config=RunConfig(), step_times_s=(0.2,) * 9, extras={"other_cpu_pct": 16.0})
        >>> quiet = RunResult(config=RunConfig(label="again"), step_times_s=(0.2,) * 9, extras={"other_cpu_pct": 1.0})
        >>> pick_baseline([busy, quiet]) is quiet
        True
    """
    ok = [r for r in results if r.ok]
    if ok and workload_size(ok[-1]):
        # A history can mix small (TFWB_FAST=1) and full runs of the same config:
        # compare with a run of the size the latest run used.
        same = [r for r in ok if workload_size(r) in (None, workload_size(ok[-1]))]
        ok = same or ok
    if not ok:
        return None
    chosen = ok[0]
    if config is not None:
        chosen = next((r for r in ok if not r.config.diff(config)), chosen)
    if busy(chosen):
        quiet = [r for r in ok if not busy(r) and not r.config.diff(chosen.config)]
        if quiet:
            return quiet[-1]
    return chosen


def history_rows(results: Sequence[RunResult], baseline: Optional[RunResult] = None, *,
                 baseline_config: Optional[RunConfig] = None,
                 noise: Optional[stats.NoiseBand] = None,
                 diagnoser: Callable[[RunResult], Diagnosis] = diagnose,
                 decided: Optional[Decided] = None) -> List[HistoryRow]:
    """One ``HistoryRow`` per run, compared with the baseline run and with the run before it.

    Args:
        results: runs in the order they ran, failures included.
        baseline: the run the others are compared with; default
            ``pick_baseline(results, baseline_config)``.
        baseline_config: the configuration ``changes`` is relative to; default the baseline
            run's configuration (or the first run's).
        noise: the run-to-run noise band a ratio must leave to count; default
            ``noise_band(results)`` (learned from repeated identical runs, else
            ``stats.DEFAULT_NOISE``).
        diagnoser: ``tfwb.diagnose``, or a cached one (``tfwb.analysis.session.Analysis.diagnose``:
            each run diagnosed once, whatever draws it).
        decided: the interleaved verdicts measured so far (``tfwb.analysis.decisions.Decisions.get``):
            a pair that has one gets it as its ``Versus.decided`` (per example when the batches differ),
            shown instead of the separate runs' verdict.

    Returns:
        The rows, in order. A run of another workload size than the baseline (small vs full,
        from the fingerprint) gets a ``Versus`` with ``other_size`` and no comparison.

    Example:
        >>> history_rows([])
        []
    """
    if baseline is None:
        baseline = pick_baseline(results, baseline_config)
    if baseline_config is None:
        if baseline is not None:
            baseline_config = baseline.config
        elif results:
            baseline_config = results[0].config
    if noise is None:
        noise = noise_band(results)
    rows = []
    for i, result in enumerate(results, 1):
        fields = _row(i, results, baseline, baseline_config, noise, diagnoser, decided)
        fields.update(_versus_previous(result, _previous(results, i - 1), results, noise, baseline, diagnoser,
                                       decided))
        rows.append(HistoryRow(**fields))
    return rows


def _index(results: Sequence[RunResult], run: RunResult) -> int:
    return next(i for i, r in enumerate(results, 1) if r is run)


def _previous(results: Sequence[RunResult], position: int) -> Optional[RunResult]:
    """The last finished run before ``results[position]`` of the same workload size."""
    size = workload_size(results[position])
    for r in reversed(results[:position]):
        if r.ok and (size is None or workload_size(r) in (None, size)):
            return r
    return None


def _versus(reference: RunResult, run: RunResult, index: int, is_baseline: bool,
            noise: stats.NoiseBand, decided: Optional[Decided] = None) -> Optional[Versus]:
    comparison = compare_runs(reference, run, noise=noise)
    if comparison is None:
        return None
    by_example = per_example(reference, run)
    batches = (run.config.batch_size, reference.config.batch_size)
    rounds = decided(reference.config, run.config) if decided is not None else None
    if rounds is not None and by_example:
        rounds = per_example_rounds(rounds, batches)
    return Versus(index, is_baseline, comparison, by_example, batches, decided=rounds)


def _versus_previous(result: RunResult, previous: Optional[RunResult], results: Sequence[RunResult],
                     noise: stats.NoiseBand, baseline: Optional[RunResult],
                     diagnoser: Callable[[RunResult], Diagnosis],
                     decided: Optional[Decided] = None) -> Dict[str, Any]:
    if previous is None:
        return {}
    index = _index(results, previous)
    out: Dict[str, Any] = {"previous": index, "previous_changes": result.config.diff(previous.config)}
    if result.ok:
        versus = _versus(previous, result, index, previous is baseline, noise, decided)
        out["versus_previous"] = versus
        out.update(_bound_score(previous, result, versus.speedup if versus else None, noise, diagnoser))
        changed = arithmetic_changes(result.config, previous.config)
        if changed:
            out.update(prev_arithmetic=changed, loss_gap=final_loss_gap(previous, result))
    return out


def _row(index: int, results: Sequence[RunResult], baseline: Optional[RunResult],
         baseline_config: Optional[RunConfig], noise: stats.NoiseBand,
         diagnoser: Callable[[RunResult], Diagnosis], decided: Optional[Decided] = None) -> Dict[str, Any]:
    result = results[index - 1]
    spread = result.spread
    wait = result.input_wait_fraction
    is_baseline = baseline is not None and result is baseline
    versus = None
    if is_baseline or baseline is None or not result.ok:
        pass
    elif None not in (workload_size(baseline), workload_size(result)) \
            and workload_size(baseline) != workload_size(result):
        versus = Versus(_index(results, baseline), True, None, other_size=workload_size(result))
    else:
        versus = _versus(baseline, result, _index(results, baseline), True, noise, decided)
    ok = result.ok
    return {
        "index": index, "label": result.config.label, "status": result.status,
        "error": None if result.status == "ok" else (result.error or result.status),
        "changes": result.config.diff(baseline_config) if baseline_config is not None else {},
        "median_ms": spread.median * 1e3 if spread else None,
        "q1_ms": spread.q1 * 1e3 if spread else None,
        "q3_ms": spread.q3 * 1e3 if spread else None,
        "iqr_ms": (spread.q3 - spread.q1) * 1e3 if spread else None,
        "examples_per_s": result.throughput_per_s,
        "input_wait_pct": wait * 100.0 if wait is not None else None,
        "mfu": result.mfu if ok else None,
        "datasheet_mfu": result.datasheet_mfu if ok else None,
        "flops_uncounted": list(result.flops_uncounted),
        "is_baseline": is_baseline, "versus_baseline": versus, "noise": noise,
        "other_cpu_pct": other_cpu_pct(result),
        "diagnosis": diagnoser(result) if ok else None,
        "result": result,
    }


def _bound_score(previous: RunResult, result: RunResult, speedup: Optional[float],
                 noise: stats.NoiseBand, diagnoser: Callable[[RunResult], Diagnosis]) -> Dict[str, Any]:
    """``bound``, ``bound_alone`` and ``bound_exceeded`` of a run that applied the previous run's
    suggestion (a gain of several knobs at once is not one suggestion's to score)."""
    if not previous.ok or not result.ok:
        return {}
    diff = result.config.diff(previous.config)
    for b in diagnoser(previous).bounds:
        if b.knob in diff and diff[b.knob] == b.value:
            alone = len(diff) == 1
            exceeded = (alone and speedup is not None and speedup > 0 and b.strict and b.speedup is not None
                        and speedup > b.speedup * (1 + noise.pct / 100.0))   # not strict: explained
            return {"bound": b, "bound_alone": alone, "bound_exceeded": exceeded}
    return {}
