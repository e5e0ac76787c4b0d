"""Where a running sweep is: ``SweepProgress``, what ``tfwb.sweep(..., progress=fn)`` reports.

The sweep calls ``progress(SweepProgress)`` before and after every run and after every
step of it; a front end draws it (``tfwb.ui.sweep_progress.SweepProgressBar`` in a
notebook, ``tfwb.cli.drawer.Drawer`` on a terminal). Pure data and its text.

Example:
    >>> p = SweepProgress(runs_done=4, runs_planned=27, rung=0, rungs=3, steps=10, label="prefetch",
    ...                   step=3, step_total=15)
    >>> p.text(), round(p.fraction, 3)
    ('run 5/27, rung 1/3 (10 steps): prefetch: step 3/15', 0.156)
"""
from __future__ import annotations

from dataclasses import dataclass

__all__ = ["SweepProgress"]


@dataclass(frozen=True)
class SweepProgress:
    """Where a sweep is, for a progress bar.

    Attributes:
        runs_done: runs finished (reused ones included).
        runs_planned: runs the search expects in all (it shrinks as candidates are pruned).
        rung / rungs: the current rung (0-based; -1 while the naive reference runs, first) and
            how many there are.
        steps: measured steps of the current rung.
        label: the configuration running now (``""`` between runs).
        step / step_total: steps done in the current run (warm-up included) and its total.
        finished: True in the last report.
        stopped: in the last report, why the sweep ended early (``"interrupted"``, or the
            naive run failed); ``""`` when it ran to the end.
    """

    runs_done: int
    runs_planned: int
    rung: int
    rungs: int
    steps: int
    label: str = ""
    step: int = 0
    step_total: int = 0
    finished: bool = False
    stopped: str = ""

    @property
    def fraction(self) -> float:
        """Share of the planned runs done, counting the current run's steps."""
        part = self.step / self.step_total if self.step_total else 0.0
        return min(1.0, (self.runs_done + part) / max(self.runs_planned, 1))

    def text(self) -> str:
        """e.g. ``"run 5/27, rung 1/3 (30 steps): prefetch, cache: step 12/35"``.

        Example:
            >>> SweepProgress(4, 27, 0, 3, 10, "prefetch", 3, 15).text()
            'run 5/27, rung 1/3 (10 steps): prefetch: step 3/15'
        """
        if self.finished:
            return f"{self.stopped or 'done'}: {self.runs_done} runs"
        where = (f"the naive reference ({self.steps} steps)" if self.rung < 0 else
                 f"rung {self.rung + 1}/{self.rungs} ({self.steps} steps)")
        head = f"run {min(self.runs_done + 1, self.runs_planned)}/{self.runs_planned}, {where}"
        if self.label:
            head += f": {self.label}"
            if self.step_total:
                head += f": step {self.step}/{self.step_total}"
        return head
