"""Tests of tfwb.expect: A/B and threshold checks, and hardware-dependent expectations.

Pure: no TensorFlow, no timing. Every hardware-dependent expectation is run against the
described machines of ``tfwb.hardware.DESCRIBED`` (a 2-core AVX2 CPU, AVX-512 CPUs with
BF16 and with AMX, a Colab T4, an A100, an H100, a TPU VM).
"""
from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import pytest

import tfwb
from tfwb import expect, stats
from tfwb.config import RunConfig
from tfwb.expect import FASTER, NOT_FASTER, NOT_SLOWER, SAME, SLOWER, AB, Check, Expected, ab, at_least, at_most, limit_of, equal, expected_for, change, target, where
from tfwb.hardware import DESCRIBED
from tfwb.records import RunResult, Sample

ROOT = Path(__file__).resolve().parents[1]
MACHINES = ("binder-2core-avx2", "cpu-2core-avx512-bf16", "cpu-2core-avx512-amx", "colab-t4",
            "a100", "h100", "l4", "tpu-vm", "tpu-v5e")
X = None  # no fixed expectation on that machine
C3 = (X, X, X)           # the CPUs with no workload named: a CPU direction depends on what the model is made of
C2 = (X, X)              # the two TPU VMs' hosts without strategy='tpu': the same

# The book's expectations, knob x machine (columns in MACHINES order), with no baseline:
# the limit is the row's, or unknown. Without strategy="tpu" a TPU VM's step runs on its
# host CPU (the last two columns); TPU_MATRIX has the TPU itself. On compute capability
# >= 8.0 (A100, H100, L4) float32 already runs on TF32 Tensor Cores, so a 16-bit policy is
# faster only on a compute-bound step: no fixed expectation while the limit is unknown. On a CPU,
# precision and XLA go a measured way only for a model made like a measured one (CPU_MEASURED).
MATRIX = {
    ("mixed_precision", "mixed_float16", None): C3 + (FASTER, X, X, X) + C2,
    ("mixed_precision", "mixed_float16", "compute"): C3 + (FASTER, FASTER, FASTER, FASTER) + C2,
    ("mixed_precision", "mixed_bfloat16", None): C3 + (NOT_FASTER, X, X, X) + C2,
    ("mixed_precision", "mixed_bfloat16", "compute"): C3 + (NOT_FASTER, FASTER, FASTER, FASTER) + C2,
    ("mixed_precision", "mixed_float16", "input"): C3 + (NOT_SLOWER, NOT_SLOWER, NOT_SLOWER, NOT_SLOWER) + C2,
    ("mixed_precision", "mixed_float16", "overhead"): C3 + (NOT_FASTER, NOT_FASTER, NOT_FASTER, NOT_FASTER) + C2,
    ("jit_compile", True, None): C3 + (NOT_SLOWER,) * 4 + C2,
    ("jit_compile", True, "overhead"): C3 + (FASTER,) * 4 + C2,
    ("steps_per_execution", 8, None): (NOT_SLOWER,) * 9,
    ("steps_per_execution", 8, "overhead"): (NOT_SLOWER,) * 3 + (FASTER,) * 4 + (NOT_SLOWER,) * 2,
    ("strategy", "mirrored", None): (SLOWER,) * 3 + (NOT_FASTER,) * 4 + (SLOWER,) * 2,
    ("strategy", "multi_worker", None): (SLOWER,) * 9,     # one GPU or none: the workers run on the CPU
    ("strategy", "tpu", None): (X,) * 9,
    ("prefetch", True, "input"): (FASTER,) * 9,
    ("prefetch", True, "compute"): (NOT_SLOWER,) * 9,
    ("prefetch", True, None): (NOT_SLOWER,) * 9,
    ("interleave", True, "input"): (FASTER,) * 9,
    ("cache", True, "overhead"): (NOT_SLOWER,) * 9,
    ("sync", False, None): (NOT_SLOWER,) * 3 + (FASTER,) * 4 + (NOT_SLOWER,) * 2,
    # tf32=False: slower only where float32 matmuls ran as TF32 (compute capability >= 8.0)
    ("tf32", False, None): (SAME,) * 4 + (SLOWER,) * 3 + (SAME,) * 2,
    ("tf32", False, "compute"): (SAME,) * 4 + (SLOWER,) * 3 + (SAME,) * 2,
    ("tf32", False, "overhead"): (SAME,) * 4 + (NOT_FASTER,) * 3 + (SAME,) * 2,
    ("tf32", False, "input"): (SAME,) * 4 + (NOT_FASTER,) * 3 + (SAME,) * 2,
}

# Under strategy="tpu" (the two TPU VMs): what the TPU itself should do.
TPU_MATRIX = {
    ("mixed_precision", "mixed_float16"): X,          # refused before any work: no float16 on a TPU
    ("mixed_precision", "mixed_bfloat16"): NOT_SLOWER,
    ("jit_compile", True): SAME,                      # XLA compiles every TPU step anyway
    ("steps_per_execution", 8): FASTER,
    ("sync", False): FASTER,
    ("tf32", False): SAME,
}


# On each CPU kind (a described machine's CPU standing in, with no GPU), per workload: (mixed_float16,
# mixed_bfloat16, jit_compile) against float32 without XLA. A direction only where measured
# (tfwb.advice.measured: AVX2 and AMX), except float16 with convolutions, slower on every CPU kind.
CPU_KINDS = ("binder-2core-avx2", "colab-t4", "cpu-2core-avx512-bf16", "cpu-2core-avx512-amx", "arm-graviton3",
             "apple-m2")
UNMEASURED = {"images": (SLOWER, X, X), "cifar10": (SLOWER, X, X), "mlp": (X, X, X), "text": (X, X, X)}
CPU_MEASURED = {
    "binder-2core-avx2": {"images": (SLOWER, SLOWER, X), "cifar10": (SLOWER, SLOWER, X), "mlp": (X, X, X),
                          "text": (X, SLOWER, FASTER)},
    "cpu-2core-avx512-amx": {"images": (SLOWER, FASTER, SLOWER), "cifar10": (SLOWER, FASTER, SLOWER),
                             "mlp": (SLOWER, X, X), "text": (X, X, FASTER)},
    **{kind: UNMEASURED for kind in ("colab-t4", "cpu-2core-avx512-bf16", "arm-graviton3", "apple-m2")},
}


