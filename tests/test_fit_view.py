"""Tests of what a ``model.fit`` shows and records without Keras: the terminal line and the view's choice
(``tfwb.ui.fit_view``), the live SVG chart (``tfwb.ui.charts.live_svg``) and the pure result building
(``tfwb.fit_result``). The Monitor driving them inside a real fit is tests/test_keras_monitor.py."""
from __future__ import annotations

import io
import math

import pytest

from tfwb.config import RunConfig
from tfwb.fit_result import FitModel, FitRecord, error_text, with_view
from tfwb.render import monitor_line
from tfwb.records import RunResult, Sample
from tfwb.timing import CallTiming
from tfwb.ui import fit_view


def result(**kw) -> RunResult:
    return RunResult(config=RunConfig(label="tiny"), step_times_s=(0.002,) * 30, warmup_times_s=(0.05,),
                     **kw)


def test_no_view_when_asked_none_and_a_line_on_a_given_stream_or_a_terminal(monkeypatch):
    assert fit_view.make_view(False, io.StringIO()) is None
    assert isinstance(fit_view.make_view("auto", io.StringIO()), fit_view.LineView)
    assert not fit_view.in_kernel()
    monkeypatch.setattr("sys.stderr", io.StringIO())                   # no terminal: nothing shown
    assert fit_view.make_view("auto", None) is None

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.setattr("sys.stderr", Terminal())
    assert isinstance(fit_view.make_view("auto", None), fit_view.LineView)


def test_the_line_view_redraws_one_line_and_ends_it_with_the_closing_text():
    out = io.StringIO()
    view = fit_view.LineView(out)
    view.progress(3, 10)
    view.draw(result(), 5, None)
    view.progress(10, 10, final=result())
    text = out.getvalue()
    assert text.startswith("\rfit: step 3/10\rtiny: step 5, median step 2.00 ms\r")
    assert text.endswith(monitor_line(result()) + "\n") and text.count("\n") == 1


def test_the_live_chart_is_svg_text_with_at_most_live_points_a_curve():
    pytest.importorskip("matplotlib")                 # the charts' colours live beside matplotlib's charts
    from tfwb.ui.charts.live_svg import LIVE_POINTS, live_svg, thin

    samples = tuple(Sample(t_s=0.1 * i, cpu_process_pct=50.0, cpu_system_pct=60.0) for i in range(3 * LIVE_POINTS))
    svg = live_svg(result(samples=samples)).decode()
    assert svg.startswith("<svg") and svg.endswith("</svg>") and "tiny: ms per step of each call (30 measured)" in svg
    assert "median 2.00 ms" in svg and "warm-up" in svg
    assert max(p.split('"')[0].count(",") for p in svg.split('points="')[1:]) == LIVE_POINTS
    assert thin([1, 2, 3], [4, 5, 6], most=5) == ([1, 2, 3], [4, 5, 6])


def test_a_record_builds_the_fits_result_from_its_settled_calls():
    record = FitRecord(2, 1, label=None, run_id="r1")
    record.first_batch = 16
    calls = [CallTiming(0.1 * i, 0.1, 0.1, steps=2 if i < 4 else 1, epoch=0, end_step=2 * i + 1,
                        window=1 + (i + 1) // 2) for i in range(5)]   # the warm-up call alone, as Monitor closes it
    record.running_loss.update({(0, 2 * i + 1): 1.0 for i in range(5)})
    model = FitModel(name="tiny", optimizer="adam", learning_rate=0.01)
    r = record.build(calls, model, status="ok", stop_reason=None, clock=lambda: 1.0, samples=(), total=None,
                     fingerprint=lambda cfg: {"config": cfg.to_dict()})
    assert r.config.workload == "fit:tiny" and r.config.label == "tiny" and r.config.batch_size == 16
    assert r.config.optimizer == "adam" and r.steps_per_call == 2 and r.run_id == "r1"
    assert len(r.warmup_times_s) == 1 and len(r.step_times_s) == 3 and r.window_calls == (2, 1)
    assert any("1 call(s) at an epoch's end ran fewer steps" in n for n in r.notes_of("steps"))
    assert r.extras["wall_steps"] == 7 and r.fingerprint["config"]["workload"] == "fit:tiny"
    partial = record.build(calls, model, status="ok", stop_reason=None, clock=lambda: 1.0, samples=(),
                           total=None, partial=True)
    assert partial.fingerprint == {} and "wall_steps" not in partial.extras and not partial.losses


def test_the_batch_says_where_it_came_from():
    record = FitRecord(1, 0)
    assert record.batch() == (None, "other: batch_size unknown (Keras counted no examples); pass "
                                    "Monitor(batch_size=...)")
    record.epoch_examples = (330, 10)
    assert record.batch()[0] == 33 and "estimated from the 330 examples" in record.batch()[1]
    record.batch_size = 64
    assert record.batch() == (64, None)


def test_failure_texts_and_the_views_note():
    assert error_text(ValueError("\x1b[1mbad\x1b[0m input")) == "ValueError: bad input"
    assert len(error_text(ValueError("x" * 5000))) == 2000
    r = with_view(result(), view_s=0.3, wall_s=10.0, charts=2, updates=5, shown=True, share=0.03)
    assert r.extras["view_share"] == pytest.approx(0.03) and r.extras["view_charts"] == 2
    assert r.notes_of("other")[-1] == (
        "other: the live view took 0.30 s, 3.0 % of the fit's 10.0 s (2 chart(s), 5 progress update(s)); it "
        "draws a chart only while that keeps it within 3 % of the fit's time (tfwb.keras.monitor.VIEW_SHARE)")
    quiet = with_view(result(), view_s=0.0, wall_s=10.0, charts=0, updates=0, shown=False, share=0.03)
    assert quiet.notes == result().notes and not math.isnan(quiet.extras["view_share"])
