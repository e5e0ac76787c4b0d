"""The runner: what ``tfwb.run`` drives for one process.

The train loop (``train``), the step function (``train_step``), optimizers, the input
pipeline, distribution strategies, devices, the run's fingerprint, its peak memory
(``memory``), and how far it is from the machine's limit (``limits``: the FLOPs from
``flops``, the peaks from ``matmul_peak``). It imports neither ``tfwb.tf.lab`` (the
chapters' instruments) nor ``tfwb.tf.cluster``.
"""
