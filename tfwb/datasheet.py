"""Published peak FLOP/s: the datasheet table per accelerator and dtype, and the CPU formula.

What a device *could* do, labelled with where the figure comes from, to set beside what
``tfwb.tf.runner.matmul_peak.measure_peak`` measures on this machine. Every figure is dense (no
structured-sparsity doubling), per device as TensorFlow sees it: one GPU, one TPU chip.
For a CPU there is no datasheet: ``cpu_peak`` multiplies cores × clock × FLOPs per cycle
from the detected instructions and says so (a formula, an upper bound, not a measurement).

Pure: no TensorFlow. ``cpu_clock`` and ``cpu_ghz`` read ``/sys`` and ``/proc`` only.
"""
from __future__ import annotations

import re
from typing import Dict, Mapping, Optional, Sequence, Tuple

DTYPES = ("float32", "bfloat16", "float16")

T = 1e12

_NV_T4 = "NVIDIA T4 datasheet (2019)"
_NV_L4 = "NVIDIA L4 datasheet (2023)"
_NV_V100 = "NVIDIA V100 datasheet (2020)"
_NV_A100 = "NVIDIA A100 datasheet (2021)"
_NV_H100 = "NVIDIA H100 datasheet (2023)"
_NV_H200 = "NVIDIA H200 datasheet (2024)"
_TPU = "Google Cloud TPU documentation, system architecture (per chip)"

#: device -> dtype -> (FLOP/s dense, source). ``"tensorfloat32"`` is what TensorFlow runs a
#: float32 matmul at on Ampere and later by default (TF32 Tensor Cores), beside the plain
#: float32 (CUDA core) figure. TPUs list bfloat16 only: their matrix units run bfloat16.
DATASHEET: Mapping[str, Mapping[str, Tuple[float, str]]] = {
    "Tesla T4": {
        "float32": (8.1 * T, f"{_NV_T4}: FP32 8.1 TFLOPS"),
        "float16": (65 * T, f"{_NV_T4}: FP16 Tensor Core 65 TFLOPS"),
    },
    "NVIDIA L4": {
        "float32": (30.3 * T, f"{_NV_L4}: FP32 30.3 TFLOPS"),
        "tensorfloat32": (60 * T, f"{_NV_L4}: TF32 Tensor Core 120 TFLOPS with sparsity, 60 dense"),
        "bfloat16": (121 * T, f"{_NV_L4}: BF16 Tensor Core 242 TFLOPS with sparsity, 121 dense"),
        "float16": (121 * T, f"{_NV_L4}: FP16 Tensor Core 242 TFLOPS with sparsity, 121 dense"),
    },
    "Tesla V100-SXM2": {
        "float32": (15.7 * T, f"{_NV_V100}: V100 SXM2 FP32 15.7 TFLOPS"),
        "float16": (125 * T, f"{_NV_V100}: V100 SXM2 Tensor Core 125 TFLOPS"),
    },
    "Tesla V100-PCIE": {
        "float32": (14 * T, f"{_NV_V100}: V100 PCIe FP32 14 TFLOPS"),
        "float16": (112 * T, f"{_NV_V100}: V100 PCIe Tensor Core 112 TFLOPS"),
    },
    "NVIDIA A100": {
        "float32": (19.5 * T, f"{_NV_A100}: FP32 19.5 TFLOPS"),
        "tensorfloat32": (156 * T, f"{_NV_A100}: TF32 Tensor Core 156 TFLOPS (312 with sparsity)"),
        "bfloat16": (312 * T, f"{_NV_A100}: BF16 Tensor Core 312 TFLOPS (624 with sparsity)"),
        "float16": (312 * T, f"{_NV_A100}: FP16 Tensor Core 312 TFLOPS (624 with sparsity)"),
    },
    "NVIDIA H100 SXM": {
        "float32": (67 * T, f"{_NV_H100}: H100 SXM FP32 67 TFLOPS"),
        "tensorfloat32": (494.5 * T, f"{_NV_H100}: H100 SXM TF32 Tensor Core 989 TFLOPS with sparsity, half dense"),
        "bfloat16": (989.5 * T, f"{_NV_H100}: H100 SXM BF16 Tensor Core 1,979 TFLOPS with sparsity, half dense"),
        "float16": (989.5 * T, f"{_NV_H100}: H100 SXM FP16 Tensor Core 1,979 TFLOPS with sparsity, half dense"),
    },
    "NVIDIA H100 PCIe": {
        "float32": (51 * T, f"{_NV_H100}: H100 PCIe FP32 51 TFLOPS"),
        "tensorfloat32": (378 * T, f"{_NV_H100}: H100 PCIe TF32 Tensor Core 756 TFLOPS with sparsity, half dense"),
        "bfloat16": (756.5 * T, f"{_NV_H100}: H100 PCIe BF16 Tensor Core 1,513 TFLOPS with sparsity, half dense"),
        "float16": (756.5 * T, f"{_NV_H100}: H100 PCIe FP16 Tensor Core 1,513 TFLOPS with sparsity, half dense"),
    },
    "NVIDIA H100 NVL": {
        "float32": (60 * T, f"{_NV_H100}: H100 NVL FP32 60 TFLOPS"),
        "tensorfloat32": (417.5 * T, f"{_NV_H100}: H100 NVL TF32 Tensor Core 835 TFLOPS with sparsity, half dense"),
        "bfloat16": (835.5 * T, f"{_NV_H100}: H100 NVL BF16 Tensor Core 1,671 TFLOPS with sparsity, half dense"),
        "float16": (835.5 * T, f"{_NV_H100}: H100 NVL FP16 Tensor Core 1,671 TFLOPS with sparsity, half dense"),
    },
    "NVIDIA H200": {
        "float32": (67 * T, f"{_NV_H200}: H200 SXM FP32 67 TFLOPS"),
        "tensorfloat32": (494.5 * T, f"{_NV_H200}: H200 SXM TF32 Tensor Core 989 TFLOPS with sparsity, half dense"),
        "bfloat16": (989.5 * T, f"{_NV_H200}: H200 SXM BF16 Tensor Core 1,979 TFLOPS with sparsity, half dense"),
        "float16": (989.5 * T, f"{_NV_H200}: H200 SXM FP16 Tensor Core 1,979 TFLOPS with sparsity, half dense"),
    },
    "TPU v2": {"bfloat16": (45 * T, f"{_TPU}: v2 45 TFLOPS BF16 per chip (2 TensorCores)")},
    "TPU v3": {"bfloat16": (123 * T, f"{_TPU}: v3 123 TFLOPS BF16 per chip (2 TensorCores)")},
    "TPU v4": {"bfloat16": (275 * T, f"{_TPU}: v4 275 TFLOPS BF16 per chip")},
    "TPU v5e": {"bfloat16": (197 * T, f"{_TPU}: v5e 197 TFLOPS BF16 per chip")},
    "TPU v5p": {"bfloat16": (459 * T, f"{_TPU}: v5p 459 TFLOPS BF16 per chip")},
    "TPU v6e": {"bfloat16": (918 * T, f"{_TPU}: v6e (Trillium) 918 TFLOPS BF16 per chip")},
}

