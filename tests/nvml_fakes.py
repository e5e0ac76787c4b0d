"""Stand-ins for tests and dry runs: a fake ``pynvml`` module and a fake probe.

Kept in tests/, outside the installed package: tests import them as ``from nvml_fakes import ...``
(tests/conftest.py puts this folder on ``sys.path``); benchmarks and the stand-in ``pynvml``
modules of tests/standins put it there themselves. ``fake_nvml(scenario)`` builds
named NVML scenarios ("no driver", "no GPU", "two healthy GPUs", "one GPU failing")
so tests need no GPU; ``FakeProbe`` returns scripted readings to a ``Sampler``.

Example:
    >>> from tfwb.utilization import Sampler
    >>> s = Sampler(probes=[FakeProbe([{"rss_mib": 1.0}, {"rss_mib": 2.0}])], clock=iter([0.0, 0.5]).__next__)
    >>> [s.tick().rss_mib, s.tick().rss_mib]
    [1.0, 2.0]
    >>> _ = s.stop()
"""
from __future__ import annotations

import threading
import time
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

from tfwb.nvml import NvmlProbe, nvml_available  # noqa: F401 - used in the examples


# -- a stand-in for pynvml ---------------------------------------------------------------
class FakeNVMLError(Exception):
    """The stand-in's ``NVMLError``."""


class FakeNVMLError_NotSupported(FakeNVMLError):  # noqa: N801 - mirrors pynvml's name
    """The stand-in's ``NVMLError_NotSupported``."""


class FakeNVMLError_DriverNotLoaded(FakeNVMLError):  # noqa: N801
    """The stand-in's ``NVMLError_DriverNotLoaded``."""


class _Struct:
    def __init__(self, **kw: Any) -> None:
        self.__dict__.update(kw)


class FakeNvml:
    """A stand-in for the ``pynvml`` module, with the calls tfwb makes.

    Pass it as ``nvml=`` (or put it in ``sys.modules["pynvml"]``). Build one with
    ``fake_nvml(scenario)`` or directly.

    Args:
        gpus (sequence of dict, default ()): one dict per GPU with keys ``name``,
            ``util_pct``, ``mem_used_mib``, ``mem_total_mib``, ``compute_capability``,
            ``pci_bus_id`` (default ``"00000000:<index + 1>:00.0"``) and ``refuse`` (a set of
            ``"util"``, ``"mem"``, ``"name"``, ``"cc"``, ``"pci"``: calls that raise
            ``NVMLError_NotSupported`` for that GPU).
        init_error (Exception | None, default None): what ``nvmlInit`` raises.
        driver (str, default "580.00.00"): what ``nvmlSystemGetDriverVersion`` returns.

    Attributes:
        init_calls, shutdown_calls (int): how often NVML was started and shut down.

    Example:
        >>> nv = fake_nvml("two healthy GPUs")
        >>> probe = NvmlProbe(nvml=nv)
        >>> probe.read()["gpu_util_pct"]
        (35.0, 80.0)
        >>> probe.close(); (nv.init_calls, nv.shutdown_calls)
        (1, 1)
    """

    NVMLError = FakeNVMLError
    NVMLError_NotSupported = FakeNVMLError_NotSupported
    NVMLError_DriverNotLoaded = FakeNVMLError_DriverNotLoaded

    def __init__(self, gpus: Any = (), init_error: Optional[BaseException] = None,
                 driver: str = "580.00.00") -> None:
        self.gpus = [dict(g) for g in gpus]
        self.init_error = init_error
        self.driver = driver
        self.init_calls = 0
        self.shutdown_calls = 0

    def _gpu(self, handle: Any, call: str) -> Dict[str, Any]:
        if self.init_calls <= self.shutdown_calls:
            raise FakeNVMLError("Uninitialized")
        gpu = self.gpus[handle]
        if call in gpu.get("refuse", ()):
            raise FakeNVMLError_NotSupported("Not Supported")
        return gpu

    def nvmlInit(self) -> None:  # noqa: N802 - pynvml's names
        if self.init_error is not None:
            raise self.init_error
        self.init_calls += 1

    def nvmlShutdown(self) -> None:  # noqa: N802
        if self.init_calls <= self.shutdown_calls:
            raise FakeNVMLError("Uninitialized")
        self.shutdown_calls += 1

    def nvmlDeviceGetCount(self) -> int:  # noqa: N802
        if self.init_calls <= self.shutdown_calls:
            raise FakeNVMLError("Uninitialized")
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:  # noqa: N802
        self._gpu(index, "handle")
        return index

    def nvmlDeviceGetUtilizationRates(self, handle: int) -> Any:  # noqa: N802
        g = self._gpu(handle, "util")
        return _Struct(gpu=g.get("util_pct", 0), memory=0)

    def nvmlDeviceGetMemoryInfo(self, handle: int) -> Any:  # noqa: N802
        g = self._gpu(handle, "mem")
        total = g.get("mem_total_mib", 81559) * 2**20
        used = g.get("mem_used_mib", 0) * 2**20
        return _Struct(total=total, used=used, free=total - used)

    def nvmlDeviceGetName(self, handle: int) -> Any:  # noqa: N802
        return self._gpu(handle, "name").get("name", "Fake GPU")

    def nvmlDeviceGetCudaComputeCapability(self, handle: int) -> Tuple[int, int]:  # noqa: N802
        return tuple(self._gpu(handle, "cc").get("compute_capability", (9, 0)))

    def nvmlDeviceGetPciInfo(self, handle: int) -> Any:  # noqa: N802
        g = self._gpu(handle, "pci")
        return _Struct(busId=g.get("pci_bus_id", f"00000000:{handle + 1:02X}:00.0").encode())

    def nvmlSystemGetDriverVersion(self) -> str:  # noqa: N802
        if self.init_calls <= self.shutdown_calls:
            raise FakeNVMLError("Uninitialized")
        return self.driver


