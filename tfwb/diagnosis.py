"""Verdicts about a run: what limits it, what to try next, and how much that can gain at most.

Pure: reads a RunResult (and optionally a hardware description) and returns
plain data. The input verdicts and their thresholds are the TF profiler's own
(``tfwb.bottleneck``: input wait >= 5 % of step time is moderately, >= 20 % highly
input-bound); which model-side knob to try comes from ``tfwb.expect``'s rules.

Every suggestion carries a bound (``Bound``, in ``Diagnosis.bounds``, parallel to
``Diagnosis.suggestions``): Amdahl's law on the measured breakdown of the step. A
knob can only shrink the part of the step it acts on, so it can gain at most
``1 / (1 - part + part / r)`` where ``r`` is how much faster that part can get:

- input knobs (``data_source='files'``, ``prefetch``, ``parallel_map``, ``interleave``,
  ``cache``): the part is the input wait (``input_wait_fraction``), removable at best
  entirely: ``1 / (1 - wait)``. On a CPU the pipeline shares cores with the step, so
  removing its work can also speed the step itself: a gain above this bound there
  points at that (``score_bound`` says so).
- ``mixed_precision``: the part is the compute share (``1 - wait``), sped up at most by
  the peak ratio of the target dtype over float32 (this machine's measured peaks when
  the run recorded them, else the datasheet's).
- ``steps_per_execution=k``: it removes per-call work (Python dispatch, the host's share
  of each step, a sync), never FLOPs: the step cannot get shorter than its model FLOPs at
  this machine's measured peak, ``1 / MFU``; unknown without an MFU. The measured cost of
  an empty call (``call_overhead_s``) is only a floor of that work: in chapter 02 a bound
  built on it alone (1.2x) was beaten by a measured 2.35x, so it is quoted, not used.
- ``jit_compile``: XLA fuses operations (fewer launches, less memory traffic), it does
  not remove FLOPs: the step cannot get shorter than its input wait plus its model
  FLOPs at this machine's measured peak: ``1 / (wait + MFU)``; unknown without an MFU.

``score_bound`` compares a bound with the gain a run measured.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional, Tuple

from tfwb import expect
from tfwb import knobs as _knobs
from tfwb.bottleneck import (HIGH_INPUT_FRACTION, INPUT_HIGH, INPUT_MODERATE, MODERATE_INPUT_FRACTION,  # noqa: F401 - re-exported
                         NOT_INPUT, input_verdict)
from tfwb.config import RunConfig
from tfwb.hardware import Machine, MachineLike
from tfwb.workloads import get_workload

FAILED, NO_DATA, NO_INPUT_DATA = "run failed", "no measured steps", "input wait not measured"


#: Knobs that act on the input pipeline: bounded by the input wait.
INPUT_BOUND_KNOBS = ("data_source", "prefetch", "parallel_map", "interleave", "cache")


@dataclass(frozen=True)
class Bound:
    """The most a suggestion can gain: ``speedup`` times faster at best, and why.

    Attributes:
        knob, value: the suggestion it bounds (``RunConfig`` field and value).
        speedup: the bound (>= 1), or ``None`` when it cannot be computed from this run.
        text: the sentence, e.g. ``"prefetch can gain at most 1.9x: the step waits for
            input 47 % of the time"``.
        strict: False where the bound assumes the rest of the step stays as it is but need not:
            an input knob on a run whose step runs on the CPU, where the pipeline takes cores
            from the step and removing its work can speed the step itself (``score_bound``
            then explains a gain above the bound instead of calling it wrong).
    """

    knob: str
    value: object
    speedup: Optional[float]
    text: str
    strict: bool = True


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


def _hardware_of(result) -> Machine:
    """What a result's fingerprint says about its machine."""
    fp = getattr(result, "fingerprint", None) or {}
    return Machine.of({"gpus": list(fp.get("gpus") or []), "cpu_count": fp.get("cpu_count"),
                       "cpu_flags": tuple(fp.get("cpu_flags") or ()),
                       "tpu": any("TPU" in str(d) for d in fp.get("logical_devices") or ())})


def _on_accelerator(result) -> bool:
    """True when the run's step ran on a GPU or a TPU (read from its fingerprint and strategy)."""
    hw = _hardware_of(result)
    strategy = getattr(getattr(result, "config", None), "strategy", None)
    return bool(hw.gpus) or (strategy == "tpu" and bool(hw.tpu))


