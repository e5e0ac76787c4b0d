"""Tests of tfwb.stats: robust statistics and the noise-aware comparison."""
from __future__ import annotations

import math
import random
import statistics

import numpy as np
import pytest

from tfwb import stats
from tfwb.stats import Spread, compare


def _random_lists():
    rng = random.Random(1234)
    out = []
    for n in (1, 2, 3, 4, 5, 7, 10, 33, 100):
        for _ in range(4):
            out.append([rng.uniform(-5, 50) for _ in range(n)])
    out.append([rng.choice([1.0, 2.0, 2.0, 3.0]) for _ in range(40)])   # ties
    out.append([rng.lognormvariate(0, 2) for _ in range(50)])          # heavy tail
    return out


@pytest.mark.parametrize("values", _random_lists())
def test_quantile_matches_numpy_linear(values):
    for q in (0.0, 0.05, 0.25, 1 / 3, 0.5, 0.75, 0.9, 0.99, 1.0):
        assert stats.quantile(values, q) == pytest.approx(
            float(np.percentile(values, q * 100, method="linear")), rel=1e-12, abs=1e-12)


def test_quantile_does_not_depend_on_order():
    values = [5.0, 1.0, 4.0, 2.0, 3.0]
    assert stats.quantile(values, 0.3) == stats.quantile(sorted(values), 0.3) == pytest.approx(2.2)


@pytest.mark.parametrize("q", [-0.01, 1.01, 50])
def test_quantile_rejects_q_outside_unit_interval(q):
    with pytest.raises(ValueError, match="q="):
        stats.quantile([1.0, 2.0], q)


@pytest.mark.parametrize("values", [[], [1.0, math.nan]])
def test_empty_or_nan_input_raises(values):
    for fn in (stats.median, stats.iqr, stats.mad):
        with pytest.raises(ValueError):
            fn(values)


def test_median_iqr_mad_on_known_lists():
    assert stats.median([3, 1, 2]) == 2
    assert stats.median([4, 1, 3, 2]) == 2.5
    assert stats.median([7]) == 7
    assert stats.iqr([1, 2, 3, 4, 5]) == (2, 4)
    assert stats.iqr([1, 2, 3, 4]) == (1.75, 3.25)
    assert stats.mad([1, 2, 3, 4, 100]) == 1          # deviations 2 1 0 1 97
    assert stats.mad([5, 5, 5]) == 0
    assert stats.mad([1, 1, 2, 2, 4, 6, 9]) == 1      # median 2; deviations 1 1 0 0 2 4 7


def test_percentiles_keys_and_values():
    values = list(range(101))
    assert stats.percentiles(values) == {5: 5, 25: 25, 50: 50, 75: 75, 95: 95}
    assert stats.percentiles(values, (10, 90)) == {10: 10, 90: 90}


def test_spread_of_and_overlap():
    s = Spread.of([1, 2, 3, 4, 5])
    assert (s.median, s.q1, s.q3, s.n) == (3, 2, 4, 5)
    assert s.overlaps(Spread.of([3, 4, 5, 6, 7]))        # IQRs 2..4 and 4..6 share 4
    assert not s.overlaps(Spread.of([4, 5, 6, 7, 8]))    # IQR 5..7
    assert not s.overlaps(Spread.of([10, 11, 12, 13, 14]))
    assert Spread.of([10, 11, 12, 13, 14]).overlaps(s) is False


def _steps(centre, n=20, jitter=0.02, seed=0):
    rng = random.Random(seed)
    return [centre * (1 + rng.uniform(-jitter, jitter)) for _ in range(n)]


def test_compare_clearly_faster():
    c = compare(_steps(0.100, seed=1), _steps(0.050, seed=2))
    assert c.verdict == "faster"
    assert c.significant
    assert c.speedup == pytest.approx(2.0, rel=0.05)


def test_compare_clearly_slower():
    c = compare(_steps(0.050, seed=1), _steps(0.150, seed=2))
    assert c.verdict == "slower"
    assert c.significant
    assert c.speedup == pytest.approx(1 / 3, rel=0.05)


