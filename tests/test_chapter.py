"""tfwb.chapter: the setup every chapter starts with and the line it ends with (tfwb/tf/lab/chapter.py)."""
from __future__ import annotations

import pytest

from tfwb import book, hardware

pytestmark = pytest.mark.tf


class FakeClock:
    def __init__(self, now: float = 100.0):
        self.now = now

    def __call__(self) -> float:
        return self.now


def test_chapter_sets_up_devices_size_and_machine_and_says_so(monkeypatch):
    import tfwb
    from tfwb.config import RunConfig

    import tfwb.tf.lab.chapter as chapter_module

    monkeypatch.setenv("TFWB_FAST", "1")
    monkeypatch.setattr(chapter_module, "other_programs_cpu_pct", lambda seconds: 2.0)   # a quiet machine
    clock = FakeClock()
    ch = tfwb.chapter("02", clock=clock)
    assert ch.chapter == book.find_chapter("02")
    assert ch.fast and ch.size.size == "small" and ch.size.step_s is None     # TFWB_FAST=1: nothing measured
    assert RunConfig().resolved_size == "small"                               # size="auto" now means small
    from tfwb.tf.runner import devices

    assert ch.hw == devices.machine() and ch.hw.gpus_from == "tensorflow"      # TensorFlow's view
    import tensorflow as tf

    assert ch.cpu_devices == len(tf.config.list_logical_devices("CPU"))
    lines = str(ch).splitlines()
    assert lines[:4] == ["02 · Graphs: tf.function, retracing, XLA", hardware.describe(ch.hw), str(ch.size),
                         ch.size.expected]                               # the chapter's expected run time
    small_s = book.chapter_time("02").small_s                               # book.CHAPTER_TIMES
    assert ch.size.expected.startswith(f"expected run time: about {small_s:.0f} s in small mode"), ch.size.expected
    assert (len(lines) == 5 and f"{ch.cpu_devices} logical CPU devices" in lines[4]) == (not ch.has_gpu)


def test_a_busy_machine_is_said_before_the_chapter_runs(monkeypatch):
    """Issue 26: chapters estimated "about 40-55 s" and took 156-714 s beside a second job."""
    import tfwb
    import tfwb.tf.lab.chapter as chapter_module

    monkeypatch.setenv("TFWB_FAST", "1")
    monkeypatch.setattr(chapter_module, "other_programs_cpu_pct", lambda seconds: 47.0)
    lines = str(tfwb.chapter("02", clock=FakeClock())).splitlines()
    busy = [ln for ln in lines if ln.startswith("Other programs are using 47 % of the CPU")]
    assert len(busy) == 1 and "expect this chapter to take longer" in busy[0] and "cannot tell" in busy[0]
    assert lines.index(busy[0]) == 4                          # right after the time estimate


def test_done_says_how_long_since_setup_in_which_mode_on_which_machine(monkeypatch):
    import tfwb

    monkeypatch.setenv("TFWB_FAST", "1")
    clock = FakeClock(50.0)
    ch = tfwb.chapter(5, clock=clock)
    clock.now = 50.0 + 83.4
    assert ch.elapsed_s() == pytest.approx(83.4)
    small_s = book.chapter_time(5).small_s                    # compared with the recorded time, the ratio printed
    assert ch.done() == (f"this chapter took 83 s here (small mode, {hardware.describe(ch.hw)}); it took "
                         f"{small_s:.0f} s on {book.chapter_time(5).machine}: {83.4 / small_s:.2f}x as long here")


def test_an_unknown_chapter_is_refused_before_any_work(monkeypatch):
    import tfwb
    from tfwb.tf.lab import chapter as chapter_module

    calls = []
    monkeypatch.setattr(chapter_module, "choose_size", lambda *a, **k: calls.append("size"))
    with pytest.raises(ValueError, match=r"chapter='42' is not allowed; chapter must be one of 00, 01"):
        tfwb.chapter("42")
    assert calls == []


def _probe(step_s):
    import types
    return types.SimpleNamespace(ok=True, error=None, median_step_s=step_s)


@pytest.mark.parametrize("step_s, size", [(0.2, "full"), (0.45, "small")])
def test_a_timed_chapter_picks_full_only_when_its_scaled_time_fits_ten_minutes(monkeypatch, step_s, size):
    from tfwb import book
    from tfwb.tf.lab import sizing

    monkeypatch.delenv("TFWB_FAST", raising=False)
    monkeypatch.setattr(sizing, "run", lambda cfg: _probe(step_s))
    monkeypatch.setattr(book, "CHAPTER_TIMES", {"03": book.ChapterTime(300.0, 50.0, 0.2, "machine M")})
    choice = sizing.choose_size(chapter="03")
    assert choice.size == size
    # 300 s measured where a step took 0.2 s: 0.45 s here scales it to 675 s, over 600 s
    expected_min = f"{300 * step_s / 0.2 / 60:.1f} min"
    assert expected_min in choice.reason and expected_min in (choice.expected or "") or size == "small"
    assert ("within" in choice.reason) == (size == "full")
    assert "machine M" in choice.expected


def test_an_untimed_chapter_keeps_the_step_budget_and_states_no_time(monkeypatch):
    from tfwb import book
    from tfwb.tf.lab import sizing

    monkeypatch.delenv("TFWB_FAST", raising=False)
    monkeypatch.setattr(sizing, "run", lambda cfg: _probe(0.3))
    monkeypatch.setattr(book, "CHAPTER_TIMES", {})
    choice = sizing.choose_size(budget_s=0.4, chapter="03")
    assert choice.size == "full" and choice.expected == ""


def test_small_mode_states_the_recorded_small_time(monkeypatch):
    from tfwb import book
    from tfwb.tf.lab import sizing

    monkeypatch.setenv("TFWB_FAST", "1")
    monkeypatch.setattr(book, "CHAPTER_TIMES", {"01": book.ChapterTime(300.0, 75.0, 0.2, "machine M")})
    choice = sizing.choose_size(chapter="01")
    assert choice.size == "small" and "1.2 min in small mode" in choice.expected


@pytest.mark.parametrize("forced", ["small", "full"])
def test_tfwb_size_decides_and_the_step_is_still_reported(monkeypatch, forced):
    from tfwb import book
    from tfwb.tf.lab import sizing

    monkeypatch.delenv("TFWB_FAST", raising=False)
    monkeypatch.setenv("TFWB_SIZE", forced)
    monkeypatch.setattr(sizing, "run", lambda cfg: _probe(2.0))          # far over any budget
    monkeypatch.setattr(book, "CHAPTER_TIMES", {"03": book.ChapterTime(300.0, 50.0, 0.2, "machine M")})
    choice = sizing.choose_size(chapter="03")
    assert choice.size == forced and choice.step_s == 2.0
    assert f"TFWB_SIZE={forced} asks for it" in choice.reason and "50.0 min" in choice.reason


def test_a_bad_tfwb_size_names_the_variable_and_the_choices(monkeypatch):
    from tfwb.tf.lab import sizing

    monkeypatch.delenv("TFWB_FAST", raising=False)
    monkeypatch.setenv("TFWB_SIZE", "huge")
    monkeypatch.setattr(sizing, "run", lambda cfg: _probe(0.2))
    with pytest.raises(ValueError, match="TFWB_SIZE='huge' is not allowed; TFWB_SIZE must be 'small', 'full' or unset"):
        sizing.choose_size()
