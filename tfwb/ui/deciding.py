"""The Workbench's Decide: one interleaved comparison of two configurations, run and recorded.

``tfwb.ui.controller.WorkbenchController.decide`` starts it like a run (the same lock, stop flag,
background thread and interrupt bridge); this module runs the comparison itself: ``run_decide``
calls the comparer (``tfwb.compare_interleaved`` unless one was handed in), tells the events each
round, ends it between rounds once the stop flag is set (recording nothing: a verdict stopped by
the reader is not the planned test), and hands a finished verdict to ``record``
(``Analysis.decided``). ``recording`` wraps a tune's comparer the same way, so every verdict the
tune log shows is the one the rows show.

No widgets; TensorFlow loads only when ``comparer`` picks ``tfwb.compare_interleaved``.
"""
from __future__ import annotations

from typing import Any, Callable, Optional

from tfwb import stats
from tfwb.config import RunConfig
from tfwb.interrupts import INTERRUPTED
from tfwb.observers import StopFlag
from tfwb.search.tune_loop import Comparer

__all__ = ["DecideStopped", "comparer", "recording", "run_decide", "check_rounds", "Record"]

#: ``record(baseline_config, candidate_config, rounds)``: keep a verdict (the controller's ``Analysis.decided``).
Record = Callable[[RunConfig, RunConfig, stats.RoundsComparison], None]


class DecideStopped(Exception):
    """A Decide was stopped between rounds (Stop, ``stop()``, a kernel interrupt); nothing was recorded."""


def check_rounds(rounds: Optional[int]) -> None:
    """Refuse ``rounds`` that is not ``None`` or an integer >= 1, naming it and what is allowed.

    Example:
        >>> check_rounds(0)
        Traceback (most recent call last):
        ...
        ValueError: rounds=0 is not allowed; rounds must be an integer >= 1 (6 or more decide)
    """
    if rounds is not None and (isinstance(rounds, bool) or not isinstance(rounds, int) or rounds < 1):
        raise ValueError(f"rounds={rounds!r} is not allowed; rounds must be an integer >= 1 (6 or more decide)")


def comparer(compare: Optional[Comparer]) -> Comparer:
    """``compare``, else ``tfwb.compare_interleaved`` (TensorFlow loads then)."""
    if compare is not None:
        return compare
    from tfwb.tf.lab.side_by_side import compare_interleaved

    return compare_interleaved


def recording(compare: Comparer, record: Record) -> Comparer:
    """``compare``, handing each verdict it returns to ``record`` first (a tune's trials).

    Example:
        >>> kept = []
        >>> cmp = recording(lambda a, b, **kw: stats.compare_rounds([1.0] * 6, [0.5] * 6),
        ...                 lambda a, b, r: kept.append((a.prefetch, b.prefetch, r.verdict)))
        >>> cmp(RunConfig(), RunConfig(prefetch=True), rounds=6).speedup, kept
        (2.0, [(False, True, 'faster')])
    """
    def recorded(a: RunConfig, b: RunConfig, **kwargs: Any) -> stats.RoundsComparison:
        result = compare(a, b, **kwargs)
        if isinstance(result, stats.RoundsComparison):
            record(a, b, result)
        return result

    return recorded


def run_decide(compare: Comparer, a: RunConfig, b: RunConfig, *, rounds: Optional[int], flag: StopFlag,
               events: Any, record: Record, raise_errors: bool = True) -> Optional[stats.RoundsComparison]:
    """Compare ``b`` (the candidate) with ``a`` interleaved, record the verdict, and tell ``events``.

    Args:
        compare: ``compare(a, b, rounds=, progress=) -> stats.RoundsComparison``.
        rounds: the rounds (``None``: the comparer's default).
        flag: the stop flag; once set, the comparison ends after its current round.
        events: a ``tfwb.ui.controller.ControllerEvents`` (``on_decide_round``, ``on_decide_end``).
        record: where a finished verdict goes.
        raise_errors: raise what the comparer raised (after telling ``on_decide_end``).

    Returns:
        The verdict; ``None`` when stopped (or failed, without ``raise_errors``).

    Example:
        >>> class Told:
        ...     def on_decide_round(self, done, total, stopping): pass
        ...     def on_decide_end(self, rounds, error): self.end = (rounds.verdict if rounds else None, error)
        >>> def fake(a, b, rounds, progress):
        ...     for i in range(rounds):
        ...         progress(i + 1, rounds)
        ...     return stats.compare_rounds([1.0] * rounds, [0.5] * rounds)
        >>> told, flag = Told(), StopFlag()
        >>> run_decide(fake, RunConfig(), RunConfig(cache=True), rounds=6, flag=flag, events=told,
        ...            record=lambda a, b, r: None).verdict, told.end
        ('faster', ('faster', None))
        >>> flag.set()
        >>> run_decide(fake, RunConfig(), RunConfig(cache=True), rounds=6, flag=flag, events=told,
        ...            record=lambda a, b, r: None), type(told.end[1]).__name__
        (None, 'DecideStopped')
    """
    def round_done(done: int, total: int) -> None:
        events.on_decide_round(done, total, flag.is_set)
        if flag.is_set:
            raise DecideStopped(f"stopped by the user after {done} of {total} rounds; nothing was recorded")

    try:
        result = compare(a, b, rounds=rounds, progress=round_done)
    except (DecideStopped, KeyboardInterrupt) as e:
        events.on_decide_end(None, e if isinstance(e, DecideStopped) else DecideStopped(
            f"{INTERRUPTED}: the comparison ended early; nothing was recorded"))
        return None
    except Exception as e:       # a configuration this machine cannot build, a failed whole run
        events.on_decide_end(None, e)
        if raise_errors:
            raise
        return None
    record(a, b, result)
    events.on_decide_end(result, None)
    return result