@pytest.mark.parametrize("workload", ("images", "cifar10", "mlp", "text"))
@pytest.mark.parametrize("kind", CPU_KINDS)
def test_each_cpu_kind_states_only_what_was_measured_on_it(kind, workload):
    from tfwb.hardware import with_cpu_of

    hw = with_cpu_of({"gpus": [], "cpu_count": 2}, kind)
    base = RunConfig(workload=workload, data_source="memory")
    got = tuple(expected_for(hw, knob, value, base)
                for knob, value in (("mixed_precision", "mixed_float16"), ("mixed_precision", "mixed_bfloat16"),
                                    ("jit_compile", True)))
    assert tuple(e.direction for e in got) == CPU_MEASURED[kind][workload], [e.why for e in got]
    measured_here = kind in ("binder-2core-avx2", "cpu-2core-avx512-amx")
    for e in got:
        assert ("not measured on this kind of CPU" in e.why) == (not measured_here), e.why
        assert "benchmarks/results/knob_effects_" in e.why or not measured_here
        if e.direction in (FASTER, SLOWER) and measured_here and "convolutions" not in e.why:
            assert f" on {workload}" in e.why or workload == "cifar10", e.why


def test_float16_with_convolutions_is_slower_whatever_float16_instructions_the_cpu_lists():
    for flags in ((), ("avx2",), ("avx2", "avx512f", "avx512_fp16"), ("avx2", "avx512f", "amx_fp16"),
                  ("avx2", "avx_ne_convert"), ("asimd", "fphp", "bf16")):
        e = expected_for({"gpus": [], "cpu_flags": flags, "cpu_count": 2}, "mixed_precision", "mixed_float16",
                         RunConfig(workload="images"))
        assert e.direction == SLOWER and "no fast float16 path" in e.why, (flags, e.why)


def test_a_workload_of_unknown_make_gets_no_cpu_direction_and_the_measured_figures():
    import tfwb.workloads as w

    w.register_workload("g_unknown_make", model_fn=lambda cfg: None, data_fn=lambda cfg: None)
    w.register_workload("g_dense_make", model_fn=lambda cfg: None, data_fn=lambda cfg: None, made_of=("dense",))
    try:
        amx = DESCRIBED["cpu-2core-avx512-amx"]
        e = expected_for(amx, "mixed_precision", "mixed_float16", RunConfig(workload="g_unknown_make"))
        assert e.direction is None and "147x slower" in e.why and "made_of" in e.why
        dense = expected_for(amx, "mixed_precision", "mixed_float16", RunConfig(workload="g_dense_make"))
        assert dense.direction == SLOWER and "8.0x slower (CI 7.3-10.1x) on mlp" in dense.why
    finally:
        w.unregister_workload("g_unknown_make")
        w.unregister_workload("g_dense_make")


@pytest.mark.parametrize("machine", ("tpu-vm", "tpu-v5e"))
@pytest.mark.parametrize("knob_name, value", list(TPU_MATRIX))
def test_expected_direction_on_the_tpu_itself(knob_name, value, machine):
    e = expected_for(DESCRIBED[machine], knob_name, value, RunConfig(strategy="tpu"))
    assert e.direction == TPU_MATRIX[knob_name, value], e.text()


@pytest.mark.parametrize("machine", MACHINES)
@pytest.mark.parametrize("knob_name, value, limit", list(MATRIX))
def test_expected_direction_per_knob_and_machine(knob_name, value, limit, machine):
    want = MATRIX[knob_name, value, limit][MACHINES.index(machine)]
    e = expected_for(DESCRIBED[machine], knob_name, value, limit=limit)
    assert e.direction == want, e.text()
    assert e.why and e.than
    assert e.text().startswith("no fixed expectation: " if want is None else f"{want} ")


AMPERE_WHY = ("float32 matmuls and convolutions already run on TF32 Tensor Cores at compute capability {cc}; "
              "float16 Tensor Cores run them at about twice TF32's rate and halve activation memory traffic, "
              "which shows only on a step big enough to keep the GPU busy; small models gain little "
              "(TensorFlow's mixed-precision guide). Measure a baseline: its bound decides")

# The sentence a reader of chapter 00 sees before the mixed_float16 run on its images CNN, per machine.
F16_CONV = ("TF's CPU convolutions and their gradients have no fast float16 path, whatever float16 instructions "
            "the CPU lists; ")
AVX2_IMAGES = ("measured on an AVX2 CPU without AVX-512 (benchmarks/results/knob_effects_avx2.md): 2.55x slower "
               "(CI 2.26-2.77x) on images")
