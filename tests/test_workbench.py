"""tfwb.ui.workbench: knobs -> runner, in-place charts, failures, Stop, history file, resume.

A fake runner stands in for tfwb.run, so no TensorFlow is imported. Runs started by a
click go to a background thread only where ``background=True`` is asked for (in a
kernel that is the default); those tests synchronise on events, never on time.
"""
import dataclasses
import html
import re
import os
import signal
import subprocess
import sys
import threading

import ipywidgets as W
import pytest

import tfwb.config
import tfwb.stats
from tfwb.config import RunConfig
from tfwb.knobs import knob_field
from tfwb.history import History, load_results
from tfwb.lifecycle import Lifecycle
from tfwb.records import RunResult
from tfwb.render import FAILED_COLOR
from tfwb.ui import controls as C
from tfwb.ui.workbench import KNOB_FIELDS, Workbench

PNG = b"\x89PNG"
RED = f"color:{FAILED_COLOR}"
WAIT_S = 60          # a deadlock guard only: every wait below ends on an event


class FakeRunner:
    """Records each config and plays a runner's part, ``runner(cfg, observers)``, on the
    real lifecycle (``tfwb.lifecycle``), step by step.

    Steps take 50 ms with prefetch and 100 ms without (input wait 1 ms). ``on_step(step)``
    runs during each step, before its observers (a test clicks Stop there); the runner
    also waits in step ``gate_step`` until the test calls ``release()``.
    """

    def __init__(self, *, raises=None, fail=False, input_wait_s=0.001, gate_step=None, on_step=None):
        self.calls, self.progress_seen, self.button_states, self.threads = [], [], [], []
        self.raises, self.fail, self.input_wait_s, self.wb = raises, fail, input_wait_s, None
        self.gate_step, self.on_step = gate_step, on_step
        self.at_gate, self.released = threading.Event(), threading.Event()

    def release(self):
        self.released.set()

    def __call__(self, cfg, observers=()):
        self.calls.append(cfg)
        self.threads.append(threading.current_thread().name)
        if self.wb is not None:
            b = self.wb.run_button
            self.button_states.append((b.disabled, b.description, self.wb.stop_button.disabled))
        total = cfg.warmup_steps + cfg.steps
        life = Lifecycle(cfg, observers, clock=lambda: 0.0)
        log, state = life.log, life.state
        life.start()
        step_s = 0.05 if cfg.prefetch else 0.10
        for step in range(total):
            log.starts_s.append(step * step_s)
            log.times_s.append(step_s * (1 + 0.01 * (step % 3)))
            log.waits_s.append(self.input_wait_s)
            log.losses.append(1.0 / (step + 1))
            if self.on_step is not None:                 # "during" the step
                self.on_step(step)
            if step == self.gate_step:
                self.at_gate.set()
                assert self.released.wait(WAIT_S), "the test never released the runner"
            life.step_end(step)                          # the step ends
            self.progress_seen.append((step + 1, total))
            if life.should_stop:
                break
        if self.raises is not None:
            raise self.raises
        if self.fail:
            return RunResult(config=cfg, status="failed", error="ResourceExhaustedError: OOM")
        life.end(life.status())
        return life.result(state.status)


BASE = RunConfig(steps=6, warmup_steps=2)


def make(runner=None, **kwargs):
    runner = runner or FakeRunner()
    wb = Workbench(kwargs.pop("baseline", BASE), runner=runner, hardware={"gpus": [], "cpu_count": 2}, **kwargs)
    runner.wb = wb
    return wb, runner


def text(widget):
    """An HTML widget's text with entities decoded (quotes are escaped)."""
    return html.unescape(widget.value)


def png(image):
    return bytes(image.value)


def tree(wb):
    return C.walk(wb.widget)


def missing_controls(wb, knobs):
    """Knobs with a group whose control is not in the displayed widget tree."""
    shown = {id(w) for w in tree(wb)}
    return [name for name, k in knobs.items()
            if k.group is not None and (name not in wb.knobs or id(wb.knobs[name]) not in shown)]


# -- controls come from the knob table ---------------------------------------------------

def test_every_knob_with_a_group_has_a_control_in_the_displayed_tree():
    wb, _ = make()
    assert missing_controls(wb, tfwb.config.KNOBS) == []
    assert set(wb.knobs) == {n for n, k in tfwb.config.KNOBS.items() if k.group} == set(KNOB_FIELDS)
    for name in ("learning_rate", "weight_decay", "steps_per_execution", "replicas", "warmup_steps",
                 "seed", "workload", "size"):
        assert name in wb.knobs


