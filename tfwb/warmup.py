"""Where a run's steps settle: how many leading steps are still warm-up.

A run's first steps are often slower than the rest and then settle: caches and page tables fill,
``tf.data``'s autotuner finds its parallelism, the CPU's clock rises. On a quiet 2-core machine the
first third of a 20-40 step run was 1.14-1.23x slower than its last third (issue 34). That is
warm-up, not drift: a comparison must leave those steps out, and "drifted" is kept for a run that
changes speed in the middle or at the end.

Two questions, one rule (``slower_than_rest``: a block of steps is warm-up while its median is
slower than settled steps beyond their spread, their upper quartile, and beyond ``TOLERANCE``):

- ``unsettled_steps(times)``: after the fact, how many leading steps of a recorded run were still
  warming up. Leading blocks are dropped while they are slower than the run's later steps, at most
  ``MAX_FRACTION`` of the run (pyperf's warm-up calibration likewise compares a leading sample
  with what follows it, and caps the warm-up values it will spend). A run that is slow for more
  than that and then speeds up changed speed mid-run: what is left still shows it as drift.
  ``settled(times)`` is the rest.
- ``extend_warmup(...)``: while a run is still warming up, run more warm-up calls in blocks until the
  newest block is no faster than the block before it (torch.utils.benchmark's
  ``adaptive_autorange`` likewise runs blocks until their spread is small enough, within a time
  limit), capped in calls and seconds, and ended by a stop request. The runner
  (``tfwb.tf.runner.train``) records how many calls that took (``RunResult.warmup_extra_steps``).

Pure: standard library only.
"""
from __future__ import annotations

import statistics
from typing import Callable, List, Sequence

__all__ = ["TOLERANCE", "MAX_FRACTION", "MIN_STEPS", "MIN_CALLS_TO_EXTEND", "EXTEND_MAX_S", "MAX_EXTRA_FRACTION",
           "slower_than_rest", "unsettled_steps", "settled", "block_calls", "still_warming", "extend_warmup"]

#: A block of steps is slower than the steps after it when its median exceeds theirs by more than
#: this fraction (and their upper quartile): within-run noise of a quiet machine stays under it.
TOLERANCE = 0.05
#: At most this share of a recorded run's steps is taken for warm-up; a slow stretch longer than
#: that is a change of speed mid-run (drift), not warm-up.
MAX_FRACTION = 1.0 / 3.0
#: Fewest steps of a recorded run for its warm-up to be looked for (the drift check's minimum).
MIN_STEPS = 9
#: Fewest measured calls for the runner to extend its warm-up (shorter runs are left as configured;
#: their comparison still leaves the unsettled steps out).
MIN_CALLS_TO_EXTEND = 12
#: At most this many seconds of extra warm-up per run.
EXTEND_MAX_S = 10.0
#: At most this share of a run's measured calls is added to its warm-up.
MAX_EXTRA_FRACTION = 0.25


def _upper_quartile(xs: Sequence[float]) -> float:
    return statistics.quantiles(xs, n=4, method="inclusive")[2] if len(xs) > 1 else xs[0]


def slower_than_rest(head: Sequence[float], rest: Sequence[float], tolerance: float = TOLERANCE) -> bool:
    """Whether the steps ``head`` are slower than the steps ``rest`` beyond the noise.

    The head's median must exceed both the rest's upper quartile and its median times
    ``1 + tolerance``.

    Example:
        >>> slower_than_rest([1.3, 1.2], [1.0, 1.01, 0.99, 1.0]), slower_than_rest([1.02], [1.0, 1.01, 0.99])
        (True, False)
    """
    if not head or not rest:
        return False
    rest_median = statistics.median(rest)
    return statistics.median(head) > max(rest_median * (1.0 + tolerance), _upper_quartile(rest))


