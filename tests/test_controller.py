"""tfwb.ui.controller: the Workbench's runs without its widgets.

Knob inputs are plain objects and the renderer is an event recorder, so nothing is
displayed and no widget is built; ``tfwb.ui.controller`` imports no ipywidgets at all.
The runner is the shared ``FakeRunner`` (no TensorFlow).
"""
import dataclasses
import subprocess
import sys
import threading

import pytest
from fakes import GATE_TIMEOUT_S, FakeRunner

from tfwb import stats
from tfwb.config import RunConfig
from tfwb.history import History
from tfwb.records import RunResult
from tfwb.ui.controller import ControllerEvents, WorkbenchController

BASE = RunConfig(steps=6, warmup_steps=2)


class Box:
    """A knob input holding text, read with a parser (as a Text control is)."""

    def __init__(self, value, parse=lambda v: v):
        self.value, self.parse = value, parse

    def read(self):
        return self.parse(self.value)

    def show(self, value):
        self.value = value

    def reset(self, value):
        self.value = value


def steps_text(value):
    try:
        return int(value)
    except (TypeError, ValueError):
        raise ValueError(f"steps={value!r} is not allowed; steps must be an integer >= 1") from None


class Recorder(ControllerEvents):
    """Every event, in order, as (name, details); the controller's state at each one."""

    def __init__(self, controller):
        self.controller, self.seen = controller, []

    def on_changes_refused(self, error):
        self.seen.append(("refused", str(error)))

    def on_config_refused(self, error):
        self.seen.append(("bad knob", str(error)))

    def on_run_start(self, cfg, number, note, stoppable):
        self.seen.append(("start", (number, note, stoppable, self.controller.running)))

    def on_progress(self, steps_done, steps_total, stopping):
        self.seen.append(("progress", (steps_done, steps_total, stopping)))

    def on_result(self, result, number, note, problems):
        self.seen.append(("result", (number, result.status, note, tuple(problems),
                                     self.controller.results[-1] is result)))

    def on_idle(self):
        self.seen.append(("idle", self.controller.running))

    def names(self):
        return [name for name, _ in self.seen]


def make(runner=None, inputs=None, **kwargs):
    runner = runner or FakeRunner()
    bench = WorkbenchController(kwargs.pop("baseline", BASE), runner=runner, **kwargs)
    bench.inputs = inputs if inputs is not None else {"prefetch": Box(False), "steps": Box("6", steps_text)}
    events = bench.events = Recorder(bench)
    return bench, runner, events


def test_the_inputs_and_the_changes_make_the_config():
    bench, runner, _ = make()
    bench.inputs["prefetch"].value = True
    assert bench.config() == BASE.replace(prefetch=True)
    bench.run(steps=3, sample_interval_s=0.5, label="try")
    assert runner.calls[-1] == BASE.replace(prefetch=True, steps=3, sample_interval_s=0.5, label="try")
    assert bench.inputs["steps"].value == 3                    # the input shows what ran
    assert bench.config() == BASE.replace(prefetch=True, steps=3, sample_interval_s=0.5)   # label: one run
    bench.reset()
    assert bench.config() == BASE and bench.inputs["prefetch"].value is False


def test_a_run_tells_the_events_in_order_and_records_the_result(tmp_path):
    path = tmp_path / "runs.jsonl"
    bench, runner, events = make(history_path=path)
    result = bench.run()
    assert result.ok and bench.results == [result] and History(path).load() == [result]
    assert events.names() == ["start"] + ["progress"] * 8 + ["result", "idle"]
    assert events.seen[0] == ("start", (1, None, False, True))      # inline: not stoppable by a click
    assert events.seen[8] == ("progress", (8, 8, False))
    assert events.seen[-2] == ("result", (1, "ok", None, (), True))
    assert events.seen[-1] == ("idle", False) and not bench.running


