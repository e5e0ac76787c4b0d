"""What clipping does to the direction of an update: ``clip_directions(cfg)``.

One real gradient of ``cfg``'s model, clipped by Keras' ``clipnorm`` (per tensor),
``global_clipnorm`` (all tensors together) and ``clipvalue`` (per element): how far each
turns the update away from the gradient's direction (their ``cosine``), as
``ClipDirections``. Chapter 04's other instruments are in ``tfwb.tf.lab.convergence``.

Global state: as ``tfwb.run`` (the dtype policy is restored; the seed stays set).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping, Optional, Sequence, Tuple

import numpy as np
import tensorflow as tf

from tfwb.config import RunConfig
from tfwb.workloads import get_workload
from tfwb.tf.lab.arguments import finite_number
from tfwb.tf.lab.learning_rates import restore, snapshot
from tfwb.tf.runner.devices import setup_devices
from tfwb.tf.runner.optimizers import make_optimizer
from tfwb.tf.runner.train_step import per_example_loss
from tfwb.tf.runner.train import prepared

__all__ = ["clip_directions", "ClipDirections", "ClipDirection", "cosine"]


@dataclass(frozen=True)
class ClipDirection:
    """One way of clipping one gradient.

    Attributes:
        clip (str): the ``RunConfig.clip`` spec used (``"norm:X"``, ``"global_norm:X"``, ``"value:X"``).
        keras_argument (str): the Keras optimizer argument it sets.
        cosine (float): cosine between the raw gradient and the update the optimizer
            applied (SGD, learning rate 1, so the update is the clipped gradient): 1 means
            the same direction.
        update_norm (float): the global norm of that update.
        tensors_changed (int): gradient tensors the clipping changed.
    """

    clip: str
    keras_argument: str
    cosine: float
    update_norm: float
    tensors_changed: int

    @property
    def angle_deg(self) -> float:
        """The angle between the gradient and the update, in degrees (0: the same direction)."""
        return math.degrees(math.acos(max(-1.0, min(1.0, self.cosine))))


@dataclass(frozen=True)
class ClipDirections:
    """A real gradient and what each clipping does to it.

    Attributes:
        config (RunConfig): the workload and seed the gradient came from.
        gradient_norm (float): the raw gradient's global norm.
        tensor_norms (dict): each variable's gradient norm, by variable path.
        rows (tuple): a ``ClipDirection`` per clipping.
    """

    config: RunConfig
    gradient_norm: float
    tensor_norms: Mapping[str, float]
    rows: Tuple[ClipDirection, ...]

    def by_kind(self, kind: str) -> ClipDirection:
        """The row whose clip spec starts with ``kind`` (``"norm"``, ``"global_norm"``, ``"value"``)."""
        for r in self.rows:
            if r.clip.partition(":")[0] == kind:
                return r
        raise ValueError(f"kind={kind!r} is not allowed; one of "
                         + ", ".join(repr(r.clip.partition(':')[0]) for r in self.rows))


def cosine(a: Sequence[np.ndarray], b: Sequence[np.ndarray]) -> float:
    """Cosine between two lists of arrays, each flattened and joined into one vector.

    Example:
        >>> round(cosine([np.array([1.0, 0.0])], [np.array([2.0, 0.0])]), 6)
        1.0
    """
    x = np.concatenate([np.ravel(v).astype(np.float64) for v in a])
    y = np.concatenate([np.ravel(v).astype(np.float64) for v in b])
    denominator = np.linalg.norm(x) * np.linalg.norm(y)
    return float(x @ y / denominator) if denominator else math.nan


def clip_directions(cfg: RunConfig, *, clip_norm: Optional[float] = None,
                    clip_value: Optional[float] = None) -> ClipDirections:
    """Clip one real gradient of ``cfg``'s model three ways and measure each update's direction.

    The gradient is the loss's on the first batch at the initial weights (float32, one
    device). Each clipping is applied by a Keras SGD optimizer with learning rate 1 and
    the clip argument ``tfwb`` sets for that spec, to weights set to zero, so the weight
    change *is* the clipped gradient, exactly; the weights are restored after each.

    Args:
        cfg: the workload, batch and seed.
        clip_norm: the threshold for ``norm`` and ``global_norm``; default the median of
            the per-tensor gradient norms, so that per-tensor clipping shrinks some tensors
            and leaves others.
        clip_value: the threshold for ``value``; default the 90th percentile of the
            gradient's absolute elements.

    Returns:
        A ``ClipDirections``.

    Raises:
        ValueError: for a threshold that is not a finite number > 0.

    Example:
        >>> d = clip_directions(RunConfig(workload="mlp"))          # doctest: +SKIP
        >>> d.by_kind("global_norm").cosine, d.by_kind("norm").cosine  # doctest: +SKIP
    """
    for name, value in (("clip_norm", clip_norm), ("clip_value", clip_value)):
        if value is not None and not (finite_number(name, value) > 0):
            raise ValueError(f"{name}={value!r} is not allowed; {name} must be a finite number > 0")
    base = cfg.replace(mixed_precision="off", strategy="default", grad_norms=False, clip=None,
                       optimizer="sgd", learning_rate=1.0, steps_per_execution=1)
    setup_devices()
    with prepared(base) as p:
        loss_fn = per_example_loss(get_workload(cfg.workload).loss)
        x, y = p.fetch()
        variables = p.model.trainable_variables
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.cast(loss_fn(y, p.model(x, training=True)), tf.float32))
        grads = [g.numpy() for g in tape.gradient(loss, variables)]
        norms = {v.path: float(np.linalg.norm(g)) for v, g in zip(variables, grads)}
        c_norm = float(np.median(list(norms.values()))) if clip_norm is None else float(clip_norm)
        c_value = (float(np.quantile(np.abs(np.concatenate([g.ravel() for g in grads])), 0.9))
                   if clip_value is None else float(clip_value))
        start = snapshot(variables)
        rows = []
        for kind, threshold in (("global_norm", c_norm), ("norm", c_norm), ("value", c_value)):
            spec = f"{kind}:{threshold:.6g}"
            optimizer = make_optimizer(base.replace(clip=spec))
            optimizer.build(variables)
            # From zero weights, the new weights are exactly minus the update (no cancellation
            # against the weights' own values); clipping does not look at the weights.
            restore(variables, [np.zeros_like(v) for v in start])
            optimizer.apply_gradients(zip([tf.constant(g) for g in grads], variables))
            update = [-v.numpy() for v in variables]
            restore(variables, start)
            changed = sum(not np.allclose(u, g, rtol=1e-5, atol=0.0) for u, g in zip(update, grads))
            argument = {"norm": "clipnorm", "global_norm": "global_clipnorm", "value": "clipvalue"}[kind]
            rows.append(ClipDirection(spec, argument, cosine(grads, update),
                                      float(np.sqrt(sum(float(np.sum(u.astype(np.float64) ** 2)) for u in update))),
                                      int(changed)))
    total = float(np.sqrt(sum(n ** 2 for n in norms.values())))
    return ClipDirections(cfg, total, norms, tuple(rows))
