"""The prediction box a reader fills in BEFORE an experiment (``tfwb.ask``).

Predict, then measure: the box holds the direction (faster / slower / no difference), a range of
the factor on a log scale, how sure the reader is (50 / 80 / 95 %), a one-line reason, and "Lock
in" and "Skip". Once the reader locks in or skips, the controls turn read-only and the book's own
expectation for the experiment appears; when the measurement arrives, ``box.score(verdict)``
shows the score line (``tfwb.prediction.Score.text``) and appends the Score to the predictions
file, if the box was given one.

Nothing blocks. The box never waits for input: a box nobody filled in, scored, says "no prediction
made", shows the book's expectation and the measurement (under nbval, in CI, in a terminal).
``score`` never raises; a predictions file that cannot be written is reported at construction.

The pure part (the slider's log scale, the readout, the lines the box shows) is plain functions
at the top; ``PredictionBox`` wires them to ipywidgets (APIs present in 7.7 and 8 only). Scoring
and storage are ``tfwb.prediction``'s; the summary of many scores is ``tfwb.scorecard``'s, its
chart ``tfwb.ui.charts.calibration``'s.

Example:
    >>> box = ask("prefetch=True", "faster: the input pipeline overlaps the step")
    >>> box.direction.value = "faster"
    >>> box.lock_button.click()
    >>> box.state, box.prediction.text()
    ('locked', 'faster, 1.5-3x (80 %)')
"""
from __future__ import annotations

import html
import math
from typing import Any, Optional, Tuple

import ipywidgets as W

from tfwb import stats
from tfwb.history import History
from tfwb.prediction import (CONFIDENCES, DIRECTIONS, FASTER, NO_DIFFERENCE, SLOWER, Prediction, Score,
                             predict)

__all__ = ["PredictionBox", "ask", "factor_text", "factor_range", "slider_position",
           "slider_scale", "range_text", "verdict_text"]

#: log10 of the factor at the range slider's two ends, per direction: 1-100x for faster or slower,
#: 0.63-1.58x around 1 for no difference. The slider itself always runs 0-1 in 200 steps: a change
#: of direction moves its value, never its bounds (the browser would clip and echo the old value).
_SCALE = {FASTER: (0.0, 2.0), SLOWER: (0.0, 2.0), NO_DIFFERENCE: (-0.2, 0.2)}
_STEPS = 200
#: The range a fresh slider offers (factors, not logs).
_DEFAULT = {FASTER: (1.5, 3.0), SLOWER: (1.5, 3.0), NO_DIFFERENCE: (0.95, 1.05)}
_CONFIDENCE_LABELS = tuple((f"{c * 100:.0f} %", c) for c in CONFIDENCES)
#: The box's states: ``open`` (editable), ``locked``, ``skipped``; ``scored`` once the measurement came.
OPEN, LOCKED, SKIPPED, SCORED = "open", "locked", "skipped", "scored"
NO_PREDICTION = "no prediction made"
#: The heads of the status lines, bold in the widget.
_HEADS = ("Your prediction", "The book", "Measured", "Score")


# -- the pure part ----------------------------------------------------------------------------
def slider_scale(direction: Optional[str]) -> Tuple[float, float]:
    """log10 of the factor at the slider's ends for a direction (None: as "faster").

    Example:
        >>> slider_scale("faster"), slider_scale("no difference")
        ((0.0, 2.0), (-0.2, 0.2))
    """
    return _SCALE.get(direction or FASTER, _SCALE[FASTER])


def factor_text(factor: float) -> float:
    """A factor rounded as the readout shows it: 3 significant digits in 1-1.2x, else 2.

    Example:
        >>> factor_text(1.0471), factor_text(0.9550), factor_text(1.5136), factor_text(3.0200), factor_text(95.5)
        (1.05, 0.95, 1.5, 3.0, 96.0)
    """
    return float(f"{factor:.3g}") if 1.0 <= factor < 1.2 else float(f"{factor:.2g}")


def factor_range(direction: Optional[str], position: Tuple[float, float]) -> Tuple[float, float]:
    """The slider's two positions (0-1) as factors in a direction's scale, rounded as the readout
    shows them (``factor_text``).

    Example:
        >>> factor_range("faster", (0.09, 0.24)), factor_range("no difference", (0.445, 0.555))
        ((1.5, 3.0), (0.95, 1.05))
    """
    low, high = slider_scale(direction)
    return tuple(factor_text(10 ** (low + (high - low) * u)) for u in position)  # type: ignore[return-value]