def test_the_tree_walk_catches_a_control_left_out_of_the_layout():
    wb, _ = make()
    row = next(w for w in tree(wb) if "tfwb-group-input" in w._dom_classes)
    body = row.children[1]
    body.children = tuple(c for c in body.children if c is not wb.knobs["prefetch"])
    assert missing_controls(wb, tfwb.config.KNOBS) == ["prefetch"]


@dataclasses.dataclass(frozen=True)
class _WithFakeKnob(RunConfig):
    fake_rate: float = knob_field(0.5, "float", "a knob added for this test", group="graph", minimum=0.0)


def test_a_knob_added_to_the_table_gets_a_control_and_reaches_the_runner(monkeypatch):
    table = dict(tfwb.config.KNOBS)
    table["fake_rate"] = next(f for f in dataclasses.fields(_WithFakeKnob) if f.name == "fake_rate").metadata["knob"]
    assert table["fake_rate"].group == "graph"
    monkeypatch.setattr(tfwb.config, "KNOBS", table)
    monkeypatch.setattr(tfwb.config, "RunConfig", _WithFakeKnob)        # for code that builds defaults
    wb, runner = make(baseline=_WithFakeKnob(steps=6, warmup_steps=2))
    assert missing_controls(wb, table) == []
    row = next(w for w in tree(wb) if "tfwb-group-graph" in w._dom_classes)
    assert wb.knobs["fake_rate"] in row.children[1].children and "tfwb-knob-fake_rate" in wb.knobs["fake_rate"]._dom_classes
    wb.knobs["fake_rate"].value = "0.25"
    wb.run_button.click()
    assert runner.calls[-1].fake_rate == 0.25


def test_rows_follow_the_groups_with_their_titles():
    wb, _ = make()
    rows = [w for w in tree(wb) if any(c.startswith("tfwb-group-") for c in w._dom_classes)]
    from tfwb.knobs import GROUPS
    assert [r._dom_classes[0] for r in rows] == [f"tfwb-group-{g}" for g, _ in GROUPS]
    assert [html.unescape(r.children[0].value).split(">")[1].split("<")[0] for r in rows] == [t for _, t in GROUPS]


@pytest.mark.parametrize("name, widget_type", [
    ("prefetch", W.Checkbox), ("cache", W.Checkbox), ("optimizer", W.Dropdown), ("batch_size", W.Text),
    ("learning_rate", W.Text), ("storage_latency_ms", W.Dropdown), ("weight_decay", W.Dropdown),
    ("clip", W.Dropdown), ("replicas", W.Text), ("workload", W.Dropdown),
])
def test_each_kind_gets_its_control(name, widget_type):
    wb, _ = make()
    assert type(wb.knobs[name]) is widget_type
    assert wb.knobs[name].description.startswith(name)
    assert f"tfwb-knob-{name}" in wb.knobs[name]._dom_classes


def test_toggles_are_checkboxes_that_show_on_or_off():
    wb, runner = make()
    box = wb.knobs["prefetch"]
    assert box.value is False and box.indent is False
    box.value = True
    wb.run_button.click()
    assert runner.calls[-1].prefetch is True and box.value is True


def test_a_typed_learning_rate_is_honoured_exactly():
    wb, runner = make()
    lr = wb.knobs["learning_rate"]
    assert lr.value == "0.001"
    lr.value = "3e-4"
    wb.run_button.click()
    assert runner.calls[-1].learning_rate == 0.0003
    wb.run(learning_rate=0.00123456789)
    assert lr.value == "0.00123456789"
    wb.run_button.click()
    assert runner.calls[-1].learning_rate == 0.00123456789


def test_cache_keeps_a_path_from_the_baseline(tmp_path):
    path = str(tmp_path / "cache")
    wb, runner = make(baseline=BASE.replace(cache=path))
    assert wb.knobs["cache"].value is True and wb.config().cache == path
    wb.knobs["cache"].value = False
    assert wb.config().cache is False
    wb.knobs["cache"].value = True
    wb.run_button.click()
    assert runner.calls[-1].cache == path
    wb.run(cache=True)                               # in memory, when asked for
    assert runner.calls[-1].cache is True or runner.calls[-1].cache == path
    wb.reset_knobs()
    assert wb.config().cache == path


def test_optional_number_text_means_none_when_empty():
    wb, runner = make()
    replicas = wb.knobs["replicas"]
    assert replicas.value == "" and wb.config().replicas is None and replicas.placeholder
    replicas.value = "2"
    assert wb.config().replicas == 2
    replicas.value = "none"
    assert wb.config().replicas is None