def test_compare_overlapping_is_no_significant_difference():
    base = [0.10, 0.12, 0.11, 0.13, 0.10, 0.12, 0.11, 0.14]
    cand = [0.105, 0.115, 0.125, 0.11, 0.12, 0.13, 0.1, 0.118]
    c = compare(base, cand)
    assert c.verdict == "no significant difference"
    assert not c.significant
    assert c.speedup == pytest.approx(stats.median(base) / stats.median(cand))


def test_compare_small_medians_difference_inside_noise_is_not_a_win():
    # Medians differ by 10 %, but the spreads overlap: noise, not a speedup.
    base = [1.0, 1.5, 2.0, 2.5, 3.0, 1.8, 2.2]
    cand = [0.9, 1.3, 1.8, 2.3, 2.8, 1.7, 2.0]
    assert compare(base, cand).verdict == "no significant difference"


@pytest.mark.parametrize("nb, nc", [(4, 20), (20, 4), (1, 1)])
def test_compare_too_few_steps(nb, nc):
    c = compare([1.0] * nb, [0.1] * nc)
    assert c.verdict == "too few steps to tell"
    assert not c.significant
    assert c.speedup == pytest.approx(10.0)


def test_compare_at_exactly_min_steps_decides():
    assert stats.MIN_STEPS_TO_COMPARE == 5
    assert compare([2.0] * 5, [1.0] * 5).verdict == "faster"


@pytest.mark.parametrize("base, cand", [([0.0] * 5, [1.0] * 5), ([1.0] * 5, [0.0] * 5),
                                        ([1.0] * 5, [-1.0] * 5)])
def test_compare_zero_or_negative_median_raises(base, cand):
    with pytest.raises(ValueError, match="positive"):
        compare(base, cand)


def test_compare_empty_raises():
    with pytest.raises(ValueError):
        compare([], [1.0] * 5)


@pytest.mark.parametrize("base, cand, text", [
    ([2, 2, 2, 2, 2], [1, 1, 1, 1, 1], "2.00x faster"),
    ([1, 1, 1, 1, 1], [2, 2, 2, 2, 2], "2.00x slower"),
    ([1.42] * 6, [1.0] * 6, "1.42x faster"),
    ([1.0] * 6, [4.0] * 6, "4.00x slower"),
    ([1.0, 1.1, 1.2, 1.3, 1.4], [1.03, 1.13, 1.23, 1.33, 1.43], "1.03x slower: no significant difference"),
    ([2.0] * 3, [1.0] * 3, "2.00x faster: too few steps to tell"),
])
def test_text_exact(base, cand, text):
    assert compare(base, cand).text() == text


# -- run-to-run noise: the band two single runs must leave ---------------------------------

def _run(centre, seed, n=40, jitter=0.02):
    """One run's steps: tight within the run (±2 %), centred where the machine put it."""
    return _steps(centre, n=n, jitter=jitter, seed=seed)


def test_identical_runs_with_a_run_level_offset_inside_the_band_are_no_difference():
    # Drift between runs moves the whole run by 6 %: the IQRs are far apart, yet it is noise.
    base, cand = _run(0.100, seed=1), _run(0.106, seed=2)
    assert not Spread.of(base).overlaps(Spread.of(cand))                 # the old rule's false alarm
    c = compare(base, cand)
    assert c.verdict == "no significant difference" and not c.significant and c.within_noise
    assert c.text() == "1.06x slower: no significant difference (within \u00b110 % run-to-run noise)"


def test_a_15_percent_shift_beyond_the_band_is_detected_both_ways():
    assert compare(_run(0.100, seed=1), _run(0.115, seed=2)).verdict == "slower"
    assert compare(_run(0.115, seed=1), _run(0.100, seed=2)).verdict == "faster"
    assert compare(_run(0.100, seed=1), _run(0.115, seed=2)).text() == "1.15x slower"


