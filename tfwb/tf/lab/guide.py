"""The TF guide's artificial-dataset benchmark, reproduced with tfwb's timing.

Source: the TensorFlow guide "Better performance with the tf.data API"
(https://www.tensorflow.org/guide/data_performance). Its benchmark needs no data
and no model: ``ArtificialDataset`` is a ``from_generator`` dataset that sleeps
30 ms to "open a file" and 15 ms before each of its 3 samples; the "training
step" is a 10 ms sleep; ``mapped_function`` sleeps 30 ms in a ``py_function``;
the vectorization example maps ``x + 1`` over ``range(10000)`` with no step at
all. The pipelines here are the guide's, as written (including one quirk:
``range(2).interleave(ArtificialDataset)`` passes each range element as
``num_samples``, so its two "files" hold 0 and 1 samples).

What differs is the timing: each variant is timed ``repeats`` times with
``tfwb.tf.lab.stopwatch.time_calls`` (``perf_counter``, warm-up apart), variants in
rounds so drift hits all alike, and the ratio is of medians. Every pair can run
twice: with tf.data's default rewrites (what the guide's reader gets today; the
guide's "naive" pipeline already has a prefetch injected) and with them off (the
synchronous pipeline the guide's text and diagrams describe).

``PUBLISHED`` holds the guide's ratios as ``../shared/FACTS.md`` records them
from the published page; each is the guide's baseline for that section over the
improved variant. The guide's absolute times drift by up to 2x between
publications, so compare ratios, not seconds.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, Dict, Iterable, List, Optional, Sequence, Tuple  # noqa: F401

import tensorflow as tf

from tfwb import expect, stats
from tfwb import render
from tfwb.tf.runner import pipeline
from tfwb.tf.lab.stopwatch import time_calls

SOURCE = ('TensorFlow guide "Better performance with the tf.data API" '
          "(https://www.tensorflow.org/guide/data_performance)")

OPEN_S, READ_S, STEP_S, MAP_S = 0.03, 0.015, 0.01, 0.03   # the guide's sleeps


@dataclass(frozen=True)
class Pair:
    """One comparison of the guide: a baseline pipeline and the improved one.

    ``published`` is the guide's ratio (baseline time / improved time).
    """

    name: str
    baseline: str
    improved: str
    epochs: int
    published: float
    fast_loop: bool = False


PAIRS: Tuple[Pair, ...] = (
    Pair("prefetch", "naive", "prefetch", 2, 1.03),
    Pair("parallel interleave", "sequential interleave", "parallel interleave", 2, 1.26),
    Pair("parallel map", "sequential map", "parallel map", 2, 1.35),
    Pair("cache (5 epochs)", "sequential map", "map then cache", 5, 3.2),
    Pair("vectorized map", "scalar map", "vectorized map", 2, 4.8, fast_loop=True),
)

#: The published ratios, by comparison name.
PUBLISHED: Dict[str, float] = {p.name: p.published for p in PAIRS}

#: What to expect on any machine, by (comparison, rewrites): ``"faster"`` (by the
#: spread rule), ``"about 1"`` (ratio within 10 % of 1.0) or ``"at least 0.9"``.
#: Prefetch gains nothing with the rewrites on because tf.data already injected one;
#: the guide's parallel interleave leaves ``cycle_length`` to tf.data, which may pick
#: 1, and then gains only when opening the next "file" ahead of time lands in time.
EXPECTED: Dict[Tuple[str, str], str] = {
    ("prefetch", "default"): "about 1",
    ("parallel interleave", "default"): "at least 0.9",
    ("parallel interleave", "off"): "at least 0.9",
}


@tf.autograph.experimental.do_not_convert   # interleave traces it; a generator needs no AutoGraph
def artificial_dataset(num_samples=3) -> tf.data.Dataset:
    """The guide's ``ArtificialDataset``: open a "file", then read ``num_samples`` samples slowly."""
    def generate(n):
        time.sleep(OPEN_S)                 # opening the file
        for i in range(n):
            time.sleep(READ_S)             # reading one record
            yield (i,)

    return tf.data.Dataset.from_generator(
        generate, output_signature=tf.TensorSpec(shape=(1,), dtype=tf.int64), args=(num_samples,))


