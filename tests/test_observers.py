"""Run observers: the hooks the runner calls, stopping early, profiling a window, TensorBoard scalars."""
from __future__ import annotations

import glob
import os
import threading

import numpy as np
import pytest

from tfwb.config import RunConfig
from tfwb.observers import Dispatch, Observer, Progress, RunState, StepLog, StopAtLoss, StopFlag

# -- pure: dispatch and the built-in observers on a hand-made state ---------------------------------------


class Recorder(Observer):
    def __init__(self):
        self.calls = []

    def on_run_start(self, run):
        self.calls.append("start")

    def on_step_end(self, run, step):
        self.calls.append(f"step{step}")

    def on_run_end(self, run):
        self.calls.append("end")


def state(**kw) -> RunState:
    return RunState(config=RunConfig(), log=StepLog(), clock=lambda: 0.0, total_steps=kw.pop("total", 4),
                    warmup_steps=kw.pop("warmup", 1), **kw)


def test_dispatch_calls_only_the_hooks_an_observer_overrides():
    rec = Recorder()
    d = Dispatch([rec, Observer()])
    assert len(d.on_step_end) == 1 and d.on_step_begin == () and d.on_warmup_end == ()
    s = state()
    d.call("on_run_start", s)
    for hook in d.on_step_end:
        hook(s, 0)
    d.call("on_run_end", s)
    assert rec.calls == ["start", "step0", "end"]


def test_progress_counts_training_steps_per_call():
    seen = []
    s = state(total=8, warmup=2, steps_per_call=2)
    p = Progress(lambda done, total: seen.append((done, total)))
    for call in range(4):
        p.on_step_end(s, call)
    assert seen == [(2, 8), (4, 8), (6, 8), (8, 8)]


def test_progress_settled_only_speaks_between_the_windowed_loops_windows_and_at_the_end():
    """In the windowed loop a settled-only Progress is called only after a window's sync (never while a
    window's calls are still being timed), and always at the last call; a plain one after every call."""
    import types

    from tfwb.lifecycle import Lifecycle
    from tfwb.timing import windowed_loop

    now = [0.0]

    def step(iterator):
        now[0] += 0.03                      # 30 ms a call: windows of 4 calls (WINDOW_S = 0.1 s)
        return 1.0

    stepper = types.SimpleNamespace(takes_iterator=True, iterator=None, step=step)
    cfg = RunConfig(steps=10, warmup_steps=0)
    seen, every, open_at_call = [], [], []

    def settled(done, total):
        seen.append(done)
        open_at_call.append(len(life.log.times_s) - len(life.log.losses))   # calls in an open window

    life = Lifecycle(cfg, [Progress(settled, settled_only=True),
                           Progress(lambda done, total: every.append(done))], clock=lambda: now[0])
    life.start()
    windowed_loop(stepper, 10, life.clock, life.log, sync=lambda: None, read=lambda outs: [1.0] * len(outs),
                  state=life.state, dispatch=life.dispatch)
    assert life.log.windows == [4, 4, 2]
    assert seen == [4, 8, 10] and set(open_at_call) == {0}
    assert every == list(range(1, 11))


def _log_step(s: RunState, loss: float, t0: float) -> None:
    s.log.starts_s.append(t0)
    s.log.times_s.append(0.5)
    s.log.losses.append(loss)


def test_stop_at_loss_ignores_warm_up_and_stops_at_the_first_measured_step_at_target():
    s, stop = state(total=5, warmup=1), StopAtLoss(1.0)
    for step, loss in enumerate([0.1, 2.0, 0.9, 0.5]):
        _log_step(s, loss, float(step))
        stop.on_step_end(s, step)
        if s.stop_reason:
            break
    assert step == 2                       # warm-up's 0.1 did not count
    assert s.extras["target_reached"] == {"step": 2, "time_s": 1.5, "loss": 0.9, "warmup_steps": 1}
    assert "reached the target 1" in s.stop_reason


