"""Tests of tfwb.tf.runner.memory.MemoryPeak: the TF allocator's peak on GPUs (with a stand-in for
``tf.config``), the RSS peak from samples on a CPU, and a real CPU run of the observer."""
from __future__ import annotations

import json
import types

import pytest

from tfwb.config import RunConfig
from tfwb.observers import RunState, StepLog
from tfwb.records import Sample
from tfwb.tf.runner.memory import EXTRAS_KEY, MemoryPeak

MIB = 2 ** 20


class FakeExperimental:
    """``tf.config.experimental``'s memory calls over scripted per-device bytes."""

    def __init__(self, current, refuse_reset=(), refuse_info=()):
        self.current = dict(current)
        self.peak = dict(current)
        self.refuse_reset, self.refuse_info = set(refuse_reset), set(refuse_info)
        self.resets = []

    def allocate(self, device, n_bytes):
        self.current[device] += n_bytes
        self.peak[device] = max(self.peak[device], self.current[device])

    def free(self, device, n_bytes):
        self.current[device] -= n_bytes

    def reset_memory_stats(self, device):
        if device in self.refuse_reset:
            raise ValueError(f"reset not supported for {device}")
        self.resets.append(device)
        self.peak[device] = self.current[device]

    def get_memory_info(self, device):
        if device in self.refuse_info:
            raise ValueError(f"Memory statistics not tracked for {device}")
        return {"current": self.current[device], "peak": self.peak[device]}


def fake_config(devices, experimental):
    def list_logical_devices(kind):
        return [types.SimpleNamespace(name=f"/device:{d}", device_type=kind)
                for d in devices if d.startswith(kind)]

    return types.SimpleNamespace(list_logical_devices=list_logical_devices, experimental=experimental)


def run_state(samples=()):
    state = RunState(config=None, log=StepLog(), clock=lambda: 0.0, total_steps=1, warmup_steps=0)
    state.samples = tuple(samples)
    return state


def test_gpu_peak_is_the_allocators_not_nvmls():
    exp = FakeExperimental({"GPU:0": 300 * MIB, "GPU:1": 100 * MIB})
    exp.allocate("GPU:0", 900 * MIB)
    exp.free("GPU:0", 900 * MIB)            # a peak from before the run (setup, an earlier run)
    observer = MemoryPeak(tf_config=fake_config(["GPU:0", "GPU:1"], exp))
    state = run_state([Sample(t_s=0.0, gpu_mem_used_mib=(78000.0, 78000.0), rss_mib=2000.0),
                       Sample(t_s=1.0, gpu_mem_used_mib=(78500.0, None), rss_mib=2100.0)])
    observer.on_run_start(state)
    assert exp.resets == ["GPU:0", "GPU:1"]
    exp.allocate("GPU:0", 212.5 * MIB)       # the run's activations
    exp.free("GPU:0", 212.5 * MIB)
    exp.allocate("GPU:1", 50 * MIB)
    observer.on_run_end(state)
    facts = state.extras[EXTRAS_KEY]
    assert facts == {"source": "tf_allocator", "peak_mib": {"GPU:0": 512.5, "GPU:1": 150.0},
                     "start_mib": {"GPU:0": 300.0, "GPU:1": 100.0},
                     "reserved_peak_mib": {"0": 78500.0, "1": 78000.0}, "reset": True}
    assert json.loads(json.dumps(facts)) == facts


def test_a_device_that_refuses_the_reset_is_reported():
    exp = FakeExperimental({"GPU:0": 10 * MIB}, refuse_reset={"GPU:0"})
    observer = MemoryPeak(tf_config=fake_config(["GPU:0"], exp))
    state = run_state()
    observer.on_run_start(state)
    observer.on_run_end(state)
    assert state.extras[EXTRAS_KEY]["reset"] is False
    assert state.extras[EXTRAS_KEY]["peak_mib"] == {"GPU:0": 10.0}


def test_tpu_devices_are_tracked_too():
    exp = FakeExperimental({"TPU:0": 64 * MIB})
    state = run_state()
    observer = MemoryPeak(tf_config=fake_config(["TPU:0"], exp))
    observer.on_run_start(state)
    observer.on_run_end(state)
    assert state.extras[EXTRAS_KEY]["peak_mib"] == {"TPU:0": 64.0}


def test_after_a_tpu_run_a_host_run_reports_host_memory():
    exp = FakeExperimental({"TPU:0": 64 * MIB})
    observer = MemoryPeak(tf_config=fake_config(["TPU:0"], exp))   # the TPU stays listed once initialised
    host = run_state([Sample(t_s=0.0, rss_mib=700.0)])
    host.config = RunConfig(strategy="default")
    observer.on_run_start(host)
    observer.on_run_end(host)
    assert host.extras[EXTRAS_KEY] == {"source": "rss_samples", "peak_mib": {"process": 700.0}}
    on_tpu = run_state()
    on_tpu.config = RunConfig(strategy="tpu")
    observer.on_run_start(on_tpu)
    observer.on_run_end(on_tpu)
    assert on_tpu.extras[EXTRAS_KEY]["peak_mib"] == {"TPU:0": 64.0}


def test_cpu_reports_the_rss_peak_of_the_samples():
    observer = MemoryPeak(tf_config=fake_config([], FakeExperimental({})))
    state = run_state([Sample(t_s=0.0, rss_mib=800.0), Sample(t_s=0.5), Sample(t_s=1.0, rss_mib=950.25)])
    observer.on_run_start(state)
    observer.on_run_end(state)
    assert state.extras[EXTRAS_KEY] == {"source": "rss_samples", "peak_mib": {"process": 950.2}}


def test_untracked_gpu_falls_back_to_rss_and_without_samples_says_why():
    exp = FakeExperimental({"GPU:0": 0}, refuse_info={"GPU:0"})
    observer = MemoryPeak(tf_config=fake_config(["GPU:0"], exp))
    state = run_state([Sample(t_s=0.0, rss_mib=700.0)])
    observer.on_run_start(state)
    observer.on_run_end(state)
    assert state.extras[EXTRAS_KEY] == {"source": "rss_samples", "peak_mib": {"process": 700.0}}
    empty = run_state()
    observer.on_run_start(empty)
    observer.on_run_end(empty)
    facts = empty.extras[EXTRAS_KEY]
    assert facts["source"] is None and facts["peak_mib"] == {}
    assert "Memory statistics not tracked" in facts["error"]


def test_an_observer_can_be_reused_across_runs():
    exp = FakeExperimental({"GPU:0": 0}, refuse_reset={"GPU:0"})
    cfg = fake_config(["GPU:0"], exp)
    observer = MemoryPeak(tf_config=cfg)
    first = run_state()
    observer.on_run_start(first)
    observer.on_run_end(first)
    exp.refuse_reset.clear()
    second = run_state()
    observer.on_run_start(second)
    observer.on_run_end(second)
    assert (first.extras[EXTRAS_KEY]["reset"], second.extras[EXTRAS_KEY]["reset"]) == (False, True)


def test_with_tensorflow_on_this_cpu():
    pytest.importorskip("tensorflow")
    import tensorflow as tf

    observer = MemoryPeak()
    if tf.config.list_logical_devices("GPU"):
        pytest.skip("this machine has a GPU: covered by the stand-in tests")
    state = run_state([Sample(t_s=0.0, rss_mib=1234.0)])
    observer.on_run_start(state)
    observer.on_run_end(state)
    assert observer.tracked_devices() == []
    assert state.extras[EXTRAS_KEY] == {"source": "rss_samples", "peak_mib": {"process": 1234.0}}
