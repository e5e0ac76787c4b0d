"""Tests of tfwb.analysis.diagnosis (the module behind the tfwb.diagnose function): input-bound thresholds, suggestions, and hardware expectations."""
from __future__ import annotations

import math

import pytest

from tfwb.config import RunConfig
from tfwb.analysis.diagnosis import FAILED, INPUT_HIGH, INPUT_MODERATE, NO_DATA, NO_INPUT_DATA, NOT_INPUT, diagnose, expectations, input_verdict
from tfwb.hardware import DESCRIBED, Machine
from tfwb.records import RunResult, Sample

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
    d = diagnose(result_with_wait(2.0, storage_latency_ms=0))       # local disk: nothing for interleave to hide
    assert [s[0] for s in d.suggestions] == list(INPUT_KNOBS)
    assert all(value is True for _, value, _ in d.suggestions)
    assert all(isinstance(why, str) and why for *_, why in d.suggestions)
    assert d.headline == "moderately input-bound (input wait 10%): try prefetch=True"


def test_files_behind_storage_latency_suggest_interleave_first():
    # Chapter 06 (issue 18): the run reads files behind a read latency; interleave hides the
    # latency, prefetch only overlaps the serial reads with the step.
    d = diagnose(result_with_wait(10.0))                              # images from files, default latency
    assert [s[0] for s in d.suggestions] == ["interleave", "prefetch", "parallel_map", "cache"]
    assert d.headline == "highly input-bound (input wait 50%): try interleave=True"
    assert "storage latency" in d.suggestions[0][2]
    slow = diagnose(result_with_wait(10.0, storage_latency_ms=25.0))
    assert slow.suggestions[0][0] == "interleave"
    # not when interleave is on, the workload ignores it, or the data are not files
    assert diagnose(result_with_wait(10.0, interleave=True)).suggestions[0][0] == "prefetch"
    assert diagnose(result_with_wait(10.0, workload="mlp")).suggestions[0][0] == "prefetch"
    gen = diagnose(result_with_wait(10.0, data_source="generator"))
    assert [s[0] for s in gen.suggestions][:2] == ["data_source", "prefetch"]


def test_input_bound_skips_knobs_already_on():
    d = diagnose(result_with_wait(10.0, prefetch=True, cache="/tmp/tfwb-cache", storage_latency_ms=0))
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
# Hardware-dependent sentences come from tfwb.expect.expected_for (tested knob x machine in
# tests/test_expect.py); here: which knobs get a sentence, on every described machine.
MACHINES = tuple(DESCRIBED)
NO_GPU = DESCRIBED["cpu-2core-avx512-bf16"]
T4 = DESCRIBED["colab-t4"]
P4 = Machine.of({"gpus": [{"index": 0, "name": "Tesla P4", "compute_capability": (6, 1)}]})
A100 = DESCRIBED["a100"]


@pytest.mark.parametrize("machine", MACHINES)
def test_defaults_have_no_expectations_except_a_tpu_left_idle(machine):
    hw = DESCRIBED[machine]
    lines = expectations(RunConfig(), hw)
    if hw.tpu:
        assert lines == ("strategy='default' on a TPU machine: the step runs on the host CPU, not the "
                         "TPU; pick strategy='tpu'.",)
    else:
        assert lines == ()
    assert expectations(RunConfig(), {}) == ()


@pytest.mark.parametrize("machine", MACHINES)
def test_one_sentence_per_hardware_knob_on_every_machine(machine):
    hw = DESCRIBED[machine]
    strategy = "tpu" if hw.tpu else "default"
    cfg = RunConfig(mixed_precision="mixed_float16", jit_compile=True, steps_per_execution=4, strategy=strategy)
    lines = expectations(cfg, hw)
    assert [line.split("=")[0] for line in lines] == ["mixed_precision", "jit_compile",
                                                      "steps_per_execution"] + (["strategy"] if hw.tpu else [])
    for line in lines:
        assert line.endswith(".") and " on " in line
        assert "Tensor Cores" not in line or hw.gpus, f"a GPU sentence on a machine without one: {line}"
        assert "CPU" not in line.split(":")[0] or not hw.gpus, f"a CPU sentence on a GPU machine: {line}"