def test_each_recorded_run_pushes_its_view_to_the_subscribers_before_on_result():
    """Issue 33: the way back is pushed, once per run, as typed data (tfwb.analysis.session)."""
    bench, runner, events = make()
    views = []
    bench.analysis.subscribe(lambda view: views.append((view, len(events.seen))))
    first = bench.run()
    second = bench.run(prefetch=True)
    assert [v.index for v, _ in views] == [1, 2] and [v.result for v, _ in views] == [first, second]
    assert [r.result for r in views[1][0].rows] == [first, second] and views[1][0].row.previous == 1
    assert views[0][0].row.is_baseline and views[0][0].versus_baseline == "baseline"
    pushed_at = views[1][1]
    assert events.seen[pushed_at][0] == "result"             # the view came before on_result
    assert views[1][0] is bench.analysis.views(bench.results, bench.baseline_result(),
                                               baseline_config=bench.baseline)[-1]   # computed once


def test_a_refused_change_tells_the_events_and_changes_nothing():
    bench, runner, events = make()
    with pytest.raises(ValueError, match="batch_size=0"):
        bench.run(batch_size=0, prefetch=True)
    assert events.names() == ["refused"] and "batch_size=0" in events.seen[0][1]
    assert runner.calls == [] and bench.results == [] and bench.inputs["prefetch"].value is False
    with pytest.raises(ValueError, match="nonexistent"):
        bench.run(nonexistent=1)
    assert runner.calls == []


def test_a_bad_knob_runs_nothing_a_click_does_not_raise():
    bench, runner, events = make()
    bench.inputs["steps"].value = "abc"
    with pytest.raises(ValueError, match="steps='abc'"):
        bench.run()                                             # refused as a change: the knobs are read
    bench.click()
    assert events.names() == ["refused", "bad knob"] and runner.calls == [] and bench.results == []
    bench.run(steps=4)                                          # a change over the bad text
    assert runner.calls[-1].steps == 4


def test_what_the_runner_raises_becomes_a_recorded_result(tmp_path):
    path = tmp_path / "runs.jsonl"
    bench, _, events = make(FakeRunner(raises=RuntimeError("device lost")), history_path=path)
    failed = bench.run()
    assert (failed.status, failed.error, failed.config) == ("failed", "RuntimeError: device lost", BASE)

    def interrupted(cfg, observers):
        for o in observers:
            if hasattr(o, "callback"):
                o.callback(3, 8)
        raise KeyboardInterrupt

    bench._runner = interrupted
    stopped = bench.run()
    assert stopped.status == "interrupted"
    assert stopped.error == "interrupted by the user (KeyboardInterrupt) after 3 of 8 steps"
    bench._runner = lambda cfg, observers: "not a result"
    wrong = bench.run()
    assert wrong.status == "failed" and wrong.error.startswith("TypeError: the runner returned str")
    assert History(path).load() == bench.results == [failed, stopped, wrong]
    assert events.names().count("idle") == 3 and not bench.running


