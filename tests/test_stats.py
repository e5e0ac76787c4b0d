"""Tests of tfwb.stats: robust statistics and the noise-aware comparison."""
from __future__ import annotations

import math
import random

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
    ([1.0, 1.1, 1.2, 1.3, 1.4], [1.03, 1.13, 1.23, 1.33, 1.43], "0.98x: no significant difference"),
    ([2.0] * 3, [1.0] * 3, "2.00x: too few steps to tell"),
])
def test_text_exact(base, cand, text):
    assert compare(base, cand).text() == text
