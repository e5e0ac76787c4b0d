"""Warm-up is not drift (issue 34, item 4): tfwb.warmup and its use in stats' drift, on hand-made step times."""
import pytest

from tfwb import stats, warmup
from tfwb.config import RunConfig
from tfwb.records import RunResult

#: A short run as chapter 00 measured it on a quiet machine: its first steps 1.2x slower, then flat.
WARM_THEN_FLAT = [1.3, 1.28, 1.26, 1.24, 1.22, 1.2, 1.15, 1.1] + [1.0, 1.01, 0.99, 1.0, 1.02, 0.98] * 4


def test_a_warm_up_then_flat_run_is_not_drift():
    assert warmup.unsettled_steps(WARM_THEN_FLAT) == 8
    assert stats.drift_of(WARM_THEN_FLAT) == pytest.approx(1.0, abs=0.03)
    flat = [1.0, 1.01, 0.99, 1.0] * 8
    c = stats.compare(WARM_THEN_FLAT, flat)
    assert c.verdict == stats.NO_DIFFERENCE and c.baseline.n == len(WARM_THEN_FLAT) - 8


def test_before_settling_the_same_run_read_as_drift():
    # The old rule (thirds of every measured step) called this run drifted: its first third holds the warm-up.
    k = len(WARM_THEN_FLAT) // 3
    old = stats.median(WARM_THEN_FLAT[-k:]) / stats.median(WARM_THEN_FLAT[:k])
    assert old < 0.85 and not stats.DEFAULT_NOISE.contains(old)


def test_a_warm_up_then_a_real_2x_change_decides():
    fast = [0.62, 0.58, 0.55] + [0.5, 0.51, 0.49, 0.5] * 6
    c = stats.compare(WARM_THEN_FLAT, fast)
    assert c.verdict == stats.FASTER and c.speedup == pytest.approx(2.0, rel=0.05)


def test_a_mid_run_step_change_is_drift():
    slower_midway = [1.0] * 15 + [1.5] * 15
    faster_midway = [2.0] * 15 + [1.0] * 15        # slow for half the run: longer than any warm-up
    assert stats.drift_of(slower_midway) == pytest.approx(1.5)
    assert stats.drift_of(faster_midway) == pytest.approx(0.5)
    assert stats.compare([1.0] * 30, faster_midway).verdict == stats.CANNOT_TELL_DRIFT
    assert stats.compare([1.0] * 30, slower_midway).verdict == stats.CANNOT_TELL_DRIFT


def test_a_late_slowdown_is_drift_and_not_warm_up():
    late = [1.0] * 20 + [1.4] * 10
    assert warmup.unsettled_steps(late) == 0
    assert stats.drift_of(late) == pytest.approx(1.4)
    assert stats.compare([1.0] * 30, late).verdict == stats.CANNOT_TELL_DRIFT


def test_the_warm_up_is_capped_at_a_third_of_the_run():
    slow_start = [3.0] * 15 + [1.0] * 15            # slow for half the run: more than a warm-up
    assert warmup.unsettled_steps(slow_start) == 10 == len(slow_start) // 3
    assert warmup.unsettled_steps(slow_start, max_fraction=0.0) == 0
    assert stats.drift_of(slow_start) is not None and not stats.DEFAULT_NOISE.contains(stats.drift_of(slow_start))
    with pytest.raises(ValueError, match="max_fraction=1.5"):
        warmup.unsettled_steps(slow_start, max_fraction=1.5)


def test_short_runs_keep_every_step():
    assert warmup.unsettled_steps([2.0, 1.0, 1.0, 1.0, 1.0]) == 0
    assert warmup.settled([2.0, 1.0, 1.0, 1.0, 1.0]) == [2.0, 1.0, 1.0, 1.0, 1.0]


def test_noise_within_the_tolerance_is_not_warm_up():
    noisy = [1.03, 0.98, 1.04, 1.0, 0.97, 1.02, 1.01, 0.99, 1.0, 1.03, 0.98, 1.0]
    assert warmup.unsettled_steps(noisy) == 0


# -- extending the runner's warm-up -----------------------------------------------------------------
class Steps:
    """Warm-up calls whose times come from a list; records how many ran."""

    def __init__(self, times):
        self.times, self.ran, self.requests = list(times), 0, []

    def __call__(self, n):
        self.requests.append(n)
        out = self.times[self.ran:self.ran + n]
        self.ran += len(out)
        return out


def test_extension_runs_until_the_steps_settle():
    steps = Steps([1.2, 1.1, 1.0, 1.0, 1.0, 1.01] + [1.0] * 40)
    extra = warmup.extend_warmup([5.0, 1.5, 1.45, 1.4, 1.35], steps, calls=40, clock=lambda: 0.0,
                                 should_stop=lambda: False)
    # blocks of 2 calls: still faster, still faster, then a block no faster than the one before
    assert extra == steps.ran == 6 and steps.requests == [2, 2, 2]


