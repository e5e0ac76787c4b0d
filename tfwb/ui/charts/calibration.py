"""The calibration chart: each prediction's range of the speed-up against the speed-up measured.

One vertical bar per decided prediction with a range, at the measured speed-up (baseline time /
candidate time) on x, spanning the predicted speed-ups on y, both on a log scale; green when the
range held the measurement, orange when it missed. A perfect prediction's bar crosses the
diagonal. Predictions still waiting for an interleaved comparison and predictions without a
range are not drawn; the note under the chart counts them.

``calibration_points`` is the pure part (what to draw), ``draw_calibration`` draws on an Axes,
``calibration_png`` returns PNG bytes like every chart of ``tfwb.ui.charts``. The summary in words
is ``tfwb.scorecard.Calibration.text``; the scores come from ``tfwb.prediction``.

Example:
    >>> from tfwb.prediction import predict
    >>> from tfwb.scorecard import calibration
    >>> from tfwb.stats import compare_rounds
    >>> cal = calibration([predict("faster", between=(1.5, 3.0), about="prefetch=True")
    ...                    .score(compare_rounds([2.0] * 8, [1.0] * 8))])
    >>> calibration_png(cal)[:4]
    b'\\x89PNG'
"""
from __future__ import annotations

import math
import textwrap
from dataclasses import dataclass
from typing import Any, List, Sequence, Tuple

from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter

from tfwb.scorecard import Calibration, knob_of
from tfwb.ui.charts.common import BASELINE_COLOR, MUTED_COLOR, SMALL, figure_png, message

__all__ = ["RangePoint", "calibration_points", "draw_calibration", "calibration_png", "HELD_COLOR",
           "MISSED_COLOR", "RANGE_GID"]

HELD_COLOR = "#1a7f37"       # the range held the measurement (the verdict table's "faster" green)
MISSED_COLOR = "#c4570c"     # it missed (orange: red means a failed run)
#: ``gid`` of the LineCollections that draw the ranges (one segment per prediction).
RANGE_GID = "tfwb-calibration-ranges"
#: Most ranges named by their knob beside the bar; more would overlap.
MAX_NAMED = 12
_TICKS = (0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000)
_NEAR_ONE = (0.8, 0.9, 1, 1.1, 1.25)


@dataclass(frozen=True)
class RangePoint:
    """One drawn prediction: its measured speed-up, the speed-up range it predicted, and whether it held."""

    label: str
    measured: float
    low: float
    high: float
    held: bool


def calibration_points(cal: Calibration) -> Tuple[List[RangePoint], int, int]:
    """What the chart draws: ``(points, pending, without_range)``.

    ``points``: the decided predictions with a range, as speed-ups (a "slower, 2-5x" range is the
    speed-ups 0.2-0.5); ``pending``: predictions waiting for an interleaved comparison;
    ``without_range``: decided predictions that stated only a direction.
    """
    points: List[RangePoint] = []
    without_range = 0
    for s in cal.decided:
        bounds = s.prediction.log_range()
        if bounds is None or not (s.speedup > 0 and math.isfinite(s.speedup)):
            without_range += 1
            continue
        points.append(RangePoint(label=knob_of(s.prediction.about) or s.prediction.about or "",
                                 measured=float(s.speedup), low=math.exp(bounds[0]), high=math.exp(bounds[1]),
                                 held=bool(s.range_held)))
    return points, cal.pending, without_range


def _limits(points: Sequence[RangePoint]) -> Tuple[float, float]:
    values = [v for p in points for v in (p.measured, p.low, p.high)] + [1.0]
    low, high = min(values), max(values)
    span = max(math.log10(high / low), 0.3)
    pad = 10 ** (0.12 * span)
    return low / pad, high * pad


def _ticks(ax: Axes, low: float, high: float) -> None:
    ticks = [t for t in _TICKS if low <= t <= high]
    if len(ticks) < 3:
        ticks = sorted(set(ticks) | {t for t in _NEAR_ONE if low <= t <= high})
    fmt = FuncFormatter(lambda v, _pos: f"{v:g}x")
    for axis in (ax.xaxis, ax.yaxis):
        axis.set_major_locator(FixedLocator(ticks))
        axis.set_major_formatter(fmt)
        axis.set_minor_formatter(NullFormatter())
    ax.tick_params(labelsize=SMALL)


