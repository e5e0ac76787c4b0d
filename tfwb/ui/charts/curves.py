"""Convergence (chapter 04): final loss against learning rate for learning-rate sweeps, and
loss, gradient-norm or held-out curves over training steps, one line per run; and the
Workbench's loss chart: a run's loss beside the previous run's, when the knobs that changed
alter the arithmetic (``tfwb.analysis.pairs.ARITHMETIC_KNOBS``).

``draw_lr_sweep``, ``draw_curves`` and ``draw_loss_beside`` draw on an Axes;
``lr_sweep_png``, ``curves_png`` and ``loss_beside_png`` return PNG bytes. A sweep is read by attribute (``tfwb.tf.lab.learning_rates.LearningRateSweep`` or
anything shaped like it), so nothing here imports TensorFlow.
"""
from __future__ import annotations

from typing import Any, List, Sequence

from matplotlib.axes import Axes
from matplotlib.figure import Figure

from tfwb import render
from tfwb.records import RunResult
from tfwb.ui.charts.common import BASELINE_COLOR, SMALL, figure_png, message, run_name

__all__ = ["draw_lr_sweep", "draw_curves", "lr_sweep_png", "curves_png", "SERIES_COLORS", "SWEEP_CEILING",
           "CURVES", "draw_loss_beside", "loss_beside_png"]

#: One colour per series (optimizer, run) in the convergence charts.
SERIES_COLORS = ("#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#b07aa1", "#edc948", "#9c755f")
#: The loss axis of a sweep stops at this multiple of the starting loss (higher points sit on the edge).
SWEEP_CEILING = 1.5
#: What ``draw_curves`` can draw, with its y-axis label.
CURVES = {"loss": "training loss (per step)", "grad_norm": "gradient norm before clipping",
          "held_out": "loss on all examples of each set"}


def draw_lr_sweep(ax: Axes, sweeps: Sequence[Any]) -> None:
    """Final loss against learning rate (log x axis), one line per sweep.

    Each sweep is a ``tfwb.tf.lab.learning_rates.LearningRateSweep`` (or anything with ``label``, ``rates``,
    ``final_losses`` (``None`` where diverged), ``best_rate``, ``best_loss``,
    ``first_loss``, ``steps``, ``tail``). The best rate of each gets a ring; a rate that
    diverged is an ``x`` on the top edge; a loss above ``SWEEP_CEILING`` times the starting
    loss sits on the top edge as a triangle; a dashed line marks the starting loss.

    Args:
        ax: where to draw.
        sweeps: the sweeps, one line each; none gets a message instead of axes.

    Example:
        >>> ax = Figure().subplots(); draw_lr_sweep(ax, [])
        >>> ax.axison, ax.texts[0].get_text()
        (False, 'no sweeps to draw')
    """
    if not sweeps:
        message(ax, "no sweeps to draw")
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
    ax.legend(fontsize=SMALL, frameon=False, loc="upper left", bbox_to_anchor=(1.01, 1.0),
              title="\u25cb best rate\nx diverged (NaN)\n\u25b2 above the axis", title_fontsize=SMALL,
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
            (``extras["held_out"]`` of ``tfwb.tf.lab.held_out.held_out``: the loss on all
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
        name = run_name(r)
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
            ax.annotate("NaN next", (s, v), xytext=(6, -4), textcoords="offset points", fontsize=SMALL,
                        color=color, ha="left", va="top")
        spec = r.config.clip_spec
        if quantity == "grad_norm" and spec and spec[0] == "global_norm":
            ax.axhline(spec[1], color=color, linestyle=":", lw=1.2)
            ax.text(0.995, spec[1], f"clip threshold {spec[1]:g}", transform=ax.get_yaxis_transform(),
                    ha="right", va="top", fontsize=SMALL, color=color)
    if not drawn:
        message(ax, "nothing to draw: " + ("run with grad_norms=True" if quantity == "grad_norm"
                                            else "no finished steps"))
        return
    positive = [v for v in drawn if v > 0]
    if positive and max(positive) / min(positive) > 100:
        ax.set_yscale("log")
    ax.set_xlabel("training step")
    ax.set_ylabel(CURVES[quantity])
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=SMALL, frameon=False)


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


def draw_loss_beside(ax: Axes, result: RunResult, previous: RunResult, *, number: int,
                     previous_number: int) -> None:
    """Run ``number``'s training loss beside run ``previous_number``'s, over training steps.

    The legend names each run by its number and the knobs that set it apart from the other
    (``tfwb.render.short_changes``); the title says the final-loss gap (``tfwb.render.loss_note``).
    Neither run with a loss gives a message instead of axes.

    Args:
        ax: the Axes.
        result: the latest run.
        previous: the run before it (the one the Workbench compares it with).
        number, previous_number: their 1-based numbers in the Workbench's history.

    Example:
        >>> ax = Figure().subplots(); draw_loss_beside(ax, result, result, number=2, previous_number=1)
        >>> ax.get_legend().get_texts()[0].get_text()
        '#1 (previous run): same knobs'
    """
    series = ((previous, previous_number, "(previous run)", result.config, "#888888", "--"),
              (result, number, "", previous.config, SERIES_COLORS[0], "-"))
    drawn = False
    for run, n, role, other, color, style in series:
        values = list(run.all_losses)
        finite = [(s, v) for s, v in zip(_steps_axis(run, len(values)), values) if v == v and abs(v) != float("inf")]
        if not finite:
            continue
        what = ", ".join(render.short_changes(run.config, other)) or "same knobs"
        ax.plot([s for s, _ in finite], [v for _, v in finite], color=color, linestyle=style, lw=1.4,
                label=f"#{n} {role + ': ' if role else ''}{what}")
        drawn = True
    if not drawn:
        message(ax, "no loss to draw: neither run recorded one")
        return
    warm = max(1, result.steps_per_call) * len(result.warmup_losses)
    if warm:
        ax.axvline(warm + 0.5, color=BASELINE_COLOR, linestyle=":", lw=1)
    note = render.loss_note(previous, result, previous_number)
    ax.set_title(f"training loss: #{number} beside #{previous_number}" + (f" \u2014 {note}" if note else ""),
                 fontsize=10, loc="left")
    ax.set_xlabel("training step (warm-up left of the dotted line)" if warm else "training step")
    ax.set_ylabel(CURVES["loss"])
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=SMALL, frameon=False)


def loss_beside_png(result: RunResult, previous: RunResult, *, number: int, previous_number: int,
                    width_in: float = 9.0, height_in: float = 2.8, dpi: float = 96) -> bytes:
    """``draw_loss_beside`` as PNG bytes (the Workbench's loss chart).

    Example:
        >>> loss_beside_png(result, result, number=2, previous_number=1)[:4]
        b'\\x89PNG'
    """
    fig = Figure(figsize=(width_in, height_in), dpi=dpi, layout="constrained")
    draw_loss_beside(fig.subplots(), result, previous, number=number, previous_number=previous_number)
    return figure_png(fig)
