"""What machine this is: CPU, RAM, GPUs, a TPU, and which notebook service runs it.

Owns hardware and environment detection for run fingerprints and the UI's header line,
and the rule that says which GPUs a step can run on. The CPU's model, microarchitecture and
flags are read by ``tfwb.cpu_features`` (the OS's list and archspec); its names
``parse_cpuinfo``, ``parse_sysctl`` and ``short_cpu_model`` import from here too. Two views of the GPUs meet here:

- NVML's (``tfwb.nvml``): every NVIDIA GPU the driver sees, numbered by the driver and
  blind to ``CUDA_VISIBLE_DEVICES``. It is what utilization is sampled from.
- TensorFlow's: the GPUs TensorFlow can use. Only ``tfwb.tf.runner.devices.machine()``
  asks TensorFlow; it hands its answer to ``with_tensorflow_view`` here, which matches the
  two views by PCI bus id and says in plain words (``Machine.gpu_problem``) why a GPU that
  NVML sees is not usable, and how to fix it.

``detect()`` stays cheap and pure of TensorFlow: it knows NVML's view only, treats it as
the GPUs (``Machine.gpus_from == "nvml"``), and ``describe`` says so. A TPU is detected
from environment variables and device files only. Nothing here raises on an unusual
machine; what cannot be read is ``None`` or empty.
"""
from __future__ import annotations

import ctypes

import glob
import os
import platform
import re
import sys
import threading
from dataclasses import asdict, dataclass, fields, replace
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from tfwb import nvml
from tfwb.cpu_features import notable_flags, read_cpu, recorded_flags
# Moved to tfwb.cpu_features in 0.3; still importable from here (tests, readers' code).
from tfwb.cpu_features import parse_cpuinfo, parse_sysctl, short_cpu_model  # noqa: F401


@dataclass(frozen=True)
class Gpu:
    """One GPU; a field the driver refuses is ``None``.

    Attributes:
        index: its number in the view it belongs to: NVML's index in ``Machine.nvml_gpus``,
            TensorFlow's (``/physical_device:GPU:<index>``) in ``Machine.gpus`` once
            TensorFlow was asked.
        name, memory_total_mib, compute_capability: as the driver reports them.
        pci_bus_id: ``"0000:00:04.0"`` (domain:bus:device.function, lower case;
            ``normalize_pci_bus_id``), the key that matches NVML's GPUs to TensorFlow's.
        nvml_index: NVML's index of the same card (for sampling it), where known.

    Example:
        >>> Gpu(0, "Tesla T4", 15360.0, (7, 5)).compute_capability
        (7, 5)
    """

    index: int
    name: Optional[str] = None
    memory_total_mib: Optional[float] = None
    compute_capability: Optional[Tuple[int, int]] = None
    pci_bus_id: Optional[str] = None
    nvml_index: Optional[int] = None

    @classmethod
    def of(cls, value: Union["Gpu", Mapping[str, Any]]) -> "Gpu":
        """A Gpu from a Gpu or from ``nvml.gpu_info()``'s dict shape."""
        if isinstance(value, Gpu):
            return value
        cc = value.get("compute_capability")
        nvml_index = value.get("nvml_index")
        return cls(index=int(value.get("index", 0)), name=value.get("name"),
                   memory_total_mib=value.get("memory_total_mib"),
                   compute_capability=tuple(int(x) for x in cc) if cc is not None else None,
                   pci_bus_id=normalize_pci_bus_id(value.get("pci_bus_id")),
                   nvml_index=int(nvml_index) if nvml_index is not None else None)


