"""Everything in tfwb that imports TensorFlow: data, models, strategies, the runner.

Importing this package imports TensorFlow (a few seconds). Unless
``TF_CPP_MIN_LOG_LEVEL`` is already set, it quiets TF's C++ logging, including
the lines TF writes to stderr before its logger starts (they would fill every
notebook's first cell); an import that fails shows them again.
"""
import os
import sys
import tempfile

if "tensorflow" not in sys.modules and "TF_CPP_MIN_LOG_LEVEL" not in os.environ:
    os.environ["TF_CPP_MIN_LOG_LEVEL"] = "2"
    with tempfile.TemporaryFile() as _captured:
        _saved = os.dup(2)
        try:
            sys.stderr.flush()
            os.dup2(_captured.fileno(), 2)
            import tensorflow  # noqa: F401
        except BaseException:
            os.dup2(_saved, 2)
            _captured.seek(0)
            sys.stderr.write(_captured.read().decode(errors="replace"))
            raise
        finally:
            os.dup2(_saved, 2)
            os.close(_saved)