AMX_CONV = "147x slower (CI 124-229x) on images, 174x slower (CI 98-209x) on cifar10"
AMX = "an AVX-512 BF16/FP16 CPU with AMX (Sapphire Rapids class)"
MIXED_FLOAT16 = {
    "binder-2core-avx2":
        "Expecting: mixed_precision='mixed_float16' on this CPU (2 cores, AVX2): slower (" + F16_CONV + AVX2_IMAGES
        + ").",
    "cpu-2core-avx512-bf16":
        "Expecting: mixed_precision='mixed_float16' on this CPU (2 cores, AVX-512, BF16): slower (" + F16_CONV
        + "not measured on this kind of CPU (an AVX-512 BF16 CPU without AMX): " + AMX + ", the nearest measured "
        "kind, measured " + AMX_CONV + ").",
    "cpu-2core-avx512-amx":
        "Expecting: mixed_precision='mixed_float16' on this CPU (2 cores, AVX-512, BF16, FP16, AMX): slower ("
        + F16_CONV + "measured on " + AMX + " (benchmarks/results/knob_effects_amx.md): " + AMX_CONV + ").",
    "colab-t4":
        "Expecting: mixed_precision='mixed_float16' on Tesla T4 (compute capability 7.5): faster "
        "(float16 Tensor Cores (compute capability 7.5) run matmuls and convolutions several times "
        "faster than float32 and halve activation memory, on a step busy with them).",
    # compute capability >= 8.0: float32 already on TF32 Tensor Cores; no direction without a measured limit
    **{m: f"Expecting: mixed_precision='mixed_float16' on {name} (compute capability {cc}): no fixed "
          f"direction ({AMPERE_WHY.format(cc=cc)})."
       for m, name, cc in (("a100", "NVIDIA A100-SXM4-40GB", "8.0"), ("h100", "NVIDIA H100 80GB HBM3", "9.0"),
                           ("l4", "NVIDIA L4", "8.9"))},
    "tpu-vm":     # without strategy='tpu' the step runs on the host CPU
        "Expecting: mixed_precision='mixed_float16' on this TPU VM's host CPU (96 cores, AVX-512): slower ("
        + F16_CONV + "not measured on this kind of CPU (an AVX-512 CPU without bfloat16 instructions): an AVX2 "
        "CPU without AVX-512, the nearest measured kind, measured 2.55x slower (CI 2.26-2.77x) on images).",
    "tpu-v5e":
        "Expecting: mixed_precision='mixed_float16' on this TPU VM's host CPU (24 cores, AVX2): slower ("
        + F16_CONV + AVX2_IMAGES + ").",
}


@pytest.mark.parametrize("machine", MACHINES)
def test_the_mixed_float16_sentence_each_machine_prints(machine):
    images = RunConfig(workload="images")
    assert str(change(DESCRIBED[machine], images, mixed_precision="mixed_float16")) == MIXED_FLOAT16[machine]


@pytest.mark.parametrize("machine, measured_s, verdict", [
    ("binder-2core-avx2", [2.55] * 9, "agreed"),         # measured: 2.55x slower on the images CNN (AVX2)
    ("cpu-2core-avx512-bf16", [1.6] * 9, "agreed"),      # convolutions in float16: slower on every CPU
    ("colab-t4", [0.6] * 9, "agreed"),                   # Tensor Cores
    ("h100", [0.5] * 9, "cannot tell"),                  # no measured limit: no fixed expectation
    ("tpu-vm", [2.0] * 9, "agreed"),                     # the host CPU, without strategy='tpu': slower
    ("cpu-2core-avx512-amx", [147.0] * 9, "agreed"),     # measured: 147x slower on the images CNN (AMX)
])
def test_each_machine_agrees_with_what_it_should_measure(machine, measured_s, verdict):
    float32_s = [1.0] * 9
    images = RunConfig(workload="images")
    c = change(DESCRIBED[machine], images, mixed_precision="mixed_float16").check(float32_s, measured_s)
    assert c.result == verdict, str(c)


def test_a_check_written_for_a_cpu_fails_a_t4_reader_and_knob_does_not():
    float32_s, t4_half_s = [1.0] * 9, [0.6] * 9
    written_for_cpu = ab("mixed_float16 on this machine", "slower").check(float32_s, t4_half_s)
    assert written_for_cpu.result == "did NOT agree"
    assert change(DESCRIBED["colab-t4"], mixed_precision="mixed_float16").check(float32_s, t4_half_s).agreed


# -- where the step runs -------------------------------------------------------------------
def test_target_and_where():
    tpu, t4 = DESCRIBED["tpu-vm"], DESCRIBED["colab-t4"]
    assert [target(tpu), target(tpu, "tpu"), target(tpu, "default")] == ["cpu", "tpu", "cpu"]
    assert [target(t4), target(t4, "tpu"), target(DESCRIBED["binder-2core-avx2"])] == ["gpu", "none", "cpu"]
    assert where(tpu, "default") == "this TPU VM's host CPU (96 cores, AVX-512)"
    assert where({"gpus": [{"name": "A"}, {"name": "A"}]}) == "2x A"
    assert where({}) == "this CPU"


def test_a_tpu_vm_without_the_tpu_strategy_gets_its_host_cpu_rules():
    cfg = RunConfig(strategy="default", workload="images")
    e = expected_for(DESCRIBED["tpu-vm"], "mixed_precision", "mixed_bfloat16", cfg)
    assert e.direction is None and "not measured on this kind of CPU (an AVX-512 CPU without bfloat16" in e.why
    on_tpu = expected_for(DESCRIBED["tpu-vm"], "mixed_precision", "mixed_bfloat16", RunConfig(strategy="tpu"))
    assert on_tpu.direction == NOT_SLOWER
    assert change(DESCRIBED["tpu-vm"], cfg, mixed_precision="mixed_bfloat16").claim.endswith(
        "on this TPU VM's host CPU (96 cores, AVX-512)")


def test_gpu_rules_follow_compute_capability():
    def gpu(cc):
        return {"gpus": [{"name": "G", "compute_capability": cc}]}

    assert expected_for(gpu((6, 1)), "mixed_precision", "mixed_float16").direction == NOT_FASTER
    assert expected_for(gpu((7, 0)), "mixed_precision", "mixed_float16").direction == FASTER
    assert expected_for(gpu([7, 5]), "mixed_precision", "mixed_bfloat16").direction == NOT_FASTER  # JSON list
    assert expected_for(gpu((8, 6)), "mixed_precision", "mixed_bfloat16", limit="compute").direction == FASTER
    assert expected_for(gpu((8, 6)), "mixed_precision", "mixed_bfloat16").direction is None   # limit unknown
    assert expected_for(gpu(None), "mixed_precision", "mixed_float16").direction is None
    two = {"gpus": [{"name": "P4", "compute_capability": (6, 1)}, {"name": "T4", "compute_capability": (7, 5)}]}
    assert expect.best_compute_capability(two) == (7, 5)
    assert expected_for(two, "strategy", "mirrored").direction is None


