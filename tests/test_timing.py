"""Step timing on an asynchronous device: ``tfwb.tf.runner.train.timed_steps`` against a simulated one.

``SimDevice`` is an accelerator on a virtual clock, as a GPU behaves under TensorFlow: the
host pays for fetching a batch and dispatching a step, then the call returns while the
device runs the step (a queue: each step starts when the device is free and takes
``step_s``); reading a step's loss waits until the device has finished that step, and a
sync waits until its queue is empty. Nothing sleeps and no thread races: the host's clock
and the device's finishing times are numbers, so every figure below is exact and the
tests are deterministic on a busy machine. The real ``timed_steps`` drives it, with the
simulated clock, sync and step in place of TensorFlow's.
"""
from __future__ import annotations

import math
import types
from typing import List, Optional

import pytest

from tfwb import stats
from tfwb.config import RunConfig
from tfwb.lifecycle import Lifecycle
from tfwb.observers import Dispatch, Observer, RunState, StepLog, StopAtLoss
from tfwb.tf.runner.train import WINDOW_S, timed_steps


class SimDevice:
    """An asynchronous device with its own clock (see the module docstring).

    Args:
        step_s: device time per step.
        dispatch_s: host time to launch a step (Python, TF's executor).
        fetch_s: host time of ``next(iterator)`` (the step's input wait).
        read_s: host time of a loss read once its step is done (a device-to-host copy).
        sync_s: host time of a sync once the device is idle.
        depth: at most this many unfinished steps queued; a dispatch beyond it waits for
            the oldest (``None``: no limit).
        losses: the loss each step returns, by index (default: 1.0).
    """

    def __init__(self, step_s: float, dispatch_s: float, fetch_s: float = 0.0, read_s: float = 20e-6,
                 sync_s: float = 10e-6, depth: Optional[int] = None, losses=None) -> None:
        self.step_s, self.dispatch_s, self.fetch_s = step_s, dispatch_s, fetch_s
        self.read_s, self.sync_s, self.depth = read_s, sync_s, depth
        self.losses = losses or (lambda i: 1.0)
        self.now = 0.0                         # the host's clock
        self.free = 0.0                        # when the device has run everything queued
        self.finish: List[float] = []          # when each step finishes on the device
        self.busy_s = 0.0

    def clock(self) -> float:
        return self.now

    def fetch(self):
        self.now += self.fetch_s
        return None, None

    def step(self, x, y) -> "SimLoss":
        self.now += self.dispatch_s
        if self.depth is not None and len(self.finish) >= self.depth:
            self.now = max(self.now, self.finish[-self.depth])
        start = max(self.now, self.free)
        self.free = start + self.step_s
        self.busy_s += self.step_s
        self.finish.append(self.free)
        return SimLoss(self, len(self.finish) - 1)

    def read(self, i: int) -> float:
        self.now = max(self.now, self.finish[i]) + self.read_s
        return float(self.losses(i))

    def sync(self) -> None:
        self.now = max(self.now, self.free) + self.sync_s

    def prepared(self, timing: str):
        """A ``Prepared``-shaped setup whose step runs on this device."""
        return types.SimpleNamespace(cfg=RunConfig(timing=timing), takes_iterator=False, iterator=None,
                                     fetch=self.fetch, step=self.step)


class SimLoss:
    """A step's loss tensor: reading it waits for that step on the device."""

    def __init__(self, device: SimDevice, index: int) -> None:
        self.device, self.index = device, index

    def __float__(self) -> float:
        return self.device.read(self.index)


def timed(device: SimDevice, timing: str, n: int, **kw) -> StepLog:
    return timed_steps(device.prepared(timing), n, device.clock, StepLog(), sync=device.sync, **kw)


# -- the overlap: per-step sync loses it, windows recover the device's throughput ----------------------
@pytest.mark.parametrize("n", [40, 600])
@pytest.mark.parametrize("step_ms, dispatch_ms, fetch_ms", [(0.3, 0.12, 0.03), (1.0, 0.3, 0.05),
                                                            (5.0, 0.4, 0.05)])
