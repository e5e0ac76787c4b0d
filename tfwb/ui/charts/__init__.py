"""Charts of runs, one module per chart family; this package only re-exports their public names.

* ``common``: the Figure -> PNG step (``figure_png``), the shared colours, the message an
  Axes with nothing to show carries instead;
* ``steps``: one run's step times, and the run's chart (step times above utilization);
* ``utilization``: CPU and GPU utilization over a run;
* ``comparison``: all runs side by side at their median step time;
* ``profile``: a profiler capture (step breakdown, top ops);
* ``curves``: convergence: learning-rate sweeps, loss and gradient-norm curves, and a run's
  loss beside the previous run's (the Workbench, when the arithmetic changed);
* ``limits``: how far from the limit: where each run's step time goes (input wait, per-call
  overhead, compute at this machine's peak, the rest) beside achieved FLOP/s against the
  measured and the datasheet peak;
* ``sweep``: a sweep (``tfwb.sweep``) by rung, and its finalists.
* ``live_svg``: the live chart of a ``model.fit`` as SVG text, without matplotlib drawing
  (``tfwb.ui.fit_view``; not re-exported).

Every ``draw_*`` function takes a matplotlib ``Axes`` and plain data (RunResults, reports)
and draws on it; every ``*_png`` builds a ``matplotlib.figure.Figure`` (never pyplot) and
returns PNG bytes for an ``ipywidgets.Image``. ``from tfwb.ui import charts;
charts.run_chart_png(result)`` reaches every family but ``sweep`` (``tfwb.ui.charts.candidates``).

Example:
    >>> from tfwb.ui import charts
    >>> charts.comparison_png(results)[:4]
    b'\\x89PNG'
"""
from __future__ import annotations

from tfwb.ui.charts.common import (BASELINE_COLOR, COMPUTE_COLOR, FAILED_COLOR, INPUT_COLOR, MEDIAN_COLOR,
                                   MUTED_COLOR, WARMUP_COLOR, figure_png)
from tfwb.ui.charts.comparison import (BARS_SHARE, LABEL_WIDTH, NEUTRAL_BAR_COLOR, comparison_height_in,
                                       comparison_png, draw_comparison, run_label)
from tfwb.ui.charts.curves import (CURVES, SERIES_COLORS, SWEEP_CEILING, curves_png, draw_curves, draw_loss_beside,
                                   draw_lr_sweep, loss_beside_png, lr_sweep_png)
from tfwb.ui.charts.limits import (ACHIEVED_COLOR, DATASHEET_COLOR, LIMIT_SEGMENTS, LIMITS_MAX_RUNS, OVERHEAD_COLOR,
                                   REST_COLOR, draw_flops, draw_time_split, limits_png, time_split)
from tfwb.ui.charts.profile import OP_NAME_WIDTH, PROFILE_OTHER_COLOR, draw_profile_steps, draw_top_ops, profile_png
from tfwb.ui.charts.step_times import CLIP_FACTOR, WARMUP_WAIT_COLOR, draw_step_times, run_chart_png
from tfwb.ui.charts.utilization import (GPU_COLORS, MAX_STEP_LINES, MAX_STEP_TICKS, OTHER_CPU_COLOR, STEP_LABEL_GAP_PT,
                                        STEP_LINE_COLOR, draw_utilization)

__all__ = [
    # common
    "figure_png", "INPUT_COLOR", "COMPUTE_COLOR", "WARMUP_COLOR", "MEDIAN_COLOR", "FAILED_COLOR",
    "BASELINE_COLOR", "MUTED_COLOR",
    # steps
    "draw_step_times", "run_chart_png", "CLIP_FACTOR", "WARMUP_WAIT_COLOR",
    # utilization
    "draw_utilization", "OTHER_CPU_COLOR", "STEP_LINE_COLOR", "GPU_COLORS", "MAX_STEP_LINES", "MAX_STEP_TICKS",
    "STEP_LABEL_GAP_PT",
    # comparison
    "draw_comparison", "comparison_png", "comparison_height_in", "run_label", "LABEL_WIDTH", "BARS_SHARE",
    "NEUTRAL_BAR_COLOR",
    # profile
    "draw_profile_steps", "draw_top_ops", "profile_png", "PROFILE_OTHER_COLOR", "OP_NAME_WIDTH",
    # curves
    "draw_lr_sweep", "draw_curves", "lr_sweep_png", "curves_png", "SERIES_COLORS", "SWEEP_CEILING", "CURVES",
    "draw_loss_beside", "loss_beside_png",
    # limits
    "draw_time_split", "draw_flops", "limits_png", "time_split", "LIMIT_SEGMENTS", "OVERHEAD_COLOR", "REST_COLOR",
    "ACHIEVED_COLOR", "DATASHEET_COLOR", "LIMITS_MAX_RUNS",
]
