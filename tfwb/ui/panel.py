"""The Workbench's renderer: the widgets, and what they show of a controller's runs.

Owns the widget tree (header, knob rows, Run / Stop / Apply suggestion / Tune, the progress bar,
the status line with its Decide button (an interleaved comparison of a pair separate runs could not
decide: ``WorkbenchController.decide``), the tune's log (a line per trial that opens to its details,
then the closing text), the step-time / utilization chart of the latest run, its loss beside the
previous run's when the knobs that changed alter the arithmetic (``tfwb.analysis.pairs.ARITHMETIC_KNOBS``),
the comparison chart, the limits chart (``tfwb.ui.charts.limits``), the history table) and how
each is drawn. A run's status line carries its MFU (in ``RunResult.summary``), its first
suggestion with the most it can gain (``tfwb.render.suggestion_text``; a change already measured and not
kept comes last: ``tfwb.analysis.diagnosis.reorder``), and, for a run that applied
the previous run's suggestion and nothing else, that bound scored against the measured gain
(``tfwb.render.bound_note``: red when the gain is above the bound beyond noise). It does nothing to runs:
it is told what happens through ``tfwb.ui.controller.ControllerEvents``; the way back (the rows,
verdicts and diagnosis of the runs) arrives as the ``tfwb.analysis.session.RunView`` the
controller's analysis pushes to ``on_view``, and the words are rendered by ``tfwb.render``. It reads
the controller only for the way out (``baseline``, ``config()``, ``running``);
the buttons are wired to the controller by ``tfwb.ui.workbench.Workbench``.

Charts are ``ipywidgets.Image`` widgets whose PNG value is replaced in place
(``tfwb.ui.charts``), so the same drawing works in JupyterLab, Notebook 7, VS Code,
Colab and under nbval. Only widget APIs present in both ipywidgets 7.7 and 8 are used,
never ``clear_output`` and never ``with out:``.
"""
from __future__ import annotations

import html
import time
from typing import Any, Dict, Mapping, Optional, Sequence, Tuple

import ipywidgets as W

from tfwb import hardware as _hardware
from tfwb import render as words
from tfwb import stats
from tfwb.analysis import tried
from tfwb.analysis.diagnosis import Diagnosis, expectations, reorder
from tfwb.analysis.rows import HistoryRow
from tfwb.analysis.session import RunView
from tfwb.config import RunConfig
from tfwb.expect import change
from tfwb.knobs import Knob
from tfwb.records import RunResult
from tfwb.search.tune_events import RoundDone, TrialDone, TrialStarted, TuneDone, TuneEvent
from tfwb.search.tune_result import FAILED, KEPT, REVERTED
from tfwb.ui.controller import ControllerEvents, WorkbenchController, total_steps
from tfwb.ui.controls import KnobControl, knob_rows, set_tooltip
from tfwb.prediction import predictions_path
from tfwb.ui.deciding import DecideStopped
from tfwb.ui.next_prediction import NextPrediction
from tfwb.ui.view_budget import BAR_REDRAW_S, ViewBudget

__all__ = ["WorkbenchPanel", "steps_done", "measured_text"]

_RUN_TIP = "train with these settings and record the result"
_STOP_TIP = "end the run after its current step (a kernel interrupt does the same)"
_TUNE_TIP = ("diagnose, try the change that can gain most, keep it only if an interleaved comparison calls it "
             "faster and it still trains; repeat (tfwb.tune); then set the best knobs")
_DECIDE_TIP = ("separate runs cannot tell (the machine was busy, or a run drifted): compare the two "
               "configurations interleaved, in alternating short turns in one process, so that whatever slows "
               "the machine slows both; the rows then show that verdict")
_FAILED = words.FAILED_COLOR