def mapped_function(s):
    """The guide's "hard pre-processing": a 30 ms sleep in a ``py_function``."""
    tf.py_function(lambda: time.sleep(MAP_S), [], ())
    return s


def _increment(x):
    return x + 1


AUTOTUNE = tf.data.AUTOTUNE

#: The guide's pipelines, by name (each call builds a fresh one).
PIPELINES: Dict[str, Callable[[], tf.data.Dataset]] = {
    "naive": lambda: artificial_dataset(),
    "prefetch": lambda: artificial_dataset().prefetch(AUTOTUNE),
    "sequential interleave": lambda: tf.data.Dataset.range(2).interleave(artificial_dataset),
    "parallel interleave": lambda: tf.data.Dataset.range(2).interleave(
        artificial_dataset, num_parallel_calls=AUTOTUNE),
    "sequential map": lambda: artificial_dataset().map(mapped_function),
    "parallel map": lambda: artificial_dataset().map(mapped_function, num_parallel_calls=AUTOTUNE),
    "map then cache": lambda: artificial_dataset().map(mapped_function).cache(),
    "scalar map": lambda: tf.data.Dataset.range(10000).map(_increment).batch(256),
    "vectorized map": lambda: tf.data.Dataset.range(10000).batch(256).map(_increment),
}


def without_rewrites(ds: tf.data.Dataset) -> tf.data.Dataset:
    """``ds`` with tf.data's asynchronous rewrites off (injected prefetch, map+batch
    fusion, parallel batch, map parallelization): the pipeline exactly as written."""
    return ds.with_options(pipeline.without_rewrites())


def train_loop(dataset: tf.data.Dataset, epochs: int = 2) -> None:
    """The guide's ``benchmark`` loop, untimed: every element, then a 10 ms "training step"."""
    for _ in range(epochs):
        for _ in dataset:
            time.sleep(STEP_S)


def fast_loop(dataset: tf.data.Dataset, epochs: int = 2) -> None:
    """The guide's ``fast_benchmark`` loop, untimed: iterate, no step."""
    for _ in tf.data.Dataset.range(epochs):
        for _ in dataset:
            pass


@dataclass(frozen=True)
class GuideResult:
    """Measured times of the guide's pipelines and the ratios they give.

    ``times_s[(pipeline, epochs, rewrites)]`` holds one wall time per repeat
    (seconds); ``rewrites`` is ``"default"`` or ``"off"``.
    """

    times_s: Dict[Tuple[str, int, str], Tuple[float, ...]]
    repeats: int

    def median_s(self, pipeline: str, epochs: int, rewrites: str = "default") -> float:
        return stats.median(self.times_s[(pipeline, epochs, rewrites)])

    def ratio(self, pair: Pair, rewrites: str = "default") -> Optional[float]:
        """Baseline median / improved median, or None if the pair was not run that way."""
        b, i = (pair.baseline, pair.epochs, rewrites), (pair.improved, pair.epochs, rewrites)
        if b not in self.times_s or i not in self.times_s:
            return None
        return stats.median(self.times_s[b]) / stats.median(self.times_s[i])

    def comparison(self, pair: Pair, rewrites: str = "default") -> Optional[stats.Comparison]:
        b, i = (pair.baseline, pair.epochs, rewrites), (pair.improved, pair.epochs, rewrites)
        if b not in self.times_s or i not in self.times_s:
            return None
        return stats.compare(self.times_s[b], self.times_s[i])

    def check_lines(self) -> List[str]:
        """One ``tfwb.expect`` sentence per comparison run: expected (``EXPECTED``, else faster), measured, agreed."""
        lines = []
        for pair in PAIRS:
            for rewrites in ("default", "off"):
                cmp = self.comparison(pair, rewrites)
                if cmp is None:
                    continue
                claim = f"{pair.name}, rewrites {rewrites}"
                expected = EXPECTED.get((pair.name, rewrites), "faster")
                ratio = self.ratio(pair, rewrites)
                if expected == "faster":
                    lines.append(str(expect.ab(claim, "faster").check(cmp)))
                elif expected == "about 1":      # within 10 % either way
                    lines.append(str(expect.at_least(claim + " (about 1)", 0.9, "x").check(ratio)))
                    lines.append(str(expect.at_most(claim + " (about 1)", 1.1, "x").check(ratio)))
                else:
                    lines.append(str(expect.at_least(claim, 0.9, "x").check(ratio)))
        return lines

    def rows(self) -> List[dict]:
        """One row per comparison: published ratio, measured ratios, the noise verdict."""
        out = []
        for pair in PAIRS:
            row = {"comparison": pair.name, "baseline": pair.baseline, "improved": pair.improved,
                   "epochs": pair.epochs, "published": pair.published}
            for rewrites in ("default", "off"):
                cmp = self.comparison(pair, rewrites)
                row[f"measured_{rewrites}"] = self.ratio(pair, rewrites)
                row[f"verdict_{rewrites}"] = cmp.text() if cmp is not None else ""
            out.append(row)
        return out