def test_false_alarm_rate_on_synthetic_drift_is_low_and_detection_high():
    # Many A/A pairs whose run-level offsets scatter within ±6 % (inside the default
    # band) and A/B pairs with a 15 % change on top of the same drift.
    rng = random.Random(7)
    alarms = detections = 0
    trials = 200
    for t in range(trials):
        offset_a, offset_b = (1 + rng.uniform(-0.03, 0.03) for _ in range(2))
        base = _run(0.1 * offset_a, seed=3 * t)
        same = _run(0.1 * offset_b, seed=3 * t + 1)
        slower = _run(0.115 * offset_b, seed=3 * t + 2)
        alarms += compare(base, same).significant
        detections += compare(base, slower).verdict == "slower"
    assert alarms == 0
    assert detections / trials >= 0.9


def test_compare_with_a_learned_band_says_whose_noise_it_is():
    band = stats.learn_noise([[0.100, 0.101, 0.099, 0.100]])
    assert band.learned and band.runs == 4 and band.dof == 3
    s = statistics.stdev(math.log(v) for v in [0.100, 0.101, 0.099, 0.100])
    assert band.pct == pytest.approx(100 * math.expm1(3.182 * math.sqrt(2) * s))
    c = compare(_run(0.100, seed=1), _run(0.1015, seed=2, jitter=0.001), noise=band)
    assert c.verdict == "no significant difference"
    assert "this machine's" in c.text()
    assert compare(_run(0.100, seed=1, jitter=0.001), _run(0.108, seed=2, jitter=0.001),
                   noise=band).verdict == "slower"


def test_learn_noise_pools_groups_with_students_t():
    groups = [[0.100, 0.110], [0.200, 0.220, 0.210], [0.5]]       # the single run adds nothing
    logs = [[math.log(v) for v in g] for g in groups[:2]]
    ss = sum(sum((x - sum(g) / len(g)) ** 2 for x in g) for g in logs)
    s = math.sqrt(ss / 3)                                          # dof = 1 + 2
    band = stats.learn_noise(groups)
    assert (band.runs, band.dof) == (5, 3)
    assert band.pct == pytest.approx(100 * math.expm1(3.182 * math.sqrt(2) * s))


@pytest.mark.parametrize("groups", [[], [[0.1]], [[0.1, 0.2]], [[0.1, 0.2], [0.3]]])
def test_learn_noise_falls_back_to_the_default_with_too_little(groups):
    assert stats.learn_noise(groups) is stats.DEFAULT_NOISE
    assert not stats.DEFAULT_NOISE.learned


def test_learn_noise_rejects_non_positive_times():
    with pytest.raises(ValueError, match="positive"):
        stats.learn_noise([[0.1, 0.0, 0.1]])


def test_noise_band_contains_is_symmetric_in_ratio():
    band = stats.NoiseBand(10.0)
    assert band.contains(1.1) and band.contains(1 / 1.1) and band.contains(1.0)
    assert not band.contains(1.11) and not band.contains(1 / 1.11)
    assert band.text().startswith("\u00b110 % (the default")
    assert stats.NoiseBand(8.4, runs=5, dof=4).text() == "\u00b18 % (learned from 5 identical runs)"


# -- other programs' CPU use ---------------------------------------------------------------

HINT = "compare the two configurations interleaved (tfwb.compare_interleaved) to decide"


@pytest.mark.parametrize("loads", [(10.0, 50.0), (50.0, 2.0), (12.0, 12.0)])
@pytest.mark.parametrize("candidate_s", [0.080, 0.180, 0.300])
def test_a_busy_run_cannot_tell_whatever_the_ratio(loads, candidate_s):
    """Issue 26: two separate runs during which other programs used the CPU never say faster or
    slower, in either direction and however large the ratio; they point to the interleaved comparison."""
    c = compare(_run(0.100, seed=1), _run(candidate_s, seed=2), other_cpu_pct=loads)
    assert c.verdict == stats.CANNOT_TELL_BUSY and not c.significant
    assert c.text().endswith(f"(other programs used {loads[0]:.0f} % of the CPU during the baseline, "
                             f"{loads[1]:.0f} % during this run); {HINT}")
    assert "faster" not in c.text().split(":")[1] and "slower" not in c.text().split(":")[1]


