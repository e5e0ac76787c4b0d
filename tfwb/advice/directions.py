"""The expected directions of a change: the words a rule answers with, and one ``Expected``.

- ``FASTER``, ``SLOWER``, ``SAME``, ``NOT_SLOWER``, ``NOT_FASTER`` (``DIRECTIONS``): the
  candidate relative to the baseline;
- ``Expected``: the direction a rule (``tfwb.advice.rules``) gives a change on one machine,
  and why;
- ``combine``: one expectation for several knobs turned at once.

The checks (``tfwb.expect.checks``) test a measurement against these directions.

Pure: no TensorFlow; reads ``tfwb.stats``'s verdict words only.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

from tfwb import stats

#: Directions an A/B expectation may take (the candidate relative to the baseline).
FASTER, SLOWER, SAME = stats.FASTER, stats.SLOWER, stats.NO_DIFFERENCE
NOT_SLOWER, NOT_FASTER = "not slower", "not faster"
DIRECTIONS = (FASTER, SLOWER, SAME, NOT_SLOWER, NOT_FASTER)


@dataclass(frozen=True)
class Expected:
    """The expected direction of a change on one machine, and why.

    Attributes:
        direction (str | None): one of ``DIRECTIONS``; ``None`` where the book has no
            fixed expectation on this hardware (``why`` says what it depends on).
        why (str): the reason, one clause, on this hardware.
        than (str): what the change is compared with, e.g. ``"float32"``.
    """

    direction: Optional[str]
    why: str
    than: str = "the baseline"

    def __post_init__(self) -> None:
        if self.direction is not None and self.direction not in DIRECTIONS:
            raise ValueError(f"direction={self.direction!r} is not allowed; one of {DIRECTIONS} or None")

    def text(self) -> str:
        """e.g. ``"slower than float32: no native float16 arithmetic ..."``."""
        if self.direction is None:
            return f"no fixed expectation: {self.why}"
        joint = "from" if self.direction == SAME else "than"
        return f"{self.direction} {joint} {self.than}: {self.why}"

    __str__ = text


def combine(parts: Sequence[Expected]) -> Expected:
    """One expectation for several knobs turned at once.

    Raises:
        ValueError: the parts pull in different directions.

    Example:
        >>> combine([Expected(FASTER, "a"), Expected(NOT_SLOWER, "b")]).direction
        'faster'
        >>> combine([Expected(FASTER, "a"), Expected(None, "b")]).direction is None
        True
    """
    if len(parts) == 1:
        return parts[0]
    directions = {p.direction for p in parts}
    why = "; ".join(dict.fromkeys(p.why for p in parts))      # a reason two knobs share, once
    than = "the baseline"
    if len(directions) == 1:
        return Expected(parts[0].direction, why, than)
    if None not in directions and directions <= {FASTER, NOT_SLOWER}:
        return Expected(FASTER, why, than)
    if None not in directions and directions <= {SLOWER, NOT_FASTER}:
        return Expected(SLOWER, why, than)
    if None not in directions and directions <= {NOT_SLOWER, NOT_FASTER, SAME}:
        return Expected(SAME if directions == {SAME} else None, why, than)
    opposed = ((FASTER in directions and directions & {SLOWER, NOT_FASTER})
               or (SLOWER in directions and directions & {FASTER, NOT_SLOWER}))
    if None in directions and not opposed:   # one part has no fixed direction: neither has the whole
        return Expected(None, why, than)
    raise ValueError("these changes pull in different directions on this hardware "
                     f"({', '.join(sorted(str(d) for d in directions))}): check them one at a time")
