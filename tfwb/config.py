"""RunConfig: every knob of one training run, validated when it is built.

A ``RunConfig`` is a frozen dataclass. Each field is declared once with its
``knob_field(...)`` (kind, allowed values, Workbench group, help, chapter; see
``tfwb.knobs``), and validation, the command line, the Workbench controls and the
README's knob table all come from those declarations. Building one with a bad value
raises ``ValueError`` naming the field, the value and what is allowed, before any
work starts. This module is pure: it imports neither TensorFlow nor any UI library.
"""
from __future__ import annotations

import dataclasses
import math
import os
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, Mapping, Optional, Union

from tfwb import knobs as _knobs
from tfwb.knobs import knob_field

MIXED_PRECISION = ("off", "mixed_float16", "mixed_bfloat16")

#: The dtype a run's matmuls compute in, per ``mixed_precision`` value (the peak its MFU is read against).
COMPUTE_DTYPES: Dict[str, str] = {"off": "float32", "mixed_float16": "float16", "mixed_bfloat16": "bfloat16"}


def compute_dtype(mixed_precision: Optional[str]) -> str:
    """The dtype a run's matmuls compute in under a ``mixed_precision`` value (float32 for any other).

    Example:
        >>> compute_dtype("mixed_bfloat16"), compute_dtype("off")
        ('bfloat16', 'float32')
    """
    return COMPUTE_DTYPES.get(str(mixed_precision), "float32")


STRATEGIES = ("default", "mirrored", "multi_worker", "parameter_server", "tpu")
OPTIMIZERS = ("sgd", "momentum", "adam", "adamw", "rmsprop", "nadam")
CLIP_KINDS = ("norm", "global_norm", "value")
DATA_SOURCES = ("files", "generator", "memory")
SIZES = ("auto", "small", "full")
EXECUTIONS = ("graph", "eager")
#: How steps are timed: ``windowed`` (training's throughput: one device sync per window of
#: steps) or ``per_step`` (each step's own synced latency; host and device serialised).
TIMINGS = ("windowed", "per_step")
CLIP_ALLOWED = "None or 'norm:X', 'global_norm:X', 'value:X' with X > 0"


def fast_mode() -> bool:
    """True when ``TFWB_FAST=1``: workloads use their small size (tests, CI, Binder)."""
    return os.environ.get("TFWB_FAST", "") == "1"


#: What ``size="auto"`` means in this process when ``TFWB_FAST`` is not set: ``None`` (full)
#: until ``tfwb.choose_size()`` measures the machine and sets it (``set_auto_size``).
_AUTO_SIZE = {"size": None}


def set_auto_size(size: Optional[str]) -> None:
    """Make ``size="auto"`` mean ``size`` in this process (``None``: back to full).

    Raises:
        ValueError: for a size other than ``"small"``, ``"full"`` or ``None``.
    """
    if size not in (None, "small", "full"):
        raise ValueError(f"size={size!r} is not allowed; size must be 'small', 'full' or None")
    _AUTO_SIZE["size"] = size


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
    allowed = CLIP_ALLOWED
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


