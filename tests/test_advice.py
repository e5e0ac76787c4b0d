"""Tests of tfwb.advice: one entry per knob gives its expectation, its suggestion, its order and its bound.

A toy knob added here (a field on a RunConfig subclass plus one ``ADVICE`` entry, no edit of
``tfwb.analysis.diagnosis`` or ``tfwb.expect``) is expected, suggested and bounded like a built-in one;
and every user of a ``mixed_precision`` policy's compute dtype reads ``compute_dtype``.
Pure except the last test, which imports TensorFlow.
"""
from __future__ import annotations

import ast
import dataclasses
from pathlib import Path
from types import SimpleNamespace

import pytest

from tfwb import advice, expect
from tfwb.analysis import diagnosis
from tfwb.advice import ADVICE, Advice, Bound, compute_dtype, input_wait_bound
from tfwb.config import MIXED_PRECISION, RunConfig
from tfwb.expect import FASTER, SLOWER, Expected
from tfwb.advice.rules import input_rule
from tfwb.hardware import DESCRIBED
from tfwb.knobs import knob_field
from tfwb.records import COMPUTE_DTYPES, RunResult, Sample

PACKAGE = Path(__file__).resolve().parents[1] / "tfwb"


@dataclasses.dataclass(frozen=True)
class _WithToyKnobs(RunConfig):
    toy_buffer: bool = knob_field(False, "bool", "an input knob added for this test", role="pipeline")
    toy_fusion: bool = knob_field(False, "bool", "a compute knob added for this test", role="compute")


def _toy_rule(hw, value, baseline, limit):
    """Faster on a GPU, slower elsewhere."""
    return Expected(FASTER if hw.gpus else SLOWER, "toy fusion on " + ("a GPU" if hw.gpus else "a CPU"),
                    "toy_fusion=False")


def _toy_fusion_bound(result, knob, value):
    return Bound(knob, value, 1.25, f"{knob} can gain at most 1.25x (the toy's own bound)")


@pytest.fixture
def toy_advice(monkeypatch):
    """The toy knobs' two entries: all that is added besides the fields."""
    monkeypatch.setitem(ADVICE, "toy_buffer", Advice(
        rule=input_rule("toy_buffer"),
        suggest=lambda knob, cfg, machine: None if cfg.toy_buffer else (True, "buffer the toy input"),
        order=25, bound=input_wait_bound))                        # between prefetch (20) and parallel_map (30)
    monkeypatch.setitem(ADVICE, "toy_fusion", Advice(
        rule=_toy_rule, suggest=lambda knob, cfg, machine: None if cfg.toy_fusion else (True, ""),
        order=15, bound=_toy_fusion_bound))                       # between mixed_precision (10) and XLA (20)


def waiting(wait_s: float, **cfg) -> RunResult:
    """A run on a GPU whose step waits ``wait_s`` of 1 s for input, 95 % busy."""
    samples = tuple(Sample(t_s=float(i), gpu_util_pct=(95.0,)) for i in range(5))
    return RunResult(config=_WithToyKnobs(storage_latency_ms=0, **cfg), step_times_s=(1.0,) * 5,
                     input_wait_s=(wait_s,) * 5, samples=samples,
                     fingerprint={"gpus": [{"name": "G", "compute_capability": [7, 5]}], "cpu_count": 4})


# -- a toy knob: one entry, and diagnosis and expect know it ----------------------------------------
def test_without_its_entry_the_toy_knob_is_neither_expected_nor_suggested_nor_bounded():
    assert "toy_fusion" not in expect.RULES and "toy_fusion" not in expect.KNOWN
    with pytest.raises(ValueError, match="toy_fusion"):
        expect.expected_for(DESCRIBED["colab-t4"], "toy_fusion", True)
    assert "toy_buffer" not in [s[0] for s in diagnosis.diagnose(waiting(0.5)).suggestions]
    assert diagnosis.bound(waiting(0.5), "toy_buffer", True).speedup is None


def test_expect_has_the_toy_rule(toy_advice):
    assert expect.RULES["toy_fusion"] is _toy_rule and "toy_fusion" in expect.KNOWN
    assert expect.expected_for(DESCRIBED["colab-t4"], "toy_fusion", True).direction == FASTER
    assert expect.expected_for(DESCRIBED["binder-2core-avx2"], "toy_fusion", True).direction == SLOWER
    assert expect.change(DESCRIBED["colab-t4"], toy_fusion=True).expected == FASTER
    # the input rule sees the input limit of a measured run
    assert expect.expected_for(DESCRIBED["colab-t4"], "toy_buffer", True, waiting(0.5)).direction == FASTER


