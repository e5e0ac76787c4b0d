"""How far from the limit, per run: where the step's time goes, and achieved FLOP/s against the peaks.

Two panels side by side, one row per run that finished (issue 19):

- **where the step's time goes** (``draw_time_split``), stacked bars of the median step (ms):
  *input wait* (the measured share of the step spent waiting for the next batch,
  ``RunResult.input_wait_fraction``), *per-call overhead* (the floor a ``tf.function`` call
  costs on this machine, ``call_overhead_s``, shared by the ``steps_per_call`` steps of a
  call), *compute at peak* (the step's model FLOPs at this machine's measured peak of its
  dtype: ``model_flops_per_step / peak_flops_per_s``, the least time the counted
  arithmetic can take, which is MFU x step), and *the rest* (everything else: memory
  traffic, op launches, kernels below peak, work the count does not see). A run whose
  FLOPs or peak were not counted has no compute segment; its rest says so.
- **achieved FLOP/s** (``draw_flops``), log scale: a bar of the model FLOPs per second at the
  median step, a mark at this machine's measured peak of the run's dtype and one at the
  datasheet's (or the CPU formula's), and the MFU written beside.

``limits_png(results)`` draws both for the Workbench and for chapter 00.
"""
from __future__ import annotations

from typing import List, Optional, Sequence, Tuple

from matplotlib.axes import Axes
from matplotlib.figure import Figure

from tfwb.config import RunConfig  # noqa: F401  (the doctests build configs)
from tfwb.records import RunResult, percent
from tfwb.ui.charts.common import COMPUTE_COLOR, INPUT_COLOR, MEDIAN_COLOR, MUTED_COLOR, SMALL, figure_png, message

__all__ = ["draw_time_split", "draw_flops", "limits_png", "time_split", "LIMIT_SEGMENTS", "OVERHEAD_COLOR",
           "REST_COLOR", "ACHIEVED_COLOR", "DATASHEET_COLOR", "LIMITS_MAX_RUNS"]

OVERHEAD_COLOR = "#b07aa1"    # the per-call overhead floor
REST_COLOR = "#d4d4d4"        # the step's time nothing above accounts for
ACHIEVED_COLOR = COMPUTE_COLOR
DATASHEET_COLOR = "#e15759"
#: The segments of ``draw_time_split``, in stacking order: (key, legend label, colour).
LIMIT_SEGMENTS = (
    ("input", "input wait", INPUT_COLOR),
    ("overhead", "per-call overhead (floor: an empty tf.function call)", OVERHEAD_COLOR),
    ("compute", "compute at peak: model FLOPs / this machine's measured peak", "#59a14f"),
    ("rest", "the rest: memory traffic, launches, kernels below peak, uncounted work", REST_COLOR),
)
#: At most this many runs (the latest) are drawn.
LIMITS_MAX_RUNS = 12


def time_split(result: RunResult) -> Optional[dict]:
    """Where a run's median step goes, in seconds: ``{"input", "overhead", "compute", "rest", "step"}``.

    Each part is clipped so the parts never add up to more than the step; a part the run
    did not measure is 0 (``compute`` is ``None`` when the FLOPs or the peak were not counted).

    Returns:
        The split, or ``None`` for a run without measured steps.

    Example:
        >>> r = RunResult(config=RunConfig(), step_times_s=(0.1,) * 4, input_wait_s=(0.03,) * 4,
        ...               model_flops_per_step=2e9, peak_flops_per_s=1e11, call_overhead_s=1e-3)
        >>> {k: round(v * 1e3, 3) for k, v in time_split(r).items()}
        {'input': 30.0, 'overhead': 1.0, 'compute': 20.0, 'rest': 49.0, 'step': 100.0}
    """
    step = result.median_step_s
    if not step:
        return None
    left = step
    wait = result.input_wait_fraction
    inp = min(max(wait or 0.0, 0.0), 1.0) * step
    left -= inp
    over = 0.0
    if result.call_overhead_s:
        over = min(result.call_overhead_s / max(result.steps_per_call, 1), left)
    left -= over
    compute: Optional[float] = None
    if result.model_flops_per_step is not None and result.peak_flops_per_s and not result.flops_uncounted:
        compute = min(result.model_flops_per_step / result.peak_flops_per_s, left)
        left -= compute
    return {"input": inp, "overhead": over, "compute": compute, "rest": max(left, 0.0), "step": step}


