"""The chapters' instruments: graphs, precision, convergence (with learning_rates, clipping,
held_out and their argument checks, arguments), placement, the profiler, TensorBoard, timing
helpers, tf.data's own choices, interleaved comparisons, sizes, and ``tfwb.sweep`` / ``tfwb.tune``
(``sweep``, ``tune``: the pure searches with ``tfwb.run`` handed in).

They use the runner (``tfwb.tf.runner``); the runner never imports them.
"""
