"""One run's step times (stacked bars: waiting for input, the rest), and the run's chart:
step times above its utilization.

``draw_step_times`` draws on an Axes; ``run_chart_png`` is what the Workbench shows
for a run. Shared colours and the Figure -> PNG step are in ``tfwb.ui.charts.common``.
"""
from __future__ import annotations

import textwrap

from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import FuncFormatter, MaxNLocator

from tfwb import stats
from tfwb.records import RunResult
from tfwb.ui.charts.common import (COMPUTE_COLOR, FAILED_COLOR, INPUT_COLOR, MEDIAN_COLOR, MUTED_COLOR,
                                   SMALL, WARMUP_COLOR, failure_text, figure_png, message, run_name,
                                   shorten)
from tfwb.ui.charts.utilization import draw_utilization

__all__ = ["draw_step_times", "run_chart_png", "CLIP_FACTOR", "WARMUP_WAIT_COLOR"]

#: A warm-up step's wait for its batch (darker than the rest of a warm-up bar).
WARMUP_WAIT_COLOR = "#8c8c8c"
#: The step-time y axis stops at this multiple of the measured steps' 95th percentile.
CLIP_FACTOR = 3.0


def draw_step_times(ax: Axes, result: RunResult) -> None:
    """Stacked bars of each step's time: waiting for input (bottom) and the rest (top).

    Warm-up steps are drawn grey and hatched, left of a dashed divider, labelled
    "warm-up"; measured steps are numbered from 1 to its right, with their median as
    a line. The y axis (ms) stops at ``CLIP_FACTOR`` times the measured steps' 95th
    percentile when a bar (usually the first warm-up step: tracing, compilation) is
    taller; such bars are annotated with their true value.

    Args:
        ax: where to draw.
        result: a RunResult; a run with no steps gets a message instead of axes
            (the error, in ``FAILED_COLOR``, for a run that did not finish).

    Example:
        >>> fig = Figure(); draw_step_times(fig.subplots(), result)
    """
    measured_ms = [t * 1e3 for t in result.step_times_s]
    warmup_ms = [t * 1e3 for t in result.warmup_times_s]
    if result.status != "ok":
        why = "\n".join(textwrap.wrap(shorten(failure_text(result), 240), 90))    # wrapped, never cut mid-word
        ax.set_title(f"{run_name(result)}: time per step \u2014 {why}", fontsize=10, loc="left", color=FAILED_COLOR)
    else:
        ax.set_title(f"{run_name(result)}: time per step", fontsize=10, loc="left")
    ax.set_ylabel("step time (ms)")
    if not measured_ms and not warmup_ms:
        failed = result.status != "ok"
        message(ax, failure_text(result) if failed else "no steps measured",
                FAILED_COLOR if failed else MUTED_COLOR)
        return

    n_warm = len(warmup_ms)
    x_warm = [i - n_warm for i in range(n_warm)]               # -n .. -1
    x_meas = list(range(1, len(measured_ms) + 1))               # 1 .. N, divider at 0
    width = 0.8

    # Warm-up: grey, hatched; its input wait (when known) darker at the bottom.
    if warmup_ms:
        wait_w = [w * 1e3 for w in result.warmup_input_wait_s] if (
            len(result.warmup_input_wait_s) == n_warm) else [0.0] * n_warm
        wait_w = [min(w, t) for t, w in zip(warmup_ms, wait_w)]
        rest_w = [t - w for t, w in zip(warmup_ms, wait_w)]
        if any(wait_w):
            ax.bar(x_warm, wait_w, width, color=WARMUP_WAIT_COLOR, hatch="//", edgecolor="white",
                   linewidth=0)
        ax.bar(x_warm, rest_w, width, bottom=wait_w, color=WARMUP_COLOR, hatch="//",
               edgecolor="white", linewidth=0)

    if measured_ms:
        if len(result.input_wait_s) == len(measured_ms):
            wait_m = [w * 1e3 for w in result.input_wait_s]
        else:
            wait_m = [0.0] * len(measured_ms)
        wait_m = [min(w, t) for t, w in zip(measured_ms, wait_m)]
        rest_m = [t - w for t, w in zip(measured_ms, wait_m)]
        ax.bar(x_meas, wait_m, width, color=INPUT_COLOR, linewidth=0)
        ax.bar(x_meas, rest_m, width, bottom=wait_m, color=COMPUTE_COLOR, linewidth=0)
        med = stats.median(measured_ms)
        ax.hlines(med, 0.5, len(measured_ms) + 0.5, colors=MEDIAN_COLOR, linestyles="-", linewidth=1.2)

    # Clip tall bars so the measured steps stay readable.
    reference = measured_ms or warmup_ms
    p95 = stats.quantile(reference, 0.95)
    tallest = max(measured_ms + warmup_ms)
    clipped = tallest > CLIP_FACTOR * p95
    top = CLIP_FACTOR * p95 if clipped else tallest * 1.12
    ax.set_ylim(0, top if top > 0 else 1.0)
    if clipped:
        for x, value in zip(x_warm + x_meas, warmup_ms + measured_ms):
            if value > top:
                ax.text(x, top * 0.97, f"{value:,.0f} ms \u2191", rotation=90, ha="center", va="top",
                        fontsize=SMALL, color="black",
                        bbox=dict(facecolor="white", edgecolor="none", alpha=0.85, pad=1.0))

    _label_axes(ax, result, warmup_ms, measured_ms, x_warm, x_meas)
    ax.grid(axis="y", alpha=0.3)
    ax.set_axisbelow(True)


