"""Input pipelines built from a RunConfig: the knobs of chapter 01 made real.

``build_dataset(cfg, workload)`` returns a batched, endlessly repeating
``tf.data.Dataset`` plus notes about knobs that did not apply. For the built-in
``images`` workload, ``data_source`` picks how the same PNG files are read:

- ``"files"``: tf.data reads shard folders (in parallel with ``interleave``),
  decodes (in parallel with ``parallel_map``), caches, shuffles, batches,
  augments (per batch with ``vectorized_map``) and prefetches, in that order.
- ``"generator"``: a Python generator reads and decodes with Pillow, wrapped by
  ``from_generator``: the naive pipeline the seeds warn about.
- ``"memory"``: the first batches decoded and augmented once, held in memory and
  repeated: the compute-only ceiling no pipeline can beat.

A knob that is off is off. tf.data rewrites a pipeline on its own (see
``tfwb.tf.autotune``): it injects a final ``prefetch``, fuses ``map`` + ``batch``
into one op that fills batches ahead in its own thread, copies batch elements in
parallel, and parallelizes stateless maps such as the PNG decode. So
``prefetch=False`` also turns off the injected prefetch, the map+batch fusion and
the parallel batch (each produces ahead of the consumer), and
``parallel_map=False`` also turns off map parallelization and the parallel batch.
``Tuning(tfdata_defaults=True)`` keeps tf.data's rewrites, to measure what they do.

Storage latency is a ``time.sleep`` in a ``tf.py_function`` before each
``tf.io.read_file``, in each shard's sequential read. Like a real blocking read,
it occupies one of tf.data's threads while it waits, and tf.data has one thread
per CPU core by default: on 2 cores, no more than 2 reads are ever in flight,
whatever ``cycle_length`` says. So ``interleave=True`` also gives the pipeline a
private threadpool with a thread per shard in flight (``Tuning.io_threads``).
"""
from __future__ import annotations

import contextlib
import glob
import os
import re
import sys
import tempfile
import time
import weakref
from dataclasses import dataclass
from typing import List, Optional, Tuple

import numpy as np
import tensorflow as tf

from ..config import RunConfig
from . import images as image_files

AUTOTUNE = tf.data.AUTOTUNE
INTERLEAVE_CYCLE = 16          # shards read at once with interleave=True
MEMORY_BATCHES = 8             # distinct batches staged for data_source="memory"


