"""Charts of runs: step times, utilization over time, a comparison of runs, a profiler capture.

Owns drawing only. Every ``draw_*`` function takes a matplotlib ``Axes`` and plain
data (RunResults) and draws on it; ``figure_png`` turns a ``Figure`` into PNG
bytes for an ``ipywidgets.Image``. Figures are built with
``matplotlib.figure.Figure``, never pyplot: nothing global is created or left open,
no inline figure appears at the end of a cell, and it works headless (Agg).

An Axes with nothing to show is switched off and carries a message instead (a
failed run never leaves empty axes). Verdict and failure colours come from
``tfwb.report`` (``FAILED_COLOR``, ``verdict_color``), so tables and charts agree.
"""
from __future__ import annotations

import io
import textwrap
from typing import Any, Dict, List, Optional, Sequence

from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import Patch
from matplotlib.ticker import FuncFormatter, MaxNLocator

from tfwb import report, stats
from tfwb.config import RunConfig
from tfwb.records import RunResult

#: Colors used across the charts.
INPUT_COLOR = "#f28e2b"      # waiting for input
COMPUTE_COLOR = "#4e79a7"    # the rest of the step
WARMUP_COLOR = "#bab0ac"     # warm-up steps (excluded from statistics)
WARMUP_WAIT_COLOR = "#8c8c8c"
MEDIAN_COLOR = "#222222"
FAILED_COLOR = report.FAILED_COLOR   # the one definition lives in tfwb.report
BASELINE_COLOR = "#8c8c8c"
OTHER_CPU_COLOR = "#9c755f"  # other programs' share of the CPU
STEP_LINE_COLOR = "#9aa7b4"  # step boundaries on the utilization time axis
NEUTRAL_BAR_COLOR = "#b7c4d1"  # a run with no significant difference (or nothing) to show
GPU_COLORS = ("#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#af7aa1")

#: The step-time y axis stops at this multiple of the measured steps' 95th percentile.
CLIP_FACTOR = 3.0
_SMALL = 8
#: Characters per line of a run's name in the comparison chart (wrapped, never cut).
LABEL_WIDTH = 30
#: Step boundaries are drawn as lines up to this many measured steps (ticks only beyond).
MAX_STEP_LINES = 80
#: Share of the comparison chart's width the longest bar may take; its notes use the rest.
BARS_SHARE = 0.42


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


def _message(ax: Axes, text: str, color: str = "#555555", width: int = 80) -> None:
    """Switch ``ax`` off and put ``text`` (wrapped) in its middle: no empty axes."""
    ax.set_axis_off()
    wrapped = "\n".join("\n".join(textwrap.wrap(line, width)) for line in text.splitlines())
    ax.text(0.5, 0.5, wrapped or text, transform=ax.transAxes, ha="center", va="center", fontsize=9,
            color=color)