def test_mixed_float16_sentences():
    (cpu,) = expectations(RunConfig(mixed_precision="mixed_float16"), NO_GPU)
    assert cpu.startswith("mixed_precision='mixed_float16' on this CPU (2 cores, AVX-512, BF16): slower than float32")
    (t4,) = expectations(RunConfig(mixed_precision="mixed_float16"), T4)
    assert t4.startswith("mixed_precision='mixed_float16' on Tesla T4 (compute capability 7.5): faster than float32")
    assert "Tensor Cores" in t4
    (p4,) = expectations(RunConfig(mixed_precision="mixed_float16"), P4)
    assert "not faster than float32" in p4 and "no Tensor Cores" in p4
    (best,) = expectations(RunConfig(mixed_precision="mixed_float16"), {"gpus": P4.gpus + T4.gpus})
    assert "compute capability 7.5" in best


def test_bfloat16_sentences():
    (t4,) = expectations(RunConfig(mixed_precision="mixed_bfloat16"), T4)
    assert "not faster" in t4 and "use mixed_float16 on this GPU" in t4
    (a100,) = expectations(RunConfig(mixed_precision="mixed_bfloat16"), A100)
    # before any run, the bound is unknown; float32 already runs on TF32 Tensor Cores there
    assert ": no fixed expectation" in a100 and "already run on TF32 Tensor Cores" in a100


@pytest.mark.parametrize("flags, phrase", [     # the images CNN, RunConfig's default workload
    (("avx2",), "slower than float32: measured on an AVX2 CPU"),
    (("avx512f", "avx512_bf16"), "no fixed expectation: not measured on this kind of CPU (an AVX-512 BF16 CPU"),
    (("amx_bf16",), "faster than float32: measured on an AVX-512 BF16/FP16 CPU with AMX"),
])
def test_bfloat16_on_cpu_depends_on_flags(flags, phrase):
    (line,) = expectations(RunConfig(mixed_precision="mixed_bfloat16"), {"gpus": [], "cpu_flags": flags})
    assert phrase in line


def test_tpu_without_tpu_says_it_will_fail_and_what_to_pick():
    (line,) = expectations(RunConfig(strategy="tpu"), NO_GPU)
    assert line == "strategy='tpu' with no TPU here: the run fails before any work; pick 'default'."
    (on_tpu,) = expectations(RunConfig(strategy="tpu"), DESCRIBED["tpu-vm"])
    assert on_tpu.startswith("strategy='tpu' on a TPU: no fixed expectation")


def test_mirrored_and_xla_expectations():
    lines = expectations(RunConfig(strategy="mirrored", jit_compile=True), NO_GPU)
    assert lines[0].startswith("jit_compile=True on this CPU (2 cores, AVX-512, BF16): no fixed expectation: "
                               "not measured on this kind of CPU")
    assert lines[1].startswith("strategy='mirrored' on this CPU (2 cores, AVX-512, BF16): slower")
    two = {"gpus": A100.gpus * 2}
    xla, mirrored = expectations(RunConfig(strategy="mirrored", jit_compile=True), two)
    assert xla.startswith("jit_compile=True on 2x NVIDIA A100-SXM4-40GB (compute capability 8.0): not slower")
    assert mirrored.startswith("strategy='mirrored' on 2x NVIDIA A100-SXM4-40GB (compute capability 8.0): "
                               "no fixed expectation")


