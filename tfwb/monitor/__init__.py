"""Utilization monitoring: probes that read CPU/GPU use, and the background Sampler.

Owns everything that watches the machine while a run trains. Pure of TensorFlow,
IPython, widgets and matplotlib; NVML is touched only in ``tfwb.nvml``.
Stand-ins for tests (a fake NVML, a scripted probe) live in ``tfwb.monitor.fakes``
and are not part of this package's public names.

Example:
    >>> from tfwb.monitor import Sampler
    >>> from tfwb.monitor.fakes import FakeProbe
    >>> s = Sampler(probes=[FakeProbe([{"rss_mib": 1.0}])])
    >>> s.tick().rss_mib        # one sample now, on this thread; start() samples in the background
    1.0
    >>> len(s.stop())
    1
"""
from __future__ import annotations

from tfwb.nvml import NvmlProbe, driver_version, gpu_info, nvml_available
from tfwb.monitor.probes import Probe, PsutilProbe
from tfwb.monitor.sampler import MIN_INTERVAL_S, THREAD_NAME, Sampler, default_probes, sampler_threads

__all__ = [
    "Probe", "PsutilProbe", "NvmlProbe", "nvml_available", "gpu_info", "driver_version",
    "Sampler", "default_probes", "sampler_threads", "MIN_INTERVAL_S", "THREAD_NAME",
]
