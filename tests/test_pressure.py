"""The delay signal: the kernel's waiting counters (tfwb.utilization.pressure), a run's delay
(tfwb.analysis.pairs.delay_of) and the decision of a ratio the delay cannot explain (tfwb.stats).

Pure: sample text in tmp files, hand-made step times and records; no TensorFlow, no timing.
"""
from __future__ import annotations

import math
import os

import pytest

from fakes import make_result
from tfwb import stats
from tfwb.analysis import pairs
from tfwb.stats import compare, delay_bound, delay_explains
from tfwb.utilization.pressure import (DELAY_KEYS, cgroup_pressure_file, parse_cgroup_v2_path, parse_psi,
                                       parse_schedstat_wait, parse_stat_steal, start_delay_probe)

PSI = "some avg10={a:.2f} avg60=0.50 avg300=0.10 total={t}\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"


# -- parsers -------------------------------------------------------------------------------------
def test_parse_psi_reads_the_some_line():
    assert parse_psi(PSI.format(a=12.5, t=987654)) == {"avg10": 12.5, "avg60": 0.5, "avg300": 0.1,
                                                       "total_us": 987654.0}


@pytest.mark.parametrize("text", ["", "full avg10=0.00 avg60=0.00 avg300=0.00 total=0",
                                  "some avg10=1.0 avg60=x avg300=0 total=3", "some avg10=1.0 total=3"])
def test_parse_psi_gives_none_for_text_without_a_well_formed_some_line(text):
    assert parse_psi(text) is None


def test_parse_cgroup_v2_path_finds_the_unified_line_only():
    assert parse_cgroup_v2_path("9:name=systemd:/\n4:memory:/x\n0::/kubepods/pod1/c2\n") == "/kubepods/pod1/c2"
    assert parse_cgroup_v2_path("4:memory:/x\n1:cpu:/\n") is None
    assert parse_cgroup_v2_path("0::\n") is None


@pytest.mark.parametrize("layout", ["", "unified"])
def test_cgroup_pressure_file_finds_a_pure_and_a_hybrid_mount(tmp_path, layout):
    folder = tmp_path / layout / "box" / "inner"
    folder.mkdir(parents=True)
    (folder / "cpu.pressure").write_text(PSI.format(a=0, t=5))
    assert cgroup_pressure_file("0::/box/inner\n", str(tmp_path)) == str(folder / "cpu.pressure")
    assert cgroup_pressure_file("0::/other\n", str(tmp_path)) is None
    assert cgroup_pressure_file("4:memory:/box\n", str(tmp_path)) is None


def test_parse_stat_steal_counts_user_to_steal_and_not_guest():
    assert parse_stat_steal("cpu  100 0 50 800 10 0 5 35 7 0\ncpu0 1 1 1 1\n") == (1000.0, 35.0)
    assert parse_stat_steal("cpu  100 0 50 850\n") == (1000.0, 0.0)          # an old kernel: no steal field
    assert parse_stat_steal("intr 5\n") is None
    assert parse_stat_steal("cpu  a b c d\n") is None


def test_parse_schedstat_wait_reads_the_run_queue_nanoseconds():
    assert parse_schedstat_wait("5000 2500000000 7\n") == 2.5
    assert parse_schedstat_wait("5000") is None
    assert parse_schedstat_wait("x y z") is None


# -- the probe over a span, on a fake /proc --------------------------------------------------------
def _write_proc(root, *, psi_us, cgroup_us, stat, waits):
    (root / "pressure").mkdir(parents=True, exist_ok=True)
    (root / "pressure" / "cpu").write_text(PSI.format(a=1, t=psi_us))
    (root / "stat").write_text("cpu  " + " ".join(str(v) for v in stat) + "\n")
    (root / "self").mkdir(exist_ok=True)
    (root / "self" / "cgroup").write_text("0::/job\n")
    for tid, wait_ns in waits.items():
        (root / "self" / "task" / tid).mkdir(parents=True, exist_ok=True)
        (root / "self" / "task" / tid / "schedstat").write_text(f"1 {wait_ns} 1\n")
    cg = root.parent / "cg" / "job"
    cg.mkdir(parents=True, exist_ok=True)
    (cg / "cpu.pressure").write_text(PSI.format(a=1, t=cgroup_us))


