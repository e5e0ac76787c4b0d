"""Timing any TensorFlow callable or dataset the honest way.

``time_calls`` is what chapter 00 teaches: ``time.perf_counter`` (not
``time.time``), warm-up calls kept apart (the first call of a ``tf.function``
traces and, with XLA, compiles), and a device sync before each clock read, so the
time is the work's and not the dispatch's. ``sync=False`` shows the mistake.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Tuple

import tensorflow as tf

from tfwb import stats


@dataclass(frozen=True)
class CallTimes:
    """Per-call wall times in seconds: warm-up calls apart from measured ones."""

    warmup_s: Tuple[float, ...]
    times_s: Tuple[float, ...]

    @property
    def spread(self) -> stats.Spread:
        return stats.Spread.of(self.times_s)

    @property
    def median_s(self) -> float:
        return stats.median(self.times_s)


def _wait(value: Any) -> None:
    """Block until ``value`` (tensors or nested tensors) is computed, then sync devices."""
    for t in tf.nest.flatten(value):
        if isinstance(t, (tf.Tensor, tf.Variable)) and hasattr(t, "numpy"):
            t.numpy()
    tf.test.experimental.sync_devices()


def time_calls(fn: Callable[[], Any], *, calls: int = 20, warmup: int = 2, sync: bool = True,
               clock: Callable[[], float] = time.perf_counter) -> CallTimes:
    """Call ``fn()`` ``warmup + calls`` times and time each call.

    Args:
        fn: a zero-argument callable (wrap arguments in a lambda).
        calls: measured calls (>= 1).
        warmup: calls timed but kept apart (tracing, compilation, autotuning).
        sync: wait for the result and sync devices before reading the clock;
            ``False`` times only the dispatch on an asynchronous device (a GPU).
        clock: the clock, for tests.

    Raises:
        ValueError: for ``calls < 1`` or ``warmup < 0``.

    Example:
        >>> t = time_calls(lambda: step(x, y), calls=30)   # doctest: +SKIP
        >>> t.median_s                                      # doctest: +SKIP
    """
    if calls < 1 or warmup < 0:
        raise ValueError(f"calls={calls!r}, warmup={warmup!r}: need calls >= 1 and warmup >= 0")
    out = []
    for _ in range(warmup + calls):
        t0 = clock()
        value = fn()
        if sync:
            _wait(value)
        out.append(clock() - t0)
    return CallTimes(tuple(out[:warmup]), tuple(out[warmup:]))


def dataset_throughput(dataset: Iterable, *, batches: int = 20, warmup: int = 2,
                       examples_per_batch: int | None = None) -> dict:
    """How fast a dataset alone produces batches (no model): the input pipeline's ceiling.

    Returns:
        ``{"median_batch_s", "batches_per_s", "examples_per_s"}`` (examples_per_s is
        None unless ``examples_per_batch`` is given).
    """
    it = iter(dataset)
    t = time_calls(lambda: next(it), calls=batches, warmup=warmup, sync=False)
    per_s = 1.0 / t.median_s
    return {"median_batch_s": t.median_s, "batches_per_s": per_s,
            "examples_per_s": per_s * examples_per_batch if examples_per_batch else None}
