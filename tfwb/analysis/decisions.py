"""Interleaved verdicts kept per pair of configurations: what decides a pair that separate runs cannot.

Two separate runs on a busy or drifting machine say "cannot tell"; an interleaved comparison of
their two configurations (``tfwb.compare_interleaved``, ``tfwb.stats.compare_rounds``) decides,
since whatever slows the machine hits both sides alike. ``Decisions`` keeps each such verdict
under its pair of configurations (``label`` ignored), order-aware: asked for the pair the other
way round, it answers with the rounds swapped (the ratio inverted, faster and slower exchanged).
A pair whose batches differ is compared per example, as ``tfwb.analysis.pairs.compare_runs``
does: the rounds' per-step times are divided by each side's batch first.

Pure: no TensorFlow, no UI library.
"""
from __future__ import annotations

from typing import Any, Dict, Iterator, Optional, Tuple

from tfwb import stats
from tfwb.config import RunConfig, field_names

__all__ = ["Decisions", "pair_key", "swapped", "per_example_rounds"]

#: A configuration as a key: every field but ``label``, in declaration order.
ConfigKey = Tuple[Tuple[str, Any], ...]


def _key(cfg: RunConfig) -> ConfigKey:
    if not isinstance(cfg, RunConfig):
        raise ValueError(f"a decided pair needs two RunConfigs, got {type(cfg).__name__}")
    return tuple((name, repr(getattr(cfg, name))) for name in field_names() if name != "label")


def pair_key(a: RunConfig, b: RunConfig) -> Tuple[ConfigKey, ConfigKey]:
    """The key of the ordered pair ``(a, b)``: both configurations without their labels.

    Example:
        >>> pair_key(RunConfig(label="x"), RunConfig()) == pair_key(RunConfig(), RunConfig(label="y"))
        True
    """
    return _key(a), _key(b)


def swapped(rounds: stats.RoundsComparison) -> stats.RoundsComparison:
    """The same comparison with baseline and candidate exchanged (speedup ``1/x``, faster <-> slower).

    From the per-round times when it has them (``compare_rounds`` on the swapped rounds), else by
    inverting the ratio and its interval.

    Example:
        >>> r = stats.compare_rounds([1.0] * 6, [0.5] * 6)
        >>> s = swapped(r)
        >>> (r.verdict, r.speedup), (s.verdict, s.speedup)
        (('faster', 2.0), ('slower', 0.5))
    """
    if rounds.baseline_s and len(rounds.baseline_s) == len(rounds.candidate_s):
        return stats.compare_rounds(rounds.candidate_s, rounds.baseline_s, method=rounds.method,
                                    planned_rounds=rounds.planned_rounds or None)
    verdict = {stats.FASTER: stats.SLOWER, stats.SLOWER: stats.FASTER}.get(rounds.verdict, rounds.verdict)
    return stats.RoundsComparison(speedup=1.0 / rounds.speedup, low=1.0 / rounds.high, high=1.0 / rounds.low,
                                  coverage=rounds.coverage, rounds=rounds.rounds,
                                  faster_rounds=rounds.rounds - rounds.faster_rounds, p_value=rounds.p_value,
                                  verdict=verdict, method=rounds.method, planned_rounds=rounds.planned_rounds)


def per_example_rounds(rounds: stats.RoundsComparison,
                       batches: Tuple[int, int]) -> Optional[stats.RoundsComparison]:
    """``rounds`` per training example: each side's per-step times divided by its global batch.

    Args:
        rounds: the interleaved comparison, per step.
        batches: ``(the candidate's batch, the baseline's)``, as ``Versus.batches`` holds them.

    Returns:
        The comparison per example; ``None`` when it has no per-round times to divide.

    Example:
        >>> r = stats.compare_rounds([1.0] * 6, [1.5] * 6)      # per step 1.5x slower, at twice the batch
        >>> per_example_rounds(r, (128, 64)).speedup
        1.3333333333333333
    """
    if not rounds.baseline_s or len(rounds.baseline_s) != len(rounds.candidate_s):
        return None
    candidate, baseline = batches
    return stats.compare_rounds([t / baseline for t in rounds.baseline_s],
                                [t / candidate for t in rounds.candidate_s],
                                method=rounds.method + ", per example", planned_rounds=rounds.planned_rounds or None)


class Decisions:
    """The interleaved verdicts measured so far, one per ordered pair of configurations (the latest wins).

    Example:
        >>> d = Decisions()
        >>> d.record(RunConfig(), RunConfig(prefetch=True), stats.compare_rounds([1.0] * 6, [0.5] * 6))
        >>> d.get(RunConfig(), RunConfig(prefetch=True)).verdict, d.get(RunConfig(prefetch=True), RunConfig()).verdict
        ('faster', 'slower')
        >>> d.get(RunConfig(), RunConfig(cache=True)) is None, len(d)
        (True, 1)
    """

    def __init__(self) -> None:
        self._by_pair: Dict[Tuple[ConfigKey, ConfigKey], stats.RoundsComparison] = {}

    def record(self, baseline: RunConfig, candidate: RunConfig, rounds: stats.RoundsComparison) -> None:
        """Keep ``rounds`` (``candidate`` against ``baseline``), replacing an older verdict of the pair
        (either way round).

        Raises:
            ValueError: for a configuration that is not a RunConfig, or ``rounds`` that is not a
                ``stats.RoundsComparison``.
        """
        if not isinstance(rounds, stats.RoundsComparison):
            raise ValueError(f"rounds must be a tfwb.stats.RoundsComparison, got {type(rounds).__name__}")
        key = pair_key(baseline, candidate)
        self._by_pair.pop((key[1], key[0]), None)
        self._by_pair[key] = rounds

    def get(self, baseline: RunConfig, candidate: RunConfig) -> Optional[stats.RoundsComparison]:
        """``candidate`` against ``baseline``: the verdict kept for the pair (swapped when it was measured the
        other way round), or ``None``. The same configuration against itself (a repeat, A/A) has one too
        once decided: the interleaved rounds then measure what the machine varies, and say "no significant
        difference" unless it drifts between turns."""
        key = pair_key(baseline, candidate)
        hit = self._by_pair.get(key)
        if hit is not None:
            return hit
        other = self._by_pair.get((key[1], key[0]))
        return swapped(other) if other is not None else None

    def __len__(self) -> int:
        return len(self._by_pair)

    def __iter__(self) -> Iterator[Tuple[Tuple[ConfigKey, ConfigKey], stats.RoundsComparison]]:
        return iter(list(self._by_pair.items()))
