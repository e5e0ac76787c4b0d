"""What the tune may try next: ``Change`` and ``rank_changes``, the changes to a run ranked by their bound.

``rank_changes(result)`` offers every change of the knobs whose ``tfwb.advice.ADVICE`` entry has
a ``tune`` (``tfwb.advice.entries.TuneAdvice``: the values tried, when a change is of no use to
a run, its place among equal bounds), bounds each by the diagnosis (``tfwb.analysis.diagnosis``:
``1 / (1 - wait)`` for the input knobs, ``1 / MFU`` and the dtype peaks for the compute
knobs), and splits them into those worth a trial, best bound first, and those skipped with
their reason: within the noise (``tfwb.stats.NoiseBand``), not honoured by this machine (its
rule in ``tfwb.advice.expected``, on the machine the run's fingerprint records), tried already,
of no use to this run, or acting only where the run no longer spends its time: after a cache,
the knobs that act before it (``reach``).

The loop that tries them is ``tfwb.search.tune_loop``; what a trial found is
``tfwb.search.tune_result``. Pure: no TensorFlow, no UI library.

Example:
    >>> from tfwb.records import RunResult
    >>> gpu = {"gpus": [{"name": "G", "compute_capability": [9, 0]}]}
    >>> r = RunResult(config=RunConfig(data_source="memory"), step_times_s=(1.0,) * 8,
    ...               input_wait_s=(0.0,) * 8, fingerprint=gpu, mfu=0.5)
    >>> [c.change for c in rank_changes(r)[0]][:2]
    ['steps_per_execution=8', 'jit_compile=True']
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, List, Optional, Sequence, Set, Tuple

from tfwb import advice, stats
from tfwb import knobs as _knobs
from tfwb.advice import Bound, downstream, speedup_text
from tfwb.advice.directions import SLOWER
from tfwb.advice.expected import expected_for, rules
from tfwb.bottleneck import MODERATE_INPUT_FRACTION
from tfwb.config import RunConfig
from tfwb.analysis.diagnosis import INPUT_BOUND_KNOBS, Diagnosis, bound, diagnose
from tfwb.hardware import Machine, MachineLike
from tfwb.records import RunResult
from tfwb.workloads import SOURCE_KNOBS, get_workload

__all__ = ["Change", "rank_changes", "run_examples", "compute_tuned", "reach", "INPUT_ROLES", "REACHES"]

#: The knob roles of the input pipeline (``tfwb.knobs.Knob.role``).
INPUT_ROLES = ("source", "pipeline")

#: What a change can still do to a run's input wait (``reach``): all of it, part of it, nothing.
ALL, PART, NONE = "all", "part", "none"
REACHES = (ALL, PART, NONE)
#: The input knobs that act on reading the source, before a cache in the pipeline
#: (``tfwb.tf.runner.pipeline``: source -> cache -> shuffle -> repeat -> (augment) batch -> prefetch).
BEFORE_CACHE = downstream.UPSTREAM_OF_CACHE


@dataclass(frozen=True)
class Change:
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


def reach(knob: str, cfg: RunConfig, augments: bool = True) -> str:
    """What changing ``knob`` can still do to the input wait of a run of ``cfg``: ``"all"``, ``"part"``, ``"none"``.

    A cache (``cfg.cache`` on, data read through a pipeline) is filled with one whole epoch before the
    first step, so no measured step reads through what lies before it: the knobs that act on the reading
    (``interleave``, ``data_source``, ``storage_latency_ms``) can do nothing to the wait (``"none"``);
    ``parallel_map`` speeds the decoding before the cache and the per-example augmentation after it, so it
    acts on part of the wait where the workload augments (``augments``), on nothing where it does not;
    ``prefetch`` and the knobs after the cache act on all of it. Without a cache, every knob may act on
    all of the wait (``"all"``; what it does there is its bound's business).

    Args:
        knob: a RunConfig field.
        cfg: the run's configuration.
        augments (bool, default True): the workload augments examples after the cache (its
            ``vectorized_map`` knob applies).

    Example:
        >>> cached = RunConfig(workload="images", data_source="files", cache=True)
        >>> reach("prefetch", cached), reach("parallel_map", cached), reach("interleave", cached)
        ('all', 'part', 'none')
        >>> reach("interleave", cached.replace(cache=False))
        'all'
    """
    return (ALL, PART, NONE)[downstream.reach(knob, cfg, augments).rank]


def _augments(cfg: RunConfig) -> bool:
    try:
        return get_workload(cfg.workload).applies("vectorized_map")
    except ValueError:                      # a saved result's workload, not registered here: it may augment
        return True


#: Why a change that acts before a kept cache is not tried.
BEFORE_CACHE_SKIP = ("it acts on the reading before the cache, and the cache was filled with one epoch before the "
                     "first step, so no measured step reads through it: it cannot shorten this run's input wait")


def _after_cache_note(knob: str) -> str:
    return (f"{knob} goes after the changes that act on all of the input wait: on this cached run it speeds "
            "only the augmentation after the cache (the decoding it also speeds is before the cache, which no "
            "measured step reads through)")


def _applies(cfg: RunConfig) -> Callable[[str], bool]:
    try:
        return get_workload(cfg.workload).applies
    except ValueError:                      # a saved result's workload, not registered here
        return lambda knob: knob not in SOURCE_KNOBS


def _offers(cfg: RunConfig, machine: Machine) -> List[Tuple[str, Any]]:
    """Every ``(knob, value)`` worth bounding for ``cfg``: the values of each knob whose ``ADVICE`` entry has
    a ``tune`` (``TuneAdvice.values``, else its suggestion's value); none of the input pipeline's on staged
    batches (``data_source="memory"``: no pipeline to change)."""
    declared, applies = _knobs.table(type(cfg)), _applies(cfg)
    out: List[Tuple[str, Any]] = []
    for knob, entry in advice.ADVICE.items():
        if entry.suggest is None or entry.tune is None or knob not in declared or not applies(knob):
            continue
        if declared[knob].role in INPUT_ROLES and cfg.data_source == "memory":
            continue
        if entry.tune.values is not None:
            out.extend((knob, v) for v in entry.tune.values(knob, cfg, machine))
            continue
        offer = entry.suggest(knob, cfg, machine)
        if offer is not None:
            out.append((knob, offer[0]))
    return out


def compute_tuned(config_type: type = RunConfig) -> Tuple[str, ...]:
    """The knobs outside the input pipeline that the tune tries, in the order its text names them.

    Example:
        >>> compute_tuned()
        ('steps_per_execution', 'jit_compile', 'mixed_precision')
    """
    declared = _knobs.table(config_type)
    tuned = [(entry.tune.listed, knob) for knob, entry in advice.ADVICE.items()
             if entry.tune is not None and knob in declared and declared[knob].role not in INPUT_ROLES]
    return tuple(knob for _, knob in sorted(tuned))


def run_examples(cfg: RunConfig) -> int:
    """Training examples a run of ``cfg`` reads, warm-up included.

    Example:
        >>> run_examples(RunConfig(batch_size=64, steps=40, warmup_steps=5))
        2880
    """
    return sum(cfg.calls) * cfg.steps_per_execution * cfg.batch_size


def rank_changes(result: RunResult, diagnosis: Optional[Diagnosis] = None, hardware: Optional[MachineLike] = None,
                 tried: Sequence[Tuple[str, Any]] = (), noise: stats.NoiseBand = stats.DEFAULT_NOISE, *,
                 epoch_examples: Optional[Callable[[RunConfig], Optional[int]]] = None,
                 input_reference: Optional[RunResult] = None) -> Tuple[Tuple[Change, ...], Tuple[Change, ...]]:
    """The changes worth a trial on ``result``'s run, best bound first, and those skipped, with why.

    Args:
        result: the measured run of the current best configuration.
        diagnosis: its ``tfwb.analysis.diagnosis.Diagnosis`` (computed when None); its suggestions'
            bounds are reused.
        hardware: the machine (default: read from the result's fingerprint).
        tried: ``(knob, value)`` pairs already tried (skipped as such).
        noise: bounds within this band cannot show in a measurement (skipped).
        epoch_examples: ``epoch_examples(cfg) -> examples in one epoch or None``; ``cache`` is
            skipped for a run shorter than one epoch. None: the epoch is not known.
        input_reference: an earlier run of the same pipeline that measured its input wait, for the
            input knobs' bounds when ``result`` did not (a run of several steps a call).

    Returns:
        ``(to_try, skipped)``: ``Change`` tuples; ``to_try`` ranked: known bounds largest first
        (one that is not strict, an input knob on a CPU, by its size too), unknown ones last; on
        equal bounds, ``cache`` first on a run that reads its data at least twice (it removes work,
        the others overlap it), and steps per call before XLA (it compiles nothing). After a cache, a knob
        that acts before it (``reach``: ``"none"``) is skipped, and one that acts on part of the wait
        (``parallel_map``) goes after those of equal bound that act on all of it (``prefetch``).

    Example:
        >>> from tfwb.records import RunResult
        >>> gpu = {"gpus": [{"name": "G", "compute_capability": [9, 0]}]}
        >>> r = RunResult(config=RunConfig(data_source="memory"), step_times_s=(1.0,) * 8,
        ...               input_wait_s=(0.0,) * 8, fingerprint=gpu, mfu=0.5)
        >>> [c.change for c in rank_changes(r)[0]][:2]      # equal bounds: the one that compiles nothing first
        ['steps_per_execution=8', 'jit_compile=True']
    """
    cfg = result.config
    machine = advice.machine_of(result) if hardware is None else Machine.of(hardware)
    diagnosis = diagnosis if diagnosis is not None else diagnose(result, machine)
    tried_set = {(k, repr(v)) for k, v in tried}
    offers = _offers(cfg, machine)
    needs_epoch = any(advice.ADVICE[knob].tune.needs_epoch for knob, _ in offers)
    epoch = epoch_examples(cfg) if epoch_examples is not None and needs_epoch else None
    examples = run_examples(cfg)
    augments = _augments(cfg)
    to_try: List[Change] = []
    skipped: List[Change] = []
    for knob, value in offers:
        measured = result
        if knob in INPUT_BOUND_KNOBS and result.input_wait_fraction is None and input_reference is not None:
            measured = input_reference      # this run did not measure its wait (several steps a call)
        b = diagnosis.bound_for(knob)
        if b is None or b.value != value or measured is not result:
            b = bound(measured, knob, value)
        where = reach(knob, cfg, augments)
        if where == NONE and (knob, repr(value)) not in tried_set:
            skip = BEFORE_CACHE_SKIP
        else:
            skip = _skip_reason(measured, examples, knob, value, b, machine, tried_set, noise, epoch)
        hint = advice.ADVICE[knob].tune
        note = hint.note(examples, epoch) if hint.note is not None and epoch and not skip else ""
        if where == PART and not note and not skip:
            note = _after_cache_note(knob)
        (skipped if skip else to_try).append(Change(knob, value, b, skip, note))
    # On equal bounds, a change that acts on all of the input wait before one that acts on part of it (after a
    # cache), then each knob's ``TuneAdvice.tie`` (a cache first on a run that reads its data at least twice: it
    # removes work the others overlap; steps per call before XLA: it compiles nothing), then its advice order.
    to_try.sort(key=lambda c: (*c.rank, REACHES.index(reach(c.knob, cfg, augments)),
                               advice.ADVICE[c.knob].tune.tie_rank(examples, epoch),
                               advice.ADVICE[c.knob].priority(cfg)))
    return tuple(to_try), tuple(skipped)


def _skip_reason(result: RunResult, examples: int, knob: str, value: Any, b: Bound, machine: Machine,
                 tried: Set[Tuple[str, str]], noise: stats.NoiseBand, epoch: Optional[int]) -> str:
    """Why ``knob=value`` is not worth a trial on a run reading ``examples`` (``""``: it is); ``result``: the
    run its bound read; ``epoch``: examples in one epoch (None: not known)."""
    if (knob, repr(value)) in tried:
        return "tried already"
    if knob in rules():
        e = expected_for(machine, knob, value, result)
        if e.direction == SLOWER:
            return f"this machine cannot honour it: {e.why}"
    hint = advice.ADVICE[knob].tune
    if b.speedup is not None and noise.contains(max(b.speedup, 1.0)):
        # A bound that is not strict (an input knob on a CPU: the pipeline shares the cores with the
        # step) rules a knob out only where the run hardly waits, unless its advice tries it anyway.
        quiet = (result.input_wait_fraction or 0.0) < MODERATE_INPUT_FRACTION and not hint.quiet
        if b.strict or quiet:
            return f"its bound {speedup_text(b.speedup)} is within the noise (\u00b1{noise.pct:.0f} %): {b.text}"
    if hint.skip is not None and epoch is not None:
        return hint.skip(examples, epoch)
    return ""
