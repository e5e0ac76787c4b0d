"""A reader's prediction of an experiment, and its score against what the book measured.

Predict, then measure: before a change runs, the reader says which way it goes (``faster``,
``slower`` or ``no difference``), optionally by how much (a range of the factor, e.g. 1.5-3x) and
how sure they are (the range's confidence). ``Prediction.score(verdict)`` scores it against the
measured comparison of the pair: ``tfwb.stats.Comparison`` (two separate runs) or
``tfwb.stats.RoundsComparison`` (interleaved rounds). It says:

- whether the direction was right ("no difference" is right when the verdict is "no significant
  difference");
- whether the range held the measured factor;
- the range's interval score (Gneiting and Raftery, JASA 102, 2007, section 6.2) at the stated
  confidence, on the natural log of the speed-up, so a range twice too wide and a miss by a factor
  of two cost alike whichever way the change goes. Lower is better; a range that holds the
  measurement scores its own width.

A verdict that cannot decide ("cannot tell: the machine was busy", too few steps or rounds) is not
a miss: the score is ``pending`` until the pair is decided (interleaved).

``Score`` and ``Prediction`` are plain frozen data with ``to_json`` / ``from_json``: they are kept
in a JSON-lines file beside the run history (``tfwb.history.History(path, record=Score)``; see
``predictions_path``), torn-record-safe like the runs. ``tfwb.scorecard`` sums many up.

Example:
    >>> from tfwb.stats import compare_rounds
    >>> p = predict("faster", between=(1.5, 3.0), confidence=0.8, about="prefetch=True")
    >>> s = p.score(compare_rounds([2.0] * 8, [1.0] * 8))
    >>> s.direction_right, s.range_held, round(s.interval_score, 3), s.text()
    (True, True, 0.693, 'faster, 1.5-3x (80 %): right; 2.00x faster lies in the range')

Pure: standard library and ``tfwb.stats`` only.
"""
from __future__ import annotations

import json
import math
import os
import time
import uuid
from dataclasses import asdict, dataclass, field
from typing import Any, Optional, Tuple

from tfwb import stats

__all__ = ["FASTER", "SLOWER", "NO_DIFFERENCE", "DIRECTIONS", "CONFIDENCES", "Prediction", "Score",
           "predict", "interval_score", "predictions_path"]

FASTER, SLOWER, NO_DIFFERENCE = "faster", "slower", "no difference"
DIRECTIONS = (FASTER, SLOWER, NO_DIFFERENCE)
#: The confidences the prediction widget offers; any value in (0, 1) is accepted from code.
CONFIDENCES = (0.5, 0.8, 0.95)
#: The measured verdict each direction is right against.
_RIGHT_WHEN = {FASTER: stats.FASTER, SLOWER: stats.SLOWER, NO_DIFFERENCE: stats.NO_DIFFERENCE}
_DECIDED = (stats.FASTER, stats.SLOWER, stats.NO_DIFFERENCE)


def interval_score(low: float, high: float, observed: float, confidence: float) -> float:
    """Gneiting and Raftery's interval score of the central ``confidence`` interval ``[low, high]``.

    ``(high - low) + 2/alpha * (low - x)`` when ``x`` is below the interval, ``+ 2/alpha * (x - high)``
    when above, with ``alpha = 1 - confidence``: the width, plus a penalty for a miss that grows the
    surer the reader said they were. Negatively oriented (lower is better), proper.

    Example:
        >>> interval_score(0.0, 1.0, 0.5, 0.5), interval_score(0.0, 1.0, 2.0, 0.5)
        (1.0, 5.0)
    """
    alpha = 1.0 - confidence
    penalty = (low - observed if observed < low else observed - high if observed > high else 0.0)
    return (high - low) + 2.0 / alpha * penalty


