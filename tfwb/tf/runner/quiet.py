"""Holding back what TensorFlow's C++ code writes to stderr: one helper for every place that needs it.

TensorFlow's native code writes to file descriptor 2 directly (oneDNN lines before
absl's logger starts, a failed tf.data rewrite's dump of the pipeline graph, a
file cache's false "did not fully read" warning), so ``contextlib.redirect_stderr``
cannot catch it: the descriptor itself is pointed at a temporary file for the
duration. Imports no TensorFlow (``tfwb.tf`` uses it around ``import tensorflow``).
"""
from __future__ import annotations

import contextlib
import ctypes
import os
import re
import sys
import tempfile
from typing import Callable, Iterator, Optional

#: One line of TensorFlow's C++ log (``I0000 00:00:... file.cc:12] message``).
TF_LOG_LINE = re.compile(r"^[IWEF]\d{4} [\d:. ]+\d+ [\w./-]+:\d+\] (?P<message>.*)$")
#: The line abseil prints once before TF's logger starts; it ignores TF_CPP_MIN_LOG_LEVEL.
ABSL_PREAMBLE = "WARNING: All log messages before absl::InitializeLog()"


def is_tf_log(line: str) -> bool:
    """True for a line of TF's C++ log (``I0000 00:00:... file.cc:12] message``) or abseil's preamble.

    Example:
        >>> is_tf_log("I0000 00:00:1795752519.639640   30085 device_compiler.h:196] Compiled cluster using XLA!")
        True
        >>> is_tf_log("a line of your own")
        False
    """
    return bool(TF_LOG_LINE.match(line.strip())) or line.startswith(ABSL_PREAMBLE)


class Held:
    """What a ``native_captured`` block wrote to its file descriptor (``text``, set on exit)."""

    def __init__(self, fd: int = 2) -> None:
        self.fd = fd
        self.text = ""

    def replay(self, drop: Optional[Callable[[str], bool]] = None) -> None:
        """Write the held text back (to ``sys.stdout`` for descriptor 1, else ``sys.stderr``),
        without the lines for which ``drop(line)`` is true."""
        lines = self.text.splitlines(keepends=True)
        kept = "".join(line for line in lines if drop is None or not drop(line))
        if kept:
            stream = sys.stdout if self.fd == 1 else sys.stderr
            stream.write(kept)
            stream.flush()


def flush_c_stdio() -> None:
    """Flush C's stdio buffers (native ``printf`` output sits there until flushed)."""
    try:
        ctypes.CDLL(None).fflush(None)
    except (OSError, AttributeError):       # pragma: no cover - no libc symbol table
        pass


@contextlib.contextmanager
def native_captured(fd: int = 2) -> Iterator[Held]:
    """Hold back what is written to file descriptor ``fd`` (1 or 2) inside the block.

    On a normal exit the text is kept in the yielded ``Held`` (dropped unless the
    caller replays it). If the block raises, the text is written back before the
    exception propagates, so a failure still shows what TensorFlow said.
    """
    held = Held(fd)
    stream = sys.stdout if fd == 1 else sys.stderr
    stream.flush()
    flush_c_stdio()
    with tempfile.TemporaryFile() as captured:
        saved = os.dup(fd)
        failed = False
        try:
            os.dup2(captured.fileno(), fd)
            yield held
        except BaseException:
            failed = True
            raise
        finally:
            stream.flush()
            flush_c_stdio()
            os.dup2(saved, fd)
            os.close(saved)
            captured.seek(0)
            held.text = captured.read().decode(errors="replace")
            if failed:
                held.replay()


def native_stderr_captured() -> "contextlib.AbstractContextManager[Held]":
    """Hold back what is written to file descriptor 2 inside the block (``native_captured(2)``).

    Example:
        >>> with native_stderr_captured():      # doctest: +SKIP
        ...     import tensorflow
    """
    return native_captured(2)