def _legend_below(ax: Axes) -> None:
    """The legend under the x-axis label, clear of it whatever the figure's height."""
    height_in = ax.get_position().height * ax.figure.get_figheight()
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.55 / max(height_in, 0.1)), fontsize=SMALL,
              frameon=False, ncol=1)


def _runs(results: Sequence[RunResult]) -> List[Tuple[int, RunResult]]:
    """(1-based number, result) of the finished runs with steps, the latest ``LIMITS_MAX_RUNS``."""
    runs = [(i, r) for i, r in enumerate(results, 1) if r.ok and r.median_step_s]
    return runs[-LIMITS_MAX_RUNS:]


def _name(number: int, result: RunResult) -> str:
    what = result.config.label or result.config.workload
    dtype = result.compute_dtype
    return f"#{number} {what}" + ("" if dtype == "float32" else f" ({dtype})")


def draw_time_split(ax: Axes, results: Sequence[RunResult]) -> None:
    """Stacked horizontal bars of each finished run's median step (ms): input wait, per-call
    overhead, compute at this machine's peak, the rest (see the module docstring).

    Args:
        ax: where to draw.
        results: runs in order; failed runs and runs without steps are left out.

    Example:
        >>> from matplotlib.figure import Figure
        >>> ax = Figure().subplots(); draw_time_split(ax, [result])
    """
    runs = _runs(results)
    if not runs:
        message(ax, "no finished run with measured steps yet")
        return
    ys = list(range(len(runs)))[::-1]          # the first run on top
    used = set()
    for y, (number, r) in zip(ys, runs):
        split = time_split(r)
        left = 0.0
        for key, label, color in LIMIT_SEGMENTS:
            value = split[key]
            if key == "rest" and split["compute"] is None:
                label = "the rest (FLOPs or peak not counted: compute included)"
                color = "#eeeeee"
            if not value:
                continue
            ax.barh(y, value * 1e3, left=left * 1e3, color=color, edgecolor="white", linewidth=0.5,
                    label=label if label not in used else None)
            used.add(label)
            left += value
        ax.text(split["step"] * 1e3, y, f" {split['step'] * 1e3:.3g} ms", va="center", fontsize=SMALL,
                color=MEDIAN_COLOR)
    ax.set_yticks(ys)
    ax.set_yticklabels([_name(n, r) for n, r in runs], fontsize=SMALL)
    ax.set_xlabel("median step (ms)")
    ax.set_title("where the step's time goes", fontsize=10, loc="left")
    ax.set_xlim(0, max(time_split(r)["step"] for _, r in runs) * 1e3 * 1.25)
    _legend_below(ax)
    ax.grid(axis="x", alpha=0.3)
    ax.set_axisbelow(True)


