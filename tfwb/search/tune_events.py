"""Where a running tune is: the typed events ``tfwb.search.tune_loop.tune`` gives its ``progress``.

In order: one ``StartRun`` (the start runs, or a given run is reused), then for each trial a
``TrialStarted``, a ``RoundDone`` after each round of its interleaved comparison, and a
``TrialDone`` with its verdict; last a ``TuneDone`` with the ``Tuning`` (not sent when the
tune raises). Each is frozen data; ``text()`` is its line as the command and the Workbench
show it. A front end renders them by type: ``tfwb.cli.tune`` prints the lines of ``LOGGED``
events, ``tfwb.ui.panel`` adds them to its log and moves its bar on ``RoundDone``.

Pure: no TensorFlow, no UI library.

Example:
    >>> StartRun("mlp", reused=False).text()
    'start: running mlp'
    >>> RoundDone("prefetch=True", 3, 10).text()
    'prefetch=True against the best: round 3 / 10'
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Union

from tfwb.search.tune_changes import Change
from tfwb.search.tune_result import TuneTrial, Tuning

__all__ = ["StartRun", "TrialStarted", "RoundDone", "TrialDone", "TuneDone", "TuneEvent", "LOGGED",
           "ProgressFn"]


@dataclass(frozen=True)
class StartRun:
    """The start's run begins (``reused=False``), or a given run of the start is used (``reused=True``).

    Attributes:
        label: the start's label, else its workload.
        reused: True when the run was given (``tune(start_result=...)``), not run again.
    """

    label: str
    reused: bool = False

    def text(self) -> str:
        return f"start: the given run of {self.label}" if self.reused else f"start: running {self.label}"


@dataclass(frozen=True)
class TrialStarted:
    """A trial begins: ``change``, the top-ranked change, is compared with the best so far.

    Attributes:
        number: the trial's number (1-based).
        change: the ``tfwb.search.tune_changes.Change`` tried, with its bound.
    """

    number: int
    change: Change

    def text(self) -> str:
        c = self.change
        return f"trying {c.change}: {c.bound.text}" + (f"; {c.order_note}" if c.order_note else "")


@dataclass(frozen=True)
class RoundDone:
    """A round of a trial's interleaved comparison ended (a trial runs nothing else until it is decided).

    Attributes:
        change: the change compared (``"jit_compile=True"``).
        done, total: rounds done, and the rounds planned.
    """

    change: str
    done: int
    total: int

    def text(self) -> str:
        return f"{self.change} against the best: round {self.done} / {self.total}"


@dataclass(frozen=True)
class TrialDone:
    """A trial was decided: its ``tfwb.search.tune_result.TuneTrial`` (kept, reverted or failed).

    Attributes:
        number: the trial's number (1-based).
        trial: what it found.
    """

    number: int
    trial: TuneTrial

    def text(self) -> str:
        return f"trial {self.number}: {self.trial.line()}"


@dataclass(frozen=True)
class TuneDone:
    """The tune ended (done or interrupted) with this ``Tuning``."""

    tuning: Tuning

    def text(self) -> str:
        """The closing text: best against start, the costs, the headroom and why it stopped."""
        return self.tuning.closing_text()


TuneEvent = Union[StartRun, TrialStarted, RoundDone, TrialDone, TuneDone]
#: The events a log shows as they come, one line each (rounds move a bar; the end has its own text).
LOGGED = (StartRun, TrialStarted, TrialDone)
#: ``progress(event)``, called as the tune goes.
ProgressFn = Callable[[TuneEvent], None]