def _input_suggestions(cfg, hardware: Optional[MachineLike] = None) -> tuple:
    if cfg.data_source == "memory":
        return ()          # staged batches: no pipeline knob applies
    try:
        applies = get_workload(cfg.workload).applies
    except ValueError:     # a saved result whose workload is not registered here
        def applies(knob):
            return False
    cores = Machine.of(hardware).cpu_count
    out = []
    interleave = applies("interleave") and not cfg.interleave
    # Files behind a read latency: interleave hides the latency (several reads at once);
    # prefetch only overlaps the (still serial) reads with the step, so interleave first.
    files_first = interleave and cfg.data_source == "files" and getattr(cfg, "storage_latency_ms", None) != 0
    if cfg.data_source == "generator":
        out.append(("data_source", "files", "read the files with tf.data instead of a Python generator"))
    if files_first:
        out.append(("interleave", True, "read several shards at once: it hides storage latency, "
                                        "which prefetch only overlaps"))
    if not cfg.prefetch:
        out.append(("prefetch", True, "overlap input with the step"))
    if applies("parallel_map") and not cfg.parallel_map and cores != 1:
        where = f"the {cores} CPU cores" if cores else "several cores"
        out.append(("parallel_map", True, f"decode and augment on {where}"))
    if interleave and not files_first:
        out.append(("interleave", True, "read several shards at once (hides storage latency)"))
    if not cfg.cache:
        out.append(("cache", True, "decode once, reuse every epoch"))
    return tuple(out)


def _compute_suggestions(result, hardware: Machine) -> tuple:
    """Model-side knobs expected to be faster on this hardware for this run (``tfwb.expect``)."""
    cfg = result.config
    candidates = []
    if cfg.mixed_precision == "off":
        cc = expect.best_compute_capability(hardware)
        policy = "mixed_bfloat16" if hardware.tpu or (cc and cc >= (8, 0)) else "mixed_float16"
        candidates.append(("mixed_precision", policy))
    if not cfg.jit_compile:
        candidates.append(("jit_compile", True))
    if cfg.steps_per_execution == 1:
        candidates.append(("steps_per_execution", 8))
    out = []
    for knob, value in candidates:
        e = expect.expected_for(hardware, knob, value, result)
        if e.direction == expect.FASTER:
            out.append((knob, value, e.why))
    return tuple(out)


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
        hw = _hardware_of(result) if hardware is None else Machine.of(hardware)
        sugg = _compute_suggestions(result, hw)
        tip = f": try {sugg[0][0]}={sugg[0][1]!r}" if sugg else ""
        return Diagnosis(verdict, None, f"{text}{tip}", sugg,
                         tuple(bound(result, knob, value) for knob, value, _ in sugg))
    verdict = input_verdict(frac)
    hw = _hardware_of(result) if hardware is None else Machine.of(hardware)
    if verdict == NOT_INPUT:
        # Which model-side knob helps depends on the hardware: ask tfwb.expect.
        sugg = _compute_suggestions(result, hw)
    else:
        sugg = _input_suggestions(result.config, hw)
    tip = f": try {sugg[0][0]}={sugg[0][1]!r}" if sugg else ""
    return Diagnosis(verdict, frac, f"{verdict} (input wait {frac:.0%}){tip}", sugg,
                     tuple(bound(result, knob, value) for knob, value, _ in sugg))


# -- bounds ----------------------------------------------------------------------------------
def amdahl(part: float, factor: float) -> float:
    """The most a step gains when a ``part`` (0..1) of it gets ``factor`` times faster (``inf``: removed).

    Example:
        >>> round(amdahl(0.47, math.inf), 2), amdahl(0.5, 2.0)
        (1.89, 1.3333333333333333)
    """
    if not 0 <= part <= 1:
        raise ValueError(f"part={part!r} is not allowed; a fraction of the step, 0..1")
    if factor <= 0:
        raise ValueError(f"factor={factor!r} is not allowed; a speed-up factor > 0")
    rest = 1.0 - part + (0.0 if math.isinf(factor) else part / factor)
    return math.inf if rest <= 0 else 1.0 / rest


def _x(speedup: float) -> str:
    """A speed-up as text: ``1.04x``, ``1.9x``, ``23x``."""
    if math.isinf(speedup):
        return "no limit"
    return f"{speedup:.2f}x" if speedup < 1.2 else f"{speedup:.1f}x" if speedup < 10 else f"{speedup:.0f}x"


