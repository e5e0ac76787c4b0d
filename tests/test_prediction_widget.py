"""The prediction box (``tfwb.ask``) driven as a reader would, without a browser, and the calibration chart."""
from __future__ import annotations

import math

import pytest

pytest.importorskip("ipywidgets")
pytest.importorskip("matplotlib")

import tfwb  # noqa: E402
from tfwb import stats  # noqa: E402
from tfwb.history import History  # noqa: E402
from tfwb.prediction import Score, predict, predictions_path  # noqa: E402
from tfwb.scorecard import calibration  # noqa: E402
from tfwb.ui.charts.calibration import (RANGE_GID, calibration_png, calibration_points,  # noqa: E402
                                        draw_calibration)
from tfwb.ui.prediction_box import PredictionBox, factor_range, range_text, slider_position  # noqa: E402

EXPECTATION = "faster than the baseline: the next batch is prepared while the step runs"


def rounds(speedup: float, n: int = 8):
    """An interleaved comparison whose every round measured ``speedup``."""
    return stats.compare_rounds([speedup] * n, [1.0] * n)


def fill(box: PredictionBox, direction: str, between=None, confidence=0.8, why="") -> None:
    box.direction.value = direction
    if between is None:
        box.with_range.value = False
    else:
        box.range_slider.value = slider_position(direction, between)
    box.confidence.value = confidence
    box.why.value = why


def test_lock_in_freezes_the_controls_then_shows_the_book_and_scores_into_the_file(tmp_path):
    path = predictions_path(tmp_path / "ch00.jsonl")
    box = tfwb.ask("prefetch=True", EXPECTATION, path=path)
    assert box.state == "open" and EXPECTATION not in box.text()          # the book waits for the reader
    fill(box, "faster", (1.5, 3.0), 0.95, "overlap")
    assert box.range_label.value == "1.5x to 3x faster"
    box.lock_button.click()
    assert box.state == "locked" and all(c.disabled for c in box.controls)
    assert box.lock_button.description == "Locked in"
    assert box.prediction.text() == "faster, 1.5-3x (95 %)" and box.prediction.why == "overlap"
    assert box.prediction.about == "prefetch=True"
    assert f"The book: {EXPECTATION}" in box.text()
    box.direction.value = "slower"                # a late change (no front end stops it) is not the prediction
    box.lock_button.click()
    assert box.prediction.direction == "faster"
    score = box.score(rounds(4.0))
    assert box.state == "scored" and score is box.result and score.decided
    assert score.direction_right and not score.range_held
    assert f"Score: {score.text()}" in box.text() and "Measured: 4.00x faster (interleaved)" in box.text()
    kept = History(path, record=Score).load()                 # a new kernel reads it back
    assert kept == [score]
    assert calibration(tmp_path).coverage() == {0.95: (0, 1)}


def test_skip_shows_the_book_and_a_score_says_no_prediction_was_made(tmp_path):
    path = tmp_path / "p.jsonl"
    box = tfwb.ask("jit_compile=True", EXPECTATION, path=path)
    box.skip_button.click()
    assert box.state == "skipped" and box.prediction is None and all(c.disabled for c in box.controls)
    assert box.skip_button.description == "Skipped"
    assert f"The book: {EXPECTATION}" in box.text()
    box.lock_button.click()                        # disabled in a browser; a click from code does nothing either
    assert box.state == "skipped" and box.prediction is None
    assert box.score(rounds(0.5)) is None
    assert "No prediction made." in box.text() and "Measured: 2.00x slower (interleaved)" in box.text()
    assert History(path, record=Score).load() == []           # nothing kept


@pytest.mark.parametrize("verdict, measured", [
    (rounds(1.0), "no significant difference"),
    (stats.compare_rounds([2.0] * 3, [1.0] * 3), "too few"),
    (None, "no measurement"),
    ("not a comparison", "no measurement"),
])
def test_a_box_nobody_filled_in_is_scored_without_waiting_or_raising(verdict, measured):
    box = tfwb.ask("cache=True", None)
    assert box.score(verdict) is None
    text = box.text()
    assert box.state == "scored" and all(c.disabled for c in box.controls)
    assert "No prediction made." in text and "The book states no expectation" in text
    assert measured in text


def test_lock_in_without_a_direction_asks_for_one_and_stays_open():
    box = tfwb.ask("prefetch=True", EXPECTATION)
    box.lock_button.click()
    assert box.state == "open" and box.prediction is None and not box.lock_button.disabled
    assert "Choose faster, slower or no difference first" in box.text() and EXPECTATION not in box.text()
    fill(box, "no difference", (0.95, 1.05), 0.5)
    box.lock_button.click()
    assert box.prediction.text() == "no difference, 0.95-1.05x (50 %)"
    assert box.score(rounds(1.0)).direction_right


