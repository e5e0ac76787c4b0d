"""Verdicts about a run: what limits it, and what to try next.

Pure: reads a RunResult (and optionally a hardware description) and returns
plain data. Thresholds are the TF profiler's own: input wait >= 5 % of step time
is moderately, >= 20 % highly input-bound.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Tuple

MODERATE_INPUT_FRACTION = 0.05
HIGH_INPUT_FRACTION = 0.20

INPUT_HIGH, INPUT_MODERATE, NOT_INPUT = "highly input-bound", "moderately input-bound", "not input-bound"
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


def input_verdict(fraction: float) -> str:
    """The profiler's classification of an input-wait fraction."""
    if fraction >= HIGH_INPUT_FRACTION:
        return INPUT_HIGH
    if fraction >= MODERATE_INPUT_FRACTION:
        return INPUT_MODERATE
    return NOT_INPUT


def _input_suggestions(cfg) -> tuple:
    from .workloads import get_workload

    if cfg.data_source == "memory":
        return ()          # staged batches: no pipeline knob applies
    try:
        builtin = get_workload(cfg.workload).builtin
    except ValueError:     # a saved result whose workload is not registered here
        builtin = False
    out = []
    if cfg.data_source == "generator":
        out.append(("data_source", "files", "read the files with tf.data instead of a Python generator"))
    if not cfg.prefetch:
        out.append(("prefetch", True, "overlap input with the step"))
    if builtin and not cfg.parallel_map:
        out.append(("parallel_map", True, "decode and augment on several cores"))
    if builtin and not cfg.interleave:
        out.append(("interleave", True, "read several shards at once (hides storage latency)"))
    if not cfg.cache:
        out.append(("cache", True, "decode once, reuse every epoch"))
    return tuple(out)


def diagnose(result) -> Diagnosis:
    """Classify a RunResult: failed, no data, or its input-bound level with suggestions.

    Example:
        >>> diagnose(result).headline   # doctest: +SKIP
        'highly input-bound (input wait 41%): try prefetch=True'
    """
    if result.status != "ok":
        return Diagnosis(FAILED, None, f"{FAILED}: {result.error or result.status}")
    frac = result.input_wait_fraction
    if not result.step_times_s:
        return Diagnosis(NO_DATA, None, NO_DATA)
    if frac is None:
        return Diagnosis(NO_INPUT_DATA, None, NO_INPUT_DATA)
    verdict = input_verdict(frac)
    if verdict == NOT_INPUT:
        # Compute-bound: which model-side knob helps depends on the hardware
        # (see ``expectations``), so no blanket suggestion.
        return Diagnosis(verdict, frac, f"{verdict} (input wait {frac:.0%})")
    sugg = _input_suggestions(result.config)
    tip = f": try {sugg[0][0]}={sugg[0][1]!r}" if sugg else ""
    return Diagnosis(verdict, frac, f"{verdict} (input wait {frac:.0%}){tip}", sugg)


def expectations(cfg, hardware: dict) -> Tuple[str, ...]:
    """What to expect from ``cfg``'s knobs on this hardware, before running.

    Args:
        cfg: a RunConfig.
        hardware: ``tfwb.hardware.detect()`` output (keys ``gpus``, ``cpu_flags``,
            ``tpu``, ``cpu_count``).

    Returns:
        Short sentences, one per knob whose effect depends on the hardware.
    """
    gpus = hardware.get("gpus") or []
    flags = set(hardware.get("cpu_flags") or ())
    ccs = [g.get("compute_capability") for g in gpus if g.get("compute_capability")]
    best_cc = max(ccs) if ccs else None
    out = []
    if cfg.mixed_precision == "mixed_float16":
        if not gpus:
            out.append("mixed_float16 on this CPU: expect a slowdown (oneDNN has few float16 kernels).")
        elif best_cc and best_cc >= (7, 0):
            out.append(f"mixed_float16 on a GPU with compute capability {best_cc[0]}.{best_cc[1]}: "
                       "Tensor Cores; expect a speedup on matmul/conv-heavy models.")
        else:
            out.append("mixed_float16 on a GPU older than compute capability 7.0: no Tensor Cores; "
                       "expect little or no speedup.")
    if cfg.mixed_precision == "mixed_bfloat16":
        if not gpus:
            has_bf16 = bool(flags & {"avx512_bf16", "amx_bf16"})
            out.append("mixed_bfloat16 on this CPU: " + (
                "it has bfloat16 instructions; expect about float32 speed or better." if has_bf16 else
                "no native bfloat16 instructions; expect about float32 speed or slower."))
        elif best_cc and best_cc < (8, 0):
            out.append("mixed_bfloat16 on a GPU older than compute capability 8.0 (e.g. a T4): "
                       "no bfloat16 Tensor Cores; prefer mixed_float16.")
        else:
            out.append("mixed_bfloat16 on this GPU: Tensor Cores without loss scaling; expect a speedup.")
    if cfg.jit_compile:
        out.append("XLA on this " + ("GPU: fuses ops, often faster after a long first compile."
                                     if gpus else "CPU: often slower on small models; the first step compiles."))
    if cfg.strategy == "mirrored" and len(gpus) < 2:
        out.append("mirrored with fewer than two GPUs: replicas share the same cores; expect a slowdown "
                   "(all-reduce cost, no extra compute).")
    if cfg.strategy == "tpu" and not hardware.get("tpu"):
        out.append("tpu strategy with no TPU: the run will fail before any work; pick 'default'.")
    return tuple(out)
