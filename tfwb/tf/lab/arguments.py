"""Checks of the chapters' instruments' arguments, with messages that name the argument.

Shared by ``convergence``, ``learning_rates``, ``clipping`` and ``held_out``: a bad value
fails before any work, as a bad knob fails at ``RunConfig(...)``.
"""
from __future__ import annotations

import math
from typing import Any


def positive_int(name: str, value: Any, minimum: int = 1) -> int:
    """``value`` when it is an integer >= ``minimum`` (not a bool).

    Raises:
        ValueError: naming ``name`` and the value otherwise.

    Example:
        >>> positive_int("steps", 3)
        3
    """
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name}={value!r} is not allowed; {name} must be an integer >= {minimum}")
    return value


def finite_number(name: str, value: Any) -> float:
    """``value`` as a float when it is a finite number (not a bool).

    Raises:
        ValueError: naming ``name`` and the value otherwise.

    Example:
        >>> finite_number("target", 1)
        1.0
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"{name}={value!r} is not allowed; {name} must be a finite number")
    return float(value)
