"""Utilization monitoring: probes that read CPU/GPU use, and the background Sampler.

Owns everything that watches the machine while a run trains. Pure of TensorFlow,
IPython, widgets and matplotlib; NVML is touched only in ``tfwb.monitor.nvml``.

Example:
    >>> from tfwb.monitor import Sampler, FakeProbe
    >>> with Sampler(interval_s=0.05, probes=[FakeProbe([{"rss_mib": 1.0}])]) as s:
    ...     pass
    >>> len(s.samples) >= 2
    True
"""
from __future__ import annotations

from .nvml import FakeNvml, NvmlProbe, driver_version, fake_nvml, gpu_info, nvml_available
from .probes import FakeProbe, Probe, PsutilProbe
from .sampler import MIN_INTERVAL_S, THREAD_NAME, Sampler, default_probes, sampler_threads

__all__ = [
    "Probe", "PsutilProbe", "FakeProbe", "NvmlProbe", "nvml_available", "gpu_info",
    "driver_version", "FakeNvml", "fake_nvml",
    "Sampler", "default_probes", "sampler_threads", "MIN_INTERVAL_S", "THREAD_NAME",
]