def test_windowed_timing_recovers_the_devices_throughput_and_per_step_sync_loses_the_overlap(
        n, step_ms, dispatch_ms, fetch_ms):
    step_s, host_s = step_ms / 1e3, (dispatch_ms + fetch_ms) / 1e3
    per_step = timed(SimDevice(step_s, dispatch_ms / 1e3, fetch_ms / 1e3), "per_step", n)
    windowed = timed(SimDevice(step_s, dispatch_ms / 1e3, fetch_ms / 1e3), "windowed", n)

    # Per-step sync: the host waits for every step, so host and device take turns.
    assert stats.median(per_step.times_s) == pytest.approx(step_s + host_s + 30e-6, rel=1e-6)
    assert stats.median(per_step.times_s) > step_s * 1.05

    # Windows: the device never waits for the host inside a window; its true time per step shows.
    assert sum(windowed.times_s) / n == pytest.approx(step_s, rel=0.02)
    assert stats.median(windowed.times_s) == pytest.approx(step_s, rel=0.02)
    assert sum(windowed.windows) == n and len(windowed.losses) == n
    # The figures tile the wall time: the last step ends when the last window was synced.
    assert windowed.starts_s[-1] + windowed.times_s[-1] == pytest.approx(n * step_s + host_s, rel=0.02)


def test_a_host_bound_step_reads_the_hosts_time_in_both_modes():
    """A device faster than the host: throughput is the host's, windowed or not.

    (The simulated device reads each loss apart, 20 us of host time each; TF tensors are
    read with one copy per window.)
    """
    host_s = 0.5e-3 + 0.1e-3
    windowed = timed(SimDevice(0.2e-3, 0.5e-3, 0.1e-3, read_s=2e-6), "windowed", 300)
    assert stats.median(windowed.times_s) == pytest.approx(host_s, rel=0.02)
    per_step = timed(SimDevice(0.2e-3, 0.5e-3, 0.1e-3), "per_step", 300)
    assert stats.median(per_step.times_s) == pytest.approx(host_s + 0.2e-3 + 30e-6, rel=1e-6)


def test_a_bounded_queue_still_overlaps():
    """A device whose queue holds two steps: the host blocks on dispatch, windows still see the device."""
    log = timed(SimDevice(1e-3, 0.3e-3, 0.05e-3, depth=2), "windowed", 400)
    assert sum(log.times_s) / 400 == pytest.approx(1e-3, rel=0.02)


def test_input_wait_is_timed_per_step_on_the_host_in_both_modes():
    for timing in ("windowed", "per_step"):
        log = timed(SimDevice(1e-3, 0.2e-3, fetch_s=0.07e-3), timing, 50)
        assert log.waits_s == pytest.approx([0.07e-3] * 50)
        assert all(w < t for w, t in zip(log.waits_s, log.times_s))


def test_windows_close_after_window_s_of_host_time_with_one_sync_each():
    device = SimDevice(1e-3, 0.5e-3)                    # 0.5 ms of host per step
    syncs = []
    sync = device.sync
    device.sync = lambda: (syncs.append(device.now), sync())
    log = timed(device, "windowed", 500, window_s=0.05)
    assert log.windows[:-1] == [100] * (len(log.windows) - 1)     # 100 x 0.5 ms = 50 ms of host each
    assert sum(log.windows) == 500 and len(syncs) == len(log.windows) == 5
    assert WINDOW_S >= 0.05


# -- what observers see ------------------------------------------------------------------------------
class Watch(Observer):
    """Records, at each step's end, how many losses had arrived and how many times were logged."""

    def __init__(self) -> None:
        self.seen = []

    def on_step_end(self, run, step):
        self.seen.append((step, len(run.log.times_s), len(run.log.losses)))


def run_observed(device: SimDevice, timing: str, n: int, observers, **kw):
    cfg = RunConfig(timing=timing, steps=n, warmup_steps=0)
    life = Lifecycle(cfg, observers, clock=device.clock)
    life.start()
    timed_steps(device.prepared(timing), n, device.clock, life.log, state=life.state, dispatch=life.dispatch,
                sync=device.sync, **kw)
    return life


