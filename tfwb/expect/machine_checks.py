"""Checks whose expectation is read from the machine alone, no knob turned against a baseline.

- ``default_device(hw)``: the device that runs most of a step's ops with no strategy
  (an ``Equal``, checked against ``tfwb.tf.lab.placement``);
- ``precision_memory(hw, policy)``: what a precision policy should do to memory, as a ratio to
  float32 (a ``Threshold``, or an ``Unjudged`` where nothing is expected).

Where the step runs comes from ``tfwb.advice.machine``. Pure: no TensorFlow.
"""
from __future__ import annotations

from typing import Any, Union

from tfwb.advice.machine import target, where
from tfwb.expect.checks import Equal, Threshold, Unjudged, at_least, at_most, equal
from tfwb.hardware import Machine, MachineLike


def _config(baseline: Any) -> Any:
    return getattr(baseline, "config", baseline)


def default_device(hw: MachineLike) -> Equal:
    """Where a step with no strategy and no ``tf.device`` runs most of its ops, on this hardware.

    TensorFlow places an op on ``GPU:0`` whenever it sees a GPU and the op has a GPU
    kernel, with or without a distribution strategy; otherwise on ``CPU:0`` (a TPU VM's
    TPU takes ``strategy="tpu"``). Check it against
    ``tfwb.tf.lab.placement.placement(step).main_device()``.

    Example:
        >>> print(default_device({"gpus": [{"name": "Tesla T4"}]}))   # doctest: +NORMALIZE_WHITESPACE
        Expecting: the device that runs most of a step's ops, with no strategy and no tf.device: GPU:0
        (TF picks GPU:0 for every op with a GPU kernel whenever it sees a GPU; no strategy needed).
    """
    claim = "the device that runs most of a step's ops, with no strategy and no tf.device"
    hw = Machine.of(hw)
    if hw.gpus:
        return equal(claim, "GPU:0", why="TF picks GPU:0 for every op with a GPU kernel whenever it sees a "
                     "GPU; no strategy needed")
    why = "no GPU here" + ("; the TPU runs a step only under strategy='tpu'" if hw.tpu else "")
    return equal(claim, "CPU:0", why=why)


#: What ``precision_memory`` compares: the run's peak memory, or the largest batch that trains.
MEMORY_MEASURES = ("peak", "batch")


def precision_memory(hardware: MachineLike, value: str, baseline: Any = None, *,
                     measure: str = "peak") -> Union[Threshold, Unjudged]:
    """What a precision policy should do to memory on this hardware, as a ratio to float32.

    Args:
        hardware (mapping): ``tfwb.hardware.detect()`` output or a described machine.
        value (str): ``"mixed_float16"`` or ``"mixed_bfloat16"``.
        baseline (RunResult | RunConfig | None, default None): its ``strategy`` decides
            where the step runs (``target``).
        measure (str, default "peak"): ``"peak"``: the run's peak memory
            (``run.extras["memory"]``: TensorFlow's allocator on a GPU or TPU, the
            process's RSS on a CPU), the policy's over float32's; ``"batch"``: the largest
            batch that trains (``tfwb.tf.lab.precision.largest_batch``), the policy's over
            float32's.

    Returns:
        A ``Threshold`` on a GPU (peak at most 1x, batch at least 1x) or TPU (peak), else
        an ``Unjudged`` that says why nothing is expected; either has ``.check(ratio)``.

    Raises:
        ValueError: for a value that is not a mixed policy, or an unknown measure.

    Example:
        >>> from tfwb.hardware import DESCRIBED
        >>> print(precision_memory(DESCRIBED["colab-t4"], "mixed_float16").expected)
        at most 1x
        >>> precision_memory(DESCRIBED["binder-2core-avx2"], "mixed_float16").expected
        'no fixed expectation'
    """
    if value not in ("mixed_float16", "mixed_bfloat16"):
        raise ValueError(f"mixed_precision={value!r} is not allowed here; 'mixed_float16' or "
                         "'mixed_bfloat16' (float32, 'off', is what it is compared with)")
    if measure not in MEMORY_MEASURES:
        raise ValueError(f"measure={measure!r} is not allowed; one of {MEMORY_MEASURES}")
    strategy = getattr(_config(baseline), "strategy", None)
    kind = target(hardware, strategy)
    peak = measure == "peak"
    what = "peak memory" if peak else "largest batch"
    claim = f"{value}'s {what} over float32's, on {where(hardware, strategy)}"
    if kind == "none" or (kind == "tpu" and value == "mixed_float16"):
        return Unjudged(claim, "the run fails before any work here", "x")
    if kind == "cpu":
        why = ("on a CPU tfwb reads the whole process's peak RSS: TensorFlow's runtime, the data and what "
               "earlier runs left behind dominate it, so a policy's smaller activations need not show"
               if peak else
               "a CPU has no device memory to run out of (a batch too large swaps or gets the process "
               "killed), so tfwb searches batches on a GPU only")
        return Unjudged(claim, why, "x")
    if not peak and kind == "tpu":
        return Unjudged(claim, "tfwb searches batches on a GPU only", "x")
    if peak:
        return at_most(claim, 1.0, "x", why="activations are stored in 16 bits while weights and optimizer "
                       "state stay float32: the saving grows with batch and model size, and is small when "
                       "weights and optimizer state dominate")
    return at_least(claim, 1.0, "x", why="16-bit activations leave room for more examples: up to about twice "
                    "as many where activations dominate the memory")