def _pct(fraction: float) -> str:
    v = fraction * 100
    return f"{v:.0f} %" if v >= 10 or v == 0 else f"{v:.2g} %"


def _dtype_ratio(result, dtype: str) -> Tuple[Optional[float], str]:
    """(peak of ``dtype`` over float32's on this run's machine, which peaks it compares)."""
    peaks = getattr(result, "peaks", None) or {}
    lo, hi = peaks.get("float32") or {}, peaks.get(dtype) or {}
    if lo.get("measured") and hi.get("measured"):
        return hi["measured"] / lo["measured"], "measured"
    if lo.get("datasheet") and hi.get("datasheet"):
        return hi["datasheet"] / lo["datasheet"], "datasheet"
    return None, ""


def bound(result, knob: str, value: object) -> Bound:
    """How much setting ``knob=value`` can gain at most on ``result``'s run (Amdahl's law).

    See the module docstring for the part of the step each knob acts on.

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
    wait = result.input_wait_fraction
    wait = min(max(wait, 0.0), 1.0) if wait is not None else None
    name = {"data_source": f"data_source={value!r}", "mixed_precision": str(value),
            "steps_per_execution": f"steps_per_execution={value!r}", "jit_compile": "XLA (jit_compile=True)"
            }.get(knob, knob)
    if knob in INPUT_BOUND_KNOBS:
        if wait is None:
            return Bound(knob, value, None, f"{name}: bound unknown: the input wait was not measured")
        b = amdahl(wait, math.inf)
        text = f"{name} can gain at most {_x(b)}: the step waits for input {_pct(wait)} of the time"
        if not _on_accelerator(result):
            return Bound(knob, value, b, text + " (on a CPU the pipeline also takes cores from the step, "
                                                "so a larger gain is possible here)", strict=False)
        return Bound(knob, value, b, text)
    compute = 1.0 - (wait or 0.0)
    if knob == "mixed_precision":
        dtype = "bfloat16" if "bfloat16" in str(value) else "float16"
        ratio, kind = _dtype_ratio(result, dtype)
        if ratio is None:
            return Bound(knob, value, None, f"{name}: bound unknown: this machine's {dtype} and float32 peaks "
                                            "were not measured")
        b = amdahl(compute, max(ratio, 1.0))
        peak = "this machine's" if kind == "measured" else "the datasheet"
        return Bound(knob, value, b, f"{name} can gain at most {_x(b)}: compute is {_pct(compute)} of the step "
                                     f"and {peak} {dtype} peak is {ratio:.2g}x its float32 peak")
    if knob == "steps_per_execution":
        spe = max(getattr(result, "steps_per_call", 1), 1)
        if value <= spe:
            return Bound(knob, value, 1.0, f"{name} can gain nothing: the run already ran {spe} steps a call")
        mfu = getattr(result, "mfu", None)
        if not mfu or mfu > 1.0:
            return Bound(knob, value, None, f"{name}: bound unknown: a call's overhead is more than an empty "
                                            "call's dispatch, and this run's FLOPs or peak were not counted")
        b = 1.0 / mfu
        overhead = getattr(result, "call_overhead_s", None)
        floor = f"; an empty call alone costs {overhead * 1e6:.0f} us here" if overhead else ""
        return Bound(knob, value, b, f"{name} can gain at most {_x(b)}: it removes per-call work (dispatch, the "
                                     "host's share of each step), not FLOPs, and the step's FLOPs at this "
                                     f"machine's measured {result.compute_dtype} peak take {_pct(mfu)} of it{floor}")
    if knob == "jit_compile":
        mfu = getattr(result, "mfu", None)
        if not mfu:
            return Bound(knob, value, None, f"{name}: bound unknown: XLA removes memory traffic and launches, "
                                            "not FLOPs, and this run's FLOPs or peak were not counted")
        floor = min((wait or 0.0) + mfu, 1.0)
        b = 1.0 / floor
        return Bound(knob, value, b, f"{name} can gain at most {_x(b)}: fusion removes memory traffic and "
                                     f"launches, not FLOPs; the step's FLOPs at this machine's measured "
                                     f"{result.compute_dtype} peak take {_pct(mfu)} of it")
    return Bound(knob, value, None, f"{name}: bound unknown: no rule bounds this knob")


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