# -- bad input ------------------------------------------------------------------------

def test_a_bad_typed_value_is_red_disables_run_and_records_nothing(tmp_path):
    path = tmp_path / "runs.jsonl"
    wb, runner = make(history_path=path)
    wb.run()
    history_before = wb.history.value
    steps = wb.knobs["steps"]
    steps.value = "abc"
    assert steps.value == "abc"                                       # not silently reverted
    assert "tfwb-invalid" in steps._dom_classes
    assert RED in wb.status.value and "steps='abc'" in text(wb.status)
    assert wb.run_button.disabled and wb.apply_button.disabled
    wb.run_button.click()                                             # a click that still gets through
    assert len(runner.calls) == 1 and len(wb.results) == 1 and len(load_results(path)) == 1
    assert wb.history.value == history_before
    with pytest.raises(ValueError, match="steps='abc'"):
        wb.run()
    steps.value = "7"
    assert "tfwb-invalid" not in steps._dom_classes and not wb.run_button.disabled
    assert RED not in wb.status.value.split("Next run")[-1]
    wb.run_button.click()
    assert runner.calls[-1].steps == 7


@pytest.mark.parametrize("name, typed, message", [
    ("batch_size", "0", "batch_size=0"), ("batch_size", "1.5", "batch_size='1.5'"),
    ("learning_rate", "fast", "learning_rate='fast'"), ("learning_rate", "-1", "learning_rate=-1.0"),
])
def test_bad_numbers_name_the_field(name, typed, message):
    wb, runner = make()
    wb.knobs[name].value = typed
    assert RED in wb.status.value and message in text(wb.status)
    assert wb.run_button.disabled
    wb.run_button.click()
    assert runner.calls == [] and wb.results == []


def test_run_sets_a_field_over_a_bad_typed_value():
    wb, runner = make()
    wb.knobs["steps"].value = "x"
    wb.run(steps=5)
    assert runner.calls[-1].steps == 5 and wb.knobs["steps"].value == "5"


def test_run_with_a_bad_value_raises_and_leaves_the_knobs():
    wb, runner = make()
    with pytest.raises(ValueError, match="batch_size=0"):
        wb.run(batch_size=0, prefetch=True)
    assert runner.calls == [] and wb.results == []
    assert RED in wb.status.value and "batch_size=0" in wb.status.value
    assert wb.knobs["batch_size"].value == "64" and wb.knobs["prefetch"].value is False


def test_run_with_an_unknown_field_raises_naming_it():
    wb, runner = make()
    with pytest.raises(ValueError, match="nonexistent"):
        wb.run(nonexistent=1)
    assert runner.calls == [] and wb.results == []


# -- running, charts, history ------------------------------------------------------------

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


def test_buttons_while_running_and_progress_reaches_total():
    wb, runner = make()
    wb.run()
    assert runner.button_states == [(True, "Running\u2026", True)]      # Run off; Stop: interrupt a cell
    assert runner.progress_seen[-1] == (8, 8)
    assert (wb.progress.value, wb.progress.max) == (8, 8)
    assert wb.progress.bar_style == "success"
    assert (wb.run_button.disabled, wb.run_button.description, wb.stop_button.disabled) == (False, "Run", True)


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
    assert wb.run_chart.value in (b"", None) or not png(wb.run_chart)       # nothing to chart, no empty axes
    assert RED in wb.chart_note.value


def test_a_failed_run_keeps_the_last_good_chart_and_says_so(tmp_path):
    wb, runner = make(history_path=tmp_path / "runs.jsonl")
    wb.run()
    good = png(wb.run_chart)
    assert good.startswith(PNG) and wb.chart_note.layout.display == "none"
    runner.raises = RuntimeError("no TPU here")
    wb.run(strategy="tpu")
    assert png(wb.run_chart) == good                                     # not replaced by empty axes
    assert RED in wb.chart_note.value and "#1" in wb.chart_note.value and wb.chart_note.layout.display is None
    assert RED in wb.status.value and "no TPU here" in wb.status.value
    assert "tfwb-row-failed" in wb.history.value
    runner.raises = None
    wb.run(strategy="default", prefetch=True)
    assert png(wb.run_chart) != good and wb.chart_note.layout.display == "none"


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
    # The fake raises after its last step: the Progress observer saw all 8.
    assert result.error == "interrupted by the user (KeyboardInterrupt) after 8 of 8 steps"
    assert wb.results == [result]


