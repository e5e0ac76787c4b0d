"""The Workbench: knobs, Run / Stop / Apply suggestion / Tune, charts redrawn in place, run history.

Owns the public widget object and its wiring only, joining two parts that know nothing
of each other's insides:

- ``tfwb.ui.controller.WorkbenchController``: knob values -> RunConfig -> the runner
  (``tfwb.run`` by default, imported at the first run) inline or on a background thread
  -> the history file -> ``results``; Stop and kernel interrupts; the suggestion. No widgets.
- ``tfwb.ui.panel.WorkbenchPanel``: the widgets and how they show the controller's runs
  (status line, progress bar, charts from ``tfwb.ui.charts``, the table from
  ``tfwb.render``); it only reads the controller.

The knob controls come from the knob table (``tfwb.ui.controls``: one per RunConfig field
that has a ``group``, laid out a row per group); they are the controller's inputs and
the panel lays them out. Here the buttons and the controls are wired to the controller,
and the controller's events go to the panel.

Running. ``Workbench.run(...)`` from a cell trains on the calling thread and blocks
until the run ends (nbval relies on it); a kernel interrupt stops it like any cell. A
click on Run (in a kernel) trains on a background thread, so the kernel stays free for
the Stop click, and a kernel interrupt stops it too (``tfwb.interrupts`` explains why a
click cannot simply block). Either way the run ends after its current step and is
recorded as ``"interrupted"`` with the steps it finished. Clicks while a run is in
progress start nothing. Tune (``Workbench.tune``, the Tune button) goes the same way: Stop or a
kernel interrupt ends it after the current step, keeping the trials it finished.

Deciding. Where the latest run's verdict says "cannot tell" (the machine was busy, a run drifted),
a Decide button stands under the status line: it compares the two configurations interleaved
(``tfwb.compare_interleaved``, as tune does) like a run, stoppable with Stop, and the rows, the
status line and the chart then show that verdict, marked interleaved. ``Workbench.decide`` does the
same from a cell.
"""
from __future__ import annotations

import os
from typing import Any, Dict, List, Optional, Tuple

import ipywidgets as W

from tfwb import config as _config
from tfwb import hardware as _hardware
from tfwb import stats
from tfwb.config import RunConfig
from tfwb.records import RunResult
from tfwb.search.tune_result import Tuning
from tfwb.ui.controller import Runner, WorkbenchController
from tfwb.ui.controls import build_controls
from tfwb.ui.panel import WorkbenchPanel

__all__ = ["Workbench", "KNOB_FIELDS"]

#: RunConfig fields that get a control (every knob with a ``group``), in declaration order.
KNOB_FIELDS: Tuple[str, ...] = tuple(n for n, k in _config.KNOBS.items() if k.group is not None)


