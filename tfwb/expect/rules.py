"""The rules: what each knob is expected to do on a machine, one function per knob.

A rule, ``rule(hardware, value, baseline, bound) -> Expected``, gives the direction of a
change (the candidate relative to the baseline) and why, as a function of the hardware
description (``tfwb.hardware.detect()`` or a machine in ``tfwb.hardware.DESCRIBED``),
never a guess written for one machine. ``baseline`` is the run or config the change is
made to (its ``strategy`` decides where the step runs); ``bound`` is what limits it
(``tfwb.bottleneck``), or None when unknown. A rule raises ``ValueError`` for a value that
is the baseline itself.

Adding a knob's expectation is one function here, named by the knob's entry in
``tfwb.advice.ADVICE`` (``tfwb.expect.RULES`` is read from that table). The
machine helpers (``target``, ``where``, ``best_compute_capability``) and the memory rule
of a precision policy (``precision_memory``) live here too.

Pure: no TensorFlow.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, Optional, Tuple, Union

from tfwb.hardware import Machine, MachineLike
from tfwb.bottleneck import COMPUTE, INPUT, OVERHEAD
from tfwb.expect.checks import (FASTER, NOT_FASTER, NOT_SLOWER, SAME, SLOWER, Equal, Expected, Threshold,
                                Unjudged, at_least, at_most, equal)

#: prefetch is expected to be measurably faster only when the part it can hide (the
#: shorter of input wait and compute) is at least this share of the step.
PREFETCH_MIN_HIDDEN = 0.10

#: A rule: ``rule(hardware, value, baseline, bound) -> Expected``.
Rule = Callable[[MachineLike, Any, Any, Optional[str]], Expected]


# -- the machine ------------------------------------------------------------------------------
def _flags(hw: MachineLike) -> frozenset:
    return frozenset(Machine.of(hw).cpu_flags)


def best_compute_capability(hw: MachineLike) -> Optional[Tuple[int, int]]:
    """The highest compute capability among the GPUs, or None (no GPU, or none known).

    Example:
        >>> best_compute_capability({"gpus": [{"compute_capability": [7, 5]}, {"compute_capability": None}]})
        (7, 5)
    """
    return Machine.of(hw).compute_capability


def target(hw: MachineLike, strategy: Optional[str] = None) -> str:
    """Where the model's step runs: ``"tpu"``, ``"gpu"``, ``"cpu"``, or ``"none"``.

    ``strategy=None`` is the default strategy, as for a run: only ``strategy="tpu"`` puts
    the step on a TPU, so on a TPU VM anything else runs on the host CPU;
    ``strategy="tpu"`` with no TPU is ``"none"`` (the run fails). ``"gpu"`` only where
    TensorFlow can use a GPU (``hw.gpus``; ``tfwb.detect_hardware()`` fills it from
    TensorFlow): a GPU that only NVML sees leaves the step on the CPU.

    Example:
        >>> target({"gpus": [], "tpu": True}), target({"gpus": [], "tpu": True}, "tpu")
        ('cpu', 'tpu')
    """
    hw = Machine.of(hw)
    if strategy == "tpu":
        return "tpu" if hw.tpu else "none"
    return "gpu" if hw.gpus else "cpu"


def where(hw: MachineLike, strategy: Optional[str] = None) -> str:
    """A few words for the device the step runs on, e.g. ``"Tesla T4 (compute capability 7.5)"``.

    Example:
        >>> where({"gpus": [], "cpu_flags": ("avx2",), "cpu_count": 2})
        'this CPU (2 cores, AVX2)'
    """
    hw = Machine.of(hw)
    kind = target(hw, strategy)
    if kind == "tpu":
        return "a TPU"
    if kind == "none":
        return "this machine (no TPU)"
    if kind == "gpu":
        gpus = hw.gpus
        name = gpus[0].name or "GPU"
        cc = best_compute_capability(hw)
        count = f"{len(gpus)}x " if len(gpus) > 1 else ""
        return f"{count}{name}" + (f" (compute capability {cc[0]}.{cc[1]})" if cc else "")
    flags = _flags(hw)
    feats = ["AVX-512" if "avx512f" in flags else "AVX2" if "avx2" in flags else None,
             "BF16" if flags & {"avx512_bf16", "amx_bf16"} else None,
             "FP16" if flags & {"avx512_fp16", "amx_fp16"} else None,
             "AMX" if "amx_tile" in flags else None]
    cores = hw.cpu_count
    details = ([f"{cores} core{'' if cores == 1 else 's'}"] if cores else []) + [f for f in feats if f]
    host = "this TPU VM's host CPU" if hw.tpu else "this CPU"
    text = host + (f" ({', '.join(details)})" if details else "")
    if hw.gpu_problem and hw.nvml_gpus:
        text += f" ({hw.nvml_gpus[0].name or 'the GPU'} is not usable by TensorFlow here)"
    return text


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


# -- the rules -------------------------------------------------------------------------------
def _config(baseline: Any) -> Any:
    return getattr(baseline, "config", baseline)


def _hidden_by_prefetch(baseline: Any) -> Optional[float]:
    """Share of the baseline step prefetch could hide: min(wait, compute) / step."""
    if not getattr(baseline, "ok", False) or not baseline.input_wait_s:
        return None
    wait, compute, step = baseline.median_wait_s, baseline.median_compute_s, baseline.median_step_s
    if not step:
        return None
    return min(wait, compute) / step


def _downgrade(e: Expected, bound: Optional[str]) -> Expected:
    """A compute change on a run that waits on input: the pipeline hides most of it."""
    if bound != INPUT or e.direction not in (FASTER, SLOWER):
        return e
    softer = NOT_SLOWER if e.direction == FASTER else NOT_FASTER
    return Expected(softer, e.why + "; but the run waits on input, which hides a change in the step",
                    e.than)


def _gpu_busy_pct(baseline: Any) -> Optional[float]:
    """The highest GPU busy share (NVML duty cycle) of a measured run, or None (unmeasured, refused)."""
    utilization = getattr(baseline, "utilization", None)
    if not callable(utilization):
        return None
    util = [u for u in utilization().get("gpu_util_pct") or () if u is not None]
    return max(util) if util else None


def _precision_tf32_gpu(cc: Tuple[int, int], tc: str, baseline: Any, bound: Optional[str],
                        than: str) -> Expected:
    """A 16-bit policy on a GPU whose float32 matmuls already run on TF32 Tensor Cores (cc >= 8.0).

    The gain is 16-bit Tensor Cores at twice TF32's rate and half the memory traffic, which
    shows only on a step big enough to keep the GPU busy (TensorFlow's guide: small models
    gain little). So: faster only for a compute-bound step, known from a measured baseline
    whose GPU was busy (or from a bound given for no baseline); else no fixed direction.
    """
    base = (f"float32 matmuls and convolutions already run on TF32 Tensor Cores at compute capability "
            f"{cc[0]}.{cc[1]}; {tc} Tensor Cores run them at about twice TF32's rate and halve activation "
            "memory traffic")
    measured = hasattr(baseline, "step_times_s")
    if bound == INPUT:
        return Expected(NOT_SLOWER, base + "; but the run waits on input, which hides a change in the step",
                        than)
    if bound == COMPUTE and measured:
        busy = _gpu_busy_pct(baseline)
        if busy is None:
            return Expected(None, base + ", which shows only on a step that keeps the GPU busy; NVML did not "
                            "report the GPU's utilization for the baseline (refused, e.g. on a MIG slice), "
                            "so whether this step does is unknown", than)
        return Expected(FASTER, base + f": the baseline kept the GPU busy ({busy:.0f} % of the time), so the "
                        "step is compute-bound and the faster math shows", than)
    if bound == COMPUTE and baseline is None:
        return Expected(FASTER, base + ", which shows on a compute-bound step like this one", than)
    return Expected(None, base + ", which shows only on a step big enough to keep the GPU busy; small models "
                    "gain little (TensorFlow's mixed-precision guide). Measure a baseline: its bound decides",
                    than)


def _precision(hw: MachineLike, value: str, kind: str, bound: Optional[str],
               baseline: Any = None) -> Expected:
    than = "float32"
    if value == "off":
        raise ValueError("mixed_precision='off' is the float32 baseline; compare a policy against it")
    if value not in ("mixed_float16", "mixed_bfloat16"):
        raise ValueError(f"mixed_precision={value!r} is not allowed; 'mixed_float16' or 'mixed_bfloat16'")
    half = value == "mixed_float16"
    flags = _flags(hw)
    if kind == "none":
        return Expected(None, "no TPU here: the run fails before any work; pick strategy='default'", than)
    if kind == "tpu":
        if half:
            return Expected(None, "TPUs have no float16 arithmetic (their matrix units compute in "
                            "bfloat16): tfwb refuses this policy with strategy='tpu' before any work; "
                            "use mixed_bfloat16 on a TPU", than)
        return Expected(NOT_SLOWER, "the TPU's matrix units compute in bfloat16 (float32 matmuls already "
                        "run bfloat16 passes); halving activations saves memory traffic, more so on "
                        "large models", than)
    if kind == "gpu":
        cc = best_compute_capability(hw)
        if cc is None:
            return Expected(None, "the GPU's compute capability is unknown, so whether it has "
                            "Tensor Cores for this type is too", than)
        need = (7, 0) if half else (8, 0)
        if cc < need:
            if half:
                why = (f"compute capability {cc[0]}.{cc[1]} has no Tensor Cores (they start at 7.0): "
                       "float16 math is no faster and the casts cost time")
            else:
                why = (f"compute capability {cc[0]}.{cc[1]} has no bfloat16 Tensor Cores (they start "
                       "at 8.0): not recommended here, use mixed_float16 on this GPU")
            return Expected(NOT_FASTER, why, than)
        if bound == OVERHEAD:
            return Expected(NOT_FASTER, "the GPU idles between small kernels, so faster math cannot "
                            "show, and the policy adds cast kernels", than)
        tc = "float16" if half else "bfloat16"
        if cc >= (8, 0):
            return _precision_tf32_gpu(cc, tc, baseline, bound, than)
        why = (f"{tc} Tensor Cores (compute capability {cc[0]}.{cc[1]}) run matmuls and convolutions "
               "several times faster than float32 and halve activation memory, on a step busy with them")
        return _downgrade(Expected(FASTER, why, than), bound)
    # CPU: x86 flags name the instructions; Arm lists "fphp" (float16) and "bf16".
    arm = "asimd" in flags
    if half:
        # TF's oneDNN runs float16 only with AVX-512 FP16 or AMX-FP16 (on AVX-512 BW), or with
        # AVX-NE-CONVERT (IsDataTypeSupportedByOneDNNOnThisCPU in tensorflow/core/util/util.cc).
        if (flags & {"avx512_fp16", "amx_fp16"} or "avx_ne_convert" in flags
                or (arm and "fphp" in flags)):
            return Expected(None, "this CPU has float16 arithmetic that TF's CPU kernels can use, but "
                            "whether it outweighs the casts on a small model was not measured for "
                            "the book", than)
        if "avx512f" in flags:
            why = ("oneDNN runs no float16 on this CPU (that takes AVX-512 FP16, AMX-FP16 or "
                   "AVX-NE-CONVERT, which it lacks): TF falls back to generic Eigen kernels, often "
                   "many times slower, and the policy's casts cost time on top")
        elif flags and not arm:
            why = ("without AVX-512, oneDNN runs no float16 at all: TF falls back to generic Eigen "
                   "kernels, often many times slower")
        else:
            why = ("no float16 arithmetic is listed for this CPU: TF's CPU kernels are fastest in "
                   "float32, and the policy adds casts")
        return _downgrade(Expected(SLOWER, why, than), bound)
    if "amx_bf16" in flags:
        return Expected(NOT_SLOWER, "AMX runs bfloat16 matmuls natively through oneDNN: about float32 "
                        "speed on a small model, faster on large matmuls", than)
    if "avx512_bf16" in flags:
        return Expected(NOT_SLOWER, "AVX-512 BF16 gives oneDNN native bfloat16 dot products: about "
                        "float32 speed", than)
    if arm and "bf16" in flags:
        return Expected(None, "this Arm CPU has bfloat16 instructions that TF's oneDNN/ACL kernels can "
                        "use; not measured for the book", than)
    if flags and not arm:
        why = ("this CPU has no bfloat16 instructions (no AVX-512 BF16 or AMX): every bfloat16 op "
               "converts in software")
    else:
        why = ("no bfloat16 instructions are listed for this CPU: every bfloat16 op converts in "
               "software")
    return _downgrade(Expected(SLOWER, why, than), bound)


#: CPU features with which TensorFlow's x86 Linux builds turn oneDNN's kernels on by default (TF 2.9
#: release notes: "CPUs with neural-network-focused hardware features such as AVX512_VNNI, AVX512_BF16,
#: AMX"); elsewhere its CPU kernels are Eigen's unless TF_ENABLE_ONEDNN_OPTS=1.
ONEDNN_DEFAULT_FLAGS = frozenset({"avx512_vnni", "avx512_bf16", "avx512_fp16", "amx_tile", "amx_bf16", "amx_int8"})


def _jit(kind: str, bound: Optional[str], flags: frozenset = frozenset()) -> Expected:
    than = "jit_compile=False"
    if kind == "none":
        return Expected(None, "no TPU here: the run fails before any work; pick strategy='default'", than)
    if kind == "tpu":
        return Expected(SAME, "on a TPU every step is compiled by XLA anyway", than)
    if kind == "gpu":
        if bound == OVERHEAD:
            return Expected(FASTER, "the GPU idles between many small kernels; XLA fuses them into "
                            "a few launches (after a first step that compiles)", than)
        return Expected(NOT_SLOWER, "large matmuls and convolutions run in the same cuBLAS/cuDNN "
                        "kernels either way; XLA fuses the small ops around them (the first step "
                        "compiles)", than)
    if flags & ONEDNN_DEFAULT_FLAGS:
        return Expected(NOT_FASTER, "XLA's CPU code generation rarely beats the oneDNN kernels TF's own CPU "
                        "path uses on this CPU: often slower on small models; the first step compiles", than)
    return Expected(None, "on this CPU TF's own kernels are Eigen's (oneDNN is on by default only with "
                    "AVX-512 VNNI/BF16 or AMX): XLA's fused code can beat them or lose to them, depending on "
                    "the model; the first step compiles", than)


def _steps_per_call(kind: str, bound: Optional[str]) -> Expected:
    than = "one step per call"
    if kind == "none":
        return Expected(None, "no TPU here: the run fails before any work; pick strategy='default'", than)
    if kind == "tpu" or (kind == "gpu" and bound == OVERHEAD):
        return Expected(FASTER, "several steps per call save a host round trip per step, which a "
                        + ("TPU pays on every call" if kind == "tpu" else "GPU idling between kernels shows"),
                        than)
    return Expected(NOT_SLOWER, "it saves a Python call and a loss read per step: much where steps are "
                    "short (a millisecond or so), little where the step's compute dominates", than)


def _strategy(hw: MachineLike, value: str) -> Expected:
    than = "one device (strategy='default')"
    hw = Machine.of(hw)
    gpus = len(hw.gpus)
    if value == "default":
        raise ValueError("strategy='default' is the baseline; compare another strategy against it")
    if value == "tpu":
        if not hw.tpu:
            return Expected(None, "no TPU here: the run fails before any work; pick 'default'", than)
        return Expected(None, "without strategy='tpu' the step runs on the TPU VM's host CPU; the TPU "
                        "wins on compute-bound models, while a small model with one step per call "
                        "pays a host round trip per step (raise steps_per_execution)", than)
    if value == "mirrored":
        if gpus >= 2:
            return Expected(None, f"{gpus} GPUs each take a share of the batch: faster when each share "
                            "keeps its GPU busy, slower on small models where the gradient all-reduce "
                            "dominates; compare examples per second", than)
        if gpus == 1:
            return Expected(NOT_FASTER, "one GPU is one replica: the same work plus the strategy's "
                            "overhead", than)
        return Expected(SLOWER, "the replicas are logical devices on the same CPU cores: no extra "
                        "compute, plus an all-reduce every step", than)
    if value == "multi_worker":
        if gpus == 1:
            return Expected(SLOWER, "one GPU for two or more workers: tfwb runs every worker on the CPU "
                            "(fewer GPUs than workers), against one device on the GPU", than)
        if gpus:
            return Expected(None, "depends on the workers' GPUs and the network between them (the workers "
                            "run on the CPU when there are fewer GPUs than workers, or when this process "
                            "already holds the GPUs' memory: the run's notes say so)", than)
        return Expected(SLOWER, "the workers are processes sharing this machine's CPU cores (each gets "
                        "its own share of them: none brings new compute), and every step adds an all-reduce "
                        "between the processes over loopback (gRPC)", than)
    if value == "parameter_server":
        return Expected(SLOWER, "a chief schedules each step on a worker process and the variables live "
                        "on a ps process: every step crosses processes over gRPC (tfwb waits for each "
                        "step's loss, one round trip per step); it pays off for many workers and large "
                        "sparse models, not on one machine", than)
    raise ValueError(f"strategy={value!r} is not allowed; one of 'mirrored', 'multi_worker', "
                     "'parameter_server', 'tpu'")


def _input(hw: MachineLike, knob: str, value: Any, baseline: Any, bound: Optional[str]) -> Expected:
    cfg = _config(baseline)
    than = f"{knob}=False" if knob != "data_source" else (
        f"data_source={getattr(cfg, 'data_source', None) or 'generator'!r}")
    if knob == "data_source" and value not in ("files", "memory"):
        raise ValueError(f"data_source={value!r} is the naive baseline; expect 'files' or 'memory' against it")
    if knob != "data_source" and not value:
        raise ValueError(f"{knob}={value!r} is the baseline; turn the knob on to compare")
    if knob == "parallel_map":
        if getattr(cfg, "data_source", None) == "generator":
            return Expected(NOT_SLOWER, "a Python generator holds the GIL, so parallel calls run one "
                            "at a time", than)
        if (Machine.of(hw).cpu_count or 2) < 2:
            return Expected(NOT_SLOWER, "one CPU core: nothing to run in parallel", than)
    if knob == "prefetch":
        hidden = _hidden_by_prefetch(baseline)
        if hidden is not None:
            if hidden >= PREFETCH_MIN_HIDDEN:
                return Expected(FASTER, f"prefetch overlaps input with the step, hiding up to {hidden:.0%} "
                                "of it here (the shorter of input wait and compute)", than)
            return Expected(NOT_SLOWER, f"prefetch can hide only the shorter of input wait and compute: "
                            f"{hidden:.0%} of the step here, too little to tell from noise", than)
    if bound == INPUT:
        how = "prefetch overlaps that wait with the step" if knob == "prefetch" else "this knob speeds the pipeline up"
        return Expected(FASTER, f"the run waits on input, and {how}", than)
    if bound in (COMPUTE, OVERHEAD):
        return Expected(NOT_SLOWER, "the step hardly waits on input: little to gain, nothing to lose", than)
    return Expected(NOT_SLOWER, "faster when the run waits on input, about the same when it does not", than)


def _sync(kind: str, value: Any) -> Expected:
    than = "timing with a device sync"
    if value:
        raise ValueError("sync=True is the honest baseline; expect sync=False against it")
    if kind in ("gpu", "tpu"):
        return Expected(FASTER, "the accelerator runs asynchronously: without a sync the clock stops "
                        "when the work is queued, not when it is done, and under-reports", than)
    return Expected(NOT_SLOWER, "TF's CPU kernels finish before the call returns, so skipping the sync "
                    "saves only the sync's own small cost", than)


def tf32_rule(hw: MachineLike, value: Any, baseline: Any, bound: Optional[str]) -> Expected:
    """tf32=False: float32 matmuls and convolutions in full float32 instead of TF32."""
    than = "tf32=True (TensorFlow's default)"
    if value is not False:
        raise ValueError(f"tf32={value!r} is TensorFlow's default, the baseline; expect tf32=False against it")
    kind = _kind(hw, baseline)
    if kind == "none":
        return Expected(None, "no TPU here: the run fails before any work; pick strategy='default'", than)
    if kind == "tpu":
        return Expected(SAME, "TF32 is an NVIDIA Tensor Core format: a TPU's matrix units ignore the "
                        "setting", than)
    if kind == "cpu":
        return Expected(SAME, "TF32 is an NVIDIA Tensor Core format: TF's CPU kernels compute float32 "
                        "either way", than)
    cc = best_compute_capability(hw)
    if cc is None:
        return Expected(None, "the GPU's compute capability is unknown, so whether it has TF32 Tensor "
                        "Cores (8.0 and newer) is too", than)
    if cc < (8, 0):
        return Expected(SAME, f"compute capability {cc[0]}.{cc[1]} predates TF32, which came with Ampere "
                        "at 8.0: float32 runs as float32 either way", than)
    policy = getattr(_config(baseline), "mixed_precision", "off")
    if policy not in (None, "off"):
        return Expected(NOT_FASTER, f"under {policy} the matmuls run in 16 bits; only what stays float32 "
                        "loses TF32", than)
    why = (f"compute capability {cc[0]}.{cc[1]} runs float32 matmuls and convolutions as TF32 on Tensor "
           "Cores by default; without it they take the much slower full-float32 path")
    if bound not in (None, COMPUTE):
        return Expected(NOT_FASTER, why + ", which shows only on a step busy with them", than)
    return Expected(SLOWER, why, than)


def _kind(hw: MachineLike, baseline: Any) -> str:
    return target(hw, getattr(_config(baseline), "strategy", None))


def precision_rule(hw: MachineLike, value: Any, baseline: Any, bound: Optional[str]) -> Expected:
    """mixed_precision: a 16-bit policy against float32."""
    return _precision(hw, value, _kind(hw, baseline), bound, baseline)


def jit_rule(hw: MachineLike, value: Any, baseline: Any, bound: Optional[str]) -> Expected:
    """jit_compile=True: the step compiled by XLA."""
    if not value:
        raise ValueError("jit_compile=False is the baseline; turn it on to compare")
    return _downgrade(_jit(_kind(hw, baseline), bound, _flags(hw)), bound)


def steps_rule(hw: MachineLike, value: Any, baseline: Any, bound: Optional[str]) -> Expected:
    """steps_per_execution > 1: several steps per call of the step function."""
    if value == 1:
        raise ValueError("steps_per_execution=1 is the baseline; compare a larger value")
    return _steps_per_call(_kind(hw, baseline), bound)


def strategy_rule(hw: MachineLike, value: Any, baseline: Any, bound: Optional[str]) -> Expected:
    """strategy: a distribution strategy against one device."""
    return _strategy(hw, value)


def sync_rule(hw: MachineLike, value: Any, baseline: Any, bound: Optional[str]) -> Expected:
    """sync=False: timing without a device sync."""
    return _sync(_kind(hw, baseline), value)


def input_rule(knob: str) -> Rule:
    """The rule of input knob ``knob`` (``prefetch``, ``data_source``...): it depends on the input wait."""
    def rule(hw: MachineLike, value: Any, baseline: Any, bound: Optional[str]) -> Expected:
        return _input(hw, knob, value, baseline, bound)
    rule.__name__ = f"{knob}_rule"
    return rule


def batch_rule(hw: MachineLike, value: Any, baseline: Any, bound: Optional[str]) -> Expected:
    """A larger batch is more work per step: only time per example can be compared."""
    return Expected(None, "a different batch is a different amount of work per step; compare time per "
                          "example (a larger batch lowers it until the device is busy)")


def timing_rule(hw: MachineLike, value: Any, baseline: Any, bound: Optional[str]) -> Expected:
    """timing='per_step' against the windowed default: a sync and a loss read after every step."""
    if value != "per_step":
        raise ValueError(f"timing={value!r} has no expectation against the default; give 'per_step'")
    kind = target(hw, getattr(_config(baseline), "strategy", None))
    if kind in ("gpu", "tpu"):
        return Expected(SLOWER, f"a sync and a loss read after every step stop the host from preparing the next "
                                f"step while the {kind.upper()} runs this one; windows let them overlap",
                        than="windowed timing")
    return Expected(SAME, "TensorFlow runs a graph's kernels on the CPU before the call returns: there is no "
                          "device work for windows to overlap", than="windowed timing")


#: The published facts behind each rule, by (knob, where the step runs); ``(knob, None)``
#: covers every place. ``source(knob, kind)`` reads it; the table prints it beside each cell.
SOURCES: Dict[Tuple[str, Optional[str]], str] = {
    ("mixed_precision", "gpu"): (
        "NVIDIA CUDA C++ Programming Guide, warp matrix functions: float16 Tensor Cores from compute "
        "capability 7.0, bfloat16 and TF32 from 8.0; NVIDIA T4/A100/H100/L4 datasheets: dense FP16 and "
        "BF16 Tensor Core rates are twice TF32's (A100 312 vs 156 TFLOPS), a T4's FP16 8x its FP32 "
        "(65 vs 8.1); TensorFlow mixed-precision guide: compute capability 7.0+ gains most, small "
        "models gain little"),
    ("mixed_precision", "cpu"): (
        "TensorFlow mixed-precision guide: mixed precision runs on CPUs, usually much slower; "
        "TensorFlow source tensorflow/core/util/util.cc (IsDataTypeSupportedByOneDNNOnThisCPU): oneDNN "
        "runs bfloat16 with AVX-512 BF16 or AMX, float16 with AVX-512 FP16, AMX-FP16 or AVX-NE-CONVERT"),
    ("mixed_precision", "tpu"): (
        "TensorFlow mixed-precision guide: use mixed_bfloat16 on TPUs (float16 is not supported there); "
        "Cloud TPU docs, 'The bfloat16 numerical format': the matrix units multiply in bfloat16"),
    ("tf32", None): (
        "NVIDIA, 'TensorFloat-32 in the A100 GPU': TF32 Tensor Cores from Ampere (compute capability "
        "8.0) on, an NVIDIA-only format; tf.config.experimental.enable_tensor_float_32_execution: "
        "on by default since TensorFlow 2.4"),
    ("jit_compile", None): (
        "TensorFlow XLA guide: fusion cuts kernel launches and memory traffic; every TPU program is "
        "compiled by XLA; the first call compiles"),
    ("steps_per_execution", None): (
        "Keras Model.compile docs: steps_per_execution runs several batches per tf.function call, "
        "cutting Python overhead, most on TPUs and small models"),
    ("strategy", None): (
        "TensorFlow distributed training guide (MirroredStrategy, MultiWorkerMirroredStrategy, "
        "ParameterServerStrategy, TPUStrategy): replicas split the batch and all-reduce gradients"),
    ("sync", None): (
        "CUDA C++ Programming Guide, asynchronous concurrent execution: a kernel launch returns before "
        "the kernel finishes; tf.test.experimental.sync_devices waits for queued device work"),
    ("batch_size", None): "none needed: a different batch is a different amount of work per step",
    ("timing", None): (
        "CUDA C++ Programming Guide, asynchronous concurrent execution: the host queues work and returns; "
        "Keras Model.fit does not read the loss each step unless a batch callback asks for it"),
}
for _k in ("prefetch", "parallel_map", "interleave", "cache", "vectorized_map", "data_source"):
    SOURCES[_k, None] = ("TensorFlow guide 'Better performance with the tf.data API' (prefetch overlaps "
                         "input with the step; parallel map, interleave and cache speed the pipeline); TF "
                         "profiler: input wait >= 20 % of the step is highly input-bound")


def source(knob: str, kind: Optional[str] = None) -> str:
    """The published facts behind ``knob``'s rule where the step runs (``target``'s answer).

    Raises:
        ValueError: a knob without a rule.

    Example:
        >>> source("tf32", "gpu").split(":")[0]
        "NVIDIA, 'TensorFloat-32 in the A100 GPU'"
    """
    if (knob, kind) in SOURCES:
        return SOURCES[knob, kind]
    if (knob, None) in SOURCES:
        return SOURCES[knob, None]
    if knob == "mixed_precision":
        return SOURCES[knob, "cpu"] if kind != "tpu" else SOURCES[knob, "tpu"]
    raise ValueError(f"knob={knob!r} has no rule; one of {tuple(dict.fromkeys(k for k, _ in SOURCES))}")


#: The changes ``tfwb.expect.table()`` shows for every described machine: (label, knob, value,
#: bound, baseline strategy). A knob's rule and its rows sit together here. Without
#: ``strategy="tpu"`` a TPU VM's step runs on its host CPU; its TPU has rows of its own.
TABLE_CHANGES: Tuple[Tuple[str, str, Any, Optional[str], Optional[str]], ...] = (
    ("mixed_precision='mixed_float16'", "mixed_precision", "mixed_float16", None, None),
    ("mixed_precision='mixed_float16', compute-bound run", "mixed_precision", "mixed_float16", COMPUTE, None),
    ("mixed_precision='mixed_bfloat16'", "mixed_precision", "mixed_bfloat16", None, None),
    ("mixed_precision='mixed_bfloat16', compute-bound run", "mixed_precision", "mixed_bfloat16", COMPUTE,
     None),
    ("jit_compile=True", "jit_compile", True, None, None),
    ("jit_compile=True, GPU idling (overhead-bound)", "jit_compile", True, OVERHEAD, None),
    ("tf32=False (float32 matmuls in full float32)", "tf32", False, None, None),
    ("steps_per_execution=8", "steps_per_execution", 8, None, None),
    ("strategy='mirrored'", "strategy", "mirrored", None, None),
    ("strategy='tpu'", "strategy", "tpu", None, None),
    ("prefetch=True, input-bound run", "prefetch", True, INPUT, None),
    ("prefetch=True, compute-bound run", "prefetch", True, COMPUTE, None),
    ("parallel_map=True, input-bound run", "parallel_map", True, INPUT, None),
    ("timing without a device sync", "sync", False, None, None),
    ("timing='per_step' (a loss read and sync after every step)", "timing", "per_step", None, None),
    ("under strategy='tpu': mixed_precision='mixed_float16'", "mixed_precision", "mixed_float16", None, "tpu"),
    ("under strategy='tpu': mixed_precision='mixed_bfloat16'", "mixed_precision", "mixed_bfloat16", None,
     "tpu"),
    ("under strategy='tpu': jit_compile=True", "jit_compile", True, None, "tpu"),
    ("under strategy='tpu': steps_per_execution=8", "steps_per_execution", 8, None, "tpu"),
)

# -- memory ----------------------------------------------------------------------------------
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
