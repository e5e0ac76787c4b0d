"""A profiler capture (``tfwb.profile``'s ``ProfileReport``): each captured step as the TF
profiler split it (input, compute, other), and the ops with the most self time.

The report is read by attribute only, so nothing here imports TensorFlow.
``profile_png`` draws both panels side by side.
"""
from __future__ import annotations

from typing import Any

from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from tfwb.ui.charts.common import COMPUTE_COLOR, INPUT_COLOR, MEDIAN_COLOR, SMALL, figure_png, message

__all__ = ["draw_profile_steps", "draw_top_ops", "profile_png", "PROFILE_OTHER_COLOR", "OP_NAME_WIDTH"]

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
        message(ax, "the profiler recorded no steps")
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
    ax.set_xticks(x, [str(s.step) for s in steps], fontsize=SMALL)
    ax.set_xlabel("call (warm-up included)")
    ax.set_ylabel("ms")
    pct = report.breakdown_pct
    handles = [Patch(color=INPUT_COLOR, label=f"input {pct['input']:.0f}%"),
               Patch(color=COMPUTE_COLOR, label=f"compute {pct['compute']:.0f}%"),
               Patch(color=PROFILE_OTHER_COLOR, label=f"other {pct['other']:.0f}%")]
    if len(ours) == len(steps):
        handles.append(Line2D([], [], color=MEDIAN_COLOR, marker="_", linestyle="none", markersize=12,
                              label="tfwb's time"))
    ax.legend(handles=handles, loc="lower left", bbox_to_anchor=(0.0, 1.01), ncol=2, fontsize=SMALL,
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
        message(ax, "the profiler recorded no ops")
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
              loc="lower right", fontsize=SMALL, frameon=False)
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