def slider_position(direction: Optional[str], between: Tuple[float, float]) -> Tuple[float, float]:
    """A factor range as the slider's positions on its grid (``factor_range`` reads them back).

    On the grid, the browser's slider does not move the value when it first shows it; a factor
    outside the direction's scale goes to the nearest end.

    Example:
        >>> slider_position("faster", (1.5, 3.0)), factor_range("faster", slider_position("faster", (1.5, 3.0)))
        ((0.09, 0.24), (1.5, 3.0))
    """
    low, high = slider_scale(direction)
    out = []
    for factor in between:
        u = (math.log10(factor) - low) / (high - low)
        out.append(min(max(round(u * _STEPS) / _STEPS, 0.0), 1.0))
    return out[0], out[1]


def range_text(direction: Optional[str], between: Tuple[float, float]) -> str:
    """The slider's readout: ``"1.5x to 3x faster"``, ``"0.95x to 1.05x the speed"`` (no difference).

    Example:
        >>> range_text("slower", (2.0, 10.0)), range_text("no difference", (0.95, 1.05))
        ('2x to 10x slower', '0.95x to 1.05x the speed')
    """
    low, high = between
    if direction == NO_DIFFERENCE:
        return f"{low:g}x to {high:g}x the speed"
    return f"{low:g}x to {high:g}x {direction or FASTER}"


def verdict_text(verdict: Any) -> str:
    """What was measured, in words: ``"2.00x faster (interleaved)"``; ``"no measurement"`` for None."""
    if verdict is None or not hasattr(verdict, "verdict"):
        return "no measurement"
    try:
        head = stats.ratio_text(float(verdict.speedup))
    except (TypeError, ValueError, AttributeError):
        head = "no ratio"
    kind = "interleaved" if getattr(verdict, "rounds", None) is not None else "two runs"
    if verdict.verdict in (stats.FASTER, stats.SLOWER):
        return f"{head} ({kind})"
    return f"{head}: {verdict.verdict} ({kind})"


def expectation_text(expectation: Any) -> str:
    """The book's expectation as one line (``str()`` of it); a fixed line when there is none."""
    if expectation is None:
        return "The book states no expectation for this experiment."
    text = str(expectation).strip()
    return text if text else "The book states no expectation for this experiment."


# -- the widget -------------------------------------------------------------------------------
def _head_html(label: str) -> str:
    return f'<div style="text-align:right;padding-right:8px">{html.escape(label)}</div>'


def _row(label: Any, *widgets: W.Widget) -> W.HBox:
    """One line of the box: a right-aligned label (text, or an ``HTML`` widget holding
    ``_head_html``) in a fixed column, then the widgets: one column for every row, in both
    ipywidgets 7 and 8, where each places a widget's own description apart."""
    head = label if isinstance(label, W.Widget) else W.HTML(_head_html(label))
    head.layout = W.Layout(width="80px", min_width="80px")
    return W.HBox([head, *widgets], layout=W.Layout(align_items="center"))