def test_run_sets_knobs_and_other_fields():
    wb, runner = make()
    wb.run(prefetch=True, clip="global_norm:1.0", mixed_precision="mixed_bfloat16", sample_interval_s=0.5,
           learning_rate=0.01, label="try")
    cfg = runner.calls[-1]
    assert (cfg.prefetch, cfg.clip, cfg.mixed_precision, cfg.sample_interval_s, cfg.learning_rate, cfg.label) == \
        (True, "global_norm:1.0", "mixed_bfloat16", 0.5, 0.01, "try")
    assert wb.knobs["prefetch"].value is True and wb.knobs["clip"].value == "global_norm:1.0"
    assert wb.knobs["learning_rate"].value == "0.01"
    wb.run_button.click()                                   # knobs and other fields persist; label does not
    assert runner.calls[-1].sample_interval_s == 0.5 and runner.calls[-1].label == ""
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
    wb.knobs["steps"].value = "9"
    assert wb.config() == BASE.replace(jit_compile=True, optimizer="sgd", steps=9)
    assert "jit_compile=True" in wb.status.value                         # preview of the next run


def test_expectations_are_shown_before_a_run():
    wb, _ = make()
    wb.knobs["mixed_precision"].value = "mixed_float16"
    assert "slower than float32" in wb.status.value


def test_a_described_machine_is_the_hardware_of_the_header_and_the_expectations():
    from tfwb.hardware import DESCRIBED

    wb = Workbench(BASE, runner=FakeRunner(), hardware=DESCRIBED["colab-t4"])
    header = next(w for w in tree(wb) if "tfwb-header" in w._dom_classes)
    assert "T4" in header.value
    wb.knobs["mixed_precision"].value = "mixed_float16"
    assert "on Tesla T4" in text(wb.status)


def test_verdict_text_reaches_the_history_table_and_status():
    wb, _ = make()
    wb.run()
    wb.run(prefetch=True)
    assert "2.00x faster" in wb.history.value and "tfwb-row-baseline" in wb.history.value
    assert "2.00x faster" in wb.status.value
    wb.run(prefetch=False)
    assert "1.00x: no significant difference" in wb.history.value
    status = re.sub(r"<[^>]+>", "", text(wb.status))                # tags off: the words the reader sees
    assert "vs the previous run (#2): 2.00x slower" in status       # what the reader just changed
    assert "vs the baseline: 1.00x: no significant difference" in status


def test_history_file_round_trip_and_resume(tmp_path):
    path = tmp_path / "runs.jsonl"
    wb, _ = make(history_path=path)
    wb.run()
    wb.run(prefetch=True)
    assert load_results(path) == wb.results
    again, runner = make(history_path=path)                 # a restarted kernel
    assert again.results == wb.results
    assert "2.00x faster" in again.history.value and png(again.compare_chart).startswith(PNG)
    assert png(again.run_chart).startswith(PNG)
    again.run(cache=True)
    assert len(load_results(path)) == 3 and len(runner.calls) == 1
    fresh, _ = make(history_path=path, resume=False)
    assert fresh.results == [] and "No runs yet." in fresh.history.value


def test_widgets_carry_stable_css_classes_and_field_names():
    wb, _ = make()
    classes = {
        "tfwb-workbench": wb.widget, "tfwb-run": wb.run_button, "tfwb-stop": wb.stop_button,
        "tfwb-apply": wb.apply_button, "tfwb-status": wb.status, "tfwb-progress": wb.progress,
        "tfwb-run-chart": wb.run_chart, "tfwb-chart-note": wb.chart_note,
        "tfwb-compare-chart": wb.compare_chart, "tfwb-history": wb.history,
    }
    for name, widget in classes.items():
        assert name in widget._dom_classes
    for field, w in wb.knobs.items():
        assert f"tfwb-knob-{field}" in w._dom_classes
        assert w.description.startswith(field)


def test_the_header_carries_the_stale_kernel_banner_css():
    wb, _ = make()
    header = next(w for w in tree(wb) if "tfwb-header" in w._dom_classes)
    assert "<style>" in header.value and ".tfwb-workbench.jupyter-widgets-disconnected::before" in header.value
    assert "stale" in header.value


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


def test_the_runner_is_called_as_every_runner_is():
    seen = []

    def runner(cfg, observers):
        seen.append((cfg, [type(o).__name__ for o in observers]))
        return RunResult(config=cfg, step_times_s=(0.1,) * cfg.steps, examples_per_step=1)

    wb = Workbench(BASE, runner=runner, hardware={})
    assert wb.run().ok and seen == [(BASE, ["Progress", "StopFlag"])]


