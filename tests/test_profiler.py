"""tfwb.profile: a real capture of a few small-mode steps, summarized from xprof's own output.

The summary's figures must come from the capture: the top ops are named in the trace,
the profiler's step times agree with tfwb's own clock, and bad requests (a capture
already running, an unusable log folder, a window that does not fit) fail before any work.
"""
from __future__ import annotations

import glob
import html
import os

import pytest

from tfwb.config import RunConfig
from tfwb.observers import Observer

pytestmark = pytest.mark.tf

# A run long enough per step (~0.25 s on a 2-core CPU) that both clocks see the same input wait.
CFG = RunConfig(workload="images", size="small", steps=5, warmup_steps=1, label="prof")
WINDOW, SKIP = 3, 1


class Started(Observer):
    """Records whether a run got as far as its first step."""

    def __init__(self):
        self.started = False

    def on_run_start(self, run):
        self.started = True


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    pytest.importorskip("tensorflow")
    pytest.importorskip("xprof")
    from tfwb.tf.lab.profiler import profile

    return profile(CFG, steps=WINDOW, skip=SKIP, logdir=str(tmp_path_factory.mktemp("profile-logs")), top=8)


def trace_names(xplane: str) -> set:
    """Every event name in a capture (TF ops appear as ``name:type``)."""
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    space = xplane_pb2.XSpace()
    with open(xplane, "rb") as fh:
        space.ParseFromString(fh.read())
    return {m.name for plane in space.planes for m in plane.event_metadata.values()}


# -- a real capture -------------------------------------------------------------------------------------
def test_the_capture_is_the_window_after_warm_up_and_lives_in_the_logdir(report):
    warmup_calls = CFG.calls[0]
    assert report.result.ok, report.result.error
    assert [s.step for s in report.steps] == list(range(warmup_calls + SKIP, warmup_calls + SKIP + WINDOW))
    assert report.measured_index == tuple(range(SKIP, SKIP + WINDOW))
    assert os.path.getsize(report.xplane) > 0
    assert report.xplane.startswith(report.run_dir + os.sep) and report.run_dir.startswith(report.logdir)
    assert os.path.basename(report.run_dir) == "prof"
    # TensorBoard reads the same folder: scalars beside the capture.
    assert glob.glob(os.path.join(report.run_dir, "events.out.tfevents.*"))
    assert report.result.extras["profile"] == report.xplane
    assert report.hardware_type                       # e.g. CPU_ONLY


def test_top_ops_are_named_as_in_the_trace_and_ranked_by_self_time(report):
    names = trace_names(report.xplane)
    assert 1 <= len(report.top_ops) <= 8 and len(report.ops) > len(report.top_ops)
    for op in report.top_ops:
        assert any(n == op.name or n.startswith(op.name + ":") for n in names), op.name
        assert op.where in ("host", "device") and op.occurrences >= 1 and 0 < op.share <= 1
    times = [o.self_ms for o in report.ops]
    assert times == sorted(times, reverse=True) and "IDLE" not in {o.name for o in report.ops}
    for side in {o.where for o in report.ops}:
        ops = [o for o in report.ops if o.where == side and o.self_ms > 0]
        # Shares of one total per side (every op's, listed or not: xprof lists at most 500 ops).
        assert sum(o.share for o in ops) <= 1 + 1e-6
        per_ms = [o.share / o.self_ms for o in ops]
        assert per_ms == pytest.approx([per_ms[0]] * len(ops), rel=1e-3)
    from tfwb.tf.lab.profiler import op_types

    kinds = op_types(report.ops)
    assert sum(k.ops for k in kinds) == len(report.ops) and report.top_op_types == kinds[:8]
    assert [k.self_ms for k in kinds] == sorted((k.self_ms for k in kinds), reverse=True)


def test_the_profilers_step_times_agree_with_tfwbs_clock(report):
    ours_ms = [t * 1e3 for t in report.profiled_times_s]
    assert len(ours_ms) == WINDOW
    for step, ours in zip(report.steps, ours_ms):
        assert step.step_ms == pytest.approx(ours, rel=0.2, abs=1.0), (step, ours)
        assert step.input_ms + step.compute_ms + step.other_ms == pytest.approx(step.step_ms, rel=1e-6, abs=1e-6)
        assert min(step.input_ms, step.compute_ms, step.other_ms) >= 0
    assert sum(report.breakdown_pct.values()) == pytest.approx(100.0, abs=1e-6)
    # Both clocks time the same wait for the next batch (steps of ~0.25 s: Python's share is small).
    ours_input = sum(report.result.input_wait_s[i] for i in report.measured_index) / sum(report.profiled_times_s)
    assert report.profiler_input_fraction == pytest.approx(ours_input, abs=0.15)


