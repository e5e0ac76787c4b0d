"""Tests of tfwb.diagnosis (the module behind the tfwb.diagnose function): input-bound thresholds, suggestions, and hardware expectations."""
from __future__ import annotations

import pytest

from tfwb.config import RunConfig
from tfwb.diagnosis import (FAILED, INPUT_HIGH, INPUT_MODERATE, NO_DATA, NO_INPUT_DATA, NOT_INPUT,
                           diagnose, expectations, input_verdict)
from tfwb.records import RunResult

INPUT_KNOBS = ("prefetch", "parallel_map", "interleave", "cache")


def result_with_wait(wait_s: float, step_s: float = 20.0, n: int = 5, **cfg) -> RunResult:
    """A result whose input-wait fraction is exactly wait_s / step_s."""
    return RunResult(config=RunConfig(**cfg), step_times_s=(step_s,) * n, input_wait_s=(wait_s,) * n)


def test_fraction_construction_is_exact():
    assert result_with_wait(1.0).input_wait_fraction == 0.05
    assert result_with_wait(1.0, step_s=5.0).input_wait_fraction == 0.20


@pytest.mark.parametrize("wait_s, step_s, verdict", [
    (0.0, 20.0, NOT_INPUT),
    (0.999, 20.0, NOT_INPUT),          # 4.995 %
    (1.0, 20.0, INPUT_MODERATE),       # exactly 5 %
    (3.99, 20.0, INPUT_MODERATE),      # 19.95 %
    (1.0, 5.0, INPUT_HIGH),            # exactly 20 %
    (5.0, 5.0, INPUT_HIGH),
])
def test_thresholds(wait_s, step_s, verdict):
    d = diagnose(result_with_wait(wait_s, step_s))
    assert d.verdict == verdict
    assert d.input_fraction == pytest.approx(wait_s / step_s)
    assert d.headline.startswith(verdict)


def test_input_verdict_boundaries():
    assert input_verdict(0.05) == INPUT_MODERATE
    assert input_verdict(0.0499999) == NOT_INPUT
    assert input_verdict(0.2) == INPUT_HIGH
    assert input_verdict(0.1999999) == INPUT_MODERATE


def test_not_input_bound_states_the_share_and_suggests_no_input_knobs():
    d = diagnose(result_with_wait(0.1))
    assert d.headline.startswith("not input-bound (input wait 0%)")
    assert "try" not in d.headline
    assert d.suggestions == ()


def test_input_bound_suggests_every_knob_that_is_off():
    d = diagnose(result_with_wait(2.0))
    assert [s[0] for s in d.suggestions] == list(INPUT_KNOBS)
    assert all(value is True for _, value, _ in d.suggestions)
    assert all(isinstance(why, str) and why for *_, why in d.suggestions)
    assert d.headline == "moderately input-bound (input wait 10%): try prefetch=True"


def test_input_bound_skips_knobs_already_on():
    d = diagnose(result_with_wait(10.0, prefetch=True, cache="/tmp/tfwb-cache"))
    names = [s[0] for s in d.suggestions]
    assert names == ["parallel_map", "interleave"]
    assert d.headline == "highly input-bound (input wait 50%): try parallel_map=True"


def test_input_bound_with_every_knob_on_has_no_tip():
    d = diagnose(result_with_wait(10.0, prefetch=True, parallel_map=True, interleave=True, cache=True))
    assert d.verdict == INPUT_HIGH
    assert d.suggestions == ()
    assert d.headline == "highly input-bound (input wait 50%)"


def test_generator_source_suggests_files_first():
    d = diagnose(result_with_wait(10.0, data_source="generator"))
    assert d.suggestions[0][:2] == ("data_source", "files")
    assert "try data_source='files'" in d.headline


@pytest.mark.parametrize("status, error, text", [
    ("failed", "ValueError: no TPU", "run failed: ValueError: no TPU"),
    ("failed", None, "run failed: failed"),
    ("interrupted", "interrupted by the user", "run failed: interrupted by the user"),
])
def test_failed_run(status, error, text):
    r = RunResult(config=RunConfig(), status=status, error=error,
                  step_times_s=(1.0,) * 5, input_wait_s=(0.9,) * 5)
    d = diagnose(r)
    assert d.verdict == FAILED
    assert d.headline == text
    assert d.input_fraction is None and d.suggestions == ()


