"""RunConfig: every knob of one training run, validated when it is built.

A ``RunConfig`` is a frozen dataclass. Building one with a bad value raises
``ValueError`` naming the field, the value and what is allowed, before any work
starts. This module is pure: it imports neither TensorFlow nor any UI library.
"""
from __future__ import annotations

import dataclasses
import math
import numbers
import os
from dataclasses import dataclass, field, fields
from typing import Any, Mapping, Optional, Union

MIXED_PRECISION = ("off", "mixed_float16", "mixed_bfloat16")
STRATEGIES = ("default", "mirrored", "multi_worker", "tpu")
OPTIMIZERS = ("sgd", "momentum", "adam", "adamw", "rmsprop", "nadam")
CLIP_KINDS = ("norm", "global_norm", "value")
DATA_SOURCES = ("files", "generator", "memory")
SIZES = ("auto", "small", "full")


def fast_mode() -> bool:
    """True when ``TFWB_FAST=1``: workloads use their small size (tests, CI, Binder)."""
    return os.environ.get("TFWB_FAST", "") == "1"


def parse_clip(clip: Optional[str]) -> Optional[tuple]:
    """Split a clip spec such as ``"global_norm:1.0"`` into ``("global_norm", 1.0)``.

    Args:
        clip: ``None`` (no clipping) or ``"<kind>:<value>"`` with kind one of
            ``norm``, ``global_norm``, ``value`` and value a finite number > 0.

    Returns:
        ``None`` or a ``(kind, value)`` tuple.

    Raises:
        ValueError: naming the field ``clip``, the value and the allowed forms.
    """
    if clip is None:
        return None
    allowed = "None or 'norm:X', 'global_norm:X', 'value:X' with X > 0"
    if not isinstance(clip, str) or clip.count(":") != 1:
        raise ValueError(f"clip={clip!r} is not allowed; use {allowed}")
    kind, _, raw = clip.partition(":")
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(f"clip={clip!r}: {raw!r} is not a number; use {allowed}") from None
    if kind not in CLIP_KINDS or not (value > 0 and math.isfinite(value)):
        raise ValueError(f"clip={clip!r} is not allowed; use {allowed}")
    return kind, value


def _fail(name: str, value: Any, allowed: str) -> None:
    raise ValueError(f"{name}={value!r} is not allowed; {name} must be {allowed}")


def _check_choice(name: str, value: Any, choices) -> None:
    if value not in choices:
        _fail(name, value, "one of " + ", ".join(repr(c) for c in choices))


