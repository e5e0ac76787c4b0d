"""Robust statistics for step times, and noise-aware comparisons of runs.

Pure functions over sequences of floats: median, quantiles, IQR, MAD, and three
ways to ask "is this difference real?":

* ``compare(baseline, candidate)``: two single runs' per-step times. A difference is
  significant only when the two runs' inter-quartile ranges do not overlap, the
  ratio of their medians lies outside the run-to-run noise band (how far apart two
  runs of the same configuration land on this machine, ``NoiseBand``). Steps within one
  run share the machine's state at that moment, so their spread understates how much a
  second run of the same configuration can differ. Two separate runs never decide when
  the machine was busy during either and the delay could explain the ratio (a run kept
  waiting for a CPU ``DELAY_BUSY_SHARE`` or more of its time, ``delay_explains``; where the
  kernel measured no waiting, other programs used ``BUSY_OTHER_CPU_PCT`` or more of the
  CPU) or a run drifted beyond the band: the verdict is "cannot tell", and the
  interleaved comparison below is the way to decide.
* ``learn_noise(groups)``: that band, learned from repeated identical runs
  (``DEFAULT_NOISE`` until there are enough).
* ``compare_rounds(baseline, candidate)``: per-round times of two configurations
  run in alternation (``tfwb.tf.lab.side_by_side.compare_interleaved``). Each round's
  ratio pairs two measurements taken seconds apart, so slow drift cancels; a
  difference is significant when the rounds agree in sign often enough (a two-sided
  sign test at 5 %), and the verdict carries a distribution-free 95 % confidence
  interval for the median ratio.

No NumPy needed; no TensorFlow.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional, Sequence, Tuple

from tfwb import warmup
from tfwb.delay import delay_bound, explains  # noqa: F401 - delay_bound is read here too (stats.delay_bound)

#: Verdicts ``compare`` and ``compare_rounds`` can return.
FASTER, SLOWER, NO_DIFFERENCE, TOO_FEW = ("faster", "slower", "no significant difference",
                                           "too few steps to tell")
TOO_FEW_ROUNDS = "too few rounds to tell"
#: Verdicts of two separate runs that cannot decide: other programs used the CPU during either
#: run (``BUSY_OTHER_CPU_PCT``), or a run's own step times drifted beyond the noise band between
#: its first and last third. Neither run then says what this machine does when quiet; only an
#: interleaved comparison (``compare_rounds``) can decide, since drift hits both sides alike.
CANNOT_TELL_BUSY = "cannot tell: the machine was busy"
CANNOT_TELL_DRIFT = "cannot tell: a run drifted"
CANNOT_TELL = (CANNOT_TELL_BUSY, CANNOT_TELL_DRIFT)
#: The tfwb 0.1 name of the busy verdict (then "not comparable", given only when the load could
#: explain the ratio; now any busy run cannot decide).
NOT_COMPARABLE = CANNOT_TELL_BUSY
#: Other programs using at least this share of all cores (percent) during a run make it busy:
#: its comparison with a separate run says "cannot tell", and it teaches no noise band.
BUSY_OTHER_CPU_PCT = 10.0
#: A run kept waiting for a CPU this share (0..1) of its measured wall time or more is busy, where
#: the kernel measured the waiting (``tfwb.analysis.pairs.delay_of``); it then replaces
#: ``BUSY_OTHER_CPU_PCT``. Taken from ``benchmarks/load_signals.py`` (its results name the machine).
DELAY_BUSY_SHARE = 0.10
#: Fewest steps a run needs before its drift (last third against first third) is judged.
MIN_STEPS_FOR_DRIFT = 9
#: What to do instead, in every "cannot tell" text.
INTERLEAVE_HINT = "compare the two configurations interleaved (tfwb.compare_interleaved) to decide"
MIN_STEPS_TO_COMPARE = 5
#: Fewest alternating rounds with which a sign test at 5 % can decide (6 of 6: p = 0.031).
MIN_ROUNDS_TO_COMPARE = 6
#: Fewest repeated identical runs' worth of evidence (degrees of freedom) to learn a band from.
MIN_NOISE_DOF = 2
#: Half-width (%) of the run-to-run noise band used until a machine's own is learned from
#: repeated runs (``benchmarks/noise.py`` measures how identical runs scatter). Swings in
#: other programs' CPU use, the largest source on a shared machine, are judged apart
#: (``other_cpu_pct`` in ``compare``).
DEFAULT_NOISE_PCT = 10.0
#: Two-sided 5 % significance level for ``compare_rounds``.
ALPHA = 0.05


def _clean(values: Sequence[float]) -> list:
    xs = sorted(float(v) for v in values)
    if not xs:
        raise ValueError("values is empty; need at least one measurement")
    if any(math.isnan(x) for x in xs):
        raise ValueError("values contains NaN")
    return xs


def quantile(values: Sequence[float], q: float) -> float:
    """The ``q``-quantile with linear interpolation (NumPy's default method).

    Raises:
        ValueError: for an empty sequence, NaN, or ``q`` outside [0, 1].
    """
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"q={q!r} is not allowed; q must be in [0, 1]")
    xs = _clean(values)
    pos = (len(xs) - 1) * q
    lo = math.floor(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def median(values: Sequence[float]) -> float:
    """The median (0.5-quantile)."""
    return quantile(values, 0.5)


def iqr(values: Sequence[float]) -> tuple:
    """``(q1, q3)``: the 25th and 75th percentiles."""
    return quantile(values, 0.25), quantile(values, 0.75)


def mad(values: Sequence[float]) -> float:
    """Median absolute deviation from the median (unscaled)."""
    m = median(values)
    return median([abs(v - m) for v in values])


def percentiles(values: Sequence[float], qs: Sequence[float] = (5, 25, 50, 75, 95)) -> dict:
    """``{q: value}`` for each percentile ``q`` in 0..100."""
    return {q: quantile(values, q / 100.0) for q in qs}


@dataclass(frozen=True)
class Spread:
    """Median and inter-quartile range of one run's measurements."""

    median: float
    q1: float
    q3: float
    n: int

    @classmethod
    def of(cls, values: Sequence[float]) -> "Spread":
        q1, q3 = iqr(values)
        return cls(median(values), q1, q3, len(values))

    def overlaps(self, other: "Spread") -> bool:
        """True when the two IQRs share any point."""
        return self.q1 <= other.q3 and other.q1 <= self.q3


# -- run-to-run noise ------------------------------------------------------------

@dataclass(frozen=True)
class NoiseBand:
    """How far apart two runs of the same configuration can land: ratios within
    ``1 / (1 + pct/100)`` .. ``1 + pct/100`` are noise.

    Args:
        pct: half-width of the band in percent (``25.0``: ratios 0.80..1.25).
        runs: identical runs it was learned from (0 for the default).
        dof: degrees of freedom of the estimate (runs minus configurations).
    """

    pct: float
    runs: int = 0
    dof: int = 0

    @property
    def learned(self) -> bool:
        """True when learned from this machine's repeated runs, False for the default."""
        return self.runs > 0

    def contains(self, speedup: float) -> bool:
        """True when ``speedup`` (either direction) is no larger than the band."""
        return abs(math.log(speedup)) <= math.log1p(self.pct / 100.0) + 1e-12

    def text(self) -> str:
        """The band and where it comes from, e.g. ``"±8 % (learned from 5 identical runs)"``."""
        if self.learned:
            return f"\u00b1{self.pct:.0f} % (learned from {self.runs} identical runs)"
        return (f"\u00b1{self.pct:.0f} % (the default; run one configuration {MIN_NOISE_DOF + 1} times "
                "to learn this machine's)")


DEFAULT_NOISE = NoiseBand(DEFAULT_NOISE_PCT)

# Two-sided 95 % Student t quantiles by degrees of freedom (a df between two keys
# uses the smaller key: a little wider, never narrower).
_T975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306,
         9: 2.262, 10: 2.228, 12: 2.179, 15: 2.131, 20: 2.086, 30: 2.042, 60: 2.000, 120: 1.980}