def test_stop_at_loss_with_a_window_waits_for_the_mean_of_the_last_measured_losses():
    s, stop = state(total=9, warmup=1), StopAtLoss(1.0, window=3)
    for step, loss in enumerate([0.0, 0.5, 0.5, 3.0, 0.9, 0.9, 0.9, 0.1]):
        _log_step(s, loss, float(step))
        stop.on_step_end(s, step)
        if s.stop_reason:
            break
    # one lucky 0.5 (and the warm-up's 0.0) do not stop it; the mean of (3.0, 0.9, 0.9) is 1.6,
    # of (0.9, 0.9, 0.9) 0.9: it stops at measured step 6
    assert step == 6
    hit = s.extras["target_reached"]
    assert hit["step"] == 6 and hit["loss"] == pytest.approx(0.9) and hit["time_s"] == pytest.approx(5.5)
    assert "mean loss of the last 3 steps" in s.stop_reason


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "3"])
def test_stop_at_loss_refuses_a_window_that_is_not_a_positive_integer(bad):
    with pytest.raises(ValueError, match="window"):
        StopAtLoss(1.0, window=bad)


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), "1", True])
def test_stop_at_loss_refuses_a_target_that_is_not_a_finite_number(bad):
    with pytest.raises(ValueError, match="target"):
        StopAtLoss(bad)


def test_stop_flag_set_from_another_thread_stops_after_the_current_step():
    s, flag = state(), StopFlag()
    flag.on_step_end(s, 0)
    assert s.stop_reason is None
    t = threading.Thread(target=flag.set)
    t.start()
    t.join()
    flag.on_step_end(s, 1)
    assert s.stop_reason == "stopped by the user" and not s.interrupted


def test_stop_flag_set_as_an_interrupt_says_so_once_with_its_reason():
    s, flag = state(), StopFlag()
    flag.set("interrupted by the user", interrupted=True)
    flag.set("a later, different stop")                 # the first request wins
    assert flag.is_set and flag.interrupted
    flag.on_step_end(s, 0)
    assert s.stop_reason == "interrupted by the user" and s.interrupted
    flag.clear()
    assert not flag.is_set and not flag.interrupted


def test_request_stop_keeps_the_first_request():
    s = state()
    s.request_stop("target reached")
    s.request_stop("interrupted by the user", interrupted=True)
    assert s.stop_reason == "target reached" and not s.interrupted


# -- with TensorFlow: real tiny runs ---------------------------------------------------------------------
TINY = "test-observers-tiny"


@pytest.fixture(scope="module")
def tiny_workload():
    pytest.importorskip("tensorflow")
    import keras
    import tensorflow as tf

    from tfwb.workloads import register_workload, unregister_workload

    def model(cfg):
        return keras.Sequential([keras.Input((4,)), keras.layers.Dense(8, activation="relu"),
                                 keras.layers.Dense(2, dtype="float32")])

    def data(cfg):
        rng = np.random.default_rng(0)
        x = rng.normal(size=(256, 4)).astype("float32")
        return tf.data.Dataset.from_tensor_slices((x, (x[:, 0] > 0).astype("int32")))

    register_workload(TINY, model_fn=model, data_fn=data)
    yield RunConfig(workload=TINY, batch_size=16, steps=20, warmup_steps=1, sample_interval_s=0.05,
                    learning_rate=0.05)
    unregister_workload(TINY)


@pytest.mark.tf
def test_a_run_stops_at_the_target_loss_and_says_when(tiny_workload):
    from tfwb.tf.run import run

    r = run(tiny_workload, observers=[StopAtLoss(10.0)])      # any finite loss is below 10
    assert r.status == "ok" and len(r.step_times_s) == r.window_calls[0]   # stopped where its window closed
    assert r.extras["target_reached"]["step"] == 1 and "target" in r.stop_reason
    r = run(tiny_workload.replace(timing="per_step"), observers=[StopAtLoss(10.0)])
    assert r.status == "ok" and len(r.step_times_s) == 1                  # stopped after the step itself


@pytest.mark.tf
def test_observers_see_the_model_being_trained(tiny_workload):
    import keras

    from tfwb.tf.run import run

    class Watch(Observer):
        def on_run_start(self, run):
            self.start = [v.numpy().copy() for v in run.model.trainable_variables]

        def on_run_end(self, run):
            self.end = [v.numpy() for v in run.model.trainable_variables]
            self.model = run.model

    w = Watch()
    r = run(tiny_workload.replace(steps=3), observers=[w])
    assert r.ok and isinstance(w.model, keras.Model)
    assert any(not np.allclose(a, b) for a, b in zip(w.start, w.end))     # the weights it trained


