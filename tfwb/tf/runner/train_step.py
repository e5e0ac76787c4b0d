"""The train step: forward, loss averaged over the global batch, gradients, update.

``make_step`` returns a ``tf.function`` (or, with ``execution="eager"``, the same Python
function run op by op) that runs one step under the strategy (``steps_per_execution``
steps when it takes the iterator); with ``jit_compile`` XLA compiles each replica's step. The loss is averaged with ``tf.nn.compute_average_loss`` over
the global batch, so every replica count trains the same model.
"""
from __future__ import annotations

from typing import Callable, Optional, Tuple

import keras
import tensorflow as tf

from tfwb.config import RunConfig


def per_example_loss(loss) -> Callable:
    """An unreduced ``loss(y_true, y_pred)`` from a workload's loss (``None``: sparse CE on logits)."""
    if loss is None:
        return keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction=None)
    if isinstance(loss, keras.losses.Loss):
        return loss.call  # unreduced per-example values
    return loss


def l2_penalty(cfg: RunConfig, model) -> float:
    """The L2 coefficient for ``cfg``: ``weight_decay`` for every optimizer but adamw (decoupled there)."""
    if cfg.optimizer == "adamw" or not cfg.weight_decay:
        return 0.0
    return float(cfg.weight_decay)


def make_step(cfg: RunConfig, strategy, model, optimizer, loss_fn, global_batch: int
              ) -> Tuple[Callable, bool]:
    """The compiled step and whether it takes the iterator (``steps_per_execution > 1``)."""
    scaled = isinstance(optimizer, keras.mixed_precision.LossScaleOptimizer)
    replicas = strategy.num_replicas_in_sync
    l2 = l2_penalty(cfg, model)
    kernels = [v for v in model.trainable_variables if len(v.shape) >= 2]

    def replica_step(x, y):
        with tf.GradientTape() as tape:
            logits = model(x, training=True)
            per_example = tf.cast(loss_fn(y, logits), tf.float32)
            if per_example.shape.rank == 0:          # a loss that already averages
                loss = per_example / replicas
            else:
                loss = tf.nn.compute_average_loss(per_example, global_batch_size=global_batch)
            if model.losses:
                loss += tf.nn.scale_regularization_loss(tf.add_n(model.losses))
            if l2:   # 0.5 * wd * sum(w^2) over the kernels: its gradient is wd * w
                penalty = 0.5 * l2 * tf.add_n([tf.reduce_sum(tf.square(tf.cast(v, tf.float32)))
                                               for v in kernels])
                loss += tf.nn.scale_regularization_loss(penalty)
            to_differentiate = optimizer.scale_loss(loss) if scaled else loss
        grads = tape.gradient(to_differentiate, model.trainable_variables)
        if not cfg.grad_norms:
            optimizer.apply_gradients(zip(grads, model.trainable_variables))
            return loss
        # Measured before apply_gradients clips (and, under float16, unscales) them.
        scale = tf.cast(optimizer.dynamic_scale, tf.float32) if scaled else tf.constant(1.0)
        norm = tf.linalg.global_norm([tf.cast(g, tf.float32) for g in grads if g is not None]) / scale
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return {"loss": loss, "grad_norm": norm, "loss_scale": scale}

    # XLA compiles the replica's step (as Keras does); the loop that fetches batches and
    # calls it stays outside, so jit_compile works with steps_per_execution > 1 and under
    # MirroredStrategy.
    compiled_replica_step = tf.function(replica_step, jit_compile=True) if cfg.jit_compile else replica_step
    graph = cfg.execution == "graph"

    def one_step(x, y):
        per_replica = strategy.run(compiled_replica_step, args=(x, y))
        if not cfg.grad_norms:
            return strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica, axis=None)
        # The loss sums over replicas (each holds its share of the global average); a gradient
        # norm and the loss scale are averaged (per-replica norms, before the all-reduce).
        return {"loss": strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica["loss"], axis=None),
                "grad_norm": strategy.reduce(tf.distribute.ReduceOp.MEAN, per_replica["grad_norm"], axis=None),
                "loss_scale": strategy.reduce(tf.distribute.ReduceOp.MEAN, per_replica["loss_scale"], axis=None)}

    if cfg.steps_per_execution == 1:
        return (tf.function(one_step) if graph else one_step), False

    def many_steps(iterator):
        x, y = next(iterator)
        out = one_step(x, y)                     # the first step outside the loop fixes the outputs' structure
        for _ in (tf.range if graph else range)(cfg.steps_per_execution - 1):
            x, y = next(iterator)
            out = one_step(x, y)
        return out                               # the last step's loss (and norm)

    return (tf.function(many_steps) if graph else many_steps), True


def tracing_count(step) -> Optional[int]:
    """How many times TF traced ``step`` (its own count); ``None`` for an eager step."""
    get = getattr(step, "experimental_get_tracing_count", None)
    return get() if get is not None else None
