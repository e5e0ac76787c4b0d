"""The Workbench widget: knobs, Run / Stop / Apply suggestion, charts redrawn in place, run history.

Owns the widgets and their wiring only. The controls come from the knob table
(``tfwb.ui.controls``: one per RunConfig field that has a ``group``, laid out a row
per group), the numbers from the runner (``tfwb.run`` by default, imported at the
first run), the table from ``tfwb.report``, the charts from ``tfwb.ui.charts``, the
expectations and suggestions from ``tfwb.diagnosis``. Charts are ``ipywidgets.Image``
widgets whose PNG value is replaced in place, so the Workbench redraws the same way
in JupyterLab, Notebook 7, VS Code, Colab and under nbval. It uses only widget APIs
present in both ipywidgets 7.7 and 8, never ``clear_output`` and never ``with out:``.

Running. ``Workbench.run(...)`` from a cell trains on the calling thread and
blocks until the run ends (nbval relies on it); a kernel interrupt stops it like
any cell. A click on Run (in a kernel) trains on a background thread, so the
kernel stays free for the Stop click, and a kernel interrupt stops it too
(``tfwb.ui.interrupt`` explains why a click cannot simply block). Either way the
run ends after its current step and is recorded as ``"interrupted"`` with the
steps it finished. Clicks while a run is in progress start nothing.
"""
from __future__ import annotations

import dataclasses
import datetime
import html
import inspect
import os
import threading
import time
import uuid
from typing import Any, Callable, Dict, List, Optional, Tuple

import ipywidgets as W

from tfwb import config as _config
from tfwb import report
from tfwb.config import RunConfig
from tfwb.diagnosis import diagnose, expectations
from tfwb.observers import StopFlag
from tfwb.records import RunResult, append_result, load_results
from tfwb.ui.controls import build_controls, knob_rows, set_tooltip
from tfwb.ui.interrupt import InterruptBridge, kernel_loop

#: RunConfig fields that get a control (every knob with a ``group``), in declaration order.
KNOB_FIELDS: Tuple[str, ...] = tuple(n for n, k in _config.KNOBS.items() if k.group is not None)

STOP_REASON = "stopped by the user"
_STOP_TIP = "end the run after its current step (a kernel interrupt does the same)"
_PROGRESS_INTERVAL_S = 0.05        # at most ~20 progress-bar updates a second
_FAILED = report.FAILED_COLOR

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

Runner = Callable[..., RunResult]


def _red(text: str) -> str:
    return f"<b style='color:{_FAILED}'>{html.escape(text)}</b>"


def _now_iso() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def _has_steps(result: RunResult) -> bool:
    return bool(result.step_times_s or result.warmup_times_s)


def _steps_done(result: RunResult) -> Tuple[int, int]:
    """Training steps a result finished (warm-up included) and the steps it was asked for."""
    cfg = result.config
    total = cfg.warmup_steps + cfg.steps
    calls = len(result.warmup_times_s) + len(result.step_times_s)
    return min(total, calls * cfg.steps_per_execution), total


def _accepts(fn: Callable[..., Any], name: str) -> bool:
    """True when ``fn`` takes keyword ``name`` (or ``**kwargs``)."""
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return True
    return name in params or any(p.kind is p.VAR_KEYWORD for p in params.values())


def _default_hardware() -> dict:
    try:
        from tfwb import hardware

        return hardware.detect()
    except (ImportError, AttributeError):
        return {}


def _describe_hardware(hw: dict) -> str:
    try:
        from tfwb import hardware

        return hardware.describe(hw)
    except (ImportError, AttributeError):
        return ""


