"""The cost of tfwb.keras.Monitor inside model.fit (issue 20, item 4).

The same fit (a small Dense model, the same batches) runs with a bare timing callback (a
clock read per call) and with ``Monitor(charts=False)``, alternated over rounds; it prints
each one's median step and the Monitor's own cost per step: the time spent inside its
``on_train_batch_begin`` and ``on_train_batch_end`` (window syncs included), timed around them.

Targets: median step within 3 % of the bare callback's; at most 10 us per step of its own.

    python benchmarks/callback_overhead.py [--steps 400] [--rounds 3]
"""
from __future__ import annotations

import argparse
import os
import statistics
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from tfwb.keras import Monitor  # noqa: E402


class Bare(keras.callbacks.Callback):
    """A clock read at each call's start: the call times and nothing else."""

    async_safe = True

    def on_train_begin(self, logs=None):
        self.starts = []

    def on_train_batch_begin(self, batch, logs=None):
        self.starts.append(time.perf_counter())

    def on_train_end(self, logs=None):
        self.starts.append(time.perf_counter())


class Timed(Monitor):
    """The Monitor with a stopwatch around its per-call hooks."""

    def on_train_begin(self, logs=None):
        self.own_s = 0.0
        super().on_train_begin(logs)

    def on_train_batch_begin(self, batch, logs=None):
        t = time.perf_counter()
        super().on_train_batch_begin(batch, logs)
        self.own_s += time.perf_counter() - t

    def on_train_batch_end(self, batch, logs=None):
        t = time.perf_counter()
        super().on_train_batch_end(batch, logs)
        self.own_s += time.perf_counter() - t


def build(steps: int):
    x = np.random.default_rng(0).normal(size=(steps * 64, 32)).astype("float32")
    y = (x[:, 0] > 0).astype("int32")
    ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(64).cache()
    keras.utils.set_random_seed(0)
    m = keras.Sequential([keras.Input((32,)), keras.layers.Dense(256, activation="relu"),
                          keras.layers.Dense(256, activation="relu"), keras.layers.Dense(2)])
    m.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return m, ds


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=400)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    m, ds = build(args.steps)
    m.fit(ds.take(20), epochs=1, verbose=0)                       # trace once before either is timed
    bare_medians, mon_medians, own_us = [], [], []
    for _ in range(args.rounds):
        bare = Bare()
        m.fit(ds, epochs=1, verbose=0, callbacks=[bare])
        bare_medians.append(statistics.median(np.diff(bare.starts)[5:]))
        mon = Timed(charts=False, warmup_steps=5)
        m.fit(ds, epochs=1, verbose=0, callbacks=[mon])
        mon_medians.append(mon.result.median_step_s)
        own_us.append(mon.own_s / mon.result.steps_done * 1e6)
    b, k = statistics.median(bare_medians), statistics.median(mon_medians)
    print(f"steps per fit {args.steps}, rounds {args.rounds}, TF {tf.__version__}, Keras {keras.__version__}")
    print(f"bare callback: median step {b * 1e3:.3f} ms (rounds: {', '.join(f'{v * 1e3:.3f}' for v in bare_medians)})")
    print(f"Monitor:       median step {k * 1e3:.3f} ms (rounds: {', '.join(f'{v * 1e3:.3f}' for v in mon_medians)})")
    print(f"difference {100 * (k / b - 1):+.1f} % (target within 3 %)")
    print(f"Monitor's own hooks: {statistics.median(own_us):.1f} us per step (target <= 10 us; "
          f"rounds: {', '.join(f'{v:.1f}' for v in own_us)})")


if __name__ == "__main__":
    main()