def test_a_runner_of_another_signature_fails_visibly():
    def old_runner(cfg, *, progress=None):
        raise AssertionError("not reached")

    wb = Workbench(BASE, runner=old_runner, hardware={})
    result = wb.run()
    assert result.status == "failed" and result.error.startswith("TypeError:") and RED in wb.status.value


def test_a_torn_history_line_is_skipped_and_said(tmp_path):
    path = tmp_path / "runs.jsonl"
    wb, _ = make(history_path=path)
    wb.run()
    with open(path, "a") as fh:
        fh.write(wb.results[0].to_json()[:50])                    # a kernel died mid-write
    again, _ = make(history_path=path)
    assert again.results == wb.results
    assert "skipped 1 line(s)" in text(again.status) and "line 2: cut short" in text(again.status)
    again.run()
    history = History(path)
    assert history.load() == again.results and [n for n, _ in history.skipped] == [2]   # next run: own line


def test_no_tensorflow():
    code = "import sys, tfwb.ui.workbench; assert 'tensorflow' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_pipeline_knobs_reach_the_config():
    wb, runner = make()
    latency = wb.knobs["storage_latency_ms"]
    assert latency.value == "default" and wb.config().storage_latency_ms is None
    latency.value = "25 ms"
    wb.knobs["shuffle_buffer"].value = "128"
    wb.knobs["vectorized_map"].value = True
    wb.knobs["deterministic"].value = False
    wb.run_button.click()
    cfg = runner.calls[-1]
    assert (cfg.storage_latency_ms, cfg.shuffle_buffer, cfg.vectorized_map, cfg.deterministic) == (
        25.0, 128, True, False)
    wb.run(storage_latency_ms=7.5)                 # a value not offered becomes a choice
    assert runner.calls[-1].storage_latency_ms == 7.5 and latency.value == "7.5 ms"


# -- Stop, kernel interrupt, double clicks -------------------------------------------------

def test_stop_during_a_run_records_it_interrupted_with_the_steps_done(tmp_path):
    path = tmp_path / "runs.jsonl"
    wb, runner = make(history_path=path, baseline=BASE.replace(steps=300))
    runner.on_step = lambda step: wb.stop() if step == 9 else None     # as from another thread
    result = wb.run()
    assert len(runner.progress_seen) == 10                               # ended after the step it was on
    assert result.status == "interrupted" and result.stop_reason == "stopped by the user (wb.stop())"
    assert len(result.warmup_times_s) == 2 and len(result.step_times_s) == 8
    assert result.error == "stopped by the user (wb.stop()) after 10 of 302 steps"
    assert "interrupted" in wb.status.value and "after 10 of 302 steps" in wb.status.value
    assert load_results(path) == [result] and "tfwb-row-interrupted" in wb.history.value
    assert png(wb.run_chart).startswith(PNG)                             # its steps are charted
    assert wb.progress.bar_style == "warning" and wb.stop_button.disabled and not wb.run_button.disabled


def test_a_click_runs_in_the_background_and_stop_ends_it():
    wb, runner = make(FakeRunner(gate_step=4), background=True, baseline=BASE.replace(steps=300))
    wb.run_button.click()
    assert runner.at_gate.wait(WAIT_S)
    assert wb.running and runner.threads == ["tfwb-workbench-run"]
    assert wb.run_button.disabled and not wb.stop_button.disabled        # Stop offered: a click gets through
    wb.stop_button.click()                                               # while the run is going
    runner.release()
    result = wb.wait(WAIT_S)
    assert not wb.running and result is wb.results[-1]
    assert result.status == "interrupted" and len(result.warmup_times_s) + len(result.step_times_s) == 5
    assert "Stop button" in result.error and not wb.run_button.disabled and wb.stop_button.disabled


def test_a_double_click_starts_one_run():
    wb, runner = make(FakeRunner(gate_step=1), background=True)
    wb.run_button.click()
    assert runner.at_gate.wait(WAIT_S)
    wb.run_button.click()                                                # arrives while the first runs
    wb.run_button.click()
    with pytest.raises(RuntimeError, match="in progress"):
        wb.run()
    runner.release()
    wb.wait(WAIT_S)
    assert len(runner.calls) == 1 and len(wb.results) == 1 and wb.results[0].ok


