"""Say what an experiment should show before it runs, and afterwards whether it did.

Every measured claim in the book goes through this package, so that "agreed / did NOT
agree" is decided by tested code, never by a conditional written in a notebook cell:

- ``tfwb.expect.checks``: the checks, ``ab`` / ``check`` (A/B), ``at_least`` / ``at_most`` /
  ``equal`` (one measured value), ``unjudged``;
- ``tfwb.expect.rules``: what each knob does on a machine, one rule function per knob, which
  the knob's entry in ``tfwb.advice.ADVICE`` names (``RULES`` here is a view of that table);
- here: ``expected_for(hardware, knob, value, baseline)`` (one rule, with the bound read from
  the baseline) and ``change(hardware, baseline, **change)`` (the A/B expectation for turning
  knobs), and ``table()`` (every rule on every described machine).

Pure: no TensorFlow. ``tfwb.hardware.DESCRIBED`` holds described machines (a 2-core AVX2
CPU, AVX-512 CPUs, a Colab T4, an A100, an H100, an L4, a TPU VM, a TPU v5e VM).
"""
from __future__ import annotations

from types import SimpleNamespace
from typing import Any, Dict, Iterator, Mapping, Optional, Sequence, Tuple

from tfwb.renamed import deprecated_alias
from tfwb import advice as _advice
from tfwb import hardware as _hardware
from tfwb import knobs as _knobs
from tfwb.bottleneck import BOUNDS, COMPUTE, INPUT, OVERHEAD, OVERHEAD_GPU_BUSY_PCT, bound_of, check_bound
from tfwb.config import RunConfig
from tfwb.hardware import MachineLike
from tfwb.expect.checks import (AB, AGREED, CANNOT_TELL, DIRECTIONS, DISAGREED, FASTER, NOT_FASTER,
                                NOT_SLOWER, SAME, SLOWER, Check, Equal, Expected, Threshold, Unjudged, ab,
                                at_least, at_most, check, equal, unjudged)
from tfwb.expect.rules import (MEMORY_MEASURES, PREFETCH_MIN_HIDDEN, SOURCES, TABLE_CHANGES, Rule,
                               best_compute_capability, default_device, precision_memory, source, target, where)

__all__ = [
    "ab", "check", "at_least", "at_most", "equal", "unjudged", "change", "expected_for", "table",
    "precision_memory", "default_device", "where", "target", "best_compute_capability", "bound_of",
    "source", "SOURCES",
    "AB", "Check", "Expected", "Threshold", "Equal", "Unjudged", "RULES", "KNOWN", "COMPUTE_KNOBS",
    "INPUT_KNOBS", "DIRECTIONS", "FASTER", "SLOWER", "SAME", "NOT_SLOWER", "NOT_FASTER",
    "AGREED", "DISAGREED", "CANNOT_TELL", "BOUNDS", "INPUT", "COMPUTE", "OVERHEAD",
    "OVERHEAD_GPU_BUSY_PCT", "PREFETCH_MIN_HIDDEN", "MEMORY_MEASURES", "TABLE_CHANGES",
]

#: Knobs whose effect is the step's compute (measure with data in memory): role ``"compute"``.
COMPUTE_KNOBS: Tuple[str, ...] = _knobs.names("compute", cls=RunConfig)
#: Input knobs (their effect depends on whether the run waits on input): roles
#: ``"source"`` and ``"pipeline"``.
INPUT_KNOBS: Tuple[str, ...] = _knobs.names("source", "pipeline", cls=RunConfig)


class _Rules(Mapping):
    """``{knob: rule}`` for every ``tfwb.advice.ADVICE`` entry with a rule, read from the table on
    each use (an entry added later is in it; the table may still be loading when this is built:
    ``tfwb.advice`` imports ``tfwb.expect.rules``)."""

    def __getitem__(self, knob: str) -> Rule:
        entry = _advice.ADVICE.get(knob)
        if entry is None or entry.rule is None:
            raise KeyError(knob)
        return entry.rule

    def __iter__(self) -> Iterator[str]:
        return (k for k, a in _advice.ADVICE.items() if a.rule is not None)

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def __repr__(self) -> str:
        return repr(dict(self))


#: The expectation rule of each knob, ``RULES[knob](hardware, value, baseline, bound) -> Expected``:
#: the rules of ``tfwb.advice.ADVICE``. ``sync`` (value False) is timing without a device sync,
#: the one entry that is not a RunConfig field.
RULES: Mapping[str, Rule] = _Rules()