def test_both_verdicts_are_given_for_the_same_steps(report):
    from tfwb.analysis import diagnosis

    assert "input" in report.profiler_verdict.lower()             # the profiler's own sentence
    waits = [report.result.input_wait_s[i] for i in report.measured_index]
    fraction = sum(waits) / sum(report.profiled_times_s)
    assert report.diagnosis.input_fraction == pytest.approx(fraction)
    assert report.diagnosis.verdict == diagnosis.input_verdict(fraction)
    assert report.verdicts() == (report.profiler_verdict, report.diagnosis.headline)


def test_the_report_shows_tables_and_a_chart(report):
    from tfwb.ui import charts

    page = report._repr_html_()
    assert html.escape(report.top_ops[0].name) in page and html.escape(report.profiler_verdict) in page
    assert page.count("<table") == 3 and report.xplane in page
    rows = report.breakdown_rows()
    assert [r[0] for r in rows] == ["input", "compute", "other", "step"]
    assert rows[3][1] == f"{report.step_ms:.2f}" and rows[3][3] == f"{report.tfwb_step_ms:.2f}"
    assert report.op_rows()[0][1] == report.top_ops[0].name
    assert report.op_rows("type")[0][1] == report.top_op_types[0].type
    assert report.top_ops[0].name in report.summary()
    assert charts.profile_png(report)[:4] == b"\x89PNG" and charts.profile_png(report, by="type")[:4] == b"\x89PNG"
    with pytest.raises(ValueError, match="by='ops'"):
        charts.profile_png(report, by="ops")
    assert set(report.to_dict()) >= {"breakdown_ms", "top_ops", "profiler_verdict", "tfwb_verdict", "xplane"}


def test_the_report_says_what_the_profiler_left_out(tmp_path):
    """Steps xprof dropped as incomplete, and a capture taken after many calls, are said in notes."""
    from tfwb.tf.lab.profiler import TRACED_CALLS_LIMIT, profile

    cfg = RunConfig(workload="mlp", size="small", data_source="memory", steps=8, warmup_steps=TRACED_CALLS_LIMIT)
    rep = profile(cfg, steps=6, skip=1, logdir=str(tmp_path))
    first = TRACED_CALLS_LIMIT + 1
    kept = [s.step for s in rep.steps]
    assert set(kept) <= set(range(first, first + 6))
    assert rep.measured_index == tuple(k - TRACED_CALLS_LIMIT for k in kept)
    assert any(f"{first} calls ran before the capture" in n for n in rep.notes)
    assert any(f"kept {len(kept)} of the 6 captured calls" in n for n in rep.notes) == (len(kept) < 6)
    assert all(html.escape(n) in rep._repr_html_() for n in rep.notes)


# -- bad requests fail before any work ---------------------------------------------------------------
def test_profiling_while_a_capture_runs_is_refused_before_any_work(tmp_path):
    import tensorflow as tf

    from tfwb.tf.lab.profiler import ProfilerSession, capture_running, profile

    started, never = Started(), tmp_path / "never"
    with ProfilerSession(str(tmp_path / "a")):
        with pytest.raises(RuntimeError, match="already running"):
            profile(CFG, steps=2, logdir=str(never), observers=[started])
    # A capture started with TensorFlow's own API counts too.
    tf.profiler.experimental.start(str(tmp_path / "b"))
    try:
        assert capture_running()
        with pytest.raises(RuntimeError, match="already running"):
            profile(CFG, steps=2, logdir=str(never), observers=[started])
    finally:
        tf.profiler.experimental.stop()
    assert not capture_running() and not started.started and not never.exists()


def test_an_unusable_logdir_is_refused_before_any_work(tmp_path):
    from tfwb.tf.lab.profiler import profile

    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    started = Started()
    with pytest.raises(ValueError, match=r"logdir=.*a-file/logs.* is not usable"):
        profile(CFG, steps=2, logdir=str(blocker / "logs"), observers=[started])
    with pytest.raises(ValueError, match="logdir=42"):
        profile(CFG, steps=2, logdir=42, observers=[started])
    assert not started.started