def normalize_pci_bus_id(value: Any) -> Optional[str]:
    """A PCI bus id in one spelling, ``"dddd:bb:dd.f"`` in lower-case hex, or None.

    NVML writes an 8-digit domain (``"00000000:00:04.0"``), CUDA and TensorFlow a
    4-digit one (``"0000:00:04.0"``), in either case; bytes are decoded.

    Example:
        >>> normalize_pci_bus_id(b"00000000:3B:00.0"), normalize_pci_bus_id("0000:3b:00.0")
        ('0000:3b:00.0', '0000:3b:00.0')
        >>> normalize_pci_bus_id("not a bus id") is None
        True
    """
    if isinstance(value, bytes):
        value = value.decode("ascii", "replace")
    if not isinstance(value, str):
        return None
    m = re.fullmatch(r"\s*(?:([0-9a-fA-F]{1,8}):)?([0-9a-fA-F]{1,2}):([0-9a-fA-F]{1,2})\.([0-7])\s*",
                     value.rstrip("\x00"))
    if not m:
        return None
    domain, bus, dev, fn = m.groups()
    return f"{int(domain or '0', 16):04x}:{int(bus, 16):02x}:{int(dev, 16):02x}.{int(fn, 16)}"


@dataclass(frozen=True)
class Machine:
    """What this machine is: what ``detect()`` returns and ``DESCRIBED`` holds.

    Attributes:
        cpu_count: cores this process may use (``None`` when unknown).
        cpu_model: the CPU's model name, or ``None``.
        cpu_flags: feature flags in Linux's ``/proc/cpuinfo`` names on every OS (lower case,
            sorted; ``tfwb.cpu_features.read_cpu``: the OS's list joined with archspec's).
        cpu_microarchitecture: archspec's name for the CPU (``"sapphirerapids"``, ``"zen2"``,
            ``"neoverse_v1"``, ``"m2"``), or ``None`` (archspec missing, an old record).
        memory_total_mib: RAM, or ``None``.
        gpus: the GPUs a step can run on: TensorFlow's when it was asked
            (``gpus_from == "tensorflow"``), else NVML's (``"nvml"``) or the ones given.
        nvml_gpus: the GPUs NVML sees (what utilization is sampled from); ``None`` given
            means "the same as ``gpus``".
        gpus_from: where ``gpus`` came from: ``"tensorflow"``, ``"nvml"`` (TensorFlow not
            asked) or ``"given"`` (a described machine, a test's mapping).
        gpu_problem: None, or why a GPU NVML sees cannot be used by TensorFlow and the
            fix, in one sentence (``with_tensorflow_view``).
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
    nvml_gpus: Optional[Tuple[Gpu, ...]] = None
    gpus_from: str = "given"
    gpu_problem: Optional[str] = None
    cpu_microarchitecture: Optional[str] = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "cpu_flags", tuple(str(f).lower() for f in self.cpu_flags or ()))
        object.__setattr__(self, "gpus", tuple(Gpu.of(g) for g in self.gpus or ()))
        nvml_gpus = self.gpus if self.nvml_gpus is None else tuple(Gpu.of(g) for g in self.nvml_gpus)
        object.__setattr__(self, "nvml_gpus", nvml_gpus)
        if self.gpus_from not in GPU_SOURCES:
            raise ValueError(f"gpus_from={self.gpus_from!r} is not allowed; one of {GPU_SOURCES}")

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
        for key in ("gpus", "nvml_gpus"):
            d[key] = [dict(g, compute_capability=list(g["compute_capability"])
                           if g["compute_capability"] is not None else None) for g in d[key]]
        return d

    @property
    def compute_capability(self) -> Optional[Tuple[int, int]]:
        """The best compute capability among the GPUs (``None`` without one that reports it)."""
        ccs = [g.compute_capability for g in self.gpus if g.compute_capability is not None]
        return max(ccs) if ccs else None


#: Where ``Machine.gpus`` came from.
GPU_SOURCES = ("tensorflow", "nvml", "given")

#: The README's command that replaces the CPU build of TensorFlow with the GPU one.
GPU_INSTALL_COMMAND = 'pip uninstall -y tensorflow-cpu && pip install "tensorflow[and-cuda]"'


#: What functions that read a machine accept: a Machine, or a mapping of its fields
#: (``Machine.of`` turns it into one; tests and callers pass ``{}`` for "unknown").
MachineLike = Union[Machine, Mapping[str, Any]]

#: Machines the book describes, in ``detect()``'s shape, so that hardware-dependent code
#: (``tfwb.expect.expected_for``, ``tfwb.analysis.diagnosis.expectations``) is tested on each
#: without owning one. Flags are the ones ``/proc/cpuinfo`` lists on such machines
#: (shortened to those that matter here); ``cpu_microarchitecture`` is archspec's name.
_DESCRIBED: Dict[str, Dict[str, Any]] = {
    # mybinder.org and small cloud VMs: AMD EPYC (Zen 2), AVX2, no AVX-512.
    "binder-2core-avx2": {
        "cpu_count": 2, "cpu_model": "AMD EPYC 7B12 64-Core Processor", "cpu_microarchitecture": "zen2",
        "cpu_flags": ("avx", "avx2", "f16c", "fma", "sse4_2"),
        "memory_total_mib": 8192.0, "gpus": [], "tpu": False, "environment": "binder",
        "python": "3.12", "platform": "Linux-x86_64"},
    # The AVX-512 build machine of FACTS.md: AMD EPYC (Zen 4), AVX-512 with BF16, no FP16, no AMX.
    "cpu-2core-avx512-bf16": {
        "cpu_count": 2, "cpu_model": "AMD EPYC 9B14 96-Core Processor", "cpu_microarchitecture": "zen4",
        "cpu_flags": ("avx", "avx2", "avx512_bf16", "avx512_vnni", "avx512bw", "avx512f", "avx512vl",
                      "f16c", "fma", "sse4_2"),
        "memory_total_mib": 8192.0, "gpus": [], "tpu": False, "environment": "local",
        "python": "3.12", "platform": "Linux-x86_64"},
    # Intel Xeon 4th gen (Sapphire Rapids): AVX-512 with BF16 and FP16, AMX.
    "cpu-2core-avx512-amx": {
        "cpu_count": 2, "cpu_model": "Intel(R) Xeon(R) Platinum 8481C CPU @ 2.70GHz",
        "cpu_microarchitecture": "sapphirerapids",
        "cpu_flags": ("amx_bf16", "amx_int8", "amx_tile", "avx", "avx2", "avx512_bf16", "avx512_fp16",
                      "avx512_vnni", "avx512bw", "avx512f", "avx512vl", "f16c", "fma", "sse4_2"),
        "memory_total_mib": 8192.0, "gpus": [], "tpu": False, "environment": "local",
        "python": "3.12", "platform": "Linux-x86_64"},
    # Colab's free GPU runtime: 2 vCPUs (AVX-512, no BF16) and a Tesla T4 (Turing).
    "colab-t4": {
        "cpu_count": 2, "cpu_model": "Intel(R) Xeon(R) CPU @ 2.00GHz", "cpu_microarchitecture": "skylake_avx512",
        "cpu_flags": ("avx", "avx2", "avx512bw", "avx512f", "avx512vl", "f16c", "fma", "sse4_2"),
        "memory_total_mib": 12976.0,
        "gpus": [{"index": 0, "name": "Tesla T4", "memory_total_mib": 15360.0,
                  "compute_capability": (7, 5)}],
        "tpu": False, "environment": "colab", "python": "3.12", "platform": "Linux-x86_64"},
    # Colab's A100 runtime (Ampere).
    "a100": {
        "cpu_count": 12, "cpu_model": "Intel(R) Xeon(R) CPU @ 2.20GHz", "cpu_microarchitecture": "cascadelake",
        "cpu_flags": ("avx", "avx2", "avx512bw", "avx512f", "avx512vl", "f16c", "fma", "sse4_2"),
        "memory_total_mib": 85000.0,
        "gpus": [{"index": 0, "name": "NVIDIA A100-SXM4-40GB", "memory_total_mib": 40960.0,
                  "compute_capability": (8, 0)}],
        "tpu": False, "environment": "colab", "python": "3.12", "platform": "Linux-x86_64"},
    # A cloud H100 machine (Hopper) with a Sapphire Rapids host.
    "h100": {
        "cpu_count": 16, "cpu_model": "Intel(R) Xeon(R) Platinum 8480+", "cpu_microarchitecture": "sapphirerapids",
        "cpu_flags": ("amx_bf16", "amx_int8", "amx_tile", "avx", "avx2", "avx512_bf16", "avx512_fp16",
                      "avx512_vnni", "avx512bw", "avx512f", "avx512vl", "f16c", "fma", "sse4_2"),
        "memory_total_mib": 131072.0,
        "gpus": [{"index": 0, "name": "NVIDIA H100 80GB HBM3", "memory_total_mib": 81559.0,
                  "compute_capability": (9, 0)}],
        "tpu": False, "environment": "local", "python": "3.12", "platform": "Linux-x86_64"},
    # A cloud L4 machine (Ada Lovelace, compute capability 8.9, 24 GB; GCP's g2-standard-8:
    # 8 vCPUs of a Cascade Lake host, 32 GB). nvidia-smi lists 23034 MiB.
    "l4": {
        "cpu_count": 8, "cpu_model": "Intel(R) Xeon(R) CPU @ 2.20GHz", "cpu_microarchitecture": "cascadelake",
        "cpu_flags": ("avx", "avx2", "avx512_vnni", "avx512bw", "avx512f", "avx512vl", "f16c", "fma",
                      "sse4_2"),
        "memory_total_mib": 32768.0,
        "gpus": [{"index": 0, "name": "NVIDIA L4", "memory_total_mib": 23034.0,
                  "compute_capability": (8, 9)}],
        "tpu": False, "environment": "local", "python": "3.12", "platform": "Linux-x86_64"},
    # A Colab TPU runtime: a TPU VM (v2-8), a large AVX-512 host, no GPU.
    "tpu-vm": {
        "cpu_count": 96, "cpu_model": "Intel(R) Xeon(R) CPU @ 2.00GHz", "cpu_microarchitecture": "skylake_avx512",
        "cpu_flags": ("avx", "avx2", "avx512bw", "avx512f", "avx512vl", "f16c", "fma", "sse4_2"),
        "memory_total_mib": 342000.0, "gpus": [], "tpu": True, "environment": "colab",
        "python": "3.12", "platform": "Linux-x86_64"},
    # A TPU v5e VM with one chip (GCP's ct5lp-hightpu-1t: 24 vCPUs of an AMD EPYC Milan host,
    # AVX2 without AVX-512, 48 GB). A v5e exposes its chip through VFIO (/dev/vfio/<group>),
    # not /dev/accel*: ``detect_tpu`` finds it by that rule.
    "tpu-v5e": {
        "cpu_count": 24, "cpu_model": "AMD EPYC 7B13", "cpu_microarchitecture": "zen3",
        "cpu_flags": ("avx", "avx2", "f16c", "fma", "sse4_2"),
        "memory_total_mib": 49152.0, "gpus": [], "tpu": True, "environment": "local",
        "python": "3.12", "platform": "Linux-x86_64"},
    # An Arm server CPU: AWS Graviton3 (Neoverse V1; EC2's c7g.large). /proc/cpuinfo names no model
    # there (``detect()`` says "aarch64"); its ``Features``, shortened to those an ML step uses.
    "arm-graviton3": {
        "cpu_count": 2, "cpu_model": "AWS Graviton3 (Arm Neoverse V1)", "cpu_microarchitecture": "neoverse_v1",
        "cpu_flags": (
            "asimd", "asimddp", "asimdfhm", "asimdhp", "bf16", "fp", "fphp", "i8mm", "sve", "svebf16", "svei8mm"),
        "memory_total_mib": 4096.0, "gpus": [], "tpu": False, "platform": "Linux-aarch64"},
    # Apple silicon, an M2 Mac: no /proc/cpuinfo (``detect()`` lists no flags). ``sysctl hw.optional``'s
    # AdvSIMD, FEAT_FP16, FEAT_DotProd, FEAT_FHM, FEAT_BF16, FEAT_I8MM (no SVE) in Linux's names, as archspec does.
    "apple-m2": {
        "cpu_count": 8, "cpu_model": "Apple M2", "cpu_microarchitecture": "m2",
        "cpu_flags": ("asimd", "asimddp", "asimdfhm", "asimdhp", "bf16", "fp", "fphp", "i8mm"),
        "memory_total_mib": 16384.0, "gpus": [], "tpu": False, "platform": "macOS-14-arm64-arm-64bit"},
}
DESCRIBED: Dict[str, Machine] = {name: Machine.of(fields_) for name, fields_ in _DESCRIBED.items()}

#: Names a key of ``DESCRIBED`` whose CPU stands in for the host's in ``detect()`` (tests/cpu_kinds.py).
TEST_CPU_ENV = "TFWB_TEST_CPU"


def with_cpu_of(hw: MachineLike, name: str) -> Machine:
    """``hw`` with the CPU model, flags and microarchitecture of the described machine ``name``; the rest is kept.

    Raises:
        ValueError: ``name`` is not a key of ``DESCRIBED`` (the message lists them).

    Example:
        >>> m = with_cpu_of({"cpu_count": 4, "cpu_flags": ("avx2",)}, "apple-m2")
        >>> m.cpu_count, m.cpu_model, "bf16" in m.cpu_flags, "avx2" in m.cpu_flags
        (4, 'Apple M2', True, False)
    """
    if name not in DESCRIBED:
        raise ValueError(f"{TEST_CPU_ENV}={name!r} is not a described machine; one of {', '.join(DESCRIBED)}")
    cpu = DESCRIBED[name]
    return Machine.of(hw).replace(cpu_model=cpu.cpu_model, cpu_flags=cpu.cpu_flags,
                                  cpu_microarchitecture=cpu.cpu_microarchitecture)


def fingerprint_cpu(hw: MachineLike) -> Dict[str, Any]:
    """The CPU part of a run's fingerprint (``tfwb.tf.runner.fingerprint``), what a later reader of the
    record judges a change on (``tfwb.advice.machine.machine_of``): the model, the cores, archspec's
    microarchitecture and the flags the rules and peaks read (``tfwb.cpu_features.recorded_flags``).

    Example:
        >>> fp = fingerprint_cpu(DESCRIBED["cpu-2core-avx512-amx"])
        >>> fp["cpu_microarchitecture"], "amx_bf16" in fp["cpu_flags"], fp["cpu_count"]
        ('sapphirerapids', True, 2)
    """
    hw = Machine.of(hw)
    return {"cpu_model": hw.cpu_model, "cpu_count": hw.cpu_count,
            "cpu_microarchitecture": hw.cpu_microarchitecture, "cpu_flags": list(recorded_flags(hw.cpu_flags))}


_lock = threading.Lock()
_cached: Optional[Machine] = None


def detect(refresh: bool = False) -> Machine:
    """Describe this machine; cached after the first call.

    Args:
        refresh (bool, default False): look again instead of returning the cached answer.

    Returns:
        A ``Machine`` (immutable): ``cpu_count`` (cores this process may use), ``cpu_model``,
        ``cpu_flags`` and ``cpu_microarchitecture`` (``tfwb.cpu_features.read_cpu``: /proc/cpuinfo
        or sysctl, and archspec; empty or None where none can be read), ``memory_total_mib``, ``gpus`` and
        ``nvml_gpus`` (both what NVML sees, as ``Gpu`` records: TensorFlow is not asked
        here, so ``gpus_from`` is ``"nvml"``; ``tfwb.detect_hardware()`` asks it), ``tpu``,
        ``environment`` (``"colab"``, ``"kaggle"``, ``"binder"`` or ``"local"``),
        ``python`` and ``platform``. With ``TFWB_TEST_CPU=<name>`` set, the CPU model, flags
        and microarchitecture are those of ``DESCRIBED[name]`` (``with_cpu_of``; ValueError for another name):
        processes started with that environment believe it too; TensorFlow runs on the real CPU.

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
    cpu = read_cpu()
    gpus = nvml.gpu_info()
    host = Machine.of({
        "gpus_from": "nvml",
        "cpu_count": _cpu_count(),
        "cpu_model": cpu.model or platform.processor() or platform.machine() or None,
        "cpu_flags": cpu.flags,
        "cpu_microarchitecture": cpu.microarchitecture,
        "memory_total_mib": _memory_total_mib(),
        "gpus": gpus,
        "tpu": detect_tpu(has_gpu=bool(gpus)),
        "environment": detect_environment(),
        "python": platform.python_version(),
        "platform": platform.platform(),
    })
    return with_cpu_of(host, os.environ[TEST_CPU_ENV]) if os.environ.get(TEST_CPU_ENV) else host


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
    details = [d for d in [short_cpu_model(hw.cpu_model)] + notable_flags(hw.cpu_flags) if d]
    if details:
        cpu += f" ({', '.join(details)})"
    parts = [cpu, f"{_gib(hw.memory_total_mib)} RAM"]
    gpus = hw.gpus
    if not gpus:
        parts.append("no GPU" if not hw.gpu_problem else "no GPU usable by TensorFlow")
    else:
        parts.append(_gpu_label(gpus) + (" (seen by NVML; TensorFlow not asked)"
                                         if hw.gpus_from == "nvml" else ""))
    if hw.tpu:
        parts.append("TPU")
    parts.append(hw.environment or "local")
    line = ", ".join(parts)
    return f"{line}. {hw.gpu_problem}" if hw.gpu_problem else line


