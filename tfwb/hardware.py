"""What machine this is: CPU, RAM, GPUs, a TPU, and which notebook service runs it.

Owns hardware and environment detection for run fingerprints and the UI's header line.
Cheap and pure of TensorFlow: GPUs come from NVML (``tfwb.nvml``), a TPU only
from environment variables and device files. Nothing here raises on an unusual machine;
what cannot be read is ``None`` or empty.
"""
from __future__ import annotations

import glob
import os
import platform
import re
import sys
import threading
from dataclasses import asdict, dataclass, fields, replace
from typing import Any, Dict, List, Mapping, Optional, Tuple, Union

from tfwb import nvml


@dataclass(frozen=True)
class Gpu:
    """One GPU as NVML describes it; a field the driver refuses is ``None``.

    Example:
        >>> Gpu(0, "Tesla T4", 15360.0, (7, 5)).compute_capability
        (7, 5)
    """

    index: int
    name: Optional[str] = None
    memory_total_mib: Optional[float] = None
    compute_capability: Optional[Tuple[int, int]] = None

    @classmethod
    def of(cls, value: Union["Gpu", Mapping[str, Any]]) -> "Gpu":
        """A Gpu from a Gpu or from ``nvml.gpu_info()``'s dict shape."""
        if isinstance(value, Gpu):
            return value
        cc = value.get("compute_capability")
        return cls(index=int(value.get("index", 0)), name=value.get("name"),
                   memory_total_mib=value.get("memory_total_mib"),
                   compute_capability=tuple(int(x) for x in cc) if cc is not None else None)


@dataclass(frozen=True)
class Machine:
    """What this machine is: what ``detect()`` returns and ``DESCRIBED`` holds.

    Attributes:
        cpu_count: cores this process may use (``None`` when unknown).
        cpu_model: the CPU's model name, or ``None``.
        cpu_flags: feature flags from ``/proc/cpuinfo`` (lower case, sorted).
        memory_total_mib: RAM, or ``None``.
        gpus: the GPUs NVML sees.
        tpu: whether a TPU looks attached.
        environment: ``"colab"``, ``"kaggle"``, ``"binder"`` or ``"local"``.
        python, platform: versions, for fingerprints.

    Example:
        >>> m = Machine.of({"cpu_count": 2, "gpus": [{"index": 0, "name": "Tesla T4"}]})
        >>> m.cpu_count, m.gpus[0].name, m.tpu
        (2, 'Tesla T4', False)
    """

    cpu_count: Optional[int] = None
    cpu_model: Optional[str] = None
    cpu_flags: Tuple[str, ...] = ()
    memory_total_mib: Optional[float] = None
    gpus: Tuple[Gpu, ...] = ()
    tpu: bool = False
    environment: str = "local"
    python: str = ""
    platform: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "cpu_flags", tuple(str(f).lower() for f in self.cpu_flags or ()))
        object.__setattr__(self, "gpus", tuple(Gpu.of(g) for g in self.gpus or ()))

    @classmethod
    def of(cls, value: Union["Machine", Mapping[str, Any], None]) -> "Machine":
        """A Machine from a Machine, a mapping in ``detect()``'s old dict shape (missing fields
        take their defaults; unknown ones are ignored), or ``None`` (an unknown machine).

        Raises:
            ValueError: for a value that is none of those.
        """
        if isinstance(value, Machine):
            return value
        if value is None:
            return cls()
        if not isinstance(value, Mapping):
            raise ValueError(f"hardware={value!r} is not allowed; give a tfwb.hardware.Machine "
                             "(tfwb.detect_hardware()) or a mapping of its fields")
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in value.items() if k in names and v is not None})

    def replace(self, **changes: Any) -> "Machine":
        """A copy with ``changes`` (e.g. ``gpus=()`` for "the same host without its GPU")."""
        return replace(self, **changes)

    def to_dict(self) -> Dict[str, Any]:
        """JSON-ready fields (tuples as lists)."""
        d = asdict(self)
        d["cpu_flags"] = list(self.cpu_flags)
        d["gpus"] = [dict(g, compute_capability=list(g["compute_capability"])
                          if g["compute_capability"] is not None else None) for g in d["gpus"]]
        return d

    @property
    def compute_capability(self) -> Optional[Tuple[int, int]]:
        """The best compute capability among the GPUs (``None`` without one that reports it)."""
        ccs = [g.compute_capability for g in self.gpus if g.compute_capability is not None]
        return max(ccs) if ccs else None


#: What functions that read a machine accept: a Machine, or a mapping of its fields
#: (``Machine.of`` turns it into one; tests and callers pass ``{}`` for "unknown").
MachineLike = Union[Machine, Mapping[str, Any]]

