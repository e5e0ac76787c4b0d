"""What an input knob can still do to a run, given the knobs it already has on: where the knob acts
in the pipeline, against the cache.

The pipeline (``tfwb.tf.runner.pipeline``) reads and decodes the source, then caches, shuffles,
augments, batches and prefetches. A cache (``cache=True`` or a file prefix) is filled with a whole
epoch before the first measured step, so every measured step reads from it: the reading and the
decoding are gone from the step. After a cache, only a knob downstream of it can still cut the
input wait:

- ``prefetch`` overlaps everything left (the cache's reads, the augmentation, the batching) with
  the step: it acts on all of it;
- ``parallel_map`` parallelizes the decoding (cached now) and the augmentation (still there): it
  acts on part of it;
- ``interleave``, ``data_source`` and ``storage_latency_ms`` act on the reading the cache removed.

``reach(knob, config)`` says which (``Reach.rank``: 0 all, 1 part, 2 none of this run's input
wait) and why; the diagnosis (``tfwb.analysis.diagnosis``) and the tune's candidate list
(``tfwb.search.tune_changes``) rank the changes by it, before their own order. Without a cache
every knob keeps rank 0 (nothing is removed yet).

Pure: no TensorFlow, no UI library.

Example:
    >>> from types import SimpleNamespace
    >>> cached = SimpleNamespace(cache=True)
    >>> [reach(k, cached).rank for k in ("prefetch", "parallel_map", "interleave")]
    [0, 1, 2]
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict

__all__ = ["Reach", "reach", "ALL", "PART", "NONE", "UPSTREAM_OF_CACHE", "ACROSS_CACHE"]

#: ``Reach.rank``: the knob acts on all of the input wait left, on part of it, or on none.
ALL, PART, NONE = 0, 1, 2
#: Knobs that act only on the reading and decoding a cache removes from the measured steps.
UPSTREAM_OF_CACHE = ("data_source", "storage_latency_ms", "interleave")
#: Knobs that act on both sides of the cache: what each still acts on after it.
ACROSS_CACHE: Dict[str, str] = {
    "parallel_map": "the augmentation after the cache (the decoding it also parallelizes is cached)",
}


@dataclass(frozen=True)
class Reach:
    """How much of a run's input wait a knob can still act on.

    Attributes:
        knob: the knob.
        rank: ``ALL`` (0), ``PART`` (1) or ``NONE`` (2); lower is tried first.
        why: why it is not ``ALL`` (``""`` when it is).
    """

    knob: str
    rank: int
    why: str = ""


def _cached(config: Any) -> bool:
    """A cache that the measured steps read from: on, over data read through a pipeline (not memory)."""
    return bool(getattr(config, "cache", False)) and getattr(config, "data_source", None) != "memory"


def reach(knob: str, config: Any, augments: bool = True) -> Reach:
    """What ``knob`` can still act on in a run of ``config`` (a ``RunConfig``, or anything with a ``cache``).

    Args:
        knob: a knob's name (any: a knob that is not an input knob keeps ``ALL``).
        config: the run's configuration.
        augments: the workload augments examples after the cache (its ``vectorized_map`` knob
            applies); where it does not, ``parallel_map`` has nothing left after a cache (``NONE``).

    Returns:
        Its ``Reach``: ``NONE`` for a knob upstream of a cache that is on, ``PART`` for one acting on
        both sides of it, else ``ALL``.

    Example:
        >>> from types import SimpleNamespace
        >>> print(reach("interleave", SimpleNamespace(cache=True)).why)
        interleave acts on the reading the cache removed from every measured step: it cannot cut this run's input wait
        >>> reach("interleave", SimpleNamespace(cache=False)).rank
        0
    """
    if not _cached(config):
        return Reach(knob, ALL)
    if knob in UPSTREAM_OF_CACHE:
        return Reach(knob, NONE, f"{knob} acts on the reading the cache removed from every measured step: "
                                 "it cannot cut this run's input wait")
    if knob in ACROSS_CACHE and not augments:
        return Reach(knob, NONE, f"after the cache, {knob} would act only on {ACROSS_CACHE[knob]}, and this "
                                 "workload has no augmentation: it cannot cut this run's input wait")
    if knob in ACROSS_CACHE:
        return Reach(knob, PART, f"after the cache, {knob} acts only on {ACROSS_CACHE[knob]}")
    return Reach(knob, ALL)
