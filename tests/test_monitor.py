"""Tests of tfwb.utilization: probes, NVML scenarios (no GPU needed) and the Sampler.

No wall-clock bounds: samples are driven with ``Sampler.tick()`` and fake clocks; the
thread path is checked by waiting for events (with generous deadlock guards), never by
counting samples per second (that is ``benchmarks/sampler_schedule.py``).
"""
from __future__ import annotations

import collections
import itertools
import subprocess
import sys
import threading
import time
import types

import pytest

import tfwb.utilization
from tfwb.utilization import NvmlProbe, PsutilProbe, Sampler, default_probes, driver_version, gpu_info, nvml_available, sampler_threads
from tfwb import nvml as nvml_module
from nvml_fakes import FakeProbe, fake_nvml
from tfwb.utilization import probes as probes_module
from tfwb.utilization import sampler as sampler_module
from tfwb.records import Sample


@pytest.fixture(autouse=True)
def no_leaked_sampler_threads():
    yield
    assert sampler_threads() == [], "a test left a tfwb-sampler thread running"


#: A deadlock guard, not a timing bound: what a test waits for happens within milliseconds.
GUARD_S = 30.0


def wait_until(condition, what: str) -> None:
    """Wait for ``condition()`` to hold, polling; fail only if it never does (a hang)."""
    deadline = time.monotonic() + GUARD_S
    while not condition():
        assert time.monotonic() < deadline, f"never happened: {what}"
        time.sleep(0.005)