def _gpu_label(gpus: Tuple[Gpu, ...]) -> str:
    names = [g.name or "unknown GPU" for g in gpus]
    first = names[0]
    if any(n != first for n in names):      # mixed models: each with its own count, memory left out
        counts = {n: names.count(n) for n in dict.fromkeys(names)}
        return " + ".join(f"{c}× {n}" if c > 1 else n for n, c in counts.items())
    mem = gpus[0].memory_total_mib
    count = f"{len(gpus)}× " if len(gpus) > 1 else ""
    return f"{count}{first}" + (f" ({_gib(mem)})" if mem else "")


# -- what TensorFlow can use --------------------------------------------------------------
def match_gpus(nvml_gpus: Sequence[Gpu], tf_gpus: Sequence[Gpu]) -> Tuple[Gpu, ...]:
    """TensorFlow's GPUs, each with NVML's index (and NVML's memory where TF gave none).

    Matched by PCI bus id. Where a bus id is missing on either side, a TensorFlow GPU takes
    the first unmatched NVML GPU of the same name (NVML's order), so identical cards
    without bus ids may pair up in the wrong order; their fields are the same either way.

    Args:
        nvml_gpus: NVML's view (``nvml.gpu_info()`` as ``Gpu`` records).
        tf_gpus: TensorFlow's view, ``index`` being TensorFlow's GPU number.

    Returns:
        ``tf_gpus`` with ``nvml_index`` (None where no NVML GPU matches), and
        ``memory_total_mib`` filled from NVML where TensorFlow did not give it.

    Example:
        >>> nv = [Gpu(0, "A", 100.0, pci_bus_id="0000:01:00.0"), Gpu(1, "A", 100.0, pci_bus_id="0000:02:00.0")]
        >>> [g.nvml_index for g in match_gpus(nv, [Gpu(0, "A", pci_bus_id="0000:02:00.0")])]
        [1]
    """
    free = list(nvml_gpus)
    out = []
    for g in tf_gpus:
        hit = next((n for n in free if g.pci_bus_id and n.pci_bus_id == g.pci_bus_id), None)
        if hit is None and not g.pci_bus_id:
            hit = next((n for n in free if n.name == g.name or g.name is None), None)
        if hit is None:
            out.append(g)
            continue
        free.remove(hit)
        out.append(replace(g, nvml_index=hit.index,
                           memory_total_mib=g.memory_total_mib or hit.memory_total_mib,
                           compute_capability=g.compute_capability or hit.compute_capability,
                           name=g.name or hit.name, pci_bus_id=g.pci_bus_id or hit.pci_bus_id))
    return tuple(out)


