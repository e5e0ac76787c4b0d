"""The Workbench widget: knobs, a Run button, charts redrawn in place, and the run history.

Owns the widgets and their wiring only. The numbers come from the runner (``tfwb.run``
by default, imported at the first run), the table from ``tfwb.report``, the charts
from ``tfwb.ui.charts``, the expectations from ``tfwb.diagnosis``. Charts are
``ipywidgets.Image`` widgets whose PNG value is replaced in place, so the Workbench
redraws the same way in JupyterLab, Notebook 7, VS Code, Colab and under nbval. It
uses only widget APIs present in both ipywidgets 7.7 and 8, never ``clear_output``
and never ``with out:``. Running is blocking on purpose: clicks queue while the
button is disabled, and ``Workbench.run(...)`` does from a cell exactly what a click does.
"""
from __future__ import annotations

import datetime
import html
import os
import time
import uuid
from typing import Any, Callable, Dict, List, Optional

import ipywidgets as W

from .. import report
from ..config import DATA_SOURCES, MIXED_PRECISION, OPTIMIZERS, STRATEGIES, RunConfig, field_names
from ..diagnosis import expectations
from ..records import RunResult, append_result, load_results

#: Fields with an on/off toggle, and the text on each toggle.
TOGGLE_KNOBS: Dict[str, str] = {
    "prefetch": "prefetch",
    "cache": "cache",
    "parallel_map": "parallel_map",
    "interleave": "interleave",
    "vectorized_map": "vectorized_map",
    "deterministic": "deterministic",
    "jit_compile": "jit_compile (XLA)",
}
#: Fields picked from a list, and the values offered (``None`` shows as "none").
CLIP_CHOICES = (None, "global_norm:1.0", "norm:1.0", "value:0.5")
LATENCY_CHOICES_MS = (None, 0.0, 3.0, 25.0, 100.0)
DROPDOWN_KNOBS: Dict[str, tuple] = {
    "data_source": DATA_SOURCES,
    "storage_latency_ms": LATENCY_CHOICES_MS,
    "mixed_precision": MIXED_PRECISION,
    "clip": CLIP_CHOICES,
    "optimizer": OPTIMIZERS,
    "strategy": STRATEGIES,
}
#: Fields typed in as integers.
INT_KNOBS = ("batch_size", "steps", "shuffle_buffer")
KNOB_FIELDS = tuple(TOGGLE_KNOBS) + tuple(DROPDOWN_KNOBS) + INT_KNOBS

RED = "#c00"
_NONE = "none"                     # the dropdown's stand-in for None
_NONE_LABELS = {"storage_latency_ms": "workload default"}   # where None means something else
_PROGRESS_INTERVAL_S = 0.05        # at most ~20 progress-bar updates a second

Runner = Callable[..., RunResult]


def _red(text: str) -> str:
    return f"<b style='color:{RED}'>{html.escape(text)}</b>"


def _now_iso() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def _default_hardware() -> dict:
    try:
        from .. import hardware

        return hardware.detect()
    except (ImportError, AttributeError):
        return {}


def _describe_hardware(hw: dict) -> str:
    try:
        from .. import hardware

        return hardware.describe(hw)
    except (ImportError, AttributeError):
        return ""


