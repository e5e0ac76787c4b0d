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

#: What a model may be made of (``Workload.made_of``): the rules of ``tfwb.advice`` state a CPU
#: direction for a change only where it was measured on a model made of the same parts.
PARTS: Tuple[str, ...] = ("convolutions", "dense", "embeddings")


def check_made_of(made_of: Any) -> Tuple[str, ...]:
    """``made_of`` as a tuple of ``PARTS``; ``ValueError`` naming the value and the parts allowed.

    Example:
        >>> check_made_of(["dense", "embeddings"])
        ('dense', 'embeddings')
    """
    if isinstance(made_of, str) or not isinstance(made_of, (tuple, list)):
        raise ValueError(f"made_of={made_of!r} is not allowed; a tuple of some of {PARTS} "
                         "(() when unknown)")
    unknown = [p for p in made_of if p not in PARTS]
    if unknown:
        raise ValueError(f"made_of={tuple(made_of)!r} is not allowed: {', '.join(map(repr, unknown))} is not "
                         f"a part; made_of must be some of {PARTS} (() when unknown)")
    return tuple(dict.fromkeys(made_of))

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


def _import_target(role: str, target: str, hint: str) -> Any:
    """The object ``"module:attr.path"`` names, imported; a ValueError naming ``role`` when it cannot be."""
    module_name, _, attr = target.partition(":")
    try:
        obj: Any = importlib.import_module(module_name)
        for part in attr.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError) as e:
        raise ValueError(f"{role}={target!r} cannot be loaded ({type(e).__name__}: {e}); {hint}") from None
    return obj


class Ref:
    """A factory named ``"module:attribute"``, imported when first called.

    Calling it calls the target. ``resolve()`` returns the target itself.

    Args:
        target: ``"package.module:attribute"`` (the attribute may be dotted).
        role: what it is, for error messages (e.g. ``"model_fn of workload 'mlp'"``).
        check: ``check(value) -> value``, applied to what every call returns (raises
            ``ValueError`` for something unusable); ``None``: returned as it is.

    Raises:
        ValueError: at construction, for a string not of the form ``module:attribute``;
            at first call, when the module or attribute cannot be found or is not callable.

    Example:
        >>> Ref("math:floor")(2.5)
        2
    """

    __slots__ = ("target", "role", "check", "_resolved")

    def __init__(self, target: str, role: str = "factory",
                 check: Optional[Callable[[Any], Any]] = None) -> None:
        if not isinstance(target, str) or not _REF.match(target):
            raise ValueError(f"{role}={target!r} is not allowed; a factory named by a string must "
                             "be 'module:attribute' (e.g. 'mypkg.models:build')")
        self.target = target
        self.role = role
        self.check = check
        self._resolved: Optional[Callable[..., Any]] = None

    def resolve(self) -> Callable[..., Any]:
        """The target callable (imported on first use, then kept)."""
        if self._resolved is None:
            obj: Any = _import_target(self.role, self.target, "check the module and attribute names")
            if not callable(obj):
                raise ValueError(f"{self.role}={self.target!r} is {type(obj).__name__}, not callable")
            self._resolved = obj
        return self._resolved

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        value = self.resolve()(*args, **kwargs)
        return self.check(value) if self.check is not None else value

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
        made_of: what the model is made of, some of ``PARTS`` (``"convolutions"``,
            ``"dense"``, ``"embeddings"``); ``()``: unknown. The expectations of precision
            and XLA on a CPU depend on it (``tfwb.advice.measured``).

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
    made_of: Tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "made_of", check_made_of(self.made_of))
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


class Checked:
    """A factory given as a callable, with a check on what each call returns.

    Args:
        fn: the factory.
        role: what it is, for error messages.
        check: ``check(value) -> value``; raises ``ValueError`` for something unusable.

    Example:
        >>> Checked(lambda cfg: 3, "model_fn", lambda v: v * 2)(None)
        6
    """

    __slots__ = ("fn", "role", "check")

    def __init__(self, fn: Callable[..., Any], role: str, check: Callable[[Any], Any]) -> None:
        self.fn = fn
        self.role = role
        self.check = check

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.check(self.fn(*args, **kwargs))

    def __repr__(self) -> str:
        return f"Checked({self.fn!r})"


def _factory(role: str, fn: Factory, check: Optional[Callable[[Any], Any]] = None) -> Callable[..., Any]:
    if isinstance(fn, str) and _REF.match(fn):
        return Ref(fn, role, check)
    if not callable(fn):
        raise ValueError(f"{role}={fn!r} is not allowed; it must be callable (it receives the "
                         "RunConfig) or a 'module:attribute' string")
    return Checked(fn, role, check) if check is not None else fn


