"""A stand-in ``pynvml``: NVML sees a Tesla T4 and an A100 MIG slice, and refuses the slice's utilization.

Put this folder first on ``PYTHONPATH``: every NVML call in tfwb talks to
``tests/nvml_fakes.py's fake_nvml("Tesla T4 and A100 MIG slice")``. With this repository's CPU
build of TensorFlow neither GPU is usable (the reader who installed requirements.txt on a GPU
machine), and every utilization sample has ``None`` for the slice (NVML's NotSupported on MIG
and some vGPUs). The test command runs every chapter once under it (tests/run_all.py), so both
situations of issue 17 are proven by one run of each chapter.

    PYTHONPATH=tests/standins/pynvml_t4_mig TFWB_FAST=1 python -m pytest --nbval-lax notebooks
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))  # tests/
from nvml_fakes import standin_module  # noqa: E402

standin_module(globals(), "Tesla T4 and A100 MIG slice")
