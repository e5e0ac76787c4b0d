"""Charts of runs: step times, utilization over time, and a comparison of runs.

Owns drawing only. Every ``draw_*`` function takes a matplotlib ``Axes`` and plain
data (RunResults) and draws on it; ``figure_png`` turns a ``Figure`` into PNG
bytes for an ``ipywidgets.Image``. Figures are built with
``matplotlib.figure.Figure``, never pyplot: nothing global is created or left open,
no inline figure appears at the end of a cell, and it works headless (Agg).
"""
from __future__ import annotations

import io
from typing import Optional, Sequence

from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import Patch
from matplotlib.ticker import FuncFormatter, MaxNLocator

from .. import report, stats
from ..config import RunConfig
from ..records import RunResult

#: Colors used across the charts.
INPUT_COLOR = "#f28e2b"      # waiting for input
COMPUTE_COLOR = "#4e79a7"    # the rest of the step
WARMUP_COLOR = "#bab0ac"     # warm-up steps (excluded from statistics)
WARMUP_WAIT_COLOR = "#8c8c8c"
MEDIAN_COLOR = "#222222"
FAILED_COLOR = "#cc0000"
BASELINE_COLOR = "#8c8c8c"
GPU_COLORS = ("#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#af7aa1")

#: The step-time y axis stops at this multiple of the measured steps' 95th percentile.
CLIP_FACTOR = 3.0
_SMALL = 8
_LABEL_CHARS = 38


def figure_png(fig: Figure, *, dpi: Optional[float] = None) -> bytes:
    """Render a figure to PNG bytes.

    Args:
        fig: a ``matplotlib.figure.Figure`` (not registered with pyplot).
        dpi: resolution; default the figure's own.

    Returns:
        The PNG file's bytes (they start with ``b"\\x89PNG"``).

    Example:
        >>> fig = Figure(figsize=(2, 1)); _ = fig.subplots().plot([1, 2])
        >>> figure_png(fig)[:4]
        b'\\x89PNG'
    """
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi if dpi is not None else fig.dpi)
    return buf.getvalue()


def _name(result: RunResult) -> str:
    return result.config.label or result.config.workload


def _note(ax: Axes, text: str, color: str = "#555555") -> None:
    ax.text(0.5, 0.5, text, transform=ax.transAxes, ha="center", va="center",
            fontsize=9, color=color, wrap=True)


def _shorten(text: str, limit: int = _LABEL_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"


def draw_step_times(ax: Axes, result: RunResult) -> None:
    """Stacked bars of each step's time: waiting for input (bottom) and the rest (top).

    Warm-up steps are drawn grey and hatched, left of a dashed divider, labelled
    "warm-up"; measured steps are numbered from 1 to its right, with their median as
    a line. The y axis (ms) stops at ``CLIP_FACTOR`` times the measured steps' 95th
    percentile when a bar (usually the first warm-up step: tracing, compilation) is
    taller; such bars are annotated with their true value.

    Args:
        ax: where to draw.
        result: a RunResult; a run with no steps gets a note instead of bars.

    Example:
        >>> fig = Figure(); draw_step_times(fig.subplots(), result)  # doctest: +SKIP
    """
    measured_ms = [t * 1e3 for t in result.step_times_s]
    warmup_ms = [t * 1e3 for t in result.warmup_times_s]
    ax.set_title(f"{_name(result)}: time per step", fontsize=10, loc="left")
    ax.set_ylabel("step time (ms)")
    if not measured_ms and not warmup_ms:
        text = "no steps measured"
        if result.status != "ok":
            text = f"run {result.status}: {result.error or 'no steps measured'}"
        _note(ax, _shorten(text, 90), FAILED_COLOR if result.status != "ok" else "#555555")
        ax.set_xticks([])
        ax.set_yticks([])
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
                        fontsize=_SMALL, color="black",
                        bbox=dict(facecolor="white", edgecolor="none", alpha=0.85, pad=1.0))

    # Divider and the warm-up label.
    if warmup_ms:
        ax.axvline(0, color="#555555", linestyle="--", linewidth=1)
        # On the tick-label line, under the warm-up bars (ticks there are blank).
        ax.text((x_warm[0] + x_warm[-1]) / 2, -0.035, "warm-up", transform=ax.get_xaxis_transform(),
                ha="center", va="top", fontsize=9, color="#555555")
    left = (x_warm[0] if warmup_ms else 1) - 0.6
    right = (x_meas[-1] if measured_ms else 0) + 0.6
    ax.set_xlim(left, right)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True, nbins=12))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:.0f}" if v >= 1 else ""))
    ax.set_xlabel("measured step" + (" (warm-up steps left of the dashed line)" if warmup_ms else ""))

    handles = [Patch(color=INPUT_COLOR, label="waiting for input"),
               Patch(color=COMPUTE_COLOR, label="rest of step")]
    if warmup_ms:
        handles.append(Patch(facecolor=WARMUP_COLOR, hatch="//", edgecolor="white", label="warm-up (excluded)"))
    if measured_ms:
        from matplotlib.lines import Line2D

        handles.append(Line2D([], [], color=MEDIAN_COLOR, linewidth=1.2,
                              label=f"median {stats.median(measured_ms):,.1f} ms"))
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=_SMALL,
              frameon=False, borderaxespad=0)
    ax.grid(axis="y", alpha=0.3)
    ax.set_axisbelow(True)


