"""Charts of a sweep (``tfwb.sweep``): every candidate by rung, and the final comparison.

``draw_rungs`` puts each candidate's median at every rung it ran, joined by a line,
and marks where it left the search: pruned as slower (grey cross), pruned because
it trained worse than the naive run (orange triangle), failed (red cross along the
top), finalist (blue), winner (green star); the naive run is the dashed black line.
``draw_finalists`` compares the finalists and the naive run at the last rung: medians
with their inter-quartile range, coloured by the noise-aware verdict against the winner.

Same conventions as the other families of ``tfwb.ui.charts``: ``draw_*`` take an ``Axes``;
``*_png`` build a ``matplotlib.figure.Figure`` (never pyplot) and return PNG bytes
(``tfwb.ui.charts.common.figure_png``); colours come from ``tfwb.render`` so tables and
charts agree.
"""
from __future__ import annotations

import textwrap
from typing import List, Optional, Tuple

from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import FuncFormatter

from tfwb import stats
from tfwb import render
from tfwb.search.result import FAILED, FINALIST, SLOWER, WINNER, WORSE, SweepResult, Trial, example_times_s
from tfwb.ui.charts.common import SMALL, figure_png, message

WINNER_COLOR = render.FASTER_COLOR
FINALIST_COLOR = "#4e79a7"
PRUNED_COLOR = "#a0a0a0"
WORSE_COLOR = render.SLOWER_COLOR
FAILED_COLOR = render.FAILED_COLOR
NAIVE_COLOR = "#222222"
#: Half the width of the band candidates spread over around each rung (in rungs).
JITTER = 0.28


def wrap_label(label: str, width: int) -> str:
    """A candidate's label on lines of at most ``width`` characters, broken only between words.

    A word longer than ``width`` (``mixed_precision=mixed_bfloat16,``) keeps a line of its
    own rather than being cut mid-word; underscores and hyphens are not break points.

    Example:
        >>> print(wrap_label("parallel_map, mixed_precision=mixed_bfloat16, jit_compile", 30))
        parallel_map,
        mixed_precision=mixed_bfloat16,
        jit_compile
    """
    return "\n".join(textwrap.wrap(label, width, break_long_words=False, break_on_hyphens=False))


def _unit(result: SweepResult) -> Tuple[str, float]:
    """The y axis: per example (µs) when the batch size varies, else per step (ms)."""
    return ("median time per example (\u00b5s)", 1e6) if result.per_batch else ("median step time (ms)", 1e3)


def _value(result: SweepResult, run) -> Optional[float]:
    if run is None or not run.ok:
        return None
    _, scale = _unit(result)
    if result.per_batch:
        return run.per_example_s * scale
    return run.median_step_s * scale


def _x(rung: int, index: int, n: int) -> float:
    """A candidate's x position at ``rung``: spread evenly (by index) around the rung."""
    if n <= 1:
        return float(rung)
    return rung - JITTER + 2 * JITTER * index / (n - 1)


def _style(trial: Trial) -> Tuple[str, str, float]:
    """(colour, end marker, line alpha) from what became of the trial."""
    status = trial.status
    if status == WINNER:
        return WINNER_COLOR, "*", 0.9
    if status == FINALIST:
        return FINALIST_COLOR, "o", 0.7
    if status == WORSE:
        return WORSE_COLOR, "v", 0.45
    if status == FAILED:
        return FAILED_COLOR, "x", 0.45
    return PRUNED_COLOR, "x", 0.35