def _config(baseline: Any) -> Any:
    return getattr(baseline, "config", baseline)


def expected_for(hardware: MachineLike, knob: str, value: Any = True, baseline: Any = None, *,
                 bound: Optional[str] = None) -> Expected:
    """What changing one knob should do on this hardware, relative to the baseline.

    Args:
        hardware (mapping): ``tfwb.hardware.detect()`` output or a described machine
            (``tfwb.hardware.DESCRIBED``): keys ``gpus`` (``compute_capability``),
            ``cpu_flags``, ``cpu_count``, ``tpu``.
        knob (str): a key of ``RULES`` (``KNOWN``): a RunConfig field, or ``"sync"`` for
            timing without a device sync.
        value (default True): the knob's new value (``"mixed_float16"``, ``True``...).
        baseline (RunResult | RunConfig | None, default None): the run (or config) the
            change is made to: its ``strategy`` decides where the step runs, and a
            measured run tells whether it waits on input or idles a GPU (``bound_of``).
        bound (str | None, default None): ``"input"``, ``"compute"`` or ``"overhead"``,
            overriding what ``baseline`` says; None: from ``baseline``, else unknown
            (model knobs then assume a compute-bound step).

    Returns:
        An ``Expected``: ``direction`` (or None where it depends on the model more than
        on the machine), ``why`` and ``than``.

    Raises:
        ValueError: an unknown knob or bound, or a value that is the baseline itself.

    Example:
        >>> from tfwb.hardware import DESCRIBED
        >>> expected_for(DESCRIBED["colab-t4"], "mixed_precision", "mixed_float16").direction
        'faster'
        >>> expected_for(DESCRIBED["binder-2core-avx2"], "mixed_precision", "mixed_float16").direction
        'slower'
    """
    if knob not in RULES:
        raise ValueError(f"knob={knob!r} has no hardware expectation; one of {tuple(RULES)}")
    check_bound(bound)
    if bound is None:
        bound = bound_of(baseline) if hasattr(baseline, "step_times_s") else None
        if bound is None and getattr(_config(baseline), "data_source", None) == "memory":
            bound = COMPUTE if knob not in INPUT_KNOBS else None
    return RULES[knob](hardware, value, baseline, bound)


def _combine(parts: Sequence[Expected]) -> Expected:
    """One expectation for several knobs turned at once, or ValueError if they pull apart."""
    if len(parts) == 1:
        return parts[0]
    directions = {p.direction for p in parts}
    why = "; ".join(dict.fromkeys(p.why for p in parts))      # a reason two knobs share, once
    than = "the baseline"
    if len(directions) == 1:
        return Expected(parts[0].direction, why, than)
    if None not in directions and directions <= {FASTER, NOT_SLOWER}:
        return Expected(FASTER, why, than)
    if None not in directions and directions <= {SLOWER, NOT_FASTER}:
        return Expected(SLOWER, why, than)
    if None not in directions and directions <= {NOT_SLOWER, NOT_FASTER, SAME}:
        return Expected(SAME if directions == {SAME} else None, why, than)
    raise ValueError("these changes pull in different directions on this hardware "
                     f"({', '.join(sorted(str(d) for d in directions))}): check them one at a time")


def change(hardware: MachineLike, baseline: Any = None, **change: Any) -> AB:
    """The A/B expectation for changing knobs on this hardware (``expected_for``, as an ``AB``).

    Args:
        hardware (mapping): ``tfwb.hardware.detect()`` output or a described machine.
        baseline (RunResult | RunConfig | None, default None): what the change is made
            to; a measured RunResult lets the expectation use what limited it.
        **change: the knobs and their new values, e.g. ``mixed_precision="mixed_float16"``.
            Several knobs at once must agree in direction (input knobs usually do).

    Raises:
        ValueError: no change, an unknown knob, or changes that pull apart here.

    Example:
        >>> from tfwb.hardware import DESCRIBED
        >>> e = change(DESCRIBED["binder-2core-avx2"], mixed_precision="mixed_float16")
        >>> e.expected, e.claim
        ('slower', "mixed_precision='mixed_float16' on this CPU (2 cores, AVX2)")
        >>> print(e.check([1.0] * 9, [1.6] * 9))   # doctest: +NORMALIZE_WHITESPACE
        Expected: mixed_precision='mixed_float16' on this CPU (2 cores, AVX2) (slower).
        Measured: 1.60x slower. Result: agreed.
    """
    if not change:
        raise ValueError("name at least one knob to change, e.g. change(hw, mixed_precision='mixed_float16')")
    parts = [expected_for(hardware, k, v, baseline) for k, v in change.items()]
    e = _combine(parts)
    strategy = change.get("strategy", getattr(_config(baseline), "strategy", None))
    label = ", ".join(f"{k}={v!r}" for k, v in change.items())
    return AB(f"{label} on {where(hardware, strategy)}", e.direction, e.why,
              compute=any(k in COMPUTE_KNOBS for k in change), bound=_bound(baseline, change))


