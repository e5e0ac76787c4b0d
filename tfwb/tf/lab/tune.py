"""What ``tfwb.tune`` needs from TensorFlow beside the runs: how many examples one epoch holds.

``tfwb.tuning.tune`` skips ``cache`` on a run shorter than one epoch (every element is read
once, so nothing is reused, and filling the cache costs a whole epoch before the first
step). The epoch's length is the workload's own: the built-in ``images`` workload's file
count (its file-reading dataset does not know its length), else the cardinality of the
dataset the workload gives (``source_fn`` or ``data_fn``).
"""
from __future__ import annotations

from typing import Optional

import tensorflow as tf

from tfwb.config import RunConfig
from tfwb.workloads import get_workload

__all__ = ["epoch_examples"]


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