def draw_rungs(ax: Axes, result: SweepResult) -> None:
    """Every candidate's median at each rung it ran, and where it was pruned or won.

    Args:
        ax: the axes to draw on.
        result: a ``SweepResult``.
    """
    trials = result.trials
    values = [v for t in trials for r in t.runs for v in [_value(result, t.runs[r])] if v is not None]
    naive = _value(result, result.naive)
    values += [naive] if naive is not None else []
    if not values:
        message(ax, "No run of the sweep measured a step yet.")
        return
    ylabel, _ = _unit(result)
    lo, hi = min(values), max(values)
    log = hi / max(lo, 1e-12) > 4
    top = hi * (1.35 if log else 1.08)
    n = len(trials)
    # Pruned first, the finalists and the winner last (on top).
    order = {WINNER: 3, FINALIST: 2}
    for t in sorted(trials, key=lambda t: order.get(t.status, 0)):
        color, marker, alpha = _style(t)
        rungs = sorted(t.runs)
        xs = [_x(r, t.candidate.index, n) for r in rungs]
        ys = [_value(result, t.runs[r]) for r in rungs]
        pts = [(x, y) for x, y in zip(xs, ys) if y is not None]
        if len(pts) > 1:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], color=color, alpha=alpha,
                    lw=1.6 if t.status == WINNER else 0.8, zorder=2 + order.get(t.status, 0))
        for r, x, y in zip(rungs, xs, ys):
            last = r == rungs[-1]
            if y is None:                      # failed: no time; a red cross along the top
                ax.plot([x], [top], marker="x", color=FAILED_COLOR, ms=6, ls="none", zorder=5)
                continue
            m = marker if last else "o"
            size = 13 if m == "*" else 6 if last else 3.5
            ax.plot([x], [y], marker=m, color=color, ms=size, ls="none", alpha=min(1.0, alpha + 0.4),
                    zorder=3 + order.get(t.status, 0), mec=color)
    if naive is not None:                 # one run as long as the last rung: its median, across every rung
        last = len(result.rung_steps) - 1
        ax.axhline(naive, ls="--", color=NAIVE_COLOR, lw=1.2, zorder=6)
        ax.plot([last + JITTER + 0.12], [naive], marker="D", color=NAIVE_COLOR, ms=5, ls="none", zorder=6)
    if result.winner is not None:
        w = result.winner
        r = w.last_rung
        y = _value(result, w.runs[r])
        label = wrap_label(w.label, 34)
        ax.annotate(f"winner: {label}", (_x(r, w.candidate.index, n), y), xytext=(0, -10),
                    textcoords="offset points", fontsize=SMALL, color=WINNER_COLOR, va="top", ha="right")
    if log:
        ax.set_yscale("log")
        plain = FuncFormatter(lambda v, _: f"{v:g}")
        ax.yaxis.set_major_formatter(plain)
        ax.yaxis.set_minor_formatter(plain)
    ax.set_ylim(lo / (1.3 if log else 1.0) if log else 0, top * (1.1 if log else 1.04))
    ax.set_xlim(-0.6, len(result.rung_steps) - 0.4)
    ax.set_xticks(range(len(result.rung_steps)))
    ax.set_xticklabels([f"rung {r + 1}\n{s} steps" for r, s in enumerate(result.rung_steps)], fontsize=SMALL)
    ax.set_ylabel(ylabel, fontsize=SMALL)
    ax.tick_params(labelsize=SMALL)
    ax.grid(axis="y", alpha=0.3)
    counts = _counts(result)
    ax.set_title(f"Successive halving: {len(trials)} candidates; at each rung the fastest 1/{result.eta} of "
                 f"those that train correctly go on\n({counts})", fontsize=9)
    present = {t.status for t in trials}
    handles = [Line2D([], [], color=NAIVE_COLOR, ls="--", marker="D", ms=5,
                      label=f"naive (one run of {result.rung_steps[-1]} steps)")] if naive is not None else []
    for status, color, marker, size, text in (
            (WINNER, WINNER_COLOR, "*", 11, "winner"), (FINALIST, FINALIST_COLOR, "o", 6, "finalist"),
            (SLOWER, PRUNED_COLOR, "x", 6, "pruned: slower"), (WORSE, WORSE_COLOR, "v", 6, "pruned: trains worse"),
            (FAILED, FAILED_COLOR, "x", 6, "failed")):
        if status in present:          # only what this sweep has
            handles.append(Line2D([], [], color=color, marker=marker, ms=size, ls="none", label=text))
    ax.legend(handles=handles, fontsize=SMALL, loc="upper right", frameon=False, ncol=2)


