"""What limits a run: the input-wait thresholds and the limit read from a measured result.

Both ``tfwb.expect`` (which asks whether a change can show on a run) and ``tfwb.analysis.diagnosis``
(which names what to try next) read a run through this module, so neither imports the
other for it. The thresholds are the TF profiler's own: input wait >= 5 % of the step
is moderately, >= 20 % highly input-bound; the wait counted is what lies above the
iterator's own floor (``input_fraction``), so staged batches never read input-bound.

What limits a run is its *limit* (``limit_of``: ``"input"``, ``"compute"``, ``"overhead"``);
"bound" in tfwb means only the Amdahl bound of a change (``tfwb.advice.bounds``). The 0.2
names ``bound_of`` / ``check_bound`` / ``BOUNDS`` still work, with a DeprecationWarning
(the functions) until 0.4.

Pure: reads the attributes of a ``RunResult`` (duck-typed); imports nothing from tfwb.
"""
from __future__ import annotations

import warnings
from typing import Any, Optional, Sequence

#: The TF profiler's thresholds on the share of step time spent waiting for input.
MODERATE_INPUT_FRACTION = 0.05
HIGH_INPUT_FRACTION = 0.20

#: The profiler's three input verdicts.
INPUT_HIGH, INPUT_MODERATE, NOT_INPUT = "highly input-bound", "moderately input-bound", "not input-bound"

#: What limits a run, as ``limit_of`` reads it from a measured run.
INPUT, COMPUTE, OVERHEAD = "input", "compute", "overhead"
LIMITS = (INPUT, COMPUTE, OVERHEAD)
#: The 0.2 name of ``LIMITS`` (until 0.4).
BOUNDS = LIMITS

#: A GPU busy (NVML duty cycle) less than this share of the time, with no input wait
#: to explain it, idles between small kernels: the step is launch/Python-overhead-bound.
OVERHEAD_GPU_BUSY_PCT = 50.0


def input_verdict(fraction: float) -> str:
    """The profiler's classification of an input-wait fraction (0..1).

    Example:
        >>> input_verdict(0.41), input_verdict(0.05), input_verdict(0.01)
        ('highly input-bound', 'moderately input-bound', 'not input-bound')
    """
    if fraction >= HIGH_INPUT_FRACTION:
        return INPUT_HIGH
    if fraction >= MODERATE_INPUT_FRACTION:
        return INPUT_MODERATE
    return NOT_INPUT


def input_fraction(times_s: Sequence[float], waits_s: Sequence[float],
                   floor_s: Optional[float] = None) -> Optional[float]:
    """The share of the step time spent waiting for input, above the iterator's own floor.

    With staged batches (``data_source="memory"``) a step's wait is ``next()`` on an
    iterator whose data is ready: Python and tf.data's fixed cost, tens of microseconds,
    which on a sub-millisecond GPU step can pass 5 % of it. That cost is no pipeline's
    fault, so only the wait above ``floor_s`` (the median ``next()`` on a second iterator
    over the same batches) counts.

    Args:
        times_s: step times.
        waits_s: each step's input wait (empty when not recorded).
        floor_s: the iterator's own time per ``next()``; ``None``: nothing is subtracted.

    Returns:
        The fraction (0..1), or ``None`` without steps or recorded waits.

    Example:
        >>> input_fraction([1.0, 1.0], [0.5, 0.1]), input_fraction([1.0, 1.0], [0.5, 0.1], floor_s=0.1)
        (0.3, 0.2)
    """
    total = sum(times_s)
    if total <= 0 or not waits_s:
        return None
    if not floor_s:
        return sum(waits_s) / total
    return sum(w - floor_s for w in waits_s if w > floor_s) / total


def check_limit(limit: Optional[str]) -> Optional[str]:
    """Return ``limit`` when it is one of ``LIMITS`` or None.

    Raises:
        ValueError: ``"limit=<value> is not allowed; one of ..."``.

    Example:
        >>> check_limit("input")
        'input'
    """
    if limit is not None and limit not in LIMITS:
        raise ValueError(f"limit={limit!r} is not allowed; one of {LIMITS} or None")
    return limit


def limit_of(result: Any) -> Optional[str]:
    """What limited a measured run: ``"input"``, ``"overhead"``, ``"compute"`` or None.

    ``"input"``: input wait >= ``HIGH_INPUT_FRACTION`` of step time (the TF profiler's
    "highly input-bound"). ``"overhead"``: no such wait, but the GPUs were busy (NVML) less
    than ``OVERHEAD_GPU_BUSY_PCT`` of the time: they idle between small kernels.
    ``"compute"``: otherwise.

    Args:
        result: a ``RunResult`` (or None).

    Returns:
        One of ``LIMITS``, or None for None, a failed run or a run with no steps.

    Example:
        >>> from tfwb.config import RunConfig
        >>> from tfwb.records import RunResult
        >>> limit_of(RunResult(config=RunConfig(), step_times_s=(1.0,) * 5, input_wait_s=(0.5,) * 5))
        'input'
    """
    if result is None or not getattr(result, "ok", False):
        return None
    frac = result.input_wait_fraction
    if frac is not None and frac >= HIGH_INPUT_FRACTION:
        return INPUT
    util = [u for u in result.utilization().get("gpu_util_pct") or () if u is not None]
    if util and max(util) < OVERHEAD_GPU_BUSY_PCT:
        return OVERHEAD
    return COMPUTE


def _deprecated(old: str, new: str) -> None:
    warnings.warn(f"tfwb.bottleneck.{old} is now tfwb.bottleneck.{new}: 'bound' names the Amdahl bound of "
                  "a change (tfwb.advice.Bound)", DeprecationWarning, stacklevel=3)


def bound_of(result: Any) -> Optional[str]:
    """The 0.2 name of ``limit_of``, with a DeprecationWarning (until 0.4)."""
    _deprecated("bound_of", "limit_of")
    return limit_of(result)


def check_bound(bound: Optional[str]) -> Optional[str]:
    """The 0.2 name of ``check_limit``, with a DeprecationWarning (until 0.4)."""
    _deprecated("check_bound", "check_limit")
    return check_limit(bound)