def test_parallel_map_exceptions():
    hw = DESCRIBED["h100"]
    gen = RunConfig(data_source="generator")
    assert "GIL" in expected_for(hw, "parallel_map", True, gen, limit="input").why
    assert expected_for(hw, "parallel_map", True, gen, limit="input").direction == NOT_SLOWER
    one_core = DESCRIBED["binder-2core-avx2"].replace(cpu_count=1)
    assert expected_for(one_core, "parallel_map", True, limit="input").direction == NOT_SLOWER
    assert expected_for(hw, "data_source", "memory", gen, limit="input").than == "data_source='generator'"


@pytest.mark.parametrize("knob_name, value", [
    ("mixed_precision", "off"), ("mixed_precision", "float64"), ("jit_compile", False),
    ("steps_per_execution", 1), ("strategy", "default"), ("strategy", "horovod"),
    ("prefetch", False), ("data_source", "generator"), ("sync", True), ("learning_rate", 0.1),
    ("tf32", True),
])
def test_expected_for_refuses_baselines_and_unknown_knobs(knob_name, value):
    with pytest.raises(ValueError, match=knob_name if knob_name != "learning_rate" else "knob="):
        expected_for(DESCRIBED["h100"], knob_name, value)


def test_several_input_knobs_state_a_shared_reason_once():
    slow_input = RunResult(config=RunConfig(data_source="files"), step_times_s=(0.1,) * 10,
                           input_wait_s=(0.09,) * 10)
    e = expect.change(DESCRIBED["binder-2core-avx2"], slow_input, interleave=True, parallel_map=True)
    assert "speeds the pipeline up" in e.why
    reasons = e.why.split("; ")
    assert len(reasons) == len(set(reasons)), reasons


def test_parameter_server_on_one_machine_is_expected_slower():
    e = expected_for(DESCRIBED["binder-2core-avx2"], "strategy", "parameter_server")
    assert e.direction == SLOWER and "gRPC" in e.why


def test_expected_for_refuses_an_unknown_limit():
    with pytest.raises(ValueError, match="limit='gpu'"):
        expected_for(DESCRIBED["h100"], "jit_compile", True, limit="gpu")


def test_expected_for_takes_the_02_keyword_bound_with_a_deprecation_warning():
    with pytest.warns(DeprecationWarning, match=r"expected_for\(bound=...\) is now expected_for\(limit=...\)"):
        e = expected_for(DESCRIBED["h100"], "jit_compile", True, bound="overhead")
    assert e == expected_for(DESCRIBED["h100"], "jit_compile", True, limit="overhead")


def test_expected_refuses_an_unknown_direction():
    with pytest.raises(ValueError, match="direction='quicker'"):
        Expected("quicker", "why")


# -- what the baseline run says ----------------------------------------------------------------
def result(step_s=0.1, wait_s=0.0, n=9, gpu_util=None, **cfg) -> RunResult:
    samples = ()
    if gpu_util is not None:
        samples = tuple(Sample(t_s=i * 0.1, gpu_util_pct=(gpu_util,)) for i in range(n))
    return RunResult(config=RunConfig(**cfg), step_times_s=(step_s,) * n, input_wait_s=(wait_s,) * n,
                     samples=samples)


def test_limit_of():
    assert limit_of(result(wait_s=0.02)) == "input"                 # exactly 20 %
    assert limit_of(result(wait_s=0.019)) == "compute"
    assert limit_of(result(gpu_util=30.0)) == "overhead"
    assert limit_of(result(gpu_util=97.0)) == "compute"
    assert limit_of(RunResult(config=RunConfig(), status="failed")) is None
    assert limit_of(None) is None


def test_a_measured_baseline_decides_the_limit():
    t4 = DESCRIBED["colab-t4"]
    assert expected_for(t4, "jit_compile", True, result(gpu_util=30.0)).direction == FASTER
    assert expected_for(t4, "mixed_precision", "mixed_float16", result(wait_s=0.05)).direction == NOT_SLOWER
    assert expected_for(t4, "mixed_precision", "mixed_float16", RunConfig(data_source="memory")).direction == FASTER
    assert expected_for(t4, "mixed_precision", "mixed_float16", result(gpu_util=30.0)).direction == NOT_FASTER


def test_prefetch_expects_at_most_the_shorter_of_wait_and_compute():
    hw = DESCRIBED["binder-2core-avx2"]
    balanced = expected_for(hw, "prefetch", True, result(step_s=0.1, wait_s=0.04))
    assert balanced.direction == FASTER and "40%" in balanced.why
    starved = expected_for(hw, "prefetch", True, result(step_s=0.1, wait_s=0.095))   # compute 5 ms of 100
    assert starved.direction == NOT_SLOWER and "5%" in starved.why


def test_on_a_cpu_prefetch_hides_input_only_on_cores_the_step_leaves_idle():
    """Issue 35: chapter 07 expected prefetch "faster, hiding up to 15 %" of a CNN whose step kept the
    cores busy, and every prefetch measurement on the page was slower."""
    def cpu_run(busy_pct, machine_pct=None):
        """15 ms of 100 waiting on input; the process's CPU in % of one core, every program's in % of all."""
        samples = tuple(Sample(t_s=i * 0.1, cpu_process_pct=busy_pct, cpu_system_pct=machine_pct) for i in range(9))
        return replace(result(step_s=0.1, wait_s=0.015), samples=samples)

    for name in ("binder-2core-avx2", "cpu-2core-avx512-amx", "arm-graviton3"):
        hw = DESCRIBED[name]                                   # 2 cores each
        saturated = expected_for(hw, "prefetch", True, cpu_run(190.0))
        assert saturated.direction is None and "1.9 of 2 cores" in saturated.why, (name, saturated)
        idle = expected_for(hw, "prefetch", True, cpu_run(100.0))   # one core idle while it computes
        assert idle.direction == FASTER and "15%" in idle.why and "1.0 of 2 cores" in idle.why, (name, idle)
        shared = expected_for(hw, "prefetch", True, cpu_run(100.0, machine_pct=95.0))   # another program's core
        assert shared.direction is None and "1.9 of 2 cores" in shared.why, (name, shared)
    # where the step runs on a GPU the pipeline's cores are not the step's: the plain rule stands
    assert expected_for(DESCRIBED["colab-t4"], "prefetch", True, cpu_run(190.0)).direction == FASTER
    # no CPU share measured: the plain rule too
    assert expected_for(DESCRIBED["binder-2core-avx2"], "prefetch", True,
                        result(step_s=0.1, wait_s=0.015)).direction == FASTER