def _counts(result: SweepResult) -> str:
    statuses = [t.status for t in result.trials]
    parts = [f"{statuses.count(SLOWER)} pruned as slower"]
    if statuses.count(WORSE):
        parts.append(f"{statuses.count(WORSE)} trained worse")
    if statuses.count(FAILED):
        parts.append(f"{statuses.count(FAILED)} failed")
    return ", ".join(parts)


def draw_finalists(ax: Axes, result: SweepResult) -> None:
    """The finalists and the naive run at the last rung: medians with IQR, coloured by verdict.

    Args:
        ax: the axes to draw on.
        result: a ``SweepResult``.
    """
    last = len(result.rung_steps) - 1
    rows: List[Tuple[str, object, str]] = []
    for t in result.finalists:
        if t.status == WINNER:
            color = WINNER_COLOR
        elif t in result.tied:
            color = render.SAME_COLOR
        else:
            color = WORSE_COLOR
        rows.append((t.label, t.runs[last], color))
    ref = result.naive
    if rows and ref is not None and ref.ok:
        rows.append(("naive", ref, PRUNED_COLOR))
    if not rows:
        why = result.error or ("the sweep was interrupted" if result.interrupted else
                               "no candidate trained correctly through the last rung")
        message(ax, f"No finalists: {why}.")
        return
    ylabel, scale = _unit(result)
    names, meds, lows, highs, colors = [], [], [], [], []
    for label, run, color in rows:
        times = example_times_s(run) if result.per_batch else list(run.step_times_s)
        s = stats.Spread.of(times)
        names.append(wrap_label(label, 30))
        meds.append(s.median * scale)
        lows.append((s.median - s.q1) * scale)
        highs.append((s.q3 - s.median) * scale)
        colors.append(color)
    ys = list(range(len(rows)))[::-1]
    ax.barh(ys, meds, color=colors, alpha=0.85, xerr=[lows, highs], ecolor="#333333", capsize=3)
    ax.set_yticks(ys)
    ax.set_yticklabels(names, fontsize=SMALL)
    ax.set_xlabel(ylabel.replace("median ", "median (IQR) "), fontsize=SMALL)
    ax.tick_params(labelsize=SMALL)
    best = meds[0]
    for y, m, hi, (label, run, color) in zip(ys, meds, highs, rows):
        if label == "naive" and result.speedup is not None:
            # The verdict's first clause only: the full text (a busy machine's load, what to do) is the
            # table's; a long label here squeezed the bars to nothing.
            text = f"winner vs naive: {result.speedup.text().split(': compare')[0].split(' (other programs')[0]}"
        elif color == WINNER_COLOR:
            text = "winner"
        elif color == render.SAME_COLOR:
            text = "tied with the winner (within noise)"
        else:
            text = f"{m / best:.2f}x the winner's time"
        ax.text(m + hi, y, "  " + text, va="center", fontsize=SMALL, color="#333333")
    ax.set_xlim(0, max(m + h for m, h in zip(meds, highs)) * 1.9)
    ax.set_title(f"The last rung ({result.rung_steps[last]} steps): the finalists and the naive run\n"
                 f"run-to-run noise band {result.noise.text()}", fontsize=9)
    ax.grid(axis="x", alpha=0.3)


def rungs_png(result: SweepResult, *, width_in: float = 9.0, height_in: float = 5.0, dpi: float = 96) -> bytes:
    """``draw_rungs`` as PNG bytes.

    Example:
        >>> rungs_png(result)[:4]  # doctest: +SKIP
        b'\\x89PNG'
    """
    fig = Figure(figsize=(width_in, height_in), dpi=dpi, layout="constrained")
    draw_rungs(fig.subplots(), result)
    return figure_png(fig)


def finalists_png(result: SweepResult, *, width_in: float = 9.0, dpi: float = 96) -> bytes:
    """``draw_finalists`` as PNG bytes; the height grows with the finalists."""
    n = len(result.finalists) + 1
    # Room for the two-line title, the axis label and a label wrapped onto two lines per row: less
    # collapsed the axes on three rows (matplotlib warned that constrained_layout was not applied).
    fig = Figure(figsize=(width_in, max(2.6, 1.5 + 0.6 * n)), dpi=dpi, layout="constrained")
    draw_finalists(fig.subplots(), result)
    return figure_png(fig)
