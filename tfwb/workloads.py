"""The workload registry: what model to train on what data.

A workload is a model factory, an unbatched data factory and a loss. tfwb
applies every pipeline and training knob on top of them. This module is pure:
the built-in workloads are named here and built lazily by ``tfwb.tf``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Dict, Optional, Tuple


@dataclass(frozen=True)
class Workload:
    """One registered workload.

    Args:
        name: the name ``RunConfig(workload=...)`` uses.
        model_fn: ``model_fn(cfg) -> keras.Model``; called after the dtype policy is
            set and inside the strategy scope.
        data_fn: ``data_fn(cfg) -> tf.data.Dataset`` of unbatched ``(features, label)``
            elements. tfwb batches, caches, shuffles and prefetches it.
        loss: a Keras loss or ``loss(y_true, y_pred)``; ``None`` means sparse
            categorical cross-entropy on logits.
        builtin: True for workloads that ship with tfwb (their data pipeline honours
            every knob, including ``data_source``).
        description: one line for tables.
    """

    name: str
    model_fn: Callable[[Any], Any]
    data_fn: Optional[Callable[[Any], Any]]
    loss: Any = None
    builtin: bool = False
    description: str = ""


_REGISTRY: Dict[str, Workload] = {}


def _images_model(cfg):
    from .tf.models import images_model

    return images_model(cfg)


_REGISTRY["images"] = Workload(
    name="images", model_fn=_images_model, data_fn=None, builtin=True,
    description="small CNN on generated labelled images stored as PNG shards on disk",
)


def register_workload(name: str, model_fn: Callable[[Any], Any], data_fn: Callable[[Any], Any],
                      loss: Any = None, *, description: str = "") -> Workload:
    """Register (or replace) a workload so ``RunConfig(workload=name)`` can use it.

    Args:
        name: a non-empty name; the built-in names cannot be replaced.
        model_fn: ``model_fn(cfg) -> keras.Model`` (outputs logits when ``loss`` is None).
        data_fn: ``data_fn(cfg) -> tf.data.Dataset`` of unbatched ``(features, label)``.
        loss: a Keras loss object or callable; ``None`` = sparse CE from logits.
        description: one line shown in tables.

    Returns:
        The registered ``Workload``.

    Raises:
        ValueError: for an empty or built-in name, or factories that are not callable.

    Example:
        >>> register_workload("mine", model_fn=lambda cfg: build(), data_fn=lambda cfg: ds)  # doctest: +SKIP
    """
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"name={name!r} is not allowed; name must be a non-empty string")
    if name in _REGISTRY and _REGISTRY[name].builtin:
        raise ValueError(f"name={name!r} is a built-in workload; pick another name")
    for arg, fn in (("model_fn", model_fn), ("data_fn", data_fn)):
        if not callable(fn):
            raise ValueError(f"{arg}={fn!r} is not allowed; {arg} must be callable (it receives the RunConfig)")
    _REGISTRY[name] = Workload(name=name, model_fn=model_fn, data_fn=data_fn, loss=loss,
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