def test_knob_combines_input_knobs_and_refuses_opposites():
    hw = DESCRIBED["colab-t4"]
    e = change(hw, result(step_s=0.1, wait_s=0.05), prefetch=True, interleave=True)
    assert e.expected == FASTER and not e.compute
    assert e.claim == "prefetch=True, interleave=True on Tesla T4 (compute capability 7.5)"
    with pytest.raises(ValueError, match="one at a time"):
        change(hw, mixed_precision="mixed_float16", strategy="mirrored")
    with pytest.raises(ValueError, match="at least one knob"):
        change(hw)


def test_a_compute_lesson_hidden_by_input_wait_cannot_tell():
    e = change(DESCRIBED["colab-t4"], mixed_precision="mixed_float16")
    assert e.compute and e.expected == FASTER
    c = e.check(result(step_s=0.1, wait_s=0.02), result(step_s=0.1, wait_s=0.09))
    assert c.agreed is None and c.result == "cannot tell"
    assert "data_source='memory'" in str(c)
    in_memory = e.check(result(step_s=0.1), result(step_s=0.1))     # no input wait: a real miss
    assert in_memory.result == "did NOT agree"
    staged = e.check(result(step_s=0.1, wait_s=0.02, data_source="memory"),
                     result(step_s=0.1, wait_s=0.09, data_source="memory"))
    assert staged.result == "cannot tell"
    assert "staged in memory" in str(staged) and "data_source='memory'" not in str(staged)


# -- A/B checks ---------------------------------------------------------------------------------
BASE, HALF = [2.0] * 9, [1.0] * 9


@pytest.mark.parametrize("expected, candidate, agreed", [
    (FASTER, HALF, True), (SLOWER, HALF, False), (NOT_SLOWER, HALF, True), (NOT_FASTER, HALF, False),
    (SAME, HALF, False), (SAME, BASE, True), (NOT_SLOWER, BASE, True), (NOT_FASTER, BASE, True),
    (FASTER, BASE, False),
])
def test_ab_directions(expected, candidate, agreed):
    assert ab("claim", expected).check(BASE, candidate).agreed is agreed


def test_ab_sentence_and_tfwb_check_are_the_same():
    text = "Expected: caching helps (faster). Measured: 2.00x faster. Result: agreed."
    assert str(ab("caching helps", "faster").check(BASE, HALF)) == text
    assert str(tfwb.check("caching helps", BASE, HALF, "faster")) == text
    assert isinstance(tfwb.check("x", BASE, HALF, "faster"), Check)


def test_ab_with_an_expected_keeps_its_reason():
    e = ab("prefetch", Expected(FASTER, "it overlaps"))
    assert isinstance(e, AB) and e.why == "it overlaps"
    assert str(e) == "Expecting: prefetch: faster (it overlaps)."


def test_ab_refuses_an_unknown_direction():
    with pytest.raises(ValueError, match="expected='quicker'"):
        ab("claim", "quicker")


def test_ab_takes_results_call_times_and_comparisons():
    ok = RunResult(config=RunConfig(), step_times_s=tuple(BASE))
    failed = RunResult(config=RunConfig(), status="failed", error="OOM", step_times_s=(1.0,) * 9)

    class CallTimes:
        times_s = tuple(HALF)

    assert ab("x", FASTER).check(ok, CallTimes()).agreed is True
    c = ab("x", FASTER).check(ok, failed)
    assert c.agreed is None and str(c) == ("Expected: x (faster). Measured: nothing measured: a run failed "
                                           "(OOM). Result: cannot tell.")
    rounds = stats.compare_rounds([1.0] * 8, [0.8] * 8)
    assert ab("x", FASTER).check(rounds).agreed is True
    few = ab("x", FASTER).check([2.0] * 3, [1.0] * 3)
    assert few.agreed is None and few.result == stats.TOO_FEW


def test_no_fixed_expectation_reports_the_measurement_and_cannot_tell():
    c = ab("x", None).check(BASE, HALF)
    assert str(c) == ("Expected: x (no fixed direction). Measured: 2.00x faster. "
                      "Result: cannot tell (no fixed expectation on this hardware).")


# -- threshold and equality checks ----------------------------------------------------------------
def test_at_least_and_at_most_are_inclusive():
    assert at_least("x", 5, "x").check(5.0).agreed is True
    assert at_least("x", 5, "x").check(4.99).agreed is False
    assert at_most("x", 5, "%").check(5.0).agreed is True
    assert at_most("x", 5, "%").check(5.01).agreed is False


@pytest.mark.parametrize("value, text", [
    (38.21, "38.2x"), (5.0, "5x"), (1234.5, "1,234x"), (0.5, "0.50x"), (0.004, "0.004x"),
])
def test_threshold_formats_numbers(value, text):
    assert at_least("x", 5, "x").check(value).measured == text


def test_threshold_sentences():
    assert str(at_least("the first call traces", 5, "x").check(38.2)) == (
        "Expected: the first call traces (at least 5x). Measured: 38.2x. Result: agreed.")
    assert str(at_most("the sync's own cost", 100, "µs").check(230)) == (
        "Expected: the sync's own cost (at most 100 µs). Measured: 230 µs. Result: did NOT agree.")
    assert str(at_most("x", 5, "%", why="the profiler's threshold")) == (
        "Expecting: x: at most 5% (the profiler's threshold).")
    for missing in (None, math.nan):
        c = at_least("x", 5).check(missing)
        assert c.agreed is None and str(c) == "Expected: x (at least 5). Measured: nothing measured. Result: cannot tell."


