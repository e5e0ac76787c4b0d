"""TensorFlow profiler sessions: one at a time, into a folder, for a block or a window of steps.

``ProfilerSession`` wraps ``tf.profiler.experimental.start/stop`` for a ``with`` block
and finds the ``.xplane.pb`` the capture wrote. ``ProfileWindow`` is a run observer
that captures ``steps`` steps after warm-up, each marked with a step ``Trace`` so the
profiler's step-time breakdown works (tracing and compilation stay out of the capture).
Chapter 06 builds the in-notebook summary on these captures. Never take throughput
from a profiled run: profiling adds overhead.
"""
from __future__ import annotations

import glob
import os
import tempfile
from typing import Any, List, Optional

import tensorflow as tf

from ..observers import Observer, RunState

_active = {"session": None}


def xplane_files(logdir: str) -> List[str]:
    """The ``.xplane.pb`` captures under ``logdir``, oldest first."""
    return sorted(glob.glob(os.path.join(logdir, "**", "*.xplane.pb"), recursive=True),
                  key=os.path.getmtime)


class ProfilerSession:
    """``with ProfilerSession() as s:`` profiles the block; ``s.xplane`` is the capture after.

    Args:
        logdir: where the capture goes; ``None`` uses a temporary folder that
            ``cleanup()`` removes (``keep=False``) once the caller has read it.

    Raises:
        RuntimeError: when another profiler session is running (TF allows one), or the
            profiler cannot start; the message says what to do.
    """

    def __init__(self, logdir: Optional[str] = None) -> None:
        self._tmp = None if logdir else tempfile.TemporaryDirectory(prefix="tfwb-trace-")
        self.logdir = logdir or self._tmp.name
        self.xplane: Optional[str] = None

    def start(self) -> "ProfilerSession":
        if _active["session"] is not None:
            raise RuntimeError("a profiler capture is already running (TensorFlow allows one at a time); "
                               "wait for it to end")
        try:
            os.makedirs(self.logdir, exist_ok=True)
            tf.profiler.experimental.start(self.logdir)
        except Exception as e:  # noqa: BLE001 - e.g. a session started outside tfwb
            raise RuntimeError(f"could not start the TensorFlow profiler ({type(e).__name__}: {e}); "
                               "stop any other profiling session and try again") from None
        _active["session"] = self
        return self

    def stop(self) -> Optional[str]:
        """Stop the capture; returns the newest ``.xplane.pb`` (or ``None``). Idempotent."""
        if _active["session"] is not self:
            return self.xplane
        try:
            tf.profiler.experimental.stop()
        finally:
            _active["session"] = None
        files = xplane_files(self.logdir)
        self.xplane = files[-1] if files else None
        return self.xplane

    def cleanup(self) -> None:
        """Remove the temporary folder (nothing, for a folder the caller gave)."""
        if self._tmp is not None:
            self._tmp.cleanup()

    def __enter__(self) -> "ProfilerSession":
        return self.start()

    def __exit__(self, *exc: Any) -> bool:
        self.stop()
        return False


class ProfileWindow(Observer):
    """Capture ``steps`` calls of the step function, starting ``skip`` calls after warm-up.

    Each captured call runs inside ``tf.profiler.experimental.Trace("train", step_num=i)``
    so the profiler sees step boundaries. ``xplane`` is the capture's path after the run.

    Args:
        logdir: folder for the capture (kept).
        steps: calls to capture (>= 1; the TF profiler guide suggests at most ~10).
        skip: calls after warm-up before the capture starts (>= 0).

    Raises:
        ValueError: for ``steps`` < 1 or ``skip`` < 0.
    """

    def __init__(self, logdir: str, steps: int = 5, skip: int = 0) -> None:
        if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
            raise ValueError(f"steps={steps!r} is not allowed; steps must be an integer >= 1")
        if isinstance(skip, bool) or not isinstance(skip, int) or skip < 0:
            raise ValueError(f"skip={skip!r} is not allowed; skip must be an integer >= 0")
        self.session = ProfilerSession(logdir)
        self.steps, self.skip = steps, skip
        self.first: Optional[int] = None
        self._trace = None
        self.xplane: Optional[str] = None

    def on_warmup_end(self, run: RunState) -> None:
        self.first = len(run.log.times_s) + self.skip

    def on_step_begin(self, run: RunState, step: int) -> None:
        if self.first is None or not self.first <= step < self.first + self.steps:
            return
        if step == self.first:
            self.session.start()
        self._trace = tf.profiler.experimental.Trace("train", step_num=step, _r=1)
        self._trace.__enter__()

    def on_step_end(self, run: RunState, step: int) -> None:
        if self._trace is not None:
            self._trace.__exit__(None, None, None)
            self._trace = None
        if self.first is not None and step == self.first + self.steps - 1:
            self.xplane = self.session.stop()

    def on_run_end(self, run: RunState) -> None:
        if self._trace is not None:
            self._trace.__exit__(None, None, None)
            self._trace = None
        self.xplane = self.session.stop()
        if self.xplane:
            run.extras["profile"] = self.xplane
            run.notes.append(f"profiled calls {self.first}..{self.first + self.steps - 1}: {self.xplane} "
                             "(this run's times include the profiler's overhead)")
