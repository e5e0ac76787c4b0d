"""Every NVML call in tfwb: the GPU probe, GPU inventory and driver version.

Owns all use of ``pynvml`` (package ``nvidia-ml-py``). NVML starts on first use, never at
import or construction. A field the driver refuses (``NVMLError``, e.g. NotSupported)
becomes ``None`` for that GPU instead of losing the sample. The ``nvml`` argument of each
entry point takes a stand-in module, so tests need no GPU (``tests/nvml_fakes.py``).
"""
from __future__ import annotations

import contextlib
import importlib
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple


def _load(nvml: Any) -> Any:
    """The pynvml module: the one given, else ``import pynvml`` (ImportError if absent)."""
    return nvml if nvml is not None else importlib.import_module("pynvml")


def _field(nv: Any, read: Callable[[], Any]) -> Any:
    """``read()``, or None when the driver refuses it (any ``NVMLError``)."""
    try:
        return read()
    except nv.NVMLError:
        return None


@contextlib.contextmanager
def _session(nv: Any) -> Iterator[None]:
    """nvmlInit for the block, nvmlShutdown after it (NVML counts inits, so this nests)."""
    nv.nvmlInit()
    try:
        yield
    finally:
        with contextlib.suppress(nv.NVMLError):
            nv.nvmlShutdown()


def _text(value: Any) -> Any:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value


def nvml_available(nvml: Any = None) -> bool:
    """Whether NVML works here and sees at least one GPU. Never raises.

    Args:
        nvml (module | None, default None): pynvml or a stand-in; ``None`` imports pynvml.

    Returns:
        False without the pynvml package, without a driver, or with no GPU; else True.

    Example:
        >>> isinstance(nvml_available(), bool)
        True
    """
    try:
        nv = _load(nvml)
        with _session(nv):
            return int(nv.nvmlDeviceGetCount()) > 0
    except Exception:  # noqa: BLE001 - "no" is the answer to every failure here
        return False


def gpu_info(nvml: Any = None) -> List[Dict[str, Any]]:
    """One dict per GPU that NVML sees.

    Args:
        nvml (module | None, default None): pynvml or a stand-in; ``None`` imports pynvml.

    Returns:
        ``[{"index": int, "name": str, "memory_total_mib": float,
        "compute_capability": (major, minor), "pci_bus_id": str}, ...]`` (the bus id as NVML
        writes it, ``"00000000:00:04.0"``; ``tfwb.hardware.normalize_pci_bus_id`` matches it
        to CUDA's), a field ``None`` where the driver refuses it; ``[]`` without pynvml,
        driver or GPU. NVML numbers GPUs itself and ignores ``CUDA_VISIBLE_DEVICES``.

    Example:
        >>> [g["name"] for g in gpu_info()]  # doctest: +SKIP
        ['NVIDIA H100 80GB HBM3']
    """
    try:
        nv = _load(nvml)
        with _session(nv):
            out = []
            for index in range(int(nv.nvmlDeviceGetCount())):
                handle = _field(nv, lambda: nv.nvmlDeviceGetHandleByIndex(index))
                if handle is None:
                    out.append({"index": index, "name": None, "memory_total_mib": None,
                                "compute_capability": None, "pci_bus_id": None})
                    continue
                cc = _field(nv, lambda: nv.nvmlDeviceGetCudaComputeCapability(handle))
                pci = _field(nv, lambda: nv.nvmlDeviceGetPciInfo(handle))
                out.append({
                    "index": index,
                    "name": _text(_field(nv, lambda: nv.nvmlDeviceGetName(handle))),
                    "memory_total_mib": _field(
                        nv, lambda: nv.nvmlDeviceGetMemoryInfo(handle).total / 2**20),
                    "compute_capability": tuple(int(x) for x in cc) if cc is not None else None,
                    "pci_bus_id": _text(getattr(pci, "busId", None)),
                })
            return out
    except Exception:  # noqa: BLE001 - no NVML means no GPUs to list
        return []


def driver_version(nvml: Any = None) -> Optional[str]:
    """The NVIDIA driver's version string, or None without NVML. Never raises.

    Example:
        >>> driver_version()  # doctest: +SKIP
        '580.159.04'
    """
    try:
        nv = _load(nvml)
        with _session(nv):
            return _text(nv.nvmlSystemGetDriverVersion())
    except Exception:  # noqa: BLE001
        return None


class NvmlProbe:
    """Per-GPU utilization and memory in use, through NVML.

    NVML is initialised on the first ``read()`` and shut down by ``close()``.

    Args:
        nvml (module | None, default None): pynvml or a stand-in for tests; ``None``
            imports pynvml on first read.

    Returns from ``read()``:
        ``gpu_util_pct`` (per GPU, % of the driver's sample period, about 200 ms, in which
        a kernel ran) and ``gpu_mem_used_mib`` (per GPU), ``None`` where refused.

    Raises:
        ImportError (from ``read``): pynvml is not installed.
        NVMLError (from ``read``): NVML cannot start (no driver); the next read tries again.

    Example:
        >>> probe = NvmlProbe()            # touches nothing yet
        >>> probe.read()                    # doctest: +SKIP
        {'gpu_util_pct': (97.0,), 'gpu_mem_used_mib': (4613.0,)}
        >>> probe.close()
    """

    def __init__(self, nvml: Any = None) -> None:
        self._nvml_arg = nvml
        self._nv: Any = None
        self._handles: Optional[Tuple[Any, ...]] = None

    def _start(self) -> Tuple[Any, ...]:
        if self._handles is None:
            nv = _load(self._nvml_arg)
            nv.nvmlInit()
            try:
                count = int(nv.nvmlDeviceGetCount())
                handles = tuple(_field(nv, lambda i=i: nv.nvmlDeviceGetHandleByIndex(i))
                                for i in range(count))
            except BaseException:
                with contextlib.suppress(nv.NVMLError):
                    nv.nvmlShutdown()
                raise
            self._nv, self._handles = nv, handles  # close() now owes one nvmlShutdown
        return self._handles

    def read(self) -> Dict[str, Any]:
        handles = self._start()
        nv = self._nv
        util: List[Optional[float]] = []
        mem: List[Optional[float]] = []
        for h in handles:
            if h is None:
                util.append(None)
                mem.append(None)
                continue
            util.append(_field(nv, lambda: float(nv.nvmlDeviceGetUtilizationRates(h).gpu)))
            mem.append(_field(nv, lambda: nv.nvmlDeviceGetMemoryInfo(h).used / 2**20))
        return {"gpu_util_pct": tuple(util), "gpu_mem_used_mib": tuple(mem)}

    def close(self) -> None:
        """Shut NVML down if this probe started it. Idempotent."""
        nv, self._nv, self._handles = self._nv, None, None
        if nv is not None:
            with contextlib.suppress(nv.NVMLError):
                nv.nvmlShutdown()