def test_equal():
    e = equal("the naive run", "highly input-bound")
    assert str(e.check("highly input-bound")).endswith("Result: agreed.")
    assert str(e.check("moderately input-bound")) == (
        "Expected: the naive run (highly input-bound). Measured: moderately input-bound. "
        "Result: did NOT agree.")
    assert equal("reads", 4).check(12).agreed is False


# -- the table -------------------------------------------------------------------------------------
def test_table_lists_every_machine_and_change():
    text = expect.table()
    for name in MACHINES:
        assert f"## {name}: " in text and f" {name} |" in text
    for label, *_ in expect.TABLE_CHANGES:
        assert text.count(f"| {label} | ") == 1 + len(DESCRIBED)    # the summary row, a row per machine
    # no workload named: a CPU states no direction for precision (it depends on the model's make)
    assert ("| mixed_precision='mixed_float16' | - | - | - | faster | - | - | - | - | - | - | - |"
            in text)
    assert ("| mixed_precision='mixed_float16', compute-bound run | - | - | - | faster | faster | "
            "faster | faster | - | - | - | - |" in text)
    assert "| under strategy='tpu': steps_per_execution=8 | - | - | - | - | - | - | - | faster | faster |" in text


def test_the_committed_table_is_up_to_date():
    path = ROOT / "benchmarks" / "results" / "expectations.md"
    assert path.read_text(encoding="utf-8") == expect.table(), \
        "run: python benchmarks/expectations.py"


@pytest.mark.parametrize("flags, kind", [
    ((), "a CPU that lists no features"),                  # no /proc/cpuinfo: no claim about its kind
    (("fp", "asimd"), "an Arm CPU"),                       # Arm without half or bfloat16 arithmetic
    (("fp", "asimd", "fphp", "bf16"), "an Arm CPU"),       # Arm v8.2+ with both: not measured either
    (("avx2", "avx512f", "avx512bw", "avx512_fp16"), "an AVX-512 CPU without bfloat16 instructions"),
])
def test_cpus_never_measured_say_so_instead_of_borrowing_a_direction(flags, kind):
    hw = {"gpus": [], "cpu_flags": flags, "cpu_count": 4}
    for workload in ("mlp", "text"):
        for knob, value in (("mixed_precision", "mixed_float16"), ("mixed_precision", "mixed_bfloat16"),
                            ("jit_compile", True)):
            e = expected_for(hw, knob, value, RunConfig(workload=workload))
            assert e.direction is None, e.why
            assert e.why.startswith(f"not measured on this kind of CPU ({kind}): ") and "nearest measured" in e.why


def test_float16_on_a_tpu_is_refused_not_expected_slower():
    e = expected_for(DESCRIBED["tpu-vm"], "mixed_precision", "mixed_float16", RunConfig(strategy="tpu"))
    assert e.direction is None and "refuses this policy with strategy='tpu' before any work" in e.why


@pytest.mark.parametrize("machine, measure, expected", [
    ("colab-t4", "peak", "at most 1x"), ("h100", "batch", "at least 1x"),
    ("binder-2core-avx2", "peak", "no fixed expectation"),
    ("cpu-2core-avx512-bf16", "batch", "no fixed expectation"),
    ("tpu-vm", "peak", "no fixed expectation"),      # its host CPU without strategy='tpu' (tested below)
    ("tpu-vm", "batch", "no fixed expectation"),
])
def test_precision_memory_expectation_per_machine(machine, measure, expected):
    e = expect.precision_memory(DESCRIBED[machine], "mixed_bfloat16", measure=measure)
    assert e.expected == expected
    assert e.claim.startswith(f"mixed_bfloat16's {'peak memory' if measure == 'peak' else 'largest batch'} "
                              "over float32's, on ")


def test_precision_memory_checks_and_cannot_tell():
    t4 = expect.precision_memory(DESCRIBED["colab-t4"], "mixed_float16")
    assert t4.check(0.6).agreed is True and t4.check(1.2).agreed is False
    assert str(t4).startswith("Expecting: mixed_float16's peak memory over float32's, on Tesla T4")
    cpu = expect.precision_memory(DESCRIBED["binder-2core-avx2"], "mixed_float16", measure="batch")
    c = cpu.check(None)
    assert c.agreed is None and c.result == "cannot tell" and c.measured == "nothing measured"
    assert "searches batches on a GPU only" in str(c)
    assert cpu.check(1.3).measured == "1.30x" and cpu.check(1.3).agreed is None
    on_tpu = expect.precision_memory(DESCRIBED["tpu-vm"], "mixed_bfloat16", RunConfig(strategy="tpu"))
    assert on_tpu.expected == "at most 1x"
    refused = expect.precision_memory(DESCRIBED["tpu-vm"], "mixed_float16", RunConfig(strategy="tpu"))
    assert refused.expected == "no fixed expectation" and "fails before any work" in refused.why


@pytest.mark.parametrize("value, measure, match", [("off", "peak", "mixed_precision='off'"),
                                                    ("mixed_float16", "rss", "measure='rss'")])
def test_precision_memory_rejects_bad_input(value, measure, match):
    with pytest.raises(ValueError, match=match):
        expect.precision_memory(DESCRIBED["h100"], value, measure=measure)


# -- the rules table and the tf32 rule ---------------------------------------------------------
def test_every_rule_is_a_runconfig_knob_or_sync_and_known_is_the_table():
    from tfwb.config import KNOBS
    from tfwb.expect import RULES

    assert expect.KNOWN == tuple(RULES)
    assert set(RULES) - set(KNOBS) == {"sync"}


def test_compute_and_input_knobs_come_from_the_declared_roles():
    from tfwb.config import KNOBS

    assert expect.COMPUTE_KNOBS == tuple(n for n, k in KNOBS.items() if k.role == "compute")
    assert {"mixed_precision", "jit_compile", "steps_per_execution", "tf32"} <= set(expect.COMPUTE_KNOBS)
    assert {"prefetch", "cache", "parallel_map", "interleave", "data_source"} <= set(expect.INPUT_KNOBS)
    assert not set(expect.COMPUTE_KNOBS) & set(expect.INPUT_KNOBS)


