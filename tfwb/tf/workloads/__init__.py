"""The built-in workloads, one module each.

Each module defines ``model(cfg)`` and ``data(cfg)`` (and, where its pipeline needs
more than an unbatched dataset, ``source(cfg, tuning)``); ``tfwb.workloads`` registers
it by name (``"tfwb.tf.workloads.<module>:model"``) with what its data honours, and
imports it only when a run uses it.

- ``images``: a small CNN on PNG shards read from disk: every input knob applies.
- ``mlp``: a deep, narrow MLP on rows in memory: many small ops per step.
- ``text``: a small transformer classifier on generated token sequences (Tensor-Core-shaped).
- ``cifar10``: a small CNN on CIFAR-10 (keras.datasets, cached on disk), or generated images offline.
"""
from typing import Any, Mapping


def spec_for(specs: Mapping[str, Any], size: str) -> Any:
    """The spec of ``size`` from a workload's ``SPECS``.

    Raises:
        ValueError: naming the size and the sizes there are.
    """
    if size not in specs:
        raise ValueError(f"size={size!r} is not allowed; one of {sorted(specs)}")
    return specs[size]