class Workbench:
    """Knobs for one RunConfig, Run / Stop / Apply suggestion, live progress, charts and history.

    Args:
        baseline (RunConfig | None, default None): the configuration the knobs start
            from and runs are compared with; ``None`` is ``RunConfig()``.
        history_path (str | PathLike | None, default None): a JSON-lines file; every
            result (failures included) is appended to it.
        runner (callable | None, default None): ``runner(cfg, observers) -> RunResult``,
            the contract of ``tfwb.run``; ``None`` uses ``tfwb.run``, imported at the
            first run (TensorFlow loads then). The observers carry progress and stopping.
        resume (bool, default True): load an existing ``history_path`` into
            ``results`` so a restarted kernel gets its history back.
        hardware (Machine | mapping | None, default None): ``tfwb.hardware.detect()`` output
            (or a mapping of its fields) used for the header and the expectations shown
            before a run; ``None`` detects it.
        background (bool | None, default None): whether a click trains on a background
            thread (``wait()`` joins it); ``None``: yes inside a Jupyter kernel, where
            the Stop button and kernel interrupts need it, else no.
        logdir (str | PathLike | None, default None): a TensorBoard log folder; each run
            writes its scalars (``tfwb.tf.lab.tensorboard.Scalars``) to ``logdir/NN-<label or
            changes>`` (``NN`` its number in ``results``).

    Attributes:
        widget: the root ``VBox`` (CSS class ``tfwb-workbench``); a bare ``wb`` at the
            end of a cell displays it.
        controls: ``{field: KnobControl}`` for every knob with a group (``tfwb.ui.controls``).
        knobs: ``{field: widget}``, the controls' widgets (CSS class ``tfwb-knob-<field>``).
        run_button, stop_button, apply_button, tune_button, tune_log, progress, progress_text, status, run_chart,
            chart_note, loss_chart, compare_chart, history: the panel's other widgets (CSS
            classes ``tfwb-run``, ``tfwb-stop``, ``tfwb-apply``, ``tfwb-tune``, ``tfwb-tune-log``, ``tfwb-progress``,
            ``tfwb-progress-text``, ``tfwb-status``, ``tfwb-run-chart``, ``tfwb-chart-note``,
            ``tfwb-loss-chart``, ``tfwb-compare-chart``, ``tfwb-history``). ``loss_chart``
            shows the latest run's loss beside the previous run's when a knob that changes
            the arithmetic changed (optimizer, learning rate, clipping, precision, ...).
        decide_button: shown while the latest run's verdict says "cannot tell" (CSS class ``tfwb-decide``):
            a click runs ``decide`` against the previous run (or the baseline) in the background.
        limits_chart: how far each run is from this machine's limit (CSS class
            ``tfwb-limits-chart``): where its step time goes beside its achieved FLOP/s
            against the measured and the datasheet peak (``tfwb.ui.charts.limits_png``).
        results: every result so far, in order, failures included.
        controller: the ``WorkbenchController`` (``tfwb.ui.controller``) that runs and keeps them.
        panel: the ``WorkbenchPanel`` (``tfwb.ui.panel``) that draws them.

    Raises:
        ValueError: when ``logdir`` cannot be created or written (before any run).
            (A ``history_path`` line that is not a complete result, e.g. one a dead
            kernel cut short, is skipped; the status line says which.)

    Example:
        >>> wb = Workbench(RunConfig(steps=20), history_path="runs.jsonl")  # doctest: +SKIP
        >>> wb                     # shows the knobs, Run, charts and history  # doctest: +SKIP
        >>> wb.run(prefetch=True)  # what ticking prefetch and clicking Run does  # doctest: +SKIP
    """

    def __init__(self, baseline: Optional[RunConfig] = None,
                 history_path: "str | os.PathLike | None" = None, *,
                 runner: Optional[Runner] = None, resume: bool = True,
                 hardware: Any = None, background: Optional[bool] = None,
                 logdir: "str | os.PathLike | None" = None) -> None:
        self.controller = WorkbenchController(baseline, history_path, runner=runner, resume=resume,
                                              background=background, logdir=logdir)
        self.hardware: Any = hardware if hardware is not None else _hardware.detect()
        table = dict(_config.KNOBS)
        self.controls = build_controls(table, {n: getattr(self.baseline, n) for n in table})
        self.knobs: Dict[str, W.Widget] = {name: c.widget for name, c in self.controls.items()}
        self.controller.inputs = dict(self.controls)
        self.panel = WorkbenchPanel(self.controller, self.controls, table, self.hardware)
        self.controller.events = self.panel
        p = self.panel
        self.widget, self.status, self.history = p.widget, p.status, p.history
        self.run_button, self.stop_button, self.apply_button = p.run_button, p.stop_button, p.apply_button
        self.tune_button, self.tune_log = p.tune_button, p.tune_log
        self.decide_button = p.decide_button
        #: Trials the Tune button allows (``tune(max_runs=...)`` from code).
        self.tune_max_runs = 4
        self.progress, self.progress_text = p.progress, p.progress_text
        self.run_chart, self.chart_note, self.compare_chart = p.run_chart, p.chart_note, p.compare_chart
        self.loss_chart, self.limits_chart = p.loss_chart, p.limits_chart
        self.run_button.on_click(lambda _button: self.controller.click())
        self.apply_button.on_click(lambda _button: self.controller.click(apply=True))
        self.tune_button.on_click(lambda _button: self.controller.tune(
            self.tune_max_runs, background=self.controller.use_background(), raise_errors=False))
        self.stop_button.on_click(self._on_stop_click)
        self.decide_button.on_click(lambda _button: self.controller.decide(
            self.panel.decide_against or "previous", background=self.controller.use_background(),
            raise_errors=False))
        for control in self.controls.values():
            control.observe(self._on_knob_change)

    # -- what the controller keeps -----------------------------------------------------
    @property
    def results(self) -> List[RunResult]:
        """Every result so far, in order, failures included."""
        return self.controller.results

    @property
    def baseline(self) -> RunConfig:
        """The configuration the knobs start from and runs are compared with."""
        return self.controller.baseline

    @property
    def history_path(self) -> Optional[str]:
        """The history file (``None``: results are kept in memory only)."""
        return self.controller.history_path

    @property
    def logdir(self) -> Optional[str]:
        """The TensorBoard log folder (``None``: no event files)."""
        return self.controller.logdir

    @property
    def running(self) -> bool:
        """True while a run is in progress."""
        return self.controller.running

    def config(self) -> RunConfig:
        """The RunConfig the next run will use: the baseline with the knobs applied.

        Returns:
            ``baseline.replace(...)`` with every control's value, the fields without a
            control set through ``run(...)``, and the label given to the pending run.

        Raises:
            ValueError: naming the field when a control holds a bad value (e.g. steps "abc").

        Example:
            >>> Workbench(hardware={}).config() == RunConfig()
            True
        """
        return self.controller.config()

    def reset_knobs(self) -> None:
        """Put every knob back to the baseline and forget fields set through ``run(...)``.

        Example:
            >>> wb.reset_knobs(); wb.config() == wb.baseline  # doctest: +SKIP
            True
        """
        self.controller.reset()
        self.panel.render_status()

    def suggestion(self) -> Optional[Tuple[str, Any, str]]:
        """The first ``(field, value, why)`` the last run's diagnosis suggests, or ``None``."""
        return self.controller.suggestion()

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
        return self.controller.run(**changes)

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
        return self.controller.apply_suggestion()

    def tune(self, max_runs: int = 4, *, rounds: Optional[int] = None) -> Tuning:
        """Tune from the knobs (``tfwb.tune``), as the Tune button does, but blocking; then set the best knobs.

        Each trial shows as it happens (its change, its bound, the interleaved verdict, kept or
        reverted) in ``tune_log``; every run is recorded as a click's run is. A kernel interrupt
        ends the tune after the current step, keeping the finished trials (``interrupted``).

        Args:
            max_runs: the most trials (candidate runs), >= 1.
            rounds: interleaved rounds per trial (``tfwb.tune``'s default when None).

        Returns:
            The ``tfwb.search.tune_result.Tuning``; the knobs then hold its ``best`` configuration.

        Raises:
            ValueError: for ``max_runs`` below 1 (naming it and what is allowed) or a bad knob value.
            RuntimeError: when a run is in progress, or the baseline run failed (naming its error).

        Example:
            >>> print(wb.tune(max_runs=3).text())     # doctest: +SKIP
        """
        return self.controller.tune(max_runs, background=False, raise_errors=True, rounds=rounds)

    def decide(self, against: str = "previous", rounds: Optional[int] = None) -> Optional[stats.RoundsComparison]:
        """Decide the latest run's verdict interleaved (the Decide button), blocking.

        Compares the latest run's configuration with the previous run's (or the baseline's) in
        alternating turns in one process (``tfwb.compare_interleaved``), records the verdict, and the
        status line, the history table and the comparison chart then show it instead of the separate
        runs' verdict, marked interleaved. A kernel interrupt ends it after the current round, recording
        nothing.

        Args:
            against: ``"previous"`` (the previous finished run) or ``"baseline"``.
            rounds: interleaved rounds (6 or more decide); default 10 in small mode (``TFWB_FAST=1``),
                else the comparison's default (30).

        Returns:
            The ``tfwb.stats.RoundsComparison`` (the latest run as the candidate); ``None`` when stopped.

        Raises:
            ValueError: for a bad ``against`` or ``rounds``, or when the latest run has no measured
                comparison against that run; or (from the comparison) a knob this machine cannot honour.
            RuntimeError: when a run is in progress, or a whole-run comparison's run failed.

        Example:
            >>> wb.run(); wb.run(cache=True); print(wb.decide().text())    # doctest: +SKIP
            3.78x faster (97 % CI 3.56-4.67x; faster in 10 of 10 rounds)
        """
        return self.controller.decide(against, rounds, background=False, raise_errors=True)

    def stop(self) -> bool:
        """Ask the run in progress to end after its current step (what the Stop button does).

        Returns:
            True when a run was in progress.
        """
        return self.controller.stop("wb.stop()")

    def wait(self, timeout: Optional[float] = None) -> Optional[RunResult]:
        """Wait for a run started by a click to end; returns the last result (``None``: no run yet).

        A KeyboardInterrupt while waiting stops the run (after its current step) and waits for it.

        Args:
            timeout: seconds to wait at most (``None``: until it ends).
        """
        return self.controller.wait(timeout)

    def _on_stop_click(self, _button: Any = None) -> None:
        if self.controller.stop("Stop button"):
            self.panel.show_stopping()

    def _on_knob_change(self, _change: Any) -> None:
        if not self.controller.running:
            self.panel.render_status()

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
