"""All runs side by side: one bar per run at its median step time (IQR error bars), named by
the knobs that set it apart from the baseline and coloured by a noise-aware comparison.

``draw_comparison`` draws on an Axes; ``comparison_png`` is what the Workbench shows under
its history table. The rows (medians, comparisons) are ``tfwb.analysis.rows.HistoryRow``s, the
table's own (the Workbench passes the ``RunView``'s), so the table and the chart say the same;
the noise caption is ``tfwb.render.noise_note``.
"""
from __future__ import annotations

import textwrap
from typing import List, Optional, Sequence, Tuple

from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from tfwb import stats
from tfwb.analysis.rows import HistoryRow, Versus, history_rows
from tfwb.config import RunConfig
from tfwb.records import RunResult
from tfwb.render import FASTER_COLOR, SLOWER_COLOR, noise_note, short_changes, verdict, verdict_color
from tfwb.ui.charts.common import (BASELINE_COLOR, FAILED_COLOR, MUTED_COLOR, SMALL, failure_text, figure_png,
                                   message, shorten)

__all__ = ["draw_comparison", "comparison_png", "comparison_height_in", "run_label", "LABEL_WIDTH",
           "BARS_SHARE", "NEUTRAL_BAR_COLOR"]

NEUTRAL_BAR_COLOR = "#b7c4d1"  # a run with no significant difference (or nothing) to show
#: Characters per line of a run's name in the comparison chart (wrapped, never cut).
LABEL_WIDTH = 30
#: Share of the comparison chart's width the longest bar may take; its notes use the rest.
BARS_SHARE = 0.42


def run_label(index: int, reference: Optional[RunConfig], config: RunConfig, *, is_baseline: bool = False,
              width: int = LABEL_WIDTH) -> str:
    """A run's name in the comparison chart: ``#index``, its label (``config.label``), and the
    knobs that set it apart from ``reference`` (``tfwb.render.short_changes``), wrapped at
    ``width``, never cut.

    Args:
        index: the run's 1-based position (``HistoryRow.index``).
        reference: the configuration the knobs are named against (the baseline's).
        config: the run's configuration.
        is_baseline: the run is the baseline (``HistoryRow.is_baseline``).
        width: characters per line (a single knob longer than that keeps its own line).

    Returns:
        One or more lines, joined by ``"\\n"``.

    Example:
        >>> run_label(2, RunConfig(), RunConfig(prefetch=True))
        '#2 prefetch'
    """
    items = short_changes(config, reference)
    if is_baseline:
        items = ["baseline"] + items
    elif not items:
        items = ["same knobs as the baseline"]
    head = f"#{index}"
    lines: List[str] = []
    if config.label:
        lines.extend(textwrap.wrap(f"{head} {config.label}", width, subsequent_indent="   ") or [head])
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


def _versus_phrase(v: Optional[Versus], other: str) -> str:
    """``_phrase`` of a row's ``Versus`` (per example with both batches when so compared)."""
    if v is None:
        return ""
    return _phrase(v.kind, v.speedup, other, v.batches if v.per_example else None)


def _phrase(kind: Optional[str], speedup: Optional[float], other: str,
            batches: Optional[Tuple[int, int]] = None) -> str:
    """``"2.38x slower than #4"``, ``"no significant difference from the baseline (1.02x faster)"``,
    ``"per example: 1.21x faster than #3 (batch 128 vs 64)"`` (``batches``: this run's and the
    other's, when they differ and the runs were compared per example)..."""
    if kind in (stats.FASTER, stats.SLOWER) and speedup:
        factor = speedup if kind == stats.FASTER else 1.0 / speedup
        text = f"{factor:.2f}x {kind} than {other}"
    elif kind == stats.NO_DIFFERENCE:
        text = f"no significant difference from {other}" + (f" ({stats.ratio_text(speedup)})" if speedup else "")
    elif kind == stats.CANNOT_TELL_BUSY:
        text = f"cannot tell against {other}: the machine was busy"
    elif kind == stats.CANNOT_TELL_DRIFT:
        text = f"cannot tell against {other}: a run drifted"
    elif kind == stats.TOO_FEW:
        text = f"too few steps to compare with {other}"
    else:
        return ""
    if batches:
        text = f"per example: {text} (batch {batches[0]} vs {batches[1]})"
    return text