HEADERS = ("comparison", "published", "yours (tf.data defaults)", "yours (rewrites off)")


def _cells(rows: Sequence[dict]) -> List[Tuple[str, ...]]:
    def fmt(r, key):
        value = r[f"measured_{key}"]
        return "not run" if value is None else f"{value:.2f}x ({r[f'verdict_{key}']})"
    return [(r["comparison"], f"{r['published']:.2f}x", fmt(r, "default"), fmt(r, "off")) for r in rows]


def format_rows(rows: Sequence[dict]) -> str:
    """The comparison table as fixed-width text (the command line; notebooks show ``html_rows``)."""
    lines = _cells(rows)
    widths = [max(len(h), *(len(line[i]) for line in lines)) for i, h in enumerate(HEADERS)]
    text = ["  ".join(h.ljust(w) for h, w in zip(HEADERS, widths)).rstrip(),
            "  ".join("-" * w for w in widths)]
    text += ["  ".join(c.ljust(w) for c, w in zip(line, widths)).rstrip() for line in lines]
    return "\n".join(text)


def html_rows(rows: Sequence[dict]) -> str:
    """The comparison table as escaped HTML, for a notebook cell (``display(HTML(...))``)."""
    return render.simple_html_table(HEADERS, _cells(rows))


def run(repeats: int = 5, *, warmup: int = 1, pairs: Iterable[Pair] = PAIRS,
        rewrites_off: Optional[Iterable[str]] = None) -> GuideResult:
    """Time every pipeline of ``pairs`` ``repeats`` times, in rounds, with tf.data's rewrites on and off.

    Args:
        repeats: timed runs of each pipeline (>= 1); the ratio is of medians.
        warmup: untimed rounds first (tracing the py_functions, thread start-up).
        pairs: the comparisons to run (default: all of the guide's).
        rewrites_off: names of the pairs to run a second time with tf.data's
            rewrites off (the synchronous pipeline the guide describes); ``None``
            is every pair, ``()`` none.

    Raises:
        ValueError: for ``repeats < 1``, ``warmup < 0`` or an unknown pair name.

    Example:
        >>> print(format_rows(run(repeats=5).rows()))  # doctest: +SKIP
    """
    if repeats < 1 or warmup < 0:
        raise ValueError(f"repeats={repeats!r}, warmup={warmup!r}: need repeats >= 1 and warmup >= 0")
    pairs = tuple(pairs)
    names = [p.name for p in pairs]
    off = set(names if rewrites_off is None else rewrites_off)
    unknown = sorted(off - set(names))
    if unknown:
        raise ValueError(f"rewrites_off names unknown pairs {unknown}; known: {names}")
    jobs: List[tuple] = []
    for pair in pairs:
        loop = fast_loop if pair.fast_loop else train_loop
        ways = ("default", "off") if pair.name in off else ("default",)
        for name in (pair.baseline, pair.improved):
            for way in ways:
                key = (name, pair.epochs, way)
                if key not in [j[0] for j in jobs]:
                    jobs.append((key, loop))
    times: Dict[Tuple[str, int, str], List[float]] = {key: [] for key, _ in jobs}
    for round_ in range(warmup + repeats):
        for key, loop in jobs:
            name, epochs, way = key

            def once(name=name, epochs=epochs, way=way, loop=loop):
                ds = PIPELINES[name]()
                loop(without_rewrites(ds) if way == "off" else ds, epochs)

            t = time_calls(once, calls=1, warmup=0, sync=False)
            if round_ >= warmup:
                times[key].extend(t.times_s)
    return GuideResult({k: tuple(v) for k, v in times.items()}, repeats)