def test_an_input_bound_run_gets_the_toy_input_knob_in_its_order_with_the_input_wait_bound(toy_advice):
    d = diagnosis.diagnose(waiting(0.5))
    assert [s[0] for s in d.suggestions] == ["prefetch", "toy_buffer", "parallel_map", "interleave", "cache"]
    assert dict((k, why) for k, _, why in d.suggestions)["toy_buffer"] == "buffer the toy input"
    b = d.bound_for("toy_buffer")
    assert b.speedup == pytest.approx(2.0) and b.text.startswith("toy_buffer can gain at most 2.0x")
    assert "toy_fusion" not in [s[0] for s in d.suggestions]                 # a compute knob: not here
    assert "toy_buffer" not in [s[0] for s in diagnosis.diagnose(waiting(0.5, toy_buffer=True)).suggestions]
    assert "toy_buffer" not in [s[0] for s in diagnosis.diagnose(waiting(0.5, data_source="memory")).suggestions]


def test_a_busy_run_gets_the_toy_compute_knob_where_its_rule_expects_it_faster(toy_advice):
    d = diagnosis.diagnose(waiting(0.0))
    assert [s[0] for s in d.suggestions] == ["mixed_precision", "toy_fusion"]
    assert dict((k, why) for k, _, why in d.suggestions)["toy_fusion"] == "toy fusion on a GPU"   # the rule's why
    assert d.bound_for("toy_fusion").speedup == 1.25
    on_cpu = diagnosis.diagnose(waiting(0.0), hardware=DESCRIBED["binder-2core-avx2"])
    assert "toy_fusion" not in [s[0] for s in on_cpu.suggestions]           # its rule: slower there
    assert "toy_fusion" not in [s[0] for s in diagnosis.diagnose(waiting(0.0, toy_fusion=True)).suggestions]


def test_the_entries_order_decides_the_suggestion_order(toy_advice, monkeypatch):
    monkeypatch.setitem(ADVICE, "toy_buffer", dataclasses.replace(ADVICE["toy_buffer"], order=0))
    assert diagnosis.diagnose(waiting(0.5)).suggestions[0][0] == "toy_buffer"


# -- the built-in table ------------------------------------------------------------------------------
def test_the_derived_names_read_the_table():
    assert dict(expect.RULES) == {k: a.rule for k, a in ADVICE.items() if a.rule}
    assert expect.KNOWN == tuple(k for k, a in ADVICE.items() if a.rule)
    assert diagnosis.INPUT_BOUND_KNOBS == ("data_source", "prefetch", "parallel_map", "interleave", "cache")
    assert all(ADVICE[k].bound is input_wait_bound for k in diagnosis.INPUT_BOUND_KNOBS)
    assert {k for k, a in ADVICE.items() if a.suggest} == set(diagnosis.INPUT_BOUND_KNOBS) | {
        "mixed_precision", "jit_compile", "steps_per_execution"}


def test_interleave_goes_first_only_for_files_behind_a_latency():
    files = RunConfig()                                        # images from files, the workload's latency
    local = RunConfig(storage_latency_ms=0)
    assert ADVICE["interleave"].priority(files) < ADVICE["prefetch"].priority(files)
    assert ADVICE["parallel_map"].priority(local) < ADVICE["interleave"].priority(local) < \
        ADVICE["cache"].priority(local)


def test_every_entry_is_a_runconfig_knob_or_sync():
    from tfwb.config import KNOBS

    assert set(ADVICE) - set(KNOBS) == {"sync"}


# -- one compute dtype per policy ------------------------------------------------------------------
@pytest.mark.parametrize("policy", MIXED_PRECISION)
def test_the_run_record_reads_the_one_map(policy):
    assert COMPUTE_DTYPES is advice.COMPUTE_DTYPES
    assert RunResult(config=RunConfig(mixed_precision=policy)).compute_dtype == compute_dtype(policy)
    assert compute_dtype(policy) == {"off": "float32", "mixed_float16": "float16",
                                     "mixed_bfloat16": "bfloat16"}[policy]