def _notes(row: HistoryRow, base_index: Optional[int], versus: str) -> Tuple[str, Optional[str], str]:
    """A bar's two notes, ``(first, its kind, second)``: the comparison ``versus`` asks for first
    (the other when there is none), the other one second; said once when the previous run is the baseline."""
    vs_prev = _versus_phrase(row.versus_previous, f"#{row.previous}") if row.previous else ""
    if row.is_baseline:
        vs_base, base_kind = "", None
    elif row.comparison is None:
        vs_base, base_kind = verdict(row), None         # e.g. "full size: not compared"
    else:
        vs_base = _versus_phrase(row.versus_baseline, "the baseline")
        base_kind = row.comparison
    if row.previous is not None and row.previous == base_index:
        # The previous run is the baseline: one comparison, said once.
        first = vs_prev.replace(f"#{base_index}", f"#{base_index} (the baseline)")
        kind, second = row.prev_comparison, ""
    elif versus == "previous":
        first, kind, second = vs_prev, row.prev_comparison, vs_base
        if not first and vs_base:                        # nothing before it: fall back
            first, kind, second = vs_base, base_kind, ""
    else:
        first, kind, second = vs_base, base_kind, vs_prev
    if row.is_baseline and not first:
        first = "the baseline"
    return first, kind, second


def _draw_bar(ax: Axes, yi: int, row: HistoryRow, first: str, kind: Optional[str], second: str,
              right: float) -> None:
    """One finished run's bar (median, IQR) and its notes to the right, coloured by its verdict."""
    med, q1, q3 = row.median_ms, row.q1_ms, row.q3_ms
    color = verdict_color(kind) if kind in (stats.FASTER, stats.SLOWER) else (
        BASELINE_COLOR if row.is_baseline else NEUTRAL_BAR_COLOR)
    ax.barh(yi, med, height=0.55, color=color, edgecolor="#333333" if row.is_baseline else "none",
            linewidth=0.8, xerr=[[med - q1], [q3 - med]],
            error_kw=dict(ecolor="#333333", capsize=3, linewidth=1))
    x = q3 + right * 0.02
    head = f"{med:,.1f} ms" + (f"  {first}" if first else "")
    backing = dict(facecolor="white", edgecolor="none", alpha=0.85, pad=0.5)
    notes = [ax.text(x, yi - (0.15 if second else 0.0), head, va="center", ha="left", fontsize=SMALL,
                     color=verdict_color(kind) if kind in (stats.FASTER, stats.SLOWER) else "#333333",
                     fontweight="bold" if kind in (stats.FASTER, stats.SLOWER) else "normal",
                     bbox=backing)]
    if second:
        notes.append(ax.text(x, yi + 0.2, second, va="center", ha="left", fontsize=SMALL - 0.5,
                             color=MUTED_COLOR, bbox=backing))
    for note in notes:
        note.set_in_layout(False)      # they sit inside the axes (see xlim); layout ignores them