class FakeClock:
    """Seconds that advance only when told: ``clock.t += 0.2``."""

    def __init__(self, t: float = 0.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


# -- import hygiene -----------------------------------------------------------------
def test_fakes_are_apart_from_the_public_names():
    assert not {"FakeProbe", "FakeNvml", "fake_nvml"} & set(tfwb.utilization.__all__)
    assert not any(hasattr(m, "FakeNvml") for m in (tfwb.utilization, nvml_module, probes_module))


def test_import_loads_neither_tensorflow_nor_pynvml_nor_ui():
    code = ("import sys, tfwb.utilization, tfwb.hardware; "
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
    s = Sampler(probes=[NvmlProbe(nvml=fake_nvml("no driver")), FakeProbe([{"rss_mib": 5.0}])],
                clock=FakeClock())
    samples = [s.tick() for _ in range(3)]
    s.stop()
    assert all(x.gpu_util_pct == () and x.rss_mib == 5.0 for x in samples)
    assert s.error_count == 3
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
ProcTimes = collections.namedtuple("ProcTimes", "user system")
Mem = collections.namedtuple("Mem", "rss")


class FakePsutil:
    """psutil's three calls that PsutilProbe makes, scripted: CPU seconds advance when told."""

    def __init__(self) -> None:
        self.process_s = 10.0
        self.system = CpuTimes(100.0, 0.0, 50.0, 850.0, 0.0, 0.0, 0.0)

    def Process(self, pid=None):  # noqa: N802 - psutil's name
        fake = self

        class _Process:
            def cpu_times(self):
                return ProcTimes(fake.process_s, 0.0)

            def memory_info(self):
                return Mem(512 * 2**20)

        return _Process()

    def cpu_times(self):
        return self.system


def test_psutil_probe_first_read_is_meaningful():
    ps, clock = FakePsutil(), FakeClock(100.0)
    probe = PsutilProbe(psutil_module=ps, clock=clock)
    clock.t += 0.5
    ps.process_s += 0.4                                      # 0.4 s of CPU in 0.5 s: 80 % of a core
    ps.system = ps.system._replace(user=100.6, idle=850.4)   # machine: 0.6 busy of 1.0 s counted
    values = probe.read()
    # Unprimed, psutil would say 0.0; primed at construction, the read covers the window since.
    assert values == {"cpu_process_pct": 80.0, "cpu_system_pct": 60.0, "rss_mib": 512.0}
    clock.t += 0.01                                          # shorter than min_window_s
    assert probe.read()["cpu_process_pct"] is None


def test_psutil_probe_on_this_machine():
    import psutil

    values = PsutilProbe(min_window_s=0.0).read()
    assert sorted(values) == ["cpu_process_pct", "cpu_system_pct", "rss_mib"]
    assert values["rss_mib"] == pytest.approx(psutil.Process().memory_info().rss / 2**20, rel=0.2)


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


def test_tick_samples_on_the_callers_thread_with_the_given_clock():
    clock = FakeClock()
    probe = FakeProbe([{"rss_mib": 1.0}, {"rss_mib": 2.0}])
    s = Sampler(interval_s=0.2, probes=[probe], clock=clock)
    first = s.tick()
    clock.t += 0.2
    second = s.tick()
    assert (first, second) == (Sample(t_s=0.0, rss_mib=1.0), Sample(t_s=0.2, rss_mib=2.0))
    assert s.samples == (first, second)
    assert sampler_threads() == [] and not s.running
    assert probe.read_threads == [threading.current_thread().name] * 2
    assert s.stop() == (first, second) and probe.closed, "stop() releases probes that tick() used"
    with pytest.raises(RuntimeError, match="stopped"):
        s.tick()


def test_tick_builds_the_default_probes_and_clock_on_first_use(monkeypatch):
    monkeypatch.setattr(nvml_module, "nvml_available", lambda nvml=None: False)
    s = Sampler()
    assert s.probes == ()
    sample = s.tick()
    assert [type(p).__name__ for p in s.probes] == ["PsutilProbe"]
    assert sample.t_s >= 0 and sample.rss_mib > 1
    s.stop()


def test_start_and_stop_sample_on_the_callers_thread_the_rest_on_the_sampler_thread():
    on_thread = threading.Event()

    def read(t):
        if threading.current_thread().name == "tfwb-sampler":
            on_thread.set()
        return {"cpu_system_pct": 50.0}

    probe = FakeProbe(read)
    s = Sampler(interval_s=0.05, probes=[probe], clock=FakeClock())
    s.start()
    assert len(sampler_threads()) == 1 and s.running
    assert on_thread.wait(GUARD_S), "the thread never sampled"
    samples = s.stop()
    caller = threading.current_thread().name
    assert probe.read_threads[0] == caller and probe.read_threads[-1] == caller
    assert "tfwb-sampler" in probe.read_threads[1:-1]
    assert set(probe.read_threads[1:-1]) <= {"tfwb-sampler"}
    assert len(samples) == len(probe.read_threads) and all(x.cpu_system_pct == 50.0 for x in samples)


def test_very_short_run_has_two_samples():
    with Sampler(interval_s=3600.0, probes=[FakeProbe([{"rss_mib": 1.0}])]) as s:
        pass
    assert len(s.samples) == 2


def test_probes_are_merged_and_gpu_fields_become_tuples():
    a = FakeProbe([{"cpu_process_pct": 150.0, "rss_mib": 10.0}])
    b = FakeProbe([{"gpu_util_pct": [90.0, None], "gpu_mem_used_mib": [100.0, 200.0]}])
    s = Sampler(probes=[a, b], clock=FakeClock(1.5))
    assert s.tick() == Sample(t_s=1.5, cpu_process_pct=150.0, rss_mib=10.0,
                              gpu_util_pct=(90.0, None), gpu_mem_used_mib=(100.0, 200.0))
    s.stop()


def test_probe_error_is_captured_and_sampling_goes_on():
    flaky = FakeProbe([{"rss_mib": 1.0}, RuntimeError("sensor fell off"), {"rss_mib": 3.0}])
    steady = FakeProbe([{"cpu_system_pct": 7.0}])
    s = Sampler(probes=[flaky, steady], clock=FakeClock())
    samples = [s.tick() for _ in range(4)]
    s.stop()
    assert [x.rss_mib for x in samples] == [1.0, None, 3.0, 3.0]
    assert all(x.cpu_system_pct == 7.0 for x in samples), "other probes' fields survive"
    assert s.error_count == 1 and len(s.errors) == 1
    assert s.errors[0] == "t_s=0.000: FakeProbe: RuntimeError: sensor fell off"


def test_errors_are_capped_but_counted(monkeypatch):
    monkeypatch.setattr(sampler_module, "MAX_ERRORS", 2)
    s = Sampler(probes=[FakeProbe([RuntimeError("no")])], clock=FakeClock())
    for _ in range(5):
        s.tick()
    s.stop()
    assert s.error_count == 5 and len(s.errors) == 2


def test_probe_returning_unknown_fields_is_an_error():
    s = Sampler(probes=[FakeProbe([{"gpu_temp_c": 60.0}])], clock=FakeClock())
    assert s.tick() == Sample(t_s=0.0)
    s.stop()
    assert s.error_count == 1 and "gpu_temp_c" in s.errors[0]


def test_clock_failing_on_the_thread_does_not_kill_it():
    calls = itertools.count()

    def clock() -> float:
        n = next(calls)
        if n == 1:                      # the thread's first sample
            raise OSError("clock hiccup")
        return float(n)

    s = Sampler(interval_s=0.05, probes=[FakeProbe([{}])], clock=clock).start()
    wait_until(lambda: len(s.samples) >= 3, "two samples on the thread after the failure")
    s.stop()
    assert s.samples[0].t_s == 0.0 and s.samples[1].t_s == 2.0
    assert "clock hiccup" in s.errors[0]


def test_a_clock_failing_at_start_raises_there_and_starts_no_thread():
    def clock() -> float:
        raise OSError("no clock")

    s = Sampler(probes=[FakeProbe([{}])], clock=clock)
    with pytest.raises(OSError, match="no clock"):
        s.start()
    assert sampler_threads() == []


def test_samples_can_be_read_while_running():
    with Sampler(interval_s=0.05, probes=[FakeProbe([{}])], clock=FakeClock()) as s:
        assert s.running
        seen = len(s.samples)
        wait_until(lambda: len(s.samples) > seen, "a sample from the thread")
        extra = s.tick()                # an extra sample on this thread while the thread runs
        assert s.samples[-1] is extra or extra in s.samples
    assert not s.running


def test_stop_does_not_wait_for_the_next_tick():
    s = Sampler(interval_s=3600.0, probes=[FakeProbe([{}])]).start()
    stopper = threading.Thread(target=s.stop)
    stopper.start()
    stopper.join(GUARD_S)               # waiting out the interval would take an hour
    assert not stopper.is_alive()
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


def test_stop_before_start_touches_nothing():
    probe = FakeProbe([{}])
    s = Sampler(probes=[probe])
    assert s.stop() == () and not probe.closed and probe.reads == 0


def test_no_thread_outlives_a_with_block_that_raises():
    with pytest.raises(KeyError):
        with Sampler(interval_s=0.05, probes=[FakeProbe([{}])]) as s:
            assert len(sampler_threads()) == 1
            raise KeyError("training failed")
    assert sampler_threads() == []
    assert len(s.samples) >= 2


def test_stuck_probe_does_not_hang_stop(monkeypatch):
    monkeypatch.setattr(sampler_module, "STOP_TIMEOUT_S", 0.1)
    entered, release = threading.Event(), threading.Event()

    def read(t):
        if threading.current_thread().name == "tfwb-sampler":
            entered.set()
            release.wait(GUARD_S)       # the thread's read hangs until released
        return {}

    s = Sampler(interval_s=0.05, probes=[FakeProbe(read)]).start()
    assert entered.wait(GUARD_S)
    s.stop()                            # gives up on the thread after STOP_TIMEOUT_S
    assert "stuck" in s.errors[-1]
    release.set()
    for t in sampler_threads():
        t.join(GUARD_S)


def test_sampler_as_a_run_observer():
    run = types.SimpleNamespace(samples=(), notes=[])
    s = Sampler(probes=[FakeProbe([{"rss_mib": 1.0}, RuntimeError("gone"), {"rss_mib": 2.0}])],
                clock=FakeClock())
    s.on_run_start(run)
    s.on_run_end(run)
    assert [x.rss_mib for x in run.samples][0] == 1.0 and run.samples[-1].rss_mib in (None, 2.0)
    assert all(note.startswith("sampler: ") for note in run.notes)


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
        pass
    assert len(s.samples) >= 2
    assert s.samples[0].t_s >= 0 and s.samples[-1].t_s >= s.samples[0].t_s
    assert all(x.rss_mib and x.rss_mib > 1 for x in s.samples), s.errors
    assert s.error_count == 0, s.errors