def _span(starts: Sequence[float], durations: Sequence[float]) -> Optional[tuple]:
    if not starts or len(starts) != len(durations):
        return None
    return starts[0], starts[-1] + durations[-1]


def draw_utilization(ax: Axes, result: RunResult) -> None:
    """CPU and per-GPU utilization (%) against time on the run clock (s).

    Plots this process's CPU (% of one core, can exceed 100), the whole machine's
    CPU (% of all cores) and each GPU's utilization; shades the warm-up span and
    the measured steps' span (from the steps' start offsets) so the curves line up
    with the steps. With no GPU in the samples it says "no GPU".

    Args:
        ax: where to draw.
        result: a RunResult; one with no samples gets a note instead of lines.

    Example:
        >>> fig = Figure(); draw_utilization(fig.subplots(), result)  # doctest: +SKIP
    """
    ax.set_title("utilization", fontsize=10, loc="left")
    ax.set_xlabel("time since run start (s)")
    ax.set_ylabel("utilization (%)")
    samples = sorted(result.samples, key=lambda s: s.t_s)
    warm = _span(result.warmup_start_s, result.warmup_times_s)
    meas = _span(result.step_start_s, result.step_times_s)
    if warm:
        ax.axvspan(*warm, color=WARMUP_COLOR, alpha=0.35, hatch="//", linewidth=0, label="warm-up")
    if meas:
        ax.axvspan(*meas, color=COMPUTE_COLOR, alpha=0.12, linewidth=0, label="measured steps")
    if not samples:
        _note(ax, "no utilization samples")
        ax.set_ylim(0, 100)
        if warm or meas:
            ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=_SMALL, frameon=False,
                      borderaxespad=0)
        return

    t = [s.t_s for s in samples]

    def series(values):
        return [float("nan") if v is None else float(v) for v in values]

    peak = 100.0
    proc = series(s.cpu_process_pct for s in samples)
    system = series(s.cpu_system_pct for s in samples)
    if any(v == v for v in proc):
        ax.plot(t, proc, color="#4e79a7", linewidth=1.4, label="CPU, this process (% of 1 core)")
        peak = max([peak] + [v for v in proc if v == v])
    if any(v == v for v in system):
        ax.plot(t, system, color="#9c755f", linewidth=1.2, linestyle="--", label="CPU, system (% of all cores)")
    n_gpus = max(len(s.gpu_util_pct) for s in samples)
    for g in range(n_gpus):
        util = series(s.gpu_util_pct[g] if g < len(s.gpu_util_pct) else None for s in samples)
        if any(v == v for v in util):
            ax.plot(t, util, color=GPU_COLORS[g % len(GPU_COLORS)], linewidth=1.4, label=f"GPU {g}")
    if n_gpus == 0:
        ax.text(0.99, 0.96, "no GPU", transform=ax.transAxes, ha="right", va="top", fontsize=_SMALL,
                color="#555555", bbox=dict(facecolor="white", edgecolor="#bbbbbb", boxstyle="round,pad=0.3"))
    ax.set_ylim(0, peak * 1.08)
    lo = min([t[0]] + [s[0] for s in (warm, meas) if s])
    hi = max([t[-1]] + [s[1] for s in (warm, meas) if s])
    if hi > lo:
        ax.set_xlim(lo, hi)
    if ax.get_legend_handles_labels()[0]:     # a run that failed early may have nothing to label
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=_SMALL, frameon=False,
                  borderaxespad=0)
    ax.grid(alpha=0.3)
    ax.set_axisbelow(True)


