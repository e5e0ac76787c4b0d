"""How far a run is from this machine's limit, as one typed record: ``Limits``.

Plain data with units in field names, no TensorFlow: the model's FLOPs per step, this
machine's measured peak per dtype and where it comes from, the datasheet figure, the
per-call overhead and MFU. ``tfwb.tf.runner.step_limits`` measures one per run, after its steps;
``tfwb.records.RunResult`` holds it as ``result.limits``, reads each of its fields as an
attribute of its own (``result.mfu``, ``result.peak_flops_per_s``) and writes them as
top-level keys of its JSON (``LIMIT_FIELDS``), as before the sub-record existed.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field, fields
from typing import Any, Optional, Tuple

#: The numbers a ``Limits`` holds: each a finite number >= 0, or None.
NUMBERS = ("model_flops_per_step", "peak_flops_per_s", "datasheet_flops_per_s", "call_overhead_s", "mfu",
           "elementwise_flops_per_step")


@dataclass(frozen=True)
class Limits:
    """What one run measured of this machine's limit. Immutable; every field optional.

    Args:
        model_flops_per_step: the FLOPs of the model's matmuls and convolutions per training
            step, counted from its layers (``tfwb.tf.runner.flops.count_flops``,
            ``FlopCount.train_step(batch, "matmul")``): 3 x forward FLOPs per example x global
            batch (forward plus two backward matmuls, the convention behind "model FLOPs
            utilization"); what the measured peak (a matmul benchmark) measures, so MFU compares
            like with like. ``None`` when some layer could not be counted (``flops_uncounted``
            names them), the run failed before its model existed, or the record predates it
            (records made before ``elementwise_flops_per_step`` counted both parts here).
        flops_uncounted: ``"name (ClassName)"`` of every layer the count could not read.
        peak_flops_per_s: this machine's measured peak FLOP/s in the run's compute dtype
            (``RunResult.compute_dtype``) on the devices the step ran on (a matmul benchmark,
            ``tfwb.tf.runner.matmul_peak.measure_peak``, cached per machine; times the replicas
            when they are separate accelerators); ``None`` when not measured (``peak_reason``).
        peak_device: what the peak was measured on (``"CPU (2 cores)"``, ``"GPU 0: ..."``).
        peak_reason: why there is no measured peak (``""`` when there is one).
        datasheet_flops_per_s / datasheet_source: the published (or, for a CPU, the
            cores x clock x FLOPs-per-cycle) peak of that dtype, and where it comes from.
        peaks: per dtype (``float32``, ``bfloat16``, ``float16``) ``{"measured": FLOP/s or
            None, "datasheet": FLOP/s or None, "source": str, "loaded": bool or None,
            "spread": dict or None}`` (the last two as ``peak_loaded`` and ``peak_spread``):
            what the bound of a mixed precision suggestion reads (``tfwb.analysis.diagnosis``).
        call_overhead_s: the measured cost of one call of a ``tf.function`` that does no work
            (dispatch alone): a floor of the per-call overhead ``steps_per_execution``
            amortises; ``None`` when not measured.
        mfu: model FLOPs utilization: ``achieved_flops_per_s`` over ``peak_flops_per_s`` (a
            fraction); ``None`` whenever either is unknown (never a guess). ``RunResult``
            derives it when not given (it knows the step time).
        elementwise_flops_per_step: the step's elementwise FLOPs (bias adds, activations,
            normalisation, pooling, merges, softmax), same convention, kept out of MFU (they
            run far below a matmul peak); ``None`` when not counted or not recorded.
        peak_spread: ``{"low", "high", "count", "measured"}``: the lowest and highest (FLOP/s,
            like ``peak_flops_per_s``) of the ``count`` figures the peak is the highest of (the
            quiet ones; the loaded ones when none was quiet), and how many figures the cache
            kept (``measured``, loaded ones included); ``None`` when not measured or not recorded.
        peak_loaded: the peak was measured while other programs took at least 10 % of the cores
            (``matmul_peak.BUSY_SHARE``): it likely reads low, so MFU reads high; it is measured
            again by the next run. ``None`` when unknown.

    Raises:
        ValueError: for a number in ``NUMBERS`` that is not a finite number >= 0 or None.

    Example:
        >>> Limits(model_flops_per_step=2e9, peak_flops_per_s=1e11).peak_device
        ''
        >>> Limits(mfu=-0.1)
        Traceback (most recent call last):
        ValueError: mfu=-0.1 is not allowed; a finite number >= 0 or None
    """

    model_flops_per_step: Optional[float] = None
    flops_uncounted: Tuple[str, ...] = ()
    peak_flops_per_s: Optional[float] = None
    peak_device: str = ""
    peak_reason: str = ""
    datasheet_flops_per_s: Optional[float] = None
    datasheet_source: str = ""
    peaks: dict = field(default_factory=dict)
    call_overhead_s: Optional[float] = None
    mfu: Optional[float] = None
    elementwise_flops_per_step: Optional[float] = None
    peak_spread: Optional[dict] = None
    peak_loaded: Optional[bool] = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "flops_uncounted", tuple(str(n) for n in self.flops_uncounted))
        # Kept in their JSON form (NaN as None), so a record equals its own round trip.
        object.__setattr__(self, "peaks", json.loads(json.dumps(finite(self.peaks), default=str)))
        if self.peak_spread is not None:
            object.__setattr__(self, "peak_spread", json.loads(json.dumps(finite(self.peak_spread), default=str)))
        for name in NUMBERS:
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))
                                      or not math.isfinite(value) or value < 0):
                raise ValueError(f"{name}={value!r} is not allowed; a finite number >= 0 or None")

    def to_dict(self) -> dict:
        """``{field: value}``, JSON-ready (tuples as lists), in field order: ``RunResult``'s top-level keys."""
        return {f.name: list(v) if isinstance(v, tuple) else v
                for f in fields(self) for v in [getattr(self, f.name)]}


#: The fields of ``Limits``: the limit keys of a RunResult's JSON, and its attributes that read the record.
LIMIT_FIELDS = tuple(f.name for f in fields(Limits))


def finite(obj: Any) -> Any:
    """``obj`` with every NaN or infinity (in dicts, lists and tuples too) as ``None``: what JSON can hold.

    Example:
        >>> finite({"a": [1.0, float("nan")], "b": float("inf")})
        {'a': [1.0, None], 'b': None}
    """
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {k: finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [finite(v) for v in obj]
    return obj
