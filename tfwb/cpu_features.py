"""The CPU's identity: its model, its microarchitecture and its feature flags, on any operating system.

Owns how tfwb reads the CPU (``tfwb.hardware.detect`` asks ``read_cpu``) and which of its flags a
run's fingerprint keeps (``recorded_flags``). Flags are spelled as Linux's ``/proc/cpuinfo``
spells them, in lower case, on every operating system (archspec's convention): ``avx2``,
``avx512_bf16``, ``amx_tile`` on x86; ``asimd``, ``fphp``, ``bf16``, ``i8mm``, ``sve`` on Arm.

``read_cpu`` asks two sources and joins their flags:

- the operating system's own list: ``/proc/cpuinfo`` on Linux (``parse_cpuinfo``), ``sysctl``
  on macOS (``parse_sysctl``: ``machdep.cpu.*`` on Intel Macs, ``hw.optional.*`` on both);
- ``archspec`` (a library made for this, from the Spack project), which names the
  microarchitecture (``sapphirerapids``, ``zen2``, ``neoverse_v1``, ``m2``) and lists the
  features that microarchitecture has. On Apple silicon, where the OS lists no flags in
  Linux's names, that list is what tells BF16 or FP16 apart; on Windows it is the only one.
  Its name is the newest microarchitecture whose every feature the CPU lists, so a VM that
  hides one reads older: an Emerald Rapids VM without ``waitpkg`` is ``icelake``. The rules
  read the flags, never the name.

Either may be missing (archspec not installed, no ``/proc/cpuinfo``, a container without
``sysctl``): what cannot be read is ``None`` or empty, never an error. Pure: no TensorFlow.
"""
from __future__ import annotations

import platform
import re
import subprocess
from dataclasses import dataclass
from typing import Callable, Dict, Iterable, List, Optional, Tuple

__all__ = ["CpuReading", "read_cpu", "parse_cpuinfo", "parse_sysctl", "archspec_host", "recorded_flags",
           "notable_flags", "short_cpu_model", "RECORDED_FLAG_PREFIXES"]


@dataclass(frozen=True)
class CpuReading:
    """What ``read_cpu`` found.

    Attributes:
        model: the CPU's model name (``None``: not listed, as on most Arm servers).
        microarchitecture: archspec's name for it (``"sapphirerapids"``, ``"m2"``), ``None``
            without archspec.
        flags: the feature flags, Linux's names, lower case, sorted, no duplicates.
        sources: where they came from, e.g. ``("/proc/cpuinfo", "archspec")``; empty: nothing read.
    """

    model: Optional[str] = None
    microarchitecture: Optional[str] = None
    flags: Tuple[str, ...] = ()
    sources: Tuple[str, ...] = ()


# -- the operating system's lists --------------------------------------------------------------
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


#: macOS's ``machdep.cpu.*features`` words (Intel Macs) whose Linux name differs (archspec's table, plus
#: the AVX-512 extensions Linux spells with an underscore).
_DARWIN_WORDS: Dict[str, str] = {
    "sse4.1": "sse4_1", "sse4.2": "sse4_2", "avx1.0": "avx", "lahf": "lahf_lm", "sha": "sha_ni",
    "clfsopt": "clflushopt", "avx512vnni": "avx512_vnni", "avx512bf16": "avx512_bf16",
    "avx512fp16": "avx512_fp16", "avx512vbmi2": "avx512_vbmi2", "avx512bitalg": "avx512_bitalg",
    "avx512vpopcntdq": "avx512_vpopcntdq", "avx512vp2intersect": "avx512_vp2intersect"}

