"""The runner: what ``tfwb.run`` drives for one process.

The train loop (``train``), the step function (``step``), optimizers, the input
pipeline, distribution strategies, devices, the run's fingerprint and peak memory.
It imports neither ``tfwb.tf.lab`` (the chapters' instruments) nor ``tfwb.tf.cluster``.
"""
