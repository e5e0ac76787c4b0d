"""Everything in tfwb that imports TensorFlow: pipelines, workloads, strategies, the runner.

Importing this package imports TensorFlow (a few seconds). Unless
``TF_CPP_MIN_LOG_LEVEL=0`` asks for every line, it quiets TF's C++ logging (level 2 when
the variable is unset), including the lines TF writes to stderr before its logger starts
(they would fill every notebook's first cell, whatever the level); an import that fails
shows them again
(``tfwb.tf.runner.quiet.native_stderr_captured``).
"""
import os
import sys

from tfwb.tf.runner.quiet import native_stderr_captured

if "tensorflow" not in sys.modules and os.environ.get("TF_CPP_MIN_LOG_LEVEL") != "0":
    # The lines before TF's logger starts ("All log messages before absl::InitializeLog() ...",
    # oneDNN's notice) ignore TF_CPP_MIN_LOG_LEVEL, so they are captured even when it is set;
    # only TF_CPP_MIN_LOG_LEVEL=0 (the reader asks for everything) leaves them alone.
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    with native_stderr_captured():
        import tensorflow  # noqa: F401
