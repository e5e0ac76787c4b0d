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

    monkeypatch.setenv("TFWB_FAST", "1")
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
    assert lines[:3] == ["02 · Graphs: tf.function, retracing, XLA", hardware.describe(ch.hw), str(ch.size)]
    assert (len(lines) == 4 and f"{ch.cpu_devices} logical CPU devices" in lines[3]) == (not ch.has_gpu)


def test_done_says_how_long_since_setup_in_which_mode_on_which_machine(monkeypatch):
    import tfwb

    monkeypatch.setenv("TFWB_FAST", "1")
    clock = FakeClock(50.0)
    ch = tfwb.chapter(5, clock=clock)
    clock.now = 50.0 + 83.4
    assert ch.elapsed_s() == pytest.approx(83.4)
    assert ch.done() == f"this chapter took 83 s here (small mode, {hardware.describe(ch.hw)})"


def test_an_unknown_chapter_is_refused_before_any_work(monkeypatch):
    import tfwb
    from tfwb.tf.lab import chapter as chapter_module

    calls = []
    monkeypatch.setattr(chapter_module, "choose_size", lambda *a, **k: calls.append("size"))
    with pytest.raises(ValueError, match=r"chapter='42' is not allowed; chapter must be one of 00, 01"):
        tfwb.chapter("42")
    assert calls == []