@dataclass(frozen=True)
class RunConfig:
    """Every knob of one run. Frozen; validated at construction.

    Every field is declared below with ``knob_field(...)``: its kind, allowed values,
    Workbench group, one line of help and the chapter that teaches it. Read them
    as a table with ``python -m tfwb knobs`` (or ``tfwb.config.KNOBS``); the README
    has the same table.

    Raises:
        ValueError: naming the field, the value and what is allowed.

    Example:
        >>> RunConfig(batch_size=32, prefetch=True).batch_size
        32
    """

    workload: str = knob_field("images", "choice", "the registered workload to train (tfwb.register_workload adds one)",
                         group="run", choices=lambda: _workloads.workload_names(),
                         fixed="a sweep trains one workload; set it on the baseline (--workload)")
    size: str = knob_field("auto", "choice", "workload size; auto is small under TFWB_FAST=1, else full",
                     group="run", choices=SIZES,
                     fixed="a sweep trains one size; set it on the baseline (--size)")
    batch_size: int = knob_field(64, "int", "global batch: examples per training step, over all replicas",
                           group="run", minimum=1, unit="examples", role="pipeline")
    steps: int = knob_field(40, "int", "measured training steps", group="run", minimum=1, unit="steps",
                      fixed="the search sets each rung's steps (min_steps, eta)")
    warmup_steps: int = knob_field(5, "int", "steps run first and kept apart from the statistics (tracing, "
                             "compilation, autotuning)", group="run", minimum=0, unit="steps",
                             fixed="every run warms up as the baseline says; set it on the baseline")
    timing: str = knob_field("windowed", "choice", "windowed: steps run back to back as in training, one device "
                       "sync per window of steps (about 0.1 s), per-step times derived from the windows; "
                       "per_step: a loss read and device sync after every step (its own latency; on a GPU "
                       "the host can no longer run ahead, so throughput reads low)",
                       group="run", choices=TIMINGS, chapter=0, off="windowed",
                       fixed="every candidate is timed the same way; set it on the baseline")
    data_source: str = knob_field("files", "choice", "files: the tf.data pipeline (for images, reading the PNG "
                            "files); generator: a Python generator (images only, the naive way); memory: "
                            "staged batches (the compute-only ceiling)",
                            group="input", choices=DATA_SOURCES, chapter=1, role="pipeline",
                            set_when=lambda v: v != "files")
    storage_latency_ms: Optional[float] = knob_field(
        None, "float", "extra delay per file read, modelling network storage", group="input",
        minimum=0.0, optional=True, none_means="the workload's default", unit="ms",
        offered=(None, 0.0, 3.0, 25.0, 100.0), chapter=1, role="source")
    prefetch: bool = knob_field(False, "bool", "prefetch(AUTOTUNE) last; off also turns off the prefetch "
                          "tf.data injects", group="input", chapter=1, role="pipeline",
                          sweep=(False, True))
    cache: Union[bool, str] = knob_field(False, "cache", "cache decoded elements: in memory (True) or in files "
                                   "at a path prefix", group="input", chapter=1, role="pipeline",
                                   sweep=(False, True))
    parallel_map: bool = knob_field(False, "bool", "decode and augment with num_parallel_calls=AUTOTUNE",
                              group="input", chapter=1, role="source", sweep=(False, True))
    interleave: bool = knob_field(False, "bool", "read several shards at once", group="input", chapter=1,
                            role="source")
    vectorized_map: bool = knob_field(False, "bool", "batch before map: augment once per batch",
                                group="input", chapter=1, role="source")
    shuffle_buffer: int = knob_field(0, "int", "shuffle buffer in elements (0: no shuffle)", group="input",
                               minimum=0, unit="elements", chapter=1, role="pipeline", off=0)
    deterministic: bool = knob_field(True, "bool", "keep element order under parallelism", group="input",
                               chapter=1, role="pipeline", off=True)
    mixed_precision: str = knob_field("off", "choice", "Keras dtype policy for the model (logits and loss "
                                "stay float32)", group="precision", choices=MIXED_PRECISION, chapter=3,
                                role="compute", off="off", sweep=("off", "mixed_bfloat16", "mixed_float16"))
    tf32: bool = knob_field(True, "bool", "allow TF32 matmuls and convolutions on Ampere and newer NVIDIA GPUs "
                      "(compute capability >= 8.0; TensorFlow's default); no effect elsewhere",
                      group="precision", chapter=3, role="compute", off=True)
    execution: str = knob_field("graph", "choice", "graph: the train step is a tf.function; eager: the same step "
                          "run op by op in Python, for comparison", group="graph", choices=EXECUTIONS,
                          chapter=2, role="compute", off="graph")
    jit_compile: bool = knob_field(False, "bool", "compile the train step with XLA (its compile time is part of "
                             "warm-up)", group="graph", chapter=2, role="compute",
                             sweep=(False, True))
    steps_per_execution: int = knob_field(1, "int", "training steps run inside one call of the step function "
                                    "(steps and warmup_steps round up to whole calls)",
                                    group="graph", minimum=1, unit="steps", chapter=2, role="compute",
                                    off=1)
    clip: Optional[str] = knob_field(None, "spec", "gradient clipping: norm:X per tensor, global_norm:X over "
                               "all, value:X per element", group="optimizer", validate=parse_clip,
                               none_means=CLIP_ALLOWED, offered=(None, "global_norm:1.0", "norm:1.0",
                                                                 "value:0.5"), chapter=4)
    optimizer: str = knob_field("adam", "choice", "the optimizer (momentum is SGD with momentum 0.9)",
                          group="optimizer", choices=OPTIMIZERS, chapter=4)
    learning_rate: float = knob_field(1e-3, "float", "the optimizer's learning rate", group="optimizer",
                                minimum=0.0, exclusive_minimum=True, maximum=10.0, log_scale=True,
                                chapter=4)
    weight_decay: Optional[float] = knob_field(
        None, "float", "weight decay: decoupled (AdamW) for adamw, an L2 penalty on the kernels in the "
        "loss for the others", group="optimizer", minimum=0.0, exclusive_minimum=True, maximum=1.0,
        optional=True, none_means="the optimizer's own default: 0.004 for adamw, none for the others",
        offered=(None, 1e-4, 1e-3, 1e-2, 0.1, 0.5), chapter=4)
    grad_norms: bool = knob_field(False, "bool", "record each step's global gradient norm before clipping "
                            "(unscaled under mixed_float16), and the loss scale; costs a reduction per step",
                            group="optimizer", chapter=4)
    strategy: str = knob_field("default", "choice", "distribution strategy", group="distribution",
                         choices=STRATEGIES, chapter=5, role="distribution", off="default")
    replicas: Optional[int] = knob_field(None, "int", "replicas for mirrored (GPUs to use, or logical CPU "
                                   "devices on a machine without a GPU)", group="distribution",
                                   minimum=1, optional=True,
                                   none_means="every GPU, or 2 logical CPU devices", chapter=5,
                                   role="distribution")
    workers: int = knob_field(2, "int", "worker processes for multi_worker and parameter_server: tfwb starts them "
                        "on this machine (TF_CONFIG on loopback; parameter_server adds a chief and a ps) "
                        "unless this process already is part of a cluster", group="distribution",
                        minimum=1, maximum=16, chapter=5, role="distribution")
    seed: int = knob_field(0, "int", "seed for data generation, shuffling and weights", group="run", minimum=0,
                     fixed="candidates are compared on the same data and weights; set it on the baseline")
    sample_interval_s: float = knob_field(0.2, "float", "utilization sampling period", minimum=0.05, unit="s",
                                    chapter=0)
    label: str = knob_field("", "text", "free text shown in history tables",
                      fixed="the search labels each candidate by what it changes")
    _check_workload: bool = field(default=True, repr=False, compare=False)

    def __post_init__(self) -> None:
        for name, k in KNOBS.items():
            if name == "workload" and not self._check_workload:
                if not isinstance(self.workload, str) or not self.workload:
                    raise ValueError(f"workload={self.workload!r} is not allowed; workload must be "
                                     "a non-empty workload name")
                continue
            try:
                object.__setattr__(self, name, k.check(name, getattr(self, name)))
            except ValueError as e:
                if name == "workload":
                    raise ValueError(f"{e} (add one with tfwb.register_workload)") from None
                raise
        if self._check_workload:
            _workloads.get_workload(self.workload).check(self)      # a data_source this workload honours
        if self.jit_compile and self.execution == "eager":
            raise ValueError("jit_compile=True is not allowed with execution='eager': XLA compiles a "
                             "tf.function; pick execution='graph' or jit_compile=False")

    # -- derived values -------------------------------------------------
    @property
    def resolved_size(self) -> str:
        """``"small"`` or ``"full"``: ``size``, with ``"auto"`` resolved: small under ``TFWB_FAST=1``,
        else what ``tfwb.choose_size()`` measured for this machine (full until it runs)."""
        if self.size != "auto":
            return self.size
        if fast_mode():
            return "small"
        return _AUTO_SIZE["size"] or "full"

    @property
    def calls(self) -> tuple:
        """``(warm-up calls, measured calls)`` of the step function: steps rounded up to whole calls."""
        n = self.steps_per_execution
        return -(-self.warmup_steps // n), -(-self.steps // n)

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
        check_fields(changes)
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
        check_fields(data)
        return cls(**dict(data), _check_workload=check_workload)

    def diff(self, other: "RunConfig") -> dict:
        """``{field: value in self}`` for every field where ``self`` differs from ``other``
        (``label`` excluded)."""
        return {name: getattr(self, name) for name in field_names()
                if name not in ("label",) and getattr(self, name) != getattr(other, name)}


#: ``{field: Knob}`` for every RunConfig field, in declaration order.
KNOBS = _knobs.table(RunConfig)
_knobs.declare(RunConfig)

# The workload registry derives its knob lists from the roles just declared, so it is
# imported after ``declare`` (RunConfig looks workloads up only when one is built).
from tfwb import workloads as _workloads  # noqa: E402


def field_names() -> tuple:
    """The public RunConfig field names, in declaration order."""
    return tuple(KNOBS)


def check_fields(names: Iterable[str]) -> None:
    """Raise ``ValueError`` listing the known fields when any of ``names`` is not a RunConfig field."""
    unknown = sorted(set(names) - set(KNOBS))
    if unknown:
        raise ValueError(f"unknown RunConfig field(s) {', '.join(unknown)}; "
                         f"known fields: {', '.join(KNOBS)}")