# -- what a user's factories must return --------------------------------------------------------
def _describe(value: Any) -> str:
    """``value`` in a few words for an error message: its type and a short repr."""
    text = repr(value)
    text = text if len(text) <= 80 else text[:77] + "..."
    kind = "a class" if isinstance(value, type) else f"a {type(value).__module__}.{type(value).__qualname__}"
    return f"{kind} ({text})"


def is_keras_model(value: Any) -> bool:
    """True for an instance of ``keras.Model`` (or tf.keras's), told by its class, without importing Keras.

    Example:
        >>> is_keras_model(object()), is_keras_model(None)
        (False, False)
    """
    return not isinstance(value, type) and any(
        c.__name__ == "Model" and c.__module__.split(".")[0] in ("keras", "tf_keras")
        for c in type(value).__mro__)


def _dims(spec: Any) -> Optional[Tuple[Optional[int], ...]]:
    """A TensorSpec's dimensions (``None`` for an unknown one); ``None`` for an unknown rank or a non-tensor."""
    shape = getattr(spec, "shape", None)
    if isinstance(shape, (tuple, list)):      # a KerasTensor's shape
        return tuple(shape)
    try:
        return tuple(shape.as_list())
    except (AttributeError, TypeError, ValueError):
        return None


def check_model(value: Any, workload: str, features: Optional[Tuple[Optional[int], ...]] = None) -> Any:
    """``value`` when it is a Keras model that takes ``features``-shaped inputs; else ``ValueError``.

    Args:
        value: what ``model_fn`` returned.
        workload: the workload's name, for the message.
        features: the dimensions of one element's features (from ``data_fn``'s dataset),
            when known; compared with the model's input shape (batch dimension left out)
            where the model has declared one.

    Returns:
        ``value``.

    Raises:
        ValueError: naming what was returned and what is needed.

    Example:
        >>> check_model("model", "mine")
        Traceback (most recent call last):
        ...
        ValueError: model_fn of workload 'mine' returned a builtins.str ('model'); it must return a keras.Model (e.g. keras.Sequential([keras.Input(shape), ...]) or keras.Model(inputs, outputs)), built inside model_fn
    """
    if not is_keras_model(value):
        hint = "; call it (model_fn returns an instance)" if isinstance(value, type) else ""
        raise ValueError(f"model_fn of workload {workload!r} returned {_describe(value)}; it must return a "
                         "keras.Model (e.g. keras.Sequential([keras.Input(shape), ...]) or keras.Model(inputs, "
                         f"outputs)), built inside model_fn{hint}")
    if features is None:
        return value
    try:
        inputs = list(value.inputs or ())
    except Exception:  # noqa: BLE001 - a model not built yet has no inputs to compare
        return value
    if len(inputs) != 1:
        return value
    model_in = _dims(inputs[0])
    if model_in is None:
        return value
    model_in = model_in[1:]
    fits = len(model_in) == len(features) and all(
        a is None or b is None or a == b for a, b in zip(model_in, features))
    if not fits:
        raise ValueError(f"model_fn of workload {workload!r} returned a model whose input shape is "
                         f"(batch, {', '.join(map(str, model_in))}) but data_fn's elements have features of "
                         f"shape {tuple(features)}: the model must take (batch, *features shape); fix "
                         "keras.Input(shape=...) or the data")
    return value