@dataclass(frozen=True)
class Prediction:
    """What a reader expects of one change, before it runs (``predict`` checks and builds it).

    Attributes:
        direction: ``"faster"``, ``"slower"`` or ``"no difference"``.
        between: a range of the factor in the predicted direction (``(1.5, 3.0)``: 1.5-3x faster
            for "faster", 1.5-3x slower for "slower"; for "no difference", a range of the speed-up
            around 1, e.g. ``(0.95, 1.05)``), or None: no range, no interval score.
        confidence: how sure the reader is that the range holds the measurement, in (0, 1).
        about: the change or the pair it is about (``"prefetch=True"``), or None.
        why: the reader's reason, in a sentence.
        made_at: when it was made (seconds since the epoch).
        id: a key that ties the prediction to its later score.
    """

    direction: str
    between: Optional[Tuple[float, float]] = None
    confidence: float = 0.8
    about: Optional[str] = None
    why: str = ""
    made_at: float = 0.0
    id: str = ""

    def log_range(self) -> Optional[Tuple[float, float]]:
        """The range as natural logs of the speed-up (baseline time / candidate time), or None."""
        if self.between is None:
            return None
        low, high = (math.log(v) for v in self.between)
        return (-high, -low) if self.direction == SLOWER else (low, high)

    def text(self) -> str:
        """``"faster, 1.5-3x (80 %)"``, ``"no difference"``: the prediction as the tables show it."""
        if self.between is None:
            return self.direction
        low, high = self.between
        return f"{self.direction}, {low:g}-{high:g}x ({self.confidence * 100:.0f} %)"

    def score(self, verdict: Any) -> "Score":
        """Score against a measured comparison (``stats.Comparison`` or ``stats.RoundsComparison``).

        Args:
            verdict: anything with ``verdict`` (a ``tfwb.stats`` verdict string) and ``speedup``
                (baseline time / candidate time); its ``rounds`` attribute, when present, marks an
                interleaved comparison.

        Returns:
            A ``Score``; ``pending`` (nothing judged) when the verdict does not decide.
        """
        interleaved = getattr(verdict, "rounds", None) is not None
        base = dict(prediction=self, verdict=verdict.verdict, speedup=float(verdict.speedup),
                    interleaved=interleaved)
        if verdict.verdict not in _DECIDED:
            return Score(**base)
        right = verdict.verdict == _RIGHT_WHEN[self.direction]
        held: Optional[bool] = None
        score: Optional[float] = None
        bounds = self.log_range()
        if bounds is not None:
            x = math.log(verdict.speedup)
            held = bounds[0] <= x <= bounds[1]
            score = interval_score(bounds[0], bounds[1], x, self.confidence)
        return Score(**base, decided=True, direction_right=right, range_held=held, interval_score=score)

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_dict(cls, data: dict) -> "Prediction":
        between = data.get("between")
        return predict(data["direction"], between=tuple(between) if between else None,
                       confidence=data.get("confidence", 0.8), about=data.get("about"), why=data.get("why", ""),
                       made_at=data.get("made_at", 0.0), id=data.get("id", ""))


@dataclass(frozen=True)
class Score:
    """A prediction against what was measured.

    Attributes:
        prediction: the ``Prediction``.
        verdict: the measured verdict (``tfwb.stats``: ``faster``, ``slower``, ``no significant
            difference``, or one that does not decide).
        speedup: the measured baseline time / candidate time.
        interleaved: True when the verdict came from interleaved rounds.
        decided: False while the verdict does not decide ("cannot tell"): nothing is judged then.
        direction_right: whether the direction matched the verdict (None while pending).
        range_held: whether the range held the measured factor (None: pending, or no range).
        interval_score: the range's interval score on log speed-up (None: pending, or no range).
        scored_at: when it was scored.
    """

    prediction: Prediction
    verdict: str
    speedup: float
    interleaved: bool = False
    decided: bool = False
    direction_right: Optional[bool] = None
    range_held: Optional[bool] = None
    interval_score: Optional[float] = None
    scored_at: float = field(default_factory=time.time)

    @property
    def pending(self) -> bool:
        return not self.decided

    def measured_text(self) -> str:
        """``"2.00x faster"``, ``"1.05x slower: no significant difference"``: what was measured."""
        head = stats.ratio_text(self.speedup)
        return head if self.verdict in (stats.FASTER, stats.SLOWER) else f"{head}: {self.verdict}"

    def text(self) -> str:
        """One line: the prediction, right or wrong, and where the measurement fell.

        Example:
            >>> from tfwb.stats import compare
            >>> busy = compare([1.0] * 9, [0.5] * 9, other_cpu_pct=(30.0, 2.0))
            >>> predict("faster").score(busy).text()
            'faster: not scored yet (cannot tell: the machine was busy); an interleaved comparison decides'
        """
        said = self.prediction.text()
        if self.pending:
            return f"{said}: not scored yet ({self.verdict}); an interleaved comparison decides"
        out = f"{said}: {'right' if self.direction_right else 'wrong'}"
        if self.range_held is not None:
            out += f"; {self.measured_text()} {'lies in' if self.range_held else 'lies outside'} the range"
        elif not self.direction_right:
            out += f"; measured {self.measured_text()}"
        return out

    def to_json(self) -> str:
        data = asdict(self)
        return json.dumps(data)

    @classmethod
    def from_json(cls, text: str) -> "Score":
        """Read a line written by ``to_json``.

        Raises:
            ValueError: the text is not a complete Score (a torn line, another record).
        """
        try:
            data = json.loads(text)
            data["prediction"] = Prediction.from_dict(data["prediction"])
            return cls(**data)
        except (TypeError, KeyError, json.JSONDecodeError) as e:
            raise ValueError(f"not a Score: {e}") from None