def _shorten(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"


def _failure_text(result: RunResult) -> str:
    return f"run {result.status}: {result.error or 'no steps measured'}"


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
        ax.set_title(f"{_name(result)}: time per step \u2014 {_shorten(_failure_text(result), 70)}",
                     fontsize=10, loc="left", color=FAILED_COLOR)
    else:
        ax.set_title(f"{_name(result)}: time per step", fontsize=10, loc="left")
    ax.set_ylabel("step time (ms)")
    if not measured_ms and not warmup_ms:
        failed = result.status != "ok"
        _message(ax, _failure_text(result) if failed else "no steps measured",
                 FAILED_COLOR if failed else "#555555")
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
    """CPU and per-GPU utilization (%) against time on the run clock (s), on one 0-100 % axis.

    Every CPU curve is a share of *all* the machine's cores (this process's own
    reading, % of one core, divided by the cores in the run's fingerprint): this
    process, and the other programs (the machine's use minus this process's), the
    load that makes runs of the same configuration differ. GPU curves are each GPU's
    busy time (%). Without a core count, this process's CPU goes on a second axis
    (right, % of one core). The warm-up and measured spans are shaded, and each
    measured step's start is marked (faint lines and ticks along the top, numbered)
    so a dip can be tied to a step. With no GPU in the samples it says "no GPU".

    Args:
        ax: where to draw.
        result: a RunResult; one with no samples gets a message instead of axes.

    Example:
        >>> fig = Figure(); draw_utilization(fig.subplots(), result)
    """
    samples = sorted(result.samples, key=lambda s: s.t_s)
    if not samples:
        failed = result.status != "ok"
        _message(ax, "no utilization samples" + (f" ({_failure_text(result)})" if failed else ""),
                 FAILED_COLOR if failed else "#555555")
        return
    ax.set_title("utilization", fontsize=10, loc="left")
    ax.set_xlabel("time since run start (s)")
    warm = _span(result.warmup_start_s, result.warmup_times_s)
    meas = _span(result.step_start_s, result.step_times_s)
    if warm:
        ax.axvspan(*warm, color=WARMUP_COLOR, alpha=0.35, hatch="//", linewidth=0, label="warm-up")
    if meas:
        ax.axvspan(*meas, color=COMPUTE_COLOR, alpha=0.10, linewidth=0, label="measured steps")

    t = [s.t_s for s in samples]

    def series(values):
        return [float("nan") if v is None else float(v) for v in values]

    def has(values):
        return any(v == v for v in values)

    cores = (result.fingerprint or {}).get("cpu_count")
    proc = series(s.cpu_process_pct for s in samples)
    system = series(s.cpu_system_pct for s in samples)
    second = None
    if cores:
        proc_all = [p / cores for p in proc]
        other = [max(0.0, m - p) for m, p in zip(system, proc_all)]
        if has(proc_all):
            ax.plot(t, proc_all, color=COMPUTE_COLOR, linewidth=1.5,
                    label=f"CPU, this process (% of all {cores} cores)")
        if has(other):
            ax.plot(t, other, color=OTHER_CPU_COLOR, linewidth=1.2, linestyle="--",
                    label=f"CPU, other programs (% of all {cores} cores)")
        ylabel = "% of all CPU cores / GPU busy"
    else:
        if has(system):
            ax.plot(t, system, color=OTHER_CPU_COLOR, linewidth=1.2, linestyle="--",
                    label="CPU, whole machine (% of all cores)")
        if has(proc):
            second = ax.twinx()
            second.plot(t, proc, color=COMPUTE_COLOR, linewidth=1.5, label="CPU, this process (% of 1 core, right)")
            second.set_ylabel("this process (% of 1 core)", color=COMPUTE_COLOR)
            second.set_ylim(0, max([100.0] + [v for v in proc if v == v]) * 1.08)
        ylabel = "% of all CPU cores / GPU busy"
    n_gpus = max(len(s.gpu_util_pct) for s in samples)
    for g in range(n_gpus):
        util = series(s.gpu_util_pct[g] if g < len(s.gpu_util_pct) else None for s in samples)
        if has(util):
            ax.plot(t, util, color=GPU_COLORS[g % len(GPU_COLORS)], linewidth=1.5, label=f"GPU {g}")
    if n_gpus == 0:
        ax.text(0.99, 0.96, "no GPU", transform=ax.transAxes, ha="right", va="top", fontsize=_SMALL,
                color="#555555", bbox=dict(facecolor="white", edgecolor="#bbbbbb", boxstyle="round,pad=0.3"))
    ax.set_ylabel(ylabel)
    ax.set_ylim(0, 105)
    lo = min([t[0]] + [s[0] for s in (warm, meas) if s])
    hi = max([t[-1]] + [s[1] for s in (warm, meas) if s])
    if hi > lo:
        ax.set_xlim(lo, hi)
    _mark_steps(ax, result)
    handles, labels = ax.get_legend_handles_labels()
    if second is not None:
        more = second.get_legend_handles_labels()
        handles, labels = handles + more[0], labels + more[1]
    if handles:                     # a run that failed early may have nothing to label
        ax.legend(handles, labels, loc="upper left", bbox_to_anchor=(1.01 if second is None else 1.08, 1.0),
                  fontsize=_SMALL, frameon=False, borderaxespad=0)
    ax.grid(axis="y", alpha=0.3)
    ax.set_axisbelow(True)


def _mark_steps(ax: Axes, result: RunResult) -> None:
    """Step boundaries on the time axis: faint lines, and numbered ticks along the top."""
    starts = list(result.step_start_s)
    if not starts or len(starts) != len(result.step_times_s):
        return
    if len(starts) <= MAX_STEP_LINES:
        for x in starts[1:]:
            ax.axvline(x, color=STEP_LINE_COLOR, linewidth=0.5, alpha=0.6, zorder=0.5)
    top = ax.secondary_xaxis("top")
    every = max(1, round(len(starts) / 8))
    numbered = [i for i in range(len(starts)) if i == 0 or (i + 1) % every == 0]
    top.set_xticks([starts[i] for i in numbered], [str(i + 1) for i in numbered], fontsize=_SMALL)
    top.set_xticks(starts, minor=True)
    top.tick_params(axis="x", which="minor", length=3, color="#555555")
    top.tick_params(axis="x", which="major", length=5, pad=1)
    top.set_xlabel("measured step (start)", fontsize=_SMALL, labelpad=2)


def run_label(row: Dict[str, Any], reference: Optional[RunConfig], config: RunConfig,
              width: int = LABEL_WIDTH) -> str:
    """A run's name in the comparison chart: ``#index``, its label, and the knobs that set
    it apart from ``reference`` (``report.short_changes``), wrapped at ``width``, never cut.

    Example:
        >>> run_label({"index": 2, "label": ""}, RunConfig(), RunConfig(prefetch=True))
        '#2 prefetch'
    """
    items = report.short_changes(config, reference)
    if row.get("is_baseline"):
        items = ["baseline"] + items
    elif not items:
        items = ["same knobs as the baseline"]
    head = f"#{row['index']}"
    lines: List[str] = []
    if row.get("label"):
        lines.extend(textwrap.wrap(f"{head} {row['label']}", width, subsequent_indent="   ") or [head])
        current = ""
    else:
        current = head
    for n, item in enumerate(items):
        last = n == len(items) - 1
        piece = item if last else item + ","
        if current == head:                       # the first item always follows the number
            current = f"{head} {piece}"
        elif current and len(current) + 1 + len(piece) <= width:
            current = f"{current} {piece}"
        else:
            if current:
                lines.append(current)
            current = "   " + piece
    if current:
        lines.append(current)
    return "\n".join(lines)


def _phrase(kind: Optional[str], speedup: Optional[float], other: str) -> str:
    """``"2.38x slower than #4"``, ``"no significant difference from the baseline (1.02x)"``..."""
    if kind in (stats.FASTER, stats.SLOWER) and speedup:
        factor = speedup if kind == stats.FASTER else 1.0 / speedup
        return f"{factor:.2f}x {kind} than {other}"
    if kind == stats.NO_DIFFERENCE:
        return f"no significant difference from {other}" + (f" ({speedup:.2f}x)" if speedup else "")
    if kind == stats.NOT_COMPARABLE:
        return f"not comparable with {other}: other programs took CPU"
    if kind == stats.TOO_FEW:
        return f"too few steps to compare with {other}"
    return ""


def draw_comparison(ax: Axes, results: Sequence[RunResult], baseline: Optional[RunResult] = None, *,
                    baseline_config: Optional[RunConfig] = None, versus: str = "previous",
                    noise: Optional[stats.NoiseBand] = None) -> None:
    """One horizontal bar per run at its median step time, with IQR error bars.

    Runs are listed top to bottom in the order they ran, each named by the knobs
    that set it apart from the baseline configuration (wrapped, never cut). Each bar
    is coloured by one comparison, ``versus`` (green: significantly faster, orange:
    slower, grey: no significant difference), and annotated with that comparison in
    the same colour and, below it in grey, the other one: e.g. "2.38x slower than #4"
    above "1.18x faster than the baseline". A dashed line marks the baseline's
    median. Runs that did not finish show their error in red instead of a bar.
    With no finished run at all the Axes shows a message instead.

    Args:
        ax: where to draw.
        results: runs in order, failures included.
        baseline: the run to compare with; default
            ``report.pick_baseline(results, baseline_config)``.
        baseline_config: what the run names are relative to (as in
            ``report.history_rows``); default the baseline run's configuration.
        versus: ``"previous"`` (default: the previous finished run of the same size,
            which is what the reader just changed) or ``"baseline"``: the
            comparison that colours the bars and comes first.
        noise: the run-to-run band (default: learned from ``results``).

    Raises:
        ValueError: for another ``versus``.

    Example:
        >>> fig = Figure(); draw_comparison(fig.subplots(), results)
    """
    if versus not in ("previous", "baseline"):
        raise ValueError(f"versus={versus!r} is not allowed; use 'previous' or 'baseline'")
    if not results:
        _message(ax, "no runs yet")
        return
    if not any(r.ok for r in results):
        lines = [f"#{i} {_failure_text(r)}" for i, r in enumerate(results, 1)][-4:]
        _message(ax, "no finished runs yet\n" + "\n".join(_shorten(x, 100) for x in lines), FAILED_COLOR,
                 width=110)
        return
    rows = report.history_rows(results, baseline, baseline_config=baseline_config, noise=noise)
    if baseline_config is None:
        base_row = next((r for r in rows if r["is_baseline"]), None)
        baseline_config = results[base_row["index"] - 1].config if base_row else results[0].config
    y = list(range(len(rows)))
    right = max(r["q3_ms"] for r, res in zip(rows, results) if res.ok and r["q3_ms"] is not None)
    first_label = "previous run" if versus == "previous" else "baseline"
    ax.set_title(f"median step time per run (bars: IQR); colour: compared with the {first_label}",
                 fontsize=10, loc="left", pad=20)
    labels = []
    for yi, row, result in zip(y, rows, results):
        labels.append(run_label(row, baseline_config, result.config))
        if not result.ok:
            ax.text(right * 0.02, yi, _shorten(_failure_text(result), 90), va="center", ha="left",
                    fontsize=_SMALL, color=FAILED_COLOR, fontweight="bold")
            continue
        vs_prev = _phrase(row["prev_comparison"], row["prev_speedup"], f"#{row['previous']}") \
            if row["previous"] else ""
        base_index = next((r["index"] for r in rows if r["is_baseline"]), None)
        if row["is_baseline"]:
            vs_base, base_kind = "", None
        elif row["comparison"] is None:
            vs_base, base_kind = row["verdict"], None         # e.g. "full size: not compared"
        else:
            vs_base = _phrase(row["comparison"], row["speedup"], "the baseline")
            base_kind = row["comparison"]
        if row["previous"] is not None and row["previous"] == base_index:
            # The previous run is the baseline: one comparison, said once.
            first = vs_prev.replace(f"#{base_index}", f"#{base_index} (the baseline)")
            kind, second = row["prev_comparison"], ""
        elif versus == "previous":
            first, kind, second = vs_prev, row["prev_comparison"], vs_base
            if not first and vs_base:                        # nothing before it: fall back
                first, kind, second = vs_base, base_kind, ""
        else:
            first, kind, second = vs_base, base_kind, vs_prev
        if row["is_baseline"] and not first:
            first = "the baseline"
        med, q1, q3 = row["median_ms"], row["q1_ms"], row["q3_ms"]
        color = report.verdict_color(kind) if kind in (stats.FASTER, stats.SLOWER) else (
            BASELINE_COLOR if row["is_baseline"] else NEUTRAL_BAR_COLOR)
        ax.barh(yi, med, height=0.55, color=color, edgecolor="#333333" if row["is_baseline"] else "none",
                linewidth=0.8, xerr=[[med - q1], [q3 - med]],
                error_kw=dict(ecolor="#333333", capsize=3, linewidth=1))
        x = q3 + right * 0.02
        head = f"{med:,.1f} ms" + (f"  {first}" if first else "")
        backing = dict(facecolor="white", edgecolor="none", alpha=0.85, pad=0.5)
        notes = [ax.text(x, yi - (0.15 if second else 0.0), head, va="center", ha="left", fontsize=_SMALL,
                         color=report.verdict_color(kind) if kind in (stats.FASTER, stats.SLOWER) else "#333333",
                         fontweight="bold" if kind in (stats.FASTER, stats.SLOWER) else "normal",
                         bbox=backing)]
        if second:
            notes.append(ax.text(x, yi + 0.2, second, va="center", ha="left", fontsize=_SMALL - 0.5,
                                 color="#555555", bbox=backing))
        for note in notes:
            note.set_in_layout(False)      # they sit inside the axes (see xlim); layout ignores them
    base = next((r for r in rows if r["is_baseline"]), None)
    if base is not None:
        ax.axvline(base["median_ms"], color=BASELINE_COLOR, linestyle="--", linewidth=1, zorder=0.5)
    ax.set_yticks(y)
    ax.set_yticklabels(labels, fontsize=_SMALL)
    for tick, result in zip(ax.get_yticklabels(), results):
        if not result.ok:
            tick.set_color(FAILED_COLOR)
    ax.set_ylim(len(rows) - 0.5, -0.5)                           # first run on top
    ax.set_xlim(0, right / BARS_SHARE)                           # bars on the left, notes to their right
    xlabel = "median step time (ms)"
    note = report.noise_note(rows)
    if note:
        xlabel += "\n" + "\n".join(textwrap.wrap(note, 105))
    ax.set_xlabel(xlabel, fontsize=_SMALL + 1)
    ax.grid(axis="x", alpha=0.3)
    ax.set_axisbelow(True)
    short = "previous" if versus == "previous" else "baseline"
    handles = [Patch(color=report.FASTER_COLOR, label=f"faster than {short}"),
               Patch(color=report.SLOWER_COLOR, label=f"slower than {short}"),
               Patch(color=NEUTRAL_BAR_COLOR, label="no significant difference")]
    if base is not None:
        from matplotlib.lines import Line2D

        handles.append(Line2D([], [], color=BASELINE_COLOR, linestyle="--", label="baseline median"))
    ax.legend(handles=handles, loc="lower left", bbox_to_anchor=(0.0, 1.0), ncol=len(handles),
              fontsize=_SMALL, frameon=False, borderaxespad=0.2, handlelength=1.5, columnspacing=1.2)


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
        _message(ax, f"{_name(result)}: " + (_failure_text(result) if failed else "no steps measured"),
                 FAILED_COLOR if failed else "#555555", width=110)
        return figure_png(fig)
    fig = Figure(figsize=(width_in, height_in), dpi=dpi, layout="constrained")
    top, bottom = fig.subplots(2, 1, height_ratios=[3, 2])
    draw_step_times(top, result)
    draw_utilization(bottom, result)
    return figure_png(fig)


def comparison_height_in(results: Sequence[RunResult], baseline_config: Optional[RunConfig] = None) -> float:
    """Figure height that gives each run's (wrapped) name and its two notes room."""
    if not results:
        return 1.2
    reference = baseline_config or results[0].config
    lines = max(2, *(len(run_label({"index": i, "label": r.config.label}, reference, r.config).splitlines())
                     for i, r in enumerate(results, 1)))
    return max(2.6, 1.5 + len(results) * (0.16 * lines + 0.14))


def comparison_png(results: Sequence[RunResult], baseline: Optional[RunResult] = None, *,
                   baseline_config: Optional[RunConfig] = None, width_in: float = 9.0,
                   dpi: float = 96, versus: str = "previous") -> bytes:
    """All runs side by side (``draw_comparison``) as PNG bytes; height grows with the runs.

    Args:
        results: runs in order, failures included.
        baseline: the run to compare with; default the first ok run (of
            ``baseline_config`` when given).
        baseline_config: what the run names are relative to.
        width_in: figure width in inches.
        dpi: pixels per inch.
        versus: the comparison that colours the bars: ``"previous"`` or ``"baseline"``.

    Returns:
        PNG bytes.

    Example:
        >>> comparison_png([])[:4]
        b'\\x89PNG'
    """
    fig = Figure(figsize=(width_in, comparison_height_in(results, baseline_config)), dpi=dpi,
                 layout="constrained")
    draw_comparison(fig.subplots(), results, baseline, baseline_config=baseline_config, versus=versus)
    return figure_png(fig)


# -- a profiler capture (tfwb.profile's ProfileReport; read by attribute, no TensorFlow here) ----------
#: The profiler's "other" part of a step (kernel launch, compilation, Python: "all others").
PROFILE_OTHER_COLOR = "#76b7b2"
#: Characters of an op's name shown in the top-ops chart (its end: the most specific part).
OP_NAME_WIDTH = 48


def draw_profile_steps(ax: Axes, report: Any) -> None:
    """Stacked bars of each captured step as the TF profiler split it: input, compute, other.

    A black tick on each bar marks tfwb's own time of the same step, so the two
    clocks can be compared by eye.

    Args:
        ax: where to draw.
        report: a ``tfwb.tf.lab.profiler.ProfileReport`` (its ``steps``, ``profiled_times_s``).
    """
    steps = list(report.steps)
    ax.set_title("TF profiler: time per captured step", fontsize=10, loc="left", pad=30)
    if not steps:
        _message(ax, "the profiler recorded no steps")
        return
    x = list(range(len(steps)))
    inp = [s.input_ms for s in steps]
    comp = [min(s.compute_ms, s.step_ms - i) for s, i in zip(steps, inp)]
    other = [max(0.0, s.step_ms - i - c) for s, i, c in zip(steps, inp, comp)]
    ax.bar(x, inp, 0.7, color=INPUT_COLOR, linewidth=0)
    ax.bar(x, comp, 0.7, bottom=inp, color=COMPUTE_COLOR, linewidth=0)
    ax.bar(x, other, 0.7, bottom=[i + c for i, c in zip(inp, comp)], color=PROFILE_OTHER_COLOR, linewidth=0)
    ours = [t * 1e3 for t in report.profiled_times_s]
    if len(ours) == len(steps):
        ax.scatter(x, ours, marker="_", s=400, color=MEDIAN_COLOR, linewidths=1.5, zorder=3)
    ax.set_xticks(x, [str(s.step) for s in steps], fontsize=_SMALL)
    ax.set_xlabel("call (warm-up included)")
    ax.set_ylabel("ms")
    pct = report.breakdown_pct
    handles = [Patch(color=INPUT_COLOR, label=f"input {pct['input']:.0f}%"),
               Patch(color=COMPUTE_COLOR, label=f"compute {pct['compute']:.0f}%"),
               Patch(color=PROFILE_OTHER_COLOR, label=f"other {pct['other']:.0f}%")]
    if len(ours) == len(steps):
        from matplotlib.lines import Line2D

        handles.append(Line2D([], [], color=MEDIAN_COLOR, marker="_", linestyle="none", markersize=12,
                              label="tfwb's time"))
    ax.legend(handles=handles, loc="lower left", bbox_to_anchor=(0.0, 1.01), ncol=2, fontsize=_SMALL,
              frameon=False, borderaxespad=0)
    ax.grid(axis="y", alpha=0.3)
    ax.set_axisbelow(True)


def draw_top_ops(ax: Axes, report: Any, by: str = "op") -> None:
    """Horizontal bars of the ops (``by="op"``) or op types (``by="type"``) with the most self time.

    tf.data iterator stages (type ``Dataset``) are drawn in the input colour, other ops
    in the compute colour; each bar is labelled with its share of the self time.

    Args:
        ax: where to draw.
        report: a ``ProfileReport`` (its ``top_ops`` / ``top_op_types``).
        by: ``"op"`` or ``"type"``.

    Raises:
        ValueError: for another ``by``.
    """
    if by not in ("op", "type"):
        raise ValueError(f"by={by!r} is not allowed; one of 'op', 'type'")
    ops = list(report.top_ops if by == "op" else report.top_op_types)
    ax.set_title(f"top {'ops' if by == 'op' else 'op types'} by self time", fontsize=10, loc="left", pad=30)
    if not ops:
        _message(ax, "the profiler recorded no ops")
        return
    y = list(range(len(ops)))[::-1]
    names = [o.name if by == "op" else o.type for o in ops]
    names = [n if len(n) <= OP_NAME_WIDTH else "\u2026" + n[-(OP_NAME_WIDTH - 1):] for n in names]
    colors = [INPUT_COLOR if o.type == "Dataset" else COMPUTE_COLOR for o in ops]
    values = [o.self_ms for o in ops]
    ax.barh(y, values, 0.7, color=colors, linewidth=0)
    ax.set_yticks(y, names, fontsize=7)
    for yi, v, o in zip(y, values, ops):
        ax.text(v, yi, f" {o.share:.0%}", va="center", ha="left", fontsize=7, color="#333333")
    ax.set_xlim(0, max(values) * 1.18 if max(values) > 0 else 1.0)
    ax.set_xlabel("self time over the capture (ms)")
    ax.legend(handles=[Patch(color=INPUT_COLOR, label="tf.data stage"), Patch(color=COMPUTE_COLOR, label="op")],
              loc="lower right", fontsize=_SMALL, frameon=False)
    ax.grid(axis="x", alpha=0.3)
    ax.set_axisbelow(True)


def profile_png(report: Any, *, by: str = "op", width_in: float = 10.0, height_in: float = 3.8,
                dpi: float = 96) -> bytes:
    """A profiler capture's chart: the step breakdown left, the top ops right, as PNG bytes.

    Args:
        report: a ``tfwb.tf.lab.profiler.ProfileReport`` (``tfwb.profile``'s result).
        by: the right panel's rows: ``"op"`` (names as in the trace) or ``"type"``.
        width_in / height_in: figure size in inches.
        dpi: pixels per inch.

    Returns:
        PNG bytes.

    Example:
        >>> display(Image(charts.profile_png(tfwb.profile(cfg))))  # doctest: +SKIP
    """
    fig = Figure(figsize=(width_in, height_in), dpi=dpi, layout="constrained")
    left, right = fig.subplots(1, 2, width_ratios=[2, 3])
    draw_profile_steps(left, report)
    draw_top_ops(right, report, by=by)
    return figure_png(fig)


# -- convergence: learning-rate sweeps, and curves over training steps (chapter 04) ------------------------
#: One colour per series (optimizer, run) in the convergence charts.
SERIES_COLORS = ("#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#b07aa1", "#edc948", "#9c755f")
#: The loss axis of a sweep stops at this multiple of the starting loss (higher points sit on the edge).
SWEEP_CEILING = 1.5
#: What ``draw_curves`` can draw, with its y-axis label.
CURVES = {"loss": "training loss (per step)", "grad_norm": "gradient norm before clipping",
          "held_out": "loss on all examples of each set"}


def draw_lr_sweep(ax: Axes, sweeps: Sequence[Any]) -> None:
    """Final loss against learning rate (log x axis), one line per sweep.

    Each sweep is a ``tfwb.tf.lab.convergence.Sweep`` (or anything with ``label``, ``rates``,
    ``final_losses`` (``None`` where diverged), ``best_rate``, ``best_loss``,
    ``first_loss``, ``steps``, ``tail``). The best rate of each gets a ring; a rate that
    diverged is an ``x`` on the top edge; a loss above ``SWEEP_CEILING`` times the starting
    loss sits on the top edge as a triangle; a dashed line marks the starting loss.
    """
    if not sweeps:
        _message(ax, "no sweeps to draw")
        return
    start = next((s.first_loss for s in sweeps if s.first_loss == s.first_loss), None)
    finals = [v for s in sweeps for v in s.final_losses if v is not None]
    top = SWEEP_CEILING * start if start else (max(finals) * 1.1 if finals else 1.0)
    for i, s in enumerate(sweeps):
        color = SERIES_COLORS[i % len(SERIES_COLORS)]
        kept = [(r, v) for r, v in zip(s.rates, s.final_losses) if v is not None]
        label = f"{s.label} (best {s.best_rate:g})" if s.best_rate is not None else f"{s.label} (all diverged)"
        ax.plot([r for r, _ in kept], [min(v, top) for _, v in kept], color=color, marker="o", ms=3, lw=1.4,
                label=label)
        high = [r for r, v in kept if v > top]
        if high:
            ax.plot(high, [top] * len(high), linestyle="none", marker="^", color=color, ms=6, clip_on=False)
        gone = [r for r, v in zip(s.rates, s.final_losses) if v is None]
        if gone:
            ax.plot(gone, [top] * len(gone), linestyle="none", marker="x", color=color, ms=8, mew=2, clip_on=False)
        if s.best_rate is not None:
            ax.plot([s.best_rate], [s.best_loss], marker="o", ms=11, mfc="none", mec=color, mew=1.5)
    if start:
        ax.axhline(start, color=BASELINE_COLOR, linestyle="--", lw=1, label="loss at the start")
    ax.set_xscale("log")
    ax.set_ylim(0, top)
    ax.set_xlabel("learning rate (log scale)")
    s0 = sweeps[0]
    ax.set_ylabel(f"loss after {s0.steps} steps\n(median of the last {s0.tail})")
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=_SMALL, frameon=False, loc="upper left", bbox_to_anchor=(1.01, 1.0),
              title="\u25cb best rate\nx diverged (NaN)\n\u25b2 above the axis", title_fontsize=_SMALL,
              alignment="left")