class PredictionBox:
    """A reader's prediction of one experiment, as a widget (``tfwb.ask`` builds it).

    Args:
        about: the change or pair it is about (``"prefetch=True"``); the title and the stored
            prediction name it.
        expectation: the book's own expectation, shown once the reader locks in or skips: text,
            or an object whose ``str()`` states it (a ``tfwb.expect`` expectation); None: none.
        path: a predictions file (``tfwb.prediction.predictions_path``) the Score is appended to;
            None: kept in memory only.

    Raises:
        OSError: ``path`` cannot be created or appended to (checked now, not after the run).

    Attributes:
        widget: the ``ipywidgets.VBox`` shown (CSS class ``tfwb-prediction``); ``direction``,
            ``range_slider``, ``with_range``, ``confidence``, ``why``, ``lock_button``,
            ``skip_button``: its controls, and ``status`` its message (CSS classes
            ``tfwb-prediction-<first word>``: ``-direction``, ``-range``, ``-with``, ``-confidence``,
            ``-why``, ``-lock``, ``-skip``, ``-status``, for a browser test).
        state: ``"open"``, ``"locked"``, ``"skipped"`` or ``"scored"``.
        prediction: the locked-in ``Prediction``, or None.
        result: the ``Score`` once scored (None: not scored, or no prediction made).
    """

    def __init__(self, about: Any = None, expectation: Any = None, *, path: Any = None) -> None:
        self.about = None if about is None else str(about)
        self.expectation = expectation
        self.store: Optional[History] = None
        if path is not None:
            store = History(path, record=Score)
            try:
                store.ensure_writable()
            except OSError as e:
                raise OSError(f"tfwb.ask(path={store.path!r}): the predictions file cannot be written: "
                              f"{e.strerror or e}") from None
            self.store = store
        self.state = OPEN
        self.prediction: Optional[Prediction] = None
        self.result: Optional[Score] = None
        self.measured: Optional[str] = None
        self.problem = ""
        self._build()
        self.render()

    # -- building ------------------------------------------------------------------------------
    def _build(self) -> None:
        self.direction = W.ToggleButtons(options=list(DIRECTIONS), value=None)
        self.range_slider = W.FloatRangeSlider(value=slider_position(FASTER, _DEFAULT[FASTER]), min=0.0, max=1.0,
                                               step=1 / _STEPS, readout=False, continuous_update=True,
                                               layout=W.Layout(width="360px"))
        self.range_head = W.HTML(_head_html("by"))
        self.range_label = W.HTML(layout=W.Layout(width="180px"))
        self.with_range = W.Checkbox(value=True, description="say by how much", indent=False,
                                     layout=W.Layout(width="150px"))
        self.confidence = W.ToggleButtons(options=list(_CONFIDENCE_LABELS), value=0.8)
        self.why = W.Text(value="", placeholder="why, in one sentence",
                          layout=W.Layout(width="560px"))
        self.lock_button = W.Button(description="Lock in", button_style="primary", icon="lock")
        self.skip_button = W.Button(description="Skip")
        self.title = W.HTML()
        self.status = W.HTML()
        self.direction.observe(self._on_direction, names="value")
        self.range_slider.observe(self._on_range, names="value")
        self.with_range.observe(self._on_range, names="value")
        self.lock_button.on_click(self._on_lock)
        self.skip_button.on_click(self._on_skip)
        self.widget = W.VBox([
            self.title,
            _row("It will be", self.direction),
            _row(self.range_head, self.range_slider, self.range_label, self.with_range),
            _row("how sure", self.confidence),
            _row("because", self.why),
            _row("", self.lock_button, self.skip_button),
            self.status,
        ])
        self.widget.add_class("tfwb-prediction")
        for name in ("direction", "range_slider", "with_range", "confidence", "why", "lock_button", "skip_button",
                     "status"):
            getattr(self, name).add_class(f"tfwb-prediction-{name.split('_')[0]}")
        self._on_range()

    @property
    def controls(self) -> Tuple[W.Widget, ...]:
        """Every control the reader can change (read-only once locked in, skipped or scored)."""
        return (self.direction, self.range_slider, self.with_range, self.confidence, self.why,
                self.lock_button, self.skip_button)

    # -- what the controls say -----------------------------------------------------------------
    def between(self) -> Optional[Tuple[float, float]]:
        """The range the slider shows, as factors; None when "say by how much" is off."""
        return factor_range(self.direction.value, self.range_slider.value) if self.with_range.value else None

    def _on_direction(self, change: Any = None) -> None:
        direction = self.direction.value or FASTER
        self.range_head.value = _head_html("within" if direction == NO_DIFFERENCE else "by")
        old = change.get("old") if isinstance(change, dict) else None
        if slider_scale(old) != slider_scale(direction):     # faster <-> slower keeps the reader's range
            self.range_slider.value = slider_position(direction, _DEFAULT[direction])
        self._on_range()

    def _on_range(self, change: Any = None) -> None:
        on = bool(self.with_range.value) and self.state == OPEN
        self.range_slider.disabled = self.confidence.disabled = not on
        if self.with_range.value:
            self.range_label.value = html.escape(range_text(self.direction.value, self.between()))
        else:
            self.range_label.value = "<i>no range</i>"

    # -- the reader's buttons ------------------------------------------------------------------
    def _on_lock(self, _button: Any = None) -> None:
        if self.state != OPEN:
            return
        if self.direction.value is None:
            self.problem = "Choose faster, slower or no difference first (or Skip)."
            self.render()
            return
        try:
            self.prediction = predict(self.direction.value, between=self.between(),
                                      confidence=self.confidence.value if self.with_range.value else 0.8,
                                      about=self.about, why=self.why.value.strip())
        except ValueError as e:                    # the slider only offers allowed values; kept for safety
            self.problem = str(e)
            self.render()
            return
        self.state, self.problem = LOCKED, ""
        self._freeze()

    def _on_skip(self, _button: Any = None) -> None:
        if self.state == OPEN:
            self.state, self.problem = SKIPPED, ""
            self._freeze()

    def _freeze(self) -> None:
        for control in self.controls:
            control.disabled = True
        if self.state == LOCKED:
            self.lock_button.description = "Locked in"
        elif self.state == SKIPPED:
            self.skip_button.description = "Skipped"
        self.render()

    # -- the measurement -----------------------------------------------------------------------
    def score(self, verdict: Any) -> Optional[Score]:
        """Show how the prediction fared against the measured comparison; never raises.

        Args:
            verdict: a ``tfwb.stats.Comparison`` or ``RoundsComparison`` (or a ``tfwb.expect``
                Check: its ``comparison`` is used).

        Returns:
            The ``Score`` (appended to the predictions file, if any), or None: no prediction was
            made, or nothing was measured. The box says which. A pending score ("cannot tell")
            can be followed by another call with the interleaved comparison: both are kept, and
            ``tfwb.calibration`` counts the latest.
        """
        if verdict is not None and not hasattr(verdict, "verdict"):
            verdict = getattr(verdict, "comparison", verdict)
        measured = hasattr(verdict, "verdict") and hasattr(verdict, "speedup")
        self.measured = verdict_text(verdict if measured else None)
        if self.state == OPEN:
            for control in self.controls:
                control.disabled = True
        self.state, self.problem = SCORED, ""
        if self.prediction is not None and measured:
            try:
                self.result = self.prediction.score(verdict)
            except (TypeError, ValueError, AttributeError) as e:
                self.problem = f"could not score it: {e}"
                self.result = None
            if self.result is not None and self.store is not None:
                try:
                    self.store.append(self.result)
                except (OSError, TypeError) as e:
                    self.problem = f"the score was not kept: {e}"
        self.render()
        return self.result

    # -- what the box says ---------------------------------------------------------------------
    def lines(self) -> Tuple[str, ...]:
        """The box's message, line by line (plain text; the widget shows the same, as HTML)."""
        out = []
        if self.state == OPEN:
            out.append("Predict, then Lock in (or Skip); the book's expectation appears after.")
        elif self.prediction is not None:
            said = self.prediction.text() + (f" because {self.prediction.why}" if self.prediction.why else "")
            out.append(f"Your prediction: {said}")
        else:
            out.append(f"{NO_PREDICTION[0].upper()}{NO_PREDICTION[1:]}.")
        if self.state != OPEN:
            out.append(f"The book: {expectation_text(self.expectation)}")
        if self.state == SCORED:
            out.append(f"Measured: {self.measured}")
            if self.result is not None:
                out.append(f"Score: {self.result.text()}")
        if self.problem:
            out.append(self.problem)
        return tuple(out)

    def text(self) -> str:
        """The box in plain text: its title and ``lines()`` (what a terminal or nbval sees)."""
        return "\n".join((self._title_text(),) + self.lines())

    def _title_text(self) -> str:
        return "Predict before it runs" + (f": {self.about}" if self.about else "")

    def render(self) -> None:
        """Bring the title and the status lines up to date."""
        self.title.value = f"<b>{html.escape(self._title_text())}</b>"
        rows = []
        for line in self.lines():
            style = ""
            if line == self.problem:
                style = ' style="color:#b22222"'
            elif line.startswith("Score:") and self.result is not None and self.result.decided:
                style = f' style="color:{"#2e7d32" if self.result.direction_right else "#b22222"}"'
            head, sep, rest = line.partition(": ")
            body = (f"<b>{html.escape(head)}:</b> {html.escape(rest)}" if sep and head in _HEADS
                    else html.escape(line))
            rows.append(f"<div{style}>{body}</div>")
        self.status.value = f'<div style="line-height:1.45;margin-top:4px">{"".join(rows)}</div>'

    # -- display -------------------------------------------------------------------------------
    def _repr_mimebundle_(self, **kwargs: Any) -> dict:
        return {"text/plain": self.text(),
                "application/vnd.jupyter.widget-view+json": {
                    "version_major": 2, "version_minor": 0, "model_id": self.widget.model_id}}

    def __repr__(self) -> str:
        return f"<tfwb prediction box: {self.state}, about={self.about!r}>"


def ask(about: Any = None, expectation: Any = None, *, path: Any = None) -> PredictionBox:
    """A prediction box for one experiment (``tfwb.ask``): display it before the experiment runs.

    Args:
        about: the change or pair it is about, e.g. ``"prefetch=True"``.
        expectation: the book's own expectation (text, or an object whose ``str()`` states it),
            shown only once the reader has locked in or skipped.
        path: a predictions file to append the Score to (``tfwb.prediction.predictions_path``).

    Returns:
        The ``PredictionBox``; ``box.score(verdict)`` after the measurement.

    Raises:
        OSError: ``path`` cannot be written.
    """
    return PredictionBox(about, expectation, path=path)
