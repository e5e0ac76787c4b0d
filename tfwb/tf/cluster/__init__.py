"""Local clusters on TensorFlow's gRPC runtime: the parent side (``parent``: start, watch,
gather, stop worker processes; ``preflight``: what it checks first; ``network``: the private
network; ``processes``: the worker processes it drives) and the worker side (``worker``: a
process's part of the run its ``TF_CONFIG`` describes). Uses the runner; the runner never imports it.
"""
