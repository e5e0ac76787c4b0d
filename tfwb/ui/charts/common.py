"""What every chart family shares: the Figure -> PNG step, the shared colours, and the
"nothing to show" message.

Figures are ``matplotlib.figure.Figure``, never pyplot: nothing global is created or
left open, no inline figure appears at the end of a cell, and it works headless (Agg).
Verdict and failure colours come from ``tfwb.render`` (``FAILED_COLOR``), so tables
and charts agree. An Axes with nothing to show is switched off and carries a message
instead (``message``): a failed run never leaves empty axes.
"""
from __future__ import annotations

import io
import textwrap
from typing import Optional

from matplotlib.axes import Axes
from matplotlib.figure import Figure

from tfwb import render
from tfwb.records import RunResult

#: What ``tfwb.ui.charts`` re-exports; ``message``, ``run_name``, ``shorten``, ``failure_text`` and
#: ``SMALL`` serve the chart modules only.
__all__ = ["figure_png", "INPUT_COLOR", "COMPUTE_COLOR", "WARMUP_COLOR", "MEDIAN_COLOR", "FAILED_COLOR",
           "BASELINE_COLOR", "MUTED_COLOR"]

#: Colours that mean the same thing in every chart.
INPUT_COLOR = "#f28e2b"      # waiting for input (a tf.data stage in the profiler's charts)
COMPUTE_COLOR = "#4e79a7"    # the rest of the step
WARMUP_COLOR = "#bab0ac"     # warm-up steps (excluded from statistics)
MEDIAN_COLOR = "#222222"
FAILED_COLOR = render.FAILED_COLOR   # the one definition lives in tfwb.render
BASELINE_COLOR = "#8c8c8c"
#: Grey text: a message that is not a failure, a secondary note.
MUTED_COLOR = "#555555"
#: Font size of legends, annotations and ticks that are not the main text.
SMALL = 8


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


def message(ax: Axes, text: str, color: str = MUTED_COLOR, width: int = 80) -> None:
    """Switch ``ax`` off and put ``text`` (each line wrapped at ``width``) in its middle.

    Args:
        ax: the Axes that has nothing to show.
        text: what to say instead.
        color: the text's colour (``FAILED_COLOR`` for a failure).
        width: characters per line.

    Example:
        >>> ax = Figure().subplots(); message(ax, "no runs yet")
        >>> ax.axison, ax.texts[0].get_text()
        (False, 'no runs yet')
    """
    ax.set_axis_off()
    wrapped = "\n".join("\n".join(textwrap.wrap(line, width)) for line in text.splitlines())
    ax.text(0.5, 0.5, wrapped or text, transform=ax.transAxes, ha="center", va="center", fontsize=9,
            color=color)


def run_name(result: RunResult) -> str:
    """A run's name in titles and legends: its label, else its workload.

    Example:
        >>> run_name(result)
        'images'
    """
    return result.config.label or result.config.workload


def shorten(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, the last one an ellipsis when it was longer.

    Example:
        >>> shorten("ResourceExhaustedError", 10)
        'ResourceE\u2026'
    """
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"


def failure_text(result: RunResult) -> str:
    """What a chart says about a run that has nothing to draw: ``"run failed: OOM"``.

    Example:
        >>> failure_text(RunResult(config=result.config, status="failed", error="OOM"))
        'run failed: OOM'
    """
    return f"run {result.status}: {result.error or 'no steps measured'}"
