"""Utilization over a run: CPU (this process, other programs) and each GPU, in % against the
run clock, with the warm-up and measured spans shaded and each measured step marked.

``draw_utilization`` draws on an Axes; ``tfwb.ui.charts.step_times.run_chart_png`` puts it
under the run's step times.
"""
from __future__ import annotations

from typing import Iterable, List, Optional, Sequence, Tuple

from matplotlib.axes import Axes
from matplotlib.ticker import FuncFormatter, Locator

from tfwb.records import RunResult
from tfwb.ui.charts.common import (COMPUTE_COLOR, FAILED_COLOR, MUTED_COLOR, SMALL, WARMUP_COLOR,
                                   failure_text, message)

__all__ = ["draw_utilization", "OTHER_CPU_COLOR", "STEP_LINE_COLOR", "GPU_COLORS", "MAX_STEP_LINES",
           "STEP_LABEL_GAP_PT", "MAX_STEP_TICKS"]

OTHER_CPU_COLOR = "#9c755f"  # other programs' share of the CPU
STEP_LINE_COLOR = "#9aa7b4"  # step boundaries on the utilization time axis
#: One colour per GPU (cycled beyond eight).
GPU_COLORS = ("#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#af7aa1")
#: Step boundaries are drawn as lines up to this many measured steps (ticks only beyond).
MAX_STEP_LINES = 80
#: At most this many step starts get a minor tick on the top axis (every k-th beyond).
MAX_STEP_TICKS = 200
#: Room (points) each numbered step label takes on the top axis: its widest number plus a gap.
STEP_LABEL_GAP_PT = 6.0


class _StepLabels(Locator):
    """The numbered ticks of the top axis: the steps whose labels fit, chosen at draw time.

    Steps are not evenly spread in time (the warm-up shares the axis; a slow step or a
    window sync pushes the next start out), so a fixed "every n-th step" can put two labels
    on top of each other. At draw time, when the axis's width in pixels is known, it walks
    the steps in order (the first always, then every ``every``-th) and keeps a step only when
    its label starts clear of the last kept one's, with ``STEP_LABEL_GAP_PT`` between.

    Args:
        starts: each measured step's start (s, the run clock).
        every: the stride of candidate steps (1-based numbers that are multiples of it).
        fontsize: the labels' size in points.
    """

    def __init__(self, starts: Sequence[float], every: int, fontsize: float) -> None:
        self.starts = list(starts)
        self.every = max(1, every)
        self.fontsize = fontsize
        self.kept: List[int] = []            # 0-based steps labelled at the last draw

    def _candidates(self) -> List[int]:
        return [i for i in range(len(self.starts)) if i == 0 or (i + 1) % self.every == 0]

    def __call__(self) -> List[float]:
        axis = self.axis
        lo, hi = sorted(axis.get_view_interval()) if axis is not None else (0.0, 1.0)
        width_px = axis.axes.bbox.width if axis is not None else 0.0
        dpi = axis.figure.dpi if axis is not None and axis.figure is not None else 72.0
        px_per_s = width_px / (hi - lo) if hi > lo and width_px > 0 else 0.0
        digits = len(str(len(self.starts)))
        need_px = (0.62 * self.fontsize * digits + STEP_LABEL_GAP_PT) * dpi / 72.0
        kept: List[int] = []
        for i in self._candidates():
            x = self.starts[i]
            if not lo - 1e-9 <= x <= hi + 1e-9:
                continue
            if kept and (px_per_s == 0.0 or (x - self.starts[kept[-1]]) * px_per_s < need_px):
                continue
            kept.append(i)
        self.kept = kept
        return [self.starts[i] for i in kept]

    def label(self, x: float, _pos: Optional[int] = None) -> str:
        """The step number (1-based) of the step starting at ``x`` (a tick this locator placed)."""
        i = min(range(len(self.starts)), key=lambda k: abs(self.starts[k] - x)) if self.starts else -1
        return str(i + 1) if i >= 0 else ""

    def tick_values(self, vmin: float, vmax: float) -> List[float]:
        return self()


