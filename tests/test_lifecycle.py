"""tfwb.lifecycle: the observers' order, the end of a run, and the one step log -> RunResult conversion."""
from __future__ import annotations

import math

import pytest

from tfwb.config import RunConfig
from tfwb.lifecycle import INTERRUPTED, Lifecycle, result_from_log
from tfwb.observers import Observer, StopFlag


class Recorder(Observer):
    def __init__(self, log):
        self.log = log

    def on_run_start(self, run):
        self.log.append("start")

    def on_step_end(self, run, step):
        self.log.append(f"step {step}")

    def on_warmup_end(self, run):
        self.log.append("warm")

    def on_run_end(self, run):
        self.log.append(f"end {run.status}")


def drive(life: Lifecycle, calls: int, time_s: float = 0.1, wait_s: float = 0.01, loss=1.0):
    """What a runner does per call: log the figures, then the observers' step end."""
    log = life.log
    for step in range(calls):
        log.starts_s.append(step * time_s)
        log.times_s.append(time_s)
        log.waits_s.append(wait_s)
        log.losses.append(loss)
        life.step_end(step)
        if life.should_stop:
            break


def test_hooks_run_in_order_and_warm_up_ends_after_its_last_call():
    seen = []
    life = Lifecycle(RunConfig(steps=2, warmup_steps=2), [Recorder(seen)])
    life.start()
    drive(life, 4)
    life.end(life.status())
    assert seen == ["start", "step 0", "step 1", "warm", "step 2", "step 3", "end ok"]


def test_without_warm_up_the_warm_up_ends_at_the_start_once():
    seen = []
    life = Lifecycle(RunConfig(steps=2, warmup_steps=0), [Recorder(seen)])
    life.start()
    drive(life, 2)
    life.warmup_end()                     # a runner calling it again changes nothing
    life.end("ok")
    life.end("failed")                    # nor does a second end
    assert seen == ["start", "warm", "step 0", "step 1", "end ok"]


def test_a_run_that_never_started_ends_only_the_always_observers():
    seen_always, seen_other = [], []
    always = Recorder(seen_always)
    life = Lifecycle(RunConfig(), [always, Recorder(seen_other)], always=(always,))
    life.end(life.status(failed=True))
    assert seen_always == ["end failed"] and seen_other == []


def test_an_observer_failing_at_the_end_becomes_an_observer_note_and_the_others_still_run():
    seen = []

    class Broken(Observer):
        def on_run_end(self, run):
            raise OSError("disk full")

    life = Lifecycle(RunConfig(steps=1, warmup_steps=0), [Broken(), Recorder(seen)])
    life.start()
    life.end("ok")
    assert seen[-1] == "end ok"
    assert life.state.notes == ["observer Broken failed at the end of the run: OSError: disk full"]
    r = life.result("ok")
    assert r.notes_of("observer") == ("observer Broken failed at the end of the run: OSError: disk full",)


@pytest.mark.parametrize("interrupted, status", [(False, "ok"), (True, "interrupted")])
def test_a_stop_is_said_once_and_decides_the_status(interrupted, status):
    flag = StopFlag()
    life = Lifecycle(RunConfig(steps=8, warmup_steps=1), [flag])
    life.start()
    flag.set("stopped by the user", interrupted=interrupted)
    drive(life, 9)
    life.end(life.status())
    r = life.result(life.state.status)
    assert r.status == status and r.stop_reason == "stopped by the user"
    assert len(r.warmup_times_s) == 1 and r.step_times_s == ()      # stopped after the first call
    assert r.error == ("stopped by the user after 1 of 9 steps" if interrupted else None)


def test_a_keyboard_interrupt_is_the_same_stop():
    life = Lifecycle(RunConfig(steps=4, warmup_steps=0))
    life.start()
    drive(life, 2)
    life.interrupt()
    assert life.should_stop and life.status() == "interrupted"
    r = life.result(life.status())
    assert r.stop_reason == INTERRUPTED and r.error == f"{INTERRUPTED} after 2 of 4 steps"


def test_status_precedence_failed_then_diverged_then_interrupted():
    life = Lifecycle(RunConfig())
    life.state.request_stop("x", interrupted=True)
    life.state.diverged_at = 3
    assert life.status(failed=True) == "failed" and life.status() == "diverged"


def test_result_splits_warm_up_divides_by_steps_per_call_and_keeps_runner_facts():
    cfg = RunConfig(steps=4, warmup_steps=2, steps_per_execution=2, batch_size=8)
    life = Lifecycle(cfg)
    life.state.notes.append("from an observer")
    life.state.extras["mine"] = 1
    drive(life, 3, time_s=0.2, loss=2.0)
    r = life.result("ok", setup_s=1.5, fingerprint={"tensorflow": "x"}, traces=3, traces_warm=1,
                    replicas=2, notes=["runner's"], extras={"mine": 2, "cluster": {}})
    assert r.warmup_times_s == (0.1,) and r.step_times_s == (0.1, 0.1) and r.steps_per_call == 2
    assert r.input_wait_s == (0.01, 0.01) and r.warmup_losses == (2.0,)
    assert (r.setup_s, r.replicas, r.examples_per_step, r.fingerprint) == (1.5, 2, 8, {"tensorflow": "x"})
    assert r.traces == 3 and r.traces_after_warmup == 2
    assert r.notes[:2] == ("runner's", "from an observer") and "traced 2 more time(s)" in r.notes[2]
    assert r.notes[2].kind == "tracing"
    assert r.extras == {"mine": 2, "cluster": {}}
    assert r.started_at == life.started_at and len(r.run_id) == 12


def test_input_waits_are_kept_only_when_every_call_has_one():
    life = Lifecycle(RunConfig(steps=2, warmup_steps=0))
    drive(life, 2)
    life.log.waits_s.pop()
    r = result_from_log(life.state, warmup_calls=0, status="ok")
    assert r.step_times_s == (0.1, 0.1) and r.input_wait_s == ()


def test_a_non_finite_loss_survives_as_nan():
    life = Lifecycle(RunConfig(steps=1, warmup_steps=0))
    drive(life, 1, loss=float("nan"))
    assert math.isnan(result_from_log(life.state, warmup_calls=0, status="diverged", error="e").losses[0])


def test_lifecycle_refuses_what_is_not_a_run_config():
    with pytest.raises(TypeError, match="RunConfig, got dict"):
        Lifecycle({"steps": 1})


def test_observers_read_the_lifecycles_own_clock_when_none_is_given():
    life = Lifecycle(RunConfig(steps=1, warmup_steps=0))
    assert life.state.clock is life.clock and 0.0 <= life.state.clock() < 5.0


def test_windows_after_the_warm_up_become_the_results_window_calls():
    from tfwb.observers import RunState, StepLog
    log = StepLog(times_s=[0.5, 0.1, 0.1, 0.1, 0.1, 0.1], starts_s=[0, 0.5, 0.6, 0.7, 0.8, 0.9],
                  losses=[3, 2, 2, 1, 1, 1], windows=[1, 1, 3, 1])
    state = RunState(config=RunConfig(steps=4, warmup_steps=2), log=log, clock=lambda: 0.0, total_steps=6,
                     warmup_steps=2)
    r = result_from_log(state, warmup_calls=2, status="ok", input_floor_s=40e-6)
    assert r.window_calls == (3, 1) and r.input_floor_s == 40e-6
    assert r.config.timing == "windowed"
