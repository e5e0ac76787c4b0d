"""The rules: what each knob is expected to do on a machine, one function per knob.

A rule, ``rule(hardware, value, baseline, limit) -> Expected``, gives the direction of a
change (the candidate relative to the baseline) and why, as a function of the hardware
description (``tfwb.hardware.detect()`` or a machine in ``tfwb.hardware.DESCRIBED``),
never a guess written for one machine. ``baseline`` is the run or config the change is
made to (its ``strategy`` decides where the step runs); ``limit`` is what limits it
(``tfwb.bottleneck``: ``"input"``, ``"compute"``, ``"overhead"``), or None when unknown.
A rule raises ``ValueError`` for a value that is the baseline itself.

Adding a knob's expectation is one function here, named by the knob's entry in
``tfwb.advice.entries.ADVICE``; ``tfwb.advice.expected.expected_for`` runs it. Where the
step runs comes from ``tfwb.advice.machine``; the published facts behind each rule are in
``tfwb.advice.sources``. On a CPU, precision and XLA state a direction only where it was
measured on that kind of CPU, for a model made of the same parts (``tfwb.advice.measured``);
elsewhere their reason says it was not measured and what the nearest measured kind measured.

Pure: no TensorFlow.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, Optional, Tuple

from tfwb.advice import measured
from tfwb.advice.directions import FASTER, NOT_FASTER, NOT_SLOWER, SAME, SLOWER, Expected
from tfwb.advice.machine import best_compute_capability, target
from tfwb.bottleneck import COMPUTE, INPUT, OVERHEAD
from tfwb.hardware import Machine, MachineLike
from tfwb.workloads import get_workload

#: prefetch is expected to be measurably faster only when the part it can hide (the
#: shorter of input wait and compute) is at least this share of the step.
PREFETCH_MIN_HIDDEN = 0.10

#: A rule: ``rule(hardware, value, baseline, limit) -> Expected``.
Rule = Callable[[MachineLike, Any, Any, Optional[str]], Expected]


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


def _idle_cores_in_compute(hw: MachineLike, baseline: Any) -> Optional[Tuple[float, float, int]]:
    """A CPU step's idle core time while it computes, as a share of the step; the cores busy on
    average while it ran (its own, or every program's where that is more); and the cores it had.
    None without a measured process CPU share.

    On a CPU alone the input pipeline and the step's kernels share the cores, so prefetch can
    overlap input only with cores the step leaves idle. Per step there are ``cores x step``
    core-seconds; the process used ``busy x step`` of them (its median CPU over the measured
    steps); during the input wait the pipeline ran on about one core, leaving the others idle then
    (more where the map runs in parallel: the estimate is then low); the rest of the idle time fell
    while the step computed.
    """
    utilization = getattr(baseline, "utilization", None)
    cores = Machine.of(hw).cpu_count
    step = getattr(baseline, "median_step_s", None)
    if not callable(utilization) or not cores or not step:
        return None
    u = utilization()
    pct = u.get("cpu_process_pct")
    if pct is None:
        return None
    machine = u.get("cpu_system_pct")                  # every program's share of all cores: theirs are not idle
    busy = min(float(cores), max(pct / 100.0, machine / 100.0 * cores if machine is not None else 0.0))
    idle_in_compute = (cores - busy) * step - baseline.median_wait_s * (cores - 1)
    return max(0.0, idle_in_compute) / step, busy, cores


def _prefetch_on_cpu(hw: MachineLike, baseline: Any, hidden: float, than: str) -> Optional[Expected]:
    """prefetch where the step runs on the CPU: it hides only as much input as idle cores can run.

    None when the baseline's CPU share was not measured (the plain rule then stands).
    """
    found = _idle_cores_in_compute(hw, baseline)
    if found is None:
        return None
    idle, busy, cores = found
    kept = f"{busy:.1f} of {cores} cores were busy while it ran"
    if min(hidden, idle) >= PREFETCH_MIN_HIDDEN:
        return Expected(FASTER, f"prefetch overlaps input with the step on cores the step leaves idle, hiding "
                        f"up to {min(hidden, idle):.0%} of it here ({kept})", than)
    return Expected(None, f"prefetch would overlap {hidden:.0%} of the step, but on a CPU alone the pipeline's "
                    f"thread runs on the cores the step's kernels (and any other program) use ({kept}; idle while "
                    f"it computes: {idle:.0%} of the step): what it hides can cost the step as much or more, so it "
                    "can be slower", than)


def _downgrade(e: Expected, limit: Optional[str]) -> Expected:
    """A compute change on a run that waits on input: the pipeline hides most of it."""
    if limit != INPUT or e.direction not in (FASTER, SLOWER):
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


def _precision_tf32_gpu(cc: Tuple[int, int], tc: str, baseline: Any, limit: Optional[str],
                        than: str) -> Expected:
    """A 16-bit policy on a GPU whose float32 matmuls already run on TF32 Tensor Cores (cc >= 8.0).

    The gain is 16-bit Tensor Cores at twice TF32's rate and half the memory traffic, which
    shows only on a step big enough to keep the GPU busy (TensorFlow's guide: small models
    gain little). So: faster only for a compute-bound step, known from a measured baseline
    whose GPU was busy (or from a limit given for no baseline); else no fixed direction.
    """
    base = (f"float32 matmuls and convolutions already run on TF32 Tensor Cores at compute capability "
            f"{cc[0]}.{cc[1]}; {tc} Tensor Cores run them at about twice TF32's rate and halve activation "
            "memory traffic")
    measured = hasattr(baseline, "step_times_s")
    if limit == INPUT:
        return Expected(NOT_SLOWER, base + "; but the run waits on input, which hides a change in the step",
                        than)
    if limit == COMPUTE and measured:
        busy = _gpu_busy_pct(baseline)
        if busy is None:
            return Expected(None, base + ", which shows only on a step that keeps the GPU busy; NVML did not "
                            "report the GPU's utilization for the baseline (refused, e.g. on a MIG slice), "
                            "so whether this step does is unknown", than)
        return Expected(FASTER, base + f": the baseline kept the GPU busy ({busy:.0f} % of the time), so the "
                        "step is compute-bound and the faster math shows", than)
    if limit == COMPUTE and baseline is None:
        return Expected(FASTER, base + ", which shows on a compute-bound step like this one", than)
    return Expected(None, base + ", which shows only on a step big enough to keep the GPU busy; small models "
                    "gain little (TensorFlow's mixed-precision guide). Measure a baseline: its bound decides",
                    than)


def _precision(hw: MachineLike, value: str, kind: str, limit: Optional[str],
               baseline: Any = None) -> Expected:
    than = "float32"
    if value == "off":
        raise ValueError("mixed_precision='off' is the float32 baseline; compare a policy against it")
    if value not in ("mixed_float16", "mixed_bfloat16"):
        raise ValueError(f"mixed_precision={value!r} is not allowed; 'mixed_float16' or 'mixed_bfloat16'")
    half = value == "mixed_float16"
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
        if limit == OVERHEAD:
            return Expected(NOT_FASTER, "the GPU idles between small kernels, so faster math cannot "
                            "show, and the policy adds cast kernels", than)
        tc = "float16" if half else "bfloat16"
        if cc >= (8, 0):
            return _precision_tf32_gpu(cc, tc, baseline, limit, than)
        why = (f"{tc} Tensor Cores (compute capability {cc[0]}.{cc[1]}) run matmuls and convolutions "
               "several times faster than float32 and halve activation memory, on a step busy with them")
        return _downgrade(Expected(FASTER, why, than), limit)
    return _downgrade(_precision_cpu(hw, value, baseline), limit)


#: Why a measured CPU direction holds: (policy, CPU kind, direction) -> the mechanism, one clause.
_PRECISION_WHY = {
    ("mixed_bfloat16", measured.AMX, FASTER): "AMX runs bfloat16 matmuls and convolutions natively through oneDNN",
    ("mixed_bfloat16", measured.AVX2, SLOWER): "this CPU has no bfloat16 instructions (no AVX-512 BF16 or "
                                               "AMX): every bfloat16 op converts in software",
    ("mixed_float16", measured.AMX, SLOWER): "the float16 matmul peak bounds one matmul, not a training step: "
                                             "TF's CPU kernels have no fast float16 training path",
}
#: float16 with convolutions on any CPU: the mechanism, measured on every kind that was measured.
F16_CONVOLUTIONS = ("TF's CPU convolutions and their gradients have no fast float16 path, whatever float16 "
                    "instructions the CPU lists")


def _made_of(baseline: Any) -> Optional[Tuple[str, ...]]:
    """What the baseline's workload is made of (``Workload.made_of``); None when unknown."""

    name = getattr(_config(baseline), "workload", None)
    if not isinstance(name, str):
        return None
    try:
        return get_workload(name).made_of or None
    except ValueError:                          # a workload registered in another process
        return None


def _measured(hw: MachineLike, knob: str, value: Any, baseline: Any, why: Dict[Tuple[Any, Any, str], str],
              than: str) -> Expected:
    """A CPU direction from ``tfwb.advice.measured``: the one measured on this kind of CPU for a model
    made like the baseline's, with its mechanism; else no direction, saying what was measured."""
    kind, made_of = measured.cpu_kind(hw), _made_of(baseline)
    found = measured.evidence(kind, knob, value, made_of)
    if found is None:
        return Expected(None, measured.not_measured(kind, knob, value, made_of), than)
    direction, text = found
    mechanism = why.get((value, kind, direction)) if direction else None
    return Expected(direction, text + (f": {mechanism}" if mechanism else ""), than)


def _precision_cpu(hw: MachineLike, value: str, baseline: Any) -> Expected:
    """A 16-bit policy on a CPU: the direction measured on this kind (``tfwb.advice.measured``).

    float16 with convolutions is slower on every CPU kind (the mechanism is TF's kernels, not the
    CPU's instructions: 2.55x on AVX2, 147-174x on AMX); otherwise a direction only where measured.
    """
    than = "float32"
    made_of = _made_of(baseline)
    if value == "mixed_float16" and measured.composition(made_of) == (measured.CONVOLUTIONS,):
        kind = measured.cpu_kind(hw)
        found = measured.evidence(kind, "mixed_precision", value, made_of)
        return Expected(SLOWER, F16_CONVOLUTIONS + "; " + (
            found[1] if found else measured.not_measured(kind, "mixed_precision", value, made_of)), than)
    return _measured(hw, "mixed_precision", value, baseline, _PRECISION_WHY, than)


#: Why a measured XLA direction holds on a CPU: (True, CPU kind, direction) -> the mechanism.
_JIT_WHY = {
    (True, measured.AVX2, FASTER): "XLA fuses the step's many small ops (attention, normalization) that TF's "
                                   "own Eigen kernels run one by one",
    (True, measured.AMX, FASTER): "XLA fuses the step's many small ops (attention, normalization) that TF runs "
                                  "one by one",
    (True, measured.AMX, SLOWER): "XLA's CPU convolutions lose to the oneDNN kernels TF's own path uses on "
                                  "this CPU",
}


def _jit(hw: MachineLike, kind: str, limit: Optional[str], baseline: Any = None) -> Expected:
    than = "jit_compile=False"
    if kind == "none":
        return Expected(None, "no TPU here: the run fails before any work; pick strategy='default'", than)
    if kind == "tpu":
        return Expected(SAME, "on a TPU every step is compiled by XLA anyway", than)
    if kind == "gpu":
        if limit == OVERHEAD:
            return Expected(FASTER, "the GPU idles between many small kernels; XLA fuses them into "
                            "a few launches (after a first step that compiles)", than)
        return Expected(NOT_SLOWER, "large matmuls and convolutions run in the same cuBLAS/cuDNN "
                        "kernels either way; XLA fuses the small ops around them (the first step "
                        "compiles)", than)
    e = _measured(hw, "jit_compile", True, baseline, _JIT_WHY, than)
    return Expected(e.direction, e.why + " (the first step compiles)", than)


def _steps_per_call(kind: str, limit: Optional[str]) -> Expected:
    than = "one step per call"
    if kind == "none":
        return Expected(None, "no TPU here: the run fails before any work; pick strategy='default'", than)
    if kind == "tpu" or (kind == "gpu" and limit == OVERHEAD):
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


def _input(hw: MachineLike, knob: str, value: Any, baseline: Any, limit: Optional[str]) -> Expected:
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
                on_cpu = _prefetch_on_cpu(hw, baseline, hidden, than) if _kind(hw, baseline) == "cpu" else None
                if on_cpu is not None:
                    return on_cpu
                return Expected(FASTER, f"prefetch overlaps input with the step, hiding up to {hidden:.0%} "
                                "of it here (the shorter of input wait and compute)", than)
            return Expected(NOT_SLOWER, f"prefetch can hide only the shorter of input wait and compute: "
                            f"{hidden:.0%} of the step here, too little to tell from noise", than)
    if limit == INPUT:
        how = "prefetch overlaps that wait with the step" if knob == "prefetch" else "this knob speeds the pipeline up"
        return Expected(FASTER, f"the run waits on input, and {how}", than)
    if limit in (COMPUTE, OVERHEAD):
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


def tf32_rule(hw: MachineLike, value: Any, baseline: Any, limit: Optional[str]) -> Expected:
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
    if limit not in (None, COMPUTE):
        return Expected(NOT_FASTER, why + ", which shows only on a step busy with them", than)
    return Expected(SLOWER, why, than)


def _kind(hw: MachineLike, baseline: Any) -> str:
    return target(hw, getattr(_config(baseline), "strategy", None))


def precision_rule(hw: MachineLike, value: Any, baseline: Any, limit: Optional[str]) -> Expected:
    """mixed_precision: a 16-bit policy against float32."""
    return _precision(hw, value, _kind(hw, baseline), limit, baseline)


def jit_rule(hw: MachineLike, value: Any, baseline: Any, limit: Optional[str]) -> Expected:
    """jit_compile=True: the step compiled by XLA."""
    if not value:
        raise ValueError("jit_compile=False is the baseline; turn it on to compare")
    return _downgrade(_jit(hw, _kind(hw, baseline), limit, baseline), limit)


def steps_rule(hw: MachineLike, value: Any, baseline: Any, limit: Optional[str]) -> Expected:
    """steps_per_execution > 1: several steps per call of the step function."""
    if value == 1:
        raise ValueError("steps_per_execution=1 is the baseline; compare a larger value")
    return _steps_per_call(_kind(hw, baseline), limit)


def strategy_rule(hw: MachineLike, value: Any, baseline: Any, limit: Optional[str]) -> Expected:
    """strategy: a distribution strategy against one device."""
    return _strategy(hw, value)


def sync_rule(hw: MachineLike, value: Any, baseline: Any, limit: Optional[str]) -> Expected:
    """sync=False: timing without a device sync."""
    return _sync(_kind(hw, baseline), value)


def input_rule(knob: str) -> Rule:
    """The rule of input knob ``knob`` (``prefetch``, ``data_source``...): it depends on the input wait."""
    def rule(hw: MachineLike, value: Any, baseline: Any, limit: Optional[str]) -> Expected:
        return _input(hw, knob, value, baseline, limit)
    rule.__name__ = f"{knob}_rule"
    return rule


def batch_rule(hw: MachineLike, value: Any, baseline: Any, limit: Optional[str]) -> Expected:
    """A larger batch is more work per step: only time per example can be compared."""
    return Expected(None, "a different batch is a different amount of work per step; compare time per "
                          "example (a larger batch lowers it until the device is busy)")


def timing_rule(hw: MachineLike, value: Any, baseline: Any, limit: Optional[str]) -> Expected:
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