def test_two_clicks_from_two_threads_at_once_start_one_run():
    wb, runner = make(FakeRunner(gate_step=0), background=True)
    go = threading.Barrier(3)

    def click():
        go.wait(WAIT_S)
        wb.run_button.click()

    threads = [threading.Thread(target=click) for _ in range(2)]
    for t in threads:
        t.start()
    go.wait(WAIT_S)
    for t in threads:
        t.join(WAIT_S)
    assert runner.at_gate.wait(WAIT_S)
    runner.release()
    wb.wait(WAIT_S)
    assert len(runner.calls) == 1


def test_a_kernel_interrupt_stops_a_background_run():
    chained = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: chained.append(signum))
    try:
        wb, runner = make(FakeRunner(gate_step=3), background=True, baseline=BASE.replace(steps=300))
        wb.run_button.click()                  # armed from this (main) thread: no kernel here
        assert runner.at_gate.wait(WAIT_S)
        os.kill(os.getpid(), signal.SIGINT)    # the handler runs on this thread at once
        runner.release()
        result = wb.wait(WAIT_S)
        assert result.status == "interrupted" and result.stop_reason == "interrupted by the user (kernel interrupt)"
        assert "kernel interrupt" in result.error
        assert len(result.warmup_times_s) + len(result.step_times_s) == 4
        assert chained == [signal.SIGINT]      # the previous handler was called too
        assert len(wb.results) == 1
    finally:
        signal.signal(signal.SIGINT, previous)


def test_the_interrupt_handler_is_removed_after_the_run():
    def mine(signum, frame):
        pass

    previous = signal.signal(signal.SIGINT, mine)
    try:
        wb, runner = make(FakeRunner(gate_step=0), background=True)
        wb.run_button.click()
        assert runner.at_gate.wait(WAIT_S)
        assert signal.getsignal(signal.SIGINT) is not mine            # the bridge holds it
        runner.release()
        wb.wait(WAIT_S)
        wb.controller.bridge.disarm()                                           # from the main thread
        assert signal.getsignal(signal.SIGINT) is mine
    finally:
        signal.signal(signal.SIGINT, previous)


def test_stop_with_no_run_does_nothing():
    wb, runner = make()
    assert wb.stop() is False
    wb.stop_button.click()
    assert wb.results == [] and wb.stop_button.disabled


# -- apply the suggestion ---------------------------------------------------------------

def test_apply_suggestion_sets_exactly_that_knob_and_runs():
    wb, runner = make(FakeRunner(input_wait_s=0.05))                     # half of each step waits
    assert wb.apply_button.disabled and wb.suggestion() is None
    with pytest.raises(ValueError, match="no suggestion"):
        wb.apply_suggestion()
    wb.knobs["optimizer"].value = "sgd"                                  # the user's own change stays
    first = wb.run()
    field, value, why = wb.suggestion()
    assert (field, value) == ("interleave", True)                       # files behind a read latency (issue 18)
    assert not wb.apply_button.disabled and "interleave=True" in wb.apply_button.description
    result = wb.apply_suggestion()
    assert result is wb.results[-1]
    assert result.config == first.config.replace(interleave=True)       # that knob, nothing else
    assert wb.knobs["interleave"].value is True
    assert "Applied the suggestion interleave=True" in wb.status.value


def test_the_apply_button_does_what_apply_suggestion_does():
    wb, runner = make(FakeRunner(input_wait_s=0.05))
    wb.run()
    expected = wb.suggestion()
    wb.apply_button.click()
    assert len(runner.calls) == 2
    assert runner.calls[-1] == runner.calls[0].replace(**{expected[0]: expected[1]})
    assert f"Applied the suggestion {expected[0]}={expected[1]!r}" in wb.status.value


def test_no_suggestion_after_a_failed_run():
    wb, runner = make(FakeRunner(input_wait_s=0.05))
    wb.run()
    runner.fail = True
    wb.run()
    assert wb.suggestion() is None and wb.apply_button.disabled