def _t975(dof: int) -> float:
    return _T975[max(k for k in _T975 if k <= dof)]


def learn_noise(groups: Sequence[Sequence[float]], *, default: NoiseBand = DEFAULT_NOISE) -> NoiseBand:
    """The run-to-run noise band learned from repeated runs of identical configurations.

    Each group holds the median step times of runs that used the same configuration
    on the same machine. The spread of their logarithms, pooled over groups, is the
    run-to-run noise ``s``; two new runs' log ratio then scatters with ``sqrt(2) s``,
    and the band is the two-sided 95 % range of that ratio, with Student's ``t`` for
    the few runs it was learned from: ``pct = 100 (exp(t sqrt(2) s) - 1)``.

    Args:
        groups: per configuration, the median step times (s) of its runs; groups with
            one run carry no information and are skipped.
        default: returned when there are fewer than ``MIN_NOISE_DOF`` degrees of
            freedom (e.g. fewer than three runs of one configuration).

    Returns:
        A ``NoiseBand`` (``runs`` counts the runs it used).

    Raises:
        ValueError: for a non-positive time.

    Example:
        >>> learn_noise([[0.100, 0.100, 0.100]]).pct
        0.0
        >>> learn_noise([[0.1, 0.12]]) == DEFAULT_NOISE     # one degree of freedom: too little
        True
    """
    ss, dof, runs = 0.0, 0, 0
    for group in groups:
        values = [float(v) for v in group]
        if any(not v > 0 for v in values):
            raise ValueError("run times must be positive to learn a noise band")
        if len(values) < 2:
            continue
        logs = [math.log(v) for v in values]
        mean = sum(logs) / len(logs)
        ss += sum((x - mean) ** 2 for x in logs)
        dof += len(logs) - 1
        runs += len(logs)
    if dof < MIN_NOISE_DOF:
        return default
    s = math.sqrt(ss / dof)
    return NoiseBand(pct=100.0 * math.expm1(_t975(dof) * math.sqrt(2.0) * s), runs=runs, dof=dof)


