"""Tests of tfwb.ui.view_budget: when a live view may update, and when that update may be a chart.

A fake clock drives everything: no drawing, no sleeps (the Workbench's bar test builds its widgets,
headless).
"""
from __future__ import annotations

import pytest

from tfwb.ui import view_budget
from tfwb.ui.view_budget import FIRST_DRAW_S, ViewBudget


class Light:
    first_draw_s = 0.01


class Unknown:
    """A view that does not say what its first chart costs."""


def test_an_update_is_due_at_most_once_per_interval():
    budget = ViewBudget(lambda: 0.0, share=0.03, interval_s=2.0)
    assert [budget.due(t) for t in (0.5, 1.0, 2.5, 2.6, 4.6)] == [True, False, True, False, True]
    never = ViewBudget(lambda: 0.0, share=0.03, interval_s=0.0)
    assert all(never.due(t) for t in (0.0, 0.0, 0.1))


def test_a_chart_is_allowed_while_the_views_time_stays_within_its_share():
    budget = ViewBudget(lambda: 100.0, share=0.03, interval_s=2.0)        # started at 100 s
    assert budget.start_s == 100.0 and budget.spent_s == 0.0
    assert budget.chart_allowed(101.0, Light())          # 0.01 s of 1.01 s: within 3 %
    assert not budget.chart_allowed(100.2, Light())      # 0.01 s of 0.21 s: 4.8 %
    budget.record(101.0, 0.05, chart=True, kind="Light-test")
    assert budget.charts == 1 and budget.spent_s == pytest.approx(0.05) and budget.spans == [(101.0, 0.05)]
    # the next chart is expected to cost what the last one did: 0.1 s of view in 3.05 s is not within 3 %
    assert not budget.chart_allowed(103.0, Light())
    assert budget.chart_allowed(104.0, Light())          # 0.1 of 4.05 s: 2.5 %


def test_progress_updates_and_the_views_making_count_but_are_no_charts():
    budget = ViewBudget(lambda: 0.0, share=0.5, interval_s=0.0, start_s=0.0)
    budget.spend(0.2)
    budget.record(1.0, 0.1, update=True)
    budget.record(2.0, 0.1)                              # neither: a view with no progress text
    assert budget.updates == 1 and budget.charts == 0 and budget.spent_s == pytest.approx(0.4)
    assert budget.spans == [(1.0, 0.1), (2.0, 0.1)]     # the making is time, not a span of training


def test_the_first_chart_of_a_kind_sets_its_expected_cost_for_the_process(monkeypatch):
    monkeypatch.setattr(view_budget, "_FIRST_DRAW", {})
    first = ViewBudget(lambda: 0.0, share=0.1, interval_s=0.0)
    assert first.chart_allowed(1.6, Unknown())           # FIRST_DRAW_S (0.15 s) within 10 % of 1.75 s
    assert not first.chart_allowed(1.0, Unknown()) and FIRST_DRAW_S == 0.15
    first.record(1.6, 0.5, chart=True, kind="Unknown")
    first.record(9.0, 0.01, chart=True, kind="Unknown")  # only the first chart of a kind is learned
    later = ViewBudget(lambda: 0.0, share=0.1, interval_s=0.0)
    assert not later.chart_allowed(4.0, Unknown())      # now 0.5 s expected: 11 % of 4.5 s
    assert later.chart_allowed(5.0, Unknown())
    assert later.chart_allowed(1.0, Light())             # another kind keeps its own first cost


# -- the Workbench's progress bar: the same budget --------------------------------------------------------
def test_the_workbench_bar_moves_at_most_every_bar_redraw_s_and_always_at_the_end(monkeypatch):
    """Progress every 10 ms for 3 s moves the bar about 3 / BAR_REDRAW_S times, not 300; the last step
    always draws, and a new run's bar starts afresh."""
    from tfwb.config import KNOBS, RunConfig
    from tfwb.ui import panel as panel_module
    from tfwb.ui.controller import WorkbenchController
    from tfwb.ui.controls import build_controls

    bench = WorkbenchController(RunConfig(steps=300, warmup_steps=1))
    controls = build_controls(KNOBS, {n: getattr(bench.baseline, n) for n in KNOBS})
    panel = panel_module.WorkbenchPanel(bench, controls, KNOBS, hardware={})
    now = [1000.0]
    monkeypatch.setattr(panel_module.time, "monotonic", lambda: now[0])
    moves = []
    original = panel._move_bar
    monkeypatch.setattr(panel, "_move_bar", lambda done, total, text: (moves.append(done),
                                                                       original(done, total, text)))
    for run in range(2):
        moves.clear()
        panel.on_run_start(bench.config(), run + 1, None, stoppable=True)
        for done in range(1, 302):
            now[0] += 0.01
            panel.on_progress(done, 301, False)
        assert moves[-1] == 301 and panel.progress.value == 301
        assert panel.progress_text.value == "301 / 301 steps"
        assert 2 <= len(moves) <= 3.01 / view_budget.BAR_REDRAW_S + 2, moves
        gaps = [b - a for a, b in zip(moves, moves[1:-1])]
        assert all(g * 0.01 >= view_budget.BAR_REDRAW_S - 1e-9 for g in gaps), gaps
        assert moves[0] == 1                    # a new run's first progress draws at once
