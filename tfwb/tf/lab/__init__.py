"""The chapters' instruments: graphs, precision, convergence, placement, the profiler,
TensorBoard, timing helpers, tf.data's own choices, interleaved comparisons, sizes.

They use the runner (``tfwb.tf.runner``); the runner never imports them.
"""
