"""tfwb.ui.workbench: knobs -> runner, in-place charts, failures, history file, resume.

A fake runner stands in for tfwb.run, so no TensorFlow is imported.
"""
import subprocess
import sys

import pytest

from tfwb.config import RunConfig
from tfwb.records import RunResult, load_results
from tfwb.ui.workbench import KNOB_FIELDS, Workbench

PNG = b"\x89PNG"
RED = "color:#c00"


class FakeRunner:
    """Records each config; steps take 50 ms with prefetch, 100 ms without."""

    def __init__(self, *, raises=None, fail=False):
        self.calls, self.progress_seen, self.button_states = [], [], []
        self.raises, self.fail, self.wb = raises, fail, None

    def __call__(self, cfg, *, progress=None):
        self.calls.append(cfg)
        if self.wb is not None:
            b = self.wb.run_button
            self.button_states.append((b.disabled, b.description))
        total = cfg.warmup_steps + cfg.steps
        for done in range(1, total + 1):
            progress(done, total)
            self.progress_seen.append((done, total))
        if self.raises is not None:
            raise self.raises
        if self.fail:
            return RunResult(config=cfg, status="failed", error="ResourceExhaustedError: OOM")
        step_s = 0.05 if cfg.prefetch else 0.10
        times = tuple(step_s * (1 + 0.01 * (i % 3)) for i in range(cfg.steps))
        return RunResult(config=cfg, step_times_s=times, input_wait_s=(0.001,) * cfg.steps,
                         warmup_times_s=(0.5,) * cfg.warmup_steps, examples_per_step=cfg.batch_size)


BASE = RunConfig(steps=6, warmup_steps=2)


def make(runner=None, **kwargs):
    runner = runner or FakeRunner()
    wb = Workbench(BASE, runner=runner, hardware={"gpus": [], "cpu_count": 2}, **kwargs)
    runner.wb = wb
    return wb, runner


def png(image):
    return bytes(image.value)


def test_toggle_then_click_runs_with_that_knob_and_redraws_in_place():
    wb, runner = make()
    wb.knobs["prefetch"].value = True
    wb.run_button.click()
    assert runner.calls[-1].prefetch is True and runner.calls[-1].steps == 6
    first_run, first_cmp = png(wb.run_chart), png(wb.compare_chart)
    assert first_run.startswith(PNG) and first_cmp.startswith(PNG)
    wb.knobs["prefetch"].value = False
    wb.knobs["cache"].value = True
    wb.run_button.click()
    assert runner.calls[-1].prefetch is False and runner.calls[-1].cache is True
    assert png(wb.run_chart) != first_run and png(wb.compare_chart) != first_cmp
    assert len(wb.results) == 2 and not wb.run_button.disabled


def test_button_is_disabled_while_running_and_progress_reaches_total():
    wb, runner = make()
    wb.run()
    assert runner.button_states == [(True, "Running\u2026")]
    assert runner.progress_seen[-1] == (8, 8)
    assert (wb.progress.value, wb.progress.max) == (8, 8)
    assert wb.progress.bar_style == "success"
    assert (wb.run_button.disabled, wb.run_button.description) == (False, "Run")


def test_runner_that_raises_is_recorded_as_failed_and_the_button_comes_back(tmp_path):
    path = tmp_path / "runs.jsonl"
    wb, runner = make(FakeRunner(raises=RuntimeError("device lost")), history_path=path)
    result = wb.run()
    assert result.status == "failed" and result.error == "RuntimeError: device lost"
    assert result.config == BASE
    assert not wb.run_button.disabled and wb.run_button.description == "Run"
    assert RED in wb.status.value and "device lost" in wb.status.value
    assert wb.progress.bar_style == "danger"
    assert wb.results == [result] and load_results(path) == [result]
    assert "RuntimeError: device lost" in wb.history.value and "tfwb-row-failed" in wb.history.value
    assert png(wb.run_chart).startswith(PNG)


def test_runner_returning_a_failed_result_is_red_and_kept_in_history(tmp_path):
    path = tmp_path / "runs.jsonl"
    wb, runner = make(history_path=path)
    wb.run()
    runner.fail = True
    result = wb.run(batch_size=4096)
    assert result.status == "failed"
    assert RED in wb.status.value and "OOM" in wb.status.value
    assert [r.status for r in wb.results] == ["ok", "failed"]
    assert [r.status for r in load_results(path)] == ["ok", "failed"]


def test_keyboard_interrupt_is_recorded_as_interrupted():
    wb, _ = make(FakeRunner(raises=KeyboardInterrupt()))
    result = wb.run()
    assert result.status == "interrupted" and not wb.run_button.disabled
    assert wb.results == [result]


def test_bad_knob_value_shows_red_and_records_nothing(tmp_path):
    path = tmp_path / "runs.jsonl"
    wb, runner = make(history_path=path)
    wb.run()
    history_before = wb.history.value
    wb.knobs["batch_size"].value = 0
    assert RED in wb.status.value and "batch_size=0" in wb.status.value   # shown as soon as it is typed
    wb.run_button.click()
    assert len(runner.calls) == 1 and len(wb.results) == 1 and len(load_results(path)) == 1
    assert RED in wb.status.value and "batch_size" in wb.status.value
    assert wb.history.value == history_before and not wb.run_button.disabled
    with pytest.raises(ValueError, match="batch_size=0"):
        wb.run()


def test_run_with_a_bad_value_raises_and_leaves_the_knobs():
    wb, runner = make()
    with pytest.raises(ValueError, match="batch_size=0"):
        wb.run(batch_size=0, prefetch=True)
    assert runner.calls == [] and wb.results == []
    assert RED in wb.status.value and "batch_size=0" in wb.status.value
    assert wb.knobs["batch_size"].value == 64 and wb.knobs["prefetch"].value is False