def _steps_axis(result: RunResult, n: int) -> List[int]:
    per = max(1, result.steps_per_call)
    return [(i + 1) * per for i in range(n)]


def draw_curves(ax: Axes, results: Sequence[RunResult], quantity: str = "loss") -> None:
    """One quantity over training steps, one line per run (warm-up steps included: they train too).

    Args:
        ax: the Axes.
        results: the runs.
        quantity: ``"loss"`` (each step's training loss), ``"grad_norm"`` (each step's global
            gradient norm before clipping; needs ``RunConfig(grad_norms=True)``; a run that
            clips by global norm gets its threshold as a dotted line) or ``"held_out"``
            (``extras["held_out"]`` of ``tfwb.tf.lab.convergence.held_out``: the loss on all
            training examples dashed, on the held-out examples solid).

    A run that diverged ends with an ``x`` at its last finite value and "NaN" beside it.
    The y axis is logarithmic when the values span more than a factor of 100.

    Raises:
        ValueError: for an unknown quantity.
    """
    if quantity not in CURVES:
        raise ValueError(f"quantity={quantity!r} is not allowed; one of {', '.join(map(repr, CURVES))}")
    drawn: List[float] = []
    for i, r in enumerate(results):
        color = SERIES_COLORS[i % len(SERIES_COLORS)]
        name = _name(r)
        if quantity == "held_out":
            curves = r.extras.get("held_out") or {}
            if "steps" not in curves:
                continue
            for key, style, what in (("train_loss", "--", "training set"), ("held_out_loss", "-", "held out")):
                if key in curves:
                    ax.plot(curves["steps"], curves[key], color=color, linestyle=style, lw=1.5,
                            label=f"{name}: {what}")
                    drawn += [v for v in curves[key] if v == v]
            continue
        values = list(r.all_losses) if quantity == "loss" else list(r.all_grad_norms)
        if not values:
            continue
        steps = _steps_axis(r, len(values))
        finite = [(s, v) for s, v in zip(steps, values) if v == v and abs(v) != float("inf")]
        ax.plot([s for s, _ in finite], [v for _, v in finite], color=color, lw=1.2, label=name)
        drawn += [v for _, v in finite]
        if r.status == "diverged" and finite:
            s, v = finite[-1]
            ax.plot([s], [v], marker="x", color=color, ms=9, mew=2)
            ax.annotate("NaN next", (s, v), xytext=(6, -4), textcoords="offset points", fontsize=_SMALL,
                        color=color, ha="left", va="top")
        spec = r.config.clip_spec
        if quantity == "grad_norm" and spec and spec[0] == "global_norm":
            ax.axhline(spec[1], color=color, linestyle=":", lw=1.2)
            ax.text(0.995, spec[1], f"clip threshold {spec[1]:g}", transform=ax.get_yaxis_transform(),
                    ha="right", va="top", fontsize=_SMALL, color=color)
    if not drawn:
        _message(ax, "nothing to draw: " + ("run with grad_norms=True" if quantity == "grad_norm"
                                            else "no finished steps"))
        return
    positive = [v for v in drawn if v > 0]
    if positive and max(positive) / min(positive) > 100:
        ax.set_yscale("log")
    ax.set_xlabel("training step")
    ax.set_ylabel(CURVES[quantity])
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=_SMALL, frameon=False)