# (pattern on the lower-cased name, DATASHEET key); the first match wins, so the specific
# variants come before the family.
_PATTERNS: Tuple[Tuple[str, str], ...] = (
    (r"\bh100\b.*\bpcie\b", "NVIDIA H100 PCIe"),
    (r"\bh100\b.*\bnvl\b", "NVIDIA H100 NVL"),
    (r"\bh100\b", "NVIDIA H100 SXM"),
    (r"\bh200\b", "NVIDIA H200"),
    (r"\ba100\b", "NVIDIA A100"),
    (r"\bv100\b.*\bpcie\b", "Tesla V100-PCIE"),
    (r"\bv100\b", "Tesla V100-SXM2"),
    (r"\bt4\b", "Tesla T4"),
    (r"\bl4\b", "NVIDIA L4"),
    (r"\btpu\s*v2\b", "TPU v2"),
    (r"\btpu\s*v3\b", "TPU v3"),
    (r"\btpu\s*v4\b", "TPU v4"),
    (r"\btpu\s*v5\s*(lite|e)\b|\btpu\s*v5e\b", "TPU v5e"),
    (r"\btpu\s*v5\s*p?\b", "TPU v5p"),
    (r"\btpu\s*v6\s*(lite|e)\b|\btpu\s*v6e\b", "TPU v6e"),
)


def datasheet_device(device_name: str) -> Optional[str]:
    """The ``DATASHEET`` key for a device name as TensorFlow, NVML or a TPU reports it, or None.

    Example:
        >>> datasheet_device("NVIDIA A100-SXM4-40GB"), datasheet_device("TPU v5 lite")
        ('NVIDIA A100', 'TPU v5e')
        >>> datasheet_device("NVIDIA GeForce RTX 3060") is None
        True
    """
    name = str(device_name or "").lower().replace("_", " ").replace("-", " ")
    for pattern, key in _PATTERNS:
        if re.search(pattern, name):
            return key
    return None


