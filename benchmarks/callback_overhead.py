"""The cost of tfwb.keras.Monitor inside model.fit (issue 20, item 4).

The same fit (a small Dense model, the same batches) runs with a bare timing callback (a
clock read per call) and with ``Monitor(charts=False)``, alternated over rounds; it prints
each one's median step and the Monitor's own cost per step: the time spent inside its
``on_train_batch_begin`` and ``on_train_batch_end`` (window syncs included), timed around them,
plus the wrapper it puts around ``model.train_function`` for the fit (the batch size, a failure
recorded), timed on its own around a function that does nothing (its cost lands inside each
call's time, so the median-step comparison includes it too).

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


def wrapper_us(calls: int = 200_000) -> float:
    """Microseconds the Monitor's train_function wrapper adds to one call (a no-op function wrapped)."""
    class Model:
        def train_function(self, iterator):
            return None

    model = Model()
    bare = model.train_function
    mon = Monitor(charts=False)
    mon.set_model(model)
    mon._wrap("train_function")
    wrapped = model.train_function
    best = []
    for fn in (bare, wrapped, bare, wrapped):
        t = time.perf_counter()
        for _ in range(calls):
            fn(None)
        best.append((time.perf_counter() - t) / calls)
    mon._unwrap("train_function")
    return max(0.0, (min(best[1], best[3]) - min(best[0], best[2])) * 1e6)


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
    wrap = wrapper_us()
    print(f"Monitor's own hooks: {statistics.median(own_us):.1f} us per step (rounds: "
          f"{', '.join(f'{v:.1f}' for v in own_us)}); its train_function wrapper {wrap:.2f} us per call; "
          f"together {statistics.median(own_us) + wrap:.1f} us per step (target <= 10 us)")


if __name__ == "__main__":
    main()