#: macOS's ``hw.optional.*`` keys (set to 1 where present) in Linux's names. Apple silicon's
#: ``FEAT_*`` names are Arm's architecture features; Linux lists them as below.
_SYSCTL_OPTIONAL: Dict[str, Tuple[str, ...]] = {
    "hw.optional.floatingpoint": ("fp",), "hw.optional.adv_simd": ("asimd",), "hw.optional.advsimd": ("asimd",),
    "hw.optional.neon": ("asimd",), "hw.optional.neon_hpfp": ("asimdhp",), "hw.optional.neon_fp16": ("asimdhp",),
    "hw.optional.arm.feat_fp16": ("fphp", "asimdhp"), "hw.optional.arm.feat_dotprod": ("asimddp",),
    "hw.optional.arm.feat_fhm": ("asimdfhm",), "hw.optional.arm.feat_bf16": ("bf16",),
    "hw.optional.arm.feat_i8mm": ("i8mm",), "hw.optional.arm.feat_rdm": ("asimdrdm",),
    "hw.optional.arm.feat_sme": ("sme",), "hw.optional.arm.feat_sme2": ("sme2",),
    "hw.optional.arm.feat_sve": ("sve",), "hw.optional.arm.feat_sve2": ("sve2",),
    "hw.optional.avx1_0": ("avx",), "hw.optional.avx2_0": ("avx2",), "hw.optional.fma": ("fma",),
    "hw.optional.f16c": ("f16c",), "hw.optional.sse4_1": ("sse4_1",), "hw.optional.sse4_2": ("sse4_2",),
}
_SYSCTL_AVX512 = re.compile(r"hw\.optional\.(avx512\w+)")


def _darwin_word(word: str) -> str:
    return _DARWIN_WORDS.get(word, word)


def parse_sysctl(text: str) -> Tuple[Optional[str], Tuple[str, ...]]:
    """The CPU model and feature flags from ``sysctl``'s output on macOS, in Linux's names.

    Reads ``machdep.cpu.brand_string`` (the model), the words of ``machdep.cpu.features``,
    ``machdep.cpu.leaf7_features`` and ``machdep.cpu.extfeatures`` (Intel Macs), and the
    ``hw.optional.*`` keys set to 1 (``hw.optional.arm.FEAT_BF16: 1`` is ``bf16``;
    ``hw.optional.avx512f: 1`` is ``avx512f``). Keys set to 0 and unknown keys are left out.

    Args:
        text (str): ``sysctl -a`` (or the keys above), one ``key: value`` a line; ``""``: nothing.

    Returns:
        ``(model or None, flags)``; flags sorted, lower case, no duplicates.

    Example:
        >>> parse_sysctl("machdep.cpu.brand_string: Apple M2\\nhw.optional.arm.FEAT_BF16: 1\\n"
        ...              "hw.optional.AdvSIMD: 1\\nhw.optional.arm.FEAT_SME: 0\\n")
        ('Apple M2', ('asimd', 'bf16'))
    """
    model: Optional[str] = None
    flags = set()
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if not sep:
            continue
        key, value = key.strip().lower(), value.strip()
        if key == "machdep.cpu.brand_string":
            model = value or model
        elif key in ("machdep.cpu.features", "machdep.cpu.leaf7_features", "machdep.cpu.extfeatures"):
            flags.update(_darwin_word(w) for w in value.lower().split())
        elif key.startswith("hw.optional.") and value == "1":
            avx512 = _SYSCTL_AVX512.fullmatch(key)
            flags.update(_SYSCTL_OPTIONAL.get(key, ()) or ((_darwin_word(avx512.group(1)),) if avx512 else ()))
    return model, tuple(sorted(flags))


# -- archspec --------------------------------------------------------------------------------
def archspec_host() -> Tuple[Optional[str], Tuple[str, ...]]:
    """archspec's name for this CPU's microarchitecture and that microarchitecture's features.

    Returns:
        ``(name, features)``; ``(None, ())`` where archspec is not installed or fails.
    """
    try:
        import archspec.cpu

        host = archspec.cpu.host()
        return str(host.name), tuple(sorted({str(f).lower() for f in host.features}))
    except Exception:  # noqa: BLE001 - not installed, or an OS it cannot read: unknown
        return None, ()


def _read_text(path: str) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read()
    except OSError:
        return ""


def _sysctl() -> str:
    """``sysctl``'s CPU keys on macOS (``""`` where it cannot run)."""
    keys = ["machdep.cpu.brand_string", "machdep.cpu.features", "machdep.cpu.leaf7_features",
            "machdep.cpu.extfeatures", "hw.optional"]
    for exe in ("sysctl", "/usr/sbin/sysctl"):
        try:
            return subprocess.run([exe, *keys], capture_output=True, text=True, timeout=10).stdout
        except (OSError, subprocess.SubprocessError):
            continue
    return ""