# -- compute-bound runs: suggestions from the hardware ---------------------------------------
def gpu_result(cc, util_pct=95.0, **cfg) -> RunResult:
    samples = tuple(Sample(t_s=float(i), gpu_util_pct=(util_pct,)) for i in range(5))
    return RunResult(config=RunConfig(**cfg), step_times_s=(20.0,) * 5, input_wait_s=(0.1,) * 5,
                     samples=samples, fingerprint={"gpus": [{"name": "G", "compute_capability": list(cc)}],
                                                   "cpu_count": 8})


def test_compute_bound_on_a_cpu_suggests_nothing():
    d = diagnose(result_with_wait(0.1))
    assert d.suggestions == () and "try" not in d.headline


@pytest.mark.parametrize("cc, policy", [((7, 5), "mixed_float16"), ((8, 0), "mixed_bfloat16")])
def test_compute_bound_on_a_tensor_core_gpu_suggests_mixed_precision(cc, policy):
    d = diagnose(gpu_result(cc))
    assert d.verdict == NOT_INPUT
    assert [s[:2] for s in d.suggestions] == [("mixed_precision", policy)]
    assert d.headline == f"not input-bound (input wait 0%): try mixed_precision={policy!r}"
    assert diagnose(gpu_result(cc, mixed_precision=policy)).suggestions == ()


def test_a_gpu_idling_between_kernels_gets_xla_and_steps_per_call():
    d = diagnose(gpu_result((9, 0), util_pct=30.0))
    assert [s[:2] for s in d.suggestions] == [("jit_compile", True), ("steps_per_execution", 8)]
    assert diagnose(gpu_result((6, 1))).suggestions == ()


def test_diagnose_takes_hardware_over_the_fingerprint():
    d = diagnose(result_with_wait(0.1), hardware=DESCRIBED["colab-t4"])
    assert d.suggestions[0][:2] == ("mixed_precision", "mixed_float16")


def test_parallel_map_is_not_suggested_on_one_core():
    r = result_with_wait(2.0)
    one = RunResult(config=r.config, step_times_s=r.step_times_s, input_wait_s=r.input_wait_s,
                    fingerprint={"cpu_count": 1})
    assert "parallel_map" not in [s[0] for s in diagnose(one).suggestions]
    two = RunResult(config=r.config, step_times_s=r.step_times_s, input_wait_s=r.input_wait_s,
                    fingerprint={"cpu_count": 2})
    assert dict((k, why) for k, _, why in diagnose(two).suggestions)["parallel_map"] == \
        "decode and augment on the 2 CPU cores"


def test_the_diagnose_function_does_not_hide_its_module():
    import tfwb
    import tfwb.analysis.diagnosis

    assert callable(tfwb.diagnose) and tfwb.diagnose is tfwb.analysis.diagnosis.diagnose
    assert callable(tfwb.analysis.diagnosis.expectations)


def test_input_suggestions_offer_only_knobs_the_workload_honours():
    from tfwb.analysis.diagnosis import _suggestions

    two = Machine.of({"cpu_count": 2})
    images = [s[0] for s in _suggestions(RunConfig(workload="images"), two, input_bound=True)]
    mlp = [s[0] for s in _suggestions(RunConfig(workload="mlp"), two, input_bound=True)]
    assert "interleave" in images and "parallel_map" in images
    assert "interleave" not in mlp and "parallel_map" not in mlp and "prefetch" in mlp


def test_expectations_include_tf32_turned_off():
    from tfwb.config import RunConfig
    from tfwb.hardware import DESCRIBED

    (a100,) = expectations(RunConfig(tf32=False), DESCRIBED["a100"])
    assert a100.startswith("tf32=False on NVIDIA A100") and ": slower than tf32=True" in a100
    (cpu,) = expectations(RunConfig(tf32=False), DESCRIBED["binder-2core-avx2"])
    assert "no significant difference" in cpu
    assert expectations(RunConfig(), DESCRIBED["a100"]) == ()


# -- bounds: Amdahl's law on the measured breakdown (issue 19) ------------------------------------
from tfwb.analysis.diagnosis import Bound, amdahl, bound, score_bound  # noqa: E402


