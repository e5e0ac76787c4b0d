"""Which machine a change is judged on, and where its step runs there.

- ``machine_of(result)``: the machine a measured run's fingerprint describes;
- ``target(hw, strategy)``: where the step runs (``"tpu"``, ``"gpu"``, ``"cpu"``, ``"none"``);
- ``where(hw, strategy)``: the same in a few words, for a claim;
- ``best_compute_capability(hw)``: the highest compute capability among the GPUs;
- ``cpu_flags(hw)``: the CPU's feature flags.

The rules (``tfwb.advice.rules``) and the bounds (``tfwb.advice.bounds``) read a machine
through these. Pure: no TensorFlow; reads ``tfwb.hardware.Machine``.
"""
from __future__ import annotations

from typing import Any, Optional, Tuple

from tfwb.cpu_features import notable_flags
from tfwb.hardware import Machine, MachineLike


def cpu_flags(hw: MachineLike) -> frozenset:
    """The CPU's feature flags (``avx2``, ``amx_bf16``...), as a set."""
    return frozenset(Machine.of(hw).cpu_flags)


def best_compute_capability(hw: MachineLike) -> Optional[Tuple[int, int]]:
    """The highest compute capability among the GPUs, or None (no GPU, or none known).

    Example:
        >>> best_compute_capability({"gpus": [{"compute_capability": [7, 5]}, {"compute_capability": None}]})
        (7, 5)
    """
    return Machine.of(hw).compute_capability


def target(hw: MachineLike, strategy: Optional[str] = None) -> str:
    """Where the model's step runs: ``"tpu"``, ``"gpu"``, ``"cpu"``, or ``"none"``.

    ``strategy=None`` is the default strategy, as for a run: only ``strategy="tpu"`` puts
    the step on a TPU, so on a TPU VM anything else runs on the host CPU;
    ``strategy="tpu"`` with no TPU is ``"none"`` (the run fails). ``"gpu"`` only where
    TensorFlow can use a GPU (``hw.gpus``; ``tfwb.detect_hardware()`` fills it from
    TensorFlow): a GPU that only NVML sees leaves the step on the CPU.

    Example:
        >>> target({"gpus": [], "tpu": True}), target({"gpus": [], "tpu": True}, "tpu")
        ('cpu', 'tpu')
    """
    hw = Machine.of(hw)
    if strategy == "tpu":
        return "tpu" if hw.tpu else "none"
    return "gpu" if hw.gpus else "cpu"


def where(hw: MachineLike, strategy: Optional[str] = None) -> str:
    """A few words for the device the step runs on, e.g. ``"Tesla T4 (compute capability 7.5)"``.

    Example:
        >>> where({"gpus": [], "cpu_flags": ("avx2",), "cpu_count": 2})
        'this CPU (2 cores, AVX2)'
        >>> where({"gpus": [], "cpu_flags": ("asimd", "bf16", "sve"), "cpu_count": 2})    # Arm's names
        'this CPU (2 cores, SVE, BF16)'
    """
    hw = Machine.of(hw)
    kind = target(hw, strategy)
    if kind == "tpu":
        return "a TPU"
    if kind == "none":
        return "this machine (no TPU)"
    if kind == "gpu":
        gpus = hw.gpus
        name = gpus[0].name or "GPU"
        cc = best_compute_capability(hw)
        count = f"{len(gpus)}x " if len(gpus) > 1 else ""
        return f"{count}{name}" + (f" (compute capability {cc[0]}.{cc[1]})" if cc else "")
    cores = hw.cpu_count
    details = ([f"{cores} core{'' if cores == 1 else 's'}"] if cores else []) + notable_flags(hw.cpu_flags)
    host = "this TPU VM's host CPU" if hw.tpu else "this CPU"
    text = host + (f" ({', '.join(details)})" if details else "")
    if hw.gpu_problem and hw.nvml_gpus:
        text += f" ({hw.nvml_gpus[0].name or 'the GPU'} is not usable by TensorFlow here)"
    return text


def machine_of(result: Any) -> Machine:
    """What a result's fingerprint says about its machine: GPUs, cores, the CPU's model, microarchitecture and
    flags (``tfwb.hardware.fingerprint_cpu``), a TPU. A record written before fingerprints kept the flags
    has none: its CPU's features are unknown (``cpu_flags=()``).

    Example:
        >>> from types import SimpleNamespace
        >>> m = machine_of(SimpleNamespace(fingerprint={"cpu_count": 2, "cpu_microarchitecture": "sapphirerapids",
        ...                                             "cpu_flags": ["amx_bf16", "avx512f"]}))
        >>> m.cpu_microarchitecture, m.cpu_flags
        ('sapphirerapids', ('amx_bf16', 'avx512f'))
    """
    fp = getattr(result, "fingerprint", None) or {}
    return Machine.of({"gpus": list(fp.get("gpus") or []), "cpu_count": fp.get("cpu_count"),
                       "cpu_model": fp.get("cpu_model"), "cpu_microarchitecture": fp.get("cpu_microarchitecture"),
                       "cpu_flags": tuple(fp.get("cpu_flags") or ()),
                       "tpu": any("TPU" in str(d) for d in fp.get("logical_devices") or ())})
