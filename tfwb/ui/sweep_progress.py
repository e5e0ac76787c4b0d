"""A sweep's progress bar in a notebook: pass it as ``tfwb.sweep(..., progress=bar)``.

A thin widget over the pure ``tfwb.search.progress.SweepProgress``: a bar of the planned runs
(it fills as runs finish and moves within a run step by step) and one line of text
(``SweepProgress.text()``). It updates in place in JupyterLab, Notebook 7, VS Code and
Colab, and can be built and driven without being shown (tests set it and read it).
Works with ipywidgets 7.7 and 8.

Example:
    >>> bar = SweepProgressBar()          # doctest: +SKIP
    >>> display(bar)                      # doctest: +SKIP
    >>> result = tfwb.sweep(cfg, space, progress=bar)   # doctest: +SKIP
"""
from __future__ import annotations

from typing import Any

import ipywidgets as W
from IPython.display import display

from tfwb.search.progress import SweepProgress

#: Bar resolution: the bar counts thousandths of the planned work.
STEPS = 1000


class SweepProgressBar:
    """A progress bar and a status line for a sweep; call it with each ``SweepProgress``.

    Attributes:
        bar (ipywidgets.IntProgress): 0..``STEPS``, the share of the planned runs done.
        text (ipywidgets.Label): where the sweep is (run, rung, candidate, step).
        widget (ipywidgets.VBox): both, to display.
    """

    def __init__(self, description: str = "sweep") -> None:
        self.bar = W.IntProgress(value=0, min=0, max=STEPS, description=description,
                                 layout=W.Layout(width="60%"))
        self.text = W.Label(value="waiting to start")
        self.widget = W.VBox([self.bar, self.text])
        self.last: Any = None

    def __call__(self, progress: SweepProgress) -> None:
        self.last = progress
        self.bar.value = int(round(progress.fraction * STEPS))
        self.text.value = progress.text()
        if progress.finished and progress.stopped:
            self.bar.bar_style = "danger"          # ended early: red, and the text says why
        elif progress.finished:
            self.bar.value = STEPS
            self.bar.bar_style = "success"

    def _ipython_display_(self) -> None:
        display(self.widget)
