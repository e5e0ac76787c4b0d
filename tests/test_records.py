"""Tests of tfwb.records: RunResult/Sample and the JSON round trip (the history file: test_history.py)."""
from __future__ import annotations

import json
import math

import re

import pytest

from tfwb.analysis.diagnosis import diagnose

from tfwb.config import RunConfig
from tfwb.records import Note, RunResult, Sample


def make_result(**changes) -> RunResult:
    base = dict(
        config=RunConfig(batch_size=32, steps=6, warmup_steps=2, prefetch=True, label="baseline"),
        step_times_s=(0.10, 0.11, 0.12, 0.10, 0.13, 0.11),
        input_wait_s=(0.010, 0.012, 0.011, 0.009, 0.013, 0.010),
        warmup_times_s=(1.5, 0.2), warmup_input_wait_s=(0.3, 0.02),
        step_start_s=(2.0, 2.1, 2.21, 2.33, 2.43, 2.56), warmup_start_s=(0.3, 1.8),
        losses=(2.3, 2.2, 2.1, 2.0, 1.9, 1.8), warmup_losses=(2.5, 2.4),
        samples=(
            Sample(t_s=0.0, cpu_process_pct=None, cpu_system_pct=None, rss_mib=512.5),
            Sample(t_s=0.2, cpu_process_pct=150.0, cpu_system_pct=75.0, rss_mib=530.0,
                   gpu_util_pct=(97.0, None), gpu_mem_used_mib=(4096.0, None)),
        ),
        examples_per_step=32, setup_s=1.25,
        fingerprint={"tensorflow": "2.21.0", "keras": "3.15.0", "gpus": [], "replicas": 1},
        started_at="2026-01-01T00:00:00+00:00", run_id="abc123def456",
        notes=("a note",),
    )
    base.update(changes)
    return RunResult(**base)


# -- construction ----------------------------------------------------------------
def test_sequences_become_float_tuples():
    r = make_result(step_times_s=[1, 2], input_wait_s=[0, 1], losses=[3, 4])
    assert r.step_times_s == (1.0, 2.0) and all(type(v) is float for v in r.step_times_s)
    assert isinstance(r.samples, tuple) and isinstance(r.notes, tuple)


@pytest.mark.parametrize("waits", [(0.1,), (0.1,) * 7])
def test_input_wait_length_mismatch_raises(waits):
    with pytest.raises(ValueError, match="input_wait_s"):
        make_result(input_wait_s=waits)


def test_no_input_wait_is_allowed():
    assert make_result(input_wait_s=()).input_wait_fraction is None


@pytest.mark.parametrize("bad", [("0.1",), (True,), (None,)])
def test_non_numbers_in_step_times_raise(bad):
    with pytest.raises(ValueError, match="step_times_s"):
        make_result(step_times_s=bad, input_wait_s=())


def test_bad_status_and_config_raise():
    with pytest.raises(ValueError, match="status"):
        make_result(status="done")
    with pytest.raises(ValueError, match="config"):
        make_result(config={"batch_size": 32})


def test_frozen():
    r = make_result()
    with pytest.raises(AttributeError):
        r.status = "failed"  # type: ignore[misc]


# -- derived numbers ---------------------------------------------------------------
def test_derived_numbers():
    r = make_result(step_times_s=(0.1, 0.2, 0.3, 0.4), input_wait_s=(0.01, 0.02, 0.03, 0.04),
                    examples_per_step=64)
    assert r.ok
    assert r.median_step_s == pytest.approx(0.25)
    assert r.throughput_per_s == pytest.approx(64 / 0.25)
    assert r.input_wait_fraction == pytest.approx(0.1)
    assert r.first_step_s == 1.5                                   # warm-up's first step
    assert make_result(warmup_times_s=(), warmup_input_wait_s=(), warmup_start_s=(),
                       warmup_losses=()).first_step_s == 0.10     # else measured step 0
    s = r.spread
    assert (s.median, s.n) == (pytest.approx(0.25), 4)


