"""The built-in ``mlp`` workload: a deep, narrow MLP on rows held in memory.

The TF guide's "many small ops" case (chapter 02): each Dense layer is a matmul
of a few thousand multiply-adds, so a step is dozens of tiny kernels whose cost
is the framework's overhead per op (Python dispatch in eager mode, the executor
in a graph), not arithmetic. That is what ``tf.function``, XLA's fusion and
``steps_per_execution`` attack, and why mixed precision gains nothing here.

The data are generated in memory from the seed: Gaussian feature rows, labelled
by a fixed random linear "teacher" (``argmax(x @ W)``), so labels are learnable
and the loss falls within a run. No files: ``data_source="files"`` means tf.data
over the rows in memory (the generic knobs ``cache``, ``shuffle_buffer``,
``batch_size``, ``prefetch``, ``deterministic`` apply), ``"memory"`` stages
batches; the source knobs (``interleave``, ``parallel_map``, ``vectorized_map``,
``storage_latency_ms``) have nothing to act on and only get a note.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Tuple

import keras
import numpy as np
import tensorflow as tf

from tfwb.config import RunConfig
from tfwb.tf.workloads import spec_for


@dataclass(frozen=True)
class MLPSpec:
    """One size of the workload: the rows, and the network's depth and width."""

    n_rows: int
    n_features: int
    n_layers: int
    width: int
    n_classes: int


SPECS = {
    "small": MLPSpec(n_rows=4096, n_features=16, n_layers=8, width=32, n_classes=8),
    "full": MLPSpec(n_rows=16384, n_features=32, n_layers=16, width=64, n_classes=10),
}


def rows(size: str, seed: int = 0) -> Tuple[np.ndarray, np.ndarray]:
    """``(x, y)``: float32 features ``(n_rows, n_features)`` and int32 labels from the teacher.

    Raises:
        ValueError: for an unknown size.
    """
    spec = spec_for(SPECS, size)
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((spec.n_rows, spec.n_features)).astype(np.float32)
    teacher = rng.standard_normal((spec.n_features, spec.n_classes)).astype(np.float32)
    y = np.argmax(x @ teacher, axis=1).astype(np.int32)
    return x, y


def data(cfg: RunConfig) -> tf.data.Dataset:
    """The rows as unbatched ``(features, label)`` elements, in a fixed order."""
    x, y = rows(cfg.resolved_size, cfg.seed)
    return tf.data.Dataset.from_tensor_slices((x, y))


def model(cfg: RunConfig) -> keras.Model:
    """``n_layers`` Dense ReLU layers of ``width`` units, then float32 logits.

    Called after the dtype policy is set and inside the strategy scope.
    """
    spec = SPECS[cfg.resolved_size]
    inputs = keras.Input((spec.n_features,))
    x = inputs
    for i in range(spec.n_layers):
        x = keras.layers.Dense(spec.width, activation="relu", name=f"dense_{i}")(x)
    outputs = keras.layers.Dense(spec.n_classes, dtype="float32", name="logits")(x)
    return keras.Model(inputs, outputs, name=f"mlp_{cfg.resolved_size}")
