"""The runs of one search, recorded: ``RunRecorder``, shared by the sweep and the tune.

A search (``tfwb.search.halving.sweep``, ``tfwb.search.tune_loop.tune``) makes its runs
through one ``RunRecorder``: it holds the search's ``tfwb.observers.StopFlag`` (a Stop
button or another thread may set it), arms the ``tfwb.interrupts.InterruptBridge`` that
turns Ctrl-C or a kernel interrupt into a stop of the run in progress (its reason is
``tfwb.interrupts.INTERRUPTED``, the one "interrupted by the user"), calls the runner, and
appends every run it records to the ``tfwb.history.History`` as soon as it ends. A stop
raises ``Stopped``, which the search catches to end with what finished.

Two policies, one per search:

- ``resumable=True`` (the sweep, which can resume from its history): only runs of full
  length are recorded; a run cut short (interrupted, or ended early for any reason) is not
  appended and stops the search, so a resume runs it again.
- ``resumable=False`` (the tune): every run is recorded as it ended; only the user's stop
  (an interrupted run, or the flag set) stops the search.

Pure: no TensorFlow, no UI library.

Example:
    >>> from fakes import FakeRunner                                      # doctest: +SKIP
    >>> rec = RunRecorder(FakeRunner(), None, StopFlag(), resumable=True) # doctest: +SKIP
    >>> with rec.bridge():                                                # doctest: +SKIP
    ...     res = rec.run(RunConfig(), [rec.flag])
"""
from __future__ import annotations

from typing import Callable, Optional, Sequence

from tfwb.config import RunConfig
from tfwb.history import History
from tfwb.interrupts import INTERRUPTED, InterruptBridge
from tfwb.observers import Observer, StopFlag
from tfwb.records import RunResult

__all__ = ["RunRecorder", "Runner", "Stopped", "INTERRUPTED"]

#: ``runner(cfg, observers) -> RunResult``: ``tfwb.run``, or a fake in tests.
Runner = Callable[[RunConfig, Sequence[Observer]], RunResult]


class Stopped(Exception):
    """The user stopped the search: it ends after keeping what finished."""


class RunRecorder:
    """Calls the runner, records each run in the history, and turns a stop into ``Stopped``.

    Args:
        runner: ``runner(cfg, observers) -> RunResult``.
        history: where every recorded run is appended (None: nowhere).
        flag: the search's stop flag; give it to the runner among the observers.
        resumable: the sweep's policy (True) or the tune's (False); see the module docstring.

    Attributes:
        made: the runs recorded (the runner calls whose result was kept).
    """

    def __init__(self, runner: Runner, history: Optional[History], flag: StopFlag, *, resumable: bool) -> None:
        self.runner, self.history, self.flag, self.resumable = runner, history, flag, resumable
        self.made = 0

    def bridge(self) -> InterruptBridge:
        """The interrupt bridge to hold around the search: Ctrl-C sets the flag, as the user's interrupt."""
        return InterruptBridge(lambda: self.flag.set(INTERRUPTED, interrupted=True), inline=True)

    def check(self) -> None:
        """Raise ``Stopped`` once the flag is set (between runs, between comparison rounds)."""
        if self.flag.is_set:
            raise Stopped()

    def record(self, cfg: RunConfig, observers: Sequence[Observer], *, stop: bool = True) -> RunResult:
        """Run ``cfg`` now with ``observers`` and record it by the policy.

        Args:
            stop: raise ``Stopped`` for a run the policy calls stopped (False: return it; the caller decides).
        """
        res = self.runner(cfg, observers)
        stopped = res.status == "interrupted" or (res.stop_reason is not None
                                                  and (self.resumable or self.flag.is_set))
        if not (stopped and self.resumable):
            self.made += 1
            if self.history is not None:
                self.history.append(res)
        if stopped and stop:
            raise Stopped()
        return res

    def run(self, cfg: RunConfig, observers: Sequence[Observer]) -> RunResult:
        """``check`` first, then ``record``: the next run of a search, unless it was stopped."""
        self.check()
        return self.record(cfg, observers)