def datasheet_peak(device_name: str, dtype: str) -> Optional[Tuple[float, str]]:
    """The datasheet's dense peak FLOP/s of ``device_name`` in ``dtype`` and its source, or None.

    Args:
        device_name: as reported: ``"Tesla T4"``, ``"NVIDIA A100-SXM4-40GB"``, ``"TPU v5 lite"``…
        dtype: ``"float32"``, ``"bfloat16"``, ``"float16"`` (or ``"tensorfloat32"``).

    Returns:
        ``(flops_per_s, source)``; None for an unknown device or a dtype it has no figure for
        (a T4 has no bfloat16 Tensor Cores; a TPU lists bfloat16 only).

    Raises:
        ValueError: for a dtype outside ``DTYPES`` and ``"tensorfloat32"``.

    Example:
        >>> flops, source = datasheet_peak("Tesla T4", "float16")
        >>> flops / 1e12, source
        (65.0, 'NVIDIA T4 datasheet (2019): FP16 Tensor Core 65 TFLOPS')
        >>> datasheet_peak("Tesla T4", "bfloat16") is None
        True
    """
    _check_dtype(dtype, DTYPES + ("tensorfloat32",))
    key = datasheet_device(device_name)
    if key is None:
        return None
    return DATASHEET[key].get(dtype)


# FLOPs per cycle per core (a fused multiply-add = 2 FLOPs), assuming two vector units per
# core, as server cores have; a core with one FMA unit reaches half.
_CPU_RATES: Tuple[Tuple[str, str, int, str], ...] = (
    # dtype, required flag, FLOPs/cycle, what it is
    ("bfloat16", "amx_bf16", 1024, "AMX BF16 tiles: 1,024 FLOPs/cycle"),
    ("bfloat16", "avx512_bf16", 128, "AVX-512 BF16 dot products: 2 units x 32 pairs x 2"),
    ("float16", "amx_fp16", 1024, "AMX FP16 tiles: 1,024 FLOPs/cycle"),
    ("float16", "avx512_fp16", 128, "AVX-512 FP16 FMA: 2 units x 32 lanes x 2"),
    ("float32", "avx512f", 64, "AVX-512 FMA: 2 units x 16 lanes x 2"),
    ("float32", "fma", 32, "AVX2 FMA: 2 units x 8 lanes x 2"),
    ("float32", "avx", 16, "AVX: 8-lane add + 8-lane multiply"),
    ("float32", "sse2", 8, "SSE: 4-lane add + 4-lane multiply"),
)


def cpu_flops_per_cycle(cpu_flags: Sequence[str], dtype: str) -> Tuple[int, str]:
    """FLOPs per cycle per core for ``dtype`` from the CPU's feature flags, and why.

    A dtype without native instructions runs converted to float32: its rate is the float32
    rate at best, and the reason says so.

    Example:
        >>> cpu_flops_per_cycle(["avx2", "fma", "avx512f"], "float32")
        (64, 'AVX-512 FMA: 2 units x 16 lanes x 2')
        >>> cpu_flops_per_cycle(["avx2", "fma"], "bfloat16")[0]
        32
    """
    _check_dtype(dtype, DTYPES)
    flags = {str(f).lower() for f in cpu_flags}
    for d, flag, rate, what in _CPU_RATES:
        if d == dtype and flag in flags:
            return rate, what
    rate, what = 4, "scalar"
    for d, flag, r, w in _CPU_RATES:
        if d == "float32" and flag in flags:
            rate, what = r, w
            break
    if dtype == "float32":
        return rate, what
    return rate, f"no native {dtype} instructions: converted to float32, {what}"


def cpu_peak(cores: int, ghz: Optional[float], cpu_flags: Sequence[str],
             dtype: str, clock: str = "") -> Optional[Tuple[float, str]]:
    """cores × clock × FLOPs per cycle from the instructions the CPU has (no datasheet publishes a CPU's).

    Args:
        cores: cores the process may use.
        ghz: clock in GHz (``cpu_ghz()``); None when unknown.
        cpu_flags: ``/proc/cpuinfo`` flags (``tfwb.hardware.Machine.cpu_flags``).
        dtype: ``"float32"``, ``"bfloat16"`` or ``"float16"``.
        clock: where ``ghz`` came from (``cpu_clock()``'s second value), added to the label.

    Returns:
        ``(flops_per_s, label)``, the label spelling out the product; None when the cores or
        the clock are unknown.

    Raises:
        ValueError: for a dtype outside ``DTYPES``.

    Example:
        >>> flops, label = cpu_peak(2, 2.0, ["avx2", "fma"], "float32")
        >>> flops / 1e9, label
        (128.0, 'formula: 2 cores x 2.00 GHz x 32 FLOPs/cycle (AVX2 FMA: 2 units x 8 lanes x 2)')
    """
    _check_dtype(dtype, DTYPES)
    if not cores or not ghz or cores <= 0 or ghz <= 0:
        return None
    rate, what = cpu_flops_per_cycle(cpu_flags, dtype)
    label = (f"formula: {cores} cores x {ghz:.2f} GHz x {rate} FLOPs/cycle ({what})"
             + (f"; the clock is {clock}" if clock else ""))
    return cores * ghz * 1e9 * rate, label


