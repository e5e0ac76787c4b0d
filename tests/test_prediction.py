"""Predict, then measure: a reader's prediction scored against hand-made verdicts, kept, summed up."""
from __future__ import annotations

import math

import pytest

import tfwb
from tfwb import stats
from tfwb.history import History
from tfwb.prediction import Score, interval_score, predict, predictions_path
from tfwb.scorecard import calibration


def rounds(speedup: float, n: int = 8):
    """An interleaved comparison whose every round measured ``speedup`` (decided unless it is 1)."""
    return stats.compare_rounds([speedup] * n, [1.0] * n)


def separate(speedup: float, **kw):
    """Two separate runs of 9 steps whose medians differ by ``speedup``."""
    base = [1.0 + 0.001 * i for i in range(9)]
    return stats.compare(base, [t / speedup for t in base], **kw)


@pytest.mark.parametrize("direction, measured, right", [
    ("faster", 2.0, True), ("faster", 0.5, False), ("slower", 0.5, True), ("slower", 2.0, False),
    ("no difference", 1.0, True), ("no difference", 2.0, False), ("faster", 1.0, False),
])
def test_the_direction_is_right_only_against_its_own_verdict(direction, measured, right):
    verdict = separate(measured) if measured == 1.0 else rounds(measured)
    assert verdict.verdict in (stats.FASTER, stats.SLOWER, stats.NO_DIFFERENCE)
    s = predict(direction).score(verdict)
    assert s.decided and s.direction_right is right
    assert s.range_held is None and s.interval_score is None        # no range stated: nothing to score


@pytest.mark.parametrize("direction, between, measured, held", [
    ("faster", (1.5, 3.0), 2.0, True), ("faster", (1.5, 3.0), 4.0, False), ("faster", (1.5, 3.0), 1.2, False),
    ("slower", (2.0, 5.0), 1 / 3, True), ("slower", (2.0, 5.0), 1 / 10, False),
    ("no difference", (0.9, 1.1), 1.05, True),
])
def test_a_range_holds_the_measured_factor_in_its_own_direction(direction, between, measured, held):
    s = predict(direction, between=between, confidence=0.8).score(rounds(measured))
    assert s.range_held is held
    width = math.log(between[1]) - math.log(between[0])
    if held:
        assert s.interval_score == pytest.approx(width)
    else:
        assert s.interval_score > width


def test_a_miss_costs_more_the_surer_the_reader_was():
    verdict = rounds(4.0)                          # measured 4x: outside 1.5-3x by log(4/3)
    at = {c: predict("faster", between=(1.5, 3.0), confidence=c).score(verdict).interval_score
          for c in (0.5, 0.8, 0.95)}
    width, miss = math.log(2.0), math.log(4.0 / 3.0)
    assert at[0.5] == pytest.approx(width + 2 / 0.5 * miss)
    assert at[0.95] == pytest.approx(width + 2 / 0.05 * miss)
    assert at[0.5] < at[0.8] < at[0.95]
    assert interval_score(0.0, 1.0, -1.0, 0.5) == pytest.approx(5.0)      # below the range: same penalty


@pytest.mark.parametrize("verdict", [
    separate(3.0, other_cpu_pct=(25.0, 2.0)),           # cannot tell: the machine was busy
    stats.compare([1.0, 1.1], [0.5, 0.6]),               # too few steps to tell
    stats.compare_rounds([2.0] * 3, [1.0] * 3),          # too few rounds to tell
])
def test_a_verdict_that_cannot_decide_is_not_a_miss(verdict):
    assert verdict.verdict not in (stats.FASTER, stats.SLOWER, stats.NO_DIFFERENCE)
    s = predict("slower", between=(1.5, 2.0)).score(verdict)
    assert s.pending and s.direction_right is None and s.range_held is None and s.interval_score is None
    assert "not scored yet" in s.text()


def test_the_interleaved_decision_replaces_a_pending_score_in_the_calibration():
    p = predict("faster", between=(1.5, 3.0), about="cache=True")
    first = p.score(separate(3.0, other_cpu_pct=(25.0, 2.0)))
    later = p.score(rounds(2.0))
    assert later.interleaved and not first.interleaved
    c = calibration([first, later])
    assert len(c.scores) == 1 and c.pending == 0 and c.hit_rate == 1.0


@pytest.mark.parametrize("field, kwargs, says", [
    ("direction", dict(direction="quicker"), "direction='quicker': must be one of"),
    ("between", dict(direction="faster", between=(0.5, 2.0)), "each at least 1"),
    ("between", dict(direction="faster", between=(3.0, 1.5)), "0 < low <= high"),
    ("between", dict(direction="faster", between="fast"), "two ratios"),
    ("confidence", dict(direction="faster", confidence=80), "confidence=80: must be a number between 0 and 1"),
])
def test_bad_input_names_the_field_the_value_and_what_is_allowed(field, kwargs, says):
    direction = kwargs.pop("direction")
    with pytest.raises(ValueError, match=field) as e:
        predict(direction, **kwargs)
    assert says in str(e.value)


def test_predictions_survive_a_torn_record_and_a_restart(tmp_path):
    path = predictions_path(tmp_path / "runs.jsonl")
    store = History(path, record=Score)
    kept = [predict("faster", between=(1.2, 2.0), about="prefetch=True", why="overlap").score(rounds(1.5)),
            predict("slower", about="mixed_precision='mixed_float16'").score(rounds(0.1))]
    store.append(kept[0])
    with open(path, "ab") as fh:                     # a kernel died mid-write
        fh.write(kept[1].to_json().encode()[:40])
    store.append(kept[1])
    again = History(path, record=Score)              # a new kernel
    assert again.load() == kept
    assert len(again.skipped) == 1 and "not a Score" in again.skipped[0][1]     # the torn line alone
    with pytest.raises(TypeError, match="must be a Score"):
        store.append(kept[0].prediction)
    c = tfwb.calibration(tmp_path)                   # a folder: every predictions file under it
    assert len(c.scores) == 2 and c.hit_rate == 1.0 and c.coverage() == {0.8: (1, 1)}


def test_calibration_counts_misses_per_knob_and_mechanism_and_coverage_per_confidence():
    scores = [predict("faster", between=(1.5, 3.0), confidence=0.5, about="prefetch=True").score(rounds(4.0)),
              predict("faster", between=(1.1, 1.5), confidence=0.95, about="jit_compile=True").score(rounds(0.5)),
              predict("faster", about="mixed_precision='mixed_float16'").score(rounds(0.01)),
              predict("no difference", about="cache=True").score(rounds(1.0))]
    c = tfwb.calibration(scores)
    assert c.hit_rate == pytest.approx(2 / 4)
    assert c.coverage() == {0.5: (0, 1), 0.95: (0, 1)}
    assert c.misses() == {"jit_compile": 1, "mixed_precision": 1}
    assert sum(c.misses_by_mechanism().values()) == 2
    assert "Direction right in 2 of 4 (50 %)" in c.text()
    with pytest.raises(TypeError, match="Score records"):
        tfwb.calibration([scores[0].prediction])