def test_a_history_that_cannot_be_written_is_said_and_the_result_kept(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    bench, _, events = make(history_path=blocker / "runs.jsonl")
    result = bench.run()
    number, status, _, problems, kept = events.seen[-2][1]
    assert (number, status, kept) == (1, "ok", True) and bench.results == [result]
    assert len(problems) == 1 and problems[0].startswith(f"not saved to {blocker / 'runs.jsonl'}")


def test_a_background_run_is_stopped_from_another_thread():
    bench, runner, events = make(FakeRunner(gate_step=3), background=True, baseline=BASE.replace(steps=300))
    bench.click()
    assert runner.at_gate.wait(GATE_TIMEOUT_S)
    assert bench.running and runner.threads == ["tfwb-workbench-run"]
    assert events.seen[0] == ("start", (1, None, True, True))
    bench.click()                                               # a second click starts nothing
    with pytest.raises(RuntimeError, match="in progress"):
        bench.run()
    assert bench.stop("Stop button") and bench.stopping
    runner.release()
    result = bench.wait(GATE_TIMEOUT_S)
    assert result is bench.results[-1] and len(runner.calls) == 1 and not bench.running
    assert result.status == "interrupted" and result.stop_reason == "stopped by the user (Stop button)"
    assert len(result.warmup_times_s) + len(result.step_times_s) == 4
    assert bench.stop() is False and not bench.bridge.armed


def test_progress_says_stopping_once_a_stop_is_asked():
    bench, runner, events = make(baseline=BASE.replace(steps=300))
    runner.on_step = lambda step: bench.stop() if step == 4 else None
    result = bench.run()
    progress = [details for name, details in events.seen if name == "progress"]
    assert [p[2] for p in progress] == [False] * 4 + [True]
    assert result.status == "interrupted" and result.stop_reason == "stopped by the user (wb.stop())"


def test_the_suggestion_is_applied_with_its_note():
    inputs = {name: Box(False) for name in ("prefetch", "interleave", "parallel_map")}
    bench, runner, events = make(FakeRunner(input_wait_s=0.05), inputs={**inputs, "steps": Box("6", steps_text)})
    assert bench.suggestion() is None                                    # half of each step waits, below
    with pytest.raises(ValueError, match="no suggestion"):
        bench.apply_suggestion()
    first = bench.run()
    field, value, why = bench.suggestion()                      # an input-pipeline knob (tfwb.analysis.diagnosis says which)
    assert field in ("prefetch", "interleave", "parallel_map") and value is True
    bench.click(apply=True)                                     # what the Apply button does
    assert runner.calls[-1] == first.config.replace(**{field: value})
    note = f"Applied the suggestion {field}=True ({why})."
    assert events.seen[-2][1][2] == note and bench.inputs[field].value is True


def test_a_resumed_history_and_its_skipped_lines(tmp_path):
    path = tmp_path / "runs.jsonl"
    bench, _, _ = make(history_path=path)
    bench.run()
    with open(path, "a") as fh:
        fh.write(bench.results[0].to_json()[:40])
    again, _, _ = make(history_path=path)
    assert again.results == bench.results and [n for n, _ in again.skipped] == [2]
    fresh, _, _ = make(history_path=path, resume=False)
    assert fresh.results == [] and fresh.skipped == []


def test_clicks_from_two_threads_start_one_run():
    bench, runner, _ = make(FakeRunner(gate_step=0), background=True)
    go = threading.Barrier(3)

    def click():
        go.wait(GATE_TIMEOUT_S)
        bench.click()

    threads = [threading.Thread(target=click) for _ in range(2)]
    for t in threads:
        t.start()
    go.wait(GATE_TIMEOUT_S)
    for t in threads:
        t.join(GATE_TIMEOUT_S)
    assert runner.at_gate.wait(GATE_TIMEOUT_S)
    runner.release()
    bench.wait(GATE_TIMEOUT_S)
    assert len(runner.calls) == 1


def test_a_bad_baseline_is_refused():
    with pytest.raises(ValueError, match="baseline must be a RunConfig, got dict"):
        WorkbenchController({"steps": 3})


def test_no_widgets_and_no_tensorflow():
    code = ("import sys, tfwb.ui.controller; "
            "assert not {'ipywidgets', 'tensorflow', 'matplotlib'} & set(sys.modules), sys.modules.keys()")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_the_runner_gets_progress_and_the_stop_flag():
    seen = []

    def runner(cfg, observers):
        seen.append([type(o).__name__ for o in observers])
        return RunResult(config=cfg, step_times_s=(0.1,) * cfg.steps, examples_per_step=1)

    bench = WorkbenchController(BASE, runner=runner)
    assert bench.run().ok and seen == [["Progress", "StopFlag"]]


# -- issue 18 ---------------------------------------------------------------------------------------------
def test_the_baseline_label_does_not_carry_over_to_runs_with_other_knobs():
    """Chapter 06: every run kept the baseline's label "images, knobs off", interleave and prefetch on too."""
    bench, runner, _ = make(baseline=BASE.replace(label="images, knobs off"))
    assert bench.run().config.label == "images, knobs off"              # the baseline's knobs: its label
    bench.inputs["prefetch"].value = True                               # a knob changed after the label
    assert bench.config().label == ""
    assert bench.run().config.label == "" and bench.run(interleave=True).config.label == ""
    assert bench.run(label="interleave + prefetch").config.label == "interleave + prefetch"
    assert bench.run().config.label == ""                               # a given label names its run only
    bench.reset()
    assert bench.run().config.label == "images, knobs off"              # the baseline's knobs again
    assert [c.label for c in runner.calls] == ["images, knobs off", "", "", "interleave + prefetch", "",
                                               "images, knobs off"]


def test_totals_count_steps_not_calls_under_steps_per_execution():
    """131/131 read where 144 steps ran: steps round up to whole calls of steps_per_execution."""
    cfg = RunConfig(steps=128, warmup_steps=3, steps_per_execution=16)
    bench, runner, events = make(baseline=cfg, inputs={})
    result = bench.run()
    progress = [d for name, d in events.seen if name == "progress"]
    assert progress[-1] == (144, 144, False) and progress[0] == (16, 144, False)
    assert result.steps_done == 144
    from tfwb.ui.controller import total_steps
    assert total_steps(cfg) == 144 and total_steps(BASE) == 8


# -- issue 34: every "cannot tell" is one click from an answer ------------------------------------------
class DecideRecorder(Recorder):
    """Also the Decide events."""

    def on_decide_start(self, reference, number, stoppable):
        self.seen.append(("decide start", (reference, number, stoppable, self.controller.running)))

    def on_decide_round(self, done, total, stopping):
        self.seen.append(("round", (done, total, stopping)))

    def on_decided(self, rounds):
        self.seen.append(("decided", rounds.verdict))

    def on_decide_end(self, rounds, error):
        self.seen.append(("decide end", (rounds.verdict if rounds else None, type(error).__name__)))


class FakeInterleave:
    """``compare(a, b, rounds=, progress=, ...)``: the candidate ``speedup`` x faster in every round; it waits
    at the end of round ``gate_round`` until ``release()`` (``at_gate`` set), for a Stop between rounds."""

    def __init__(self, speedup=3.0, gate_round=None):
        self.speedup, self.gate_round, self.calls = speedup, gate_round, []
        self.at_gate, self.released = threading.Event(), threading.Event()

    def __call__(self, a, b, rounds=None, progress=None, **kwargs):
        rounds = rounds or 30
        self.calls.append((a, b, rounds))
        for r in range(rounds):
            if r + 1 == self.gate_round:
                self.at_gate.set()
                assert self.released.wait(GATE_TIMEOUT_S), "the test never released the comparison"
            if progress is not None:
                progress(r + 1, rounds)
        return stats.compare_rounds([0.1] * rounds, [0.1 / self.speedup] * rounds, method="fake rounds")


def busy_runner(load=16.0):
    """FakeRunner's runs, recorded as if other programs used ``load`` % of the CPU during them."""
    fake = FakeRunner()
    return lambda cfg, observers: dataclasses.replace(fake(cfg, observers), extras={"other_cpu_pct": load})


def decide_bench(**kwargs):
    bench, runner, _ = make(runner=busy_runner(), **kwargs)
    events = bench.events = DecideRecorder(bench)
    bench.compare = FakeInterleave()
    return bench, events


def test_decide_compares_the_cannot_tell_pair_interleaved_and_the_rows_then_show_that_verdict(monkeypatch):
    monkeypatch.setenv("TFWB_FAST", "1")
    bench, events = decide_bench()
    bench.run()
    bench.run(prefetch=True)
    assert bench.latest_view().versus_previous == stats.CANNOT_TELL_BUSY
    assert bench.undecided() == ("previous",) and bench.decide_pair("previous") == (1, 2)
    events.seen.clear()
    result = bench.decide()
    assert bench.compare.calls == [(BASE, BASE.replace(prefetch=True), 10)]       # few rounds in small mode
    assert result.verdict == stats.FASTER and result.speedup == pytest.approx(3.0)
    assert events.names() == ["decide start"] + ["round"] * 10 + ["decided", "decide end", "idle"]
    assert events.seen[0] == ("decide start", (1, 2, False, True)) and events.seen[-2] == ("decide end", ("faster", "NoneType"))
    view = bench.latest_view()
    assert view.row.versus_previous.decided is result and view.versus_previous == stats.FASTER
    assert bench.undecided() == () and not bench.running and len(bench.results) == 2   # no run was added


def test_decide_refuses_what_it_cannot_compare_naming_it():
    bench, events = decide_bench()
    with pytest.raises(ValueError, match="nothing to decide against the previous: no run yet"):
        bench.decide()
    bench.run()
    with pytest.raises(ValueError, match=r"against='best' is not allowed; allowed: 'previous', 'baseline'"):
        bench.decide("best")
    with pytest.raises(ValueError, match=r"nothing to decide against the baseline: the last run \(#1, ok\)"):
        bench.decide("baseline")                                  # the baseline itself
    bench.run(prefetch=True)
    with pytest.raises(ValueError, match="rounds=0 is not allowed; rounds must be an integer >= 1"):
        bench.decide(rounds=0)
    assert bench.decide(raise_errors=False, against="best") is None
    assert bench.compare.calls == [] and not bench.running


def test_stop_ends_a_background_decide_between_rounds_recording_nothing():
    bench, events = decide_bench()
    bench.run()
    bench.run(prefetch=True)
    bench.compare = FakeInterleave(gate_round=3)
    assert bench.decide(rounds=8, background=True) is None
    assert bench.compare.at_gate.wait(GATE_TIMEOUT_S) and bench.running
    with pytest.raises(RuntimeError, match="already in progress"):
        bench.run()
    assert bench.stop("Stop button")
    bench.compare.released.set()
    bench.wait(GATE_TIMEOUT_S)
    assert not bench.running and bench.undecided() == ("previous",) and len(bench.analysis.decisions) == 0
    assert ("decide end", (None, "DecideStopped")) in events.seen and "decided" not in events.names()
    assert [d for n, d in events.seen if n == "round"][-1] == (3, 8, True)      # it ended after round 3


def test_a_failed_comparison_is_told_and_raised_and_the_bench_is_ready_again():
    bench, events = decide_bench()
    bench.run()
    bench.run(prefetch=True)

    def broken(a, b, **kwargs):
        raise RuntimeError("the candidate run of round 1 did not finish")
    bench.compare = broken
    with pytest.raises(RuntimeError, match="round 1 did not finish"):
        bench.decide()
    assert events.seen[-2] == ("decide end", (None, "RuntimeError")) and not bench.running
    assert bench.decide(raise_errors=False) is None


def test_tunes_comparisons_are_recorded_as_interleaved_verdicts(monkeypatch):
    """The status line never contradicts the tune log: each trial's comparison counts for its pair."""
    from tfwb.ui import controller
    bench, events = decide_bench()
    bench.run()
    bench.run(prefetch=True)

    def fake_tune(cfg, *, compare, **kwargs):
        compare(BASE, BASE.replace(prefetch=True), rounds=6, settle_steps=1, progress=None, stop_early=None)
        raise RuntimeError("the tune ended after one trial")
    monkeypatch.setattr(controller, "tune_loop", fake_tune)
    with pytest.raises(RuntimeError, match="after one trial"):
        bench.tune(max_runs=1)
    assert bench.latest_view().versus_previous == stats.FASTER and "decided" in events.names()
    assert bench.analysis.decision(BASE.replace(prefetch=True), BASE).verdict == stats.SLOWER
