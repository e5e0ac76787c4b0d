"""A stand-in ``pynvml``: NVML sees one Tesla T4 (Colab's free GPU), whatever the machine has.

Put this folder first on ``PYTHONPATH`` (a kernel started with it inherits it) and every
NVML call in tfwb talks to ``tests/nvml_fakes.py's fake_nvml("one Tesla T4")`` instead of a
driver. With this repository's CPU build of TensorFlow, that is the reader who installed
``requirements.txt`` on a GPU machine: NVML sees a T4, TensorFlow cannot use it.

    PYTHONPATH=tests/standins/pynvml_t4 TFWB_FAST=1 python -m pytest --nbval-lax notebooks/00_measuring.ipynb
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))  # tests/
from nvml_fakes import standin_module  # noqa: E402

standin_module(globals(), "one Tesla T4")