# -- two single runs ----------------------------------------------------------------

def ratio_text(speedup: float) -> str:
    """A ratio of two times in words, never bare: which way it points, and how far.

    Args:
        speedup: reference time / candidate time (> 1: the candidate is faster).

    Returns:
        ``"1.42x faster"``, ``"1.19x slower"`` (for 0.84), or ``"1.00x"`` when the ratio is
        1 to two decimals either way.

    Example:
        >>> ratio_text(1.42), ratio_text(0.84), ratio_text(0.999)
        ('1.42x faster', '1.19x slower', '1.00x')
    """
    if f"{speedup:.2f}" == "1.00" or f"{1.0 / speedup:.2f}" == "1.00":
        return "1.00x"
    return f"{speedup:.2f}x faster" if speedup > 1 else f"{1.0 / speedup:.2f}x slower"


@dataclass(frozen=True)
class Comparison:
    """How a candidate run compares with a baseline run.

    ``speedup`` is baseline median / candidate median (> 1: the candidate is
    faster). ``verdict`` is one of ``faster``, ``slower``,
    ``no significant difference``, ``too few steps to tell`` and the two ``CANNOT_TELL``
    verdicts (a busy machine, a drifting run). ``drift`` is each run's last-third median over
    its first-third median, when it had enough steps.
    ``noise`` is the run-to-run band the ratio had to leave; ``within_noise`` is True
    when the IQRs were apart but the ratio stayed inside it; ``other_cpu_pct`` is the
    share of all cores other programs used during (baseline, candidate), when known;
    ``delay`` the share (0..1) of each run's wall time it was kept waiting for a CPU, when the
    kernel measured it (then it, not ``other_cpu_pct``, decides what is busy).
    """

    speedup: float
    baseline: Spread
    candidate: Spread
    verdict: str
    noise: NoiseBand = DEFAULT_NOISE
    within_noise: bool = False
    other_cpu_pct: Optional[Tuple[float, float]] = None
    drift: Tuple[Optional[float], Optional[float]] = (None, None)
    delay: Optional[Tuple[float, float]] = None

    @property
    def ratio(self) -> float:
        """Candidate median / baseline median (> 1: the candidate is slower)."""
        return 1.0 / self.speedup

    @property
    def significant(self) -> bool:
        return self.verdict in (FASTER, SLOWER)

    def text(self, *, directed: bool = True, reference: str = "the baseline") -> str:
        """The verdict in words; a ratio never prints bare.

        Args:
            directed: say which way a ratio that is not significant points (``"1.19x
                slower: no significant difference"``), the default; ``False`` gives the
                old bare form (``"0.84x: ..."``), kept for a caller that needs the raw
                ratio (none in tfwb).
            reference: what the candidate was compared with, as a "cannot tell" text
                names it (``"the previous run (#3)"``).

        Returns:
            e.g. ``"1.42x faster"``, ``"1.03x faster: no significant difference"``,
            ``"1.08x slower: no significant difference (within ±10 % run-to-run noise)"``
            or ``"1.82x slower: cannot tell: the machine was busy (other programs used 10 % of
            the CPU during the baseline, 50 % during this run); compare ... interleaved ..."``
            (never "faster" or "slower" alone there; ``"1.00x: ..."`` when the
            ratio is 1 to two decimals); with ``directed=False`` the bare ratio
            (``"0.92x: ..."``).

        Example:
            >>> c = compare([1.0, 1.1, 1.2, 1.3, 1.4], [1.1, 1.2, 1.3, 1.4, 1.5])
            >>> c.text(), c.text(directed=False)
            ('1.08x slower: no significant difference', '0.92x: no significant difference')
        """
        if self.significant:
            factor = self.speedup if self.verdict == FASTER else 1.0 / self.speedup
            return f"{factor:.2f}x {self.verdict}"
        head = ratio_text(self.speedup) if directed else f"{self.speedup:.2f}x"
        text = f"{head}: {self.verdict}"
        if self.verdict == CANNOT_TELL_BUSY and self.delay is not None:
            b, c = self.delay
            text += (f" (tasks waited for a CPU {100 * b:.0f} % of the time during {reference}, {100 * c:.0f} % "
                     f"during this run: enough to explain the ratio); {INTERLEAVE_HINT}")
        elif self.verdict == CANNOT_TELL_BUSY and self.other_cpu_pct is not None:
            b, c = self.other_cpu_pct
            text += (f" (other programs used {b:.0f} % of the CPU during {reference}, {c:.0f} % during this run); "
                     f"{INTERLEAVE_HINT}")
        elif self.verdict == CANNOT_TELL_DRIFT:
            parts = [f"{ratio_text(1.0 / d)} from its first third to its last" + f" ({who})"
                     for d, who in zip(self.drift, (reference, "this run")) if d is not None
                     and not self.noise.contains(d)]
            text += f" ({'; '.join(parts)}); {INTERLEAVE_HINT}"
        elif self.within_noise:
            whose = "this machine's " if self.noise.learned else ""
            text += f" (within {whose}\u00b1{self.noise.pct:.0f} % run-to-run noise)"
        return text


