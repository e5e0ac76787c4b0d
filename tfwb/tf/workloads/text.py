"""The built-in ``text`` workload: a small transformer classifier on generated token sequences.

Shaped for Tensor Cores (chapter 03): the model width, the heads' size, the feed-forward
width, the sequence length and the batch are multiples of 8, so float16 matmuls can run
on a GPU's Tensor Cores. The data are generated in memory from the seed: random tokens,
with one of ``n_classes`` marker tokens placed at a random position; the label is which
marker the sequence holds, so the task is learnable (attention has to find the marker)
and the loss falls within a run. ``data_source="files"`` is tf.data over the rows in
memory (the generic knobs apply); ``"memory"`` stages batches.
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
class TextSpec:
    """One size: the data and the transformer's shape (all multiples of 8)."""

    n_rows: int
    seq_len: int
    vocab: int
    d_model: int
    heads: int
    ff: int
    layers: int
    n_classes: int


SPECS = {
    "small": TextSpec(n_rows=4096, seq_len=32, vocab=512, d_model=64, heads=4, ff=128, layers=2, n_classes=8),
    "full": TextSpec(n_rows=16384, seq_len=128, vocab=4096, d_model=256, heads=8, ff=1024, layers=4,
                     n_classes=8),
}


def rows(size: str, seed: int = 0) -> Tuple[np.ndarray, np.ndarray]:
    """``(tokens, labels)``: int32 ``(n_rows, seq_len)`` token ids and int32 labels.

    Tokens ``0 .. n_classes-1`` are the markers; every row holds exactly one of them.

    Raises:
        ValueError: for an unknown size.
    """
    spec = spec_for(SPECS, size)
    rng = np.random.default_rng(seed)
    tokens = rng.integers(spec.n_classes, spec.vocab, size=(spec.n_rows, spec.seq_len), dtype=np.int32)
    labels = rng.integers(0, spec.n_classes, size=spec.n_rows, dtype=np.int32)
    where = rng.integers(0, spec.seq_len, size=spec.n_rows)
    tokens[np.arange(spec.n_rows), where] = labels
    return tokens, labels


def data(cfg: RunConfig) -> tf.data.Dataset:
    """The rows as unbatched ``(tokens, label)`` elements, in a fixed order."""
    x, y = rows(cfg.resolved_size, cfg.seed)
    return tf.data.Dataset.from_tensor_slices((x, y))


class _Positions(keras.layers.Layer):
    """Adds a learned embedding of each position to the token embeddings."""

    def __init__(self, seq_len: int, d_model: int, **kw):
        super().__init__(**kw)
        self.table = keras.layers.Embedding(seq_len, d_model)
        self.seq_len = seq_len

    def call(self, x):
        return x + self.table(keras.ops.arange(self.seq_len))


def model(cfg: RunConfig) -> keras.Model:
    """Token + position embeddings, ``layers`` pre-norm transformer blocks, mean pooling, float32 logits.

    Called after the dtype policy is set and inside the strategy scope.
    """
    s = SPECS[cfg.resolved_size]
    tokens = keras.Input((s.seq_len,), dtype="int32")
    x = keras.layers.Embedding(s.vocab, s.d_model)(tokens)
    x = _Positions(s.seq_len, s.d_model)(x)
    for i in range(s.layers):
        h = keras.layers.LayerNormalization(name=f"ln_a{i}")(x)
        h = keras.layers.MultiHeadAttention(s.heads, s.d_model // s.heads, name=f"attention_{i}")(h, h)
        x = x + h
        h = keras.layers.LayerNormalization(name=f"ln_b{i}")(x)
        h = keras.layers.Dense(s.ff, activation="gelu", name=f"ff_in_{i}")(h)
        x = x + keras.layers.Dense(s.d_model, name=f"ff_out_{i}")(h)
    x = keras.layers.GlobalAveragePooling1D()(keras.layers.LayerNormalization(name="ln_out")(x))
    outputs = keras.layers.Dense(s.n_classes, dtype="float32", name="logits")(x)
    return keras.Model(tokens, outputs, name=f"text_transformer_{cfg.resolved_size}")
