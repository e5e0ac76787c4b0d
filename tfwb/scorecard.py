"""A reader's calibration: many scored predictions summed up (``tfwb.calibration``).

``calibration(scored)`` reads ``tfwb.prediction.Score`` records (a list, a chapter's predictions
file, or a folder of them: the whole book) and says

- how often the direction was right, among the decided pairs;
- how often the ranges held the measurement, against the confidence the reader stated (a reader
  whose 80 % ranges hold half the time is over-confident);
- the mean interval score of the ranges (lower is better);
- where the misses came from: per knob, and per mechanism (the knob's role in ``tfwb.knobs``:
  the input pipeline, the compute, ...).

A prediction scored more than once (first "cannot tell", then decided by an interleaved
comparison) counts once, with its latest score.

Example:
    >>> from tfwb.prediction import predict
    >>> from tfwb.stats import compare_rounds
    >>> faster = compare_rounds([2.0] * 8, [1.0] * 8)
    >>> scores = [predict("faster", between=(1.5, 3.0), about="prefetch=True").score(faster),
    ...           predict("slower", about="jit_compile=True").score(faster)]
    >>> print(calibration(scores).text())
    2 predictions, 2 decided, 0 waiting for an interleaved comparison.
    Direction right in 1 of 2 (50 %).
    Ranges that held the measurement: 1 of 1 at 80 % stated.
    Mean interval score (log speed-up; lower is better): 0.69.
    Misses by knob: jit_compile 1 (compute).

Pure: standard library, ``tfwb.history``, ``tfwb.knobs`` and ``tfwb.prediction``.
"""
from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass
from typing import Callable, Dict, Iterable, List, Optional, Sequence, Tuple, Union

from tfwb.history import History
from tfwb.prediction import Score

__all__ = ["Calibration", "calibration", "knob_of", "load_scores"]

Scored = Union[str, "os.PathLike[str]", Iterable[Score]]


def knob_of(about: Optional[str]) -> Optional[str]:
    """The knob a prediction is about: ``"prefetch=True"`` -> ``"prefetch"``; None when it names none.

    Example:
        >>> knob_of("mixed_precision='mixed_bfloat16'"), knob_of("cache=True, prefetch=True"), knob_of(None)
        ('mixed_precision', 'cache', None)
    """
    if not about:
        return None
    head = about.split(",")[0].split("=")[0].strip()
    return head or None


def _role(knob: str) -> str:
    from tfwb import knobs

    declared = knobs.table(knobs.declared())
    return declared[knob].role if knob in declared else "unknown"


def load_scores(path: "os.PathLike[str] | str") -> List[Score]:
    """Every Score in a predictions file, or in every ``*.predictions.jsonl`` under a folder."""
    path = os.fspath(path)
    if os.path.isdir(path):
        files = sorted(os.path.join(d, f) for d, _, names in os.walk(path)
                       for f in names if f.endswith(".predictions.jsonl"))
    else:
        files = [path]
    return [s for f in files for s in History(f, record=Score).load()]


@dataclass(frozen=True)
class Calibration:
    """How a reader's predictions fared (``calibration`` builds it).

    Attributes:
        scores: the latest score of each prediction, in the order they were made.
        mechanism_of: knob -> its mechanism (the knob's role by default).
    """

    scores: Tuple[Score, ...]
    mechanism_of: Callable[[str], str] = _role

    @property
    def decided(self) -> Tuple[Score, ...]:
        return tuple(s for s in self.scores if s.decided)

    @property
    def pending(self) -> int:
        return len(self.scores) - len(self.decided)

    @property
    def hit_rate(self) -> Optional[float]:
        """Share of decided predictions whose direction was right (None: none decided)."""
        decided = self.decided
        return sum(bool(s.direction_right) for s in decided) / len(decided) if decided else None

    def coverage(self) -> Dict[float, Tuple[int, int]]:
        """Stated confidence -> (ranges that held, ranges judged), among decided predictions with a range."""
        out: Dict[float, Tuple[int, int]] = {}
        for s in self.decided:
            if s.range_held is None:
                continue
            held, n = out.get(s.prediction.confidence, (0, 0))
            out[s.prediction.confidence] = (held + bool(s.range_held), n + 1)
        return dict(sorted(out.items()))

    @property
    def mean_interval_score(self) -> Optional[float]:
        values = [s.interval_score for s in self.decided if s.interval_score is not None]
        return sum(values) / len(values) if values else None

    def misses(self) -> Dict[str, int]:
        """Knob -> decided predictions about it whose direction was wrong (most first)."""
        counts = Counter(knob_of(s.prediction.about) or "(no knob named)"
                         for s in self.decided if not s.direction_right)
        return dict(counts.most_common())

    def misses_by_mechanism(self) -> Dict[str, int]:
        counts: Counter = Counter()
        for knob, n in self.misses().items():
            counts[self.mechanism_of(knob) if knob != "(no knob named)" else "unknown"] += n
        return dict(counts.most_common())

    def text(self) -> str:
        """The summary in a few lines (see the module's example)."""
        n, decided = len(self.scores), self.decided
        lines = [f"{n} prediction{'s' if n != 1 else ''}, {len(decided)} decided, "
                 f"{self.pending} waiting for an interleaved comparison."]
        if not decided:
            return "\n".join(lines)
        right = sum(bool(s.direction_right) for s in decided)
        lines.append(f"Direction right in {right} of {len(decided)} ({right / len(decided) * 100:.0f} %).")
        cover = self.coverage()
        if cover:
            parts = [f"{held} of {judged} at {conf * 100:.0f} % stated" for conf, (held, judged) in cover.items()]
            lines.append("Ranges that held the measurement: " + "; ".join(parts) + ".")
            lines.append(f"Mean interval score (log speed-up; lower is better): {self.mean_interval_score:.2f}.")
        misses = self.misses()
        if misses:
            lines.append("Misses by knob: " + ", ".join(
                f"{k} {v} ({self.mechanism_of(k) if k != '(no knob named)' else 'unknown'})"
                for k, v in misses.items()) + ".")
        return "\n".join(lines)


def _latest(scores: Iterable[Score]) -> Tuple[Score, ...]:
    latest: Dict[str, Score] = {}
    for s in scores:
        key = s.prediction.id or str(id(s))
        if key not in latest or s.scored_at >= latest[key].scored_at:
            latest[key] = s
    return tuple(sorted(latest.values(), key=lambda s: s.prediction.made_at))


def calibration(scored: Scored, *, mechanism_of: Optional[Callable[[str], str]] = None) -> Calibration:
    """Sum up scored predictions (``tfwb.calibration``).

    Args:
        scored: ``Score`` records, or a predictions file (``tfwb.prediction.predictions_path``), or a
            folder: every predictions file under it (the whole book).
        mechanism_of: knob -> its mechanism; default: the knob's declared role.

    Returns:
        A ``Calibration``; ``.text()`` says it in words.
    """
    if isinstance(scored, (str, os.PathLike)):
        records: Sequence[Score] = load_scores(scored)
    else:
        records = list(scored)
    bad = [type(s).__name__ for s in records if not isinstance(s, Score)]
    if bad:
        raise TypeError(f"scored must hold tfwb.prediction.Score records, got {bad[0]}")
    return Calibration(_latest(records), mechanism_of or _role)