def gpu_problem(nvml_gpus: Sequence[Gpu], tf_gpus: Sequence[Gpu], *, built_with_cuda: bool,
                environ: Optional[Mapping[str, str]] = None, system: Optional[str] = None) -> Optional[str]:
    """Why GPUs that NVML sees are not usable by TensorFlow, and the fix; None when all are.

    The reasons, checked in this order: TensorFlow is a CPU build
    (``tf.test.is_built_with_cuda()`` False; fix: the README's GPU command, or WSL2 on
    Windows, where TensorFlow has no GPU build since 2.10); ``CUDA_VISIBLE_DEVICES`` hides
    them (NVML ignores that variable, CUDA and TensorFlow obey it); otherwise the CUDA
    libraries could not be loaded (TensorFlow's log says which), or, for some of
    several GPUs, TensorFlow ignored them (e.g. a compute capability below its minimum).

    Args:
        nvml_gpus: the GPUs NVML sees.
        tf_gpus: the GPUs TensorFlow lists, after ``match_gpus`` (``nvml_index`` set).
        built_with_cuda: ``tf.test.is_built_with_cuda()``.
        environ (mapping | None, default None): environment to read; None is os.environ.
        system (str | None, default None): ``platform.system()``; None reads it.

    Returns:
        One sentence naming the GPU, the reason and the fix, or None.

    Example:
        >>> print(gpu_problem([Gpu(0, "Tesla T4")], [], built_with_cuda=False, environ={}, system="Linux"))
        Tesla T4 seen by NVML but not usable by TensorFlow: this TensorFlow is a CPU-only build (tf.test.is_built_with_cuda() is False), so every step runs on the CPU; fix: pip uninstall -y tensorflow-cpu && pip install "tensorflow[and-cuda]" (the README's GPU command), then restart the kernel.
    """
    nvml_gpus, tf_gpus = tuple(nvml_gpus), tuple(tf_gpus)
    used = {g.nvml_index for g in tf_gpus if g.nvml_index is not None}
    unused = [g for g in nvml_gpus if g.index not in used]
    if not unused or (len(tf_gpus) >= len(nvml_gpus) and not used):
        return None        # every GPU in use (or no bus ids to tell which, and as many as NVML's)
    env = os.environ if environ is None else environ
    system = platform.system() if system is None else system
    label = _gpu_label(tuple(unused)).split(" (")[0]
    if len(unused) < len(nvml_gpus):
        label = f"{label} (NVML index {', '.join(str(g.index) for g in unused)})"
    head = f"{label} seen by NVML but not usable by TensorFlow: "
    if not built_with_cuda:
        fix = (f"{GPU_INSTALL_COMMAND} (the README's GPU command), then restart the kernel"
               if system != "Windows" else
               "TensorFlow has no GPU build for native Windows since 2.10; run it under WSL2 and "
               f"install it there with {GPU_INSTALL_COMMAND}")
        return (head + "this TensorFlow is a CPU-only build (tf.test.is_built_with_cuda() is False), "
                f"so every step runs on the CPU; fix: {fix}.")
    visible = env.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        return (head + f"CUDA_VISIBLE_DEVICES={visible!r} hides it from CUDA and TensorFlow (NVML ignores "
                "that variable); fix: unset it or list the GPU in it before TensorFlow starts, then "
                "restart the kernel.")
    if not tf_gpus:
        return (head + "TensorFlow is built with CUDA but could not load the CUDA libraries (its log "
                "says \"Cannot dlopen some GPU libraries\" and names them), so every step runs on the "
                'CPU; fix: pip install "tensorflow[and-cuda]" (pip\'s CUDA and cuDNN libraries for this '
                "TensorFlow), or install the CUDA and cuDNN versions TensorFlow's install page lists, "
                "then restart the kernel.")
    return (head + "TensorFlow ignored it (its log says why, e.g. a compute capability below the minimum "
            "this TensorFlow supports); the steps run on the GPUs it lists.")


