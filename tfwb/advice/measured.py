"""The knob effects measured on each CPU kind: the facts a CPU rule states a direction from.

A CPU rule (``tfwb.advice.rules``) states "faster" or "slower" for a knob only where this
table holds a measurement of that change on that kind of CPU, for a model made of the same
things (convolutions, dense layers, embeddings: a workload's ``made_of``). Elsewhere it says
that it was not measured and what the nearest measured kind measured. The benchmark that
measures them (``benchmarks/knob_effects.py``) states each expectation through the same rules,
so its "expected vs measured" reads these facts too; each row names the file it comes from.

- ``cpu_kind(hw)``: which kind of CPU a machine has (``AVX2``, ``AVX512``, ``AVX512_BF16``,
  ``AMX``, ``ARM``, ``APPLE``; None when no feature is listed);
- ``composition(made_of)``: what a rule compares models by (any convolution decides);
- ``Measured``: one measured change on one workload; ``MEASURED``: all of them;
- ``evidence(kind, knob, value, made_of)``: the measured direction and its reason, or None;
- ``not_measured(kind, knob, value, made_of)``: the reason for a kind never measured.

Pure: no TensorFlow.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Optional, Sequence, Tuple

from tfwb.advice.directions import FASTER, SLOWER
from tfwb.hardware import Machine, MachineLike
from tfwb.workloads import PARTS

AVX2, AVX512, AVX512_BF16, AMX, ARM, APPLE = "avx2", "avx512", "avx512-bf16", "amx", "arm", "apple"
#: Each CPU kind in words.
KIND_NAMES: Dict[Optional[str], str] = {
    AVX2: "an AVX2 CPU without AVX-512",
    AVX512: "an AVX-512 CPU without bfloat16 instructions",
    AVX512_BF16: "an AVX-512 BF16 CPU without AMX",
    AMX: "an AVX-512 BF16/FP16 CPU with AMX (Sapphire Rapids class)",
    ARM: "an Arm CPU",
    APPLE: "Apple silicon",
    None: "a CPU that lists no features",
}
#: Where each measured kind's figures come from (``benchmarks/knob_effects.py``'s output).
SOURCES: Dict[str, str] = {AVX2: "benchmarks/results/knob_effects_avx2.json",
                           AMX: "benchmarks/results/knob_effects_amx.json"}
#: A kind never measured -> the measured kind closest to it (the same bfloat16 hardware or lack of it).
NEAREST: Dict[Optional[str], str] = {AVX512: AVX2, AVX512_BF16: AMX, ARM: AMX, APPLE: AMX, None: AVX2}

#: What a workload may be made of (``register_workload(made_of=...)``).
CONVOLUTIONS, DENSE, EMBEDDINGS = PARTS


def cpu_kind(hw: MachineLike) -> Optional[str]:
    """The kind of a machine's CPU, from its flags and model; None when it lists no features.

    Example:
        >>> from tfwb.hardware import DESCRIBED
        >>> [cpu_kind(DESCRIBED[n]) for n in ("binder-2core-avx2", "colab-t4", "cpu-2core-avx512-bf16",
        ...                                   "cpu-2core-avx512-amx", "arm-graviton3", "apple-m2")]
        ['avx2', 'avx512', 'avx512-bf16', 'amx', 'arm', 'apple']
    """
    machine = Machine.of(hw)
    flags = frozenset(machine.cpu_flags)
    if "asimd" in flags or (machine.cpu_model or "").startswith("Apple"):
        return APPLE if (machine.cpu_model or "").startswith("Apple") else ARM
    if "amx_bf16" in flags:
        return AMX
    if "avx512_bf16" in flags:
        return AVX512_BF16
    if "avx512f" in flags:
        return AVX512
    if "avx2" in flags:
        return AVX2
    return None


def composition(made_of: Optional[Sequence[str]]) -> Optional[Tuple[str, ...]]:
    """What a rule compares models by: ``("convolutions",)`` for any model with convolutions
    (they decide a CPU step's precision), else its sorted parts; None when unknown.

    Example:
        >>> composition(("dense", "convolutions")), composition(("embeddings", "dense")), composition(())
        (('convolutions',), ('dense', 'embeddings'), None)
    """
    if not made_of:
        return None
    if CONVOLUTIONS in made_of:
        return (CONVOLUTIONS,)
    return tuple(sorted(set(made_of)))


@dataclass(frozen=True)
class Measured:
    """One change measured interleaved against float32 without XLA on one workload of one CPU kind.

    Attributes:
        kind: the CPU kind (``AVX2``, ``AMX``...).
        knob, value: the change, e.g. ``"mixed_precision"``, ``"mixed_float16"``.
        workload: the book's workload it was measured on; ``made_of`` what that is made of.
        direction: ``FASTER`` or ``SLOWER``; None for no significant difference.
        ratio, low, high: how many times faster or slower, and its confidence interval, as the
            source prints them (``"8.0"``, ``"1.80"``); None where it gives none.
    """

    kind: str
    knob: str
    value: Any
    workload: str
    made_of: Tuple[str, ...]
    direction: Optional[str]
    ratio: Optional[str] = None
    low: Optional[str] = None
    high: Optional[str] = None

    def __post_init__(self) -> None:
        if self.direction not in (FASTER, SLOWER, None):
            raise ValueError(f"direction={self.direction!r} is not allowed; {FASTER!r}, {SLOWER!r} or None")
        if self.kind not in SOURCES:
            raise ValueError(f"kind={self.kind!r} is not allowed; a measured kind, one of {tuple(SOURCES)}")

    @property
    def source(self) -> str:
        """The file the figure comes from."""
        return SOURCES[self.kind]

    def text(self) -> str:
        """e.g. ``"147x slower on images (CI 124-229x)"``, ``"no significant difference on mlp"``."""
        if self.direction is None:
            what = "no significant difference"
        else:
            what = f"{self.ratio}x {self.direction}" if self.ratio else self.direction
            if self.low and self.high:
                what += f" (CI {self.low}-{self.high}x)"
        return f"{what} on {self.workload}"


_CONV, _MLP, _TEXT = (CONVOLUTIONS, DENSE), (DENSE,), (DENSE, EMBEDDINGS)
_BF16, _F16, _XLA = ("mixed_precision", "mixed_bfloat16"), ("mixed_precision", "mixed_float16"), ("jit_compile", True)


def _rows(kind: str, *rows: Tuple[Tuple[str, Any], str, Tuple[str, ...], Optional[str], Optional[str],
                                   Optional[str], Optional[str]]) -> Tuple[Measured, ...]:
    return tuple(Measured(kind, change[0], change[1], w, m, d, r, lo, hi) for change, w, m, d, r, lo, hi in rows)


#: Every measured change. For AVX2, a 2-core AMD EPYC (Zen 2), small mode, 6 interleaved rounds;
#: for AMX, the figures of issue 35 (a 2-core Sapphire Rapids-class Xeon, small mode, 6 rounds).
#: "no significant difference" keeps the point estimate where the source printed one.
MEASURED: Tuple[Measured, ...] = _rows(
    AVX2,
    (_BF16, "images", _CONV, SLOWER, "8.16", "7.21", "9.39"),
    (_F16, "images", _CONV, SLOWER, "2.55", "2.26", "2.77"),
    (_XLA, "images", _CONV, None, None, None, None),
    (_BF16, "mlp", _MLP, None, None, None, None),
    (_F16, "mlp", _MLP, None, None, None, None),
    (_XLA, "mlp", _MLP, None, None, None, None),
    (_BF16, "text", _TEXT, SLOWER, "1.34", "1.21", "1.80"),
    (_F16, "text", _TEXT, None, None, None, None),
    (_XLA, "text", _TEXT, FASTER, "2.36", "1.42", "2.73"),
) + _rows(
    AMX,
    (_BF16, "images", _CONV, FASTER, "1.79", "1.28", "1.99"),
    (_F16, "images", _CONV, SLOWER, "147", "124", "229"),
    (_XLA, "images", _CONV, SLOWER, "2.36", None, None),
    (_BF16, "cifar10", _CONV, FASTER, "1.84", "1.35", "2.12"),
    (_F16, "cifar10", _CONV, SLOWER, "174", "98", "209"),
    (_XLA, "cifar10", _CONV, SLOWER, "2.42", None, None),
    (_BF16, "mlp", _MLP, None, None, None, None),
    (_F16, "mlp", _MLP, SLOWER, "8.0", "7.3", "10.1"),
    (_XLA, "mlp", _MLP, None, None, None, None),
    (_BF16, "text", _TEXT, None, None, None, None),
    (_F16, "text", _TEXT, None, None, None, None),
    (_XLA, "text", _TEXT, FASTER, "1.35", "1.19", "1.89"),
)


def rows_for(kind: Optional[str], knob: str, value: Any,
             made_of: Optional[Sequence[str]] = None) -> Tuple[Measured, ...]:
    """The measurements of one change on one kind, of models made like ``made_of`` (None: all)."""
    want = composition(made_of)
    return tuple(m for m in MEASURED if m.kind == kind and m.knob == knob and m.value == value
                 and (want is None or composition(m.made_of) == want))


def _made(parts: Sequence[str]) -> str:
    return " and ".join(p if p != DENSE else "dense layers" for p in parts)


def _listed(rows: Sequence[Measured]) -> str:
    return ", ".join(m.text() for m in rows)


def evidence(kind: Optional[str], knob: str, value: Any,
             made_of: Optional[Sequence[str]] = None) -> Optional[Tuple[Optional[str], str]]:
    """The direction measured for a change on this kind of CPU and the reason, as the rule states it.

    Returns:
        ``(direction, why)``: ``direction`` is ``FASTER`` / ``SLOWER`` where every measurement of
        models made like ``made_of`` (all of the kind's, when unknown) went that way, else None
        (no significant difference, a split, or a composition never measured); None when this kind
        was never measured (``not_measured`` says so).

    Example:
        >>> evidence(AMX, "mixed_precision", "mixed_bfloat16", ("convolutions", "dense"))[0]
        'faster'
        >>> evidence(ARM, "mixed_precision", "mixed_bfloat16") is None
        True
    """
    if kind not in SOURCES:
        return None
    where = f"measured on {KIND_NAMES[kind]} ({SOURCES[kind].replace('.json', '.md')})"
    rows = rows_for(kind, knob, value, made_of)
    if not rows:
        every = rows_for(kind, knob, value)
        return None, (f"not measured for a model made of {_made(made_of or ())} on this kind of CPU; {where}: "
                      + _listed(every))
    directions = {m.direction for m in rows}
    if len(directions) == 1 and None not in directions:
        return rows[0].direction, f"{where}: {_listed(rows)}"
    if directions == {None}:
        return None, f"{where}: {_listed(rows)}, so the book states no direction"
    return None, (f"{where}: {_listed(rows)}: it depends on what the model is made of, which is not "
                  "known here (a workload declares it: made_of)")


def not_measured(kind: Optional[str], knob: str, value: Any, made_of: Optional[Sequence[str]] = None) -> str:
    """The reason for a kind never measured: says so, and what the nearest measured kind measured.

    Example:
        >>> not_measured(AVX512, "jit_compile", True, ("dense",))
        'not measured on this kind of CPU (an AVX-512 CPU without bfloat16 instructions): an AVX2 CPU without AVX-512, the nearest measured kind, measured no significant difference on mlp'
    """
    nearest = NEAREST.get(kind, AVX2)
    rows = rows_for(nearest, knob, value, made_of) or rows_for(nearest, knob, value)
    return (f"not measured on this kind of CPU ({KIND_NAMES.get(kind, kind)}): {KIND_NAMES[nearest]}, "
            f"the nearest measured kind, measured {_listed(rows) or 'nothing for this change'}")