def test_observers_see_every_step_with_losses_arriving_per_window():
    watch = Watch()
    run_observed(SimDevice(1e-3, 0.5e-3), "windowed", 10, [watch], window_s=2e-3)   # 4 steps a window
    assert [s for s, _, _ in watch.seen] == list(range(10))
    assert [t for _, t, _ in watch.seen] == list(range(1, 11))
    assert [n for _, _, n in watch.seen] == [0, 0, 0, 4, 4, 4, 4, 8, 8, 10]


def test_per_step_timing_settles_every_step_before_its_observers():
    watch = Watch()
    run_observed(SimDevice(1e-3, 0.5e-3), "per_step", 5, [watch])
    assert [n for _, _, n in watch.seen] == [1, 2, 3, 4, 5]


def test_stop_at_loss_finds_the_first_step_that_reached_the_target_inside_a_window():
    device = SimDevice(1e-3, 0.5e-3, losses=lambda i: 10.0 - i)      # 10, 9, 8, ...: reaches 4 at step 6
    stop = StopAtLoss(4.0)
    life = run_observed(device, "windowed", 30, [stop], window_s=4e-3)   # 8 steps a window
    reached = life.state.extras["target_reached"]
    assert reached["step"] == 7 and reached["loss"] == 4.0
    assert "measured step 7" in life.state.stop_reason
    assert len(life.log.times_s) == 8, "the run stops when the window that reached it closes"
    assert reached["time_s"] == pytest.approx(life.log.starts_s[6] + life.log.times_s[6] - life.log.starts_s[0])


def test_a_stop_inside_a_window_closes_it():
    class StopAt(Observer):
        def on_step_end(self, run, step):
            if step == 2:
                run.request_stop("enough")

    life = run_observed(SimDevice(1e-3, 0.5e-3), "windowed", 50, [StopAt()])
    log = life.log
    assert len(log.times_s) == len(log.losses) == 3 and log.windows == [3]
    assert sum(log.times_s) == pytest.approx(3e-3, rel=0.2)


def test_a_nan_loss_inside_a_window_ends_the_log_at_that_step():
    device = SimDevice(1e-3, 0.5e-3, losses=lambda i: math.nan if i >= 5 else 1.0)
    life = run_observed(device, "windowed", 40, [])
    assert life.state.diverged_at == 5 and life.status() == "diverged"
    assert len(life.log.times_s) == len(life.log.losses) == 6 and math.isnan(life.log.losses[-1])
    assert life.log.windows == [6]


def test_an_observer_error_inside_a_window_keeps_the_steps_it_closes():
    class Boom(Observer):
        def on_step_end(self, run, step):
            if step == 3:
                raise RuntimeError("boom")

    device = SimDevice(1e-3, 0.5e-3)
    life_log = StepLog()
    cfg = RunConfig(steps=20, warmup_steps=0)
    state = RunState(config=cfg, log=life_log, clock=device.clock, total_steps=20, warmup_steps=0)
    with pytest.raises(RuntimeError, match="boom"):
        timed_steps(device.prepared("windowed"), 20, device.clock, life_log, state=state,
                    dispatch=Dispatch([Boom()]), sync=device.sync)
    assert len(life_log.times_s) == len(life_log.losses) == 4 and life_log.windows == [4]


def test_a_failing_device_drops_the_unsynced_steps():
    device = SimDevice(1e-3, 0.5e-3)
    calls = {"n": 0}
    step = device.step

    def failing(x, y):
        calls["n"] += 1
        if calls["n"] == 4:
            raise MemoryError("out of device memory")
        return step(x, y)

    def broken_sync():
        raise RuntimeError("device lost")

    p = device.prepared("windowed")
    p.step = failing
    log = StepLog()
    with pytest.raises(MemoryError):
        timed_steps(p, 10, device.clock, log, sync=broken_sync)
    assert log.times_s == [] and log.losses == [] and log.starts_s == []


