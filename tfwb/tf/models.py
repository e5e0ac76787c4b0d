"""The built-in workloads' models.

``images_model`` is a small CNN whose width grows with the workload size. Its last
layer outputs float32 logits whatever the dtype policy, as mixed precision needs.
"""
from __future__ import annotations

import keras

from ..config import RunConfig
from .images import SPECS


def images_model(cfg: RunConfig) -> keras.Model:
    """A small CNN for the ``images`` workload (logits, float32 output).

    Called after the dtype policy is set and inside the strategy scope, so its
    layers pick up both.
    """
    spec = SPECS[cfg.resolved_size]
    width = 16 if cfg.resolved_size == "small" else 32
    inputs = keras.Input((spec.image_px, spec.image_px, 3))
    x = keras.layers.Rescaling(1.0 / 255)(inputs)
    for mult in (1, 2, 4):
        x = keras.layers.Conv2D(width * mult, 3, padding="same", activation="relu")(x)
        x = keras.layers.Conv2D(width * mult, 3, padding="same", activation="relu")(x)
        x = keras.layers.MaxPooling2D()(x)
    x = keras.layers.GlobalAveragePooling2D()(x)
    x = keras.layers.Dense(width * 4, activation="relu")(x)
    outputs = keras.layers.Dense(spec.n_classes, dtype="float32", name="logits")(x)
    return keras.Model(inputs, outputs, name=f"images_cnn_{cfg.resolved_size}")