# -- issue 18: the Workbench tells the truth, rendered once headless --------------------------------------
def test_the_workbench_says_per_example_drops_stale_labels_shows_loss_and_counts_steps():
    import fakes

    def step_time(cfg):                       # chapter 03's figures: batch 128 takes 81.2 ms, 64 takes 49.2
        return 0.0812 if cfg.batch_size == 128 else 0.0492

    def loss(cfg, step):                      # sgd ends higher than adam
        return fakes.falling_loss(cfg, step, end=1.5 if cfg.optimizer == "sgd" else 1.0)

    runner = fakes.FakeRunner(step_time=step_time, loss=loss)
    wb = Workbench(RunConfig(steps=8, warmup_steps=2, label="images, knobs off"), runner=runner,
                   hardware={"gpus": [], "cpu_count": 2})
    wb.run()
    assert wb.results[0].config.label == "images, knobs off"
    wb.run(batch_size=128)
    status, history = re.sub("<[^>]+>", "", text(wb.status)), text(wb.history)
    assert wb.results[1].config.label == ""                            # not "images, knobs off" any more
    assert "vs the previous run (#1): per example: 1.21x faster (batch 128 vs 64)" in status
    assert ">#1: 1.21x faster per example<" in history                 # the cell: a short phrase
    assert wb.loss_chart.layout.display == "none"                      # batch size: same arithmetic per step
    wb.run(batch_size=64, optimizer="sgd")
    status, history = re.sub("<[^>]+>", "", text(wb.status)), text(wb.history)
    assert "final loss 1.657 vs 1.157 for #2 (+0.5, higher) after 8 steps" in status
    assert "#3: final loss 1.657 vs 1.157 for #2" in history             # the row's note, under the table
    assert wb.loss_chart.layout.display is None and png(wb.loss_chart)[:4] == PNG
    wb.run(steps_per_execution=4, optimizer="adam")                   # warm-up 2 -> 4 steps, 8 measured
    assert text(wb.progress_text) == "12 / 12 steps: ok" and wb.progress.max == 12
    assert [done for done, _ in runner.progress_seen[-3:]] == [4, 8, 12]
    everything = text(wb.status) + text(wb.history)
    assert not re.search(r"\b0\.\d\dx", everything), everything        # no bare ratio
    assert "images, knobs off" not in [r.config.label for r in wb.results[1:]]


# -- how far from the limit (issue 19): MFU, the limits chart, bounds scored --------------------------
def test_mfu_limits_chart_suggestion_bound_and_a_gain_above_it_flagged():
    """A run that waits 30 % of its step: the status line carries its MFU and its suggestion's
    bound; applying the suggestion gives a 2x gain, above the 1.4x bound beyond noise: flagged red."""
    import fakes
    from tfwb.analysis.diagnosis import diagnose

    def result(cfg, step_s, wait_s):
        return fakes.make_result(cfg, step_s=step_s, wait_s=wait_s, n=8, model_flops_per_step=2e9,
                                 peak_flops_per_s=1e11, datasheet_flops_per_s=2e11,
                                 fingerprint={"gpus": [{"name": "G", "compute_capability": [8, 0]}]})  # a GPU step:
        # the input bound is strict there (on a CPU the pipeline shares the step's cores)

    slow = result(BASE, 0.1, 0.03)
    knob, value, _why = diagnose(slow).suggestions[0]

    def runner(cfg, observers=()):
        return result(cfg, 0.05, 0.001) if getattr(cfg, knob) == value else result(cfg, 0.1, 0.03)

    wb, _ = make(runner)
    wb.run()
    status = text(wb.status)
    assert "MFU 20 % of this machine's measured float32 peak (10 % of datasheet)" in status
    assert f"Next: try {knob}={value!r} \u2014 can gain at most 1.4x: the step waits for input 30 % of the time" in status
    assert "can gain at most 1.4x" in wb.apply_button.tooltip
    assert wb.limits_chart.layout.display is None and png(wb.limits_chart)
    assert "MFU" in text(wb.history) and "20 %" in text(wb.history)
    wb.apply_suggestion()
    status = text(wb.status)
    flagged = (f"{knob}={value!r}: measured 2.0x is above its bound 1.4x beyond noise (+-10 %): "
               "the bound or the measurement is wrong")
    assert f"Suggestion scored: <b style='{RED}'>{flagged}</b>" in status
    assert flagged in text(wb.history)