def _label_axes(ax: Axes, result: RunResult, warmup_ms: list, measured_ms: list, x_warm: list,
                x_meas: list) -> None:
    """The warm-up divider and label, the x axis and the legend of ``draw_step_times``."""
    # Divider and the warm-up label.
    if warmup_ms:
        ax.axvline(0, color=MUTED_COLOR, linestyle="--", linewidth=1)
        # On the tick-label line, under the warm-up bars (ticks there are blank).
        ax.text((x_warm[0] + x_warm[-1]) / 2, -0.035, "warm-up", transform=ax.get_xaxis_transform(),
                ha="center", va="top", fontsize=9, color=MUTED_COLOR)
    left = (x_warm[0] if warmup_ms else 1) - 0.6
    right = (x_meas[-1] if measured_ms else 0) + 0.6
    ax.set_xlim(left, right)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True, nbins=12))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:.0f}" if v >= 1 else ""))
    spc = max(getattr(result, "steps_per_call", 1) or 1, 1)
    unit = f"call of {spc} steps (its time / {spc} per step)" if spc > 1 else "step"   # one bar per call
    ax.set_xlabel(f"measured {unit}" + (f" (warm-up {'calls' if spc > 1 else 'steps'} left of the dashed line)"
                                        if warmup_ms else ""))

    if getattr(result, "input_wait_s", None):
        handles = [Patch(color=INPUT_COLOR, label="waiting for input"), Patch(color=COMPUTE_COLOR, label="rest of step")]
    else:   # model.fit under tfwb.keras.Monitor: the wait is inside fit's graph, not measured (never a zero)
        handles = [Patch(color=COMPUTE_COLOR, label="step (input wait not measured)")]
    if warmup_ms:
        handles.append(Patch(facecolor=WARMUP_COLOR, hatch="//", edgecolor="white", label="warm-up (excluded)"))
    if measured_ms:
        handles.append(Line2D([], [], color=MEDIAN_COLOR, linewidth=1.2,
                              label=f"median {stats.median(measured_ms):,.1f} ms"))
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=SMALL,
              frameon=False, borderaxespad=0)


def run_chart_png(result: RunResult, *, width_in: float = 9.0, height_in: float = 5.6,
                  dpi: float = 96) -> bytes:
    """One run's chart: step times above, utilization below, as PNG bytes.

    A run that did not finish and measured nothing gives one panel with its error
    (in ``FAILED_COLOR``) instead of empty axes; the Workbench keeps showing the
    last good chart beside it.

    Args:
        result: the run to draw.
        width_in / height_in: figure size in inches.
        dpi: pixels per inch.

    Returns:
        PNG bytes.

    Example:
        >>> run_chart_png(result)[:4]
        b'\\x89PNG'
    """
    if not result.step_times_s and not result.warmup_times_s and not result.samples:
        fig = Figure(figsize=(width_in, 1.2), dpi=dpi, layout="constrained")
        ax = fig.subplots()
        failed = result.status != "ok"
        message(ax, f"{run_name(result)}: " + (failure_text(result) if failed else "no steps measured"),
                FAILED_COLOR if failed else MUTED_COLOR, width=110)
        return figure_png(fig)
    fig = Figure(figsize=(width_in, height_in), dpi=dpi, layout="constrained")
    top, bottom = fig.subplots(2, 1, height_ratios=[3, 2])
    draw_step_times(top, result)
    draw_utilization(bottom, result)
    return figure_png(fig)