@pytest.mark.parametrize("kwargs, message", [
    ({"steps": 0}, "steps=0 is not allowed"),
    ({"steps": 2.0}, "steps=2.0 is not allowed"),
    ({"skip": -1}, "skip=-1 is not allowed"),
    ({"top": 0}, "top=0 is not allowed"),
    ({"steps": 5, "skip": 1}, r"steps=5 with skip=1 needs 6 measured calls, but cfg runs 5"),
])
def test_bad_windows_name_the_field_and_what_is_allowed(kwargs, message):
    from tfwb.tf.lab.profiler import profile

    with pytest.raises(ValueError, match=message):
        profile(CFG, **kwargs)


def test_multi_worker_is_refused_with_what_to_pick_instead():
    from tfwb.tf.lab.profiler import profile

    with pytest.raises(ValueError, match="strategy='multi_worker'.*'default' or 'mirrored'"):
        profile(CFG.replace(strategy="multi_worker"), steps=2)


def test_tfwb_profile_is_the_lazy_entry_point():
    import tfwb
    from tfwb.tf.lab.profiler import profile

    assert "profile" in tfwb.__all__ and tfwb.profile is profile


# -- reading xprof's tables (hand-made, in the shape xprof 2.24 writes) --------------------------------
def _table(cols, rows, p=None):
    return {"cols": [{"id": c} for c in cols], "rows": [{"c": [{"v": v} for v in r]} for r in rows], "p": p or {}}


def test_parse_steps_splits_each_step_into_input_compute_other():
    from tfwb.tf.lab.profiler import parse_steps, profiler_statement

    cols = ["stepnum", "deviceComputeTimeMs", "hostComputeTimeMs", "kernelLaunchTimeMs", "infeedTimeMs",
            "otherTimeMs", "stepTimeMs"]
    overview = [_table(["x"], []), _table(cols, [["train 7", 2.0, 4.0, 1.0, 10.0, 0.5, 18.0]],
                                          {"input_conclusion": "Your program is HIGHLY input-bound"})]
    (step,) = parse_steps(overview, steps_per_call=2)
    assert (step.step, step.step_ms, step.input_ms, step.compute_ms) == (7, 9.0, 5.0, 3.0)
    assert step.other_ms == pytest.approx(1.0)          # kernel launch, all others and the unaccounted rest
    assert profiler_statement(overview) == "Your program is HIGHLY input-bound"
    assert parse_steps([_table(["x"], [])]) == ()


def test_parse_ops_leaves_idle_out_and_shares_per_side():
    from tfwb.tf.lab.profiler import op_types, parse_ops

    cols = ["host_or_device", "type", "operation", "occurrences", "total_self_time"]
    stats = [_table(cols, [["Host", "IDLE", "IDLE", 0, 9000.0], ["Host", "MatMul", "a/MatMul", 5, 3000.0],
                           ["Host", "MatMul", "b/MatMul", 5, 1000.0], ["Device", "Conv2D", "c/Conv2D", 2, 500.0]])]
    ops = parse_ops(stats)
    assert [(o.name, o.where, o.self_ms, o.share) for o in ops] == [
        ("a/MatMul", "host", 3.0, 0.75), ("b/MatMul", "host", 1.0, 0.25), ("c/Conv2D", "device", 0.5, 1.0)]
    (matmul, conv) = op_types(ops)
    assert (matmul.type, matmul.self_ms, matmul.share, matmul.occurrences, matmul.ops) == ("MatMul", 4.0, 1.0, 10, 2)
    assert conv.ops == 1 and parse_ops([]) == ()


def test_shares_are_the_profilers_own_when_it_lists_only_some_ops():
    """xprof lists at most 500 ops; its percentages are of every op's self time, listed or not."""
    from tfwb.tf.lab.profiler import parse_ops

    cols = ["host_or_device", "type", "operation", "occurrences", "total_self_time", "host_total_self_time_percent"]
    (op,) = parse_ops([_table(cols, [["Host", "MatMul", "a/MatMul", 5, 3000.0, 0.6]])])
    assert op.share == 0.6