#: Machines the book describes, in ``detect()``'s shape, so that hardware-dependent code
#: (``tfwb.expect.expected_for``, ``tfwb.diagnosis.expectations``) is tested on each
#: without owning one. Flags are the ones ``/proc/cpuinfo`` lists on such machines
#: (shortened to those that matter here).
_DESCRIBED: Dict[str, Dict[str, Any]] = {
    # mybinder.org and small cloud VMs: AMD EPYC (Zen 2), AVX2, no AVX-512.
    "binder-2core-avx2": {
        "cpu_count": 2, "cpu_model": "AMD EPYC 7B12 64-Core Processor",
        "cpu_flags": ("avx", "avx2", "f16c", "fma", "sse4_2"),
        "memory_total_mib": 8192.0, "gpus": [], "tpu": False, "environment": "binder",
        "python": "3.12", "platform": "Linux-x86_64"},
    # The AVX-512 build machine of FACTS.md: AMD EPYC (Zen 4), AVX-512 with BF16, no FP16, no AMX.
    "cpu-2core-avx512-bf16": {
        "cpu_count": 2, "cpu_model": "AMD EPYC 9B14 96-Core Processor",
        "cpu_flags": ("avx", "avx2", "avx512_bf16", "avx512_vnni", "avx512bw", "avx512f", "avx512vl",
                      "f16c", "fma", "sse4_2"),
        "memory_total_mib": 8192.0, "gpus": [], "tpu": False, "environment": "local",
        "python": "3.12", "platform": "Linux-x86_64"},
    # Intel Xeon 4th gen (Sapphire Rapids): AVX-512 with BF16 and FP16, AMX.
    "cpu-2core-avx512-amx": {
        "cpu_count": 2, "cpu_model": "Intel(R) Xeon(R) Platinum 8481C CPU @ 2.70GHz",
        "cpu_flags": ("amx_bf16", "amx_int8", "amx_tile", "avx", "avx2", "avx512_bf16", "avx512_fp16",
                      "avx512_vnni", "avx512bw", "avx512f", "avx512vl", "f16c", "fma", "sse4_2"),
        "memory_total_mib": 8192.0, "gpus": [], "tpu": False, "environment": "local",
        "python": "3.12", "platform": "Linux-x86_64"},
    # Colab's free GPU runtime: 2 vCPUs (AVX-512, no BF16) and a Tesla T4 (Turing).
    "colab-t4": {
        "cpu_count": 2, "cpu_model": "Intel(R) Xeon(R) CPU @ 2.00GHz",
        "cpu_flags": ("avx", "avx2", "avx512bw", "avx512f", "avx512vl", "f16c", "fma", "sse4_2"),
        "memory_total_mib": 12976.0,
        "gpus": [{"index": 0, "name": "Tesla T4", "memory_total_mib": 15360.0,
                  "compute_capability": (7, 5)}],
        "tpu": False, "environment": "colab", "python": "3.12", "platform": "Linux-x86_64"},
    # Colab's A100 runtime (Ampere).
    "a100": {
        "cpu_count": 12, "cpu_model": "Intel(R) Xeon(R) CPU @ 2.20GHz",
        "cpu_flags": ("avx", "avx2", "avx512bw", "avx512f", "avx512vl", "f16c", "fma", "sse4_2"),
        "memory_total_mib": 85000.0,
        "gpus": [{"index": 0, "name": "NVIDIA A100-SXM4-40GB", "memory_total_mib": 40960.0,
                  "compute_capability": (8, 0)}],
        "tpu": False, "environment": "colab", "python": "3.12", "platform": "Linux-x86_64"},
    # A cloud H100 machine (Hopper) with a Sapphire Rapids host.
    "h100": {
        "cpu_count": 16, "cpu_model": "Intel(R) Xeon(R) Platinum 8480+",
        "cpu_flags": ("amx_bf16", "amx_int8", "amx_tile", "avx", "avx2", "avx512_bf16", "avx512_fp16",
                      "avx512_vnni", "avx512bw", "avx512f", "avx512vl", "f16c", "fma", "sse4_2"),
        "memory_total_mib": 131072.0,
        "gpus": [{"index": 0, "name": "NVIDIA H100 80GB HBM3", "memory_total_mib": 81559.0,
                  "compute_capability": (9, 0)}],
        "tpu": False, "environment": "local", "python": "3.12", "platform": "Linux-x86_64"},
    # A Colab TPU runtime: a TPU VM (v2-8), a large AVX-512 host, no GPU.
    "tpu-vm": {
        "cpu_count": 96, "cpu_model": "Intel(R) Xeon(R) CPU @ 2.00GHz",
        "cpu_flags": ("avx", "avx2", "avx512bw", "avx512f", "avx512vl", "f16c", "fma", "sse4_2"),
        "memory_total_mib": 342000.0, "gpus": [], "tpu": True, "environment": "colab",
        "python": "3.12", "platform": "Linux-x86_64"},
}
DESCRIBED: Dict[str, Machine] = {name: Machine.of(fields_) for name, fields_ in _DESCRIBED.items()}

