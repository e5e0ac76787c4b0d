"""A stand-in ``pynvml``: NVML sees an A100 in MIG mode and refuses its utilization.

Put this folder first on ``PYTHONPATH``: every NVML call in tfwb talks to
``tests/nvml_fakes.py's fake_nvml("A100 MIG slice")``, where ``nvmlDeviceGetUtilizationRates``
raises ``NVMLError_NotSupported`` (as NVML does on MIG slices and some vGPUs), so every
utilization sample has ``None`` for the GPU. The chapters must run to their end anyway.

    PYTHONPATH=tests/standins/pynvml_mig TFWB_FAST=1 python -m pytest --nbval-lax notebooks/00_measuring.ipynb
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))  # tests/
from nvml_fakes import standin_module  # noqa: E402

standin_module(globals(), "A100 MIG slice")