def test_empty_result_has_no_numbers():
    r = RunResult(config=RunConfig())
    assert not r.ok
    assert (r.spread, r.median_step_s, r.throughput_per_s, r.input_wait_fraction, r.first_step_s) == (
        None, None, None, None, None)


# -- summary -----------------------------------------------------------------------
def test_summary_mentions_median_throughput_and_verdict():
    r = make_result(step_times_s=(0.1,) * 6, input_wait_s=(0.05,) * 6, examples_per_step=32)
    text = r.summary()
    assert text.startswith("baseline: ")
    assert "median step 100.0 ms" in text
    assert "IQR 100.0-100.0" in text
    assert "320 examples/s" in text
    assert "input wait 50%" in text
    assert "highly input-bound" in text


def test_summary_without_label_uses_workload():
    r = make_result(config=RunConfig(), input_wait_s=(0.0,) * 6)
    assert r.summary().startswith("images: ")
    assert "not input-bound" in r.summary()


def test_failed_summary_mentions_the_error():
    r = make_result(status="failed", error="ValueError: strategy='tpu' but no TPU was found",
                    step_times_s=(), input_wait_s=())
    assert r.summary() == "baseline: failed: ValueError: strategy='tpu' but no TPU was found"
    assert "interrupted by the user" in make_result(status="interrupted",
                                                   error="interrupted by the user").summary()


# -- JSON ----------------------------------------------------------------------------
def test_json_round_trip_equality():
    r = make_result()
    text = r.to_json()
    assert "\n" not in text
    back = RunResult.from_json(text)
    assert back == r
    assert back.samples[0].cpu_process_pct is None
    assert back.samples[1].gpu_util_pct == (97.0, None)
    assert isinstance(back.samples[1].gpu_mem_used_mib, tuple)
    assert back.to_json() == text


def test_json_carries_a_schema_version_and_plain_lists():
    d = json.loads(make_result().to_json())
    assert d["schema"] == 3
    assert isinstance(d["step_times_s"], list)
    assert d["config"]["batch_size"] == 32
    assert d["samples"][1]["gpu_util_pct"] == [97.0, None]


def test_nan_loss_becomes_null_then_nan():
    r = make_result(losses=(2.3, math.nan, 2.1, 2.0, math.inf, 1.8), warmup_losses=(math.nan, 2.4))
    text = r.to_json()
    assert "NaN" not in text and "Infinity" not in text, "output must be strict JSON"
    d = json.loads(text)
    assert d["losses"][1] is None and d["warmup_losses"][0] is None
    back = RunResult.from_json(text)
    assert math.isnan(back.losses[1]) and math.isnan(back.losses[4]) and math.isnan(back.warmup_losses[0])
    assert back.losses[0] == 2.3 and back.losses[5] == 1.8


def test_failed_result_round_trips():
    r = make_result(status="failed", error="RuntimeError: boom", step_times_s=(0.1,), input_wait_s=(0.0,))
    assert RunResult.from_json(r.to_json()) == r


def test_result_from_unregistered_workload_loads():
    cfg = RunConfig.from_dict({"workload": "someone-elses"}, check_workload=False)
    r = make_result(config=cfg)
    assert RunResult.from_json(r.to_json()).config.workload == "someone-elses"


def test_json_round_trip_equality_with_gpu_fingerprint():
    r = make_result(fingerprint={"gpus": [{"name": "Tesla T4", "compute_capability": (7, 5)}]})
    assert RunResult.from_json(r.to_json()) == r


GARBAGE = [
    "", "{", "[]", "null", "3", '"text"', '{"config": 3}', '{"config": null}',
    '{"status": "ok", "step_times_s": [0.1]}',                        # missing config
    '{"config": {}, "status": "done"}',                               # wrong status
    '{"config": {"batch_size": 0}}',                                  # bad config value
    '{"config": {"warp": 1}}',                                        # unknown config key
    '{"config": {}, "step_times_s": 5}',                              # not a sequence
    '{"config": {}, "step_times_s": ["a"]}',                          # not numbers
    '{"config": {}, "step_times_s": [0.1, 0.2], "input_wait_s": [0.1]}',
    '{"config": {}, "samples": [{"cpu_system_pct": 3}]}',             # sample without t_s
    '{"config": {}, "samples": [3]}',
    '{"config": {}, "losses": 7}',
]