#: Page CSS, shipped inside the header (an HTML widget renders a <style> element):
#: red invalid boxes, and a banner on a Workbench whose kernel is gone (ipywidgets
#: adds ``jupyter-widgets-disconnected`` to every view when the kernel restarts).
_CSS = f"""<style>
.tfwb-workbench .tfwb-invalid input {{ border: 2px solid {_FAILED} !important;
  background-color: #fff0f0 !important; color: {_FAILED} !important; }}
.tfwb-workbench .tfwb-invalid .widget-label {{ color: {_FAILED} !important; font-weight: bold; }}
.tfwb-workbench .widget-checkbox .widget-label {{ overflow: visible; }}
.tfwb-workbench.jupyter-widgets-disconnected::before {{
  content: "This Workbench is stale: its kernel restarted or stopped, so its buttons do nothing. Re-run the cell that made it.";
  font: bold 13px var(--jp-ui-font-family, sans-serif); color: {_FAILED}; background: #fff0f0;
  border: 2px solid {_FAILED}; padding: 6px 8px; margin-bottom: 4px; }}
.tfwb-workbench .jupyter-widgets-disconnected::before {{ display: none; }}
.tfwb-workbench.jupyter-widgets-disconnected > .widget-box,
.tfwb-workbench.jupyter-widgets-disconnected > .widget-button {{ opacity: 0.45; pointer-events: none; }}
</style>"""


def _red(text: str) -> str:
    return f"<b style='color:{_FAILED}'>{html.escape(text)}</b>"


def _folded(summary: str, color: str, details: Sequence[str]) -> str:
    """One line of the tune log that opens to its details (escaped text)."""
    style = f" style='color:{color}'" if color else ""
    body = "".join(f"<div style='margin-left:1.2em'>{html.escape(d)}</div>" for d in details)
    return f"<details class='tfwb-trial'><summary{style}>{html.escape(summary)}</summary>{body}</details>"


def _has_steps(result: RunResult) -> bool:
    return bool(result.step_times_s or result.warmup_times_s)


def steps_done(result: RunResult) -> Tuple[int, int]:
    """Training steps a result finished (warm-up included) and the steps its run was to run (with the
    warm-up steps it added until its steps settled, ``RunResult.warmup_extra_steps``).

    Both count training steps, not calls: under ``steps_per_execution`` the steps round up
    to whole calls (``RunConfig.calls``), as the runner runs them.

    Example:
        >>> steps_done(RunResult(config=RunConfig(steps=4, warmup_steps=2), warmup_times_s=(1.0, 0.1),
        ...                      step_times_s=(0.1,)))
        (3, 6)
        >>> cfg = RunConfig(steps=128, warmup_steps=3, steps_per_execution=16)
        >>> steps_done(RunResult(config=cfg, warmup_times_s=(1.0,), step_times_s=(0.1,) * 8, steps_per_call=16))
        (144, 144)
    """
    total = total_steps(result.config) + result.warmup_extra_steps   # warm-up extended until the steps settled
    calls = len(result.warmup_times_s) + len(result.step_times_s)
    return min(total, calls * result.config.steps_per_execution), total


def measured_text(result: RunResult) -> str:
    """How many measured steps a result has, counted in steps and, under ``steps_per_execution``, calls.

    Example:
        >>> measured_text(RunResult(config=RunConfig(), step_times_s=(0.1,) * 36))
        '36 measured step(s)'
        >>> measured_text(RunResult(config=RunConfig(steps_per_execution=4), step_times_s=(0.1,) * 36,
        ...                         steps_per_call=4))
        '144 measured steps (36 calls of 4 steps)'
    """
    calls = len(result.step_times_s)
    per = result.config.steps_per_execution
    if per == 1:
        return f"{calls} measured step(s)"
    return f"{calls * per} measured steps ({calls} calls of {per} steps)"