def lr_sweep_png(sweeps: Sequence[Any], *, width_in: float = 9.0, height_in: float = 4.0, dpi: float = 96) -> bytes:
    """``draw_lr_sweep`` as PNG bytes.

    Example:
        >>> lr_sweep_png([])[:4]
        b'\\x89PNG'
    """
    fig = Figure(figsize=(width_in, height_in), dpi=dpi, layout="constrained")
    draw_lr_sweep(fig.subplots(), sweeps)
    return figure_png(fig)


def curves_png(results: Sequence[RunResult], quantities: Sequence[str] = ("loss", "grad_norm"), *,
               width_in: float = 9.0, panel_height_in: float = 2.8, dpi: float = 96) -> bytes:
    """``draw_curves`` for each quantity, stacked, sharing the step axis, as PNG bytes.

    Raises:
        ValueError: for no quantities or an unknown one.

    Example:
        >>> curves_png([], ["loss"])[:4]
        b'\\x89PNG'
    """
    if not quantities:
        raise ValueError("quantities=() is not allowed; name at least one of " + ", ".join(map(repr, CURVES)))
    for q in quantities:
        if q not in CURVES:
            raise ValueError(f"quantity={q!r} is not allowed; one of {', '.join(map(repr, CURVES))}")
    fig = Figure(figsize=(width_in, panel_height_in * len(quantities)), dpi=dpi, layout="constrained")
    axes = fig.subplots(len(quantities), 1, sharex=True, squeeze=False)[:, 0]
    for ax, q in zip(axes, quantities):
        draw_curves(ax, results, q)
    for ax in axes[:-1]:
        ax.set_xlabel("")                 # the shared step axis is labelled once, at the bottom
    return figure_png(fig)