def test_no_steps_and_no_input_data():
    assert diagnose(RunResult(config=RunConfig())).verdict == NO_DATA
    d = diagnose(RunResult(config=RunConfig(steps_per_execution=2), step_times_s=(1.0,) * 5))
    assert d.verdict == NO_INPUT_DATA
    assert d.headline == "input wait not measured"


# -- expectations ------------------------------------------------------------------------
NO_GPU = {"gpus": [], "cpu_flags": ("avx2", "avx512f"), "tpu": False, "cpu_count": 2}
T4 = {"gpus": [{"name": "Tesla T4", "compute_capability": (7, 5)}], "cpu_flags": (), "tpu": False}
P4 = {"gpus": [{"name": "Tesla P4", "compute_capability": (6, 1)}], "cpu_flags": (), "tpu": False}
A100 = {"gpus": [{"name": "A100", "compute_capability": (8, 0)}], "cpu_flags": (), "tpu": False}


def test_mixed_float16_on_cpu_expects_slowdown():
    (line,) = expectations(RunConfig(mixed_precision="mixed_float16"), NO_GPU)
    assert line.startswith("mixed_float16 on this CPU")
    assert "slowdown" in line


def test_mixed_float16_on_cc75_expects_tensor_cores():
    (line,) = expectations(RunConfig(mixed_precision="mixed_float16"), T4)
    assert "compute capability 7.5" in line
    assert "Tensor Cores" in line and "speedup" in line


def test_mixed_float16_on_cc61_expects_little():
    (line,) = expectations(RunConfig(mixed_precision="mixed_float16"), P4)
    assert "older than compute capability 7.0" in line
    assert "little or no speedup" in line


def test_mixed_float16_uses_the_best_gpu():
    hw = {"gpus": P4["gpus"] + T4["gpus"]}
    (line,) = expectations(RunConfig(mixed_precision="mixed_float16"), hw)
    assert "compute capability 7.5" in line


def test_bfloat16_on_t4_prefers_float16():
    (line,) = expectations(RunConfig(mixed_precision="mixed_bfloat16"), T4)
    assert "older than compute capability 8.0" in line
    assert "prefer mixed_float16" in line


def test_bfloat16_on_ampere_expects_speedup():
    (line,) = expectations(RunConfig(mixed_precision="mixed_bfloat16"), A100)
    assert "expect a speedup" in line


@pytest.mark.parametrize("flags, phrase", [
    (("avx2",), "no native bfloat16 instructions"),
    (("avx512f", "avx512_bf16"), "it has bfloat16 instructions"),
    (("amx_bf16",), "it has bfloat16 instructions"),
])
def test_bfloat16_on_cpu_depends_on_flags(flags, phrase):
    (line,) = expectations(RunConfig(mixed_precision="mixed_bfloat16"), {"gpus": [], "cpu_flags": flags})
    assert phrase in line


def test_tpu_without_tpu_says_it_will_fail_and_what_to_pick():
    (line,) = expectations(RunConfig(strategy="tpu"), NO_GPU)
    assert "no TPU" in line and "fail" in line and "'default'" in line
    assert expectations(RunConfig(strategy="tpu"), {**NO_GPU, "tpu": True}) == ()


def test_mirrored_and_xla_expectations():
    lines = expectations(RunConfig(strategy="mirrored", jit_compile=True), NO_GPU)
    assert any(line.startswith("XLA on this CPU") for line in lines)
    assert any(line.startswith("mirrored with fewer than two GPUs") for line in lines)
    two = {"gpus": A100["gpus"] * 2}
    lines = expectations(RunConfig(strategy="mirrored", jit_compile=True), two)
    assert lines == ("XLA on this GPU: fuses ops, often faster after a long first compile.",)


def test_defaults_have_no_expectations():
    assert expectations(RunConfig(), NO_GPU) == ()
    assert expectations(RunConfig(), {}) == ()


def test_the_diagnose_function_does_not_hide_its_module():
    import tfwb
    import tfwb.diagnosis

    assert callable(tfwb.diagnose) and tfwb.diagnose is tfwb.diagnosis.diagnose
    assert callable(tfwb.diagnosis.expectations)