@pytest.mark.parametrize("loads", [None, (None, 40.0), (2.0, 9.0)])
def test_unknown_or_quiet_load_leaves_the_verdict_alone(loads):
    assert compare(_run(0.100, seed=1), _run(0.150, seed=2), other_cpu_pct=loads).verdict == "slower"


def test_a_run_that_drifted_beyond_the_band_cannot_tell():
    steady = [0.100] * 12
    drifting = [0.100] * 8 + [0.130] * 4            # its last third 30 % slower than its first
    c = compare(steady, drifting)
    assert c.verdict == stats.CANNOT_TELL_DRIFT and c.drift == (pytest.approx(1.0), pytest.approx(1.3))
    assert c.text().endswith(f"(1.30x slower from its first third to its last (this run)); {HINT}")
    assert compare(steady, [0.100] * 8 + [0.105] * 4).verdict == stats.NO_DIFFERENCE   # within the band
    assert stats.drift_of([0.1] * 8) is None


# -- alternating rounds ----------------------------------------------------------------------

def test_sign_test_and_median_ci_agree():
    for n in range(6, 31):
        ratios = list(range(1, n + 1))
        low, high, coverage = stats.median_ci(ratios)
        assert coverage >= 0.95 or n < 6
        k = int(low)                                  # CI = [x_(k), x_(n-k+1)]
        assert high == n - k + 1
        # "all of the CI above 1" needs n-k+1 rounds above 1: the sign test's 5 % cut.
        assert stats.sign_test_p(n - k + 1, n) <= 0.05 < stats.sign_test_p(n - k, n)


def _rounds(ratio, n, noise, seed, drift=0.0):
    rng = random.Random(seed)
    base, cand = [], []
    for i in range(n):
        level = 0.1 * (1 + drift * math.sin(i / 3))             # the machine drifts...
        base.append(level * (1 + rng.gauss(0, noise)))
        cand.append(level * ratio * (1 + rng.gauss(0, noise)))   # ...under both alike
    return base, cand


def test_rounds_under_drift_call_identical_configs_no_difference_and_find_15_percent():
    alarms = hits = 0
    for seed in range(200):
        alarms += stats.compare_rounds(*_rounds(1.0, 30, 0.04, seed, drift=0.4)).significant
        hits += stats.compare_rounds(*_rounds(1.15, 30, 0.04, 1000 + seed, drift=0.4)).verdict == "slower"
    assert alarms <= 0.05 * 200 * 1.5          # the sign test's level is 4.3 % at 30 rounds
    assert hits == 200


def test_compare_rounds_text_and_fields():
    c = stats.compare_rounds([1.0] * 10, [1.16, 1.15, 1.2, 1.1, 1.17, 1.16, 1.14, 1.15, 1.18, 1.2],
                             method="test")
    assert c.verdict == "slower" and c.significant and c.faster_rounds == 0 and c.rounds == 10
    assert c.ratio == pytest.approx(1.16)
    assert c.text() == "1.16x slower (98 % CI 1.14-1.20x; slower in 10 of 10 rounds)"
    assert c.method == "test" and c.baseline_s == (1.0,) * 10


def test_compare_rounds_one_disagreeing_round_in_ten_still_decides_two_do_not():
    base = [1.0] * 10
    assert stats.compare_rounds(base, [0.8] * 9 + [1.2]).verdict == "faster"
    assert stats.compare_rounds(base, [0.8] * 8 + [1.2] * 2).verdict == "no significant difference"


def test_compare_rounds_too_few_and_bad_input():
    assert stats.compare_rounds([1.0] * 5, [0.5] * 5).verdict == stats.TOO_FEW_ROUNDS
    with pytest.raises(ValueError, match="pairs"):
        stats.compare_rounds([1.0] * 6, [1.0] * 5)
    with pytest.raises(ValueError, match="no rounds"):
        stats.compare_rounds([], [])
    with pytest.raises(ValueError, match="positive"):
        stats.compare_rounds([1.0] * 6, [0.0] * 6)