@dataclass(frozen=True)
class Tuning:
    """Pipeline settings below the RunConfig knobs, for experiments that look inside.

    Every field's default gives the pipeline ``tfwb.run`` builds; the chapter
    changes one at a time to show what AUTOTUNE chose, what tf.data does on its
    own, and how sharding works.

    Args:
        map_parallel_calls (int | None, default None): ``num_parallel_calls`` of the
            decode and augment maps when ``parallel_map`` is on; ``None`` is AUTOTUNE.
        interleave_parallel_calls (int | None, default None): parallel shard reads
            when ``interleave`` is on; ``None`` is AUTOTUNE (up to ``cycle_length``).
        prefetch_buffer (int | None, default None): the final ``prefetch`` buffer, in
            batches, when ``prefetch`` is on; ``None`` is AUTOTUNE.
        io_threads (int | None, default None): size of tf.data's private threadpool;
            ``None`` is one thread per shard read in flight when ``interleave`` is
            on (at least one per core), else tf.data's default (one per core);
            ``0`` always keeps tf.data's default.
        tfdata_defaults (bool, default False): keep tf.data's own rewrites (injected
            prefetch, map+batch fusion, parallel batch, map parallelization) even
            where a knob is off.
        shard (tuple | None, default None): ``(num_workers, index)``: keep this
            worker's share of the data.
        shard_files (bool, default True): shard the list of shards before any file
            is read (each worker reads only its own files); ``False`` shards the
            decoded elements (each worker reads every file, keeps 1/num_workers).

    Raises:
        ValueError: for a negative count, or a shard index outside ``[0, num_workers)``.

    Example:
        >>> build_dataset(cfg, workload, Tuning(map_parallel_calls=2))  # doctest: +SKIP
    """

    map_parallel_calls: Optional[int] = None
    interleave_parallel_calls: Optional[int] = None
    prefetch_buffer: Optional[int] = None
    io_threads: Optional[int] = None
    tfdata_defaults: bool = False
    shard: Optional[Tuple[int, int]] = None
    shard_files: bool = True

    def __post_init__(self) -> None:
        for name in ("map_parallel_calls", "interleave_parallel_calls", "prefetch_buffer"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise ValueError(f"{name}={value!r} is not allowed; {name} must be None (AUTOTUNE) "
                                 "or an integer >= 1")
        if self.io_threads is not None and (isinstance(self.io_threads, bool)
                                            or not isinstance(self.io_threads, int) or self.io_threads < 0):
            raise ValueError(f"io_threads={self.io_threads!r} is not allowed; io_threads must be None, "
                             "0 (tf.data's default) or a number of threads >= 1")
        if self.shard is not None:
            ok = (isinstance(self.shard, tuple) and len(self.shard) == 2
                  and all(isinstance(v, int) and not isinstance(v, bool) for v in self.shard)
                  and self.shard[0] >= 1 and 0 <= self.shard[1] < self.shard[0])
            if not ok:
                raise ValueError(f"shard={self.shard!r} is not allowed; shard must be None or "
                                 "(num_workers, index) with 0 <= index < num_workers")


DEFAULT_TUNING = Tuning()


def storage_latency_s(cfg: RunConfig) -> float:
    """The per-file read delay this run uses, in seconds.

    Raises:
        ValueError: for a negative latency (RunConfig refuses one; this guards
            configs built around it).
    """
    if cfg.storage_latency_ms is not None:
        if not cfg.storage_latency_ms >= 0:
            raise ValueError(f"storage_latency_ms={cfg.storage_latency_ms!r} is not allowed; "
                             "storage_latency_ms must be >= 0 (0 is local disk) or None for the default")
        return cfg.storage_latency_ms / 1e3
    return image_files.SPECS[cfg.resolved_size].default_latency_ms / 1e3


def io_threads(cfg: RunConfig, tuning: Tuning = DEFAULT_TUNING) -> Optional[int]:
    """Size of the private threadpool the pipeline gets (``None``: tf.data's default, one per core)."""
    if tuning.io_threads is not None:
        return tuning.io_threads or None
    if cfg.interleave and cfg.data_source != "generator":
        return max(INTERLEAVE_CYCLE, os.cpu_count() or 1)
    return None


def options(cfg: RunConfig, tuning: Tuning = DEFAULT_TUNING) -> tf.data.Options:
    """The ``tf.data.Options`` that make each knob mean what it says (see the module docstring)."""
    opts = tf.data.Options()
    opts.deterministic = cfg.deterministic
    threads = io_threads(cfg, tuning)
    if threads:
        opts.threading.private_threadpool_size = threads
    if tuning.tfdata_defaults:
        return opts
    opt = opts.experimental_optimization
    if not cfg.prefetch:
        opt.inject_prefetch = False
        opt.map_and_batch_fusion = False   # the fused op fills batches ahead in its own thread
        opt.parallel_batch = False
    if not cfg.parallel_map:
        opt.map_parallelization = False    # tf.data would run the stateless decode in parallel
        opt.parallel_batch = False
    return opts


def _parallel(cfg: RunConfig, tuning: Tuning) -> dict:
    """``map`` arguments for the parallel_map knob (``deterministic`` only matters in parallel)."""
    if not cfg.parallel_map:
        return {}
    calls = tuning.map_parallel_calls or AUTOTUNE
    return {"num_parallel_calls": calls, "deterministic": cfg.deterministic}


def _sleep_then_read(latency_s: float):
    def sleep(_path):
        time.sleep(latency_s)
        return np.int32(0)

    def read(path, label):
        if latency_s > 0:
            done = tf.py_function(sleep, [path], Tout=tf.int32)
            with tf.control_dependencies([done]):
                return tf.io.read_file(path), label
        return tf.io.read_file(path), label

    return read


def _decode(px: int):
    def decode(data, label):
        img = tf.io.decode_png(data, channels=3)
        img.set_shape((px, px, 3))
        return img, label

    return decode


def _augment(px: int):
    """Random crop after 4-px padding, random flip, random brightness.

    Works on one image or a batch (tf.image ops accept both), so the same
    function serves per-element and vectorized (batch-first) map.
    """
    pad = px + 8

    def augment(img, label):
        x = tf.cast(img, tf.float32)
        batched = x.shape.rank == 4
        x = tf.image.resize_with_crop_or_pad(x, pad, pad)
        size = [tf.shape(x)[0], px, px, 3] if batched else [px, px, 3]
        x = tf.image.random_crop(x, size)
        x = tf.image.random_flip_left_right(x)
        x = tf.image.random_brightness(x, 20.0)
        return tf.clip_by_value(x, 0.0, 255.0), label

    return augment


# -- cache ---------------------------------------------------------------------------------
def check_cache_path(prefix: str) -> None:
    """Raise ``ValueError`` unless a file can be created next to the cache ``prefix``.

    Tries it (as root, permission bits say little: ``/proc`` looks writable).
    """
    folder = os.path.dirname(os.path.abspath(prefix)) or "."
    problem = None
    if not os.path.isdir(folder):
        problem = "does not exist"
    else:
        try:
            with tempfile.TemporaryFile(dir=folder):
                pass
        except OSError:
            problem = "is not writable"
    if problem:
        raise ValueError(f"cache={prefix!r}: the folder {folder!r} {problem}; pick a path prefix in a "
                         "writable folder (e.g. cache='tfwb-cache/images'), or cache=True to cache in memory")


def cache_files(prefix: str) -> List[str]:
    """The files tf.data wrote for the cache ``prefix`` (index, data shards, lockfiles)."""
    return sorted(glob.glob(glob.escape(prefix) + "*"))


def _remove_cache_files(prefix: str) -> None:
    for path in cache_files(prefix):
        try:
            os.remove(path)
        except OSError:
            pass


def _cache(ds: tf.data.Dataset, cfg: RunConfig, key: str) -> Tuple[tf.data.Dataset, Optional[str]]:
    if cfg.cache is True:
        return ds.cache(), None
    if isinstance(cfg.cache, str):
        check_cache_path(cfg.cache)
        # One file set per data identity and run: a cache of other data would be
        # silently reused, and a stale .lockfile from a killed run blocks TF. The
        # files go when the dataset does (see build_dataset).
        prefix = f"{cfg.cache}-{key}-{os.getpid()}-{time.monotonic_ns()}"
        return ds.cache(prefix), prefix
    return ds, None


# -- sources ---------------------------------------------------------------------------------
def _files_source(cfg: RunConfig, files: image_files.ImageFiles, tuning: Tuning) -> tf.data.Dataset:
    latency = storage_latency_s(cfg)
    paths = tf.constant(files.shard_paths)
    labels = tf.constant(files.shard_labels, dtype=tf.int32)
    read = _sleep_then_read(latency)

    def shard(s):
        return tf.data.Dataset.from_tensor_slices((paths[s], labels[s])).map(read)

    shards = tf.data.Dataset.range(len(files.shard_paths))
    if tuning.shard is not None and tuning.shard_files:
        shards = shards.shard(*tuning.shard)
    if cfg.interleave:
        cycle = min(INTERLEAVE_CYCLE, len(files.shard_paths))
        ds = shards.interleave(shard, cycle_length=cycle, block_length=1,
                               num_parallel_calls=tuning.interleave_parallel_calls or AUTOTUNE,
                               deterministic=cfg.deterministic)
    else:
        ds = shards.flat_map(shard)
    ds = ds.map(_decode(files.spec.image_px), **_parallel(cfg, tuning))
    if tuning.shard is not None and not tuning.shard_files:
        ds = ds.shard(*tuning.shard)
    return ds


def _generator_source(cfg: RunConfig, files: image_files.ImageFiles, tuning: Tuning) -> tf.data.Dataset:
    from PIL import Image

    latency = storage_latency_s(cfg)
    pairs = list(zip(files.paths, files.labels))
    if tuning.shard is not None:
        n, i = tuning.shard
        pairs = pairs[i::n]
    px = files.spec.image_px

    def generate():
        for path, label in pairs:
            if latency > 0:
                time.sleep(latency)
            with Image.open(path) as im:
                yield np.asarray(im.convert("RGB")), np.int32(label)

    sig = (tf.TensorSpec((px, px, 3), tf.uint8), tf.TensorSpec((), tf.int32))
    return tf.data.Dataset.from_generator(generate, output_signature=sig)


def _finish(ds: tf.data.Dataset, cfg: RunConfig, augment, key: str,
            tuning: Tuning) -> Tuple[tf.data.Dataset, Optional[str]]:
    """cache -> shuffle -> repeat -> (map) batch (map) -> prefetch, as the knobs say."""
    ds, cache_prefix = _cache(ds, cfg, key)
    if cfg.shuffle_buffer:
        ds = ds.shuffle(cfg.shuffle_buffer, seed=cfg.seed, reshuffle_each_iteration=True)
    ds = ds.repeat()
    if augment is None:
        ds = ds.batch(cfg.batch_size, drop_remainder=True)
    elif cfg.vectorized_map:
        ds = ds.batch(cfg.batch_size, drop_remainder=True)
        ds = ds.map(augment, **_parallel(cfg, tuning))
    else:
        ds = ds.map(augment, **_parallel(cfg, tuning))
        ds = ds.batch(cfg.batch_size, drop_remainder=True)
    if cfg.prefetch:
        ds = ds.prefetch(tuning.prefetch_buffer or AUTOTUNE)
    return ds.with_options(options(cfg, tuning)), cache_prefix


def _memory(ds: tf.data.Dataset, cfg: RunConfig) -> tf.data.Dataset:
    """Stage ``MEMORY_BATCHES`` batches of ``ds`` in memory and repeat them."""
    batches = list(ds.take(MEMORY_BATCHES))
    xs = tf.stack([b[0] for b in batches])
    ys = tf.stack([b[1] for b in batches])
    staged = tf.data.Dataset.from_tensor_slices((xs, ys)).cache().repeat()
    return staged.prefetch(AUTOTUNE)


def auto_shard(ds: tf.data.Dataset, num_workers: int, index: int, policy: str = "AUTO") -> tf.data.Dataset:
    """``ds`` as worker ``index`` of ``num_workers`` would get it from tf.data's auto-sharding.

    Under ``MultiWorkerMirroredStrategy``, ``experimental_distribute_dataset`` rewrites
    the pipeline by ``options.experimental_distribute.auto_shard_policy``: ``FILE``
    shards the files of a reader dataset (``TFRecordDataset``, ``TextLineDataset``,
    ...), ``DATA`` keeps every ``num_workers``-th element (each worker still reads
    everything), ``AUTO`` tries ``FILE`` and falls back to ``DATA``. This applies the
    same rewrite in one process (TensorFlow's internal ``_AutoShardDataset``), so a
    notebook can show which one a pipeline gets without starting a cluster.

    Raises:
        ValueError: for an unknown policy.
        tf.errors.NotFoundError: on iteration, when ``FILE`` finds no reader dataset.
    """
    from tensorflow.python.data.experimental.ops.distribute import _AutoShardDataset

    policies = ("AUTO", "FILE", "DATA", "OFF")
    if policy not in policies:
        raise ValueError(f"policy={policy!r} is not allowed; one of {policies}")
    opts = tf.data.Options()
    opts.experimental_distribute.auto_shard_policy = getattr(tf.data.experimental.AutoShardPolicy, policy)
    return _AutoShardDataset(ds.with_options(opts), num_workers, index)


@contextlib.contextmanager
def _native_stderr_silenced():
    """Discard what TensorFlow's C++ code writes to file descriptor 2, for the duration."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "wb") as null:
            os.dup2(null.fileno(), 2)
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def try_auto_shard(ds: tf.data.Dataset, num_workers: int, index: int, policy: str = "AUTO"):
    """The first element worker ``index`` gets under ``policy``, or the error tf.data raises.

    Returns:
        ``(element, None)``, or ``(None, "NotFoundError: Found an unshardable source dataset")``
        when the rewrite fails. TensorFlow logs a failed rewrite as an error line followed
        by a dump of the whole pipeline graph; that log is silenced here, the error kept.
    """
    with _native_stderr_silenced():
        try:
            return next(iter(auto_shard(ds, num_workers, index, policy))), None
        except tf.errors.OpError as e:
            text = re.sub(r"\{\{.*?\}\}\s*", "", e.message).strip().splitlines()[0]
            return None, f"{type(e).__name__}: {text.split(': goo.gle')[0]}"


def _own_cache_files(ds: tf.data.Dataset, prefix: Optional[str]) -> tf.data.Dataset:
    """Delete a run's cache files once its dataset (and so its iterator) is gone."""
    if prefix is not None:
        weakref.finalize(ds, _remove_cache_files, prefix)
    return ds


def build_dataset(cfg: RunConfig, workload, tuning: Optional[Tuning] = None
                  ) -> Tuple[tf.data.Dataset, Tuple[str, ...]]:
    """The batched, repeating dataset for ``cfg`` and notes on knobs that did not apply.

    Args:
        cfg: the knobs.
        workload: the registered workload (``tfwb.workloads.get_workload``).
        tuning: settings below the knobs (``Tuning``); ``None`` is what ``tfwb.run`` uses.

    A disk cache (``cache="prefix"``) writes one file set per call, removed when
    the returned dataset is garbage-collected.

    Raises:
        ValueError: for a knob that cannot apply (e.g. ``data_source="generator"``
            with a user workload), a negative storage latency or an unwritable
            cache path; the message names the field and what to pick instead.
        FileNotFoundError: if some generated images vanished from disk.
        OSError: if the images cannot be generated (the message names the folder).
    """
    tuning = tuning if tuning is not None else DEFAULT_TUNING
    notes: List[str] = []
    if workload.builtin:
        storage_latency_s(cfg)
        if isinstance(cfg.cache, str):
            check_cache_path(cfg.cache)
        files = image_files.ensure_images(cfg.resolved_size, cfg.seed)
        image_files.check_files(files)
        key = f"{cfg.workload}-{cfg.resolved_size}-{cfg.seed}"
        px = files.spec.image_px
        if cfg.data_source == "memory":
            staged, _ = _finish(_files_source(cfg.replace(interleave=True, parallel_map=True), files, tuning),
                                cfg.replace(cache=False, prefetch=True, parallel_map=True, interleave=True),
                                _augment(px), key, DEFAULT_TUNING)
            notes.append("data_source='memory': pipeline knobs do not apply (batches staged in memory)")
            return _memory(staged, cfg), tuple(notes)
        if cfg.data_source == "generator":
            if cfg.interleave:
                notes.append("interleave does not apply to data_source='generator' (one Python generator)")
            source = _generator_source(cfg, files, tuning)
        else:
            source = _files_source(cfg, files, tuning)
        ds, prefix = _finish(source, cfg, _augment(px), key, tuning)
        return _own_cache_files(ds, prefix), tuple(notes)

    if cfg.data_source == "generator":
        raise ValueError("data_source='generator' only applies to the built-in workloads; "
                         f"workload {cfg.workload!r} brings its own dataset: use 'files' or 'memory'")
    for knob in ("parallel_map", "interleave", "vectorized_map"):
        if getattr(cfg, knob):
            notes.append(f"{knob} does not apply to workload {cfg.workload!r}: its data_fn builds its own maps")
    ds = workload.data_fn(cfg)
    if not isinstance(ds, tf.data.Dataset):
        raise ValueError(f"data_fn of workload {cfg.workload!r} returned {type(ds).__name__}; "
                         "it must return an unbatched tf.data.Dataset of (features, label)")
    finished, prefix = _finish(ds, cfg, None, cfg.workload, tuning)
    finished = _own_cache_files(finished, prefix)
    if cfg.data_source == "memory":
        return _memory(finished, cfg), tuple(notes)
    return finished, tuple(notes)