class WorkbenchPanel(ControllerEvents):
    """The Workbench's widgets, drawn from a controller's state and events.

    Args:
        controller: the ``WorkbenchController`` whose runs it shows (read, never driven).
        controls: ``{field: KnobControl}`` (``tfwb.ui.controls.build_controls``), laid out a
            row per group.
        knobs: the knob table the controls were built from (``tfwb.config.KNOBS``).
        hardware: ``tfwb.hardware.detect()`` output (or a mapping of its fields): the
            header's machine line and the expectations shown before a run.

    Attributes:
        widget: the root ``VBox`` (CSS class ``tfwb-workbench``).
        run_button, stop_button, apply_button, progress, progress_text, status, run_chart,
            chart_note, loss_chart, compare_chart, history: the other widgets (CSS classes
            ``tfwb-run``, ``tfwb-stop``, ``tfwb-apply``, ``tfwb-progress``,
            ``tfwb-progress-text``, ``tfwb-status``, ``tfwb-run-chart``, ``tfwb-chart-note``,
            ``tfwb-loss-chart``, ``tfwb-compare-chart``, ``tfwb-history``). ``loss_chart``
            is shown only while the latest run changed the arithmetic against the run before it.
        limits_chart: every finished run's step split (input wait, per-call overhead, compute
            at this machine's peak, the rest) beside its achieved FLOP/s against the measured
            and datasheet peaks (``tfwb.ui.charts.limits``; CSS class ``tfwb-limits-chart``).

    Example:
        >>> from tfwb.ui.controls import build_controls
        >>> from tfwb.config import KNOBS
        >>> bench = WorkbenchController(RunConfig(steps=3))
        >>> controls = build_controls(KNOBS, {n: getattr(bench.baseline, n) for n in KNOBS})
        >>> panel = WorkbenchPanel(bench, controls, KNOBS, hardware={})
        >>> bench.events = panel
        >>> "No runs yet." in panel.history.value, panel.run_button.disabled
        (True, False)
    """

    def __init__(self, controller: WorkbenchController, controls: Mapping[str, KnobControl],
                 knobs: Mapping[str, Knob], hardware: Any) -> None:
        self.controller = controller
        self.controls: Dict[str, KnobControl] = dict(controls)
        self.hardware = hardware
        self._outcome_html = ""                   # what happened last, above the preview
        self._chart_run: Optional[int] = None     # the 1-based run the run chart shows
        self._bar = ViewBudget(time.monotonic, interval_s=BAR_REDRAW_S)   # the progress bar's, per run
        self._view: Optional[RunView] = None      # the latest run's view, pushed by the analysis
        self._build(knobs)
        controller.analysis.subscribe(self.on_view)
        results = controller.results
        if results:
            self._view = controller.analysis.views(results, controller.baseline_result(),
                                                   baseline_config=controller.baseline)[-1]
            self._outcome_html = (f"Resumed {len(results)} run(s) from "
                                  f"<code>{html.escape(controller.history_path or '')}</code>.")
            self._redraw(len(results))
        if controller.skipped:
            self._outcome_html += "<br>" + _red(
                f"skipped {len(controller.skipped)} line(s) of {controller.history_path} that are not "
                "complete results: " + "; ".join(f"line {n}: {why}" for n, why in controller.skipped))
        self.render_status()

    def _build(self, knobs: Mapping[str, Knob]) -> None:
        self.run_button = W.Button(description="Run", button_style="primary", icon="play", tooltip=_RUN_TIP)
        self.run_button.add_class("tfwb-run")
        self.stop_button = W.Button(description="Stop", icon="stop", disabled=True, tooltip=_STOP_TIP)
        self.stop_button.add_class("tfwb-stop")
        self.apply_button = W.Button(description="Apply suggestion", icon="magic", disabled=True,
                                     layout=W.Layout(width="auto"),
                                     tooltip="set the knob the last run's diagnosis suggests, and run")
        self.apply_button.add_class("tfwb-apply")
        self.tune_button = W.Button(description="Tune", icon="search", layout=W.Layout(width="auto"),
                                    tooltip=_TUNE_TIP)
        self.tune_button.add_class("tfwb-tune")
        self.tune_log = W.HTML("", layout=W.Layout(display="none"))
        self.tune_log.add_class("tfwb-tune-log")
        self._tune_lines: list = []
        self._tune_trials: list = []      # this tune's decided trials (TuneTrial), for the next suggestion
        self._trial_at: Dict[int, Tuple[int, str]] = {}    # trial number -> (its line, its started text)
        self._tried: Tuple[Any, Tuple[Any, ...]] = (None, ())     # (history state, what it measured)
        self.progress = W.IntProgress(value=0, min=0, max=1, description="steps",
                                      layout=W.Layout(width="260px"))
        self.progress.add_class("tfwb-progress")
        self.progress_text = W.HTML("")
        self.progress_text.add_class("tfwb-progress-text")
        self.status = W.HTML("")
        self.status.add_class("tfwb-status")
        self.chart_note = W.HTML("", layout=W.Layout(display="none"))
        self.chart_note.add_class("tfwb-chart-note")
        self.run_chart = W.Image(format="png", layout=W.Layout(display="none"))
        self.run_chart.add_class("tfwb-run-chart")
        self.loss_chart = W.Image(format="png", layout=W.Layout(display="none"))
        self.loss_chart.add_class("tfwb-loss-chart")
        self.compare_chart = W.Image(format="png", layout=W.Layout(display="none"))
        self.compare_chart.add_class("tfwb-compare-chart")
        self.limits_chart = W.Image(format="png", layout=W.Layout(display="none"))
        self.limits_chart.add_class("tfwb-limits-chart")
        self.history = W.HTML(words.html_table([]))
        self.history.add_class("tfwb-history")
        self._build_decide()
        self.next_prediction = self._next_prediction()

        machine = _hardware.describe(self.hardware)
        header = W.HTML(_CSS + "<b>tfwb Workbench</b>"
                        + (f" &middot; this machine: {html.escape(machine)}" if machine else ""))
        header.add_class("tfwb-header")
        actions = W.HBox([self.run_button, self.stop_button, self.apply_button, self.tune_button, self.progress,
                          self.progress_text],
                         layout=W.Layout(flex_flow="row wrap", align_items="center"))
        actions.add_class("tfwb-actions")
        self.widget = W.VBox([
            header,
            *knob_rows(self.controls, knobs),
            actions,
            self.status,
            self.decide_button,
            self.next_prediction.widget,
            self.tune_log,
            self.chart_note,
            self.run_chart,
            self.loss_chart,
            self.compare_chart,
            self.limits_chart,
            self.history,
        ])
        self.widget.add_class("tfwb-workbench")
        self._refresh_history()

    # -- the controller's events -----------------------------------------------------
    def on_changes_refused(self, error: ValueError) -> None:
        self._outcome_html = _red(f"not run: {error}")
        self.render_status()

    def on_config_refused(self, error: ValueError) -> None:
        self.render_status()                     # the preview line shows the bad knob in red

    def on_run_start(self, cfg: RunConfig, number: int, note: Optional[str], stoppable: bool) -> None:
        """Buttons and bar for a run in progress. Stop is offered only for a run on the
        background thread: a click on it during a run started from a cell would wait
        behind the cell (the kernel interrupt stops that one)."""
        self.run_button.disabled = True
        self.run_button.description = "Running\u2026"
        self.stop_button.disabled = not stoppable
        set_tooltip(self.stop_button, _STOP_TIP if stoppable else
                    "this run was started from code: interrupt the kernel to stop it (it ends after "
                    "its current step and is recorded as interrupted)")
        self.apply_button.disabled = True
        self.tune_button.disabled = True
        self.progress.bar_style = ""
        total = total_steps(cfg)
        self.progress.max = max(total, 1)
        self.progress.value = 0
        self.progress_text.value = f"0 / {total} steps"
        self._bar = ViewBudget(time.monotonic, interval_s=BAR_REDRAW_S)
        applied = f"{html.escape(note)}<br>" if note else ""
        changes = words.format_changes(cfg, self.controller.baseline)
        self.status.value = f"{applied}Running #{number}: <code>{html.escape(changes)}</code>\u2026"

    def on_progress(self, steps_done: int, steps_total: int, stopping: bool) -> None:
        """Move the bar at most every ``BAR_REDRAW_S`` (``tfwb.ui.view_budget``), always at the last step.

        The controller calls this only between timing windows (``Progress(settled_only=True)``), so the
        widget messages leave the kernel while no measured call runs; the browser draws each in a few
        milliseconds."""
        now = time.monotonic()
        if steps_done < steps_total and not self._bar.due(now):
            return
        self._move_bar(steps_done, steps_total, f"{int(steps_done)} / {int(steps_total)} steps"
                                                + (" (stopping\u2026)" if stopping else ""))
        self._bar.record(now, time.monotonic() - now, update=True)

    def _move_bar(self, done: int, total: int, text: str) -> None:
        total = max(int(total), 1)
        if self.progress.max != total:
            self.progress.max = total
        self.progress.value = max(0, min(int(done), total))
        self.progress_text.value = text

    def on_view(self, view: RunView) -> None:
        """Keep the view of the run that just finished (the analysis pushes it before ``on_result``),
        and score the reader's prediction of it, if any (``tfwb.ui.next_prediction``)."""
        self._view = view
        self.next_prediction.on_view(view)

    def _next_prediction(self) -> NextPrediction:
        """The optional prediction of the next run, its Scores kept beside the run history."""
        path = self.controller.history_path
        try:
            return NextPrediction(predictions_path(path) if path else None, expectation=self._next_expectation)
        except OSError:          # the history itself reports an unwritable folder; keep the scores in memory
            return NextPrediction(None, expectation=self._next_expectation)

    def _next_expectation(self) -> Optional[str]:
        """What the book expects of the next run against the run before it (``tfwb.expect.change``
        of the knobs that differ), or None when no run came before it or the rules state nothing."""
        try:
            cfg = self.controller.config()
        except ValueError as e:
            return f"the next run cannot start: {e}"
        results = self.controller.results
        if not results:
            return None
        differs = cfg.diff(results[-1].config)
        if not differs:
            return "the next run changes no knob against the run before it"
        try:
            return str(change(self.hardware, results[-1], **differs))
        except ValueError as e:          # knobs that pull apart, or one without a rule
            return f"no single expectation for {words.format_changes(cfg, results[-1].config)}: {e}"

    def _row(self, number: int) -> HistoryRow:
        """Run ``number``'s row (1-based) in the latest pushed view."""
        assert self._view is not None, "a run's result arrives after its view"
        return self._view.rows[number - 1]

    def on_result(self, result: RunResult, number: int, note: Optional[str], problems: Sequence[str]) -> None:
        """Say how run ``number`` ended, then redraw the history and charts.

        The bar and the status line change before the charts are drawn, so a stopped
        run shows as stopped at once; a chart that fails to draw is said in red, and the
        result stays recorded.
        """
        done, total = steps_done(result)
        self.progress.bar_style = {"ok": "success", "interrupted": "warning"}.get(result.status, "danger")
        if result.ok:
            self.progress.value = self.progress.max
        self.progress_text.value = f"{done} / {total} steps: {html.escape(result.status)}"
        self._outcome_html = self._outcome(result, number, note)
        self.status.value = self._outcome_html
        problems = list(problems)
        try:
            self._redraw(number)
        except Exception as e:  # a chart bug must not hide the result
            problems.append(f"chart failed: {type(e).__name__}: {e}")
        for problem in problems:
            self._outcome_html += "<br>" + _red(problem)

    def on_idle(self) -> None:
        self.run_button.description = "Run"
        self.tune_button.description = "Tune"
        self.stop_button.disabled = True
        self.render_status()

    def on_tune_start(self, cfg: RunConfig, max_runs: int) -> None:
        changes = words.format_changes(cfg, self.controller.baseline)
        self._tune_lines = [f"<b>Tune</b> from <code>{html.escape(changes)}</code>, at most {max_runs} trials"]
        self._tune_trials, self._trial_at = [], {}
        self.tune_button.description = "Tuning\u2026"
        self._show_tune()

    def on_tune_event(self, event: TuneEvent) -> None:
        """A round moves the bar (a trial makes no run until it is decided); the start adds a line, and each
        trial one line (``<details>``) that opens to its details: its bound as it starts, then its summary
        (``tfwb.render.trial_summary``: kept green, reverted or failed red) with what it measured and why;
        the end comes with ``on_tune_end``."""
        if isinstance(event, RoundDone):
            self.progress.bar_style = ""
            self._move_bar(event.done, event.total, html.escape(event.text()))
            return
        if isinstance(event, TuneDone):
            return
        if isinstance(event, TrialStarted):
            started = event.text()
            self._trial_at[event.number] = (len(self._tune_lines), started)
            self._tune_lines.append(_folded(f"trial {event.number}: {started.split(':')[0]}\u2026", "",
                                            [started]))
        elif isinstance(event, TrialDone):
            trial = event.trial
            self._tune_trials.append(trial)
            at, started = self._trial_at.get(event.number, (len(self._tune_lines), ""))
            color = "green" if trial.decision == KEPT else _FAILED if trial.decision in (REVERTED, FAILED) else ""
            line = _folded(words.trial_summary(event.number, trial), color,
                           [t for t in (started, event.text(), trial.comparison) if t])
            if at < len(self._tune_lines):
                self._tune_lines[at] = line
            else:
                self._tune_lines.append(line)
        else:
            self._tune_lines.append(html.escape(event.text()))
        self._show_tune()

    def _next_diagnosis(self, row: HistoryRow) -> Optional[Diagnosis]:
        """``row``'s diagnosis with the changes already measured and not kept last
        (``tfwb.analysis.diagnosis.reorder``): the history's one-knob changes up to the row, and the last
        tune's trials."""
        if row.diagnosis is None or self._view is None:
            return row.diagnosis
        trials = tuple(self._tune_trials) or (self.controller.tuning.trials if self.controller.tuning else ())
        key = (id(self._view.rows), row.index, trials)
        if self._tried[0] != key:         # the status redraws on every knob change: read the history once
            self._tried = (key, tried.from_history(self._view.rows[:row.index]) + tried.from_trials(trials))
        return reorder(row.diagnosis, self._tried[1])

    def on_tune_end(self, tuning: Any, error: Optional[BaseException]) -> None:
        """The closing text (best against start, headroom, why no knob can take it), or the error in red; the
        last run's status line is said again, its next suggestion knowing the trials."""
        view = self._view
        if view is not None and view.result.ok and self._tune_trials:
            self._outcome_html = self._outcome(view.result, view.index, None)
        if error is not None:
            self._tune_lines.append(_red(f"tune ended: {type(error).__name__}: {error}"))
        else:
            self._tune_lines.extend(html.escape(line) for line in tuning.closing_text().splitlines())
            if tuning.changes():
                self._tune_lines.append("<b>The knobs now hold the best configuration.</b>")
        # The bar last showed a comparison's rounds or "stopping…": say how the tune ended instead.
        how = ("interrupted" if isinstance(error, KeyboardInterrupt) or (error is None and tuning.interrupted)
               else "failed" if error is not None else
               f"done: {len(tuning.trials)} trial{'s' if len(tuning.trials) != 1 else ''}")
        self.progress.bar_style = {"failed": "danger", "interrupted": "warning"}.get(how, "success")
        self.progress_text.value = f"tune {how}"
        self._show_tune()

    def _show_tune(self) -> None:
        lines = "".join(line if line.startswith("<details") else f"<div>{line}</div>" for line in self._tune_lines)
        self.tune_log.value = f"<div style='font-size:90%'>{lines}</div>"
        self.tune_log.layout.display = ""

    def show_stopping(self) -> None:
        """Say that a stop was asked for (the Stop button)."""
        self.progress_text.value = "stopping after the current step\u2026"

    # -- drawing -----------------------------------------------------------------------
    def _outcome(self, result: RunResult, number: int, note: Optional[str]) -> str:
        """The status line for run ``number``: summary and verdict, or why it ended early (red if it failed)."""
        if result.ok:
            row = self._row(number)
            text = f"<b>#{number}</b> {html.escape(result.summary())}"
            previous = words.prev_verdict(row)
            if previous:                      # the comparison the reader just made comes first
                color = words.verdict_color(row.prev_comparison)
                text += (f" &mdash; vs the previous run (#{row.previous}): "
                         f"<b style='color:{color}'>{html.escape(previous)}</b>")
            loss = words.row_loss_note(row)
            if loss:                          # the knobs changed the arithmetic: loss beside speed
                text += f" &mdash; {html.escape(loss)}"
            scored = words.bound_note(row)
            if scored:                        # the run applied the previous run's suggestion: score its bound
                color = _FAILED if row.bound_exceeded else words.SAME_COLOR
                text += f"<br>Suggestion scored: <b style='color:{color}'>{html.escape(scored)}</b>"
            against = words.verdict(row)
            if against and not row.is_baseline:
                color = words.verdict_color(row.comparison)
                text += f" &mdash; vs the baseline: <b style='color:{color}'>{html.escape(against)}</b>"
            elif row.is_baseline:
                text += " &mdash; this is the baseline"
            line = self._suggestion_line(row)
            if line:
                text += f"<br>{line}"
            if not row.noise.learned:
                text += ("<br><i>Run one configuration 3 times to learn this machine's run-to-run noise; "
                         "for a close call use <code>tfwb.compare_interleaved(a, b)</code>.</i>")
        elif result.status == "interrupted":
            text = f"<b>#{number} interrupted: {html.escape(result.error or 'interrupted')}</b>"
            if result.step_times_s:
                text += f" &mdash; {measured_text(result)} charted below; not used in comparisons"
        else:
            text = _red(f"#{number} {result.status}: {result.error or 'no measured steps'}")
        if note:
            text = f"{html.escape(note)}<br>{text}"
        for line in result.notes:
            text += f"<br><i>{html.escape(line)}</i>"
        return text

    def _suggestion_line(self, row: HistoryRow) -> str:
        """The run's first suggestion with its bound (``tfwb.render.suggestion_text``), HTML; ``""`` without one."""
        diagnosis = self._next_diagnosis(row)
        if diagnosis is None or not diagnosis.suggestions:
            return ""
        first = diagnosis.suggestions[0]
        return "Next: " + html.escape(words.suggestion_text(first, diagnosis.bound_for(first[0])))

    def _refresh_history(self) -> None:
        self.history.value = words.html_table(self._view.rows if self._view is not None else [],
                                              predictions=self.next_prediction.column())

    def _redraw(self, latest: int) -> None:
        """Redraw for run ``latest`` (1-based): history, comparison, and the run chart.

        The run chart shows the latest run that has steps: a run that failed before
        its first step keeps the previous chart on screen (with a red note above it)
        instead of replacing it with empty axes.
        """
        from tfwb.ui import charts     # matplotlib loads at the first chart, not with the widget

        view = self._view
        assert view is not None, "a redraw follows a pushed view"
        results = list(view.results)
        self._refresh_history()
        self.compare_chart.value = charts.comparison_png(results, baseline_config=view.baseline_config,
                                                         rows=view.rows)
        self.compare_chart.layout.display = None
        self.limits_chart.value = charts.limits_png(results)
        self.limits_chart.layout.display = None
        drawable = [i for i in range(latest, 0, -1) if _has_steps(results[i - 1])]
        if drawable and drawable[0] != self._chart_run:
            self.run_chart.value = charts.run_chart_png(results[drawable[0] - 1])
            self.run_chart.layout.display = None
            self._chart_run = drawable[0]
        self._draw_loss(latest)
        note = ""
        result = results[latest - 1]
        if not _has_steps(result):
            what = f"run #{latest} {result.status} before its first step"
            note = _red(f"{what}; the chart below is still run #{self._chart_run}'s"
                        if self._chart_run else f"{what}; no run has steps to chart yet")
        self.chart_note.value = note
        self.chart_note.layout.display = None if note else "none"

    def _draw_loss(self, latest: int) -> None:
        """Run ``latest``'s loss beside the previous run's, when its knobs changed the arithmetic
        (``tfwb.analysis.pairs.ARITHMETIC_KNOBS``) and both recorded a loss; hidden otherwise."""
        from tfwb.ui import charts     # matplotlib: already loaded by _redraw

        row = self._row(latest)
        result = row.result
        previous = row.previous
        before = self._row(previous).result if previous else None
        if not (result.ok and before is not None and row.prev_arithmetic and result.all_losses
                and before.all_losses):
            self.loss_chart.layout.display = "none"
            return
        self.loss_chart.value = charts.loss_beside_png(result, before, number=latest,
                                                       previous_number=previous)
        self.loss_chart.layout.display = None

    def _preview(self) -> Tuple[str, bool]:
        """The "Next run" line (red naming the field when a knob is bad), and whether it can run."""
        try:
            cfg = self.controller.config()
        except ValueError as e:
            return _red(f"cannot run: {e}"), False
        changes = words.format_changes(cfg, self.controller.baseline)
        text = f"Next run: <code>{html.escape(changes)}</code>"
        hints = expectations(cfg, self.hardware)
        if hints:
            text += "<ul style='margin:2px 0'>" + "".join(
                f"<li>{html.escape(h)}</li>" for h in hints) + "</ul>"
        return text, True

    def render_status(self) -> None:
        """Status = last outcome + next-run preview; Run and Apply enabled only when they can run."""
        preview, valid = self._preview()
        running = self.controller.running
        self.status.value = "<br>".join(p for p in (self._outcome_html, preview) if p)
        self.run_button.disabled = running or not valid
        self.tune_button.disabled = running or not valid
        set_tooltip(self.run_button, _RUN_TIP if valid
                    else "a knob holds a value it does not accept (shown red): fix it first")
        diagnosis = self._next_diagnosis(self._view.row) if self._view is not None else None    # the last run's
        suggestion = diagnosis.suggestions[0] if diagnosis is not None and diagnosis.suggestions else None
        self.apply_button.disabled = running or not valid or suggestion is None
        self.apply_button.description = (f"Apply {suggestion[0]}={suggestion[1]!r}" if suggestion
                                          else "Apply suggestion")
        if suggestion:
            bound = diagnosis.bound_for(suggestion[0])
            set_tooltip(self.apply_button, f"the last run's diagnosis suggests: "
                                           f"{words.suggestion_text(suggestion, bound)}; set it and run")
        self._show_decide(running or not valid)

    # -- Decide: an interleaved comparison where separate runs cannot tell ---------------------
    def _build_decide(self) -> None:
        self.decide_button = W.Button(description="Decide", icon="balance-scale", button_style="warning",
                                      layout=W.Layout(width="auto", display="none"), tooltip=_DECIDE_TIP)
        self.decide_button.add_class("tfwb-decide")
        #: What the Decide button compares the latest run against (``"previous"``, ``"baseline"``; None: hidden).
        self.decide_against: Optional[str] = None

    def _show_decide(self, disabled: bool) -> None:
        """Show Decide while the latest run has a "cannot tell" verdict with no interleaved one
        (``RunView.undecided``: against the previous run first, then the baseline)."""
        view = self._view
        undecided = view.undecided() if view is not None and view.index == len(self.controller.results) else ()
        self.decide_against = undecided[0] if undecided else None
        self.decide_button.layout.display = "" if undecided else "none"
        self.decide_button.disabled = disabled or not undecided
        if undecided:
            versus = view.versus(undecided[0])
            what = "the baseline" if undecided[0] == "baseline" else "the previous run"
            self.decide_button.description = f"Decide #{view.index} vs {what} (#{versus.reference})"

    def on_decide_start(self, reference: int, number: int, stoppable: bool) -> None:
        """Buttons and bar while run ``number``'s configuration is compared with run ``reference``'s."""
        for button in (self.run_button, self.apply_button, self.tune_button, self.decide_button):
            button.disabled = True
        self.stop_button.disabled = not stoppable
        self.progress.bar_style = ""
        self._move_bar(0, 1, "interleaving\u2026")
        self.status.value = (f"Deciding #{number} against #{reference}: their two configurations take turns "
                             "in one process (an interleaved comparison)\u2026")

    def on_decide_round(self, done: int, total: int, stopping: bool) -> None:
        self._move_bar(done, total, f"round {int(done)} / {int(total)}" + (" (stopping\u2026)" if stopping else ""))

    def on_decided(self, rounds: stats.RoundsComparison) -> None:
        """An interleaved verdict was recorded: the table and the latest run's status line show it now."""
        view = self._view
        if view is None:
            return
        self._refresh_history()
        self._outcome_html = self._outcome(view.result, view.index, None)

    def on_decide_end(self, rounds: Optional[stats.RoundsComparison], error: Optional[BaseException]) -> None:
        """Say how Decide ended: the verdict it recorded (the rows show it, marked interleaved), or why not."""
        from tfwb.ui import charts     # matplotlib: loaded by the runs' charts already

        if rounds is not None:
            self.progress.bar_style = "success"
            self.progress_text.value = f"decided: {html.escape(rounds.verdict)}"
            self._outcome_html += ("<br><i>Decided by an interleaved comparison (" + html.escape(rounds.method)
                                   + "): " + html.escape(rounds.text()) + "; it replaces the separate runs' "
                                   "verdict for this pair in the status line, the table and the chart.</i>")
            view = self._view
            try:
                self.compare_chart.value = charts.comparison_png(list(view.results),
                                                                 baseline_config=view.baseline_config, rows=view.rows)
            except Exception as e:  # a chart bug must not hide the verdict
                self._outcome_html += "<br>" + _red(f"chart failed: {type(e).__name__}: {e}")
            return
        stopped = isinstance(error, DecideStopped)
        self.progress.bar_style = "warning" if stopped else "danger"
        self.progress_text.value = "decide stopped" if stopped else "decide failed"
        self._outcome_html += "<br>" + _red(f"Decide: {error}" if stopped else f"Decide: {type(error).__name__}: {error}")
