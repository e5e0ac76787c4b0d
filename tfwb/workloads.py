"""The workload registry: what model to train on what data, and which knobs reach it.

A workload is a model factory, an unbatched data factory and a loss, plus a
declaration of what its data honours: the ``data_source`` values it has and
which source knobs (reading files, decoding, augmenting) apply to it. tfwb
applies the generic pipeline knobs (``cache``, ``shuffle_buffer``, ``batch_size``,
``prefetch``, ``deterministic``) and every training knob on top.

A factory is a callable, or a ``"module:attribute"`` string imported at first
use. The built-in workloads are registered that way (``tfwb.tf.workloads.<name>``),
so this module stays pure: it imports neither TensorFlow nor ``tfwb.tf``, and
``tfwb.config`` (which asks it for names) never pulls TensorFlow in. Its knob lists
are derived from the roles declared on RunConfig's knobs (``tfwb.knobs.names``), which
``tfwb.config`` declares before it imports this module. A new
built-in workload is one module under ``tfwb/tf/workloads/`` plus one entry in
``_BUILTINS`` below.
"""
from __future__ import annotations

import importlib
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Mapping, Optional, Tuple, Union

from tfwb import knobs as _knobs

#: Input knobs only a workload's own source can honour (role ``"source"`` in RunConfig's
#: declarations): they shape how files are read, decoded and augmented. A workload lists
#: the ones it honours in ``source_knobs``.
SOURCE_KNOBS: Tuple[str, ...] = _knobs.names("source")

#: Input knobs tfwb applies to every workload's dataset (role ``"pipeline"``;
#: ``tfwb.tf.runner.pipeline.finish``).
GENERIC_KNOBS: Tuple[str, ...] = _knobs.names("pipeline")

_KNOBS = _knobs.table(_knobs.declared())

#: What each ``data_source`` means for a workload that brings its own ``tf.data.Dataset``.
USER_DATA_SOURCES: Mapping[str, str] = {
    "files": "tf.data over the dataset data_fn returns, shaped by the generic pipeline knobs",
    "memory": "the first batches of that pipeline staged in memory and repeated (compute-only ceiling)",
}

_REF = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")

Factory = Union[Callable[..., Any], str]


class Ref:
    """A factory named ``"module:attribute"``, imported when first called.

    Calling it calls the target. ``resolve()`` returns the target itself.

    Args:
        target: ``"package.module:attribute"`` (the attribute may be dotted).
        role: what it is, for error messages (e.g. ``"model_fn of workload 'mlp'"``).

    Raises:
        ValueError: at construction, for a string not of the form ``module:attribute``;
            at first call, when the module or attribute cannot be found or is not callable.

    Example:
        >>> Ref("math:floor")(2.5)
        2
    """

    __slots__ = ("target", "role", "_resolved")

    def __init__(self, target: str, role: str = "factory") -> None:
        if not isinstance(target, str) or not _REF.match(target):
            raise ValueError(f"{role}={target!r} is not allowed; a factory named by a string must "
                             "be 'module:attribute' (e.g. 'mypkg.models:build')")
        self.target = target
        self.role = role
        self._resolved: Optional[Callable[..., Any]] = None

    def resolve(self) -> Callable[..., Any]:
        """The target callable (imported on first use, then kept)."""
        if self._resolved is None:
            module_name, _, attr = self.target.partition(":")
            try:
                obj: Any = importlib.import_module(module_name)
                for part in attr.split("."):
                    obj = getattr(obj, part)
            except (ImportError, AttributeError) as e:
                raise ValueError(f"{self.role}={self.target!r} cannot be loaded "
                                 f"({type(e).__name__}: {e}); check the module and attribute names") from None
            if not callable(obj):
                raise ValueError(f"{self.role}={self.target!r} is {type(obj).__name__}, not callable")
            self._resolved = obj
        return self._resolved

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.resolve()(*args, **kwargs)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Ref) and other.target == self.target

    def __hash__(self) -> int:
        return hash(self.target)

    def __repr__(self) -> str:
        return f"Ref({self.target!r})"


