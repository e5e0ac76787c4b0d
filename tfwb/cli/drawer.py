"""What the command line writes on the terminal: ``say`` for text, ``Drawer`` for a status line.

``say`` is the one function all console text goes through (stdout for results, stderr
for the rest). ``Drawer`` is the one terminal drawer: on a terminal it redraws one
status line in place (``\\r``); on anything else (a pipe, a log) it writes a plain
line only at moments worth a line, so a log holds no carriage returns. It draws a
run's step counter (``Drawer.steps``, for a ``tfwb.observers.Progress`` observer) and a
sweep's bar (``Drawer.sweep``, for ``tfwb.sweep(progress=...)``); the text of each is
a pure function (``step_text``, ``sweep_line``). A run holds back what is written to
file descriptor 2 while it trains (TensorFlow's C++ log lines become notes on its
result), so a drawer writes to ``stderr_for_drawing()``: a duplicate of that
descriptor taken before the run, which still reaches the terminal.

Example:
    >>> import io
    >>> d = Drawer(io.StringIO(), tty=True)
    >>> show = d.steps("mlp", warmup_steps=1)
    >>> show(1, 2); show(2, 2); d.close()
    >>> d.stream.getvalue()
    '\\rmlp: step 1/2 (warm-up)\\rmlp: step 2/2          \\n'
"""
from __future__ import annotations

import contextlib
import os
import sys
from typing import Callable, Iterator, Optional, TextIO

from tfwb.search.progress import SweepProgress

__all__ = ["say", "Drawer", "step_text", "sweep_line", "stderr_for_drawing"]


def say(text: str = "", *, err: bool = False) -> None:
    """All console text goes through here: stdout for results, stderr for the rest."""
    print(text, file=sys.stderr if err else sys.stdout, flush=err)


@contextlib.contextmanager
def stderr_for_drawing() -> Iterator[TextIO]:
    """Standard error as it is now, for a ``Drawer`` that must show while a run captures descriptor 2.

    Yields a line-buffered stream on a duplicate of ``sys.stderr``'s descriptor (closed
    on exit); where ``sys.stderr`` has no descriptor (a test's capture), ``sys.stderr``
    itself.
    """
    try:
        fd = sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):      # io.UnsupportedOperation is both
        yield sys.stderr
        return
    sys.stderr.flush()
    stream = open(os.dup(fd), "w", buffering=1, encoding=sys.stderr.encoding or "utf-8", errors="replace")
    try:
        yield stream
    finally:
        stream.close()


def step_text(name: str, done: int, total: int, warmup_steps: int) -> str:
    """A run's step counter, e.g. ``"mlp: step 3/25 (warm-up)"``.

    Example:
        >>> step_text("mlp", 3, 25, warmup_steps=5), step_text("mlp", 6, 25, warmup_steps=5)
        ('mlp: step 3/25 (warm-up)', 'mlp: step 6/25')
    """
    phase = " (warm-up)" if done <= warmup_steps and done < total else ""
    return f"{name}: step {done}/{total}{phase}"


def sweep_line(p: SweepProgress, width: int = 24) -> str:
    """A sweep's bar and where it is, e.g. ``"[######------------------]  25% run 5/27, ..."``.

    Example:
        >>> sweep_line(SweepProgress(1, 2, 0, 1, 10), width=4)
        '[##--]  50% run 2/2, rung 1/1 (10 steps)'
    """
    filled = int(round(p.fraction * width))
    return f"[{'#' * filled}{'-' * (width - filled)}] {p.fraction * 100:3.0f}% {p.text()}"


class Drawer:
    """One status line on ``stream``: redrawn in place on a terminal, plain lines elsewhere.

    Args:
        stream: where to write (stderr).
        tty (bool | None, default None): draw in place; ``None`` asks ``stream.isatty()``.

    Example:
        >>> import io
        >>> d = Drawer(io.StringIO(), tty=False)
        >>> d.draw("not worth a line"); d.draw("worth a line", log=True)
        >>> d.stream.getvalue()
        'worth a line\\n'
    """

    def __init__(self, stream: TextIO, tty: Optional[bool] = None) -> None:
        self.stream = stream
        self.tty = stream.isatty() if tty is None else tty
        self._width = 0                   # characters drawn on the open line (0: none open)

    def draw(self, text: str, *, log: bool = False) -> None:
        """Show ``text``: on a terminal in place of the line before; elsewhere as a line when ``log``."""
        if self.tty:
            self.stream.write("\r" + text.ljust(self._width))
            self._width = max(len(text), 1)
        elif log:
            self.stream.write(text + "\n")
        else:
            return
        self.stream.flush()

    def close(self) -> None:
        """End the line drawn in place (after the last step, or a failure mid-run); idempotent."""
        if self._width:
            self.stream.write("\n")
            self.stream.flush()
            self._width = 0

    def steps(self, name: str, warmup_steps: int) -> Callable[[int, int], None]:
        """A ``callback(steps_done, steps_total)`` for ``tfwb.observers.Progress``: a run's step counter.

        Off a terminal it writes a line at every tenth of the run.

        Args:
            name: shown before the counter (the label or workload).
            warmup_steps: the first steps, labelled as warm-up.
        """
        tenth = [-1]

        def show(done: int, total: int) -> None:
            now = (10 * done) // max(total, 1)
            self.draw(step_text(name, done, total, warmup_steps), log=now != tenth[0])
            tenth[0] = now
        return show

    def sweep(self, width: int = 24) -> Callable[[SweepProgress], None]:
        """A ``progress`` callback for ``tfwb.sweep``: a bar, the share done and where the sweep is.

        Off a terminal it writes a line per finished run and one at the end.

        Args:
            width: characters of the bar.
        """
        runs = [-1]

        def show(p: SweepProgress) -> None:
            log = (p.runs_done != runs[0] and not p.label) or p.finished
            if log:
                runs[0] = p.runs_done
            self.draw(sweep_line(p, width), log=log)
            if p.finished:
                self.close()
        return show
