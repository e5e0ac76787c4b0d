"""Verdicts about a run: what limits it, what to try next, and how much that can gain at most.

Pure: reads a RunResult (and optionally a hardware description) and returns
plain data. The input verdicts and their thresholds are the TF profiler's own
(``tfwb.bottleneck``: input wait >= 5 % of step time is moderately, >= 20 % highly
input-bound); which model-side knob to try comes from ``tfwb.expect``'s rules.

Which knobs are suggested, in what order, and the bound of each come from their entries in
``tfwb.advice.ADVICE``. Every suggestion carries a bound (``Bound``, in ``Diagnosis.bounds``,
parallel to ``Diagnosis.suggestions``): Amdahl's law on the measured breakdown of the step,
``1 / (1 - part + part / r)`` for the part of the step the knob acts on, made ``r`` times
faster (the part of each knob: ``tfwb.advice``).

A change already measured and not kept (``tfwb.analysis.tried``: the history's one-knob changes,
a tune's trials) goes behind the untried ones (``reorder``), saying where it was measured; after a
cache the knobs upstream of it go last (``tfwb.advice.downstream``).

``score_bound`` compares a bound with the gain a run measured (``tfwb.render.bound_note`` words it
for a history row). ``tfwb.diagnose`` is this module's ``diagnose``; the history's rows
(``tfwb.analysis.rows``) carry each finished run's ``Diagnosis``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, Callable, Dict, Optional, Sequence, Tuple

from tfwb import advice, expect
from tfwb import knobs as _knobs
from tfwb.advice import Bound, amdahl  # noqa: F401 - re-exported
from tfwb.advice import speedup_text as _x
from tfwb.advice.downstream import reach
from tfwb.bottleneck import (HIGH_INPUT_FRACTION, INPUT_HIGH, INPUT_MODERATE, MODERATE_INPUT_FRACTION,  # noqa: F401 - re-exported
                         NOT_INPUT, input_verdict)
from tfwb.config import RunConfig
from tfwb.hardware import Machine, MachineLike
from tfwb.workloads import SOURCE_KNOBS, get_workload

FAILED, NO_DATA, NO_INPUT_DATA = "run failed", "no measured steps", "input wait not measured"


#: Knobs that act on the input pipeline: bounded by the input wait (their ``tfwb.advice`` bound).
INPUT_BOUND_KNOBS: Tuple[str, ...] = tuple(k for k, a in advice.ADVICE.items() if a.bound is advice.input_wait_bound)
#: The declared roles (``tfwb.knobs.ROLES``) of the knobs suggested to an input-bound run.
INPUT_ROLES = ("source", "pipeline")


@dataclass(frozen=True)
class Diagnosis:
    """A verdict, the knobs that address it, and how much each can gain at most.

    ``verdict`` is one of the module's constants; ``suggestions`` are RunConfig
    changes worth trying, as ``(field, value, why)`` tuples, in the order to try them;
    ``bounds`` holds one ``Bound`` per suggestion, in the same order.
    """

    verdict: str
    input_fraction: Optional[float]
    headline: str
    suggestions: Tuple[Tuple[str, object, str], ...] = ()
    bounds: Tuple[Bound, ...] = ()

    def bound_for(self, knob: str) -> Optional[Bound]:
        """The bound of the suggestion for ``knob``; ``None`` when there is no such suggestion."""
        for b in self.bounds:
            if b.knob == knob:
                return b
        return None


def _applies(cfg) -> Callable[[str], bool]:
    """Whether a knob changes this config's workload (a saved result's unregistered workload:
    every knob but the source knobs, which only a workload that declares them honours)."""
    try:
        return get_workload(cfg.workload).applies
    except ValueError:
        return lambda knob: knob not in SOURCE_KNOBS


def _suggestions(cfg, hardware: Machine, *, input_bound: bool, baseline=None) -> tuple:
    """``(knob, value, why)`` for every ``tfwb.advice.ADVICE`` entry that suggests a change to ``cfg``.

    Input knobs (declared role in ``INPUT_ROLES``) are suggested to an input-bound run, none with
    staged batches (``data_source="memory"``: no pipeline); other knobs to a run that is not
    input-bound, only where ``tfwb.expect`` expects them faster on ``hardware`` than ``baseline``.
    Ranked by what each can still do to this run (``tfwb.advice.downstream.reach``: after a cache,
    the knobs upstream of it last, saying why), then in the entries' ``order``; only knobs the
    workload honours.
    """
    if input_bound and cfg.data_source == "memory":
        return ()
    declared, applies = _knobs.table(type(cfg)), _applies(cfg)
    found = []
    for knob, entry in advice.ADVICE.items():
        if entry.suggest is None or knob not in declared or not applies(knob):
            continue
        if (declared[knob].role in INPUT_ROLES) != input_bound:
            continue
        offer = entry.suggest(knob, cfg, hardware)
        if offer is None:
            continue
        value, why = offer
        if not input_bound:
            e = expect.expected_for(hardware, knob, value, baseline)
            if e.direction != expect.FASTER:
                continue
            why = why or e.why
        can = reach(knob, cfg)
        if can.why:
            why = f"{why}; {can.why}" if why else can.why
        found.append(((can.rank, entry.priority(cfg)), knob, value, why))
    return tuple(f[1:] for f in sorted(found, key=lambda f: f[0]))


#: A dataset that alone delivers less than this times the step's rate cannot keep the step fed
#: (``tfwb.keras.input_rate``'s thresholds: below 1.05x input-bound, below 1.5x close to it).
DATASET_BOUND_RATIO, DATASET_CLOSE_RATIO = 1.05, 1.5


def _dataset_rate(result) -> Optional[Tuple[str, str]]:
    """The input verdict of a run whose input wait cannot be seen (``model.fit`` under
    ``tfwb.keras.Monitor``) but whose dataset was timed alone (``extras["input_rate"]``)."""
    rate = (getattr(result, "extras", None) or {}).get("input_rate") or {}
    data, step = rate.get("dataset_batches_per_s"), rate.get("step_batches_per_s")
    if not data or not step:
        return None
    ratio = data / step
    verdict = (INPUT_HIGH if ratio < DATASET_BOUND_RATIO else
               INPUT_MODERATE if ratio < DATASET_CLOSE_RATIO else NOT_INPUT)
    return verdict, (f"{verdict} (the dataset alone delivers {data:,.0f} batches/s, the step takes "
                     f"{step:,.0f}/s)")


def diagnose(result, hardware: Optional[MachineLike] = None) -> Diagnosis:
    """Classify a RunResult: failed, no data, or its input-bound level with suggestions.

    An input-bound run gets the pipeline knobs that are off; a run that is not gets the
    model-side knobs ``tfwb.expect`` expects to be faster on its machine (none on a CPU;
    e.g. mixed precision on a GPU with Tensor Cores).

    Args:
        result: a RunResult.
        hardware (Machine | mapping | None, default None): ``tfwb.hardware.detect()`` output; None
            reads the GPUs and cores from the result's fingerprint.

    Example:
        >>> diagnose(result).headline   # a run that waits 30 % of each step for input
        'highly input-bound (input wait 30%): try interleave=True'
    """
    if result.status != "ok":
        return Diagnosis(FAILED, None, f"{FAILED}: {result.error or result.status}")
    frac = result.input_wait_fraction
    if not result.step_times_s:
        return Diagnosis(NO_DATA, None, NO_DATA)
    if frac is None:
        rate = _dataset_rate(result)
        if rate is None:
            return Diagnosis(NO_INPUT_DATA, None, NO_INPUT_DATA)
        verdict, text = rate
        if verdict != NOT_INPUT:       # a fit's own pipeline: RunConfig's input knobs do not describe it
            return Diagnosis(verdict, None, f"{text}: speed up the dataset given to fit")
        hw = advice.machine_of(result) if hardware is None else Machine.of(hardware)
        sugg = _suggestions(result.config, hw, input_bound=False, baseline=result)
        tip = f": try {sugg[0][0]}={sugg[0][1]!r}" if sugg else ""
        return Diagnosis(verdict, None, f"{text}{tip}", sugg,
                         tuple(bound(result, knob, value) for knob, value, _ in sugg))
    verdict = input_verdict(frac)
    hw = advice.machine_of(result) if hardware is None else Machine.of(hardware)
    # An input-bound run gets input knobs; any other the model-side knobs tfwb.expect expects faster here.
    sugg = _suggestions(result.config, hw, input_bound=verdict != NOT_INPUT, baseline=result)
    tip = f": try {sugg[0][0]}={sugg[0][1]!r}" if sugg else ""
    return Diagnosis(verdict, frac, f"{verdict} (input wait {frac:.0%}){tip}", sugg,
                     tuple(bound(result, knob, value) for knob, value, _ in sugg))


#: How a headline names its first suggestion.
_TIP = ": try "


def _tip(suggestions: Tuple[Tuple[str, object, str], ...]) -> str:
    return f"{_TIP}{suggestions[0][0]}={suggestions[0][1]!r}" if suggestions else ""


def reorder(diagnosis: Diagnosis, tried: Sequence[Any]) -> Diagnosis:
    """``diagnosis`` with the changes already measured and not kept moved behind the untried ones.

    Args:
        diagnosis: a run's ``Diagnosis``.
        tried: what was measured (``tfwb.analysis.tried.Tried``: ``from_history`` of the rows, then
            ``from_trials`` of a tune's trials; the last record of a change counts).

    Returns:
        The same diagnosis when nothing it suggests was settled (measured slower, no different, or
        failed); else its suggestions (and bounds) with the settled ones last, each saying where it was
        measured (``"already tried: interleave=True: tune trial 2 measured 1.11x slower"``), and the
        headline naming the new first one. A settled change still first (nothing untried is left) says
        so: ``"offered again: no untried change is left"``. A change measured "cannot tell" keeps its
        place and says it.

    Example:
        >>> from tfwb.analysis.tried import Tried
        >>> d = Diagnosis(INPUT_HIGH, 0.3, "highly input-bound (input wait 30%): try interleave=True",
        ...               (("interleave", True, ""), ("prefetch", True, "overlap")))
        >>> reorder(d, [Tried("interleave", True, "slower", 0.9, "tune trial 2")]).headline
        'highly input-bound (input wait 30%): try prefetch=True'
    """
    last: Dict[Tuple[str, str], Any] = {}
    for t in tried:
        last[(t.knob, repr(t.value))] = t
    if not diagnosis.suggestions or not last:
        return diagnosis
    bounds = dict(zip(range(len(diagnosis.suggestions)), diagnosis.bounds))
    fresh, settled = [], []
    for i, (knob, value, why) in enumerate(diagnosis.suggestions):
        t = last.get((knob, repr(value)))
        if t is None or t.kept:
            fresh.append((i, (knob, value, why)))
        elif t.settled:
            settled.append((i, (knob, value, f"{why}; already tried: {t.text()}" if why else
                                f"already tried: {t.text()}")))
        else:
            fresh.append((i, (knob, value, f"{why}; tried, undecided: {t.text()}" if why else
                              f"tried, undecided: {t.text()}")))
    if not settled and all(s == diagnosis.suggestions[i] for i, s in fresh):
        return diagnosis
    if not fresh:
        i, (knob, value, why) = settled[0]
        settled[0] = (i, (knob, value, f"offered again: no untried change is left ({why})"))
    order = fresh + settled
    suggestions = tuple(s for _, s in order)
    new_bounds = tuple(bounds[i] for i, _ in order if i in bounds)
    head = diagnosis.headline
    cut = head.rfind(_TIP)
    headline = head[:cut] + _tip(suggestions) if cut >= 0 else head
    return replace(diagnosis, suggestions=suggestions, bounds=new_bounds, headline=headline)


# -- bounds ----------------------------------------------------------------------------------
def bound(result, knob: str, value: object) -> Bound:
    """How much setting ``knob=value`` can gain at most on ``result``'s run (Amdahl's law).

    The knob's entry in ``tfwb.advice.ADVICE`` computes it (``tfwb.advice`` says which part of
    the step each knob acts on).

    Args:
        result: the measured RunResult the suggestion is made for.
        knob, value: the suggested change.

    Returns:
        A ``Bound``; its ``speedup`` is ``None`` when this run did not measure what the
        bound needs (the text says what is missing).

    Example:
        >>> from tfwb.records import RunResult
        >>> gpu = {"gpus": [{"name": "NVIDIA L4", "compute_capability": [8, 9]}]}
        >>> r = RunResult(config=RunConfig(), step_times_s=(1.0,) * 4, input_wait_s=(0.47,) * 4, fingerprint=gpu)
        >>> bound(r, "prefetch", True).text
        'prefetch can gain at most 1.9x: the step waits for input 47 % of the time'
    """
    entry = advice.ADVICE.get(knob)
    if entry is None or entry.bound is None:
        return Bound(knob, value, None, f"{knob}: bound unknown: no rule bounds this knob")
    return entry.bound(result, knob, value)


def score_bound(bound: Optional[float], measured_speedup: float, noise: float = 0.0, *,
                strict: bool = True) -> str:
    """Score a measured gain against its bound.

    Args:
        bound: the most the change could gain (``Bound.speedup``); ``None`` when unknown.
        measured_speedup: the measured gain (baseline median step over the new one; > 1 faster).
        noise: the measurement's relative uncertainty (0.05: +-5 %); a gain above the bound
            by no more than this is within noise.
        strict: ``Bound.strict``; a gain above a bound that is not strict is explained (the
            pipeline shared the CPU's cores with the step), not called wrong.

    Returns:
        ``"bound 1.9x, measured 1.7x (89 % of the bound)"``; for a gain above the bound
        beyond noise, a sentence saying the bound or the measurement is wrong.

    Raises:
        ValueError: for a measured speed-up <= 0, a bound < 1 or a negative noise.

    Example:
        >>> score_bound(1.9, 1.7)
        'bound 1.9x, measured 1.7x (89 % of the bound)'
        >>> score_bound(1.11, 0.82)
        'bound 1.11x, measured 1.2x slower: none of the gain'
        >>> score_bound(1.5, 2.0, noise=0.1)
        'measured 2.0x is above its bound 1.5x beyond noise (+-10 %): the bound or the measurement is wrong'
        >>> score_bound(1.5, 2.0, noise=0.1, strict=False)
        'measured 2.0x, above the input-wait bound 1.5x: on a CPU the pipeline shared the cores with the step, so removing its work sped the step too'
    """
    if not measured_speedup > 0:
        raise ValueError(f"measured_speedup={measured_speedup!r} is not allowed; a ratio > 0")
    if noise < 0:
        raise ValueError(f"noise={noise!r} is not allowed; a relative uncertainty >= 0")
    measured = _x(measured_speedup)
    if bound is None:
        return f"bound unknown, measured {measured}"
    if bound < 1:
        raise ValueError(f"bound={bound!r} is not allowed; a speed-up bound >= 1 or None")
    if measured_speedup > bound * (1 + noise) and not strict:
        return (f"measured {measured}, above the input-wait bound {_x(bound)}: on a CPU the pipeline shared "
                "the cores with the step, so removing its work sped the step too")
    if measured_speedup > bound * (1 + noise):
        return (f"measured {measured} is above its bound {_x(bound)} beyond noise (+-{noise * 100:.0f} %): "
                "the bound or the measurement is wrong")
    if math.isinf(bound):
        return f"no bound, measured {measured}"
    if measured_speedup < 1.0:          # a slowdown is no share of a gain
        return f"bound {_x(bound)}, measured {_x(1.0 / measured_speedup)} slower: none of the gain"
    return f"bound {_x(bound)}, measured {measured} ({100 * measured_speedup / bound:.0f} % of the bound)"


#: RunConfig knobs whose effect depends on the hardware, in the order ``expectations`` lists them:
#: the compute and distribution knobs that have a rule in ``tfwb.expect.RULES``.
HARDWARE_KNOBS: Tuple[str, ...] = tuple(n for n in _knobs.names("compute", "distribution", cls=RunConfig)
                                        if n in expect.RULES)


def expectations(cfg, hardware: MachineLike) -> Tuple[str, ...]:
    """What to expect from ``cfg``'s hardware-dependent knobs on this hardware, before running.

    One sentence per knob in ``HARDWARE_KNOBS`` that differs from its default, from
    ``tfwb.expect.expected_for`` (so the Workbench, the chapters and the tests share one
    rule), plus a warning when a TPU machine would run on its host CPU.

    Args:
        cfg: a RunConfig.
        hardware: ``tfwb.hardware.detect()`` output or a described machine
            (``tfwb.hardware.DESCRIBED``): keys ``gpus``, ``cpu_flags``, ``tpu``, ``cpu_count``.

    Returns:
        Short sentences, e.g. ``"mixed_precision='mixed_float16' on Tesla T4 (compute
        capability 7.5): faster than float32: float16 Tensor Cores ..."``.

    Example:
        >>> from tfwb.config import RunConfig
        >>> from tfwb.hardware import DESCRIBED
        >>> expectations(RunConfig(strategy="tpu"), DESCRIBED["colab-t4"])
        ("strategy='tpu' with no TPU here: the run fails before any work; pick 'default'.",)
    """
    defaults = type(cfg)(_check_workload=False)     # the defaults of cfg's own class (a subclass may add knobs)
    hardware = Machine.of(hardware)
    out = []
    if hardware.tpu and cfg.strategy == "default":
        out.append("strategy='default' on a TPU machine: the step runs on the host CPU, not the TPU; "
                   "pick strategy='tpu'.")
    for knob in HARDWARE_KNOBS:
        value = getattr(cfg, knob)
        if value == getattr(defaults, knob):
            continue
        if knob == "strategy" and value == "tpu" and not hardware.tpu:
            out.append("strategy='tpu' with no TPU here: the run fails before any work; pick 'default'.")
            continue
        e = expect.expected_for(hardware, knob, value, cfg)
        place = expect.where(hardware, value if knob == "strategy" else cfg.strategy)
        out.append(f"{knob}={value!r} on {place}: {e.text()}.")
    return tuple(out)