def _check_int(name: str, value: Any, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        _fail(name, value, f"an integer >= {minimum}")


def _check_number(name: str, value: Any, minimum: float, *, strict: bool = False) -> None:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if not ok or value < minimum or (strict and value == minimum):
        _fail(name, value, f"a finite number {'>' if strict else '>='} {minimum}")


def _check_bool(name: str, value: Any) -> None:
    if not isinstance(value, bool):
        _fail(name, value, "True or False")


@dataclass(frozen=True)
class RunConfig:
    """Every knob of one run. Frozen; validated at construction.

    Args:
        workload: a registered workload name (``"images"`` is built in; add your
            own with ``tfwb.register_workload``).
        size: ``"small"``, ``"full"`` or ``"auto"`` (small when ``TFWB_FAST=1``).
        batch_size: global batch size, examples per step (>= 1).
        steps: measured steps (>= 1).
        warmup_steps: steps run first and kept apart from the statistics (>= 0).
        data_source: ``"files"`` (tf.data reads the files, the pipeline knobs
            apply), ``"generator"`` (a Python generator reads and decodes them,
            the naive way) or ``"memory"`` (decoded batches staged in memory: the
            compute-only ceiling).
        storage_latency_ms: extra delay per file read, modelling network storage;
            ``None`` takes the workload's default, 0 is local disk.
        prefetch: ``prefetch(AUTOTUNE)`` last; ``False`` also turns off the
            prefetch tf.data injects by default.
        cache: ``False``, ``True`` (in memory) or a file path prefix for a disk cache.
        parallel_map: decode/augment with ``num_parallel_calls=AUTOTUNE``.
        interleave: read the shards in parallel with ``interleave``.
        vectorized_map: batch before map, so augmentation runs once per batch.
        shuffle_buffer: shuffle buffer in elements (0: no shuffle).
        deterministic: keep element order under parallelism.
        mixed_precision: ``"off"``, ``"mixed_float16"`` or ``"mixed_bfloat16"``.
        jit_compile: compile the train step with XLA.
        steps_per_execution: train steps run inside one ``tf.function`` call.
        clip: ``None`` or ``"norm:X"``, ``"global_norm:X"``, ``"value:X"``.
        optimizer: one of ``sgd``, ``momentum``, ``adam``, ``adamw``, ``rmsprop``, ``nadam``.
        learning_rate: > 0.
        strategy: ``"default"``, ``"mirrored"``, ``"multi_worker"`` or ``"tpu"``.
        replicas: logical CPU devices to create for ``mirrored`` on a machine with
            no GPU (``None``: use what is there).
        seed: seed for data generation, shuffling and weights.
        sample_interval_s: utilization sampling period (>= 0.05 s).
        label: free text shown in history tables.

    Raises:
        ValueError: naming the field, the value and what is allowed.

    Example:
        >>> RunConfig(batch_size=32, prefetch=True).batch_size
        32
    """

    workload: str = "images"
    size: str = "auto"
    batch_size: int = 64
    steps: int = 40
    warmup_steps: int = 5
    data_source: str = "files"
    storage_latency_ms: Optional[float] = None
    prefetch: bool = False
    cache: Union[bool, str] = False
    parallel_map: bool = False
    interleave: bool = False
    vectorized_map: bool = False
    shuffle_buffer: int = 0
    deterministic: bool = True
    mixed_precision: str = "off"
    jit_compile: bool = False
    steps_per_execution: int = 1
    clip: Optional[str] = None
    optimizer: str = "adam"
    learning_rate: float = 1e-3
    strategy: str = "default"
    replicas: Optional[int] = None
    seed: int = 0
    sample_interval_s: float = 0.2
    label: str = ""
    _check_workload: bool = field(default=True, repr=False, compare=False)

    def __post_init__(self) -> None:
        # NumPy scalars (from sweeps) become plain Python numbers; bools stay bools.
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, bool) or not isinstance(value, numbers.Number):
                continue
            if isinstance(value, numbers.Integral) and not isinstance(value, int):
                object.__setattr__(self, f.name, int(value))
            elif isinstance(value, numbers.Real) and not isinstance(value, (int, float)):
                object.__setattr__(self, f.name, float(value))
        if self._check_workload:
            from .workloads import workload_names

            names = workload_names()
            if self.workload not in names:
                _fail("workload", self.workload,
                      "a registered workload: " + ", ".join(repr(n) for n in names)
                      + " (add one with tfwb.register_workload)")
        elif not isinstance(self.workload, str) or not self.workload:
            _fail("workload", self.workload, "a non-empty workload name")
        _check_choice("size", self.size, SIZES)
        _check_int("batch_size", self.batch_size, 1)
        _check_int("steps", self.steps, 1)
        _check_int("warmup_steps", self.warmup_steps, 0)
        _check_choice("data_source", self.data_source, DATA_SOURCES)
        if self.storage_latency_ms is not None:
            _check_number("storage_latency_ms", self.storage_latency_ms, 0.0)
        for name in ("prefetch", "parallel_map", "interleave", "vectorized_map",
                     "deterministic", "jit_compile"):
            _check_bool(name, getattr(self, name))
        if not isinstance(self.cache, bool) and not (isinstance(self.cache, str) and self.cache.strip()):
            _fail("cache", self.cache, "False, True (in memory) or a file path prefix (on disk)")
        _check_int("shuffle_buffer", self.shuffle_buffer, 0)
        _check_choice("mixed_precision", self.mixed_precision, MIXED_PRECISION)
        _check_int("steps_per_execution", self.steps_per_execution, 1)
        parse_clip(self.clip)
        _check_choice("optimizer", self.optimizer, OPTIMIZERS)
        _check_number("learning_rate", self.learning_rate, 0.0, strict=True)
        _check_choice("strategy", self.strategy, STRATEGIES)
        if self.replicas is not None:
            _check_int("replicas", self.replicas, 1)
        _check_int("seed", self.seed, 0)
        _check_number("sample_interval_s", self.sample_interval_s, 0.05)
        if not isinstance(self.label, str):
            _fail("label", self.label, "a string")

    # -- derived values -------------------------------------------------
    @property
    def resolved_size(self) -> str:
        """``"small"`` or ``"full"``: ``size``, with ``"auto"`` resolved by ``TFWB_FAST``."""
        if self.size != "auto":
            return self.size
        return "small" if fast_mode() else "full"

    @property
    def clip_spec(self) -> Optional[tuple]:
        """The parsed ``clip``: ``None`` or ``(kind, value)``."""
        return parse_clip(self.clip)

    # -- copying and serialising -------------------------------------------
    def replace(self, **changes: Any) -> "RunConfig":
        """A copy with ``changes`` applied and validated.

        Raises:
            ValueError: for an unknown field (listing the known ones) or a bad value.
        """
        unknown = sorted(set(changes) - set(field_names()))
        if unknown:
            raise ValueError(f"unknown RunConfig field(s) {', '.join(unknown)}; "
                             f"known fields: {', '.join(field_names())}")
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict:
        """Every public field as plain JSON-ready data."""
        return {name: getattr(self, name) for name in field_names()}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, check_workload: bool = True) -> "RunConfig":
        """Build from ``to_dict()`` output; unknown keys raise ``ValueError``.

        ``check_workload=False`` accepts a workload that is not registered in this
        process (used when reading saved results back).
        """
        if not isinstance(data, Mapping):
            raise ValueError(f"RunConfig.from_dict needs a mapping, got {type(data).__name__}")
        unknown = sorted(set(data) - set(field_names()))
        if unknown:
            raise ValueError(f"unknown RunConfig field(s) {', '.join(unknown)}; "
                             f"known fields: {', '.join(field_names())}")
        return cls(**dict(data), _check_workload=check_workload)

    def diff(self, other: "RunConfig") -> dict:
        """``{field: value in self}`` for every field where ``self`` differs from ``other``
        (``label`` excluded)."""
        return {name: getattr(self, name) for name in field_names()
                if name not in ("label",) and getattr(self, name) != getattr(other, name)}


def field_names() -> tuple:
    """The public RunConfig field names, in declaration order."""
    return tuple(f.name for f in fields(RunConfig) if not f.name.startswith("_"))