@pytest.mark.tf
def test_an_observer_that_fails_at_the_end_leaves_the_result_and_adds_a_note(tiny_workload):
    from tfwb.tf.run import run

    class Broken(Observer):
        def on_run_end(self, run):
            raise RuntimeError("boom")

    r = run(tiny_workload.replace(steps=2), observers=[Broken()])
    assert r.ok and any("Broken failed" in n and "boom" in n for n in r.notes)


@pytest.mark.tf
def test_profile_window_captures_only_steps_after_warm_up(tiny_workload, tmp_path):
    from tfwb.tf.lab.profiler import ProfileWindow, xplane_files
    from tfwb.tf.run import run

    window = ProfileWindow(str(tmp_path), steps=3, skip=1)
    r = run(tiny_workload.replace(steps=6, warmup_steps=2), observers=[window])
    assert r.ok, r.error
    assert window.first == 3 and window.xplane and os.path.getsize(window.xplane) > 0
    assert r.extras["profile"] == window.xplane and xplane_files(str(tmp_path)) == [window.xplane]
    with pytest.raises(ValueError, match="steps"):
        ProfileWindow(str(tmp_path), steps=0)


@pytest.mark.tf
def test_a_second_profiler_capture_while_one_runs_is_refused(tmp_path):
    from tfwb.tf.lab.profiler import ProfilerSession

    with ProfilerSession(str(tmp_path / "a")):
        with pytest.raises(RuntimeError, match="already running"):
            ProfilerSession(str(tmp_path / "b")).start()


@pytest.mark.tf
def test_tensorboard_scalars_are_written_after_the_run_and_read_back(tiny_workload, tmp_path):
    import tensorflow as tf

    from tfwb.tf.lab.tensorboard import Scalars
    from tfwb.tf.run import run

    r = run(tiny_workload.replace(steps=4, label="tb"), observers=[Scalars(str(tmp_path))])
    assert r.ok and r.extras.get("tensorboard") == os.path.join(str(tmp_path), "tb"), r.notes
    tags = {}
    for path in glob.glob(os.path.join(str(tmp_path), "tb", "events.out.tfevents.*")):
        for event in tf.compat.v1.train.summary_iterator(path):
            for v in event.summary.value:
                tags.setdefault(v.tag, []).append(event.step)
    assert tags["step_time_ms"] == list(range(5)) and tags["loss"] == list(range(5))
    assert "input_wait_ms" in tags and any(t.startswith("utilization/") for t in tags)


@pytest.mark.tf
def test_tensorboard_refuses_a_folder_it_cannot_write(tmp_path):
    from tfwb.tf.lab.tensorboard import Scalars

    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        if os.access(locked, os.W_OK):
            pytest.skip("running as a user who can write anywhere (root)")
        with pytest.raises(ValueError, match="not writable"):
            Scalars(str(locked))
    finally:
        locked.chmod(0o700)
    with pytest.raises(ValueError, match="logdir"):
        Scalars("/proc/tfwb-cannot-exist/logs")


@pytest.mark.tf
def test_grappler_removes_the_seeds_duplicate_square_and_the_switch_restores_settings():
    import tensorflow as tf

    from tfwb.tf.lab import graphs

    x = tf.ones((4, 4))
    redundant = graphs.op_counts(lambda v: tf.math.sqrt(v**2 + v**2), x)
    once = graphs.op_counts(lambda v: (lambda s: tf.math.sqrt(s + s))(v**2), x)
    assert redundant.traced["Pow"] == 2 and once.traced["Pow"] == 1
    assert redundant.optimized == once.optimized and redundant.optimized["Pow"] == 0
    before = tf.config.optimizer.get_experimental_options()
    with graphs.grappler(False):
        assert tf.config.optimizer.get_experimental_options()["disable_meta_optimizer"] is True
    assert tf.config.optimizer.get_experimental_options().get("disable_meta_optimizer", False) == \
        before.get("disable_meta_optimizer", False)