def test_a_click_diagnoses_each_run_once_and_computes_the_history_once(monkeypatch):
    """Issue 26: a click ran diagnose ten or more times and history_rows four times."""
    from tfwb.analysis import diagnosis, rows

    calls = {"diagnose": 0, "history_rows": 0}
    real_diagnose, real_rows = diagnosis.diagnose, rows.history_rows

    def counting_diagnose(*a, **k):
        calls["diagnose"] += 1
        return real_diagnose(*a, **k)

    def counting_rows(*a, **k):
        calls["history_rows"] += 1
        return real_rows(*a, **k)

    monkeypatch.setattr("tfwb.analysis.session.diagnose", counting_diagnose)
    monkeypatch.setattr(rows, "diagnose", counting_diagnose)
    monkeypatch.setattr(rows, "history_rows", counting_rows)
    wb, _ = make()
    for prefetch in (False, True, False):
        before = dict(calls)
        wb.run(prefetch=prefetch)
        assert calls["history_rows"] - before["history_rows"] == 1, calls
        assert calls["diagnose"] - before["diagnose"] == 1, calls      # only the new run is diagnosed
    assert wb.controller.analysis.diagnosed == 3
    views = wb.controller.analysis.views(wb.results, wb.controller.baseline_result(),
                                         baseline_config=wb.controller.baseline)
    assert [v.index for v in views] == [1, 2, 3] and views[1].versus_previous in ("faster", "slower",
                                                                                 "no significant difference")


# -- issue 34: every "cannot tell" is one click from an answer ------------------------------------------
class BusyRunner(FakeRunner):
    """FakeRunner's runs, recorded as if other programs used 16 % of the CPU during them."""

    def __call__(self, cfg, observers=()):
        return dataclasses.replace(super().__call__(cfg, observers), extras={"other_cpu_pct": 16.0})


class Interleave:
    """A fake ``compare_interleaved``: the candidate 3x faster in every round; with ``gate_round`` it waits
    there until ``released`` is set (``at_gate`` says it waits)."""

    def __init__(self, gate_round=None):
        self.gate_round, self.calls = gate_round, []
        self.at_gate, self.released = threading.Event(), threading.Event()

    def __call__(self, a, b, rounds=None, progress=None, **kwargs):
        rounds = rounds or 30
        self.calls.append((a, b, rounds))
        for r in range(rounds):
            if r + 1 == self.gate_round:
                self.at_gate.set()
                assert self.released.wait(WAIT_S), "the test never released the comparison"
            progress(r + 1, rounds)
        return tfwb.stats.compare_rounds([0.3] * rounds, [0.1] * rounds, method="fake rounds")


def test_decide_button_stands_beside_a_cannot_tell_verdict_and_one_click_answers_it(monkeypatch):
    monkeypatch.setenv("TFWB_FAST", "1")                                # few rounds in small mode
    wb, runner = make(BusyRunner())
    wb.controller.compare = Interleave()
    assert wb.decide_button.layout.display == "none" and "tfwb-decide" in wb.decide_button._dom_classes
    wb.run()
    assert wb.decide_button.layout.display == "none"                     # the baseline: nothing to decide
    wb.run(prefetch=True)
    assert "cannot tell" in text(wb.status)
    assert wb.decide_button.layout.display == "" and not wb.decide_button.disabled
    assert wb.decide_button.description == "Decide #2 vs the previous run (#1)"
    i = wb.widget.children.index(wb.status)
    assert wb.widget.children[i + 1] is wb.decide_button                 # right under the verdict
    wb.decide_button.click()
    assert wb.controller.compare.calls == [(BASE, BASE.replace(prefetch=True), 10)]
    status = text(wb.status)
    assert "Decided by an interleaved comparison (fake rounds): 3.00x faster" in status
    assert wb.progress_text.value == "decided: faster" and wb.progress.bar_style == "success"
    assert wb.decide_button.layout.display == "none" and len(wb.results) == 2
    assert wb.controller.latest_view().versus_previous == "faster"


def test_wb_decide_from_a_cell_and_stop_during_a_background_decide(monkeypatch):
    monkeypatch.setenv("TFWB_FAST", "1")
    wb, runner = make(BusyRunner(), background=True)
    wb.controller.compare = Interleave(gate_round=2)
    wb.run()
    wb.run(prefetch=True)
    wb.decide_button.click()                                             # background, as in a kernel
    assert wb.controller.compare.at_gate.wait(WAIT_S)
    assert wb.decide_button.disabled and wb.run_button.disabled and not wb.stop_button.disabled
    wb.stop_button.click()
    wb.controller.compare.released.set()
    wb.wait(WAIT_S)
    assert "Decide: stopped by the user after 2 of 10 rounds; nothing was recorded" in text(wb.status)
    assert wb.progress_text.value == "decide stopped" and not wb.decide_button.disabled
    wb.controller.compare = Interleave()
    result = wb.decide("previous")                                       # blocking, from a cell
    assert result.verdict == "faster" and wb.controller.compare.calls[-1][2] == 10
    assert wb.decide_button.layout.display == "none" and not wb.running
    with pytest.raises(ValueError, match="against='best' is not allowed"):
        wb.decide("best")