def _checked_between(between: Any, direction: str) -> Optional[Tuple[float, float]]:
    if between is None:
        return None
    try:
        low, high = (float(v) for v in between)
    except (TypeError, ValueError):
        raise ValueError(f"between={between!r}: must be None or two ratios (low, high), e.g. (1.5, 3.0)") from None
    if not (0 < low <= high) or math.isinf(high):
        raise ValueError(f"between={between!r}: must be two finite ratios with 0 < low <= high")
    if direction != NO_DIFFERENCE and low < 1:
        raise ValueError(f"between={between!r}: a {direction!r} range is the factor it is {direction} by, "
                         "each at least 1 (e.g. (1.5, 3.0)); use direction='no difference' for a range around 1")
    return low, high


def predict(direction: str, *, between: Optional[Tuple[float, float]] = None, confidence: float = 0.8,
            about: Optional[str] = None, why: str = "", made_at: Optional[float] = None,
            id: Optional[str] = None) -> Prediction:
    """A checked ``Prediction`` (``tfwb.predict``).

    Args:
        direction: ``"faster"``, ``"slower"`` or ``"no difference"``.
        between: the factor's range in that direction, e.g. ``(1.5, 3.0)``; None: no range.
        confidence: how sure, in (0, 1); the widget offers 0.5, 0.8 and 0.95.
        about: the change or pair it is about.
        why: the reason, in a sentence.
        made_at / id: kept when reading a stored prediction back; new ones get now and a fresh id.

    Raises:
        ValueError: a field's value is not allowed; the message names the field, the value and
            what is allowed.

    Example:
        >>> predict("faster", between=(3, 1.5))
        Traceback (most recent call last):
        ...
        ValueError: between=(3, 1.5): must be two finite ratios with 0 < low <= high
    """
    if direction not in DIRECTIONS:
        raise ValueError(f"direction={direction!r}: must be one of {', '.join(map(repr, DIRECTIONS))}")
    if isinstance(confidence, bool) or not isinstance(confidence, (int, float)) or not 0 < confidence < 1:
        raise ValueError(f"confidence={confidence!r}: must be a number between 0 and 1, e.g. 0.8")
    return Prediction(direction=direction, between=_checked_between(between, direction),
                      confidence=float(confidence), about=None if about is None else str(about),
                      why=str(why or ""), made_at=time.time() if made_at is None else float(made_at),
                      id=id or uuid.uuid4().hex[:12])


def predictions_path(history_path: "os.PathLike[str] | str") -> str:
    """Where the predictions of a run history are kept: ``runs.jsonl`` -> ``runs.predictions.jsonl``.

    Example:
        >>> predictions_path("tfwb-runs/ch00.jsonl")
        'tfwb-runs/ch00.predictions.jsonl'
    """
    root, ext = os.path.splitext(os.fspath(history_path))
    return f"{root}.predictions{ext or '.jsonl'}"