def read_cpu(*, system: Optional[str] = None, read_text: Optional[Callable[[str], str]] = None,
             sysctl: Optional[Callable[[], str]] = None,
             archspec: Optional[Callable[[], Tuple[Optional[str], Tuple[str, ...]]]] = None) -> CpuReading:
    """This CPU's model, microarchitecture and flags, from the OS's list joined with archspec's.

    Args:
        system (str | None, default None): ``platform.system()``; None reads it.
        read_text (callable | None, default None): ``read_text(path) -> text`` (``""`` when absent);
            None reads the file.
        sysctl (callable | None, default None): ``sysctl()`` -> its output, asked on macOS only;
            None runs ``sysctl``.
        archspec (callable | None, default None): ``() -> (name, features)``; None is ``archspec_host``.

    Returns:
        A ``CpuReading``; flags are the union of both sources.

    Example:
        >>> r = read_cpu(system="Darwin", read_text=lambda p: "", archspec=lambda: (None, ()),
        ...              sysctl=lambda: "machdep.cpu.brand_string: Apple M2\\nhw.optional.arm.FEAT_BF16: 1\\n")
        >>> r.model, r.flags, r.sources
        ('Apple M2', ('bf16',), ('sysctl',))
    """
    system = platform.system() if system is None else system
    if system == "Darwin":
        source, (model, flags) = "sysctl", parse_sysctl((sysctl or _sysctl)())
    else:
        source, (model, flags) = "/proc/cpuinfo", parse_cpuinfo((read_text or _read_text)("/proc/cpuinfo"))
    name, features = (archspec or archspec_host)()
    sources = tuple(s for s, found in ((source, model or flags), ("archspec", name)) if found)
    return CpuReading(model, name, tuple(sorted(set(flags) | set(features))), sources)


# -- what a record keeps, and what a line names -------------------------------------------------
#: A fingerprint keeps the flags that start with these: those the rules (``tfwb.advice.rules``) and the
#: datasheet peaks (``tfwb.datasheet``) read: x86's SSE, AVX, FMA, half-precision and matrix extensions;
#: Arm's SIMD, half precision, bfloat16, int8 matrix, SVE and SME. Not the ~90 others (``fpu``,
#: ``vme``, ``pse``, x86's ``smep``...): on an Emerald Rapids VM (AMX), 26 of its 119 flags, 306 bytes
#: of JSON instead of 1,231.
RECORDED_FLAG_PREFIXES: Tuple[str, ...] = ("sse", "avx", "amx", "fma", "f16c", "asimd", "fphp", "bf16", "i8mm",
                                           "sve", "sme", "neon")
_RECORDED = re.compile(r"(?:%s)" % "|".join(RECORDED_FLAG_PREFIXES))
#: x86 flags that share a prefix with Arm's (``smep``: supervisor-mode execution prevention, not SME).
_NOT_RECORDED = frozenset({"smep"})


def recorded_flags(flags: Iterable[str]) -> Tuple[str, ...]:
    """The flags a run's fingerprint keeps (``RECORDED_FLAG_PREFIXES``), sorted.

    Example:
        >>> recorded_flags(["fpu", "avx512_bf16", "amx_tile", "sse4_2", "fma", "smep", "asimd", "svebf16"])
        ('amx_tile', 'asimd', 'avx512_bf16', 'fma', 'sse4_2', 'svebf16')
    """
    lower = {f.lower() for f in flags}
    return tuple(sorted(f for f in lower if _RECORDED.match(f) and f not in _NOT_RECORDED))


def notable_flags(flags: Iterable[str]) -> List[str]:
    """The features worth naming in one line: the vector width, then BF16, FP16, AMX or SME.

    Example:
        >>> notable_flags(("avx2", "avx512f", "avx512_bf16", "amx_tile")), notable_flags(("asimd", "sve", "bf16"))
        (['AVX-512', 'BF16', 'AMX'], ['SVE', 'BF16'])
    """
    f = set(flags)
    arm = "asimd" in f
    if arm:
        out = ["SVE" if f & {"sve", "sve2"} else "NEON"]
    else:
        out = ["AVX-512"] if "avx512f" in f else ["AVX2"] if "avx2" in f else []
    if f & {"avx512_bf16", "amx_bf16"} or (arm and "bf16" in f):
        out.append("BF16")
    if f & {"avx512_fp16", "amx_fp16"} or (arm and "fphp" in f):
        out.append("FP16")
    if "amx_tile" in f:
        out.append("AMX")
    if f & {"sme", "sme2"}:
        out.append("SME")
    return out


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