def test_a_rule_takes_hardware_value_baseline_and_limit():
    from tfwb.expect import RULES

    e = RULES["tf32"](DESCRIBED["a100"], False, RunConfig(), None)
    assert (e.direction, e.than) == (SLOWER, "tf32=True (TensorFlow's default)")
    assert RULES["tf32"](DESCRIBED["a100"], False, RunConfig(), "overhead").direction == NOT_FASTER


def test_tf32_under_a_mixed_policy_or_an_unknown_gpu():
    a100 = DESCRIBED["a100"]
    e = expected_for(a100, "tf32", False, RunConfig(mixed_precision="mixed_bfloat16"))
    assert e.direction == NOT_FASTER and "16 bits" in e.why
    unknown = {"gpus": [{"name": "GPU", "compute_capability": None}]}
    assert expected_for(unknown, "tf32", False).direction is None
    assert expected_for(DESCRIBED["h100"], "tf32", False, RunConfig(strategy="tpu")).direction is None


def test_tf32_is_a_compute_lesson_and_its_check_agrees_on_a_cpu():
    e = change(DESCRIBED["binder-2core-avx2"], RunConfig(), tf32=False)
    assert e.compute and e.expected == SAME
    assert e.check([1.0, 1.01, 0.99] * 5, [1.0, 0.99, 1.01] * 5).agreed is True
    assert change(DESCRIBED["h100"], RunConfig(), tf32=False).check([1.0] * 9, [2.0] * 9).agreed is True
    assert change(DESCRIBED["h100"], RunConfig(), tf32=False).check([1.0] * 9, [1.0] * 9).agreed is False


def test_the_machine_table_shows_tf32():
    text = expect.table()
    row = next(line for line in text.splitlines() if line.startswith("| tf32=False"))
    assert row.count("slower") == 3 and row.count("no significant difference") == len(DESCRIBED) - 3



# -- item 7: mixed precision where float32 already runs on TF32 Tensor Cores -------------------
def measured(util_pct, wait_s=0.001, **cfg) -> RunResult:
    """A measured baseline: 20 ms steps, the GPU busy util_pct % of the time (None: NVML refused)."""
    samples = tuple(Sample(t_s=float(i), gpu_util_pct=(util_pct,)) for i in range(5))
    return RunResult(config=RunConfig(**cfg), step_times_s=(0.02,) * 5, input_wait_s=(wait_s,) * 5,
                     samples=samples)


@pytest.mark.parametrize("machine", ("a100", "h100", "l4"))
@pytest.mark.parametrize("policy", ("mixed_float16", "mixed_bfloat16"))
def test_on_tf32_gpus_the_measured_limit_decides_mixed_precision(machine, policy):
    hw = DESCRIBED[machine]
    busy = expected_for(hw, "mixed_precision", policy, measured(97.0))
    assert busy.direction == FASTER and "kept the GPU busy (97 % of the time)" in busy.why
    assert expected_for(hw, "mixed_precision", policy, measured(20.0)).direction == NOT_FASTER   # idles
    refused = expected_for(hw, "mixed_precision", policy, measured(None))     # a MIG slice: no utilization
    assert refused.direction is None and "NVML did not report" in refused.why
    waits = expected_for(hw, "mixed_precision", policy, measured(97.0, wait_s=0.015))
    assert waits.direction == NOT_SLOWER and "waits on input" in waits.why
    config_only = expected_for(hw, "mixed_precision", policy, RunConfig(data_source="memory"))
    assert config_only.direction is None and "small models gain little" in config_only.why
    assert "already run on TF32 Tensor Cores" in config_only.why


def test_on_a_t4_float16_stays_faster_without_a_measured_limit():
    # no TF32 before compute capability 8.0: float32 runs on the 8x slower FP32 units (T4 datasheet)
    e = expected_for(DESCRIBED["colab-t4"], "mixed_precision", "mixed_float16", RunConfig(data_source="memory"))
    assert e.direction == FASTER and "TF32" not in e.why


# -- each rule against the published facts (the table's source column) ------------------------
# NVIDIA: compute capability and Tensor Core types (CUDA C++ Programming Guide, warp matrix
# functions; the T4, A100, H100 and L4 datasheets): float16 from 7.0, bfloat16 and TF32 from 8.0.
GPU_FACTS = {  # machine: (compute capability, float16 Tensor Cores, bfloat16 Tensor Cores, TF32)
    "colab-t4": ((7, 5), True, False, False),
    "a100": ((8, 0), True, True, True),
    "h100": ((9, 0), True, True, True),
    "l4": ((8, 9), True, True, True),
}


@pytest.mark.parametrize("machine", list(GPU_FACTS))
def test_gpu_rules_match_nvidia_tensor_core_facts(machine):
    cc, fp16, bf16, tf32 = GPU_FACTS[machine]
    hw = DESCRIBED[machine]
    assert expect.best_compute_capability(hw) == cc
    for policy, has in (("mixed_float16", fp16), ("mixed_bfloat16", bf16)):
        e = expected_for(hw, "mixed_precision", policy, limit="compute")
        assert (e.direction == FASTER) == has, e.text()          # faster on a busy step iff the units exist
        if not has:
            assert e.direction == NOT_FASTER
    assert expected_for(hw, "tf32", False).direction == (SLOWER if tf32 else SAME)
    # TF32 on by default (TensorFlow >= 2.4): without a measured limit a 16-bit policy has no direction
    assert (expected_for(hw, "mixed_precision", "mixed_float16").direction is None) == tf32
    assert "NVIDIA" in expect.source("mixed_precision", "gpu") and "TF32" in expect.source("tf32", "gpu")


def test_tpu_rules_match_the_tensorflow_and_cloud_tpu_facts():
    # TensorFlow's mixed-precision guide: mixed_bfloat16 on TPUs; float16 is not supported there.
    for machine in ("tpu-vm", "tpu-v5e"):
        on_tpu = RunConfig(strategy="tpu")
        assert expected_for(DESCRIBED[machine], "mixed_precision", "mixed_float16", on_tpu).direction is None
        assert expected_for(DESCRIBED[machine], "mixed_precision", "mixed_bfloat16", on_tpu).direction == NOT_SLOWER
        assert target(DESCRIBED[machine]) == "cpu" and target(DESCRIBED[machine], "tpu") == "tpu"
    assert "mixed_bfloat16" in expect.source("mixed_precision", "tpu")