def draw_comparison(ax: Axes, results: Sequence[RunResult], baseline: Optional[RunResult] = None, *,
                    baseline_config: Optional[RunConfig] = None) -> None:
    """One horizontal bar per run at its median step time, with IQR error bars.

    Runs are listed top to bottom in the order they ran, named by what they changed
    relative to the baseline; each bar is annotated with its median and its verdict
    against the baseline ("1.42x faster", "1.03x: no significant difference").
    The baseline's bar is grey with a dashed line at its median; runs that did not
    finish show a red "failed" label instead of a bar.

    Args:
        ax: where to draw.
        results: runs in order, failures included.
        baseline: the run to compare with; default
            ``report.pick_baseline(results, baseline_config)``.
        baseline_config: what the run names are relative to (as in
            ``report.history_rows``); default the baseline run's configuration.

    Example:
        >>> fig = Figure(); draw_comparison(fig.subplots(), results)  # doctest: +SKIP
    """
    ax.set_title("median step time per run (bars: IQR)", fontsize=10, loc="left")
    if not results:
        _note(ax, "no runs yet")
        ax.set_xticks([])
        ax.set_yticks([])
        return
    rows = report.history_rows(results, baseline, baseline_config=baseline_config)
    y = list(range(len(rows)))
    ok_medians = [r["median_ms"] for r in rows if r["median_ms"] is not None and results[r["index"] - 1].ok]
    right = max([r["q3_ms"] for r in rows if r["q3_ms"] is not None and results[r["index"] - 1].ok] or [1.0])
    labels = []
    for yi, row, result in zip(y, rows, results):
        name = f"#{row['index']} " + (row["label"] or row["changes"])
        labels.append(_shorten(name))
        if result.ok:
            med, q1, q3 = row["median_ms"], row["q1_ms"], row["q3_ms"]
            color = BASELINE_COLOR if row["is_baseline"] else COMPUTE_COLOR
            ax.barh(yi, med, height=0.6, color=color,
                    xerr=[[med - q1], [q3 - med]], error_kw=dict(ecolor="#333333", capsize=3, linewidth=1))
            note = f"{med:,.1f} ms"
            if row["verdict"]:
                note += f"  {row['verdict']}"
            ax.text(q3 + right * 0.02, yi, note, va="center", ha="left", fontsize=_SMALL,
                    bbox=dict(facecolor="white", edgecolor="none", alpha=0.85, pad=1.0))
        else:
            ax.text(right * 0.02, yi, f"{row['status']}: " + _shorten(row["error"] or "", 60),
                    va="center", ha="left", fontsize=_SMALL, color=FAILED_COLOR, fontweight="bold")
    base = next((r for r in rows if r["is_baseline"]), None)
    if base is not None:
        ax.axvline(base["median_ms"], color=BASELINE_COLOR, linestyle="--", linewidth=1)
    ax.set_yticks(y)
    ax.set_yticklabels(labels, fontsize=_SMALL)
    for tick, result in zip(ax.get_yticklabels(), results):
        if not result.ok:
            tick.set_color(FAILED_COLOR)
    ax.set_ylim(len(rows) - 0.5, -0.5)                           # first run on top
    ax.set_xlim(0, right * 1.75 if ok_medians else 1.0)            # room for the notes
    ax.set_xlabel("median step time (ms)")
    ax.grid(axis="x", alpha=0.3)
    ax.set_axisbelow(True)


def run_chart_png(result: RunResult, *, width_in: float = 9.0, height_in: float = 5.6,
                  dpi: float = 96) -> bytes:
    """One run's chart: step times above, utilization below, as PNG bytes.

    Args:
        result: the run to draw (failed runs give a chart with a note).
        width_in / height_in: figure size in inches.
        dpi: pixels per inch.

    Returns:
        PNG bytes.

    Example:
        >>> run_chart_png(result)[:4]  # doctest: +SKIP
        b'\\x89PNG'
    """
    fig = Figure(figsize=(width_in, height_in), dpi=dpi, layout="constrained")
    top, bottom = fig.subplots(2, 1, height_ratios=[3, 2])
    draw_step_times(top, result)
    draw_utilization(bottom, result)
    return figure_png(fig)


def comparison_png(results: Sequence[RunResult], baseline: Optional[RunResult] = None, *,
                   baseline_config: Optional[RunConfig] = None, width_in: float = 9.0,
                   dpi: float = 96) -> bytes:
    """All runs side by side (``draw_comparison``) as PNG bytes; height grows with the runs.

    Args:
        results: runs in order, failures included.
        baseline: the run to compare with; default the first ok run (of
            ``baseline_config`` when given).
        baseline_config: what the run names are relative to.
        width_in: figure width in inches.
        dpi: pixels per inch.

    Returns:
        PNG bytes.

    Example:
        >>> comparison_png([])[:4]
        b'\\x89PNG'
    """
    height_in = 1.1 + 0.36 * max(len(results), 2)
    fig = Figure(figsize=(width_in, height_in), dpi=dpi, layout="constrained")
    draw_comparison(fig.subplots(), results, baseline, baseline_config=baseline_config)
    return figure_png(fig)
