"""The run history: RunResults kept as JSON lines in one file, so a dead kernel loses nothing.

Owns ``History`` (append one result, load every complete one) and ``load_results``
(``tfwb.load_results``). The Workbench, the sweep and ``python -m tfwb run --history``
all write through it. A history holds RunResults unless told another record type: the
readers' predictions (``tfwb.prediction.Score``) are kept beside it the same way.

A kernel can die in the middle of a write. What that leaves is a torn last line: the
start of a record, no newline. Loading keeps every complete record before and after
it, skips the torn line and reports it in ``History.skipped`` (line number, reason);
the next append starts on a fresh line, so the torn line never swallows a later run.
A line that is complete but not a RunResult (edited by hand, another program's
output) is skipped and reported the same way.

A run can be written twice: a fit (``tfwb.keras.Monitor``) appends a record with status
``"running"`` as it starts and the complete record, with the same ``run_id``, at its end, so
a fit that dies anywhere (another callback raised, the kernel died) is still on disk. Nothing
is rewritten in place: loading puts the later record where the running one stood, and reads
a running record never completed as failed (``UNFINISHED``).

Pure: standard library and ``tfwb.records`` only.
"""
from __future__ import annotations

import dataclasses
import os
import warnings
from typing import Any, Dict, List, Sequence, Tuple, Type

from tfwb.records import RUNNING, RunResult

__all__ = ["History", "load_results", "append_result", "completed", "UNFINISHED"]

#: The error of a run whose record says it started and no later record completes it.
UNFINISHED = "the fit stopped before its end (no record of its end: the kernel died, or it was left without a word)"


class History:
    """A JSON-lines file of RunResults, one per line.

    Args:
        path: the file. It and its folder are created by the first ``append``; a file
            that does not exist yet is a history with no runs.
        record: the type of its records (``RunResult``, the default): a class with
            ``to_json()`` and ``from_json(text)``, which raises ValueError for a line that
            is not one.

    Attributes:
        path: the file, as given (``os.fspath``).
        skipped: after ``load()``, one ``(line number, reason)`` per line that was not a
            complete RunResult (a write cut short, a line that is not a RunResult).

    Example:
        >>> import os, tempfile
        >>> from tfwb.config import RunConfig
        >>> h = History(os.path.join(tempfile.mkdtemp(), "runs.jsonl"))
        >>> h.load()
        []
        >>> h.append(RunResult(config=RunConfig(batch_size=8)))
        >>> [r.config.batch_size for r in h.load()], h.skipped
        ([8], [])
    """

    def __init__(self, path: "os.PathLike[str] | str", record: Type[Any] = RunResult) -> None:
        self.path = os.fspath(path)
        self.record = record
        self.skipped: List[Tuple[int, str]] = []

    def __repr__(self) -> str:
        return f"History({self.path!r})"

    def ensure_writable(self) -> None:
        """Create the file's folder (as ``append`` does) and check that the file takes a line.

        For a caller that must fail before spending time (a ``fit`` about to start), and
        that would otherwise find out at its end. Writes nothing into the file.

        Raises:
            OSError: when the folder or file cannot be created or opened for appending.
        """
        folder = os.path.dirname(self.path)
        if folder:
            os.makedirs(folder, exist_ok=True)
        os.close(os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644))

    def append(self, result: Any) -> None:
        """Append one result as a line of its own and flush it to disk.

        The line goes out in one ``write`` on an ``O_APPEND`` descriptor (two processes
        appending to one file do not interleave their lines), after a newline when the
        file's last line was cut short by a crash.

        Args:
            result: the result to keep.

        Raises:
            TypeError: for something that is not a ``record`` (a RunResult by default).
            OSError: when the folder or file cannot be created or written.
        """
        if not isinstance(result, self.record):
            raise TypeError(f"result must be a {self.record.__name__}, got {type(result).__name__}")
        data = (result.to_json() + "\n").encode("utf-8")
        self.ensure_writable()
        fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            size = os.fstat(fd).st_size
            if size and os.pread(fd, 1, size - 1) != b"\n":
                data = b"\n" + data            # a torn last line: do not glue this record onto it
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)

    def load(self) -> List[Any]:
        """Every complete result in the file, in order; what was skipped goes to ``skipped``.

        A run written as it started and again at its end reads once (``completed``).

        Returns:
            The results; ``[]`` for a file that does not exist yet. Blank lines are
            ignored; a torn or invalid line is skipped and recorded in ``skipped`` as
            ``(line number, reason)``, the reason naming what is wrong with it.

        Raises:
            OSError: when the path exists but cannot be read (a folder, no permission).
        """
        self.skipped = []
        if not os.path.exists(self.path):
            return []
        with open(self.path, "rb") as fh:
            raw_lines = fh.read().split(b"\n")
        torn_tail = raw_lines[-1] != b""       # the file does not end with a newline
        out: List[Any] = []
        for n, raw in enumerate(raw_lines, 1):
            if not raw.strip():
                continue
            try:
                line = raw.decode("utf-8")
                out.append(self.record.from_json(line))
            except UnicodeDecodeError as e:
                self.skipped.append((n, f"not UTF-8 text ({e.reason} at byte {e.start})"))
            except ValueError as e:
                torn = torn_tail and n == len(raw_lines)
                self.skipped.append((n, f"cut short (a write that did not finish): {e}" if torn else str(e)))
        return completed(out)