def _bound(baseline: Any, change: Mapping[str, Any]) -> Any:
    """The Amdahl bound of a one-knob change to a measured run (``tfwb.advice``), else None."""
    if len(change) != 1 or not getattr(baseline, "step_times_s", None):
        return None
    (knob, value), = change.items()
    entry = _advice.ADVICE.get(knob)
    if entry is None or entry.bound is None:
        return None
    try:
        b = entry.bound(baseline, knob, value)
    except (TypeError, ValueError, ZeroDivisionError):
        return None
    return b if b.speedup is not None else None


# -- the table of described machines ----------------------------------------------------------
def table(machines: Optional[Mapping[str, Mapping[str, Any]]] = None,
          changes: Sequence[Tuple[Any, ...]] = TABLE_CHANGES) -> str:
    """Markdown: the expected direction of each change on each machine, then, per machine,
    each expectation with its reason and the published facts behind it (``source``).

    Args:
        machines (mapping | None, default None): name -> hardware description;
            None is ``tfwb.hardware.DESCRIBED``.
        changes (sequence, default ``TABLE_CHANGES``): ``(label, knob, value, bound)`` or
            ``(label, knob, value, bound, baseline strategy)``.

    Example:
        >>> print(table().splitlines()[0])
        # What each knob is expected to do, per machine
    """
    machines = _hardware.DESCRIBED if machines is None else machines
    names = list(machines)
    cells: Dict[Tuple[str, str], Expected] = {}
    kinds: Dict[Tuple[str, str], str] = {}
    for label, k, v, b, *rest in changes:
        strategy = rest[0] if rest else None
        baseline = SimpleNamespace(strategy=strategy) if strategy else None
        for name in names:
            cells[label, name] = expected_for(machines[name], k, v, baseline, bound=b)
            kinds[label, name] = target(machines[name], v if k == "strategy" else strategy)
    lines = [
        "# What each knob is expected to do, per machine",
        "",
        "Generated by `python benchmarks/expectations.py` from `tfwb.expect.table()` over",
        "`tfwb.hardware.DESCRIBED`. Each cell is the candidate relative to the baseline",
        "(float32, no XLA, one step per call, one device, the knob off, a synced timing, the",
        "default strategy unless the row says `under strategy='tpu'`: without it a TPU VM's step",
        "runs on its host CPU); `-` means no fixed expectation on that machine (the reason says",
        "what it depends on). A row without a bound has no measured baseline; \"compute-bound run\"",
        "means a baseline measured busy. A chapter prints the same sentence for the reader's own",
        "machine (`tfwb.expect.change(hw, baseline, ...)`), then checks it against the measurement.",
        "The source column names the published facts each rule rests on.",
        "",
        "| change | " + " | ".join(names) + " |",
        "| --- | " + " | ".join("---" for _ in names) + " |",
    ]
    for label, *_ in changes:
        lines.append(f"| {label} | " + " | ".join(cells[label, n].direction or "-" for n in names) + " |")
    for name in names:
        hw = machines[name]
        lines += ["", f"## {name}: {_hardware.describe(hw)}", "",
                  "| change | expected | why | source |", "| --- | --- | --- | --- |"]
        for label, k, *_ in changes:
            e = cells[label, name]
            cell = [label, f"{e.direction or 'no fixed expectation'} (than {e.than})", e.why,
                    source(k, kinds[label, name])]
            lines.append("| " + " | ".join(c.replace("|", "/") for c in cell) + " |")
    return "\n".join(lines) + "\n"


def __getattr__(name: str) -> Any:
    """``KNOWN`` (every change ``expected_for`` knows: the keys of ``RULES``, read now), and the
    tfwb 0.1 name ``knob`` (now ``change``), with a DeprecationWarning (until 0.3)."""
    if name == "KNOWN":
        return tuple(RULES)
    if name == "knob":
        return deprecated_alias(__name__, "knob", "change", lambda: change)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
