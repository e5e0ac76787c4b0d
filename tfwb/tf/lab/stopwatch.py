"""Timing any TensorFlow callable or dataset the honest way.

``time_calls`` is what chapter 00 teaches: ``time.perf_counter`` (not
``time.time``), warm-up calls kept apart (the first call of a ``tf.function``
traces and, with XLA, compiles), and a device sync before each clock read, so the
time is the work's and not the dispatch's. ``sync=False`` shows the mistake.
``time_alternating`` times several callables in alternating blocks, so that drift on a
busy machine (other programs, clock changes) hits them alike.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable, Iterable, List, Sequence, Tuple, Union

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


def time_alternating(fns: Sequence[Callable[[], Any]], *, calls: int = 50, blocks: int = 5, warmup: int = 2,
                     sync: Union[bool, Sequence[bool]] = True,
                     clock: Callable[[], float] = time.perf_counter) -> List[CallTimes]:
    """Time several callables in alternating blocks: drift hits all of them alike.

    Each callable first gets its ``warmup`` calls (kept apart); then ``blocks`` rounds run
    ``calls // blocks`` calls of each, in forward order on even rounds and reversed on odd
    ones, so no callable always follows the same one.

    Args:
        fns: zero-argument callables.
        calls: measured calls per callable (>= ``blocks``; rounded down to a multiple of it).
        blocks: rounds of alternation (>= 1).
        warmup: warm-up calls per callable.
        sync: one flag for all, or one per callable (see ``time_calls``).
        clock: the clock, for tests.

    Returns:
        One ``CallTimes`` per callable, in the order of ``fns``.

    Raises:
        ValueError: for no callables, ``blocks < 1``, ``calls < blocks``, or a ``sync``
            sequence whose length is not ``len(fns)``.

    Example:
        >>> synced, unsynced = time_alternating([f, f], sync=[True, False])   # doctest: +SKIP
    """
    if not fns:
        raise ValueError("fns=[] is not allowed; give at least one callable")
    if blocks < 1 or calls < blocks:
        raise ValueError(f"calls={calls!r}, blocks={blocks!r}: need blocks >= 1 and calls >= blocks")
    syncs = [sync] * len(fns) if isinstance(sync, bool) else list(sync)
    if len(syncs) != len(fns):
        raise ValueError(f"sync has {len(syncs)} flags for {len(fns)} callables; give one per callable or one bool")
    warmups = [()] * len(fns)
    if warmup:
        warm = [time_calls(fn, calls=1, warmup=warmup - 1, sync=s, clock=clock) for fn, s in zip(fns, syncs)]
        warmups = [w.warmup_s + w.times_s for w in warm]
    measured: List[List[float]] = [[] for _ in fns]
    order = list(range(len(fns)))
    for r in range(blocks):
        for i in (order if r % 2 == 0 else order[::-1]):
            measured[i].extend(time_calls(fns[i], calls=calls // blocks, warmup=0, sync=syncs[i], clock=clock).times_s)
    return [CallTimes(tuple(w), tuple(m)) for w, m in zip(warmups, measured)]


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