def completed(records: Sequence[Any]) -> List[Any]:
    """Records as a history reads them: a ``"running"`` record completed by a later one of its run.

    A record with status ``"running"`` is replaced, in its place, by the next record with the
    same ``run_id``; one that no later record completes becomes ``"failed"`` with the error
    ``UNFINISHED``. Every other record stays as it is, duplicates included.

    Example:
        >>> from tfwb.config import RunConfig
        >>> start = RunResult(config=RunConfig(), status="running", run_id="a")
        >>> other = RunResult(config=RunConfig(), run_id="b")
        >>> [(r.run_id, r.status) for r in completed([start, other, RunResult(config=RunConfig(), run_id="a")])]
        [('a', 'ok'), ('b', 'ok')]
        >>> [r.error for r in completed([start])] == [UNFINISHED]
        True
    """
    out: List[Any] = []
    running: Dict[str, int] = {}          # run_id -> where its running record stands in ``out``
    for r in records:
        run_id = getattr(r, "run_id", None)
        if run_id and run_id in running:
            i = running.pop(run_id)
            out[i] = r
        else:
            i = len(out)
            out.append(r)
        if run_id and getattr(r, "status", None) == RUNNING:
            running[run_id] = i
    for i in running.values():
        out[i] = dataclasses.replace(out[i], status="failed", error=UNFINISHED)
    return out


def load_results(path: "os.PathLike[str] | str") -> List[RunResult]:
    """Every complete run in a history file (``tfwb.load_results``), warning about skipped lines.

    A file that does not exist yet is a history with no runs. ``History(path).load()``
    does the same without the warning and keeps what it skipped in ``skipped``.

    Args:
        path: the JSON-lines history file.

    Returns:
        The results, in order.

    Raises:
        OSError: when ``path`` exists but cannot be read.

    Example:
        >>> load_results("no-such-history.jsonl")
        []
    """
    history = History(path)
    results = history.load()
    if history.skipped:
        lines = "; ".join(f"line {n}: {why}" for n, why in history.skipped)
        warnings.warn(f"{history.path}: skipped {len(history.skipped)} line(s) that are not complete "
                      f"RunResults ({lines}); kept the {len(results)} complete one(s)", stacklevel=2)
    return results


def append_result(path: "os.PathLike[str] | str", result: RunResult) -> None:
    """``History(path).append(result)``: one result onto a history file.

    Args:
        path: the JSON-lines history file (created with its folder when missing).
        result: the result to keep.

    Raises:
        OSError: when the folder or file cannot be created or written.
    """
    History(path).append(result)