class Workbench:
    """Knobs for one RunConfig, a Run button, live progress, charts and the history of runs.

    Args:
        baseline (RunConfig | None, default None): the configuration the knobs start
            from and runs are compared with; ``None`` is ``RunConfig()``.
        history_path (str | PathLike | None, default None): a JSON-lines file; every
            result (failures included) is appended to it.
        runner (callable | None, default None): ``runner(cfg, progress=cb) -> RunResult``;
            ``None`` uses ``tfwb.run``, imported at the first run (TensorFlow loads then).
        resume (bool, default True): load an existing ``history_path`` into
            ``results`` so a restarted kernel gets its history back.
        hardware (dict | None, default None): ``tfwb.hardware.detect()`` output used for
            the expectations shown before a run; ``None`` detects it.

    Attributes:
        widget: the root ``VBox`` (CSS class ``tfwb-workbench``); a bare ``wb`` at the
            end of a cell displays it.
        knobs: ``{field: widget}`` for every knob (CSS class ``tfwb-knob-<field>``).
        run_button, progress, status, run_chart, compare_chart, history: the other
            widgets (CSS classes ``tfwb-run``, ``tfwb-progress``, ``tfwb-status``,
            ``tfwb-run-chart``, ``tfwb-compare-chart``, ``tfwb-history``).
        results: every result so far, in order, failures included.

    Raises:
        ValueError: when ``history_path`` exists but a line cannot be read (from
            ``tfwb.load_results``; the message names the file and line).

    Example:
        >>> wb = Workbench(RunConfig(steps=20), history_path="runs.jsonl")  # doctest: +SKIP
        >>> wb                     # shows the knobs, Run, charts and history  # doctest: +SKIP
        >>> wb.run(prefetch=True)  # what toggling prefetch and clicking Run does  # doctest: +SKIP
    """

    def __init__(self, baseline: Optional[RunConfig] = None,
                 history_path: "str | os.PathLike | None" = None, *,
                 runner: Optional[Runner] = None, resume: bool = True,
                 hardware: Optional[dict] = None) -> None:
        if baseline is not None and not isinstance(baseline, RunConfig):
            raise ValueError(f"baseline must be a RunConfig, got {type(baseline).__name__}")
        self.baseline: RunConfig = baseline if baseline is not None else RunConfig()
        self.history_path: Optional[str] = os.fspath(history_path) if history_path is not None else None
        self.hardware: dict = dict(hardware) if hardware is not None else _default_hardware()
        self._runner = runner
        self.results: List[RunResult] = (
            load_results(self.history_path) if resume and self.history_path else [])
        self._overrides: Dict[str, Any] = {}      # fields set by run(...) that have no knob
        self._next_label: Optional[str] = None    # label for the next run only
        self._cache_path: Optional[str] = self.baseline.cache if isinstance(self.baseline.cache, str) else None
        self._outcome_html = ""                   # what happened last, above the preview
        self._running = False
        self._last_progress_s = 0.0
        self._build_widgets()
        if self.results:
            self._outcome_html = (f"Resumed {len(self.results)} run(s) from "
                                  f"<code>{html.escape(self.history_path or '')}</code>.")
            self._redraw(self.results[-1])
        self._render_status()

    # -- widgets -------------------------------------------------------------
    def _build_widgets(self) -> None:
        self.knobs: Dict[str, W.Widget] = {}
        self._choices: Dict[str, list] = {}
        wide = {"description_width": "initial"}
        for name, text in TOGGLE_KNOBS.items():
            self.knobs[name] = W.ToggleButton(description=text, tooltip=f"RunConfig.{name}",
                                              layout=W.Layout(width="auto"))
        for name, choices in DROPDOWN_KNOBS.items():
            self._choices[name] = list(choices)
            longest = max(len(self._label(c, name)) for c in choices)
            self.knobs[name] = W.Dropdown(
                options=self._options(name), description=name, style=wide,
                layout=W.Layout(width=f"{(len(name) + longest) * 8 + 56}px"))
        for name in INT_KNOBS:
            self.knobs[name] = W.IntText(description=name, style=wide,
                                         layout=W.Layout(width=f"{len(name) * 8 + 100}px"))
        for name, knob in self.knobs.items():
            knob.add_class(f"tfwb-knob-{name}")
        self._set_knobs({name: getattr(self.baseline, name) for name in KNOB_FIELDS})
        for knob in self.knobs.values():
            knob.observe(self._on_knob_change, names="value")

        self.run_button = W.Button(description="Run", button_style="primary", icon="play",
                                   tooltip="train with these settings and record the result")
        self.run_button.add_class("tfwb-run")
        self.run_button.on_click(self._on_click)
        self.progress = W.IntProgress(value=0, min=0, max=1, description="steps",
                                      layout=W.Layout(width="320px"))
        self.progress.add_class("tfwb-progress")
        self.progress_text = W.HTML("")
        self.progress_text.add_class("tfwb-progress-text")
        self.status = W.HTML("")
        self.status.add_class("tfwb-status")
        self.run_chart = W.Image(format="png", layout=W.Layout(display="none"))
        self.run_chart.add_class("tfwb-run-chart")
        self.compare_chart = W.Image(format="png", layout=W.Layout(display="none"))
        self.compare_chart.add_class("tfwb-compare-chart")
        self.history = W.HTML(report.html_table([]))
        self.history.add_class("tfwb-history")

        machine = _describe_hardware(self.hardware)
        header = W.HTML("<b>tfwb Workbench</b>"
                        + (f" &middot; this machine: {html.escape(machine)}" if machine else ""))
        header.add_class("tfwb-header")
        wrap = W.Layout(flex_flow="row wrap", align_items="center")
        k = self.knobs
        self.widget = W.VBox([
            header,
            W.HBox([W.HTML("<b>input</b>", layout=W.Layout(width="70px")),
                    k["prefetch"], k["cache"], k["parallel_map"], k["interleave"], k["vectorized_map"],
                    k["deterministic"], k["data_source"], k["storage_latency_ms"], k["shuffle_buffer"]],
                   layout=wrap),
            W.HBox([W.HTML("<b>compute</b>", layout=W.Layout(width="70px")),
                    k["jit_compile"], k["mixed_precision"], k["clip"], k["optimizer"], k["strategy"]],
                   layout=wrap),
            W.HBox([W.HTML("<b>run</b>", layout=W.Layout(width="70px")),
                    k["batch_size"], k["steps"], self.run_button, self.progress, self.progress_text],
                   layout=wrap),
            self.status,
            self.run_chart,
            self.compare_chart,
            self.history,
        ])
        self.widget.add_class("tfwb-workbench")
        self._refresh_history()

    @staticmethod
    def _label(value: Any, name: str = "") -> str:
        """The text a dropdown shows for a RunConfig value (dropdown values are these texts:
        ipywidgets 8 reads a ``None`` value as "nothing selected")."""
        if value is None:
            return _NONE_LABELS.get(name, _NONE)
        if name == "storage_latency_ms":
            return f"{value:g} ms"
        return str(value)

    def _options(self, name: str) -> list:
        return [(self._label(v, name), self._label(v, name)) for v in self._choices[name]]

    def _from_label(self, name: str, text: str) -> Any:
        for value in self._choices[name]:
            if self._label(value, name) == text:
                return value
        return text

    def _set_knobs(self, values: Dict[str, Any]) -> None:
        """Put RunConfig values on the knob widgets (values already validated)."""
        for name, value in values.items():
            knob = self.knobs[name]
            if name == "cache":
                if isinstance(value, str):
                    self._cache_path = value
                knob.value = bool(value)
            elif name in DROPDOWN_KNOBS:
                if value not in self._choices[name]:
                    self._choices[name].append(value)
                    knob.options = self._options(name)
                knob.value = self._label(value, name)
            else:
                knob.value = value

    def _knob_values(self) -> Dict[str, Any]:
        """RunConfig values from the knob widgets, unvalidated."""
        values: Dict[str, Any] = {}
        for name, knob in self.knobs.items():
            value = knob.value
            if name == "cache":
                value = (self._cache_path or True) if value else False
            elif name in DROPDOWN_KNOBS:
                value = self._from_label(name, value)
            elif name in TOGGLE_KNOBS:
                value = bool(value)
            values[name] = value
        return values

    # -- configuration ---------------------------------------------------------
    def config(self) -> RunConfig:
        """The RunConfig the next run will use: the baseline with the knobs applied.

        Returns:
            ``baseline.replace(...)`` with every knob's value, the non-knob fields
            set through ``run(...)``, and the label given to the pending run.

        Raises:
            ValueError: naming the field when a knob holds a bad value (e.g. batch_size 0).

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
        self._cache_path = self.baseline.cache if isinstance(self.baseline.cache, str) else None
        self._set_knobs({name: getattr(self.baseline, name) for name in KNOB_FIELDS})
        self._render_status()

    # -- running -----------------------------------------------------------------
    def run(self, **changes: Any) -> RunResult:
        """Set knobs from ``changes`` and run: exactly what clicking Run does.

        Knob fields move their widgets; other RunConfig fields (``learning_rate``,
        ``warmup_steps``, ...) apply to this and later runs until ``reset_knobs()``;
        ``label`` names this run only.

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
        unknown = sorted(set(changes) - set(field_names()))
        if unknown:
            raise ValueError(f"unknown RunConfig field(s): {', '.join(unknown)}; "
                             f"known fields: {', '.join(field_names())}")
        if self._running:
            raise RuntimeError("a run is already in progress; wait for it to finish")
        label = changes.pop("label", None)
        knob_changes = {k: v for k, v in changes.items() if k in self.knobs}
        other_changes = {k: v for k, v in changes.items() if k not in self.knobs}
        try:
            merged = {**self._overrides, **other_changes, **self._knob_values(), **knob_changes}
            if label is not None:
                merged["label"] = label
            self.baseline.replace(**merged)
        except ValueError as e:
            self._outcome_html = _red(f"not run: {e}")
            self._render_status()
            raise
        self._overrides.update(other_changes)
        self._next_label = label
        self._set_knobs(knob_changes)
        result = self._run_current(raise_bad_config=True)
        if result is None:  # only when another run started meanwhile
            raise RuntimeError("a run is already in progress; wait for it to finish")
        return result

    def _on_click(self, _button: Any = None) -> None:
        self._run_current(raise_bad_config=False)

    def _run_current(self, *, raise_bad_config: bool) -> Optional[RunResult]:
        """Run the knobs' configuration and record the result (the one path for click and run())."""
        if self._running:
            return None
        try:
            cfg = self.config()
        except ValueError:
            self._next_label = None
            self._render_status()            # the preview line shows the bad knob in red
            if raise_bad_config:
                raise
            return None
        self._next_label = None
        self._running = True
        try:
            self.run_button.disabled = True
            self.run_button.description = "Running\u2026"
            self.progress.bar_style = ""
            self.progress.max = max(cfg.warmup_steps + cfg.steps, 1)
            self.progress.value = 0
            self.progress_text.value = f"0 / {cfg.warmup_steps + cfg.steps} steps"
            self._last_progress_s = 0.0
            self.status.value = (f"Running #{len(self.results) + 1}: "
                                 f"<code>{html.escape(report.format_changes(cfg, self.baseline))}</code>\u2026")
            result = self._call_runner(cfg)
            self._record(result)
            return result
        finally:
            self._running = False
            self.run_button.disabled = False
            self.run_button.description = "Run"

    def _call_runner(self, cfg: RunConfig) -> RunResult:
        """The runner's result, or a failed/interrupted RunResult for what it raised."""
        try:
            runner = self._runner
            if runner is None:
                import tfwb

                runner = tfwb.run
            result = runner(cfg, progress=self._on_progress)
            if not isinstance(result, RunResult):
                raise TypeError(f"the runner returned {type(result).__name__}, not a RunResult")
            return result
        except KeyboardInterrupt:
            return RunResult(config=cfg, status="interrupted", error="interrupted by the user",
                             started_at=_now_iso(), run_id=uuid.uuid4().hex)
        except Exception as e:  # shown in the widget and recorded, not lost in a log console
            return RunResult(config=cfg, status="failed", error=f"{type(e).__name__}: {e}",
                             started_at=_now_iso(), run_id=uuid.uuid4().hex)

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
        self.progress_text.value = f"{int(steps_done)} / {int(steps_total)} steps"

    def _record(self, result: RunResult) -> None:
        """Keep the result, save it, redraw, and say what happened."""
        self.results.append(result)
        number = len(self.results)
        problems = []
        if self.history_path:
            try:
                append_result(self.history_path, result)
            except OSError as e:
                problems.append(f"not saved to {self.history_path}: {e}")
        try:
            self._redraw(result)
        except Exception as e:  # a chart bug must not lose the result
            problems.append(f"chart failed: {type(e).__name__}: {e}")
        self.progress.bar_style = "success" if result.ok else "danger"
        if result.ok:
            self.progress.value = self.progress.max
            row = report.history_rows(self.results, self._baseline_result(),
                                      baseline_config=self.baseline)[-1]
            text = f"<b>#{number}</b> {html.escape(result.summary())}"
            if row["verdict"] and not row["is_baseline"]:
                text += f" &mdash; vs the baseline: <b>{html.escape(row['verdict'])}</b>"
            elif row["is_baseline"]:
                text += " &mdash; this is the baseline"
        else:
            text = _red(f"#{number} {result.status}: {result.error or 'no measured steps'}")
        for note in result.notes:
            text += f"<br><i>{html.escape(note)}</i>"
        for problem in problems:
            text += "<br>" + _red(problem)
        self._outcome_html = text
        self._render_status()

    # -- rendering ---------------------------------------------------------------
    def _baseline_result(self) -> Optional[RunResult]:
        return report.pick_baseline(self.results, self.baseline)

    def _refresh_history(self) -> None:
        rows = report.history_rows(self.results, self._baseline_result(), baseline_config=self.baseline)
        self.history.value = report.html_table(rows)

    def _redraw(self, latest: RunResult) -> None:
        from . import charts

        self._refresh_history()
        self.run_chart.value = charts.run_chart_png(latest)
        self.run_chart.layout.display = None
        self.compare_chart.value = charts.comparison_png(self.results, self._baseline_result(),
                                                         baseline_config=self.baseline)
        self.compare_chart.layout.display = None

    def _preview_html(self) -> str:
        try:
            cfg = self.config()
        except ValueError as e:
            return _red(str(e))
        changes = report.format_changes(cfg, self.baseline)
        text = f"Next run: <code>{html.escape(changes)}</code>"
        hints = expectations(cfg, self.hardware)
        if hints:
            text += "<ul style='margin:2px 0'>" + "".join(
                f"<li>{html.escape(h)}</li>" for h in hints) + "</ul>"
        return text

    def _render_status(self) -> None:
        parts = [p for p in (self._outcome_html, self._preview_html()) if p]
        self.status.value = "<br>".join(parts)

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