#: A measured CPU peak under this share of the cores x clock x FLOPs/cycle formula is suspect: the
#: benchmark read low (other work on the cores, a short measurement), so an MFU against it reads high.
SUSPECT_SHARE = 0.4


#: Where a clock figure came from, as the formula's label says it. Only cpufreq's maximum is the
#: clock a busy core can reach; a VM usually has no cpufreq, and then the model name's base clock or
#: the momentary ``cpu MHz`` stand in, below what turbo reaches: a measured peak can then pass 100 %
#: of the formula (chapter 00 prints the share).
CLOCK_SOURCES = {
    "max": "the maximum clock (cpufreq)",
    "base": "the base clock in the model name (turbo can run above it)",
    "current": "the clock /proc/cpuinfo read at that moment (turbo can run above it)",
}


def parse_cpu_clock(cpuinfo: str = "", max_freq_khz: str = "") -> Tuple[Optional[float], str]:
    """The CPU clock in GHz and where it came from (a ``CLOCK_SOURCES`` text): the maximum
    frequency from sysfs, else ``@ 2.20GHz`` in the model name (the base clock), else ``cpu MHz``
    from ``/proc/cpuinfo``; ``(None, "")`` when none is given.

    Example:
        >>> parse_cpu_clock("model name\\t: Intel(R) Xeon(R) CPU @ 2.20GHz\\ncpu MHz\\t: 2199.998\\n")
        (2.2, 'the base clock in the model name (turbo can run above it)')
        >>> parse_cpu_clock("", "3500000\\n")
        (3.5, 'the maximum clock (cpufreq)')
    """
    try:
        if max_freq_khz.strip():
            return round(int(max_freq_khz.strip()) / 1e6, 3), CLOCK_SOURCES["max"]
    except ValueError:
        pass
    m = re.search(r"^model name\s*:.*@\s*([\d.]+)\s*GHz", cpuinfo, re.M)
    if m:
        return float(m.group(1)), CLOCK_SOURCES["base"]
    m = re.search(r"^cpu MHz\s*:\s*([\d.]+)", cpuinfo, re.M)
    if m:
        return round(float(m.group(1)) / 1000, 3), CLOCK_SOURCES["current"]
    return None, ""


def parse_cpu_ghz(cpuinfo: str = "", max_freq_khz: str = "") -> Optional[float]:
    """The CPU clock in GHz (``parse_cpu_clock`` without its source); None when none is given.

    Example:
        >>> parse_cpu_ghz("model name\\t: Intel(R) Xeon(R) CPU @ 2.20GHz\\ncpu MHz\\t: 2199.998\\n")
        2.2
        >>> parse_cpu_ghz("cpu MHz\\t: 2445.404\\n"), parse_cpu_ghz("", "3500000\\n")
        (2.445, 3.5)
    """
    return parse_cpu_clock(cpuinfo, max_freq_khz)[0]


def cpu_clock() -> Tuple[Optional[float], str]:
    """This machine's CPU clock in GHz and its source (``parse_cpu_clock`` on ``/sys`` and ``/proc``)."""
    texts = []
    for path in ("/proc/cpuinfo", "/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq"):
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                texts.append(f.read())
        except OSError:
            texts.append("")
    return parse_cpu_clock(texts[0], texts[1])


def cpu_ghz() -> Optional[float]:
    """This machine's CPU clock in GHz (``cpu_clock`` without its source), or None."""
    return cpu_clock()[0]


def _check_dtype(dtype: str, allowed: Tuple[str, ...]) -> None:
    if dtype not in allowed:
        raise ValueError(f"dtype={dtype!r} is not allowed; one of {allowed}")


def table() -> Dict[str, Dict[str, float]]:
    """``DATASHEET`` as device -> dtype -> FLOP/s (no sources), for a chart or a report."""
    return {device: {d: v[0] for d, v in row.items()} for device, row in DATASHEET.items()}