_lock = threading.Lock()
_cached: Optional[Machine] = None


def detect(refresh: bool = False) -> Machine:
    """Describe this machine; cached after the first call.

    Args:
        refresh (bool, default False): look again instead of returning the cached answer.

    Returns:
        A ``Machine`` (immutable): ``cpu_count`` (cores this process may use), ``cpu_model``,
        ``cpu_flags`` (empty without /proc/cpuinfo), ``memory_total_mib``, ``gpus`` (what
        NVML sees, as ``Gpu`` records), ``tpu``, ``environment`` (``"colab"``, ``"kaggle"``,
        ``"binder"`` or ``"local"``), ``python`` and ``platform``.

    Example:
        >>> hw = detect()
        >>> hw.environment in ("colab", "kaggle", "binder", "local")
        True
    """
    global _cached
    with _lock:
        if _cached is None or refresh:
            _cached = _detect()
        return _cached


def _detect() -> Machine:
    cpu_model, cpu_flags = parse_cpuinfo(_read_text("/proc/cpuinfo"))
    gpus = nvml.gpu_info()
    return Machine.of({
        "cpu_count": _cpu_count(),
        "cpu_model": cpu_model or platform.processor() or platform.machine() or None,
        "cpu_flags": cpu_flags,
        "memory_total_mib": _memory_total_mib(),
        "gpus": gpus,
        "tpu": detect_tpu(has_gpu=bool(gpus)),
        "environment": detect_environment(),
        "python": platform.python_version(),
        "platform": platform.platform(),
    })


def _read_text(path: str) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read()
    except OSError:
        return ""


def _cpu_count() -> Optional[int]:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count()


def _memory_total_mib() -> Optional[float]:
    try:
        import psutil

        return psutil.virtual_memory().total / 2**20
    except Exception:  # noqa: BLE001 - psutil missing or refused: unknown
        return None


def parse_cpuinfo(text: str) -> Tuple[Optional[str], Tuple[str, ...]]:
    """The CPU model and feature flags from the text of ``/proc/cpuinfo``.

    Reads the first processor's block: ``model name`` and ``flags`` on x86; on Arm,
    ``Hardware``/``Processor``/``model name`` and ``Features``.

    Args:
        text (str): the file's content; ``""`` where there is none.

    Returns:
        ``(model or None, flags)``; flags sorted, lower case, no duplicates.

    Example:
        >>> parse_cpuinfo("model name\\t: Intel(R) Xeon(R) CPU @ 2.20GHz\\nflags\\t: sse avx2\\n")
        ('Intel(R) Xeon(R) CPU @ 2.20GHz', ('avx2', 'sse'))
    """
    model: Optional[str] = None
    flags: Tuple[str, ...] = ()
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if not sep:
            continue
        key, value = key.strip().lower(), value.strip()
        if key in ("model name", "hardware", "processor", "cpu model") and model is None:
            if value and not value.isdigit():  # x86 "processor : 0" is an index, not a name
                model = value
        elif key in ("flags", "features") and not flags:
            flags = tuple(sorted(set(value.lower().split())))
    return model, flags


def detect_tpu(environ: Optional[Mapping[str, str]] = None, dev_dir: str = "/dev",
               has_gpu: bool = False) -> bool:
    """Whether a TPU looks attached, by cheap checks only (TensorFlow is not imported).

    True when ``TPU_NAME`` or ``COLAB_TPU_ADDR`` is set, when ``/dev/accel*`` exists
    (TPU VMs up to v4), or when ``/dev/vfio`` holds device groups (v5e and later) on a
    machine with no NVIDIA GPU (GPU passthrough VMs have ``/dev/vfio`` too).

    Args:
        environ (mapping | None, default None): environment to read; ``None`` is os.environ.
        dev_dir (str, default "/dev"): where device files live (for tests).
        has_gpu (bool, default False): whether NVML found a GPU.

    Example:
        >>> detect_tpu({"TPU_NAME": "local"}, dev_dir="/nonexistent")
        True
    """
    env = os.environ if environ is None else environ
    if env.get("TPU_NAME") or env.get("COLAB_TPU_ADDR"):
        return True
    if glob.glob(os.path.join(dev_dir, "accel*")):
        return True
    try:
        groups = [n for n in os.listdir(os.path.join(dev_dir, "vfio")) if n != "vfio"]
    except OSError:
        groups = []
    return bool(groups) and not has_gpu


