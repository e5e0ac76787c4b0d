"""Everything in tfwb that imports TensorFlow: pipelines, workloads, strategies, the runner.

Importing this package imports TensorFlow (a few seconds). Unless
``TF_CPP_MIN_LOG_LEVEL`` is already set, it quiets TF's C++ logging, including
the lines TF writes to stderr before its logger starts (they would fill every
notebook's first cell); an import that fails shows them again
(``tfwb.tf.runner.quiet.native_stderr_captured``).
"""
import os
import sys

from tfwb.tf.runner.quiet import native_stderr_captured

if "tensorflow" not in sys.modules and "TF_CPP_MIN_LOG_LEVEL" not in os.environ:
    os.environ["TF_CPP_MIN_LOG_LEVEL"] = "2"
    with native_stderr_captured():
        import tensorflow  # noqa: F401
