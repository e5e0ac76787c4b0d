"""The names chapter 01 and earlier code import from ``tfwb.tf.data``, where they live now.

The input pipeline is split by concern:

- ``tfwb.tf.pipeline``: the generic knobs (``options``, ``Tuning``, the cache and its
  fill, the finish cache -> shuffle -> batch -> prefetch, ``build_dataset``);
- ``tfwb.tf.workloads.images``: the PNG shards read by tf.data or a generator,
  decode and augment, the CNN (the files themselves: ``tfwb.tf.images``);
- ``tfwb.tf.sharding``: what tf.data's auto-sharding does (``auto_shard``, ``try_auto_shard``).
"""
from __future__ import annotations

from .pipeline import (  # noqa: F401
    AUTOTUNE, DEFAULT_TUNING, INTERLEAVE_CYCLE, MEMORY_BATCHES, Source, Tuning, build_dataset,
    cache_files, check_cache_path, finish, io_threads, options,
)
from .sharding import auto_shard, try_auto_shard  # noqa: F401
from .workloads.images import storage_latency_s  # noqa: F401

__all__ = [
    "AUTOTUNE", "DEFAULT_TUNING", "INTERLEAVE_CYCLE", "MEMORY_BATCHES", "Source", "Tuning",
    "build_dataset", "cache_files", "check_cache_path", "finish", "io_threads", "options",
    "auto_shard", "try_auto_shard", "storage_latency_s",
]
