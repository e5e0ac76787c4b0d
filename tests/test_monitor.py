"""Tests of tfwb.monitor: probes, NVML scenarios (no GPU needed) and the Sampler thread."""
from __future__ import annotations

import collections
import itertools
import subprocess
import sys
import threading
import time

import pytest

from tfwb.monitor import (FakeProbe, NvmlProbe, PsutilProbe, Sampler, default_probes,
                          driver_version, fake_nvml, gpu_info, nvml_available, sampler_threads)
from tfwb.monitor import nvml as nvml_module
from tfwb.monitor import probes as probes_module
from tfwb.monitor import sampler as sampler_module
from tfwb.records import Sample


@pytest.fixture(autouse=True)
def no_leaked_sampler_threads():
    yield
    assert sampler_threads() == [], "a test left a tfwb-sampler thread running"


def busy_cpu(duration_s: float) -> None:
    end = time.perf_counter() + duration_s
    while time.perf_counter() < end:
        pass


# -- import hygiene -----------------------------------------------------------------
def test_import_loads_neither_tensorflow_nor_pynvml_nor_ui():
    code = ("import sys, tfwb.monitor, tfwb.hardware; "
            "bad = [m for m in ('tensorflow', 'pynvml', 'IPython', 'ipywidgets', 'matplotlib') "
            "if m in sys.modules]; print(bad)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# -- NVML scenarios ------------------------------------------------------------------
def test_nvml_two_healthy_gpus():
    nv = fake_nvml("two healthy GPUs")
    probe = NvmlProbe(nvml=nv)
    assert nv.init_calls == 0, "NVML must not start at construction"
    first = probe.read()
    second = probe.read()
    assert first == second == {"gpu_util_pct": (35.0, 80.0), "gpu_mem_used_mib": (1024.0, 2048.0)}
    assert nv.init_calls == 1, "NVML starts once, on the first read"
    probe.close()
    probe.close()
    assert nv.shutdown_calls == 1


def test_nvml_one_gpu_failing_keeps_the_other_gpu_and_the_sample():
    nv = fake_nvml("one GPU failing")
    probe = NvmlProbe(nvml=nv)
    assert probe.read() == {"gpu_util_pct": (35.0, None), "gpu_mem_used_mib": (1024.0, 2048.0)}
    probe.close()
    info = gpu_info(nv)
    assert [g["compute_capability"] for g in info] == [(9, 0), None]
    assert [g["name"] for g in info] == ["NVIDIA H100 80GB HBM3"] * 2  # bytes name decoded


def test_nvml_no_driver():
    nv = fake_nvml("no driver")
    assert nvml_available(nv) is False
    assert gpu_info(nv) == []
    assert driver_version(nv) is None
    probe = NvmlProbe(nvml=nv)
    with pytest.raises(nv.NVMLError):
        probe.read()
    probe.close()
    assert nv.shutdown_calls == 0, "no shutdown for an NVML that never started"


def test_nvml_no_driver_inside_a_sampler_records_errors_not_a_crash():
    with Sampler(interval_s=0.05, probes=[NvmlProbe(nvml=fake_nvml("no driver")),
                                          FakeProbe([{"rss_mib": 5.0}])]) as s:
        time.sleep(0.08)
    assert len(s.samples) >= 2
    assert all(x.gpu_util_pct == () and x.rss_mib == 5.0 for x in s.samples)
    assert s.error_count == len(s.samples)
    assert "NvmlProbe" in s.errors[0] and "Driver Not Loaded" in s.errors[0]


def test_nvml_available_balances_init_and_shutdown_and_needs_a_gpu():
    healthy = fake_nvml("two healthy GPUs")
    assert nvml_available(healthy) is True
    assert healthy.init_calls == healthy.shutdown_calls == 1
    assert nvml_available(fake_nvml("no GPU")) is False


def test_nvml_without_the_pynvml_package(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import pynvml now raises ImportError
    assert nvml_available() is False
    assert gpu_info() == []
    with pytest.raises(ImportError):
        NvmlProbe().read()


def test_nvml_probe_retries_init_after_a_failed_start():
    nv = fake_nvml("two healthy GPUs")
    nv.init_error = nv.NVMLError_DriverNotLoaded("Driver Not Loaded")
    probe = NvmlProbe(nvml=nv)
    with pytest.raises(nv.NVMLError):
        probe.read()
    nv.init_error = None
    assert probe.read()["gpu_util_pct"] == (35.0, 80.0)
    probe.close()
    assert nv.init_calls == nv.shutdown_calls == 1


def test_fake_nvml_rejects_unknown_scenario():
    with pytest.raises(ValueError, match="scenario"):
        fake_nvml("three GPUs")


# -- psutil probe --------------------------------------------------------------------
def test_psutil_probe_first_read_is_meaningful():
    import psutil

    me = psutil.Process()
    cpu0, t0 = sum(me.cpu_times()[:2]), time.monotonic()
    probe = PsutilProbe()
    busy_cpu(0.12)
    values = probe.read()
    expected_pct = 100 * (sum(me.cpu_times()[:2]) - cpu0) / (time.monotonic() - t0)
    # Unprimed, psutil would say 0.0; primed, the read covers the time since construction
    # (whatever share of a core this process got on a busy machine).
    assert expected_pct > 5
    assert values["cpu_process_pct"] == pytest.approx(expected_pct, rel=0.5)
    assert 0 <= values["cpu_system_pct"] <= 100
    assert values["rss_mib"] == pytest.approx(me.memory_info().rss / 2**20, rel=0.2)


def test_psutil_probe_gives_none_for_a_window_shorter_than_a_tick():
    probe = PsutilProbe(min_window_s=10.0)
    values = probe.read()
    assert values["cpu_process_pct"] is None and values["cpu_system_pct"] is None
    assert values["rss_mib"] > 1


CpuTimes = collections.namedtuple("CpuTimes", "user nice system idle iowait guest guest_nice")


def test_busy_pct_counts_like_psutil():
    before = CpuTimes(10, 0, 5, 80, 5, 0, 0)
    after = CpuTimes(16, 0, 7, 94, 7, 4, 0)  # +8 busy (guest inside user), +16 idle/iowait
    assert probes_module._busy_pct(before, after) == 33.33
    assert probes_module._busy_pct(after, after) is None


# -- fake probe ----------------------------------------------------------------------
def test_fake_probe_sequence_repeats_last_and_raises_exceptions():
    probe = FakeProbe([{"rss_mib": 1.0}, ValueError("bad read"), {"rss_mib": 3.0}])
    assert probe.read() == {"rss_mib": 1.0}
    with pytest.raises(ValueError, match="bad read"):
        probe.read()
    assert [probe.read(), probe.read()] == [{"rss_mib": 3.0}] * 2
    assert probe.reads == 4


def test_fake_probe_callable_gets_the_clock():
    probe = FakeProbe(lambda t: {"cpu_system_pct": t * 10}, clock=iter([1.0, 2.5]).__next__)
    assert [probe.read(), probe.read()] == [{"cpu_system_pct": 10.0}, {"cpu_system_pct": 25.0}]


def test_fake_probe_rejects_empty_values():
    with pytest.raises(ValueError, match="values"):
        FakeProbe([])


# -- sampler -------------------------------------------------------------------------
@pytest.mark.parametrize("bad", [0.01, 0.0, -1, float("nan"), float("inf"), True, "0.2", None])
def test_interval_validation(bad):
    with pytest.raises(ValueError) as err:
        Sampler(interval_s=bad)
    assert "interval_s" in str(err.value) and "0.05" in str(err.value)


def test_interval_at_minimum_is_allowed():
    assert Sampler(interval_s=0.05).interval_s == 0.05


def test_sample_count_matches_duration_over_interval():
    probe = FakeProbe([{"rss_mib": 1.0}])
    with Sampler(interval_s=0.05, probes=[probe]) as s:
        time.sleep(0.3)
    # 1 at start + about 6 ticks + 1 at stop; a loaded machine may lose a tick or two.
    assert 5 <= len(s.samples) <= 9
    assert all(isinstance(x, Sample) for x in s.samples)


def test_first_sample_at_start_last_at_stop_others_on_the_sampler_thread():
    ticks = itertools.count()
    phase = {"now": "before"}
    probe = FakeProbe(lambda t: {"cpu_system_pct": {"before": 0.0, "body": 50.0,
                                                    "after": 100.0}[phase["now"]]})
    s = Sampler(interval_s=0.05, probes=[probe], clock=lambda: float(next(ticks)))
    s.start()
    phase["now"] = "body"
    time.sleep(0.17)
    phase["now"] = "after"
    samples = s.stop()
    caller = threading.current_thread().name
    assert probe.read_threads[0] == caller and probe.read_threads[-1] == caller
    assert set(probe.read_threads[1:-1]) == {"tfwb-sampler"}
    assert len(probe.read_threads) >= 3
    assert [x.t_s for x in samples] == [float(i) for i in range(len(samples))]
    assert samples[0].cpu_system_pct == 0.0 and samples[-1].cpu_system_pct == 100.0
    assert samples[1].cpu_system_pct == 50.0  # a tick may also fall just before stop()


def test_very_short_run_has_two_samples():
    with Sampler(interval_s=1.0, probes=[FakeProbe([{"rss_mib": 1.0}])]) as s:
        pass
    assert len(s.samples) == 2


def test_probes_are_merged_and_gpu_fields_become_tuples():
    a = FakeProbe([{"cpu_process_pct": 150.0, "rss_mib": 10.0}])
    b = FakeProbe([{"gpu_util_pct": [90.0, None], "gpu_mem_used_mib": [100.0, 200.0]}])
    with Sampler(interval_s=1.0, probes=[a, b]) as s:
        pass
    assert s.samples[0] == Sample(t_s=s.samples[0].t_s, cpu_process_pct=150.0, rss_mib=10.0,
                                  gpu_util_pct=(90.0, None), gpu_mem_used_mib=(100.0, 200.0))


def test_probe_error_is_captured_and_the_thread_goes_on():
    flaky = FakeProbe([{"rss_mib": 1.0}, RuntimeError("sensor fell off"), {"rss_mib": 3.0}])
    steady = FakeProbe([{"cpu_system_pct": 7.0}])
    with Sampler(interval_s=0.05, probes=[flaky, steady]) as s:
        time.sleep(0.17)
    rss = [x.rss_mib for x in s.samples]
    assert rss[:3] == [1.0, None, 3.0] and rss[-1] == 3.0
    assert all(x.cpu_system_pct == 7.0 for x in s.samples), "other probes' fields survive"
    assert s.error_count == 1 and len(s.errors) == 1
    assert "FakeProbe" in s.errors[0] and "RuntimeError: sensor fell off" in s.errors[0]


def test_probe_returning_unknown_fields_is_an_error():
    with Sampler(interval_s=1.0, probes=[FakeProbe([{"gpu_temp_c": 60.0}])]) as s:
        pass
    assert s.error_count == 2 and "gpu_temp_c" in s.errors[0]


def test_clock_failing_on_the_thread_does_not_kill_it():
    calls = itertools.count()

    def clock() -> float:
        n = next(calls)
        if n == 1:
            raise OSError("clock hiccup")
        return float(n)

    with Sampler(interval_s=0.05, probes=[FakeProbe([{}])], clock=clock) as s:
        time.sleep(0.17)
    assert s.samples[0].t_s == 0.0 and len(s.samples) >= 3
    assert "clock hiccup" in s.errors[0]


def test_samples_can_be_read_while_running():
    with Sampler(interval_s=0.05, probes=[FakeProbe([{}])]) as s:
        assert s.running
        seen = len(s.samples)
        time.sleep(0.12)
        assert len(s.samples) > seen
    assert not s.running


def test_stop_is_prompt_even_with_a_long_interval():
    s = Sampler(interval_s=30.0, probes=[FakeProbe([{}])]).start()
    t0 = time.perf_counter()
    s.stop()
    assert time.perf_counter() - t0 < 0.5
    assert sampler_threads() == []


def test_stop_joins_the_thread_closes_probes_and_is_idempotent():
    probe = FakeProbe([{}])
    s = Sampler(interval_s=0.05, probes=[probe]).start()
    assert len(sampler_threads()) == 1
    first = s.stop()
    assert sampler_threads() == []
    assert probe.closed
    assert s.stop() == first
    with pytest.raises(RuntimeError, match="new one"):
        s.start()


def test_no_thread_outlives_a_with_block_that_raises():
    with pytest.raises(KeyError):
        with Sampler(interval_s=0.05, probes=[FakeProbe([{}])]) as s:
            assert len(sampler_threads()) == 1
            raise KeyError("training failed")
    assert sampler_threads() == []
    assert len(s.samples) >= 2


def test_stuck_probe_does_not_hang_stop(monkeypatch):
    monkeypatch.setattr(sampler_module, "STOP_TIMEOUT_S", 0.1)
    release = threading.Event()
    calls = itertools.count()

    def read(t):
        if next(calls) == 1:  # the first read on the thread hangs
            release.wait(5)
        return {}

    s = Sampler(interval_s=0.05, probes=[FakeProbe(read)]).start()
    time.sleep(0.08)
    t0 = time.perf_counter()
    s.stop()
    assert time.perf_counter() - t0 < 0.5
    assert "stuck" in s.errors[-1]
    release.set()
    for t in sampler_threads():
        t.join(1)


def test_default_probes_skip_what_is_missing(monkeypatch):
    monkeypatch.setitem(sys.modules, "psutil", None)
    monkeypatch.setattr(nvml_module, "nvml_available", lambda nvml=None: False)
    assert default_probes() == []


def test_default_probes_add_nvml_when_available(monkeypatch):
    monkeypatch.setattr(nvml_module, "nvml_available", lambda nvml=None: True)
    kinds = [type(p).__name__ for p in default_probes()]
    assert kinds == ["PsutilProbe", "NvmlProbe"]


def test_default_sampler_on_this_machine():
    with Sampler(interval_s=0.05) as s:
        busy_cpu(0.12)
    assert len(s.samples) >= 3
    assert s.samples[0].t_s >= 0 and s.samples[-1].t_s >= 0.1
    assert any(x.cpu_process_pct for x in s.samples), s.errors