def test_a_settled_warm_up_is_not_extended():
    steps = Steps([1.0] * 40)
    assert warmup.extend_warmup([5.0, 1.0, 1.01, 0.99, 1.0], steps, calls=40, clock=lambda: 0.0,
                                should_stop=lambda: False) == 0
    assert steps.ran == 0


def test_extension_is_capped_in_calls_and_seconds():
    ever_faster = Steps([2.0 * 0.9 ** i for i in range(200)])
    assert warmup.extend_warmup([9.0, 3.0, 2.8, 2.6, 2.4], ever_faster, calls=40, clock=lambda: 0.0,
                                should_stop=lambda: False) == 10 == 40 // 4
    ticks = iter(range(100))
    slow = Steps([2.0 * 0.9 ** i for i in range(200)])
    extra = warmup.extend_warmup([9.0, 3.0, 2.8, 2.6, 2.4], slow, calls=40, clock=lambda: float(next(ticks)),
                                 should_stop=lambda: False, max_s=2.5)
    assert 0 < extra < 10


def test_extension_respects_a_stop_and_short_or_unwarmed_runs():
    stops = iter([False, True])
    steps = Steps([2.0 * 0.9 ** i for i in range(200)])
    assert warmup.extend_warmup([9.0, 3.0, 2.8, 2.6, 2.4], steps, calls=40, clock=lambda: 0.0,
                                should_stop=lambda: next(stops)) == warmup.block_calls(40) == 2
    never = Steps([1.0] * 10)
    assert warmup.extend_warmup([9.0, 3.0, 2.8], never, calls=warmup.MIN_CALLS_TO_EXTEND - 1, clock=lambda: 0.0,
                                should_stop=lambda: False) == 0
    assert warmup.extend_warmup([], never, calls=40, clock=lambda: 0.0, should_stop=lambda: False) == 0
    assert never.ran == 0


def test_a_block_cut_short_ends_the_extension():
    steps = Steps([1.5])                             # the run stopped inside the block
    assert warmup.extend_warmup([9.0, 3.0, 2.8], steps, calls=40, clock=lambda: 0.0,
                                should_stop=lambda: False) == 1 and steps.requests == [2]


# -- the record --------------------------------------------------------------------------------------
def test_the_extra_warm_up_round_trips_and_old_records_load():
    r = RunResult(config=RunConfig(steps=4, warmup_steps=1), step_times_s=(1.0,) * 4,
                  warmup_times_s=(5.0, 1.2, 1.1), warmup_extra_steps=2)
    back = RunResult.from_json(r.to_json())
    assert back == r and back.warmup_extra_steps == 2
    old = r.to_dict()
    del old["warmup_extra_steps"]                    # a record written before the field existed
    assert RunResult.from_dict(old).warmup_extra_steps == 0
    with pytest.raises(ValueError, match="warmup_extra_steps=-1"):
        RunResult(config=RunConfig(), warmup_extra_steps=-1)


def test_a_kernel_interrupt_inside_an_extension_block_keeps_the_calls_that_ran(monkeypatch):
    """The browser test read 'after 32 of 301 steps' in the bar and '32 of 337' in the status line: an
    interrupt inside an extension block left the run's total raised by the whole block and the result
    without its extra warm-up calls."""
    from types import SimpleNamespace

    train = pytest.importorskip("tfwb.tf.runner.train")

    asked = []

    def timed_steps(p, n, clock, log, state=None, dispatch=None, first=0):
        asked.append(n)
        log.times_s.extend([1.0] * (n - 1))              # all but the block's last call ran, then Ctrl-C
        raise KeyboardInterrupt

    monkeypatch.setattr(train, "timed_steps", timed_steps)
    log = SimpleNamespace(times_s=[9.0, 3.0, 2.8, 2.6, 2.4])                       # still speeding up
    state = SimpleNamespace(total_steps=5 + 40, warmup_steps=5)
    life = SimpleNamespace(state=state, log=log, warmup_calls=5, calls=40, clock=lambda: 0.0, should_stop=False,
                           dispatch=None)
    added = [0]
    with pytest.raises(KeyboardInterrupt):
        train.extend_warmup(SimpleNamespace(cfg=RunConfig(steps=40, warmup_steps=5)), life, added)
    ran = asked[0] - 1
    assert asked[0] >= 2 and added == [ran] and life.warmup_calls == 5 + ran
    assert (state.total_steps, state.warmup_steps) == (45 + ran, 5 + ran)   # the calls that ran, not the block