def delay_explains(speedup: float, delays: Tuple[float, float], noise: NoiseBand = DEFAULT_NOISE) -> bool:
    """Whether the waiting of (baseline, candidate) could explain ``speedup``: ``tfwb.delay.explains``
    with ``DELAY_BUSY_SHARE`` and the band ``noise`` (``delay_bound`` is ``tfwb.delay.delay_bound``).

    Example:
        >>> delay_explains(5.0, (0.3, 0.0)), delay_explains(1.2, (0.3, 0.0))
        (False, True)
    """
    return explains(speedup, delays, busy_share=DELAY_BUSY_SHARE, band_pct=noise.pct)


def drift_explains(speedup: float, drift: Tuple[Optional[float], Optional[float]],
                   noise: NoiseBand = DEFAULT_NOISE) -> bool:
    """Whether the runs' drift (``drift_of`` of each) could explain ``speedup``.

    Only a drift beyond ``noise`` counts. A run whose speed changed by a factor f within itself cannot
    owe a ratio beyond f to that change: the pair's ratio is explained when it is at most the product of
    both runs' drift factors, widened by the band. So a 1.15x drift leaves 1.2x undecided and decides
    4x (issue 34: a cache run drifted 1.10x and its 4.5x was "cannot tell").

    Example:
        >>> drift_explains(4.38, (None, 1.15)), drift_explains(1.2, (None, 1.15)), drift_explains(1.2, (1.05, None))
        (False, True, False)
    """
    moved = [max(d, 1.0 / d) for d in drift if d is not None and d > 0 and not noise.contains(d)]
    if not moved:
        return False
    reach = math.prod(max(d, 1.0 / d) for d in drift if d is not None and d > 0) * (1.0 + noise.pct / 100.0)
    return max(speedup, 1.0 / speedup) <= reach


