"""What changing one knob should do on a machine: ``expected_for``, which runs the knob's rule.

``expected_for(hardware, knob, value, baseline)`` finds the knob's entry in
``tfwb.advice.entries.ADVICE``, reads what limits the baseline (``tfwb.bottleneck.limit_of``
on a measured run) and runs the entry's rule (``tfwb.advice.rules``). ``rules()`` is every
entry's rule, read from the table now (an entry added later is in it).

The A/B check built from it is ``tfwb.expect.change``. Pure: no TensorFlow.
"""
from __future__ import annotations

import warnings
from typing import Any, Dict, Optional, Tuple

from tfwb import knobs as _knobs
from tfwb.advice.directions import Expected
from tfwb.advice.entries import ADVICE
from tfwb.advice.rules import Rule
from tfwb.bottleneck import COMPUTE, check_limit, limit_of
from tfwb.config import RunConfig
from tfwb.hardware import MachineLike

#: Knobs whose effect is the step's compute (measure with data in memory): role ``"compute"``.
COMPUTE_KNOBS: Tuple[str, ...] = _knobs.names("compute", cls=RunConfig)
#: Input knobs (their effect depends on whether the run waits on input): roles
#: ``"source"`` and ``"pipeline"``.
INPUT_KNOBS: Tuple[str, ...] = _knobs.names("source", "pipeline", cls=RunConfig)

_UNSET: Any = object()


def rules() -> Dict[str, Rule]:
    """``{knob: rule}`` for every ``ADVICE`` entry with a rule, read from the table now.

    ``sync`` (value False) is timing without a device sync, the one entry that is not a
    RunConfig field.
    """
    return {k: a.rule for k, a in ADVICE.items() if a.rule is not None}


def _config(baseline: Any) -> Any:
    return getattr(baseline, "config", baseline)


def expected_for(hardware: MachineLike, knob: str, value: Any = True, baseline: Any = None, *,
                 limit: Optional[str] = None, bound: Any = _UNSET) -> Expected:
    """What changing one knob should do on this hardware, relative to the baseline.

    Args:
        hardware (mapping): ``tfwb.hardware.detect()`` output or a described machine
            (``tfwb.hardware.DESCRIBED``): keys ``gpus`` (``compute_capability``),
            ``cpu_flags``, ``cpu_count``, ``tpu``.
        knob (str): a key of ``rules()`` (``tfwb.expect.KNOWN``): a RunConfig field, or
            ``"sync"`` for timing without a device sync.
        value (default True): the knob's new value (``"mixed_float16"``, ``True``...).
        baseline (RunResult | RunConfig | None, default None): the run (or config) the
            change is made to: its ``strategy`` decides where the step runs, and a
            measured run tells whether it waits on input or idles a GPU (``limit_of``).
        limit (str | None, default None): ``"input"``, ``"compute"`` or ``"overhead"``,
            overriding what ``baseline`` says; None: from ``baseline``, else unknown
            (model knobs then assume a compute-bound step).
        bound: the 0.2 name of ``limit``, with a DeprecationWarning (until 0.4).

    Returns:
        An ``Expected``: ``direction`` (or None where it depends on the model more than
        on the machine), ``why`` and ``than``.

    Raises:
        ValueError: an unknown knob or limit, or a value that is the baseline itself.

    Example:
        >>> from tfwb.hardware import DESCRIBED
        >>> expected_for(DESCRIBED["colab-t4"], "mixed_precision", "mixed_float16").direction
        'faster'
        >>> from tfwb.config import RunConfig
        >>> cnn, mlp = RunConfig(workload="images"), RunConfig(workload="mlp")
        >>> expected_for(DESCRIBED["binder-2core-avx2"], "mixed_precision", "mixed_float16", cnn).direction
        'slower'
        >>> print(expected_for(DESCRIBED["binder-2core-avx2"], "mixed_precision", "mixed_float16", mlp).direction)
        None
    """
    if bound is not _UNSET:
        warnings.warn("expected_for(bound=...) is now expected_for(limit=...): 'bound' names the Amdahl "
                      "bound of a change (tfwb.advice.Bound)", DeprecationWarning, stacklevel=2)
        limit = bound
    entry = ADVICE.get(knob)
    if entry is None or entry.rule is None:
        raise ValueError(f"knob={knob!r} has no hardware expectation; one of {tuple(rules())}")
    check_limit(limit)
    if limit is None:
        limit = limit_of(baseline) if hasattr(baseline, "step_times_s") else None
        if limit is None and getattr(_config(baseline), "data_source", None) == "memory":
            limit = COMPUTE if knob not in INPUT_KNOBS else None
    return entry.rule(hardware, value, baseline, limit)