def with_tensorflow_view(hw: MachineLike, tf_gpus: Sequence[Union[Gpu, Mapping[str, Any]]], *,
                         built_with_cuda: bool, environ: Optional[Mapping[str, str]] = None,
                         system: Optional[str] = None) -> Machine:
    """``hw`` with TensorFlow's GPUs as ``gpus``, NVML's kept as ``nvml_gpus``, and the problem.

    Pure: ``tfwb.tf.runner.devices.machine()`` asks TensorFlow and calls this; tests give
    TensorFlow's view directly.

    Args:
        hw: a Machine whose ``nvml_gpus`` are NVML's view (``detect()``).
        tf_gpus: the GPUs TensorFlow lists (``index``: TensorFlow's number; ``pci_bus_id``).
        built_with_cuda, environ, system: as for ``gpu_problem``.

    Returns:
        A Machine with ``gpus_from="tensorflow"``.

    Example:
        >>> t4 = Machine.of({"cpu_count": 2, "gpus": [{"index": 0, "name": "Tesla T4"}], "gpus_from": "nvml"})
        >>> m = with_tensorflow_view(t4, [], built_with_cuda=False, environ={}, system="Linux")
        >>> m.gpus, [g.name for g in m.nvml_gpus], m.gpu_problem.split(":")[0]
        ((), ['Tesla T4'], 'Tesla T4 seen by NVML but not usable by TensorFlow')
    """
    hw = Machine.of(hw)
    nvml_gpus = hw.nvml_gpus or ()
    matched = match_gpus(nvml_gpus, [Gpu.of(g) for g in tf_gpus])
    problem = gpu_problem(nvml_gpus, matched, built_with_cuda=built_with_cuda, environ=environ,
                          system=system)
    return hw.replace(gpus=matched, nvml_gpus=nvml_gpus, gpus_from="tensorflow", gpu_problem=problem)