def compare(baseline: Sequence[float], candidate: Sequence[float], *,
            noise: Optional[NoiseBand] = None,
            other_cpu_pct: Optional[Tuple[Optional[float], Optional[float]]] = None,
            delay: Optional[Tuple[Optional[float], Optional[float]]] = None) -> Comparison:
    """Compare two runs' per-step times.

    The difference is significant only when both runs have at least
    ``MIN_STEPS_TO_COMPARE`` steps, their IQRs do not overlap, the slower run is
    not explained by other programs taking the CPU, and the ratio of their medians
    lies outside ``noise``: two runs of the same configuration differ by more than
    their steps' spread suggests (the machine's state drifts between runs), so a
    ratio inside the band is called noise.

    Args:
        baseline, candidate: per-step times (any unit, the same for both).
        noise: the run-to-run band; default ``DEFAULT_NOISE``
            (see ``learn_noise`` and ``tfwb.analysis.noise.noise_band``).
        other_cpu_pct: the share of all cores (0-100) other programs used during
            (baseline, candidate); ``None`` (or a ``None`` inside) when unknown. When
            either is at least ``BUSY_OTHER_CPU_PCT``, the verdict is
            ``CANNOT_TELL_BUSY``, whatever the ratio: a busy moment says nothing about
            the quiet machine. Used only where ``delay`` is unknown.
        delay: the share (0..1) of each run's measured wall time it was kept waiting for a CPU
            (``tfwb.analysis.pairs.delay_of``); ``None`` (or a ``None`` inside) when unknown.
            When either is at least ``DELAY_BUSY_SHARE``, the verdict is ``CANNOT_TELL_BUSY``
            unless the ratio is one the delay cannot explain (``delay_explains``).

    Each run's leading steps that were still warming up (``tfwb.warmup.unsettled_steps``: slower
    than the rest, at most a third of the run) are left out first, so a run that warms up and then
    settles compares its settled steps. A run whose settled steps' last third is slower or faster
    than their first third by more than the band (``drift_of``; ``MIN_STEPS_FOR_DRIFT`` steps or
    more) gives ``CANNOT_TELL_DRIFT``: a step change mid-run or a late slowdown, unless the ratio is
    one the drift cannot explain (``drift_explains``).

    Raises:
        ValueError: for empty input or a zero median.

    Example:
        >>> compare([2, 2, 2, 2, 2], [1, 1, 1, 1, 1]).text()
        '2.00x faster'
        >>> compare([1.05] * 5, [1.0] * 5).verdict
        'no significant difference'
        >>> compare([1.0] * 5, [1.6] * 5, other_cpu_pct=(2, 50)).verdict
        'cannot tell: the machine was busy'
        >>> compare([1.0] * 5, [1.6] * 5, delay=(0.0, 0.5)).verdict   # waiting half the time explains 1.6x
        'cannot tell: the machine was busy'
        >>> compare([1.0] * 5, [3.0] * 5, delay=(0.0, 0.5)).verdict   # but not 3x
        'slower'
        >>> compare([1.0] * 9, [0.5] * 6 + [1.0] * 3).verdict      # the candidate sped up 2x midway
        'cannot tell: a run drifted'
    """
    noise = DEFAULT_NOISE if noise is None else noise
    b, c = Spread.of(warmup.settled(baseline)), Spread.of(warmup.settled(candidate))   # warm-up is not drift
    if c.median <= 0 or b.median <= 0:
        raise ValueError("step times must be positive to compute a speedup")
    speedup = b.median / c.median
    loads = None
    if other_cpu_pct is not None and None not in other_cpu_pct:
        loads = (float(other_cpu_pct[0]), float(other_cpu_pct[1]))
    delays = None
    if delay is not None and None not in delay:
        delays = (float(delay[0]), float(delay[1]))                   # type: ignore[arg-type]
    within = False
    drift = (drift_of(baseline), drift_of(candidate))
    if min(b.n, c.n) < MIN_STEPS_TO_COMPARE:
        verdict = TOO_FEW
    elif delays is not None and delay_explains(speedup, delays, noise):
        verdict = CANNOT_TELL_BUSY
    elif delays is None and loads is not None and max(loads) >= BUSY_OTHER_CPU_PCT:
        verdict = CANNOT_TELL_BUSY
    elif drift_explains(speedup, drift, noise):
        verdict = CANNOT_TELL_DRIFT
    elif b.overlaps(c):
        verdict = NO_DIFFERENCE
    elif noise.contains(speedup):
        verdict, within = NO_DIFFERENCE, True
    else:
        verdict = FASTER if speedup > 1 else SLOWER
    return Comparison(speedup=speedup, baseline=b, candidate=c, verdict=verdict, noise=noise,
                      within_noise=within, other_cpu_pct=loads, drift=drift, delay=delays)