def test_time_alternating_interleaves_blocks_and_keeps_warmup_apart():
    from tfwb.tf.lab.stopwatch import time_alternating

    now = [0.0]
    calls: list = []

    def clock() -> float:
        return now[0]

    def make(name: str, cost: float):
        def fn():
            calls.append(name)
            now[0] += cost
        return fn

    a, b = time_alternating([make("a", 1.0), make("b", 2.0)], calls=4, blocks=2, warmup=1, sync=False, clock=clock)
    assert calls == ["a", "b", "a", "a", "b", "b", "b", "b", "a", "a"]     # warm-up, then a b | b a blocks
    assert (a.warmup_s, a.times_s) == ((1.0,), (1.0,) * 4)
    assert (b.warmup_s, b.times_s) == ((2.0,), (2.0,) * 4)
    with pytest.raises(ValueError, match="sync has 1 flags for 2"):
        time_alternating([make("a", 1.0), make("b", 1.0)], sync=[True], clock=clock)
    with pytest.raises(ValueError, match="blocks"):
        time_alternating([make("a", 1.0)], calls=2, blocks=3, clock=clock)


# -- push-driven windows (the fit callback's): the same windows, driven from outside ------------------
def test_pushed_windows_give_the_windowed_loops_figures_on_the_same_device():
    """Each call pushed as it ends, the window closing itself: the runner's windows and times exactly."""
    from tfwb.timing import PushWindows, windowed_loop

    for step_s, dispatch_s in ((1e-3, 0.3e-3), (0.2e-3, 0.5e-3)):
        ran = SimDevice(step_s, dispatch_s)
        stepper = types.SimpleNamespace(takes_iterator=True, iterator=None, step=lambda it, d=ran: d.step(None, None))
        loop = windowed_loop(stepper, 500, ran.clock, StepLog(), sync=ran.sync, read=lambda outs: [1.0] * len(outs))
        dev = SimDevice(step_s, dispatch_s)
        windows = PushWindows(dev.clock, dev.sync)
        for i in range(500):
            t0 = dev.clock()
            dev.step(None, None)
            windows.push(t0, dev.clock(), steps=1, epoch=0, end_step=i)
        windows.close()
        calls = windows.settled
        assert windows.pushed == 500 and windows.pending == 0 and windows.steps() == 500
        assert [c.time_s for c in calls] == pytest.approx(loop.times_s, rel=1e-9)
        assert [c.start_s for c in calls] == pytest.approx(loop.starts_s, rel=1e-9)
        sizes = [sum(1 for c in calls if c.window == w) for w in range(1, windows.windows + 1)]
        assert sizes == loop.windows and [c.end_step for c in calls] == list(range(500))


def test_a_pushed_window_closes_at_the_warmups_end_and_an_unsynced_one_can_be_dropped():
    from tfwb.timing import CallTiming, PushWindows

    dev = SimDevice(1e-3, 0.1e-3)
    windows = PushWindows(dev.clock, dev.sync, window_s=10.0, close_after=2)
    syncs = []
    windows.sync = lambda: (syncs.append(dev.now), dev.sync())
    for i in range(3):
        t0 = dev.clock()
        dev.step(None, None)
        closed = windows.push(t0, dev.clock(), steps=2, epoch=i // 2, end_step=2 * i + 1)
        assert closed == (i == 1)
    assert len(syncs) == 1 and len(windows.settled) == 2 and windows.pending == 1 and windows.pushed == 3
    assert windows.steps() == 6 and windows.steps(epoch=1) == 2          # the open call counts too
    c = windows.settled[0]
    assert isinstance(c, CallTiming) and c.window == 1 and c.steps == 2 and c.time_s >= c.host_s
    with pytest.raises(AttributeError):
        c.time_s = 0.0                                                   # frozen: one record per call
    windows.drop()
    windows.close()                                                      # nothing left: no sync
    assert len(syncs) == 1 and windows.pending == 0 and len(windows.settled) == 2 and windows.windows == 1