@pytest.mark.parametrize("policy", ["mixed_float16", "mixed_bfloat16"])
def test_the_precision_bound_reads_the_peak_of_the_one_maps_dtype(policy):
    dtype, other = compute_dtype(policy), ({"float16", "bfloat16"} - {compute_dtype(policy)}).pop()
    r = RunResult(config=RunConfig(), step_times_s=(1.0,) * 4, input_wait_s=(0.0,) * 4,
                  peaks={"float32": {"measured": 1e12}, dtype: {"measured": 4e12}, other: {"measured": 2e12}})
    b = diagnosis.bound(r, "mixed_precision", policy)
    assert b.speedup == pytest.approx(4.0) and f"{dtype} peak is 4x" in b.text


def test_no_module_but_config_spells_the_policy_to_dtype_map():
    """A dict literal mapping a policy to its dtype anywhere but beside the policies (config.py) is a second copy."""
    copies = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Dict) and any(
                    isinstance(k, ast.Constant) and k.value in ("mixed_float16", "mixed_bfloat16")
                    and isinstance(v, ast.Constant) and v.value in ("float16", "bfloat16")
                    for k, v in zip(node.keys, node.values)):
                copies.append(f"{path.relative_to(PACKAGE)}:{node.lineno}")
    assert [c.split(":")[0] for c in copies] == ["config.py"], copies


def _compute_bound(workload: str) -> RunResult:
    return RunResult(config=RunConfig(workload=workload), step_times_s=(20.0,) * 5, input_wait_s=(0.1,) * 5)


@pytest.mark.parametrize("machine, workload, policy", [
    ("cpu-2core-avx512-amx", "images", "mixed_bfloat16"),     # measured 1.79x faster there: suggested
    ("cpu-2core-avx512-amx", "mlp", None),                    # no significant difference: not suggested
    ("binder-2core-avx2", "images", None),                    # 8.16x slower on AVX2: not suggested
    ("cpu-2core-avx512-bf16", "images", None),                # bfloat16 hardware, never measured: not suggested
    ("colab-t4", "images", "mixed_float16"),                  # a T4's float16 Tensor Cores
])
def test_the_precision_diagnose_suggests_is_the_one_expected_faster(machine, workload, policy):
    d = diagnosis.diagnose(_compute_bound(workload), hardware=DESCRIBED[machine])
    assert [s[1] for s in d.suggestions if s[0] == "mixed_precision"] == ([policy] if policy else [])


def test_a_cpu_with_bfloat16_hardware_is_offered_bfloat16_not_float16():
    offer = ADVICE["mixed_precision"].suggest
    cfg = RunConfig()
    for machine, policy in (("cpu-2core-avx512-amx", "mixed_bfloat16"), ("cpu-2core-avx512-bf16", "mixed_bfloat16"),
                            ("arm-graviton3", "mixed_bfloat16"), ("binder-2core-avx2", "mixed_float16"),
                            ("colab-t4", "mixed_float16"), ("h100", "mixed_bfloat16")):
        assert offer("mixed_precision", cfg, DESCRIBED[machine])[0] == policy, machine


@pytest.mark.tf
@pytest.mark.parametrize("policy", MIXED_PRECISION)
def test_the_runner_benchmarks_the_peak_of_the_one_maps_dtype(policy, monkeypatch):
    pytest.importorskip("tensorflow")
    import tfwb.tf.runner.step_limits as limits

    def no_count(model):
        raise ValueError("no model here")

    flops = {"float32": 1e12, "float16": 2e12, "bfloat16": 3e12}
    monkeypatch.setattr(limits, "count_flops", no_count)
    monkeypatch.setattr(limits, "call_overhead_s", lambda: 1e-5)
    monkeypatch.setattr(limits, "_step_devices", lambda strategy: ("CPU", 1, "CPU"))
    monkeypatch.setattr(limits, "_peak", lambda d, device, fast: SimpleNamespace(flops_per_s=flops[d], device="CPU",
                                                                                 reason=""))
    monkeypatch.setattr(limits, "_datasheet", lambda kind, device, d: (None, ""))
    out = limits.measure_limits(RunConfig(mixed_precision=policy), strategy=None, model=None)
    assert set(out.peaks) == {"float32", compute_dtype(policy)}
    assert out.peak_flops_per_s == flops[compute_dtype(policy)]