@dataclass(frozen=True)
class Workload:
    """One registered workload and what its data honours.

    Args:
        name: the name ``RunConfig(workload=...)`` uses.
        model_fn: ``model_fn(cfg) -> keras.Model``; called after the dtype policy is
            set and inside the strategy scope. Its last layer outputs float32 logits
            when ``loss`` is None.
        data_fn: ``data_fn(cfg) -> tf.data.Dataset`` of unbatched ``(features, label)``
            elements, finite (tfwb repeats it). tfwb caches, shuffles, batches and
            prefetches it.
        loss: a Keras loss or ``loss(y_true, y_pred)``; ``None`` means sparse
            categorical cross-entropy on logits.
        builtin: True for workloads that ship with tfwb (they cannot be replaced).
        description: one line for tables.
        data_sources: ``{data_source value: what it means for this workload}``, for
            every value it honours; any other value fails before any work.
        source_knobs: which of ``SOURCE_KNOBS`` its data honours; the others get a
            note when set and change nothing.
        source_fn: for a workload whose pipeline needs more than an unbatched dataset
            (a map after the shuffle, per element or per batch; a files or generator
            source): ``source_fn(cfg, tuning) -> tfwb.tf.runner.pipeline.Source``. ``None``:
            the source is ``data_fn(cfg)``.

    Example:
        >>> get_workload("mlp").applies("interleave")
        False
    """

    name: str
    model_fn: Callable[[Any], Any]
    data_fn: Optional[Callable[[Any], Any]]
    loss: Any = None
    builtin: bool = False
    description: str = ""
    data_sources: Mapping[str, str] = field(default_factory=lambda: dict(USER_DATA_SOURCES))
    source_knobs: Tuple[str, ...] = ()
    source_fn: Optional[Callable[..., Any]] = None

    def __post_init__(self) -> None:
        unknown = sorted(set(self.source_knobs) - set(SOURCE_KNOBS))
        if unknown:
            raise ValueError(f"source_knobs={tuple(self.source_knobs)!r} is not allowed; "
                             f"source_knobs must be some of {SOURCE_KNOBS}")

    def applies(self, knob: str) -> bool:
        """Whether RunConfig field ``knob`` changes this workload's run.

        Source knobs apply only where declared; ``data_source`` always applies (each
        value it honours means something); every other knob applies to every workload.
        """
        if knob in SOURCE_KNOBS:
            return knob in self.source_knobs
        return True

    def check(self, cfg: Any) -> None:
        """Raise ``ValueError`` when ``cfg.data_source`` is not one this workload honours.

        The message names the field, the value, the workload and the values to pick.
        """
        if cfg.data_source not in self.data_sources:
            choices = ", ".join(f"{v!r} ({why})" for v, why in self.data_sources.items())
            raise ValueError(f"data_source={cfg.data_source!r} does not apply to workload {self.name!r}; "
                             f"pick one of {choices}")

    def unused_knobs(self, cfg: Any) -> Tuple[str, ...]:
        """The source knobs ``cfg`` sets (on, or a latency given) that this workload ignores."""
        out = []
        for knob in SOURCE_KNOBS:
            if _KNOBS[knob].is_set(getattr(cfg, knob)) and not self.applies(knob):
                out.append(knob)
        return tuple(out)


def _factory(role: str, fn: Factory) -> Callable[..., Any]:
    if isinstance(fn, str) and _REF.match(fn):
        return Ref(fn, role)
    if not callable(fn):
        raise ValueError(f"{role}={fn!r} is not allowed; it must be callable (it receives the "
                         "RunConfig) or a 'module:attribute' string")
    return fn


def _builtin(name: str, module: str, *, description: str, data_sources: Mapping[str, str],
             source_knobs: Tuple[str, ...] = (), source_fn: bool = False) -> Workload:
    """A built-in workload whose ``model``, ``data`` (and ``source``) live in ``module``."""
    def ref(attr: str) -> Ref:
        return Ref(f"{module}:{attr}", f"{attr} of built-in workload {name!r}")

    return Workload(name=name, model_fn=ref("model"), data_fn=ref("data"), builtin=True,
                    description=description, data_sources=dict(data_sources),
                    source_knobs=source_knobs, source_fn=ref("source") if source_fn else None)


