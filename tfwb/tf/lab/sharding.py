"""Sharding across workers: what tf.data's auto-sharding does to a pipeline, in one process.

Sharding a run's own data is a ``PipelineSettings`` setting (``tfwb.tf.runner.pipeline.PipelineSettings.shard``,
applied by each workload's source: shard folders before any file is read, or
decoded elements). This module reproduces the rewrite ``MultiWorkerMirroredStrategy``
applies on its own, so a notebook can show which policy a pipeline gets without
starting a cluster.
"""
from __future__ import annotations

import re

import tensorflow as tf

from tfwb.tf.runner.quiet import native_stderr_captured

POLICIES = ("AUTO", "FILE", "DATA", "OFF")


def auto_shard(ds: tf.data.Dataset, num_workers: int, index: int, policy: str = "AUTO") -> tf.data.Dataset:
    """``ds`` as worker ``index`` of ``num_workers`` would get it from tf.data's auto-sharding.

    Under ``MultiWorkerMirroredStrategy``, ``experimental_distribute_dataset`` rewrites
    the pipeline by ``options.experimental_distribute.auto_shard_policy``: ``FILE``
    shards the files of a reader dataset (``TFRecordDataset``, ``TextLineDataset``,
    ...), ``DATA`` keeps every ``num_workers``-th element (each worker still reads
    everything), ``AUTO`` tries ``FILE`` and falls back to ``DATA``. This applies the
    same rewrite in one process (TensorFlow's internal ``_AutoShardDataset``).

    Raises:
        ValueError: for an unknown policy.
        tf.errors.NotFoundError: on iteration, when ``FILE`` finds no reader dataset.
    """
    from tensorflow.python.data.experimental.ops.distribute import _AutoShardDataset

    if policy not in POLICIES:
        raise ValueError(f"policy={policy!r} is not allowed; one of {POLICIES}")
    opts = tf.data.Options()
    opts.experimental_distribute.auto_shard_policy = getattr(tf.data.experimental.AutoShardPolicy, policy)
    return _AutoShardDataset(ds.with_options(opts), num_workers, index)


def try_auto_shard(ds: tf.data.Dataset, num_workers: int, index: int, policy: str = "AUTO"):
    """The first element worker ``index`` gets under ``policy``, or the error tf.data raises.

    Returns:
        ``(element, None)``, or ``(None, "NotFoundError: Found an unshardable source dataset")``
        when the rewrite fails. TensorFlow logs a failed rewrite as an error line followed
        by a dump of the whole pipeline graph; that log is held back here, the error kept
        (an unexpected failure shows the log).
    """
    with native_stderr_captured():
        try:
            return next(iter(auto_shard(ds, num_workers, index, policy))), None
        except tf.errors.OpError as e:
            text = re.sub(r"\{\{.*?\}\}\s*", "", e.message).strip().splitlines()[0]
            # TF 2.20 names the dataset after the message (': name: "RangeDataset/_3"'); 2.21 does not.
            return None, f"{type(e).__name__}: {text.split(': goo.gle')[0].split(': name: ')[0]}"