def check_dataset(value: Any, workload: str, *, default_loss: bool = True) -> Tuple[Any, Optional[tuple]]:
    """``(value, features dimensions)`` when ``value`` is an unbatched dataset of (features, label); else ``ValueError``.

    Args:
        value: what ``data_fn`` returned.
        workload: the workload's name, for the message.
        default_loss: the workload uses the default loss (sparse categorical cross-entropy),
            which needs integer class ids of shape () or (1,) as labels.

    Returns:
        ``value`` and its features' dimensions (``None`` when unknown).

    Raises:
        ValueError: naming what was returned and what is needed: not a dataset, elements that
            are not (features, label) pairs (no labels), elements that look batched, labels
            the default loss cannot use.

    Example:
        >>> check_dataset([1, 2], "mine")
        Traceback (most recent call last):
        ...
        ValueError: data_fn of workload 'mine' returned a builtins.list ([1, 2]); it must return an unbatched tf.data.Dataset of (features, label) elements, e.g. tf.data.Dataset.from_tensor_slices((x, y))
    """
    where = f"data_fn of workload {workload!r}"
    spec = getattr(value, "element_spec", None)
    if spec is None or isinstance(value, type):
        raise ValueError(f"{where} returned {_describe(value)}; it must return an unbatched tf.data.Dataset "
                         "of (features, label) elements, e.g. tf.data.Dataset.from_tensor_slices((x, y))")
    if isinstance(spec, dict):
        raise ValueError(f"{where} returned a dataset whose elements are a dict with keys {sorted(spec)}; "
                         "it must yield (features, label) pairs: map them, e.g. "
                         "ds.map(lambda d: (d['image'], d['label']))")
    if not isinstance(spec, (tuple, list)) or len(spec) != 2:
        what = f"{len(spec)}-tuples" if isinstance(spec, (tuple, list)) else f"single tensors ({spec})"
        raise ValueError(f"{where} returned a dataset without labels: its elements are {what}; it must yield "
                         "(features, label) pairs, e.g. tf.data.Dataset.from_tensor_slices((x, y))")
    features, label = (_dims(s) for s in spec)
    if features and label and features[0] is None and len(label) == 1 and label[0] is None:
        raise ValueError(f"{where} returned a dataset that looks batched: features {tuple(features)}, labels "
                         f"{tuple(label)}; it must yield single (features, label) elements (tfwb batches "
                         "them with batch_size): drop the .batch(...)")
    if default_loss and label is not None and label not in ((), (1,)):
        raise ValueError(f"{where} returned labels of shape {tuple(label)}; the default loss (sparse "
                         "categorical cross-entropy on logits) needs one integer class id per element "
                         "(shape ()): pass loss=keras.losses.CategoricalCrossentropy(from_logits=True) "
                         "for one-hot labels, or another loss")
    return value, features


def _builtin(name: str, module: str, *, description: str, data_sources: Mapping[str, str],
             source_knobs: Tuple[str, ...] = (), source_fn: bool = False,
             made_of: Tuple[str, ...] = ()) -> Workload:
    """A built-in workload whose ``model``, ``data`` (and ``source``) live in ``module``."""
    def ref(attr: str) -> Ref:
        return Ref(f"{module}:{attr}", f"{attr} of built-in workload {name!r}")

    return Workload(name=name, model_fn=ref("model"), data_fn=ref("data"), builtin=True,
                    description=description, data_sources=dict(data_sources),
                    source_knobs=source_knobs, source_fn=ref("source") if source_fn else None,
                    made_of=made_of)


#: What each built-in model is made of, declared here so nothing imports TensorFlow to read it
#: (tests/test_workloads.py checks each against the layers of the model its module builds).
MADE_OF: Dict[str, Tuple[str, ...]] = {"images": ("convolutions", "dense"), "mlp": ("dense",),
                                       "text": ("embeddings", "dense"), "cifar10": ("convolutions", "dense")}