@pytest.mark.parametrize("text", GARBAGE)
def test_from_json_garbage_raises_value_error(text):
    with pytest.raises(ValueError):
        RunResult.from_json(text)


def test_from_json_minimal_object_uses_defaults():
    r = RunResult.from_json('{"config": {"batch_size": 8}}')
    assert r.config.batch_size == 8 and r.status == "ok" and r.step_times_s == ()


# -- what a result says, so that no caller recomputes it -------------------------------------------
def test_losses_start_final_and_steps_are_derived_once():
    r = RunResult(config=RunConfig(batch_size=32, steps_per_execution=2), warmup_times_s=[0.5],
                  step_times_s=[0.1, 0.2, 0.3, 0.4], warmup_losses=[9.0], losses=[4.0, 3.0, 2.0, 1.0],
                  steps_per_call=2)
    assert r.all_losses == (9.0, 4.0, 3.0, 2.0, 1.0)
    assert r.start_loss == 9.0
    assert r.final_loss() == 1.0 and r.final_loss(steps=4) == 3.0   # 2 calls: [4, 3], the last quarter is 3
    assert r.steps_done == 10 and r.measured_steps == 8
    assert r.per_example_s == pytest.approx(0.25 / 32)
    assert RunResult(config=RunConfig(), losses=[float("nan")]).start_loss is None
    assert RunResult(config=RunConfig()).final_loss() is None


def test_notes_carry_a_kind_and_round_trip():
    r = RunResult(config=RunConfig(), notes=["TensorFlow: a log line", ("steps", "rounded up"),
                                             Note("cache=True: filled", "data")])
    assert [n.kind for n in r.notes] == ["tensorflow", "steps", "data"]
    assert r.notes_of("data", "steps") == ("rounded up", "cache=True: filled")
    assert "rounded" in r.notes[1] and r.notes[2].startswith("cache=")
    back = RunResult.from_json(r.to_json())
    assert back == r and [n.kind for n in back.notes] == ["tensorflow", "steps", "data"]
    with pytest.raises(ValueError, match="kind='bogus'.*must be one of"):
        r.notes_of("bogus")
    with pytest.raises(ValueError, match="note kind='nope'"):
        RunResult(config=RunConfig(), notes=[("nope", "text")])


def test_schema_1_grad_norms_are_split_at_the_warm_up():
    d = json.loads(RunResult(config=RunConfig(), warmup_times_s=[1.0], step_times_s=[0.1, 0.1]).to_json())
    d.update(schema=1, grad_norms=[5.0, 2.0, 1.0], loss_scales=[8.0, 8.0, 4.0], notes=["data: old"])
    r = RunResult.from_dict(d)
    assert r.warmup_grad_norms == (5.0,) and r.grad_norms == (2.0, 1.0)
    assert r.warmup_loss_scales == (8.0,) and r.loss_scales == (8.0, 4.0)
    assert r.notes == ("data: old",) and r.notes[0].kind == "data"


# -- how far from the limit (schema 3) -------------------------------------------------------
def limited(**kw) -> RunResult:
    base = dict(config=RunConfig(mixed_precision="mixed_bfloat16"), step_times_s=(0.1,) * 4,
                input_wait_s=(0.0,) * 4, model_flops_per_step=2.3e9, peak_flops_per_s=1e11,
                peak_device="GPU 0: NVIDIA A100", datasheet_flops_per_s=5.6e10, datasheet_source="NVIDIA datasheet",
                peaks={"float32": {"measured": 2e10, "datasheet": 1.95e13, "source": "s"},
                       "bfloat16": {"measured": 1e11, "datasheet": 3.12e14, "source": "s"}},
                call_overhead_s=3e-5)
    base.update(kw)
    return RunResult(**base)


