"""The built-in workloads, one module each.

Each module defines ``model(cfg)`` and ``data(cfg)`` (and, where its pipeline needs
more than an unbatched dataset, ``source(cfg, tuning)``); ``tfwb.workloads`` registers
it by name (``"tfwb.tf.workloads.<module>:model"``) with what its data honours, and
imports it only when a run uses it.

- ``images``: a small CNN on PNG shards read from disk: every input knob applies.
- ``mlp``: a deep, narrow MLP on rows in memory: many small ops per step.
"""