def _note(cal: Calibration, points: Sequence[RangePoint], pending: int, without_range: int) -> str:
    held = sum(p.held for p in points)
    parts = []
    if points:
        parts.append(f"{len(points)} range{'s' if len(points) != 1 else ''} drawn, {held} held the measurement")
        stated = sorted({f"{c * 100:.0f} %" for c in cal.coverage()})
        parts[0] += f" (stated: {', '.join(stated)})" if stated else ""
    if pending:
        parts.append(f"{pending} waiting for an interleaved comparison")
    if without_range:
        parts.append(f"{without_range} without a range")
    if not parts:
        return "No prediction yet."
    return "; ".join(parts) + ("" if len(parts) == 1 or not points else " (not drawn)") + "."


def _name(ax: Axes, points: Sequence[RangePoint], low: float, high: float) -> None:
    """Each bar's knob, written along the bar: up from its top, or down from its bottom when the
    top is in the upper half of the chart (so names stay inside and barely take any width)."""
    middle = math.sqrt(low * high)
    for p in points:
        if not p.label:
            continue
        up = p.high < middle
        ax.annotate(p.label, (p.measured, p.high if up else p.low), xytext=(0, 4 if up else -4),
                    textcoords="offset points", rotation=90, ha="center", va="bottom" if up else "top",
                    fontsize=SMALL, color=MUTED_COLOR)


def draw_calibration(ax: Axes, cal: Calibration) -> int:
    """Draw each decided prediction's range against the measured speed-up on ``ax``.

    Args:
        ax: the Axes to draw on.
        cal: a ``tfwb.scorecard.Calibration`` (``tfwb.calibration(...)``).

    Returns:
        The number of ranges drawn.
    """
    points, pending, without_range = calibration_points(cal)
    note = _note(cal, points, pending, without_range)
    if not points:
        message(ax, "No decided prediction with a range yet.\n" + note if cal.scores else note)
        return 0
    low, high = _limits(points)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(low, high)
    ax.set_ylim(low, high)
    ax.plot([low, high], [low, high], color=BASELINE_COLOR, linestyle="--", linewidth=1, zorder=1)
    ax.axvline(1.0, color=BASELINE_COLOR, linewidth=0.6, alpha=0.5, zorder=0)
    ax.axhline(1.0, color=BASELINE_COLOR, linewidth=0.6, alpha=0.5, zorder=0)
    for held, color in ((True, HELD_COLOR), (False, MISSED_COLOR)):
        group = [p for p in points if p.held is held]
        if not group:
            continue
        xs = [p.measured for p in group]
        lines = ax.vlines(xs, [p.low for p in group], [p.high for p in group], colors=color, linewidth=3,
                          alpha=0.85, zorder=3)
        lines.set_gid(RANGE_GID)
        ax.plot(xs, xs, linestyle="none", marker="o", markersize=3.5, color="white",
                markeredgecolor=color, zorder=4)
    if len(points) <= MAX_NAMED:
        _name(ax, points, low, high)
    ax.set_xlabel("measured speed-up (baseline time / candidate time)", fontsize=9)
    ax.set_ylabel("predicted speed-up (your range)", fontsize=9)
    _ticks(ax, low, high)
    ax.grid(True, alpha=0.25)
    handles = [Line2D([], [], color=HELD_COLOR, linewidth=3, label="range held the measurement"),
               Line2D([], [], color=MISSED_COLOR, linewidth=3, label="range missed it"),
               Line2D([], [], color=BASELINE_COLOR, linestyle="--", label="prediction = measurement"),
               Line2D([], [], linestyle="none", marker="o", markersize=3.5, color="white",
                      markeredgecolor=MUTED_COLOR, label="where the bar should cross")]
    ax.legend(handles=handles, fontsize=SMALL, loc="upper left", frameon=False)
    ax.set_title("\n".join(textwrap.wrap(note, 88)), fontsize=SMALL, color=MUTED_COLOR, loc="left")
    return len(points)


def calibration_png(cal: Calibration, *, width_in: float = 6.0, height_in: float = 5.0) -> bytes:
    """The calibration chart as PNG bytes (for an ``ipywidgets.Image`` or ``IPython.display.Image``).

    Args:
        cal: a ``tfwb.scorecard.Calibration``.
        width_in / height_in: the figure's size in inches.
    """
    fig = Figure(figsize=(width_in, height_in), dpi=100)
    ax: Any = fig.subplots()
    draw_calibration(ax, cal)
    fig.tight_layout()
    return figure_png(fig)