def test_the_slider_moves_between_scales_with_the_direction_and_the_range_can_be_left_out():
    box = tfwb.ask()
    box.direction.value = "no difference"
    s = box.range_slider
    assert box.between() == (0.95, 1.05) and box.range_label.value == "0.95x to 1.05x the speed"
    box.direction.value = "slower"
    assert box.between() == (1.5, 3.0) and box.range_label.value == "1.5x to 3x slower"
    box.range_slider.value = slider_position("slower", (2.0, 10.0))
    box.direction.value = "faster"                # the same scale: the reader's range stays
    assert box.between() == (2.0, 10.0)
    box.direction.value = "slower"
    assert (s.min, s.max) == (0.0, 1.0)           # only the value moves: a browser never clips it
    box.with_range.value = False
    assert box.range_slider.disabled and box.confidence.disabled and box.between() is None
    box.lock_button.click()
    assert box.prediction.text() == "slower" and box.prediction.between is None
    score = box.score(rounds(0.1))
    assert score.direction_right and score.range_held is None


def test_the_pure_helpers_read_the_log_slider_as_factors():
    assert factor_range("slower", slider_position("slower", (1.5, 3.0))) == (1.5, 3.0)
    assert factor_range("faster", (0.0, 1.0)) == (1.0, 100.0)
    assert factor_range("no difference", (0.0, 1.0)) == (0.63, 1.6)
    assert slider_position("faster", (0.5, 1000.0)) == (0.0, 1.0)      # outside the scale: to the nearest end
    assert range_text("slower", (2.0, 10.0)) == "2x to 10x slower"


