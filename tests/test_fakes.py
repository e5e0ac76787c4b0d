"""tests/fakes.py: the fake runner keeps the run contract (observers, stops, failures) the way
tfwb.run does, so tests built on it test the callers, not the fake."""
import pytest

from fakes import OOM, FakeRunner, failed_result, make_result
from tfwb.config import RunConfig
from tfwb.observers import Observer, StopAtLoss, StopFlag

CFG = RunConfig(steps=6, warmup_steps=2)


class Hooks(Observer):
    def __init__(self):
        self.seen = []

    def on_run_start(self, run):
        self.seen.append("start")

    def on_step_begin(self, run, step):
        self.seen.append(f"begin {step}")

    def on_step_end(self, run, step):
        self.seen.append(f"end {step}")

    def on_warmup_end(self, run):
        self.seen.append("warm")

    def on_run_end(self, run):
        self.seen.append(f"run end {run.status}")


def test_observers_see_every_hook_in_order_and_the_result_keeps_warmup_apart():
    hooks = Hooks()
    r = FakeRunner()(CFG, [hooks])
    assert hooks.seen == ["start", "begin 0", "end 0", "begin 1", "end 1", "warm"] + \
        [f"{h} {s}" for s in range(2, 8) for h in ("begin", "end")] + ["run end ok"]
    assert (r.status, len(r.warmup_times_s), len(r.step_times_s), r.stop_reason) == ("ok", 2, 6, None)
    assert r.step_times_s[:3] == pytest.approx((0.101, 0.099, 0.100))     # 100 ms, jitter 1 %, calls 2, 3, 4
    assert r.step_start_s[1] - r.step_start_s[0] == pytest.approx(r.step_times_s[0])


def test_a_stop_flag_set_midway_ends_the_run_interrupted_after_that_step():
    flag = StopFlag()
    runner = FakeRunner(on_step=lambda step: step == 3 and flag.set("stopped by the user", interrupted=True))
    r = runner(CFG, [flag])
    assert r.status == "interrupted" and r.stop_reason == "stopped by the user"
    assert runner.progress_seen[-1] == (4, 8) and len(r.step_times_s) == 2


def test_a_target_loss_stops_with_status_ok():
    r = FakeRunner()(CFG, [StopAtLoss(1.5)])      # the fake loss 1 + 1.3 * 0.8 ** (step + 1)
    assert r.status == "ok" and "reached the target 1.5" in r.stop_reason
    assert r.losses[-1] <= 1.5 < r.losses[0]


def test_progress_keyword_becomes_an_observer_as_in_tfwb_run():
    seen = []
    FakeRunner()(RunConfig(steps=4, warmup_steps=0, steps_per_execution=2), progress=lambda d, t: seen.append((d, t)))
    assert seen == [(2, 4), (4, 4)]


def test_keyboard_interrupt_failure_and_raise():
    def interrupt(step):
        if step == 1:
            raise KeyboardInterrupt
    r = FakeRunner(on_step=interrupt)(CFG)
    assert r.status == "interrupted" and r.error.startswith("interrupted by the user after")

    assert FakeRunner(fail_if=lambda cfg: cfg.prefetch)(CFG.replace(prefetch=True)).error == OOM

    hooks = Hooks()
    with pytest.raises(RuntimeError, match="boom"):
        FakeRunner(raises=RuntimeError("boom"))(CFG, [hooks])
    assert hooks.seen[-1] == "run end failed"


def test_builders():
    r = make_result(RunConfig(batch_size=8), step_s=0.2, n=4, warmup_s=(1.0,), gpus=2, losses=(3.0, 2.0))
    assert r.step_times_s == (0.2,) * 4 and r.warmup_start_s == (0.5,) and r.step_start_s[0] == 1.5
    assert r.examples_per_step == 8 and r.losses == (3.0, 2.0) and len(r.samples[0].gpu_util_pct) == 2
    assert make_result(step_times_s=(0.1, 0.3)).input_wait_s == (0.0, 0.0)
    assert failed_result(error="x").status == "failed" and not failed_result().step_times_s
