"""Keras's "Simple MNIST convnet" example, re-typed: the model a reader brings in chapter 08.

Credit: "Simple MNIST convnet" by François Chollet (created 2015/06/19), one of the Keras
code examples, https://keras.io/examples/vision/mnist_convnet/ (Apache License 2.0).
The layers are the example's. Two changes, both for tfwb's knobs: the last Dense layer
outputs logits, kept in float32 (``dtype="float32"``), and the loss is sparse categorical
cross-entropy on logits (the same loss as the example's softmax + categorical cross-entropy
on one-hot labels, computed stably; the output stays float32 under mixed precision, as the
Keras mixed-precision guide asks).

The data are MNIST through ``keras.datasets.mnist`` (downloaded once, about 11 MB, into
Keras's cache). Offline (``TFWB_OFFLINE=1``, or the download fails) they are generated
images of the same shape and label count (28x28x1, 10 classes: a fixed random template
per class plus noise, so the loss still falls), and ``SOURCE`` says which one was used.
"""
from __future__ import annotations

import contextlib
import io
import os
from typing import Any, Optional, Tuple

import keras
import numpy as np
import tensorflow as tf

from tfwb.config import RunConfig
from tfwb.workloads import Workload, register_workload

NAME = "mnist_convnet"
INPUT_SHAPE = (28, 28, 1)
NUM_CLASSES = 10
#: Training examples used at each size (MNIST has 60,000).
EXAMPLES = {"small": 4096, "full": 60000}
#: Which data the last ``load`` returned: "MNIST (keras.datasets)" or "generated (offline)".
SOURCE = {"data": None}
_CACHE: dict = {}


def convnet(cfg: Optional[RunConfig] = None) -> keras.Model:
    """The example's model: two conv + max-pool blocks, dropout, a dense classifier (logits).

    Args:
        cfg: ignored (a model factory receives the RunConfig).

    Returns:
        An uncompiled ``keras.Model`` of (batch, 28, 28, 1) images to (batch, 10) float32 logits.

    Example:
        >>> convnet().count_params()  # doctest: +SKIP
        34826
    """
    return keras.Sequential(
        [
            keras.Input(shape=INPUT_SHAPE),
            keras.layers.Conv2D(32, kernel_size=(3, 3), activation="relu"),
            keras.layers.MaxPooling2D(pool_size=(2, 2)),
            keras.layers.Conv2D(64, kernel_size=(3, 3), activation="relu"),
            keras.layers.MaxPooling2D(pool_size=(2, 2)),
            keras.layers.Flatten(),
            keras.layers.Dropout(0.5),
            keras.layers.Dense(NUM_CLASSES, dtype="float32"),     # logits, float32 (the example: softmax)
        ],
        name=NAME,
    )


def _generated(n: int, seed: int = 0) -> Tuple[np.ndarray, np.ndarray]:
    """``n`` images of MNIST's shape in 10 classes: a class template plus noise, as uint8."""
    rng = np.random.default_rng(seed)
    templates = rng.random((NUM_CLASSES, 28, 28)) > 0.7
    y = rng.integers(0, NUM_CLASSES, n).astype("uint8")
    x = np.where(templates[y], 200, 0) + rng.integers(0, 120, (n, 28, 28))
    return np.clip(x, 0, 255).astype("uint8"), y


def load(n: int) -> Tuple[np.ndarray, np.ndarray, str]:
    """The first ``n`` training images scaled to [0, 1] with a channel axis, their labels, and the source.

    As the example prepares them: ``x.astype("float32") / 255``, shape (n, 28, 28, 1); labels
    stay integer class ids (sparse loss). Kept in memory for the process.

    Returns:
        ``(x, y, source)``; ``source`` is ``"MNIST (keras.datasets)"``, ``"generated (offline)"``
        (``TFWB_OFFLINE=1``), or ``"generated (offline: ... could not download MNIST, <error>)"``; the
        download's own progress lines are held back (they named a URL the run then did not use).
    """
    if "raw" not in _CACHE:
        raw, source = None, "generated (offline)"
        if os.environ.get("TFWB_OFFLINE") != "1":
            said = io.StringIO()
            try:
                with contextlib.redirect_stdout(said), contextlib.redirect_stderr(said):   # Keras's "Downloading..."
                    (xt, yt), _ = keras.datasets.mnist.load_data()
                raw, source = (xt, yt), "MNIST (keras.datasets)"
            except Exception as e:  # noqa: BLE001 - no network, no cache: the generated stand-in
                raw = None
                source = (f"generated (offline: keras.datasets.mnist could not download MNIST, "
                          f"{type(e).__name__})")
        _CACHE["raw"] = raw if raw is not None else _generated(max(EXAMPLES.values()))
        _CACHE["source"] = source
    xr, yr = _CACHE["raw"]
    SOURCE["data"] = _CACHE["source"]
    x = np.expand_dims(xr[:n].astype("float32") / 255, -1)
    return x, yr[:n].astype("int32"), _CACHE["source"]


def data(cfg: RunConfig) -> Any:
    """The data factory: an unbatched, finite ``tf.data.Dataset`` of (image, label), sized by ``cfg.size``."""
    x, y, _ = load(EXAMPLES[cfg.resolved_size])
    return tf.data.Dataset.from_tensor_slices((x, y))


def register() -> Workload:
    """Register the example as workload ``"mnist_convnet"`` (for ``--workload module:function``).

    Example:
        >>> register().name  # doctest: +SKIP
        'mnist_convnet'
    """
    return register_workload(NAME, model_fn=convnet, data_fn=data,
                             description="Keras's Simple MNIST convnet (F. Chollet), re-typed; "
                                         "MNIST or generated 28x28 images",
                             made_of=("convolutions", "dense"))     # what the CPU rules read (tfwb.advice.measured)
