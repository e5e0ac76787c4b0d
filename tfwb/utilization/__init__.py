"""Utilization monitoring: probes that read CPU/GPU use, and the background Sampler.

Owns everything that watches the machine while a run trains. Pure of TensorFlow,
IPython, widgets and matplotlib; NVML is touched only in ``tfwb.nvml``.
Stand-ins for tests (a fake NVML, a scripted probe) live in ``tests/nvml_fakes.py``,
outside the installed package.

Example:
    >>> from tfwb.utilization import Sampler
    >>> class Rss:                  # a probe: read() returns Sample fields; close() at stop
    ...     def read(self): return {"rss_mib": 1.0}
    ...     def close(self): pass
    >>> s = Sampler(probes=[Rss()])
    >>> s.tick().rss_mib        # one sample now, on this thread; start() samples in the background
    1.0
    >>> len(s.stop())
    1
"""
from __future__ import annotations

from tfwb.nvml import NvmlProbe, driver_version, gpu_info, nvml_available
from tfwb.utilization.pressure import start_delay_probe
from tfwb.utilization.probes import Probe, PsutilProbe, other_programs_cpu_pct, start_load_probe
from tfwb.utilization.sampler import MIN_INTERVAL_S, THREAD_NAME, Sampler, default_probes, sampler_threads

__all__ = [
    "Probe", "PsutilProbe", "start_load_probe", "start_delay_probe", "other_programs_cpu_pct", "NvmlProbe", "nvml_available", "gpu_info", "driver_version",
    "Sampler", "default_probes", "sampler_threads", "MIN_INTERVAL_S", "THREAD_NAME",
]