def test_every_suggestion_has_a_bound_in_the_same_order():
    for d in (diagnose(result_with_wait(10.0)), diagnose(result_with_wait(10.0, data_source="generator")),
              diagnose(gpu_result((8, 0))), diagnose(gpu_result((9, 0), util_pct=30.0)),
              diagnose(result_with_wait(0.1))):
        assert [(b.knob, b.value) for b in d.bounds] == [s[:2] for s in d.suggestions]
        assert all(isinstance(b, Bound) and b.text for b in d.bounds)


def test_input_knobs_are_bounded_by_the_input_wait():
    d = diagnose(RunResult(config=RunConfig(storage_latency_ms=0), step_times_s=(1.0,) * 4,
                           input_wait_s=(0.47,) * 4))
    b = d.bound_for("prefetch")
    assert b.speedup == pytest.approx(1 / (1 - 0.47))
    assert b.text == ("prefetch: removing the input wait (47 % of the step) gains at most 1.9x; on a CPU the "
                      "pipeline also takes cores from the step, so the knob can gain more than that here")
    assert not b.strict
    on_gpu = diagnose(RunResult(config=RunConfig(storage_latency_ms=0), step_times_s=(1.0,) * 4,
                                input_wait_s=(0.47,) * 4,
                                fingerprint={"gpus": [{"name": "G", "compute_capability": [8, 0]}]}))
    g = on_gpu.bound_for("prefetch")
    assert g.strict and g.text == "prefetch can gain at most 1.9x: the step waits for input 47 % of the time"
    assert all(x.speedup == pytest.approx(b.speedup) for x in d.bounds)     # every input knob: the same part
    assert d.bound_for("jit_compile") is None


def with_peaks(result, **peaks):
    from dataclasses import replace

    return replace(result, peaks={d: {"measured": m, "datasheet": ds, "source": ""} for d, (m, ds) in peaks.items()})


def test_mixed_precision_is_bounded_by_the_compute_share_and_the_peak_ratio():
    r = gpu_result((8, 0))                              # wait 0.1 of 20: compute 99.5 %
    unknown = diagnose(r).bound_for("mixed_precision")
    assert unknown.speedup is None and "bound unknown" in unknown.text
    measured = diagnose(with_peaks(r, float32=(1e13, 1.95e13), bfloat16=(4e13, 3.12e14))).bound_for("mixed_precision")
    assert measured.speedup == pytest.approx(amdahl(0.995, 4.0))
    assert measured.text == ("mixed_bfloat16 can gain at most 3.9x: compute is 100 % of the step and this "
                             "machine's bfloat16 peak is 4x its float32 peak")
    sheet = diagnose(with_peaks(r, float32=(None, 1e13), bfloat16=(None, 3e13))).bound_for("mixed_precision")
    assert sheet.speedup == pytest.approx(amdahl(0.995, 3.0)) and "the datasheet bfloat16 peak is 3x" in sheet.text


