"""The live view's budget: how often a view may be updated while training runs, and how much of the
training's wall time its drawing may take.

A live view (``tfwb.ui.fit_view`` inside ``model.fit``) runs on the training thread: whatever it
takes, training waits. ``ViewBudget`` decides, at each chance, whether an update is due (at most one
every ``interval_s``) and whether it may be a chart (only while the view's time so far plus the
chart's expected cost stays within ``share`` of the wall time since the budget started; otherwise
only the cheap progress text changes), and records what each update took: the total, the spans
(so a rate measured over a span can say how much of it was drawing), the charts and the progress
updates. A chart's expected cost is the largest of the last chart's and the mean chart's; before a
view kind has drawn its first chart in this process it is the view's ``first_draw_s`` (else
``FIRST_DRAW_S``), afterwards what the first chart of that kind took.

Used by ``tfwb.keras.Monitor`` (charts and progress, every ``REDRAW_S`` at most, only when a window
has closed) and by the Workbench's progress bar (``tfwb.ui.panel``: every ``BAR_REDRAW_S`` at most,
only between timing windows, ``tfwb.observers.Progress(settled_only=True)``); plain Python (no
widgets, no matplotlib), so any front end can budget its drawing the same way. The browser that
draws a view competes with training for the CPU: each update costs it a few milliseconds of layout
and paint, so a view updated on every step of a fast run is a load of its own (issue 34).

Example:
    >>> budget = ViewBudget(lambda: 0.0, share=0.03, interval_s=2.0)      # started at 0.0
    >>> budget.due(1.0), budget.due(2.5), budget.due(3.0)                # at most one update every 2 s
    (True, False, True)
    >>> class View:
    ...     first_draw_s = 0.01
    >>> budget.chart_allowed(10.0, View())           # 0.01 s within 3 % of 10 s
    True
    >>> budget.record(10.0, 0.5, chart=True, kind="View")                # it took 0.5 s
    >>> budget.charts, budget.spent_s, budget.chart_allowed(12.0, View())
    (1, 0.5, False)
"""
from __future__ import annotations

import math
from typing import Any, Callable, Dict, List, Optional, Tuple

__all__ = ["ViewBudget", "REDRAW_S", "BAR_REDRAW_S", "VIEW_SHARE", "FIRST_DRAW_S"]

#: The live view (progress text, and a chart when the budget allows) is updated at most this often.
REDRAW_S = 2.0
#: The Workbench's progress bar (a bar and a line of text, no chart) moves at most this often during a
#: run; its last step and the result always draw. Each move costs headless Chromium tens of
#: milliseconds of CPU in a notebook page (layout of the page around it): tests/ui/test_lab.py measured
#: the browser at 2.01 % of 2 busy cores over a run's measured steps with a move every 0.5 s and
#: 1.8-3.9 % with one every 1 s (budget 2 %), and 1.84 % over 9.4 s of a quiet machine's run with one
#: every 2 s (about 70 ms of browser CPU a move): every 3 s leaves the budget a margin.
BAR_REDRAW_S = 3.0
#: The live view may take at most this share of the wall time so far: a chart is drawn only
#: when the view's time so far plus the chart's expected cost stays within it.
VIEW_SHARE = 0.03
#: Before a view has drawn its first chart in this process its cost is unknown: it is taken to be the
#: view's ``first_draw_s``, else this (seconds: a light matplotlib figure's first draw on 2 busy cores,
#: benchmarks/view_cost.py); afterwards what the first chart of that view's kind took.
FIRST_DRAW_S = 0.15
#: What a first chart cost, per view kind (its class name), in this process (``FIRST_DRAW_S`` until measured).
_FIRST_DRAW: Dict[str, float] = {}


class ViewBudget:
    """One view's budget over one stretch of training (a fit).

    Args:
        clock: seconds.
        share: the most of the wall time since the start the view may take (``VIEW_SHARE``).
        interval_s: the least time between two updates (``REDRAW_S``).
        start_s: the start the share is counted from (default: the clock now).

    Attributes:
        start_s: when the budget started.
        spent_s: seconds the view took: made, progress, charts.
        spans: ``(start, seconds)`` of each update.
        charts, updates: charts drawn, progress-only updates.
    """

    def __init__(self, clock: Callable[[], float], *, share: float = VIEW_SHARE, interval_s: float = REDRAW_S,
                 start_s: Optional[float] = None) -> None:
        self.clock, self.share, self.interval_s = clock, share, interval_s
        self.start_s = clock() if start_s is None else start_s
        self.spent_s = 0.0
        self.spans: List[Tuple[float, float]] = []
        self.charts, self.updates = 0, 0
        self._chart_s, self._last_chart_s = 0.0, 0.0
        self._last_update = -math.inf

    def due(self, now: float) -> bool:
        """Whether an update is due at ``now`` (``interval_s`` since the last one); when it is, ``now``
        counts as the last update."""
        if now - self._last_update < self.interval_s:
            return False
        self._last_update = now
        return True

    def chart_allowed(self, now: float, view: Any) -> bool:
        """Whether a chart by ``view`` at ``now`` keeps the view's time within ``share`` of the wall time."""
        if self.charts:
            expected = max(self._last_chart_s, self._chart_s / self.charts)
        else:
            expected = _FIRST_DRAW.get(type(view).__name__, getattr(view, "first_draw_s", FIRST_DRAW_S))
        return self.spent_s + expected <= self.share * (now - self.start_s + expected)

    def spend(self, seconds: float) -> None:
        """Count time the view took outside an update (making it)."""
        self.spent_s += seconds

    def record(self, start_s: float, seconds: float, *, chart: bool = False, update: bool = False,
               kind: str = "") -> None:
        """Count an update that began at ``start_s`` and took ``seconds``: a chart (the first of ``kind``
        in this process sets that kind's expected first cost) or, with ``update``, a progress text."""
        self.spent_s += seconds
        self.spans.append((start_s, seconds))
        if update:
            self.updates += 1
        if chart:
            self.charts += 1
            self._chart_s += seconds
            self._last_chart_s = seconds
            if self.charts == 1:
                _FIRST_DRAW[kind] = seconds