def _span(starts: Sequence[float], durations: Sequence[float]) -> Optional[Tuple[float, float]]:
    """(first start, last end) of a run of steps; None when there are none or the lengths differ."""
    if not starts or len(starts) != len(durations):
        return None
    return starts[0], starts[-1] + durations[-1]


def _series(values: Iterable[Optional[float]]) -> List[float]:
    """A curve's y values, a missing reading as NaN (a gap in the line)."""
    return [float("nan") if v is None else float(v) for v in values]


def _has(values: Sequence[float]) -> bool:
    """Whether a curve has at least one reading (a value that is not NaN)."""
    return any(v == v for v in values)


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
        >>> from matplotlib.figure import Figure
        >>> fig = Figure(); draw_utilization(fig.subplots(), result)
    """
    samples = sorted(result.samples, key=lambda s: s.t_s)
    if not samples:
        failed = result.status != "ok"
        message(ax, "no utilization samples" + (f" ({failure_text(result)})" if failed else ""),
                FAILED_COLOR if failed else MUTED_COLOR)
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
    cores = (result.fingerprint or {}).get("cpu_count")
    proc = _series(s.cpu_process_pct for s in samples)
    system = _series(s.cpu_system_pct for s in samples)
    second = None
    if cores:
        proc_all = [p / cores for p in proc]
        other = [max(0.0, m - p) for m, p in zip(system, proc_all)]
        if _has(proc_all):
            ax.plot(t, proc_all, color=COMPUTE_COLOR, linewidth=1.5,
                    label=f"CPU, this process (% of all {cores} cores)")
        if _has(other):
            ax.plot(t, other, color=OTHER_CPU_COLOR, linewidth=1.2, linestyle="--",
                    label=f"CPU, other programs (% of all {cores} cores)")
    else:
        if _has(system):
            ax.plot(t, system, color=OTHER_CPU_COLOR, linewidth=1.2, linestyle="--",
                    label="CPU, whole machine (% of all cores)")
        if _has(proc):
            second = ax.twinx()
            second.plot(t, proc, color=COMPUTE_COLOR, linewidth=1.5, label="CPU, this process (% of 1 core, right)")
            second.set_ylabel("this process (% of 1 core)", color=COMPUTE_COLOR)
            second.set_ylim(0, max([100.0] + [v for v in proc if v == v]) * 1.08)
    n_gpus = max(len(s.gpu_util_pct) for s in samples)
    for g in range(n_gpus):
        util = _series(s.gpu_util_pct[g] if g < len(s.gpu_util_pct) else None for s in samples)
        if _has(util):
            ax.plot(t, util, color=GPU_COLORS[g % len(GPU_COLORS)], linewidth=1.5, label=f"GPU {g}")
    if n_gpus == 0:
        ax.text(0.99, 0.96, "no GPU", transform=ax.transAxes, ha="right", va="top", fontsize=SMALL,
                color=MUTED_COLOR, bbox=dict(facecolor="white", edgecolor="#bbbbbb", boxstyle="round,pad=0.3"))
    ax.set_ylabel("% of all CPU cores / GPU busy")
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
                  fontsize=SMALL, frameon=False, borderaxespad=0)
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
    labels = _StepLabels(starts, every, SMALL)          # labels thinned at draw time, to fit
    top.xaxis.set_major_locator(labels)
    top.xaxis.set_major_formatter(FuncFormatter(labels.label))
    top.tick_params(axis="x", which="major", labelsize=SMALL)
    # A minor tick per step start, thinned to at most MAX_STEP_TICKS (thousands of tick marks
    # take seconds to draw and merge into a bar anyway).
    stride = -(-len(starts) // MAX_STEP_TICKS)
    top.set_xticks(starts[::stride], minor=True)
    top.tick_params(axis="x", which="minor", length=3, color=MUTED_COLOR)
    top.tick_params(axis="x", which="major", length=5, pad=1)
    top.set_xlabel("measured step (start)", fontsize=SMALL, labelpad=2)