def test_the_probe_reads_each_counter_difference_over_the_span(tmp_path):
    proc = tmp_path / "proc"
    _write_proc(proc, psi_us=1_000_000, cgroup_us=0, stat=(100, 0, 0, 900, 0, 0, 0, 0),
                waits={"1": 0, "2": 10**9})
    clock, cpu = iter([10.0, 12.0]), iter([3.0, 5.0])
    stop = start_delay_probe(str(proc), str(tmp_path / "cg"), clock=lambda: next(clock),
                             process_cpu_s=lambda: next(cpu))
    # 2 s later: PSI some +0.5 s, the cgroup +0.2 s, 100 ticks of which 10 stolen,
    # thread 1 waited 0.4 s, thread 2 0.2 s more, a new thread 3 0.2 s
    _write_proc(proc, psi_us=1_500_000, cgroup_us=200_000, stat=(180, 0, 0, 910, 0, 0, 0, 10),
                waits={"1": 4 * 10**8, "2": 12 * 10**8, "3": 2 * 10**8})
    reading = stop()
    assert set(reading) == set(DELAY_KEYS)
    cores = reading["cores"]
    assert cores == len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else cores >= 1
    assert reading["wall_s"] == 2.0
    assert reading["psi_some"] == 0.25
    assert reading["cgroup_some"] == 0.1
    assert reading["steal"] == 0.1
    assert reading["run_wait"] == 0.4                          # 0.8 s of waiting in 2 s
    assert reading["cpu_per_wall"] == pytest.approx(min(1.0, 2.0 / (2.0 * cores)), abs=1e-4)


def test_the_probe_gives_none_for_every_counter_it_cannot_read(tmp_path):
    reading = start_delay_probe(str(tmp_path / "no-proc"), str(tmp_path / "no-cg"))()
    assert [reading[k] for k in ("psi_some", "cgroup_some", "steal", "run_wait")] == [None] * 4
    assert reading["wall_s"] >= 0 and reading["cpu_per_wall"] is not None


# -- a run's delay -------------------------------------------------------------------------------
def _delayed(delay=None, other=None, step_s=0.1, **kw):
    extras = {}
    if delay is not None:
        extras["delay"] = delay
    if other is not None:
        extras["other_cpu_pct"] = other
    return make_result(step_s=step_s, extras=extras, **kw)


def test_delay_of_prefers_the_cgroup_then_the_machine_and_adds_steal():
    assert pairs.delay_of(_delayed({"cgroup_some": 0.05, "psi_some": 0.4})) == 0.05
    assert pairs.delay_of(_delayed({"cgroup_some": None, "psi_some": 0.4, "steal": 0.1})) == 0.5
    assert pairs.delay_of(_delayed({"psi_some": 0.9, "steal": 0.3})) == 1.0
    assert pairs.delay_of(_delayed({"steal": 0.3, "psi_some": None})) is None
    assert pairs.delay_of(_delayed()) is None                                # an older record
    assert pairs.delay_of(_delayed({"psi_some": 0.2}), signals=("run_wait",)) is None


def test_machine_wide_shares_count_times_the_cores_and_the_run_queue_wait_as_it_is():
    # one of our threads kept waiting all the time on one of 2 busy cores reads PSI some 50 %
    reading = {"psi_some": 0.5, "cgroup_some": 0.1, "run_wait": 0.3, "steal": 0.02, "cores": 2.0}
    assert pairs.delay_from(reading, ("psi_some",)) == 1.0
    assert pairs.delay_from(reading) == pytest.approx(0.24)              # (0.1 + 0.02) x 2
    assert pairs.delay_from(reading, ("run_wait",)) == pytest.approx(0.34)  # 0.3 + 0.02 x 2
    assert pairs.delay_from({**reading, "cores": None}) == pytest.approx(0.12)
    assert pairs.delay_from("not a reading") is None


def test_busy_reads_the_delay_where_known_and_the_cpu_share_elsewhere():
    quiet_but_shared = _delayed({"psi_some": stats.DELAY_BUSY_SHARE / 2}, other=50.0)
    assert not pairs.busy(quiet_but_shared)                     # a browser on an idle core delays nothing
    assert pairs.busy(_delayed({"psi_some": stats.DELAY_BUSY_SHARE}, other=0.0))
    assert pairs.busy(_delayed(other=stats.BUSY_OTHER_CPU_PCT))         # the fallback, as before
    assert not pairs.busy(_delayed(other=stats.BUSY_OTHER_CPU_PCT - 1))