def test_mfu_is_achieved_flops_over_the_measured_peak_of_the_compute_dtype():
    r = limited()
    assert r.compute_dtype == "bfloat16"
    assert r.achieved_flops_per_s == pytest.approx(2.3e10)
    assert r.mfu == pytest.approx(0.23) and r.datasheet_mfu == pytest.approx(2.3e10 / 5.6e10)
    assert r.mfu_text() == "MFU 23 % of this machine's measured bfloat16 peak (41 % of datasheet)"
    assert ", MFU 23 % of this machine's measured bfloat16 peak (41 % of datasheet), " in r.summary()
    assert r.summary().endswith(diagnose(r).headline)     # the suggestion ends the line


def test_mfu_text_never_shows_a_number_that_was_not_measured():
    assert limited(datasheet_flops_per_s=None).mfu_text() == "MFU 23 % of this machine's measured bfloat16 peak"
    cpu = limited(datasheet_source="formula: 2 cores x ...")
    assert cpu.mfu_text().endswith("(41 % of cores x clock x FLOPs/cycle)")
    unmeasured = limited(peak_flops_per_s=None, peak_reason="no GPU 1: TensorFlow sees 1 GPU(s)")
    assert unmeasured.mfu is None
    assert unmeasured.mfu_text() == ("MFU unknown: this machine's bfloat16 peak was not measured "
                                     "(no GPU 1: TensorFlow sees 1 GPU(s)); 41 % of datasheet")
    uncounted = limited(model_flops_per_step=None, flops_uncounted=("lstm (LSTM)", "a (A)", "b (B)", "c (C)"))
    assert uncounted.mfu is None and uncounted.achieved_flops_per_s is None
    assert uncounted.mfu_text() == "MFU not counted (layers: lstm (LSTM), a (A), b (B) and 1 more)"
    assert "MFU not counted (layers: lstm (LSTM), a (A), b (B) and 1 more), " in uncounted.summary()
    assert not re.search(r"MFU [0-9]", uncounted.summary())
    assert make_result().mfu_text() == ""          # a record without a count says nothing about MFU


def test_limits_fields_round_trip_and_old_records_load_with_none():
    r = limited()
    assert RunResult.from_json(r.to_json()) == r
    d = json.loads(make_result().to_json())
    for k in ("model_flops_per_step", "flops_uncounted", "peak_flops_per_s", "peak_device", "peak_reason",
              "datasheet_flops_per_s", "datasheet_source", "peaks", "call_overhead_s", "mfu"):
        del d[k]
    d["schema"] = 2
    old = RunResult.from_dict(d)
    assert (old.model_flops_per_step, old.mfu, old.peak_flops_per_s, old.call_overhead_s) == (None,) * 4
    assert old.flops_uncounted == () and old.peaks == {} and old.mfu_text() == ""


@pytest.mark.parametrize("field, bad", [("mfu", -0.1), ("model_flops_per_step", float("nan")),
                                        ("peak_flops_per_s", "fast"), ("call_overhead_s", True)])
def test_limit_fields_refuse_what_is_not_a_number(field, bad):
    with pytest.raises(ValueError, match=f"{field}="):
        limited(**{field: bad})


def test_percent():
    from tfwb.records import percent

    assert (percent(0.2349), percent(0.0412), percent(0.0), percent(1.5)) == ("23 %", "4.1 %", "0 %", "150 %")


def test_an_mfu_above_the_measured_peak_is_called_a_low_peak_not_a_figure():
    r = RunResult(config=RunConfig(), step_times_s=(0.1,) * 3, model_flops_per_step=2.3e10,
                  peak_flops_per_s=1e11, datasheet_flops_per_s=5.6e11)
    assert r.mfu == pytest.approx(2.3)
    text = r.mfu_text()
    assert text.startswith("MFU not meaningful: the step achieved 230 % of the float32 peak measured here")
    assert "41 % of datasheet" in text and "MFU 230" not in text
