"""Issue 34 (every "cannot tell" is one click from an answer): interleaved verdicts kept per pair of
configurations (tfwb.analysis.decisions), shown by the rows instead of the separate-run verdict
(Versus.decided, Analysis.decided), and a busy baseline that gives way to a quiet run of its configuration.

Pure: hand-made RunResults and RoundsComparisons, no TensorFlow, no widgets.
"""
import pytest

from tfwb import stats
from tfwb.analysis.decisions import Decisions, per_example_rounds, swapped
from tfwb.analysis.rows import history_rows, pick_baseline
from tfwb.analysis.session import Analysis
from tfwb.config import RunConfig
from tfwb.records import RunResult

A, B = RunConfig(steps=9), RunConfig(steps=9, cache=True)


def run(cfg, ms, load=2.0):
    """A finished run of ``cfg``: 9 steps of about ``ms`` ms, other programs using ``load`` % of the CPU."""
    times = tuple(ms / 1e3 * (1 + 0.01 * (i % 3)) for i in range(9))
    return RunResult(config=cfg, step_times_s=times, extras={"other_cpu_pct": load})


def rounds(speedup, n=6):
    """A hand-made interleaved comparison: the candidate ``speedup`` x faster in each of ``n`` rounds."""
    base = [0.1 * (1 + 0.01 * i) for i in range(n)]
    return stats.compare_rounds(base, [t / speedup for t in base], method="hand-made rounds")


def test_a_busy_pair_cannot_tell_until_an_interleaved_verdict_decides_it_and_every_view_shows_it():
    a = Analysis()
    views = []
    a.subscribe(views.append)
    runs = [run(A, 100), run(B, 25, load=16.0)]             # 4x faster, but the machine was busy
    before = a.push(runs)
    assert before.versus_previous == stats.CANNOT_TELL_BUSY and before.undecided() == ("previous",)
    assert before.row.versus_previous.decided is None
    after = a.decided(A, B, rounds(3.78))
    assert views == [before, after] and after is not before                 # pushed again
    v = after.row.versus_previous
    assert v.comparison.verdict == stats.CANNOT_TELL_BUSY                  # the separate runs' verdict stays
    assert v.decided.verdict == stats.FASTER and v.kind == stats.FASTER    # ... but the interleaved one counts
    assert v.speedup == pytest.approx(3.78) and after.row.speedup == pytest.approx(3.78)
    assert after.versus_previous == stats.FASTER and after.undecided() == ()
    assert a.decision(A, B) is v.decided and a.decision(A, A) is None


def test_the_reversed_pair_gets_the_ratio_inverted_and_labels_do_not_matter():
    a = Analysis()
    runs = [run(A, 100), run(B, 25, load=16.0), run(A.replace(label="again"), 100, load=30.0)]
    a.push(runs)
    view = a.decided(A.replace(label="knobs off"), B, rounds(4.0))
    back = view.row.versus_previous                        # run 3 (A) against run 2 (B): the other way round
    assert back.reference == 2 and back.kind == stats.SLOWER and back.speedup == pytest.approx(0.25)
    assert back.decided.faster_rounds == 0 and back.decided.rounds == 6
    assert view.rows[1].versus_previous.kind == stats.FASTER       # run 2 against run 1 still says faster


def test_a_later_verdict_of_the_pair_replaces_the_earlier_one_either_way_round():
    d = Decisions()
    d.record(A, B, rounds(2.0))
    d.record(B, A, rounds(1.5))                            # measured again, the other way round
    assert len(d) == 1 and d.get(B, A).speedup == pytest.approx(1.5)
    assert d.get(A, B).verdict == stats.SLOWER and d.get(A, B).speedup == pytest.approx(1 / 1.5)


def test_swapping_a_comparison_without_round_times_inverts_its_interval():
    hand = stats.RoundsComparison(speedup=2.0, low=1.6, high=2.5, coverage=0.97, rounds=8, faster_rounds=7,
                                  p_value=0.07, verdict=stats.NO_DIFFERENCE)
    s = swapped(hand)
    assert (s.speedup, s.low, s.high, s.faster_rounds, s.verdict) == (0.5, 0.4, 0.625, 1, stats.NO_DIFFERENCE)
    faster = stats.RoundsComparison(speedup=2.0, low=1.6, high=2.5, coverage=0.97, rounds=6, faster_rounds=6,
                                    p_value=0.03, verdict=stats.FASTER)
    assert swapped(faster).verdict == stats.SLOWER


def test_pairs_with_different_batches_are_decided_per_example():
    small, large = RunConfig(steps=9, batch_size=64), RunConfig(steps=9, batch_size=128)
    runs = [run(small, 100), run(large, 150, load=16.0)]   # per step 1.5x slower, per example 1.33x faster
    a = Analysis()
    a.push(runs)
    v = a.decided(small, large, rounds(1 / 1.5)).row.versus_previous
    assert v.per_example and v.kind == stats.FASTER and v.speedup == pytest.approx(4 / 3)
    assert "per example" in v.decided.method
    hand = stats.RoundsComparison(speedup=2.0, low=1.6, high=2.5, coverage=0.97, rounds=6, faster_rounds=6,
                                  p_value=0.03, verdict=stats.FASTER)
    assert per_example_rounds(hand, (128, 64)) is None    # no round times to divide: not shown per step


def test_bad_input_to_a_decision_names_what_is_allowed():
    d = Decisions()
    with pytest.raises(ValueError, match="RoundsComparison, got float"):
        d.record(A, B, 3.78)
    with pytest.raises(ValueError, match="two RunConfigs, got dict"):
        d.record(A, {"cache": True}, rounds(2.0))
    with pytest.raises(ValueError, match="against='best' is not allowed; allowed: 'previous', 'baseline'"):
        Analysis().push([run(A, 100)]).versus("best")


def test_decided_before_any_push_is_kept_for_the_first_rows():
    a = Analysis()
    assert a.decided(A, B, rounds(2.0)) is None
    view = a.push([run(A, 100, load=20.0), run(B, 50)])
    assert view.row.versus_baseline.decided is not None and view.versus_baseline == stats.FASTER


def test_a_busy_baseline_gives_way_to_the_last_quiet_run_of_its_configuration():
    busy_base = run(A, 100, load=16.0)                     # drawn while the browser drew the widget
    other = run(B, 50)
    quiet1, quiet2 = run(A.replace(label="again"), 101), run(A, 99)
    assert pick_baseline([busy_base, other]) is busy_base               # nothing quiet to stand in
    assert pick_baseline([busy_base, other, quiet1, quiet2]) is quiet2
    assert pick_baseline([busy_base, other, quiet1], A) is quiet1
    assert pick_baseline([run(A, 100), other, quiet2]).config == A       # a quiet baseline stays the first
    rows = history_rows([busy_base, other, quiet2])
    assert [r.is_baseline for r in rows] == [False, False, True]
    assert rows[1].versus_baseline.reference == 3 and rows[1].comparison == stats.FASTER


def test_a_repeat_of_one_configuration_is_decided_too():
    """Issue 34: every "cannot tell" is one click from an answer, an A/A pair's as well (the browser benchmark
    clicked Decide on repeats of one configuration and nothing changed)."""
    d = Decisions()
    same = stats.compare_rounds([0.2] * 10, [0.2 + 0.001 * (-1) ** i for i in range(10)], method="fake")
    d.record(RunConfig(label="a"), RunConfig(label="b"), same)
    assert d.get(RunConfig(), RunConfig()) is same and same.verdict == stats.NO_DIFFERENCE