def detect_environment(environ: Optional[Mapping[str, str]] = None,
                       modules: Optional[Mapping[str, Any]] = None) -> str:
    """Which notebook service this runs on.

    Args:
        environ (mapping | None, default None): environment to read; ``None`` is os.environ.
        modules (mapping | None, default None): imported modules; ``None`` is sys.modules.

    Returns:
        ``"colab"`` (``google.colab`` imported or ``COLAB_RELEASE_TAG`` set), ``"kaggle"``
        (``KAGGLE_KERNEL_RUN_TYPE``), ``"binder"`` (a ``BINDER_*`` variable, or a
        ``JUPYTERHUB_SERVICE_PREFIX`` that names binder), else ``"local"``.

    Example:
        >>> detect_environment({"KAGGLE_KERNEL_RUN_TYPE": "Interactive"}, {})
        'kaggle'
    """
    env = os.environ if environ is None else environ
    mods = sys.modules if modules is None else modules
    if "google.colab" in mods or env.get("COLAB_RELEASE_TAG"):
        return "colab"
    if env.get("KAGGLE_KERNEL_RUN_TYPE"):
        return "kaggle"
    if (any(k.startswith("BINDER_") and v for k, v in env.items())
            or "binder" in env.get("JUPYTERHUB_SERVICE_PREFIX", "").lower()):
        return "binder"
    return "local"


def short_cpu_model(model: Optional[str]) -> Optional[str]:
    """A CPU model without trademarks, clock and filler words.

    Example:
        >>> short_cpu_model("Intel(R) Xeon(R) CPU @ 2.20GHz")
        'Intel Xeon'
        >>> short_cpu_model("AMD EPYC 7B12 64-Core Processor")
        'AMD EPYC 7B12'
    """
    if not model:
        return None
    text = re.sub(r"\((R|TM|tm|r)\)", "", model)
    text = re.sub(r"@.*$", "", text)
    text = re.sub(r"\b(CPU|Processor|\d+-Core)\b", "", text)
    return " ".join(text.split()) or model


def _notable_flags(flags: Tuple[str, ...]) -> List[str]:
    out = []
    if "avx512f" in flags:
        out.append("AVX-512")
    elif "avx2" in flags:
        out.append("AVX2")
    if "avx512_bf16" in flags or "amx_bf16" in flags:
        out.append("BF16")
    if "avx512_fp16" in flags or "amx_fp16" in flags:
        out.append("FP16")
    if "amx_tile" in flags:
        out.append("AMX")
    return out


def _gib(mib: Optional[float]) -> str:
    return f"{mib / 1024:.0f} GiB" if mib else "? GiB"


def describe(hw: MachineLike) -> str:
    """One line about the machine, for headers and reports.

    Args:
        hw (Machine | mapping): what ``detect()`` returns (or a mapping of its fields).

    Returns:
        e.g. ``"2 CPU cores (Intel Xeon, AVX-512), 24 GiB RAM, no GPU, local"``.

    Example:
        >>> describe({"cpu_count": 2, "cpu_model": "Intel(R) Xeon(R) CPU @ 2.20GHz",
        ...           "cpu_flags": ("avx512f",), "memory_total_mib": 24576, "gpus": [],
        ...           "tpu": False, "environment": "local"})
        '2 CPU cores (Intel Xeon, AVX-512), 24 GiB RAM, no GPU, local'
    """
    hw = Machine.of(hw)
    cores = hw.cpu_count
    cpu = f"{cores} CPU core{'' if cores == 1 else 's'}" if cores else "CPU"
    details = [d for d in [short_cpu_model(hw.cpu_model)] + _notable_flags(hw.cpu_flags) if d]
    if details:
        cpu += f" ({', '.join(details)})"
    parts = [cpu, f"{_gib(hw.memory_total_mib)} RAM"]
    gpus = hw.gpus
    if not gpus:
        parts.append("no GPU")
    else:
        names = [g.name or "unknown GPU" for g in gpus]
        first = names[0]
        label = first if all(n == first for n in names) else " + ".join(sorted(set(names)))
        mem = gpus[0].memory_total_mib
        count = f"{len(gpus)}× " if len(gpus) > 1 else ""
        parts.append(f"{count}{label}" + (f" ({_gib(mem)})" if mem else ""))
    if hw.tpu:
        parts.append("TPU")
    parts.append(hw.environment or "local")
    return ", ".join(parts)