# -- the decision --------------------------------------------------------------------------------
def test_delay_bound_is_one_over_the_time_left_and_checks_its_input():
    assert delay_bound(0.0) == 1.0 and delay_bound(0.75) == 4.0 and math.isinf(delay_bound(1.0))
    with pytest.raises(ValueError, match=r"delay=1\.5 .*\[0, 1\]"):
        delay_bound(1.5)


def test_delay_explains_uses_the_slower_side_and_the_band():
    band = stats.NoiseBand(pct=10.0)
    busy = max(0.3, stats.DELAY_BUSY_SHARE)
    limit = delay_bound(busy) * 1.1
    assert delay_explains(limit * 0.99, (busy, 0.0), band)          # the baseline is slower and waited
    assert not delay_explains(limit * 1.01, (busy, 0.0), band)
    assert delay_explains(1 / (limit * 0.99), (0.0, busy), band)    # the candidate is slower and waited
    # the faster side waited: the slower side's bound is 1, so only ratios inside the band stay undecided
    assert delay_explains(1.05, (0.0, busy), band) and not delay_explains(1.5, (0.0, busy), band)
    small = stats.DELAY_BUSY_SHARE * 0.5
    assert not delay_explains(1.01, (small, small), band)           # quiet runs explain nothing


def _steps(median, n=20):
    return [median * (1 + 0.01 * ((i % 5) - 2)) for i in range(n)]


@pytest.mark.parametrize("factor,delay,verdict", [
    (5.0, 0.5, "slower"),                     # waiting half the time explains 2.2x at most, not 5x
    (1.5, 0.5, stats.CANNOT_TELL_BUSY),       # but it could explain 1.5x
    (1.5, 0.0, "slower"),                     # no waiting: the ordinary rule
    (1.0, 0.9, stats.CANNOT_TELL_BUSY),       # an A/A pair under heavy waiting says nothing
])
def test_compare_decides_a_ratio_the_delay_cannot_explain(factor, delay, verdict):
    c = compare(_steps(0.1), _steps(0.1 * factor), delay=(0.0, delay), other_cpu_pct=(0.0, 90.0))
    assert c.verdict == verdict
    assert c.delay == (0.0, delay)


def test_a_known_delay_replaces_the_cpu_share_and_an_unknown_one_falls_back_to_it():
    quiet = stats.DELAY_BUSY_SHARE * 0.5
    assert compare(_steps(0.1), _steps(0.15), other_cpu_pct=(2, 50), delay=(quiet, quiet)).verdict == "slower"
    assert compare(_steps(0.1), _steps(0.15), other_cpu_pct=(2, 50), delay=(quiet, None)).verdict == stats.CANNOT_TELL_BUSY
    assert compare(_steps(0.1), _steps(0.15), other_cpu_pct=(2, 5), delay=(None, None)).verdict == "slower"


def test_the_busy_text_names_the_waiting():
    c = compare(_steps(0.1), _steps(0.15), delay=(0.05, 0.5))
    text = c.text(reference="the baseline")
    assert "tasks waited for a CPU 5 % of the time during the baseline, 50 % during this run" in text
    assert stats.INTERLEAVE_HINT in text


def test_compare_runs_reads_each_runs_delay():
    base = _delayed({"psi_some": 0.0}, other=30.0, step_s=0.1)
    assert pairs.compare_runs(base, _delayed({"psi_some": 0.5}, step_s=0.5)).verdict == "slower"
    assert pairs.compare_runs(base, _delayed({"psi_some": 0.5}, step_s=0.15)).verdict == stats.CANNOT_TELL_BUSY
    # the share's fallback where one record is older
    assert pairs.compare_runs(base, _delayed(other=5.0, step_s=0.5)).verdict == stats.CANNOT_TELL_BUSY


def test_a_record_keeps_its_delay_through_json_and_an_older_one_loads_without_it():
    from tfwb.records import RunResult

    reading = {"wall_s": 1.5, "psi_some": 0.2, "cgroup_some": None, "steal": 0.0, "run_wait": 0.1,
               "cpu_per_wall": 0.8, "cores": 2.0}
    back = RunResult.from_json(_delayed(reading).to_json())
    assert back.extras["delay"] == reading and pairs.delay_of(back) == 0.4     # 0.2 x 2 cores
    older = _delayed(other=3.0).to_dict()
    older["extras"].pop("delay", None)
    assert pairs.delay_of(RunResult.from_dict(older)) is None and not pairs.busy(RunResult.from_dict(older))