def test_run_with_an_unknown_field_raises_naming_it():
    wb, runner = make()
    with pytest.raises(ValueError, match="nonexistent"):
        wb.run(nonexistent=1)
    assert runner.calls == [] and wb.results == []


def test_run_sets_knobs_and_other_fields():
    wb, runner = make()
    wb.run(prefetch=True, clip="global_norm:1.0", mixed_precision="mixed_bfloat16", learning_rate=0.01,
           label="try")
    cfg = runner.calls[-1]
    assert (cfg.prefetch, cfg.clip, cfg.mixed_precision, cfg.learning_rate, cfg.label) == \
        (True, "global_norm:1.0", "mixed_bfloat16", 0.01, "try")
    assert wb.knobs["prefetch"].value is True and wb.knobs["clip"].value == "global_norm:1.0"
    wb.run_button.click()                                   # knobs and learning_rate persist; label does not
    assert runner.calls[-1].learning_rate == 0.01 and runner.calls[-1].label == ""
    wb.run(clip="norm:2.5")                                 # a clip value not offered becomes an option
    assert runner.calls[-1].clip == "norm:2.5" and wb.knobs["clip"].value == "norm:2.5"
    wb.run(clip=None)
    assert runner.calls[-1].clip is None and wb.knobs["clip"].value == "none"
    wb.reset_knobs()
    assert wb.config() == BASE


def test_config_reads_every_knob():
    wb, _ = make()
    assert wb.config() == BASE
    wb.knobs["jit_compile"].value = True
    wb.knobs["optimizer"].value = "sgd"
    wb.knobs["steps"].value = 9
    assert wb.config() == BASE.replace(jit_compile=True, optimizer="sgd", steps=9)
    assert "jit_compile=True" in wb.status.value                         # preview of the next run


def test_expectations_are_shown_before_a_run():
    wb, _ = make()
    wb.knobs["mixed_precision"].value = "mixed_float16"
    assert "expect a slowdown" in wb.status.value


def test_verdict_text_reaches_the_history_table_and_status():
    wb, _ = make()
    wb.run()
    wb.run(prefetch=True)
    assert "2.00x faster" in wb.history.value and "tfwb-row-baseline" in wb.history.value
    assert "2.00x faster" in wb.status.value
    wb.run(prefetch=False)
    assert "1.00x: no significant difference" in wb.history.value


def test_history_file_round_trip_and_resume(tmp_path):
    path = tmp_path / "runs.jsonl"
    wb, _ = make(history_path=path)
    wb.run()
    wb.run(prefetch=True)
    assert load_results(path) == wb.results
    again, runner = make(history_path=path)                 # a restarted kernel
    assert again.results == wb.results
    assert "2.00x faster" in again.history.value and png(again.compare_chart).startswith(PNG)
    again.run(cache=True)
    assert len(load_results(path)) == 3 and len(runner.calls) == 1
    fresh, _ = make(history_path=path, resume=False)
    assert fresh.results == [] and "No runs yet." in fresh.history.value


def test_widgets_carry_stable_css_classes_and_field_names():
    wb, _ = make()
    classes = {
        "tfwb-workbench": wb.widget, "tfwb-run": wb.run_button, "tfwb-status": wb.status,
        "tfwb-progress": wb.progress, "tfwb-run-chart": wb.run_chart,
        "tfwb-compare-chart": wb.compare_chart, "tfwb-history": wb.history,
    }
    for name, widget in classes.items():
        assert name in widget._dom_classes
    assert set(wb.knobs) == set(KNOB_FIELDS)
    for field, knob in wb.knobs.items():
        assert f"tfwb-knob-{field}" in knob._dom_classes
        assert knob.description.startswith(field)


def test_bare_workbench_displays_its_widget(monkeypatch):
    import IPython.display

    wb, _ = make()
    bundle = wb._repr_mimebundle_()
    assert bundle["application/vnd.jupyter.widget-view+json"]["model_id"] == wb.widget.model_id
    assert bundle["text/plain"].startswith("VBox(")
    shown = []
    monkeypatch.setattr(IPython.display, "display", lambda *objs, **kw: shown.extend(objs))
    wb._ipython_display_()
    assert shown == [wb.widget]


def test_default_runner_is_tfwb_run_looked_up_at_first_run(monkeypatch):
    import tfwb

    fake = FakeRunner()
    monkeypatch.setitem(vars(tfwb), "run", fake)            # setattr would read tfwb.run: TF import
    wb = Workbench(BASE, hardware={})
    assert fake.calls == []
    wb.run()
    assert fake.calls == [BASE]


def test_no_tensorflow():
    code = "import sys, tfwb.ui.workbench; assert 'tensorflow' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_pipeline_knobs_reach_the_config():
    wb, runner = make()
    latency = wb.knobs["storage_latency_ms"]
    assert latency.value == "workload default" and wb.config().storage_latency_ms is None
    latency.value = "25 ms"
    wb.knobs["shuffle_buffer"].value = 128
    wb.knobs["vectorized_map"].value = True
    wb.knobs["deterministic"].value = False
    wb.run_button.click()
    cfg = runner.calls[-1]
    assert (cfg.storage_latency_ms, cfg.shuffle_buffer, cfg.vectorized_map, cfg.deterministic) == (
        25.0, 128, True, False)
    wb.run(storage_latency_ms=7.0)                 # a value not offered becomes a choice
    assert runner.calls[-1].storage_latency_ms == 7.0 and latency.value == "7 ms"