class Workbench:
    """Knobs for one RunConfig, Run / Stop / Apply suggestion, live progress, charts and history.

    Args:
        baseline (RunConfig | None, default None): the configuration the knobs start
            from and runs are compared with; ``None`` is ``RunConfig()``.
        history_path (str | PathLike | None, default None): a JSON-lines file; every
            result (failures included) is appended to it.
        runner (callable | None, default None): ``runner(cfg, progress=cb, observers=(...))
            -> RunResult``; ``None`` uses ``tfwb.run``, imported at the first run
            (TensorFlow loads then). A runner without ``observers`` cannot be stopped early.
        resume (bool, default True): load an existing ``history_path`` into
            ``results`` so a restarted kernel gets its history back.
        hardware (dict | None, default None): ``tfwb.hardware.detect()`` output used for
            the expectations shown before a run; ``None`` detects it.
        background (bool | None, default None): whether a click trains on a background
            thread (``wait()`` joins it); ``None``: yes inside a Jupyter kernel, where
            the Stop button and kernel interrupts need it, else no.
        logdir (str | PathLike | None, default None): a TensorBoard log folder; each run
            writes its scalars (``tfwb.tf.lab.tensorboard.Scalars``) to ``logdir/NN-<label or
            changes>`` (``NN`` its number in ``results``). Needs a runner that takes
            ``observers`` (``tfwb.run`` does).

    Attributes:
        widget: the root ``VBox`` (CSS class ``tfwb-workbench``); a bare ``wb`` at the
            end of a cell displays it.
        controls: ``{field: KnobControl}`` for every knob with a group (``tfwb.ui.controls``).
        knobs: ``{field: widget}``, the controls' widgets (CSS class ``tfwb-knob-<field>``).
        run_button, stop_button, apply_button, progress, status, run_chart, chart_note,
            compare_chart, history: the other widgets (CSS classes ``tfwb-run``,
            ``tfwb-stop``, ``tfwb-apply``, ``tfwb-progress``, ``tfwb-status``,
            ``tfwb-run-chart``, ``tfwb-chart-note``, ``tfwb-compare-chart``, ``tfwb-history``).
        results: every result so far, in order, failures included.

    Raises:
        ValueError: when ``history_path`` exists but a line cannot be read (from
            ``tfwb.load_results``; the message names the file and line), or ``logdir``
            cannot be created or written (before any run).

    Example:
        >>> wb = Workbench(RunConfig(steps=20), history_path="runs.jsonl")  # doctest: +SKIP
        >>> wb                     # shows the knobs, Run, charts and history  # doctest: +SKIP
        >>> wb.run(prefetch=True)  # what ticking prefetch and clicking Run does  # doctest: +SKIP
    """

    def __init__(self, baseline: Optional[RunConfig] = None,
                 history_path: "str | os.PathLike | None" = None, *,
                 runner: Optional[Runner] = None, resume: bool = True,
                 hardware: Optional[dict] = None, background: Optional[bool] = None,
                 logdir: "str | os.PathLike | None" = None) -> None:
        if baseline is not None and not isinstance(baseline, RunConfig):
            raise ValueError(f"baseline must be a RunConfig, got {type(baseline).__name__}")
        self.logdir: Optional[str] = None
        if logdir is not None:
            from tfwb.tf.lab.tensorboard import check_logdir    # TensorFlow loads here (tf.summary writes the logs)

            self.logdir = check_logdir(logdir)
        self.baseline: RunConfig = baseline if baseline is not None else RunConfig()
        self.history_path: Optional[str] = os.fspath(history_path) if history_path is not None else None
        self.hardware: dict = dict(hardware) if hardware is not None else _default_hardware()
        self._runner = runner
        self._background = background
        self.results: List[RunResult] = (
            load_results(self.history_path) if resume and self.history_path else [])
        self._overrides: Dict[str, Any] = {}      # fields set by run(...) that have no control
        self._next_label: Optional[str] = None    # label for the next run only
        self._next_note: Optional[str] = None     # said with the next run's outcome (applied suggestion)
        self._outcome_html = ""                   # what happened last, above the preview
        self._lock = threading.RLock()            # clicks can arrive on several kernel threads
        self._running = False
        self._thread: Optional[threading.Thread] = None
        self._stop_flag: Optional[StopFlag] = None
        self._stop_how: Optional[str] = None
        self._bridge = InterruptBridge(lambda: self._request_stop("kernel interrupt"))
        self._chart_run: Optional[int] = None     # the 1-based run the run chart shows
        self._last_progress_s = 0.0
        self._build_widgets()
        if self.results:
            self._outcome_html = (f"Resumed {len(self.results)} run(s) from "
                                  f"<code>{html.escape(self.history_path or '')}</code>.")
            self._redraw(len(self.results))
        self._render_status()

    # -- widgets -------------------------------------------------------------
    def _build_widgets(self) -> None:
        self._knob_table = dict(_config.KNOBS)
        self.controls = build_controls(self._knob_table, {n: getattr(self.baseline, n) for n in self._knob_table})
        self.knobs: Dict[str, W.Widget] = {name: c.widget for name, c in self.controls.items()}
        for control in self.controls.values():
            control.observe(self._on_knob_change)

        self.run_button = W.Button(description="Run", button_style="primary", icon="play",
                                   tooltip="train with these settings and record the result")
        self.run_button.add_class("tfwb-run")
        self.run_button.on_click(self._on_click)
        self.stop_button = W.Button(description="Stop", icon="stop", disabled=True, tooltip=_STOP_TIP)
        self.stop_button.add_class("tfwb-stop")
        self.stop_button.on_click(self._on_stop_click)
        self.apply_button = W.Button(description="Apply suggestion", icon="magic", disabled=True,
                                     layout=W.Layout(width="auto"),
                                     tooltip="set the knob the last run's diagnosis suggests, and run")
        self.apply_button.add_class("tfwb-apply")
        self.apply_button.on_click(self._on_apply_click)
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
        self.compare_chart = W.Image(format="png", layout=W.Layout(display="none"))
        self.compare_chart.add_class("tfwb-compare-chart")
        self.history = W.HTML(report.html_table([]))
        self.history.add_class("tfwb-history")

        machine = _describe_hardware(self.hardware)
        header = W.HTML(_CSS + "<b>tfwb Workbench</b>"
                        + (f" &middot; this machine: {html.escape(machine)}" if machine else ""))
        header.add_class("tfwb-header")
        actions = W.HBox([self.run_button, self.stop_button, self.apply_button, self.progress,
                          self.progress_text],
                         layout=W.Layout(flex_flow="row wrap", align_items="center"))
        actions.add_class("tfwb-actions")
        self.widget = W.VBox([
            header,
            *knob_rows(self.controls, self._knob_table),
            actions,
            self.status,
            self.chart_note,
            self.run_chart,
            self.compare_chart,
            self.history,
        ])
        self.widget.add_class("tfwb-workbench")
        self._refresh_history()

    def _knob_values(self, skip: Any = ()) -> Dict[str, Any]:
        """RunConfig values from the controls (those in ``skip`` left out).

        Raises:
            ValueError: naming the field, for a control holding a value it does not accept.
        """
        return {name: c.read() for name, c in self.controls.items() if name not in skip}

    # -- configuration ---------------------------------------------------------
    def config(self) -> RunConfig:
        """The RunConfig the next run will use: the baseline with the knobs applied.

        Returns:
            ``baseline.replace(...)`` with every control's value, the fields without a
            control set through ``run(...)``, and the label given to the pending run.

        Raises:
            ValueError: naming the field when a control holds a bad value (e.g. steps "abc").

        Example:
            >>> Workbench(hardware={}).config() == RunConfig()  # doctest: +SKIP
            True
        """
        changes = {**self._overrides, **self._knob_values()}
        if self._next_label is not None:
            changes["label"] = self._next_label
        return self.baseline.replace(**changes)

    def reset_knobs(self) -> None:
        """Put every knob back to the baseline and forget fields set through ``run(...)``.

        Example:
            >>> wb.reset_knobs(); wb.config() == wb.baseline  # doctest: +SKIP
            True
        """
        self._overrides = {}
        self._next_label = None
        for name, control in self.controls.items():
            control.reset(getattr(self.baseline, name))
        self._render_status()

    def suggestion(self) -> Optional[Tuple[str, Any, str]]:
        """The first ``(field, value, why)`` the last run's diagnosis suggests, or ``None``."""
        if not self.results:
            return None
        suggestions = diagnose(self.results[-1]).suggestions
        return tuple(suggestions[0]) if suggestions else None   # type: ignore[return-value]

    # -- running -----------------------------------------------------------------
    def run(self, **changes: Any) -> RunResult:
        """Set knobs from ``changes`` and run: exactly what clicking Run does, but blocking.

        Fields with a control move it; other RunConfig fields (``sample_interval_s``,
        ...) apply to this and later runs until ``reset_knobs()``; ``label`` names
        this run only. A kernel interrupt (or the Stop button) ends the run after its
        current step; it is recorded as ``"interrupted"`` with the steps it finished.

        Args:
            **changes: RunConfig fields and values, e.g. ``prefetch=True``.

        Returns:
            The recorded RunResult. A runner that raises or fails gives a result with
            ``status="failed"`` and ``error`` set (shown red, recorded, not raised).

        Raises:
            ValueError: naming an unknown field (nothing changes), or naming the field
                whose value is not allowed (the status turns red, nothing is recorded,
                the knobs stay as they were).
            RuntimeError: when called while a run is in progress.

        Example:
            >>> wb.run(prefetch=True, cache=True).summary()  # doctest: +SKIP
        """
        _config.check_fields(changes)
        if self._running:
            raise RuntimeError("a run is already in progress: click Stop or call wb.wait() first")
        self._apply_changes(changes)
        result = self._launch(background=False, raise_bad_config=True)
        if result is None:  # only when another run started meanwhile
            raise RuntimeError("a run is already in progress: click Stop or call wb.wait() first")
        return result

    def apply_suggestion(self) -> RunResult:
        """Set the knob of the last run's first suggestion and run (as the Apply button does).

        Only that knob changes; the status says what was applied.

        Returns:
            The recorded RunResult.

        Raises:
            ValueError: when the last run has no suggestion (or there is no run yet).
            RuntimeError: when called while a run is in progress.

        Example:
            >>> wb.run(); wb.apply_suggestion().config.prefetch   # doctest: +SKIP
            True
        """
        suggestion = self.suggestion()
        if suggestion is None:
            last = diagnose(self.results[-1]).headline if self.results else "no run yet"
            raise ValueError(f"no suggestion to apply (last run: {last})")
        name, value, why = suggestion
        self._next_note = f"Applied the suggestion {name}={value!r} ({why})."
        try:
            return self.run(**{name: value})
        finally:
            self._next_note = None

    def stop(self) -> bool:
        """Ask the run in progress to end after its current step (what the Stop button does).

        Returns:
            True when a run was in progress.
        """
        return self._request_stop("wb.stop()")

    def wait(self, timeout: Optional[float] = None) -> Optional[RunResult]:
        """Wait for a run started by a click to end; returns the last result (``None``: no run yet).

        A KeyboardInterrupt while waiting stops the run (after its current step) and waits for it.

        Args:
            timeout: seconds to wait at most (``None``: until it ends).
        """
        thread = self._thread
        if thread is not None:
            try:
                thread.join(timeout)
            except KeyboardInterrupt:
                self._request_stop("KeyboardInterrupt")
                thread.join()
        return self.results[-1] if self.results else None

    @property
    def running(self) -> bool:
        """True while a run is in progress."""
        return self._running

    def _apply_changes(self, changes: Dict[str, Any]) -> None:
        """Validate ``changes`` against the current knobs, then put them on the knobs.

        Raises:
            ValueError: naming the field; the status turns red and nothing changes.
        """
        changes = dict(changes)
        label = changes.pop("label", None)
        knob_changes = {k: v for k, v in changes.items() if k in self.controls}
        other_changes = {k: v for k, v in changes.items() if k not in self.controls}
        try:
            merged = {**self._overrides, **other_changes, **self._knob_values(skip=knob_changes),
                      **knob_changes}
            if label is not None:
                merged["label"] = label
            cfg = self.baseline.replace(**merged)
        except ValueError as e:
            self._outcome_html = _red(f"not run: {e}")
            self._render_status()
            raise
        self._overrides.update(other_changes)
        self._next_label = label
        for name in knob_changes:
            self.controls[name].show(getattr(cfg, name))

    def _use_background(self) -> bool:
        return self._background if self._background is not None else kernel_loop() is not None

    def _on_click(self, _button: Any = None) -> None:
        self._launch(background=self._use_background(), raise_bad_config=False)

    def _on_stop_click(self, _button: Any = None) -> None:
        if self._request_stop("Stop button"):
            self.progress_text.value = "stopping after the current step\u2026"

    def _on_apply_click(self, _button: Any = None) -> None:
        suggestion = self.suggestion()
        if suggestion is None or self._running:
            return
        name, value, why = suggestion
        try:
            self._apply_changes({name: value})
        except ValueError:
            return                                  # shown red by _apply_changes
        self._next_note = f"Applied the suggestion {name}={value!r} ({why})."
        self._launch(background=self._use_background(), raise_bad_config=False)

    def _launch(self, *, background: bool, raise_bad_config: bool) -> Optional[RunResult]:
        """Start a run of the knobs' configuration: the one path for clicks, run() and apply.

        Returns the result when it ran here, ``None`` when it runs in the background or
        did not start (a run already in progress, or a bad knob when not raising).
        """
        with self._lock:
            if self._running:
                return None
            try:
                cfg = self.config()
            except ValueError:
                self._next_label = self._next_note = None
                self._render_status()            # the preview line shows the bad knob in red
                if raise_bad_config:
                    raise
                return None
            self._next_label = None
            note, self._next_note = self._next_note, None
            flag = StopFlag(STOP_REASON)
            self._running, self._stop_flag, self._stop_how = True, flag, None
            self._show_running(cfg, note, stoppable=background)
        if not background:
            return self._execute(cfg, flag, note)
        self._thread = threading.Thread(target=self._execute, args=(cfg, flag, note),
                                        name="tfwb-workbench-run", daemon=True)
        self._bridge.arm()
        self._thread.start()
        return None

    def _execute(self, cfg: RunConfig, flag: StopFlag, note: Optional[str]) -> RunResult:
        """Run ``cfg``, record the result, and make the buttons ready again."""
        try:
            result = self._finish_result(self._call_runner(cfg, flag), flag)
            self._record(result, note)
            return result
        finally:
            self._bridge.disarm()
            with self._lock:
                self._running, self._stop_flag = False, None
                self._show_idle()

    def _request_stop(self, how: str) -> bool:
        """Set the running run's stop flag (thread-safe; called from a signal handler too)."""
        flag = self._stop_flag
        if flag is None:
            return False
        if self._stop_how is None:
            self._stop_how = how
        flag.set()
        return True

    def _call_runner(self, cfg: RunConfig, flag: StopFlag) -> RunResult:
        """The runner's result, or a failed/interrupted RunResult for what it raised."""
        try:
            runner = self._runner
            if runner is None:
                import tfwb

                runner = tfwb.run
            kwargs: Dict[str, Any] = {"progress": self._on_progress}
            if _accepts(runner, "observers"):
                kwargs["observers"] = (flag,) + self._scalars(cfg)
            result = runner(cfg, **kwargs)
            if not isinstance(result, RunResult):
                raise TypeError(f"the runner returned {type(result).__name__}, not a RunResult")
            return result
        except KeyboardInterrupt:
            self._stop_how = self._stop_how or "KeyboardInterrupt"
            return RunResult(config=cfg, status="interrupted", error="interrupted by the user",
                             started_at=_now_iso(), run_id=uuid.uuid4().hex)
        except Exception as e:  # shown in the widget and recorded, not lost in a log console
            return RunResult(config=cfg, status="failed", error=f"{type(e).__name__}: {e}",
                             started_at=_now_iso(), run_id=uuid.uuid4().hex)

    def _scalars(self, cfg: RunConfig) -> tuple:
        """The TensorBoard observer for the next run (none without ``logdir``)."""
        if self.logdir is None:
            return ()
        from tfwb.tf.lab.tensorboard import Scalars, run_name

        what = cfg.label or "_".join(report.short_changes(cfg, self.baseline)) or "baseline"
        return (Scalars(self.logdir, name=f"{len(self.results) + 1:02d}-{run_name(what)}"),)

    def _finish_result(self, result: RunResult, flag: StopFlag) -> RunResult:
        """A run the user stopped is ``"interrupted"``, with how and after how many steps.

        ``tfwb.run`` ends a run whose StopFlag is set with ``status="ok"`` and
        ``stop_reason`` set, as for any observer's stop; a stop by the user (Stop,
        kernel interrupt, Ctrl-C) is recorded here as interrupted, like a
        KeyboardInterrupt inside ``tfwb.run``.
        """
        stopped = flag.is_set and result.status == "ok" and result.stop_reason == flag.reason
        if not stopped and result.status != "interrupted":
            return result
        done, total = _steps_done(result)
        how = f" ({self._stop_how})" if self._stop_how else ""
        base = STOP_REASON if stopped else (result.error or "interrupted by the user")
        error = f"{base}{how} after {done} of {total} steps"
        return dataclasses.replace(result, status="interrupted", error=error,
                                   stop_reason=result.stop_reason or STOP_REASON)

    def _on_progress(self, steps_done: int, steps_total: int) -> None:
        """The runner's progress callback: move the bar, at most ~20 times a second."""
        now = time.monotonic()
        if steps_done < steps_total and now - self._last_progress_s < _PROGRESS_INTERVAL_S:
            return
        self._last_progress_s = now
        total = max(int(steps_total), 1)
        if self.progress.max != total:
            self.progress.max = total
        self.progress.value = max(0, min(int(steps_done), total))
        stopping = " (stopping\u2026)" if self._stop_flag is not None and self._stop_flag.is_set else ""
        self.progress_text.value = f"{int(steps_done)} / {int(steps_total)} steps{stopping}"

    def _record(self, result: RunResult, note: Optional[str] = None) -> None:
        """Keep the result, say how it ended, save it, then redraw the charts.

        The bar, the status line and the history row change before the charts are
        drawn, so a stopped run shows as stopped at once.
        """
        self.results.append(result)
        number = len(self.results)
        done, total = _steps_done(result)
        self.progress.bar_style = {"ok": "success", "interrupted": "warning"}.get(result.status, "danger")
        if result.ok:
            self.progress.value = self.progress.max
        self.progress_text.value = f"{done} / {total} steps: {html.escape(result.status)}"
        self._outcome_html = self._outcome(result, number, note)
        self.status.value = self._outcome_html
        problems = []
        if self.history_path:
            try:
                append_result(self.history_path, result)
            except OSError as e:
                problems.append(f"not saved to {self.history_path}: {e}")
        try:
            self._redraw(number)
        except Exception as e:  # a chart bug must not lose the result
            problems.append(f"chart failed: {type(e).__name__}: {e}")
        for problem in problems:
            self._outcome_html += "<br>" + _red(problem)

    def _outcome(self, result: RunResult, number: int, note: Optional[str]) -> str:
        """The status line for run ``number``: summary and verdict, or why it ended early (red if it failed)."""
        if result.ok:
            row = report.history_rows(self.results, self._baseline_result(),
                                      baseline_config=self.baseline)[-1]
            text = f"<b>#{number}</b> {html.escape(result.summary())}"
            if row.get("prev_verdict"):        # the comparison the reader just made comes first
                color = report.verdict_color(row.get("prev_comparison"))
                text += (f" &mdash; vs the previous run (#{row['previous']}): "
                         f"<b style='color:{color}'>{html.escape(row['prev_verdict'])}</b>")
            if row["verdict"] and not row["is_baseline"]:
                color = report.verdict_color(row.get("comparison"))
                text += f" &mdash; vs the baseline: <b style='color:{color}'>{html.escape(row['verdict'])}</b>"
            elif row["is_baseline"]:
                text += " &mdash; this is the baseline"
            if not row.get("noise_learned", True):
                text += ("<br><i>Run one configuration 3 times to learn this machine's run-to-run noise; "
                         "for a close call use <code>tfwb.compare_interleaved(a, b)</code>.</i>")
        elif result.status == "interrupted":
            text = f"<b>#{number} interrupted: {html.escape(result.error or 'interrupted')}</b>"
            if result.step_times_s:
                text += (f" &mdash; {len(result.step_times_s)} measured step(s) charted below; "
                         "not used in comparisons")
        else:
            text = _red(f"#{number} {result.status}: {result.error or 'no measured steps'}")
        if note:
            text = f"{html.escape(note)}<br>{text}"
        for line in result.notes:
            text += f"<br><i>{html.escape(line)}</i>"
        return text

    # -- rendering ---------------------------------------------------------------
    def _baseline_result(self) -> Optional[RunResult]:
        return report.pick_baseline(self.results, self.baseline)

    def _refresh_history(self) -> None:
        rows = report.history_rows(self.results, self._baseline_result(), baseline_config=self.baseline)
        self.history.value = report.html_table(rows)

    def _redraw(self, latest: int) -> None:
        """Redraw for run ``latest`` (1-based): history, comparison, and the run chart.

        The run chart shows the latest run that has steps: a run that failed before
        its first step keeps the previous chart on screen (with a red note above it)
        instead of replacing it with empty axes.
        """
        from tfwb.ui import charts

        self._refresh_history()
        self.compare_chart.value = charts.comparison_png(self.results, self._baseline_result(),
                                                         baseline_config=self.baseline)
        self.compare_chart.layout.display = None
        drawable = [i for i in range(latest, 0, -1) if _has_steps(self.results[i - 1])]
        if drawable and drawable[0] != self._chart_run:
            self.run_chart.value = charts.run_chart_png(self.results[drawable[0] - 1])
            self.run_chart.layout.display = None
            self._chart_run = drawable[0]
        note = ""
        result = self.results[latest - 1]
        if not _has_steps(result):
            what = f"run #{latest} {result.status} before its first step"
            note = _red(f"{what}; the chart below is still run #{self._chart_run}'s"
                        if self._chart_run else f"{what}; no run has steps to chart yet")
        self.chart_note.value = note
        self.chart_note.layout.display = None if note else "none"

    def _preview(self) -> Tuple[str, bool]:
        """The "Next run" line (red naming the field when a knob is bad), and whether it can run."""
        try:
            cfg = self.config()
        except ValueError as e:
            return _red(f"cannot run: {e}"), False
        changes = report.format_changes(cfg, self.baseline)
        text = f"Next run: <code>{html.escape(changes)}</code>"
        hints = expectations(cfg, self.hardware)
        if hints:
            text += "<ul style='margin:2px 0'>" + "".join(
                f"<li>{html.escape(h)}</li>" for h in hints) + "</ul>"
        return text, True

    def _render_status(self) -> None:
        """Status = last outcome + next-run preview; Run and Apply enabled only when they can run."""
        preview, valid = self._preview()
        self.status.value = "<br>".join(p for p in (self._outcome_html, preview) if p)
        self.run_button.disabled = self._running or not valid
        set_tooltip(self.run_button, "train with these settings and record the result" if valid
                    else "a knob holds a value it does not accept (shown red): fix it first")
        suggestion = self.suggestion()
        self.apply_button.disabled = self._running or not valid or suggestion is None
        self.apply_button.description = (f"Apply {suggestion[0]}={suggestion[1]!r}" if suggestion
                                          else "Apply suggestion")
        if suggestion:
            set_tooltip(self.apply_button, f"the last run's diagnosis suggests {suggestion[0]}="
                                           f"{suggestion[1]!r}: {suggestion[2]}; set it and run")

    def _show_running(self, cfg: RunConfig, note: Optional[str], *, stoppable: bool) -> None:
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
        self.progress.bar_style = ""
        total = cfg.warmup_steps + cfg.steps
        self.progress.max = max(total, 1)
        self.progress.value = 0
        self.progress_text.value = f"0 / {total} steps"
        self._last_progress_s = 0.0
        applied = f"{html.escape(note)}<br>" if note else ""
        self.status.value = (f"{applied}Running #{len(self.results) + 1}: "
                             f"<code>{html.escape(report.format_changes(cfg, self.baseline))}</code>\u2026")

    def _show_idle(self) -> None:
        self.run_button.description = "Run"
        self.stop_button.disabled = True
        self._render_status()

    def _on_knob_change(self, _change: Any) -> None:
        if not self._running:
            self._render_status()

    # -- display -------------------------------------------------------------------
    def _ipython_display_(self, **kwargs: Any) -> None:
        from IPython.display import display

        display(self.widget)

    def _repr_mimebundle_(self, **kwargs: Any) -> dict:
        bundle = getattr(self.widget, "_repr_mimebundle_", None)
        if bundle is not None:                     # ipywidgets 8
            return bundle(**kwargs)
        return {                                   # ipywidgets 7 sends this from _ipython_display_
            "text/plain": repr(self.widget),
            "application/vnd.jupyter.widget-view+json": {
                "version_major": 2, "version_minor": 0, "model_id": self.widget.model_id},
        }

    def __repr__(self) -> str:
        return f"<tfwb Workbench: {len(self.results)} run(s), history_path={self.history_path!r}>"