def draw_flops(ax: Axes, results: Sequence[RunResult]) -> None:
    """Achieved model FLOP/s per finished run (bars, log scale) against this machine's measured
    peak of the run's dtype (a black mark) and the datasheet's (a red mark), MFU written beside.

    A run whose model could not be counted gets no bar but its reason.

    Args:
        ax: where to draw.
        results: runs in order; failed runs and runs without steps are left out.

    Example:
        >>> from matplotlib.figure import Figure
        >>> ax = Figure().subplots(); draw_flops(ax, [result])
    """
    runs = _runs(results)
    if not runs:
        message(ax, "no finished run with measured steps yet")
        return
    ys = list(range(len(runs)))[::-1]
    values = [v for _, r in runs for v in (r.achieved_flops_per_s, r.peak_flops_per_s, r.datasheet_flops_per_s)
              if v]
    if not values:
        message(ax, "no run counted its model FLOPs: "
                + (runs[-1][1].mfu_text() or "recorded before FLOPs were counted"))
        return
    lo, hi = min(values), max(values)
    used = set()

    def once(label: str) -> Optional[str]:
        if label in used:
            return None
        used.add(label)
        return label

    for y, (number, r) in zip(ys, runs):
        achieved = r.achieved_flops_per_s
        if achieved and not r.flops_uncounted:
            ax.barh(y, achieved - lo / 10, left=lo / 10, color=ACHIEVED_COLOR, height=0.6,    # ends at achieved
                    label=once("achieved (model FLOPs / median step)"))
        if r.peak_flops_per_s:
            ax.plot([r.peak_flops_per_s], [y], marker="|", markersize=16, markeredgewidth=2.5, color=MEDIAN_COLOR,
                    linestyle="none", label=once("this machine's measured peak (run's dtype)"))
        if r.datasheet_flops_per_s:
            formula = r.datasheet_source.startswith("formula")
            ax.plot([r.datasheet_flops_per_s], [y], marker="|", markersize=16, markeredgewidth=2.5,
                    color=DATASHEET_COLOR, linestyle="none",
                    label=once("cores x clock x FLOPs/cycle (no datasheet: a CPU)" if formula else "datasheet peak"))
        if r.flops_uncounted:
            note = "not counted"
        elif r.mfu is not None:
            note = f"MFU {percent(r.mfu)} = achieved / measured peak"
        elif achieved:
            note = "peak not measured"
        else:
            note = "FLOPs not counted"
        # The MFU note stands just after the tick it divides by (the measured peak), above the row,
        # so it never reads as belonging to the datasheet's or the formula's tick further right.
        x = r.peak_flops_per_s or max(v for v in (achieved, r.datasheet_flops_per_s, lo) if v)
        ax.text(x * 1.1, y + 0.12, note, va="bottom", fontsize=SMALL, color=MUTED_COLOR)
    ax.set_xscale("log")
    ax.set_xlim(lo / 10, hi * 30)
    ax.set_ylim(-0.6, len(runs) - 0.4)
    ax.set_yticks(ys)
    ax.set_yticklabels([f"#{n}" for n, _ in runs], fontsize=SMALL)
    ax.set_xlabel("FLOP/s (log scale)")
    ax.set_title("achieved FLOP/s against the peaks", fontsize=10, loc="left")
    _legend_below(ax)
    ax.grid(axis="x", alpha=0.3, which="both")
    ax.set_axisbelow(True)


def limits_png(results: Sequence[RunResult], *, width: float = 11.0) -> bytes:
    """Both panels for ``results`` (the latest ``LIMITS_MAX_RUNS`` finished runs) as PNG bytes.

    Args:
        results: RunResults in order (a Workbench's ``results``, or a chapter's runs).
        width: figure width in inches.

    Returns:
        PNG bytes (for ``ipywidgets.Image`` or ``IPython.display.Image``).

    Example:
        >>> limits_png([result])[:4]
        b'\\x89PNG'
    """
    n = max(len(_runs(results)), 1)
    axes_in, top_in, bottom_in = 0.4 + 0.34 * n, 0.35, 1.75     # below: tick labels, x label, legend
    height = axes_in + top_in + bottom_in
    fig = Figure(figsize=(width, height))
    left, right = fig.subplots(1, 2, gridspec_kw={"width_ratios": (3, 2), "wspace": 0.12})
    fig.subplots_adjust(left=0.16, right=0.98, top=1 - top_in / height, bottom=bottom_in / height)
    draw_time_split(left, results)
    draw_flops(right, results)
    return figure_png(fig, dpi=90)
