"""Verdicts about a run: what limits it, and what to try next.

Pure: reads a RunResult (and optionally a hardware description) and returns
plain data. The input verdicts and their thresholds are the TF profiler's own
(``tfwb.bounds``: input wait >= 5 % of step time is moderately, >= 20 % highly
input-bound); which model-side knob to try comes from ``tfwb.expect``'s rules.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Tuple

from tfwb import expect
from tfwb import knobs as _knobs
from tfwb.bounds import (HIGH_INPUT_FRACTION, INPUT_HIGH, INPUT_MODERATE, MODERATE_INPUT_FRACTION,  # noqa: F401 - re-exported
                         NOT_INPUT, input_verdict)
from tfwb.config import RunConfig
from tfwb.hardware import Machine, MachineLike
from tfwb.workloads import get_workload

FAILED, NO_DATA, NO_INPUT_DATA = "run failed", "no measured steps", "input wait not measured"


@dataclass(frozen=True)
class Diagnosis:
    """A verdict and the knobs that address it.

    ``verdict`` is one of the module's constants; ``suggestions`` are RunConfig
    changes worth trying, as ``(field, value, why)`` tuples.
    """

    verdict: str
    input_fraction: Optional[float]
    headline: str
    suggestions: Tuple[Tuple[str, object, str], ...] = ()


def _hardware_of(result) -> Machine:
    """What a result's fingerprint says about its machine."""
    fp = getattr(result, "fingerprint", None) or {}
    return Machine.of({"gpus": list(fp.get("gpus") or []), "cpu_count": fp.get("cpu_count"),
                       "cpu_flags": tuple(fp.get("cpu_flags") or ()),
                       "tpu": any("TPU" in str(d) for d in fp.get("logical_devices") or ())})


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
    if cfg.data_source == "generator":
        out.append(("data_source", "files", "read the files with tf.data instead of a Python generator"))
    if not cfg.prefetch:
        out.append(("prefetch", True, "overlap input with the step"))
    if applies("parallel_map") and not cfg.parallel_map and cores != 1:
        where = f"the {cores} CPU cores" if cores else "several cores"
        out.append(("parallel_map", True, f"decode and augment on {where}"))
    if applies("interleave") and not cfg.interleave:
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
        'highly input-bound (input wait 30%): try prefetch=True'
    """
    if result.status != "ok":
        return Diagnosis(FAILED, None, f"{FAILED}: {result.error or result.status}")
    frac = result.input_wait_fraction
    if not result.step_times_s:
        return Diagnosis(NO_DATA, None, NO_DATA)
    if frac is None:
        return Diagnosis(NO_INPUT_DATA, None, NO_INPUT_DATA)
    verdict = input_verdict(frac)
    hw = _hardware_of(result) if hardware is None else Machine.of(hardware)
    if verdict == NOT_INPUT:
        # Which model-side knob helps depends on the hardware: ask tfwb.expect.
        sugg = _compute_suggestions(result, hw)
        tip = f": try {sugg[0][0]}={sugg[0][1]!r}" if sugg else ""
        return Diagnosis(verdict, frac, f"{verdict} (input wait {frac:.0%}){tip}", sugg)
    sugg = _input_suggestions(result.config, hw)
    tip = f": try {sugg[0][0]}={sugg[0][1]!r}" if sugg else ""
    return Diagnosis(verdict, frac, f"{verdict} (input wait {frac:.0%}){tip}", sugg)


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