def test_a_ratio_never_prints_bare():
    """Issue 18: "0.84x" reads "1.19x slower" by default; the significant verdicts read as before;
    the bare form stays available with directed=False."""
    assert stats.ratio_text(0.84) == "1.19x slower"
    assert stats.ratio_text(1.42) == "1.42x faster"
    assert stats.ratio_text(1.004) == stats.ratio_text(0.996) == "1.00x"
    near = compare([1.0] * 5 + [1.02] * 5, [1.05] * 5 + [1.07] * 5)
    assert near.text() == "1.05x slower: no significant difference (within \u00b110 % run-to-run noise)"
    assert near.text(directed=False) == "0.95x: no significant difference (within \u00b110 % run-to-run noise)"
    assert compare([2.0] * 3, [1.0] * 3).text() == "2.00x faster: too few steps to tell"
    assert compare([2.0] * 3, [1.0] * 3).text(directed=False) == "2.00x: too few steps to tell"
    assert compare([2.0] * 9, [1.0] * 9).text() == "2.00x faster"
    assert compare([1.0] * 5, [1.004] * 5).text().startswith("1.00x: no significant difference")
    busy = compare([1.0] * 5, [1.6] * 5, other_cpu_pct=(10, 50))
    assert busy.text(directed=True, reference="the previous run (#3)") == (
        "1.60x slower: cannot tell: the machine was busy (other programs used 10 % of the CPU during the "
        f"previous run (#3), 50 % during this run); {HINT}")


def test_rounds_text_never_prints_a_bare_ratio():
    """Issue 18: a round comparison that is not significant says which way it points, and its
    interval and round count follow that direction; directed=False keeps the old form."""
    slow = stats.compare_rounds([1.0] * 8, [1.05, 0.99, 1.06, 1.04, 0.98, 1.05, 1.07, 0.97])
    assert slow.verdict == stats.NO_DIFFERENCE and slow.speedup < 1
    assert slow.text() == "1.04x slower: no significant difference (99 % CI 0.97-1.07x; slower in 5 of 8 rounds)"
    assert slow.text(directed=False) == ("0.96x: no significant difference (99 % CI 0.93-1.03x; "
                                         "faster in 3 of 8 rounds)")
    fast = stats.compare_rounds([1.05, 0.99, 1.06, 1.04, 0.98, 1.05, 1.07, 0.97], [1.0] * 8)
    assert fast.text().startswith("1.04x faster: no significant difference (") and "faster in 5 of 8" in fast.text()
    few = stats.compare_rounds([1.0] * 3, [0.5] * 3)
    assert few.text().startswith("2.00x faster: too few rounds to tell")


def test_a_comparison_stopped_once_settled_makes_the_decision_all_its_rounds_would():
    # tfwb.tune stops a comparison once "faster or not" is settled: on 3,000 random 10- and 30-round
    # sequences (ties included), the early decision is always the full one, and it often stops early.
    rng = random.Random(7)
    stopped = 0
    for trial in range(3000):
        n = 10 if trial % 2 else 30
        drift = rng.choice((0.9, 0.97, 1.0, 1.03, 1.1))
        base = [1.0] * n
        cand = [rng.choice((drift * rng.uniform(0.9, 1.1), 1.0)) for _ in range(n)]
        full = stats.compare_rounds(base, cand).verdict == stats.FASTER
        for r in range(1, n + 1):
            settled = stats.faster_settled(base[:r], cand[:r], n)
            if settled is not None:
                assert settled == full, (base, cand, r)
                stopped += r < n
                break
        else:
            pytest.fail("not settled after every round")
    assert stopped > 1000


def test_a_drift_cannot_explain_a_ratio_far_beyond_it():
    """Issue 34: a cache run whose speed moved 1.10x within itself made its 4.5x pair "cannot tell"."""
    drifting = [0.10] * 10 + [0.115] * 10 + [0.115] * 10     # its last third 1.15x slower than its first
    assert stats.drift_of(drifting) == pytest.approx(1.15)
    assert stats.compare([0.5] * 30, drifting).verdict == stats.FASTER                  # 4.5x: decided
    assert stats.compare([0.125] * 30, drifting).verdict == stats.CANNOT_TELL_DRIFT     # 1.15x: the drift's