def unsettled_steps(times: Sequence[float], *, max_fraction: float = MAX_FRACTION,
                    tolerance: float = TOLERANCE) -> int:
    """How many leading steps of a recorded run were still warming up.

    The steps are looked at in blocks of ``len(times) // 12`` (at least 1); a leading block is
    dropped while it is ``slower_than_rest`` than the steps beyond the cap (the last
    ``1 - max_fraction`` of the run, which warm-up never reaches), up to ``max_fraction`` of the
    run. Runs of fewer than ``MIN_STEPS`` steps give 0.

    Args:
        times: per-step times in the order they ran.
        max_fraction: the cap, as a share of the steps (0 to 1).
        tolerance: see ``slower_than_rest``.

    Raises:
        ValueError: for ``max_fraction`` outside [0, 1].

    Example:
        >>> unsettled_steps([1.2, 1.2, 1.1] + [1.0] * 12)      # a warm-up, then flat
        3
        >>> unsettled_steps([1.0] * 10 + [1.5] * 5)             # a late slowdown is not warm-up
        0
        >>> unsettled_steps([1.2] * 10 + [1.0] * 20)            # a warm-up over a third of the run
        10
        >>> unsettled_steps([2.0] * 15 + [1.0] * 15)            # capped at a third: the rest still drifts
        10
    """
    if not 0.0 <= max_fraction <= 1.0:
        raise ValueError(f"max_fraction={max_fraction!r} is not allowed; use a share in [0, 1]")
    xs = [float(t) for t in times]
    n = len(xs)
    if n < MIN_STEPS:
        return 0
    block, cap = max(1, n // 12), int(n * max_fraction)
    reference = xs[cap:]
    k = 0
    while k + block <= cap and slower_than_rest(xs[k:k + block], reference, tolerance):
        k += block
    return k


def settled(times: Sequence[float]) -> List[float]:
    """The steps after the unsettled ones (``unsettled_steps``), in order.

    Example:
        >>> settled([1.3, 1.2] + [1.0] * 8)
        [1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0]
    """
    xs = [float(t) for t in times]
    return xs[unsettled_steps(xs):]


def block_calls(calls: int) -> int:
    """Calls per block of an extended warm-up, for a run of ``calls`` measured calls: a sixteenth, at least 2
    (so that the cap, ``MAX_EXTRA_FRACTION`` of the calls, holds a few blocks).

    Example:
        >>> block_calls(160), block_calls(40)
        (10, 2)
    """
    return max(2, calls // 16)


def still_warming(times: Sequence[float], block: int, tolerance: float = TOLERANCE) -> bool:
    """Whether warm-up calls timed ``times`` (in order, the first one included) are still speeding up.

    The first call (tracing, compilation) is left out; the newest ``block`` calls are compared
    with the ``block`` calls before them (``slower_than_rest``), or, with fewer than
    ``2 * block`` calls after the first, the newer half of them with the older half. True while
    there are fewer than 4 calls after the first: too few to tell.

    Example:
        >>> still_warming([5.0, 1.3, 1.3, 1.2, 1.1, 1.0, 1.0], block=3)   # 1.3 1.3 1.2 then 1.1 1.0 1.0
        True
        >>> still_warming([5.0, 1.0, 1.01, 1.0, 1.0, 0.99, 1.0], block=3)
        False
    """
    if block < 1:
        raise ValueError(f"block={block!r} is not allowed; use an int >= 1")
    after = [float(t) for t in times][1:]
    if len(after) < 4:
        return True
    half = min(block, len(after) // 2)
    newest, before = after[-half:], after[-2 * half:-half]
    return slower_than_rest(before, newest, tolerance)


def extend_warmup(times: Sequence[float], run_calls: Callable[[int], Sequence[float]], *, calls: int,
                  clock: Callable[[], float], should_stop: Callable[[], bool],
                  max_s: float = EXTEND_MAX_S, tolerance: float = TOLERANCE) -> int:
    """Run warm-up calls in blocks until they settle; returns how many extra calls ran.

    Nothing runs when the configured warm-up (``times``) already settled, when the run has
    fewer than ``MIN_CALLS_TO_EXTEND`` measured ``calls``, or when there was no warm-up at all
    (a run configured without warm-up keeps none). Otherwise blocks of ``block_calls(calls)``
    run while ``still_warming``, at most ``MAX_EXTRA_FRACTION`` of ``calls`` extra calls and
    ``max_s`` seconds, and never after ``should_stop()`` says so.

    Args:
        times: the configured warm-up's call times, in order.
        run_calls: runs ``n`` more warm-up calls and returns their times (fewer when it stopped).
        calls: the run's measured calls.
        clock: seconds.
        should_stop: True once a stop was requested (or the loss diverged).
        max_s: the time cap.
        tolerance: see ``slower_than_rest``.

    Example:
        >>> pending = iter([1.2, 1.1, 1.05, 1.0, 1.0, 1.0, 1.0, 1.0])
        >>> extend_warmup([5.0, 1.4, 1.3], lambda n: [next(pending) for _ in range(n)], calls=16,
        ...               clock=lambda: 0.0, should_stop=lambda: False)      # blocks of 2, capped at 16 // 4
        4
    """
    seen = [float(t) for t in times]
    if not seen or calls < MIN_CALLS_TO_EXTEND:
        return 0
    block, cap = block_calls(calls), int(calls * MAX_EXTRA_FRACTION)
    start, extra = clock(), 0
    while extra + block <= cap and not should_stop() and clock() - start < max_s and still_warming(seen, block, tolerance):
        new = [float(t) for t in run_calls(block)]
        extra += len(new)
        seen += new
        if len(new) < block:
            break
    return extra
