"""Charts of runs: step times, utilization over time, and a comparison of runs.

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

from .. import report, stats
from ..config import RunConfig
from ..records import RunResult

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
        >>> fig = Figure(); draw_step_times(fig.subplots(), result)  # doctest: +SKIP
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
        >>> fig = Figure(); draw_utilization(fig.subplots(), result)  # doctest: +SKIP
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
        >>> fig = Figure(); draw_comparison(fig.subplots(), results)  # doctest: +SKIP
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
        >>> run_chart_png(result)[:4]  # doctest: +SKIP
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