_BUILTINS = (
    _builtin(
        "images", "tfwb.tf.workloads.images", source_fn=True, made_of=MADE_OF["images"],
        description="small CNN on generated labelled images stored as PNG shards on disk",
        data_sources={
            "files": "tf.data reads the PNG shards; every pipeline knob applies",
            "generator": "a Python generator reads and decodes the files one by one (the naive way)",
            "memory": "decoded, augmented batches staged in memory and repeated (compute-only ceiling)",
        },
        source_knobs=SOURCE_KNOBS),
    _builtin(
        "mlp", "tfwb.tf.workloads.mlp", made_of=MADE_OF["mlp"],
        description="deep narrow MLP on generated rows held in memory: many small ops per step",
        data_sources={
            "files": "tf.data over the rows in memory (no files: cache, shuffle, batch, prefetch apply)",
            "memory": "the first batches staged in memory and repeated (compute-only ceiling)",
        }),
    _builtin(
        "text", "tfwb.tf.workloads.text", made_of=MADE_OF["text"],
        description="small transformer classifier on generated token sequences (Tensor-Core-shaped)",
        data_sources={
            "files": "tf.data over the sequences in memory (no files: cache, shuffle, batch, prefetch apply)",
            "memory": "the first batches staged in memory and repeated (compute-only ceiling)",
        }),
    _builtin(
        "cifar10", "tfwb.tf.workloads.cifar", source_fn=True, made_of=MADE_OF["cifar10"],
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
                      loss: Any = None, *, description: str = "",
                      made_of: Tuple[str, ...] = ()) -> Workload:
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
        made_of: what the model is made of, some of ``PARTS`` (``"convolutions"``, ``"dense"``,
            ``"embeddings"``); ``()`` (the default): unknown. On a CPU, precision and XLA
            are expected to go a measured way only for a model made like one measured.

    Returns:
        The registered ``Workload``.

    What the factories return is checked at each build (``check_model``,
    ``check_dataset``): a model_fn that returns something other than a Keras model, a
    model whose input shape does not take data_fn's features, a data_fn that returns no
    dataset, a dataset without labels, a batched one, or labels the default loss cannot
    use fail with a ``ValueError`` naming what was returned and what is needed.

    Raises:
        ValueError: for an empty or built-in name, factories that are neither
            callable nor ``"module:attribute"`` strings, or a ``made_of`` with a part
            not in ``PARTS``.

    Example:
        >>> register_workload("mine", model_fn=lambda cfg: build(), data_fn=lambda cfg: ds)  # doctest: +SKIP
        >>> register_workload("mine", model_fn="mypkg.work:model", data_fn="mypkg.work:data")  # doctest: +SKIP
    """
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"name={name!r} is not allowed; name must be a non-empty string")
    if name in _REGISTRY and _REGISTRY[name].builtin:
        raise ValueError(f"name={name!r} is a built-in workload; pick another name")
    made_of = check_made_of(made_of)
    seen: Dict[str, Any] = {}          # the features' shape, from data_fn (the runner builds data first)

    def checked_data(value: Any) -> Any:
        value, seen["features"] = check_dataset(value, name, default_loss=loss is None)
        return value

    def checked_model(value: Any) -> Any:
        return check_model(value, name, seen.get("features"))

    model = _factory("model_fn", model_fn, checked_model)
    data = _factory("data_fn", data_fn, checked_data)
    _REGISTRY[name] = Workload(name=name, model_fn=model, data_fn=data, loss=loss,
                               description=description, made_of=made_of)
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


def resolve_factory(spec: str) -> str:
    """The workload name that ``spec`` stands for, registering it where needed (for ``--workload``).

    ``spec`` is a registered name (returned as it is) or ``"module:attribute"``. The module is
    imported (it may register workloads at import); the attribute is:

    - a ``Workload`` (what ``register_workload`` returns): registered again if it is not
      the one under its name, and its name returned;
    - a callable taking no arguments that registers a workload and returns it (a
      ``Workload``) or its name (a ``str``).

    Args:
        spec: ``"mine"`` or ``"mypkg.work:register"``.

    Returns:
        The name to put in ``RunConfig(workload=...)``.

    Raises:
        ValueError: naming ``spec`` when the module or attribute cannot be loaded, or the
            attribute is neither a Workload nor a callable that returns a registered one.

    Example:
        >>> resolve_factory("mlp")
        'mlp'
        >>> resolve_factory("math:pi")
        Traceback (most recent call last):
        ...
        ValueError: workload='math:pi' is a builtins.float (3.141592653589793); 'module:function' must name a Workload (what tfwb.register_workload returns) or a function of no arguments that calls tfwb.register_workload and returns its result
    """
    if isinstance(spec, str) and spec in _REGISTRY:
        return spec
    if not isinstance(spec, str) or not _REF.match(spec):
        raise ValueError(f"workload={spec!r} is not allowed; workload must be one of "
                         + ", ".join(repr(n) for n in workload_names()) + " (registered) or 'module:function'")
    obj: Any = _import_target("workload", spec, "check the module (importable from here: on sys.path or "
                                                "PYTHONPATH) and the function name")
    need = ("'module:function' must name a Workload (what tfwb.register_workload returns) or a function of "
            "no arguments that calls tfwb.register_workload and returns its result")
    if not isinstance(obj, Workload):
        if not callable(obj) or isinstance(obj, type):
            raise ValueError(f"workload={spec!r} is {_describe(obj)}; {need}")
        try:
            obj = obj()
        except TypeError as e:
            raise ValueError(f"workload={spec!r} could not be called with no arguments ({e}); {need}") from None
    if isinstance(obj, Workload):
        if _REGISTRY.get(obj.name) is not obj and not obj.builtin:
            _REGISTRY[obj.name] = obj
        return obj.name
    if isinstance(obj, str) and obj in _REGISTRY:
        return obj
    raise ValueError(f"workload={spec!r} returned {_describe(obj)}, not a registered workload; {need}")