#: The named scenarios of ``fake_nvml``.
SCENARIOS = ("no driver", "no GPU", "two healthy GPUs", "one GPU failing", "one Tesla T4",
             "A100 MIG slice", "Tesla T4 and A100 MIG slice")


def fake_nvml(scenario: str) -> FakeNvml:
    """A fresh ``FakeNvml`` for a named scenario.

    Args:
        scenario (str): ``"no driver"`` (nvmlInit raises DriverNotLoaded), ``"no GPU"``
            (NVML starts, zero devices), ``"two healthy GPUs"`` (H100 at 35 % with 1024 MiB
            used, bytes name; H100 at 80 % with 2048 MiB used) or ``"one GPU failing"``
            (the same two, but the second refuses utilization and compute capability),
            ``"one Tesla T4"`` (Colab's free GPU: 15360 MiB, compute capability 7.5, 0 %
            busy, bus 0000:00:04.0) or ``"A100 MIG slice"`` (an A100 in MIG mode, whose
            utilization NVML refuses with NotSupported, as it does for MIG and some vGPUs), or
            ``"Tesla T4 and A100 MIG slice"`` (both at once: the test command runs every
            chapter once under it, so each of the two situations is proven by one run).

    Raises:
        ValueError: an unknown scenario name.

    Example:
        >>> nvml_available(fake_nvml("no driver"))
        False
    """
    healthy = [
        {"name": b"NVIDIA H100 80GB HBM3", "util_pct": 35, "mem_used_mib": 1024,
         "mem_total_mib": 81559, "compute_capability": (9, 0)},
        {"name": "NVIDIA H100 80GB HBM3", "util_pct": 80, "mem_used_mib": 2048,
         "mem_total_mib": 81559, "compute_capability": (9, 0)},
    ]
    if scenario == "no driver":
        return FakeNvml(init_error=FakeNVMLError_DriverNotLoaded("Driver Not Loaded"))
    if scenario == "no GPU":
        return FakeNvml()
    if scenario == "two healthy GPUs":
        return FakeNvml(healthy)
    t4 = {"name": "Tesla T4", "util_pct": 0, "mem_used_mib": 0, "mem_total_mib": 15360,
          "compute_capability": (7, 5), "pci_bus_id": "00000000:00:04.0"}
    mig = {"name": "NVIDIA A100-SXM4-40GB", "mem_used_mib": 13, "mem_total_mib": 40960,
           "compute_capability": (8, 0), "pci_bus_id": "00000000:00:05.0", "refuse": {"util"}}
    if scenario == "one Tesla T4":
        return FakeNvml([t4], driver="550.54.15")
    if scenario == "A100 MIG slice":
        return FakeNvml([mig], driver="550.54.15")
    if scenario == "Tesla T4 and A100 MIG slice":
        return FakeNvml([t4, mig], driver="550.54.15")
    if scenario == "one GPU failing":
        healthy[1]["refuse"] = {"util", "cc"}
        return FakeNvml(healthy)
    raise ValueError(f"scenario={scenario!r} is not allowed; one of {SCENARIOS}")


