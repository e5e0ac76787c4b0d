"""The Amdahl bound of a change: the most a knob can gain on a measured run, and why.

A ``Bound`` is what a knob's entry (``tfwb.advice.entries.ADVICE``, its ``bound``) gives for a
measured run: Amdahl's law on the measured breakdown of the step ("bound" means this, and
only this, in tfwb; what limits a run is its limit, ``tfwb.bottleneck.limit_of``). A knob can
only shrink the part of the step it acts on, so it can gain at most
``1 / (1 - part + part / r)`` (``amdahl``) where ``r`` is how much faster that part can get:
  - input knobs (``input_wait_bound``: ``data_source='files'``, ``prefetch``, ``parallel_map``,
    ``interleave``, ``cache``): the part is the input wait (``input_wait_fraction``), removable
    at best entirely: ``1 / (1 - wait)``. On a CPU the pipeline shares cores with the step,
    so removing its work can also speed the step itself: the bound is then not strict.
  - ``mixed_precision``: the part is the compute share (``1 - wait``), sped up at most by the
    peak ratio of the policy's compute dtype over float32 (this machine's measured peaks when
    the run recorded them, else the datasheet's).
  - ``steps_per_execution=k``: it removes per-call work (Python dispatch, the host's share of
    each step, a sync), never FLOPs: the step cannot get shorter than its model FLOPs at this
    machine's measured peak, nor a pipeline's wait for its batches (fetched inside the graph, produced
    as slowly): ``1 / (wait + MFU)``; with batches staged in memory the wait is Python's fetch call,
    per-call work it removes: ``1 / MFU``. Unknown without an MFU. The measured cost of an empty
    call (``call_overhead_s``) is only a floor of that work: in chapter 02 a bound built on it
    alone (1.2x) was beaten by a measured 2.35x, so it is quoted, not used.
  - ``jit_compile``: XLA fuses operations (fewer launches, less memory traffic), it does not
    remove FLOPs: the step cannot get shorter than its input wait plus its model FLOPs at
    this machine's measured peak: ``1 / (wait + MFU)``; unknown without an MFU.

The dtype a ``mixed_precision`` policy computes in is ``compute_dtype`` (``COMPUTE_DTYPES``),
for the run record, the runner's peak benchmark and the bound alike.

Pure: no TensorFlow, no UI library.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Optional, Tuple

from tfwb.advice.machine import machine_of
from tfwb.config import compute_dtype


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
            from the step and removing its work can speed the step itself
            (``tfwb.analysis.diagnosis.score_bound`` then explains a gain above the bound instead of
            calling it wrong).
    """

    knob: str
    value: object
    speedup: Optional[float]
    text: str
    strict: bool = True


#: ``bound(result, knob, value) -> Bound``: the most ``knob=value`` can gain on a measured run.
BoundRule = Callable[[Any, str, Any], Bound]


# -- text ------------------------------------------------------------------------------------
def speedup_text(speedup: float) -> str:
    """A speed-up as text: ``1.04x``, ``1.9x``, ``23x``, ``no limit``.

    Example:
        >>> speedup_text(1.04), speedup_text(1.87), speedup_text(23.2)
        ('1.04x', '1.9x', '23x')
    """
    if math.isinf(speedup):
        return "no limit"
    return f"{speedup:.2f}x" if speedup < 1.2 else f"{speedup:.1f}x" if speedup < 10 else f"{speedup:.0f}x"


def _pct(fraction: float) -> str:
    v = fraction * 100
    return f"{v:.0f} %" if v >= 10 or v == 0 else f"{v:.2g} %"


def _label(knob: str, value: Any) -> str:
    """``prefetch`` for a knob turned on, ``data_source='files'`` for any other value."""
    return knob if value is True else f"{knob}={value!r}"


# -- bounds ----------------------------------------------------------------------------------
def amdahl(part: float, factor: float) -> float:
    """The most a step gains when a ``part`` (0..1) of it gets ``factor`` times faster (``inf``: removed).

    Raises:
        ValueError: for a part outside 0..1 or a factor <= 0.

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


def _on_accelerator(result: Any) -> bool:
    """True when the run's step ran on a GPU or a TPU (read from its fingerprint and strategy)."""
    hw = machine_of(result)
    strategy = getattr(getattr(result, "config", None), "strategy", None)
    return bool(hw.gpus) or (strategy == "tpu" and bool(hw.tpu))


def _wait(result: Any) -> Optional[float]:
    """The run's input-wait fraction, clamped to 0..1 (None: not measured)."""
    wait = result.input_wait_fraction
    return min(max(wait, 0.0), 1.0) if wait is not None else None