def test_a_predictions_file_that_cannot_be_written_fails_at_construction(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    with pytest.raises(OSError, match=r"tfwb.ask\(path=.*a-file.*cannot be written"):
        tfwb.ask("prefetch=True", path=blocker / "p.jsonl")


def test_the_plain_text_shows_where_there_is_no_front_end():
    box = tfwb.ask("prefetch=True", EXPECTATION)
    bundle = box._repr_mimebundle_()
    assert bundle["text/plain"].startswith("Predict before it runs: prefetch=True")
    assert bundle["application/vnd.jupyter.widget-view+json"]["model_id"] == box.widget.model_id
    assert "tfwb-prediction" in box.widget._dom_classes


def test_the_chart_draws_one_bar_per_decided_prediction_with_a_range():
    from matplotlib.figure import Figure

    scores = [predict("faster", between=(1.5, 3.0), about="prefetch=True").score(rounds(2.0)),       # held
              predict("slower", between=(2.0, 5.0), about="jit_compile=True").score(rounds(0.02)),   # missed
              predict("no difference", between=(0.9, 1.1), about="cache=True").score(rounds(1.0)),  # held
              predict("faster", about="batch_size=256").score(rounds(3.0)),              # no range: not drawn
              predict("faster", between=(1.5, 3.0)).score(stats.compare_rounds([2.0] * 3, [1.0] * 3))]  # pending
    cal = calibration(scores)
    points, pending, without_range = calibration_points(cal)
    assert (len(points), pending, without_range) == (3, 1, 1)
    slower = next(p for p in points if p.label == "jit_compile")
    assert (slower.low, slower.high) == (pytest.approx(0.2), pytest.approx(0.5)) and not slower.held
    ax = Figure().subplots()
    assert draw_calibration(ax, cal) == 3
    ranges = [c for c in ax.collections if c.get_gid() == RANGE_GID]
    assert sum(len(c.get_segments()) for c in ranges) == 3
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    low, high = ax.get_xlim()
    assert low < 0.02 and high > 2.0 and math.isclose(low, ax.get_ylim()[0])
    assert "1 waiting for an interleaved comparison; 1 without a range" in ax.get_title(loc="left").replace("\n", " ")
    assert calibration_png(cal)[:4] == b"\x89PNG"
    empty = Figure().subplots()
    assert draw_calibration(empty, calibration(scores[3:])) == 0 and not empty.axison
    nothing = Figure().subplots()
    assert draw_calibration(nothing, calibration([])) == 0 and nothing.texts[0].get_text() == "No prediction yet."


def test_a_pending_score_is_followed_by_the_interleaved_decision(tmp_path):
    path = tmp_path / "p.jsonl"
    box = tfwb.ask("prefetch=True", EXPECTATION, path=path)
    fill(box, "faster", (1.5, 3.0))
    box.lock_button.click()
    busy = stats.compare([1.0 + 0.001 * i for i in range(9)], [0.5] * 9, other_cpu_pct=(30.0, 2.0))
    assert box.score(busy).pending and "not scored yet" in box.text()
    assert box.score(rounds(2.0)).range_held and "lies in the range" in box.text()
    assert len(History(path, record=Score).load()) == 2
    c = calibration(path)
    assert len(c.scores) == 1 and c.pending == 0 and c.coverage() == {0.8: (1, 1)}
    assert "tfwb-prediction-lock" in box.lock_button._dom_classes


# -- the Workbench's prediction of its next run (tfwb.ui.next_prediction) ----------------------------
import html as html_module  # noqa: E402
import re  # noqa: E402
from types import SimpleNamespace  # noqa: E402

from tests.fakes import make_result  # noqa: E402
from tfwb.config import RunConfig  # noqa: E402
from tfwb.render import html_table  # noqa: E402
from tfwb.ui.next_prediction import NextPrediction  # noqa: E402
from tfwb.ui.workbench import Workbench  # noqa: E402

BENCH_BASE = RunConfig(steps=6, warmup_steps=2)


def twice_as_fast_with_prefetch(cfg, observers=()):
    """A runner without TensorFlow: 50 ms steps with prefetch, 100 ms without."""
    return make_result(cfg, step_s=0.05 if cfg.prefetch else 0.10, jitter_s=0.001, n=cfg.steps)


def view_of(index, comparison, changes=None, reference=1):
    """A pushed RunView's last row, by hand: run ``index`` against run ``reference``."""
    versus = None if comparison is None else SimpleNamespace(comparison=comparison, reference=reference)
    return SimpleNamespace(rows=[SimpleNamespace(index=index, versus_previous=versus,
                                                 previous_changes=changes or {})])


def test_the_workbench_scores_the_readers_prediction_of_the_next_run_and_shows_it_in_the_history(tmp_path):
    history = tmp_path / "runs.jsonl"
    wb = Workbench(BENCH_BASE, runner=twice_as_fast_with_prefetch, hardware={"gpus": [], "cpu_count": 2},
                   history_path=history)
    nxt = wb.panel.next_prediction
    assert "tfwb-next-prediction" in nxt.widget._dom_classes
    assert nxt.widget in wb.widget.children
    wb.run()
    assert "your prediction" not in wb.history.value            # nobody predicted: no column
    wb.panel.controls["prefetch"].widget.value = True                  # the reader sets the knob, then predicts
    fill(nxt.box, "faster", (1.5, 3.0), why="the next batch is read while the step runs")
    nxt.box.lock_button.click()
    book = [line for line in nxt.box.lines() if line.startswith("The book: ")]
    assert book and "prefetch=True" in book[0]                          # the expectation of the knobs as set
    wb.run()
    table = wb.history.value
    assert "your prediction" in table
    assert re.search(r"faster, 1\.5-3x \(80 %\): right; 2\.0\dx faster lies in the range", html_module.unescape(table))
    kept = History(predictions_path(history), record=Score).load()
    assert [s.prediction.about for s in kept] == ["prefetch=True"]
    assert kept[0].direction_right and kept[0].range_held
    assert nxt.box.state == "open" and nxt.box.prediction is None      # a fresh box for the run after
    assert "Run 2" in nxt.last.value and "right" in nxt.last.value


def test_a_wrong_prediction_is_scored_wrong_and_one_without_a_verdict_waits_for_the_next_run():
    nxt = NextPrediction()
    fill(nxt.box, "slower", (1.5, 3.0))
    nxt.box.lock_button.click()
    assert nxt.on_view(view_of(1, None)) is None                        # the first run: nothing to compare
    assert nxt.waiting is not None and "waits for the next run" in nxt.last.value
    score = nxt.on_view(view_of(2, rounds(2.0), {"prefetch": True}))
    assert score is not None and score.direction_right is False and score.range_held is False
    assert nxt.column() == {2: "slower, 1.5-3x (80 %): wrong; 2.00x faster lies outside the range"}
    table = html_table([], predictions=nxt.column())                  # no rows: no table, column or not
    assert "No runs yet." in table


def test_a_skipped_or_unfilled_box_scores_nothing_and_never_blocks():
    nxt = NextPrediction(expectation=lambda: "faster: the input pipeline overlaps the step")
    assert nxt.on_view(view_of(2, rounds(2.0), {"prefetch": True})) is None      # unfilled
    assert nxt.box.state == "open" and nxt.column() == {}
    nxt.box.skip_button.click()
    assert "The book: faster: the input pipeline overlaps the step" in nxt.box.lines()
    assert nxt.on_view(view_of(3, rounds(2.0), {"prefetch": True})) is None      # skipped
    assert nxt.box.state == "open" and nxt.column() == {}


def test_a_cannot_tell_verdict_keeps_the_score_pending():
    nxt = NextPrediction()
    fill(nxt.box, "faster")
    nxt.box.lock_button.click()
    busy = stats.compare([1.0] * 9, [0.5] * 9, other_cpu_pct=(30.0, 2.0))
    score = nxt.on_view(view_of(2, busy, {"prefetch": True}))
    assert score is not None and score.pending and "not scored yet" in nxt.column()[2]