def test_steps_per_execution_is_bounded_by_the_flops_at_the_peak_not_an_empty_call():
    from dataclasses import replace

    r = gpu_result((9, 0), util_pct=30.0)               # 20 s steps
    unknown = diagnose(r).bound_for("steps_per_execution")
    assert unknown.speedup is None and "were not counted" in unknown.text
    counted = replace(r, model_flops_per_step=5e12, peak_flops_per_s=1e12, call_overhead_s=0.005)   # MFU 25 %
    b = diagnose(counted).bound_for("steps_per_execution")
    wait = counted.input_wait_fraction                    # the batches still come: the wait is not removed
    assert 0 < wait < 0.05 and b.speedup == pytest.approx(1 / (0.25 + wait))
    assert b.text.startswith(f"steps_per_execution=8 can gain at most {b.speedup:.1f}x: it removes per-call work")
    assert "take 25 % of it, and it waits for input" in b.text
    assert b.text.endswith("which it does not remove; an empty call alone costs 5000 us here")
    # an input-bound run: steps per call cannot take the wait away (1 / (0.6 + 0.25), not 1 / 0.25)
    waiting = replace(counted, input_wait_s=tuple(0.6 * t for t in counted.step_times_s))
    assert bound(waiting, "steps_per_execution", 8).speedup == pytest.approx(1 / (0.6 + 0.25), rel=0.02)
    # staged batches: the "wait" is Python's fetch call, per-call work that steps per call removes
    staged = replace(waiting, config=waiting.config.replace(data_source="memory"))
    assert bound(staged, "steps_per_execution", 8).speedup == pytest.approx(4.0)
    # chapter 02's case: an empty call's floor (a bound of 1.2x) was beaten by a measured 2.35x; 1/MFU is not
    assert "above its bound" not in score_bound(b.speedup, 2.35, 0.1)
    assert bound(counted, "steps_per_execution", 1).speedup == 1.0
    low_peak = replace(r, model_flops_per_step=5e13, peak_flops_per_s=1e12)      # MFU 250 %: peak read low
    assert diagnose(low_peak).bound_for("steps_per_execution").speedup is None


def test_xla_is_bounded_by_the_flops_at_the_peak():
    from dataclasses import replace

    r = gpu_result((9, 0), util_pct=30.0)
    assert diagnose(r).bound_for("jit_compile").speedup is None
    counted = replace(r, model_flops_per_step=2e12, peak_flops_per_s=1e12)    # 2 s of 20 at the peak: MFU 10 %
    b = diagnose(counted).bound_for("jit_compile")
    assert counted.mfu == pytest.approx(0.1)
    assert b.speedup == pytest.approx(1 / (0.1 / 20 + 0.1))
    assert "not FLOPs" in b.text and "measured float32 peak take 10 % of it" in b.text


def test_amdahl():
    assert amdahl(0.0, 4.0) == 1.0 and amdahl(1.0, 4.0) == 4.0 and amdahl(1.0, math.inf) == math.inf
    with pytest.raises(ValueError, match="part=1.5"):
        amdahl(1.5, 2.0)


@pytest.mark.parametrize("b, measured, noise, text", [
    (1.9, 1.7, 0.0, "bound 1.9x, measured 1.7x (89 % of the bound)"),
    (1.9, 1.97, 0.05, "bound 1.9x, measured 2.0x (104 % of the bound)"),        # above, within noise
    (None, 1.3, 0.05, "bound unknown, measured 1.3x"),
    (2.0, 0.8, 0.05, "bound 2.0x, measured 1.2x slower: none of the gain"),
])
def test_score_bound(b, measured, noise, text):
    assert score_bound(b, measured, noise) == text


def test_a_gain_above_its_bound_beyond_noise_says_the_bound_or_the_measurement_is_wrong():
    text = score_bound(1.5, 2.0, noise=0.1)
    assert "above its bound 1.5x" in text and "the bound or the measurement is wrong" in text
    # every bound the diagnosis gives, scored against a gain past it, is caught
    r = RunResult(config=RunConfig(), step_times_s=(1.0,) * 4, input_wait_s=(0.3,) * 4)
    for b in diagnose(r).bounds:
        assert "wrong" in score_bound(b.speedup, b.speedup * 1.2, noise=0.1)
        assert "wrong" not in score_bound(b.speedup, b.speedup * 1.05, noise=0.1)
    for bad in ((1.5, 0.0, 0.1), (1.5, 1.2, -0.1), (0.5, 1.2, 0.1)):
        with pytest.raises(ValueError):
            score_bound(*bad)


