"""The A/B check of turning knobs: ``change(hardware, baseline, **change)``.

It runs each knob's rule (``tfwb.advice.expected.expected_for``), combines them
(``tfwb.advice.directions.combine``) and returns an ``AB`` (``tfwb.expect.checks``) that
carries the Amdahl bound of a one-knob change (``tfwb.advice.bounds``), so that a gain above
the bound is explained. Pure: no TensorFlow.
"""
from __future__ import annotations

from typing import Any, Mapping

from tfwb.advice.directions import combine
from tfwb.advice.entries import ADVICE
from tfwb.advice.expected import COMPUTE_KNOBS, expected_for
from tfwb.advice.machine import where
from tfwb.expect.checks import AB
from tfwb.hardware import MachineLike


def _config(baseline: Any) -> Any:
    return getattr(baseline, "config", baseline)


def change(hardware: MachineLike, baseline: Any = None, **change: Any) -> AB:
    """The A/B expectation for changing knobs on this hardware (``expected_for``, as an ``AB``).

    Args:
        hardware (mapping): ``tfwb.hardware.detect()`` output or a described machine.
        baseline (RunResult | RunConfig | None, default None): what the change is made
            to; a measured RunResult lets the expectation use what limited it.
        **change: the knobs and their new values, e.g. ``mixed_precision="mixed_float16"``.
            Several knobs at once must agree in direction (input knobs usually do).

    Raises:
        ValueError: no change, an unknown knob, or changes that pull apart here.

    Example:
        >>> from tfwb.hardware import DESCRIBED
        >>> from tfwb.config import RunConfig
        >>> e = change(DESCRIBED["binder-2core-avx2"], RunConfig(workload="images"), mixed_precision="mixed_float16")
        >>> e.expected, e.claim
        ('slower', "mixed_precision='mixed_float16' on this CPU (2 cores, AVX2)")
        >>> print(e.check([1.0] * 9, [1.6] * 9))   # doctest: +NORMALIZE_WHITESPACE
        Expected: mixed_precision='mixed_float16' on this CPU (2 cores, AVX2) (slower).
        Measured: 1.60x slower. Result: agreed.
    """
    if not change:
        raise ValueError("name at least one knob to change, e.g. change(hw, mixed_precision='mixed_float16')")
    parts = [expected_for(hardware, k, v, baseline) for k, v in change.items()]
    e = combine(parts)
    strategy = change.get("strategy", getattr(_config(baseline), "strategy", None))
    label = ", ".join(f"{k}={v!r}" for k, v in change.items())
    return AB(f"{label} on {where(hardware, strategy)}", e.direction, e.why,
              compute=any(k in COMPUTE_KNOBS for k in change), bound=_bound(baseline, change))


def _bound(baseline: Any, change: Mapping[str, Any]) -> Any:
    """The Amdahl bound of a one-knob change to a measured run (its entry's ``bound``), else None."""
    if len(change) != 1 or not getattr(baseline, "step_times_s", None):
        return None
    (knob, value), = change.items()
    entry = ADVICE.get(knob)
    if entry is None or entry.bound is None:
        return None
    try:
        b = entry.bound(baseline, knob, value)
    except (TypeError, ValueError, ZeroDivisionError):
        return None
    return b if b.speedup is not None else None
