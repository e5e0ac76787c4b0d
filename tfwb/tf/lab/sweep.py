"""``tfwb.sweep``: the search with TensorFlow's runner handed in.

The sweep itself is pure (``tfwb.search.halving``: ``sweep`` and the ``exhaustive`` grid it
replaces) and is given its runner; ``sweep`` and ``exhaustive`` here hand it ``tfwb.run``
(``tfwb.tf.run.run``) unless another runner is given. Every other argument is the search's,
described there.
"""
from __future__ import annotations

from typing import Any, Iterable, Mapping, Optional

from tfwb.config import RunConfig
from tfwb.search import halving
from tfwb.search.halving import GridResult, Runner
from tfwb.search.result import SweepResult
from tfwb.tf.run import run

__all__ = ["sweep", "exhaustive"]


def sweep(baseline: Optional[RunConfig] = None, space: Optional[Mapping[str, Iterable[Any]]] = None, *,
          runner: Optional[Runner] = None, **options: Any) -> SweepResult:
    """Find the fastest configuration of ``space`` that still trains correctly, by successive halving.

    ``tfwb.search.halving.sweep`` with ``runner`` defaulting to ``tfwb.run``; ``options`` are its
    (``min_steps``, ``eta``, ``rungs``, ``loss_tolerance``, ``history``, ``resume``, ``progress``, ...).

    Example:
        >>> r = sweep(RunConfig(workload="mlp"), {"prefetch": [False, True]}, min_steps=5)  # doctest: +SKIP
        >>> r.winner.label                                                                 # doctest: +SKIP
        'prefetch'
    """
    return halving.sweep(baseline, space, runner=run if runner is None else runner, **options)


def exhaustive(baseline: Optional[RunConfig] = None, space: Optional[Mapping[str, Iterable[Any]]] = None, *,
               runner: Optional[Runner] = None, **options: Any) -> GridResult:
    """Every candidate of ``space`` for ``steps`` steps: ``tfwb.search.halving.exhaustive`` with ``runner``
    defaulting to ``tfwb.run``."""
    return halving.exhaustive(baseline, space, runner=run if runner is None else runner, **options)
