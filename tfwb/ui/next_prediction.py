"""The Workbench's optional prediction for its next run (CSS class ``tfwb-next-prediction``).

Predict, then measure, in the Workbench: before pressing Run, the reader may say whether the next
run will be faster, slower or no different from the run before it, by how much and how sure, with
the same controls as the chapters' boxes (``tfwb.ui.prediction_box.PredictionBox``). Once the
reader locks in (or skips), the box shows what the book expects of the knobs the next run changes.

When a run finishes, the analysis pushes its ``RunView``; ``on_view`` scores the locked prediction
against the run's verdict against the run before it (``HistoryRow.versus_previous``, the same
comparison the history table shows), names the prediction after the knobs that changed, appends the
``Score`` to the predictions file beside the run history (``tfwb.prediction.predictions_path``), and
offers a fresh box for the run after. ``column()`` gives the history table's "your prediction"
cells (``tfwb.render.html_table(rows, predictions=...)``).

A prediction stays waiting when the run has nothing to be compared with (the first run, a run that
failed): it is scored by the next run that has a verdict. A box nobody filled never waits or
blocks a run: the prediction is optional.

Example:
    >>> nxt = NextPrediction()
    >>> nxt.box.direction.value = "faster"
    >>> nxt.box.lock_button.click()
    >>> nxt.waiting.text()
    'faster, 1.5-3x (80 %)'
"""
from __future__ import annotations

import html
from dataclasses import replace
from typing import Any, Callable, Dict, Optional

import ipywidgets as W

from tfwb.history import History
from tfwb.prediction import Prediction, Score
from tfwb.ui.prediction_box import PredictionBox

__all__ = ["NextPrediction", "ABOUT"]

#: What the box is about, until the run names its change.
ABOUT = "the next run, against the run before it"


class NextPrediction:
    """An optional prediction of the Workbench's next run, scored when that run's view arrives.

    Args:
        path: the predictions file Scores are appended to (beside the run history); None: kept in
            memory only.
        expectation: a callable returning the book's expectation for the next run (text, or an
            object whose ``str()`` states it, or None), read when the reader locks in or skips.

    Raises:
        OSError: ``path`` cannot be created or appended to (checked now).

    Attributes:
        widget: the ``VBox`` shown in the Workbench (CSS class ``tfwb-next-prediction``): the
            last score's line (``tfwb-next-prediction-last``) and the current box.
        box: the current ``PredictionBox``.
        scores: run number (1-based, as in the history table) -> its ``Score``.
    """

    def __init__(self, path: Any = None, expectation: Optional[Callable[[], Any]] = None) -> None:
        self.store: Optional[History] = None
        if path is not None:
            store = History(path, record=Score)
            store.ensure_writable()
            self.store = store
        self.expectation = expectation
        self.scores: Dict[int, Score] = {}
        self.problem = ""
        self.last = W.HTML("")
        self.last.add_class("tfwb-next-prediction-last")
        self.widget = W.VBox([self.last])
        self.widget.add_class("tfwb-next-prediction")
        self._new_box()

    def _new_box(self) -> None:
        self.box = PredictionBox(ABOUT)
        self.box.widget.add_class("tfwb-next-prediction-box")
        self.box.lock_button.on_click(self._show_expectation)
        self.box.skip_button.on_click(self._show_expectation)
        self.widget.children = (self.last, self.box.widget)

    def _show_expectation(self, _button: Any = None) -> None:
        """Read the book's expectation for the knobs as they are now (after Lock in or Skip)."""
        try:
            self.box.expectation = self.expectation() if self.expectation is not None else None
        except Exception as e:       # an expectation that cannot be read must not break the box
            self.box.expectation = f"(the book's expectation could not be read: {e})"
        self.box.render()

    @property
    def waiting(self) -> Optional[Prediction]:
        """The locked-in prediction not yet scored, or None."""
        return self.box.prediction if self.box.result is None else None

    def on_view(self, view: Any) -> Optional[Score]:
        """Score the waiting prediction against the latest run's verdict vs the run before it.

        Args:
            view: the pushed ``RunView`` (its ``rows``; the last row is the run that finished).

        Returns:
            The ``Score`` (kept in ``scores`` under the run's number and appended to the file), or
            None: no prediction waited, or the run has no verdict against a previous run (the
            prediction keeps waiting). Never raises.
        """
        rows = getattr(view, "rows", None) or ()
        if not rows:
            return None
        row = rows[-1]
        if self.box.state == "skipped":
            self._new_box()
            return None
        prediction = self.waiting
        if prediction is None:
            return None
        versus = getattr(row, "versus_previous", None)
        comparison = getattr(versus, "comparison", None)
        if comparison is None:
            self.last.value = (f"<i>run {row.index} has no verdict against a previous run: your prediction "
                               "waits for the next run</i>")
            return None
        changes = ", ".join(f"{k}={v!r}" for k, v in (getattr(row, "previous_changes", None) or {}).items())
        self.box.prediction = replace(prediction, about=changes or f"run {row.index} (no knob changed)")
        score = self.box.score(comparison)
        if score is None:
            return None
        self.scores[row.index] = score
        self.problem = ""
        if self.store is not None:
            try:
                self.store.append(score)
            except (OSError, TypeError) as e:
                self.problem = f"the score was not kept: {e}"
        self.last.value = (f"<b>Run {row.index}</b> against run {versus.reference}: {html.escape(score.text())}"
                           + (f' <span style="color:#b22222">{html.escape(self.problem)}</span>'
                              if self.problem else ""))
        self._new_box()
        return score

    def column(self) -> Dict[int, str]:
        """Run number -> the history table's "your prediction" cell (``Score.text()``)."""
        return {number: score.text() for number, score in self.scores.items()}