def drift_of(times: Sequence[float]) -> Optional[float]:
    """A run's drift: the median of the last third of its settled steps over the median of their first third.

    The leading steps that were still warming up (``tfwb.warmup.unsettled_steps``: slower than the
    rest, at most a third of the run) are left out first: warm-up is not drift. A step change
    mid-run, a late slowdown, or a slow stretch longer than the warm-up cap still shows.
    ``None`` for fewer than ``MIN_STEPS_FOR_DRIFT`` steps. Above 1: the run slowed down.

    Example:
        >>> drift_of([1.0] * 6 + [1.5] * 3), drift_of([1.0] * 8)
        (1.5, None)
        >>> drift_of([1.2, 1.2, 1.15] + [1.0] * 9)     # a warm-up, then flat: no drift
        1.0
    """
    values = [float(v) for v in times if not math.isnan(float(v))]       # in the order they ran
    if len(values) < MIN_STEPS_FOR_DRIFT:
        return None
    values = values[warmup.unsettled_steps(values):]
    k = max(1, len(values) // 3)
    first, last = median(values[:k]), median(values[-k:])
    return last / first if first > 0 else None


# -- alternating rounds -------------------------------------------------------------

def _binom_cdf_half(k: int, n: int) -> float:
    """P(X <= k) for X ~ Binomial(n, 1/2)."""
    if k < 0:
        return 0.0
    return sum(math.comb(n, i) for i in range(0, min(k, n) + 1)) / 2.0 ** n


def sign_test_p(successes: int, n: int) -> float:
    """Two-sided exact sign-test p-value for ``successes`` of ``n`` (null: one half).

    Example:
        >>> round(sign_test_p(9, 10), 4)
        0.0215
    """
    if n <= 0:
        return 1.0
    tail = _binom_cdf_half(min(successes, n - successes), n)
    return min(1.0, 2.0 * tail)


def median_ci(values: Sequence[float], level: float = 0.95) -> Tuple[float, float, float]:
    """A distribution-free confidence interval for the median, from order statistics.

    Returns ``(low, high, coverage)`` with ``[low, high] = [x_(k), x_(n-k+1)]`` for the
    largest ``k`` whose exact coverage ``1 - 2 P(Binomial(n, 1/2) <= k - 1)`` is at
    least ``level``; for too few values, the full range with its (lower) coverage.

    Example:
        >>> median_ci([1, 2, 3, 4, 5, 6, 7, 8, 9, 10])
        (2.0, 9.0, 0.978515625)
    """
    xs = _clean(values)
    n = len(xs)
    k = 1
    while k + 1 <= n // 2 and 1.0 - 2.0 * _binom_cdf_half(k, n) >= level:
        k += 1
    return xs[k - 1], xs[n - k], 1.0 - 2.0 * _binom_cdf_half(k - 1, n)


@dataclass(frozen=True)
class RoundsComparison:
    """Two configurations measured in alternating rounds, and what the rounds say.

    Args:
        speedup: median over rounds of baseline time / candidate time (> 1: faster).
        low, high: distribution-free ~95 % confidence interval of that median.
        coverage: the interval's exact coverage under the sign test (>= 0.95 when
            there are enough rounds).
        rounds: rounds measured.
        faster_rounds: rounds in which the candidate was faster.
        p_value: two-sided sign-test p-value.
        verdict: ``faster``, ``slower``, ``no significant difference`` or
            ``too few rounds to tell``.
        baseline_s, candidate_s: each round's time of each configuration (s).
        method: how the rounds were measured (e.g. ``"warm blocks of 10 steps"``).
        planned_rounds: the rounds it was to measure (``rounds`` unless it stopped early,
            ``tfwb.compare_interleaved(stop_early=...)``).
    """

    speedup: float
    low: float
    high: float
    coverage: float
    rounds: int
    faster_rounds: int
    p_value: float
    verdict: str
    baseline_s: Tuple[float, ...] = ()
    candidate_s: Tuple[float, ...] = ()
    method: str = ""
    planned_rounds: int = 0

    @property
    def stopped_early(self) -> bool:
        """True when the comparison stopped before its planned rounds (its answer was settled)."""
        return self.planned_rounds > self.rounds

    @property
    def ratio(self) -> float:
        """Candidate time / baseline time (> 1: the candidate is slower)."""
        return 1.0 / self.speedup

    @property
    def significant(self) -> bool:
        return self.verdict in (FASTER, SLOWER)

    def text(self, *, directed: bool = True) -> str:
        """The verdict in words; a ratio never prints bare.

        The interval and the round count follow the direction the head names: a
        candidate that is slower (significantly or not) gets its slowdown's interval
        and the rounds in which it was slower.

        Args:
            directed: say which way a ratio that is not significant points (the
                default); ``False`` gives the old bare form (``"0.95x: no significant
                difference (95 % CI 0.90-1.02x; faster in 3 of 8 rounds)"``).

        Returns:
            e.g. ``"1.16x slower (95 % CI 1.12-1.19x; slower in 10 of 10 rounds)"`` or
            ``"1.04x slower: no significant difference (99 % CI 0.97-1.07x; slower in
            5 of 8 rounds)"``.

        Example:
            >>> compare_rounds([1.0] * 8, [1.05, 0.99, 1.06, 1.04, 0.98, 1.05, 1.07, 0.97]).text()
            '1.04x slower: no significant difference (99 % CI 0.97-1.07x; slower in 5 of 8 rounds)'
        """
        slower = self.verdict == SLOWER or (directed and not self.significant and self.speedup < 1)
        if slower:
            lo, hi = 1 / self.high, 1 / self.low
            count = f"slower in {self.rounds - self.faster_rounds} of {self.rounds} rounds"
        else:
            lo, hi = self.low, self.high
            count = f"faster in {self.faster_rounds} of {self.rounds} rounds"
        if self.significant:
            head = f"{1 / self.speedup:.2f}x slower" if slower else f"{self.speedup:.2f}x faster"
        else:
            ratio = ratio_text(self.speedup) if directed else f"{self.speedup:.2f}x"
            head = f"{ratio}: {self.verdict}"
        return f"{head} ({self.coverage * 100:.0f} % CI {lo:.2f}-{hi:.2f}x; {count})"


def rounds_to_call_faster(rounds: int) -> Optional[int]:
    """The fewest rounds, of ``rounds``, the candidate must be faster in to be called faster (None: it cannot be,
    with fewer than ``MIN_ROUNDS_TO_COMPARE`` rounds).

    Example:
        >>> rounds_to_call_faster(10), rounds_to_call_faster(6), rounds_to_call_faster(5)
        (9, 6, None)
    """
    if rounds < MIN_ROUNDS_TO_COMPARE:
        return None
    return next((k for k in range(rounds // 2 + 1, rounds + 1) if sign_test_p(k, rounds) <= ALPHA), None)


def faster_settled(baseline: Sequence[float], candidate: Sequence[float], rounds: int) -> Optional[bool]:
    """Whether ``rounds`` paired rounds, of which these are the first, will call the candidate faster.

    True when they will whatever the remaining rounds say, False when they no longer can (even
    if every remaining round is faster), None while that is open. A comparison that asks only
    "faster or not" (``tfwb.tune`` keeps a change only if it is called faster) can stop at a
    settled answer: its decision is the one all the rounds would give, and a change that
    cannot win stops after a few rounds instead of all of them.

    Example:
        >>> faster_settled([1.0, 1.0], [1.1, 1.2], 10)        # slower twice: 9 of 10 is out of reach
        False
        >>> faster_settled([1.0] * 9, [0.9] * 9, 10), faster_settled([1.0] * 3, [0.9] * 3, 10)
        (True, None)
    """
    ratios = [b / c for b, c in zip(baseline, candidate)]
    faster, slower = sum(r > 1 for r in ratios), sum(r < 1 for r in ratios)
    left = rounds - len(ratios)
    if rounds < MIN_ROUNDS_TO_COMPARE:
        return False
    best = faster + left                       # every remaining round faster (a tie only lowers the count)
    if not (best > slower and sign_test_p(best, best + slower) <= ALPHA):
        return False
    if faster > slower + left and sign_test_p(faster, faster + slower + left) <= ALPHA:
        return True                            # every remaining round slower cannot undo it
    return None


def compare_rounds(baseline: Sequence[float], candidate: Sequence[float], *,
                   method: str = "", planned_rounds: Optional[int] = None) -> RoundsComparison:
    """Decide from paired rounds: ``baseline[i]`` and ``candidate[i]`` measured side by side.

    Each round's ratio ``baseline[i] / candidate[i]`` compares two measurements taken
    moments apart, so drift of the machine between rounds cancels. The candidate is
    called faster (slower) when the sign test on the rounds' ratios rejects "no
    difference" at a two-sided 5 % level, which is the same as the ~95 % confidence
    interval of the median ratio lying entirely above (below) 1. It assumes nothing
    about the shape of the noise and ignores how far off an outlier round lies.

    Args:
        baseline, candidate: per-round times (s), one pair per round.
        method: recorded in the result (how the rounds were measured).
        planned_rounds: the rounds the comparison was to take when it stopped early (default: these).

    Raises:
        ValueError: for unequal lengths, no rounds or non-positive times.

    Example:
        >>> compare_rounds([1.0] * 8, [0.8, 0.81, 0.79, 0.8, 0.82, 0.8, 0.78, 0.8]).text()
        '1.25x faster (99 % CI 1.22-1.28x; faster in 8 of 8 rounds)'
    """
    if len(baseline) != len(candidate):
        raise ValueError(f"baseline has {len(baseline)} rounds but candidate has {len(candidate)}; "
                         "rounds come in pairs")
    if not baseline:
        raise ValueError("no rounds to compare")
    b = [float(v) for v in baseline]
    c = [float(v) for v in candidate]
    if any(not v > 0 for v in b + c):
        raise ValueError("round times must be positive to compute a speedup")
    ratios = [x / y for x, y in zip(b, c)]
    n = len(ratios)
    faster = sum(r > 1 for r in ratios)
    slower = sum(r < 1 for r in ratios)
    speedup = median(ratios)
    low, high, coverage = median_ci(ratios)
    p = sign_test_p(faster, faster + slower)
    if n < MIN_ROUNDS_TO_COMPARE:
        verdict = TOO_FEW_ROUNDS
    elif p <= ALPHA:
        verdict = FASTER if faster > slower else SLOWER
    else:
        verdict = NO_DIFFERENCE
    return RoundsComparison(speedup=speedup, low=low, high=high, coverage=coverage, rounds=n,
                            faster_rounds=faster, p_value=p, verdict=verdict,
                            baseline_s=tuple(b), candidate_s=tuple(c), method=method,
                            planned_rounds=max(n, planned_rounds or n))