def test_a_fit_run_gets_its_input_verdict_from_the_dataset_timed_alone():
    fit = RunResult(config=RunConfig(), step_times_s=(0.03,) * 5,
                    extras={"input_rate": {"dataset_batches_per_s": 3005.0, "step_batches_per_s": 34.0}})
    d = diagnose(fit)
    assert d.verdict == NOT_INPUT and d.input_fraction is None
    assert d.headline.startswith("not input-bound (the dataset alone delivers 3,005 batches/s, the step takes 34/s)")
    starved = RunResult(config=RunConfig(), step_times_s=(0.03,) * 5,
                        extras={"input_rate": {"dataset_batches_per_s": 30.0, "step_batches_per_s": 34.0}})
    assert diagnose(starved).verdict == INPUT_HIGH and diagnose(starved).suggestions == ()
    assert diagnose(RunResult(config=RunConfig(), step_times_s=(0.03,) * 5)).verdict == NO_INPUT_DATA


# -- issue 34: the diagnosis knows what was tried and what a knob can still do ---------------------------------
def test_after_a_cache_only_knobs_downstream_of_it_come_first():
    """Issue 34 item 7b: after a cache, prefetch can still cut the input wait; parallel_map only on the
    augmentation after it; interleave acts on the reading the cache removed, so it goes last and says why."""
    from tfwb.advice.downstream import ALL, NONE, PART, reach

    cached = diagnose(result_with_wait(2.0, storage_latency_ms=25, cache=True))
    assert [s[0] for s in cached.suggestions] == ["prefetch", "parallel_map", "interleave"]
    assert cached.headline.endswith("try prefetch=True")
    assert "the cache removed" in cached.suggestions[-1][2] and "augmentation" in cached.suggestions[1][2]
    assert [b.knob for b in cached.bounds] == ["prefetch", "parallel_map", "interleave"]
    uncached = diagnose(result_with_wait(2.0, storage_latency_ms=25))    # behind latency: interleave first
    assert uncached.suggestions[0][0] == "interleave"
    cfg = RunConfig(cache=True)
    assert [reach(k, cfg).rank for k in ("prefetch", "parallel_map", "interleave", "data_source")] == \
        [ALL, PART, NONE, NONE]
    assert {reach(k, RunConfig()).rank for k in ("prefetch", "parallel_map", "interleave")} == {ALL}
    assert reach("interleave", RunConfig(cache="/tmp/c")).rank == NONE     # a cache in files caches too


def test_a_change_tune_reverted_is_not_offered_again():
    """Issue 34 item 5: after tune reverted interleave (0.90x), "Next" offered interleave=True again."""
    from tfwb.analysis.diagnosis import reorder
    from tfwb.analysis.tried import from_trials
    from types import SimpleNamespace

    d = diagnose(result_with_wait(2.0, storage_latency_ms=25))
    assert d.suggestions[0][0] == "interleave"
    trials = [SimpleNamespace(knob="cache", value=True, decision="kept", speedup=3.2),
              SimpleNamespace(knob="interleave", value=True, decision="reverted", speedup=0.90),
              SimpleNamespace(knob="jit_compile", value=True, decision="skipped", speedup=None)]
    after = reorder(d, from_trials(trials))
    assert after.suggestions[0][0] == "prefetch" and after.headline.endswith(": try prefetch=True")
    assert after.suggestions[-1][0] == "interleave"
    assert after.suggestions[-1][2].endswith("already tried: interleave=True: tune trial 2 measured 1.11x slower")
    assert [b.knob for b in after.bounds] == [s[0] for s in after.suggestions]
    assert reorder(d, ()) is d and reorder(d, from_trials(trials[:1])) is d      # nothing settled: unchanged
    only = diagnose(result_with_wait(2.0, cache=True, prefetch=True, parallel_map=True, storage_latency_ms=0))
    assert [s[0] for s in only.suggestions] == ["interleave"]
    again = reorder(only, from_trials(trials))
    assert again.suggestions[0][2].startswith("offered again: no untried change is left")
    assert again.headline == only.headline                                      # still the one to say