def test_bfloat16_rules_match_what_each_kind_measured():
    # AMX runs bfloat16 convolutions natively (1.79-1.84x faster); an AVX2 CPU converts in software (8.16x
    # slower); an AVX-512 BF16 CPU without AMX was never measured: no direction, and it says so.
    images = RunConfig(workload="images")
    for machine, direction in (("binder-2core-avx2", SLOWER), ("cpu-2core-avx512-bf16", None),
                               ("cpu-2core-avx512-amx", FASTER), ("tpu-v5e", SLOWER)):
        e = expected_for(DESCRIBED[machine], "mixed_precision", "mixed_bfloat16", images)
        assert e.direction == direction, e.why
    assert "util.cc" in expect.source("mixed_precision", "cpu")


def test_every_table_row_names_a_source():
    text = expect.table()
    for name in MACHINES:
        section = text.split(f"## {name}: ")[1].split("\n## ")[0]
        rows = [line for line in section.splitlines() if line.startswith("| ") and not line.startswith(("| change", "| ---"))]
        assert len(rows) == len(expect.TABLE_CHANGES)
        assert all(row.rstrip(" |").rsplit(" | ", 1)[-1].strip() for row in rows)
    for knob_name in expect.RULES:
        assert expect.source(knob_name, "gpu") and expect.source(knob_name, "cpu")


@pytest.mark.parametrize("machine, direction", [("binder-2core-avx2", SAME), ("tpu-vm", SAME),
                                                ("colab-t4", SLOWER), ("h100", SLOWER)])
def test_per_step_timing_is_slower_only_where_a_device_runs_the_step(machine, direction):
    e = expected_for(DESCRIBED[machine], "timing", "per_step", RunConfig(data_source="memory"))
    assert e.direction == direction and e.than == "windowed timing"
    with pytest.raises(ValueError, match="timing='windowed' has no expectation"):
        expected_for(DESCRIBED[machine], "timing", "windowed")


def _with_other_cpu(r, other_pct, cores=2):
    """``r`` with utilization samples: other programs used ``other_pct`` % of all cores during its steps."""
    import dataclasses
    from tfwb.records import Sample
    starts, t = [], 0.0
    for d in r.step_times_s:
        starts.append(t)
        t += d
    samples = tuple(Sample(t_s=i * t / 4, cpu_process_pct=100.0, cpu_system_pct=100.0 / cores + other_pct)
                    for i in range(5))
    return dataclasses.replace(r, step_start_s=starts, samples=samples,
                               fingerprint={"cpu_count": cores, "cpu_model": "test cpu"})


def test_an_expectation_check_of_two_runs_gives_the_history_tables_verdict():
    """Issue 26: chapter 08's two fits got "did NOT agree" from the check and "not comparable" from
    the history table. Both now come from tfwb.analysis.pairs.compare_runs: a busy pair cannot tell in both."""
    from tfwb.analysis import pairs, rows
    quiet = _with_other_cpu(result(step_s=0.10, wait_s=0.0), 2.0)
    busy = _with_other_cpu(result(step_s=0.18, wait_s=0.0), 55.0)
    c = ab("a compute change", "faster").check(quiet, busy)
    table = rows.history_rows([quiet, busy])[1]
    assert c.comparison.verdict == table.comparison == pairs.compare_runs(quiet, busy).verdict
    assert c.agreed is None and c.result == "cannot tell" and "machine was busy" in c.measured


def test_a_gain_beyond_the_changes_own_bound_reads_as_drift_not_agreement():
    """Issue 26: "prefetch: not slower" with a bound of 1.03x measured 1.57x faster and read "agreed"."""
    hw = DESCRIBED["binder-2core-avx2"]
    base = result(step_s=0.100, wait_s=0.003)                 # waits 3 %: prefetch can gain ~1.03x
    e = change(hw, base, prefetch=True)
    assert e.bound is not None and e.bound.speedup == pytest.approx(1 / 0.97, rel=0.01)
    c = e.check(base, result(step_s=0.0637, wait_s=0.0))      # 1.57x faster
    assert c.agreed is None and "beyond the 1.03x its mechanism allows" in c.note
    assert change(hw, base, prefetch=True).check(base, result(step_s=0.099, wait_s=0.0)).agreed is not False


# -- the measured table: one place, the same figures as the kept results (issue 35) ----------------------------
def test_the_measured_table_holds_the_kept_results_exactly():
    import json

    from tfwb.advice import measured

    for kind, path in measured.SOURCES.items():
        data = json.loads((ROOT / path).read_text(encoding="utf-8"))
        rows = {(r["workload"], r["change"]): r for r in data["rows"]}
        mine = [m for m in measured.MEASURED if m.kind == kind]
        assert len(mine) == len(rows), (kind, sorted(rows))
        for m in mine:
            r = rows[m.workload, m.value if m.knob == "mixed_precision" else m.knob]
            if m.direction is None:
                assert "no significant difference" in r["measured"], (kind, r)
                continue
            assert r["measured"].startswith(f"{m.ratio}x {m.direction}"), (kind, r["measured"], m)
            assert r["verdict"] == m.direction
            if m.low:
                assert f"CI {m.low}-{m.high}x" in r["measured"], (kind, r["measured"], m)
        assert (ROOT / path.replace(".json", ".md")).exists()


def test_a_measured_row_refuses_a_direction_or_kind_it_cannot_have():
    from tfwb.advice.measured import Measured

    with pytest.raises(ValueError, match="direction='not slower' is not allowed"):
        Measured("amx", "jit_compile", True, "mlp", ("dense",), NOT_SLOWER)
    with pytest.raises(ValueError, match="kind='arm' is not allowed; a measured kind"):
        Measured("arm", "jit_compile", True, "mlp", ("dense",), None)