def input_wait_bound(result: Any, knob: str, value: Any) -> Bound:
    """An input knob's bound: it can remove the input wait at most, ``1 / (1 - wait)``.

    Example:
        >>> from types import SimpleNamespace
        >>> r = SimpleNamespace(input_wait_fraction=0.47, fingerprint={"gpus": [{"name": "G"}]})
        >>> input_wait_bound(r, "prefetch", True).text
        'prefetch can gain at most 1.9x: the step waits for input 47 % of the time'
    """
    wait, name = _wait(result), _label(knob, value)
    if wait is None:
        return Bound(knob, value, None, f"{name}: bound unknown: the input wait was not measured")
    b = amdahl(wait, math.inf)
    text = f"{name} can gain at most {speedup_text(b)}: the step waits for input {_pct(wait)} of the time"
    if not _on_accelerator(result):     # "at most" is then the input wait's share alone: say what else it can gain
        return Bound(knob, value, b, f"{name}: removing the input wait ({_pct(wait)} of the step) gains at most "
                                     f"{speedup_text(b)}; on a CPU the pipeline also takes cores from the step, so "
                                     "the knob can gain more than that here", strict=False)
    return Bound(knob, value, b, text)


def _dtype_ratio(result: Any, dtype: str) -> Tuple[Optional[float], str]:
    """(peak of ``dtype`` over float32's on this run's machine, which peaks it compares)."""
    peaks = getattr(result, "peaks", None) or {}
    lo, hi = peaks.get("float32") or {}, peaks.get(dtype) or {}
    if lo.get("measured") and hi.get("measured"):
        return hi["measured"] / lo["measured"], "measured"
    if lo.get("datasheet") and hi.get("datasheet"):
        return hi["datasheet"] / lo["datasheet"], "datasheet"
    return None, ""


def precision_bound(result: Any, knob: str, value: Any) -> Bound:
    """``mixed_precision``'s bound: the compute share, sped up by the policy's peak over float32's."""
    compute, dtype, name = 1.0 - (_wait(result) or 0.0), compute_dtype(value), str(value)
    ratio, kind = _dtype_ratio(result, dtype)
    if ratio is None:
        return Bound(knob, value, None, f"{name}: bound unknown: this machine's {dtype} and float32 peaks "
                                        "were not measured")
    b = amdahl(compute, max(ratio, 1.0))
    peak = "this machine's" if kind == "measured" else "the datasheet"
    return Bound(knob, value, b, f"{name} can gain at most {speedup_text(b)}: compute is {_pct(compute)} of the "
                                 f"step and {peak} {dtype} peak is {ratio:.2g}x its float32 peak")


def steps_bound(result: Any, knob: str, value: Any) -> Bound:
    """``steps_per_execution``'s bound: per-call work removed, never FLOPs nor a pipeline's input wait:
    ``1 / (wait + MFU)``."""
    name = _label(knob, value)
    spe = max(getattr(result, "steps_per_call", 1), 1)
    if value <= spe:
        return Bound(knob, value, 1.0, f"{name} can gain nothing: the run already ran {spe} steps a call")
    mfu = getattr(result, "mfu", None)
    if not mfu or mfu > 1.0:
        return Bound(knob, value, None, f"{name}: bound unknown: a call's overhead is more than an empty "
                                        "call's dispatch, and this run's FLOPs or peak were not counted")
    # A pipeline's batches are still produced, inside the graph, as slowly: its wait stays. Staged batches
    # ("memory") wait only for Python's fetch call, per-call work that steps per call does remove (chapter 02).
    staged = getattr(getattr(result, "config", None), "data_source", None) == "memory"
    wait = 0.0 if staged else (_wait(result) or 0.0)
    b = 1.0 / min(wait + mfu, 1.0)
    overhead = getattr(result, "call_overhead_s", None)
    floor = f"; an empty call alone costs {overhead * 1e6:.0f} us here" if overhead else ""
    waits = f", and it waits for input {_pct(wait)} of the time, which it does not remove" if wait else ""
    return Bound(knob, value, b, f"{name} can gain at most {speedup_text(b)}: it removes per-call work (dispatch, "
                                 "the host's share of each step), not FLOPs, and the step's FLOPs at this "
                                 f"machine's measured {result.compute_dtype} peak take {_pct(mfu)} of it{waits}"
                                 f"{floor}")


def xla_bound(result: Any, knob: str, value: Any) -> Bound:
    """``jit_compile``'s bound: memory traffic and launches removed, never FLOPs: ``1 / (wait + MFU)``."""
    name = "XLA (jit_compile=True)"
    mfu = getattr(result, "mfu", None)
    if not mfu:
        return Bound(knob, value, None, f"{name}: bound unknown: XLA removes memory traffic and launches, "
                                        "not FLOPs, and this run's FLOPs or peak were not counted")
    b = 1.0 / min((_wait(result) or 0.0) + mfu, 1.0)
    return Bound(knob, value, b, f"{name} can gain at most {speedup_text(b)}: fusion removes memory traffic and "
                                 f"launches, not FLOPs; the step's FLOPs at this machine's measured "
                                 f"{result.compute_dtype} peak take {_pct(mfu)} of it")