def test_the_history_says_which_one_knob_changes_were_measured_and_how():
    """A run one knob from the closest earlier run tried that knob against it: reverted runs included."""
    from tfwb.analysis.diagnosis import reorder
    from tfwb.analysis.rows import history_rows
    from tfwb.analysis.tried import from_history
    from tfwb import stats

    def run(step_s, **cfg):
        times = tuple(step_s * (1 + 0.01 * ((i % 5) - 2)) for i in range(20))
        return RunResult(config=RunConfig(storage_latency_ms=25, **cfg), step_times_s=times,
                         input_wait_s=tuple(t * 0.4 for t in times))

    runs = [run(0.100), run(0.111, interleave=True), run(0.050, prefetch=True),
            RunResult(config=RunConfig(storage_latency_ms=25, prefetch=True, batch_size=4096), status="failed",
                      error="OOM"),
            run(0.049, prefetch=True, cache=True, parallel_map=True)]
    tried = from_history(history_rows(runs))
    # #2 tried interleave against #1 (slower); #3 went back to #1's knobs and tried prefetch (#1 and #3 are
    # one knob apart, #2 and #3 two); #4 failed with batch 4096; #5 changed two knobs: not one change.
    assert [(t.knob, t.verdict, t.where) for t in tried] == [
        ("interleave", stats.SLOWER, "run #2 against #1"), ("prefetch", stats.FASTER, "run #3 against #1"),
        ("batch_size", "failed", "run #4 against #3")]
    d = reorder(diagnose(runs[0]), tried)
    assert d.suggestions[0][0] == "prefetch" and d.suggestions[-1][0] == "interleave"
    assert "already tried: interleave=True: run #2 against #1 measured 1.11x slower" in d.suggestions[-1][2]


def test_the_workbench_does_not_offer_a_change_its_tune_reverted(tmp_path):
    """Issue 34 item 5: after Tune reverted interleave (0.90x), the status said "Next: try interleave=True" and
    the button offered "Apply interleave=True". The tune log folds each trial into one line that opens to
    its details. Fake runner: no TensorFlow."""
    from types import SimpleNamespace

    from fakes import FakeRunner
    from tfwb import Workbench
    from tfwb.search.tune_events import TrialDone, TrialStarted
    from tfwb.search.tune_result import TuneTrial

    wb = Workbench(RunConfig(workload="images", steps=12, warmup_steps=2), history_path=tmp_path / "runs.jsonl",
                   runner=FakeRunner(input_wait_s=0.04), hardware={"gpus": [], "cpu_count": 2})
    wb.run()
    assert wb.apply_button.description == "Apply interleave=True" and "Next: try interleave=True" in wb.status.value
    p = wb.panel
    trial = TuneTrial("interleave", True, "interleave=True", None, "reverted", "not called faster", speedup=0.90,
                      comparison="1.11x slower (97 % CI 1.05-1.20x; slower in 6 of 6 rounds)")
    p.on_tune_start(wb.config(), 2)
    change = SimpleNamespace(change="interleave=True", bound=SimpleNamespace(text="can gain at most 1.7x"),
                             order_note="")
    p.on_tune_event(TrialStarted(1, change))
    assert "trial 1: trying interleave=True\u2026</summary>" in wb.tune_log.value
    p.on_tune_event(TrialDone(1, trial))
    p.on_tune_end(SimpleNamespace(closing_text=lambda: "best: the start", changes=dict, interrupted=False,
                                  trials=(trial,)), None)
    p.render_status()
    assert wb.apply_button.description == "Apply prefetch=True"
    status = wb.status.value
    assert "Next: try prefetch=True" in status and "Next: try interleave=True" not in status
    log = wb.tune_log.value
    assert log.count("<details class='tfwb-trial'>") == 1                       # one line for the trial
    assert "<summary style='color:#c00'>trial 1: interleave=True: 1.11x slower, reverted</summary>" in log
    assert "not called faster" in log and "slower in 6 of 6 rounds" in log and "can gain at most 1.7x" in log