_BUILTINS = (
    _builtin(
        "images", "tfwb.tf.workloads.images", source_fn=True,
        description="small CNN on generated labelled images stored as PNG shards on disk",
        data_sources={
            "files": "tf.data reads the PNG shards; every pipeline knob applies",
            "generator": "a Python generator reads and decodes the files one by one (the naive way)",
            "memory": "decoded, augmented batches staged in memory and repeated (compute-only ceiling)",
        },
        source_knobs=SOURCE_KNOBS),
    _builtin(
        "mlp", "tfwb.tf.workloads.mlp",
        description="deep narrow MLP on generated rows held in memory: many small ops per step",
        data_sources={
            "files": "tf.data over the rows in memory (no files: cache, shuffle, batch, prefetch apply)",
            "memory": "the first batches staged in memory and repeated (compute-only ceiling)",
        }),
    _builtin(
        "text", "tfwb.tf.workloads.text",
        description="small transformer classifier on generated token sequences (Tensor-Core-shaped)",
        data_sources={
            "files": "tf.data over the sequences in memory (no files: cache, shuffle, batch, prefetch apply)",
            "memory": "the first batches staged in memory and repeated (compute-only ceiling)",
        }),
    _builtin(
        "cifar10", "tfwb.tf.workloads.cifar", source_fn=True,
        description="small CNN on CIFAR-10 via keras.datasets (cached on disk; generated images when offline)",
        data_sources={
            "files": "tf.data over the training images in memory; the crop-and-flip augmentation runs per "
                     "element (parallel_map) or per batch (vectorized_map)",
            "memory": "augmented batches staged in memory and repeated (compute-only ceiling)",
        },
        source_knobs=("parallel_map", "vectorized_map")),
)

_REGISTRY: Dict[str, Workload] = {w.name: w for w in _BUILTINS}


def register_workload(name: str, model_fn: Factory, data_fn: Factory,
                      loss: Any = None, *, description: str = "") -> Workload:
    """Register (or replace) a workload so ``RunConfig(workload=name)`` can use it.

    Its data honours ``data_source`` ``"files"`` (tf.data over ``data_fn``'s dataset)
    and ``"memory"`` (staged batches), and the generic pipeline knobs; the source
    knobs (``interleave``, ``parallel_map``, ``vectorized_map``, ``storage_latency_ms``)
    belong to its own ``data_fn`` and only get a note.

    Args:
        name: a non-empty name; the built-in names cannot be replaced.
        model_fn: ``model_fn(cfg) -> keras.Model`` (outputs logits when ``loss`` is None),
            or ``"module:attribute"`` naming one, imported at first use.
        data_fn: ``data_fn(cfg) -> tf.data.Dataset`` of unbatched, finite ``(features, label)``,
            or ``"module:attribute"``.
        loss: a Keras loss object or callable; ``None`` = sparse CE from logits.
        description: one line shown in tables.

    Returns:
        The registered ``Workload``.

    Raises:
        ValueError: for an empty or built-in name, or factories that are neither
            callable nor ``"module:attribute"`` strings.

    Example:
        >>> register_workload("mine", model_fn=lambda cfg: build(), data_fn=lambda cfg: ds)  # doctest: +SKIP
        >>> register_workload("mine", model_fn="mypkg.work:model", data_fn="mypkg.work:data")  # doctest: +SKIP
    """
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"name={name!r} is not allowed; name must be a non-empty string")
    if name in _REGISTRY and _REGISTRY[name].builtin:
        raise ValueError(f"name={name!r} is a built-in workload; pick another name")
    model = _factory("model_fn", model_fn)
    data = _factory("data_fn", data_fn)
    _REGISTRY[name] = Workload(name=name, model_fn=model, data_fn=data, loss=loss,
                               description=description)
    return _REGISTRY[name]


def unregister_workload(name: str) -> None:
    """Remove a user workload (built-ins stay). Unknown names are ignored."""
    if name in _REGISTRY and not _REGISTRY[name].builtin:
        del _REGISTRY[name]


def get_workload(name: str) -> Workload:
    """The registered workload ``name``; ``ValueError`` listing the names otherwise."""
    try:
        return _REGISTRY[name]
    except KeyError:
        raise ValueError(f"workload={name!r} is not registered; registered: "
                         + ", ".join(repr(n) for n in workload_names())) from None


def workload_names() -> Tuple[str, ...]:
    """Registered workload names, built-ins first."""
    return tuple(_REGISTRY)
