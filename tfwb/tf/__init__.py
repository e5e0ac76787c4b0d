"""Everything in tfwb that imports TensorFlow: data, models, strategies, the runner.

Importing this package imports TensorFlow (a few seconds). It quiets TF's C++
logging unless ``TF_CPP_MIN_LOG_LEVEL`` is already set.
"""
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
