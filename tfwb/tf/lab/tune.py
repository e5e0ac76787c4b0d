"""``tfwb.tune``: the tune with TensorFlow's runner, comparison and epoch length handed in.

The loop itself is pure (``tfwb.search.tune_loop.tune``) and is given what needs
TensorFlow: ``tune`` here hands it ``tfwb.run`` (``tfwb.tf.run.run``), the interleaved
comparison (``tfwb.tf.lab.side_by_side.compare_interleaved``) and ``epoch_examples``, how
many examples one epoch holds, so the loop skips ``cache`` on a run shorter than one epoch
(every element is read once, so nothing is reused, and filling the cache costs a whole epoch
before the first step). The epoch's length is the workload's own: the built-in ``images``
workload's file count (its file-reading dataset does not know its length), else the
cardinality of the dataset the workload gives (``source_fn`` or ``data_fn``).
"""
from __future__ import annotations

from typing import Any, Callable, Optional

import tensorflow as tf

from tfwb.config import RunConfig
from tfwb.search.tune_loop import Comparer, Runner
from tfwb.search.tune_loop import tune as tune_loop
from tfwb.search.tune_result import Tuning
from tfwb.tf.lab.side_by_side import compare_interleaved
from tfwb.tf.run import run
from tfwb.workloads import get_workload

__all__ = ["tune", "epoch_examples"]


def epoch_examples(cfg: RunConfig) -> Optional[int]:
    """Examples in one epoch of ``cfg``'s data; ``None`` when the dataset does not know its length.

    Raises:
        ValueError: for an unknown workload (from ``tfwb.workloads.get_workload``).

    Example:
        >>> epoch_examples(RunConfig(workload="mlp", size="small"))   # doctest: +SKIP
        4096
    """
    workload = get_workload(cfg.workload)
    if workload.builtin and workload.name == "images":
        from tfwb.tf.workloads.image_files import SPECS
        return SPECS[cfg.resolved_size].n_images
    try:
        ds = workload.source_fn(cfg).dataset if workload.source_fn is not None else workload.data_fn(cfg)
        n = int(ds.cardinality())
    except Exception:          # the run itself reports a factory that fails; here the epoch is just unknown
        return None
    return n if n >= 0 and n != int(tf.data.INFINITE_CARDINALITY) else None


def tune(baseline: RunConfig, *, runner: Optional[Runner] = None, compare: Optional[Comparer] = None,
         epoch_examples: Optional[Callable[[RunConfig], Optional[int]]] = None, **options: Any) -> Tuning:
    """Diagnose, try the change with the largest bound, keep it only if faster and still training; repeat.

    ``tfwb.search.tune_loop.tune`` with what it needs from TensorFlow handed in; every other
    argument (``max_runs``, ``history_path``, ``rounds``, ``progress``, ``stop``,
    ``start_result``, ...) is the loop's, described there.

    Args:
        baseline: the configuration to start from.
        runner: ``runner(cfg, observers) -> RunResult``; default ``tfwb.run``.
        compare: the interleaved comparison; default ``tfwb.compare_interleaved``.
        epoch_examples: ``epoch_examples(cfg) -> int | None``; default this module's
            ``epoch_examples`` with the default runner, else unknown.
        **options: the loop's other arguments.

    Returns:
        A ``tfwb.search.tune_result.Tuning``; its ``best`` is never measured slower than the start.

    Example:
        >>> t = tune(RunConfig(workload="mlp", data_source="memory"), max_runs=2)   # doctest: +SKIP
        >>> t.best.diff(t.start)                                                    # doctest: +SKIP
        {'steps_per_execution': 8}
    """
    if runner is None:
        runner = run
        if epoch_examples is None:
            epoch_examples = _epoch_of
    return tune_loop(baseline, runner=runner, compare=compare_interleaved if compare is None else compare,
                     epoch_examples=epoch_examples, **options)


_epoch_of = epoch_examples