def standin_module(namespace: dict, scenario: str) -> None:
    """Turn a module's globals into a stand-in ``pynvml`` answering as ``fake_nvml(scenario)``.

    For a folder put first on ``PYTHONPATH`` (tests/standins/): its ``pynvml.py`` calls
    ``standin_module(globals(), "one Tesla T4")`` and every NVML call in tfwb, in that
    process and the kernels it starts, talks to the fake instead of a driver.

    Example:
        >>> ns = {}
        >>> standin_module(ns, "A100 MIG slice")
        >>> ns["__getattr__"]("nvmlInit")()
        >>> ns["STANDIN"], ns["__getattr__"]("nvmlDeviceGetCount")()
        ('A100 MIG slice', 1)
    """
    nv = fake_nvml(scenario)
    namespace.update(NVMLError=nv.NVMLError, NVMLError_NotSupported=nv.NVMLError_NotSupported,
                     NVMLError_DriverNotLoaded=nv.NVMLError_DriverNotLoaded, STANDIN=scenario)
    namespace["__getattr__"] = lambda name: getattr(nv, name)   # pynvml's functions: nvmlInit, ...


# -- a probe with scripted readings ------------------------------------------------------
class FakeProbe:
    """A probe that returns given values, for tests and dry runs.

    Args:
        values (sequence of dict | callable(t_s) -> dict): a sequence is returned one
            item per read, the last repeating once it runs out; an item that is an
            exception is raised instead. A callable gets ``clock()`` and returns the dict.
        clock (callable() -> float | None, default None): seconds for a callable ``values``;
            ``None`` is seconds since this probe was built.

    Attributes:
        reads (int): how many times ``read()`` ran.
        read_threads (list of str): the name of the thread of each read.
        closed (bool): whether ``close()`` ran.

    Raises:
        ValueError: ``values`` is an empty sequence.

    Example:
        >>> probe = FakeProbe([{"rss_mib": 1.0}, RuntimeError("gone")])
        >>> probe.read()
        {'rss_mib': 1.0}
    """

    def __init__(self, values: Union[Sequence[Any], Callable[[float], Dict[str, Any]]],
                 clock: Optional[Callable[[], float]] = None) -> None:
        if callable(values):
            self._fn: Optional[Callable[[float], Dict[str, Any]]] = values
            self._values: List[Any] = []
        else:
            self._fn = None
            self._values = list(values)
            if not self._values:
                raise ValueError("values must hold at least one dict (got an empty sequence)")
        if clock is None:
            t0_ns = time.perf_counter_ns()
            clock = lambda: (time.perf_counter_ns() - t0_ns) / 1e9  # noqa: E731
        self._clock = clock
        self.reads = 0
        self.read_threads: List[str] = []
        self.closed = False

    def read(self) -> Dict[str, Any]:
        self.read_threads.append(threading.current_thread().name)
        if self._fn is not None:
            value = self._fn(self._clock())
        else:
            value = self._values[min(self.reads, len(self._values) - 1)]
        self.reads += 1
        if isinstance(value, BaseException):
            raise value
        return dict(value)

    def close(self) -> None:
        self.closed = True