def draw_comparison(ax: Axes, results: Sequence[RunResult], baseline: Optional[RunResult] = None, *,
                    baseline_config: Optional[RunConfig] = None, versus: str = "previous",
                    noise: Optional[stats.NoiseBand] = None,
                    rows: Optional[Sequence[HistoryRow]] = None) -> None:
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
            ``tfwb.analysis.rows.pick_baseline(results, baseline_config)``.
        baseline_config: what the run names are relative to (as in
            ``tfwb.analysis.rows.history_rows``); default the baseline run's configuration.
        versus: ``"previous"`` (default: the previous finished run of the same size,
            which is what the reader just changed) or ``"baseline"``: the
            comparison that colours the bars and comes first.
        noise: the run-to-run band (default: learned from ``results``).
        rows: ``tfwb.analysis.rows.history_rows`` of exactly these arguments, when the caller has them
            (a ``tfwb.analysis.session.RunView``'s ``rows``): the chart then shows the table's verdicts,
            not a second analysis.

    Raises:
        ValueError: for another ``versus``.

    Example:
        >>> fig = Figure(); draw_comparison(fig.subplots(), results)
    """
    if versus not in ("previous", "baseline"):
        raise ValueError(f"versus={versus!r} is not allowed; use 'previous' or 'baseline'")
    if not results:
        message(ax, "no runs yet")
        return
    if not any(r.ok for r in results):
        lines = [f"#{i} {failure_text(r)}" for i, r in enumerate(results, 1)][-4:]
        message(ax, "no finished runs yet\n" + "\n".join(shorten(x, 100) for x in lines), FAILED_COLOR,
                 width=110)
        return
    if rows is None:
        rows = history_rows(results, baseline, baseline_config=baseline_config, noise=noise)
    base_row = next((r for r in rows if r.is_baseline), None)
    if baseline_config is None:
        baseline_config = results[base_row.index - 1].config if base_row else results[0].config
    y = list(range(len(rows)))
    right = max(r.q3_ms for r, res in zip(rows, results) if res.ok and r.q3_ms is not None)
    first_label = "previous run" if versus == "previous" else "baseline"
    ax.set_title(f"median step time per run (bars: IQR); colour: compared with the {first_label}",
                 fontsize=10, loc="left", pad=20)
    labels = []
    base_index = base_row.index if base_row is not None else None
    for yi, row, result in zip(y, rows, results):
        labels.append(run_label(row.index, baseline_config, result.config, is_baseline=row.is_baseline))
        if not result.ok:
            ax.text(right * 0.02, yi, shorten(failure_text(result), 90), va="center", ha="left",
                    fontsize=SMALL, color=FAILED_COLOR, fontweight="bold")
            continue
        _draw_bar(ax, yi, row, *_notes(row, base_index, versus), right)
    if base_row is not None:
        ax.axvline(base_row.median_ms, color=BASELINE_COLOR, linestyle="--", linewidth=1, zorder=0.5)
    ax.set_yticks(y)
    ax.set_yticklabels(labels, fontsize=SMALL)
    for tick, result in zip(ax.get_yticklabels(), results):
        if not result.ok:
            tick.set_color(FAILED_COLOR)
    ax.set_ylim(len(rows) - 0.5, -0.5)                           # first run on top
    ax.set_xlim(0, right / BARS_SHARE)                           # bars on the left, notes to their right
    xlabel = "median step time (ms)"
    note = noise_note(rows)
    if note:
        xlabel += "\n" + "\n".join(textwrap.wrap(note, 105))
    ax.set_xlabel(xlabel, fontsize=SMALL + 1)
    ax.grid(axis="x", alpha=0.3)
    ax.set_axisbelow(True)
    short = "previous" if versus == "previous" else "baseline"
    handles = [Patch(color=FASTER_COLOR, label=f"faster than {short}"),
               Patch(color=SLOWER_COLOR, label=f"slower than {short}"),
               Patch(color=NEUTRAL_BAR_COLOR, label="no significant difference, or cannot tell")]
    if base_row is not None:
        handles.append(Line2D([], [], color=BASELINE_COLOR, linestyle="--", label="baseline median"))
    ax.legend(handles=handles, loc="lower left", bbox_to_anchor=(0.0, 1.0), ncol=len(handles),
              fontsize=SMALL, frameon=False, borderaxespad=0.2, handlelength=1.5, columnspacing=1.2)


def comparison_height_in(results: Sequence[RunResult], baseline_config: Optional[RunConfig] = None) -> float:
    """Figure height (inches) that gives each run's (wrapped) name and its two notes room.

    Args:
        results: the runs ``comparison_png`` will draw.
        baseline_config: what the run names are relative to; default the first run's.

    Returns:
        At least 2.6 inches with runs, 1.2 with none.

    Example:
        >>> comparison_height_in([]), comparison_height_in(results)
        (1.2, 2.6)
    """
    if not results:
        return 1.2
    reference = baseline_config or results[0].config
    lines = max(2, *(len(run_label(i, reference, r.config).splitlines())
                     for i, r in enumerate(results, 1)))
    return max(2.6, 1.5 + len(results) * (0.16 * lines + 0.14))


def comparison_png(results: Sequence[RunResult], baseline: Optional[RunResult] = None, *,
                   baseline_config: Optional[RunConfig] = None, width_in: float = 9.0,
                   dpi: float = 96, versus: str = "previous",
                   rows: Optional[Sequence[HistoryRow]] = None) -> bytes:
    """All runs side by side (``draw_comparison``) as PNG bytes; height grows with the runs.

    Args:
        results: runs in order, failures included.
        baseline: the run to compare with; default the first ok run (of
            ``baseline_config`` when given).
        baseline_config: what the run names are relative to.
        width_in: figure width in inches.
        dpi: pixels per inch.
        versus: the comparison that colours the bars: ``"previous"`` or ``"baseline"``.
        rows: the history's rows when the caller has them (see ``draw_comparison``).

    Returns:
        PNG bytes.

    Example:
        >>> comparison_png([])[:4]
        b'\\x89PNG'
    """
    fig = Figure(figsize=(width_in, comparison_height_in(results, baseline_config)), dpi=dpi,
                 layout="constrained")
    draw_comparison(fig.subplots(), results, baseline, baseline_config=baseline_config, versus=versus, rows=rows)
    return figure_png(fig)
