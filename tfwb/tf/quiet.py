"""Holding back what TensorFlow's C++ code writes to stderr: one helper for every place that needs it.

TensorFlow's native code writes to file descriptor 2 directly (oneDNN lines before
absl's logger starts, a failed tf.data rewrite's dump of the pipeline graph, a
file cache's false "did not fully read" warning), so ``contextlib.redirect_stderr``
cannot catch it: the descriptor itself is pointed at a temporary file for the
duration. Imports no TensorFlow (``tfwb.tf`` uses it around ``import tensorflow``).
"""
from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from typing import Callable, Iterator, Optional


class Held:
    """What a ``native_stderr_captured`` block wrote to file descriptor 2 (``text``, set on exit)."""

    def __init__(self) -> None:
        self.text = ""

    def replay(self, drop: Optional[Callable[[str], bool]] = None) -> None:
        """Write the held text to ``sys.stderr``, without the lines for which ``drop(line)`` is true."""
        lines = self.text.splitlines(keepends=True)
        kept = "".join(line for line in lines if drop is None or not drop(line))
        if kept:
            sys.stderr.write(kept)
            sys.stderr.flush()


@contextlib.contextmanager
def native_stderr_captured() -> Iterator[Held]:
    """Hold back what is written to file descriptor 2 inside the block.

    On a normal exit the text is kept in the yielded ``Held`` (dropped unless the
    caller replays it). If the block raises, the text is written back to stderr
    before the exception propagates, so a failure still shows what TensorFlow said.

    Example:
        >>> with native_stderr_captured():      # doctest: +SKIP
        ...     import tensorflow
    """
    held = Held()
    sys.stderr.flush()
    with tempfile.TemporaryFile() as captured:
        saved = os.dup(2)
        failed = False
        try:
            os.dup2(captured.fileno(), 2)
            yield held
        except BaseException:
            failed = True
            raise
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            captured.seek(0)
            held.text = captured.read().decode(errors="replace")
            if failed:
                held.replay()