def cuda_pci_bus_ids(ordinals: Sequence[int]) -> Dict[int, str]:
    """PCI bus ids of CUDA devices by ordinal, from the driver API; ``{}`` where unreadable.

    TensorFlow names a GPU ``/physical_device:GPU:<n>`` with n its CUDA ordinal (after
    ``CUDA_VISIBLE_DEVICES``), so ordinal n here is that GPU. ``cuInit`` is idempotent and
    already ran when TensorFlow listed its GPUs; ``cuDeviceGet`` and ``cuDeviceGetPCIBusId``
    need no context and allocate nothing on the device. No TensorFlow: ctypes and the driver.
    """
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError:
        try:
            cuda = ctypes.CDLL("nvcuda.dll")           # Windows' name for the driver library
        except (OSError, AttributeError):
            return {}
    if cuda.cuInit(0) != 0:
        return {}
    out = {}
    for n in ordinals:
        dev = ctypes.c_int()
        buf = ctypes.create_string_buffer(32)
        if cuda.cuDeviceGet(ctypes.byref(dev), int(n)) == 0 and \
                cuda.cuDeviceGetPCIBusId(buf, len(buf), dev) == 0:
            bus = normalize_pci_bus_id(buf.value)
            if bus:
                out[int(n)] = bus
    return out
