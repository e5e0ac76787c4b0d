"""Input pipelines built from a RunConfig: the knobs of chapter 01 made real.

``build_dataset(cfg, workload)`` returns a batched, endlessly repeating
``tf.data.Dataset`` plus notes about knobs that did not apply. For the built-in
``images`` workload, ``data_source`` picks how the same PNG files are read:

- ``"files"``: tf.data reads shard folders (in parallel with ``interleave``),
  decodes (in parallel with ``parallel_map``), caches, shuffles, batches,
  augments (per batch with ``vectorized_map``) and prefetches.
- ``"generator"``: a Python generator reads and decodes with Pillow, wrapped by
  ``from_generator``: the naive pipeline the seeds warn about.
- ``"memory"``: the first batches decoded and augmented once, held in memory and
  repeated: the compute-only ceiling no pipeline can beat.

``prefetch=False`` also turns off the prefetch tf.data injects by default
(``Options.experimental_optimization.inject_prefetch``), so "off" means off.
"""
from __future__ import annotations

import os
import time
from typing import List, Tuple

import numpy as np
import tensorflow as tf

from ..config import RunConfig
from . import images as image_files

AUTOTUNE = tf.data.AUTOTUNE
INTERLEAVE_CYCLE = 16          # shards read at once with interleave=True
MEMORY_BATCHES = 8             # distinct batches staged for data_source="memory"


def storage_latency_s(cfg: RunConfig) -> float:
    """The per-file read delay this run uses, in seconds."""
    if cfg.storage_latency_ms is not None:
        return cfg.storage_latency_ms / 1e3
    return image_files.SPECS[cfg.resolved_size].default_latency_ms / 1e3


def _options(cfg: RunConfig) -> tf.data.Options:
    opts = tf.data.Options()
    opts.deterministic = cfg.deterministic
    if not cfg.prefetch:
        opts.experimental_optimization.inject_prefetch = False
    return opts


def _parallel(cfg: RunConfig) -> dict:
    """``map`` arguments for the parallel_map knob (``deterministic`` only matters in parallel)."""
    if not cfg.parallel_map:
        return {}
    return {"num_parallel_calls": AUTOTUNE, "deterministic": cfg.deterministic}


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


def _check_cache_path(prefix: str) -> None:
    folder = os.path.dirname(os.path.abspath(prefix)) or "."
    if not os.path.isdir(folder) or not os.access(folder, os.W_OK):
        raise ValueError(f"cache={prefix!r}: the folder {folder!r} does not exist or is not writable; "
                         "pick a writable path prefix, or cache=True to cache in memory")


def _cache(ds: tf.data.Dataset, cfg: RunConfig, key: str) -> tf.data.Dataset:
    if cfg.cache is True:
        return ds.cache()
    if isinstance(cfg.cache, str):
        _check_cache_path(cfg.cache)
        # One file set per data identity and run: a cache from other data would be
        # silently reused, and a stale .lockfile from a killed run blocks TF.
        prefix = f"{cfg.cache}-{key}-{os.getpid()}-{time.monotonic_ns()}"
        return ds.cache(prefix)
    return ds


def _files_source(cfg: RunConfig, files: image_files.ImageFiles) -> tf.data.Dataset:
    latency = storage_latency_s(cfg)
    paths = tf.constant(files.shard_paths)
    labels = tf.constant(files.shard_labels, dtype=tf.int32)
    read = _sleep_then_read(latency)

    def shard(s):
        return tf.data.Dataset.from_tensor_slices((paths[s], labels[s])).map(read)

    shards = tf.data.Dataset.range(len(files.shard_paths))
    if cfg.interleave:
        ds = shards.interleave(shard, cycle_length=min(INTERLEAVE_CYCLE, len(files.shard_paths)),
                               block_length=1, num_parallel_calls=AUTOTUNE,
                               deterministic=cfg.deterministic)
    else:
        ds = shards.flat_map(shard)
    return ds.map(_decode(files.spec.image_px), **_parallel(cfg))


def _generator_source(cfg: RunConfig, files: image_files.ImageFiles) -> tf.data.Dataset:
    from PIL import Image

    latency = storage_latency_s(cfg)
    pairs = list(zip(files.paths, files.labels))
    px = files.spec.image_px

    def generate():
        for path, label in pairs:
            if latency > 0:
                time.sleep(latency)
            with Image.open(path) as im:
                yield np.asarray(im.convert("RGB")), np.int32(label)

    sig = (tf.TensorSpec((px, px, 3), tf.uint8), tf.TensorSpec((), tf.int32))
    return tf.data.Dataset.from_generator(generate, output_signature=sig)


def _finish(ds: tf.data.Dataset, cfg: RunConfig, augment, key: str, notes: List[str]) -> tf.data.Dataset:
    """cache -> shuffle -> repeat -> (map) batch (map) -> prefetch, as the knobs say."""
    ds = _cache(ds, cfg, key)
    if cfg.shuffle_buffer:
        ds = ds.shuffle(cfg.shuffle_buffer, seed=cfg.seed, reshuffle_each_iteration=True)
    ds = ds.repeat()
    if augment is None:
        ds = ds.batch(cfg.batch_size, drop_remainder=True)
    elif cfg.vectorized_map:
        ds = ds.batch(cfg.batch_size, drop_remainder=True)
        ds = ds.map(augment, **_parallel(cfg))
    else:
        ds = ds.map(augment, **_parallel(cfg))
        ds = ds.batch(cfg.batch_size, drop_remainder=True)
    if cfg.prefetch:
        ds = ds.prefetch(AUTOTUNE)
    return ds.with_options(_options(cfg))


def _memory(ds: tf.data.Dataset, cfg: RunConfig) -> tf.data.Dataset:
    """Stage ``MEMORY_BATCHES`` batches of ``ds`` in memory and repeat them."""
    batches = list(ds.take(MEMORY_BATCHES))
    xs = tf.stack([b[0] for b in batches])
    ys = tf.stack([b[1] for b in batches])
    staged = tf.data.Dataset.from_tensor_slices((xs, ys)).cache().repeat()
    return staged.prefetch(AUTOTUNE)


def build_dataset(cfg: RunConfig, workload) -> Tuple[tf.data.Dataset, Tuple[str, ...]]:
    """The batched, repeating dataset for ``cfg`` and notes on knobs that did not apply.

    Raises:
        ValueError: for a knob that cannot apply (e.g. ``data_source="generator"``
            with a user workload) or an unwritable cache path.
        FileNotFoundError: if the generated images vanished from disk.
    """
    notes: List[str] = []
    if workload.builtin:
        files = image_files.ensure_images(cfg.resolved_size, cfg.seed)
        image_files.check_files(files)
        key = f"{cfg.workload}-{cfg.resolved_size}-{cfg.seed}"
        px = files.spec.image_px
        if cfg.data_source == "generator":
            if cfg.interleave:
                notes.append("interleave does not apply to data_source='generator' (one Python generator)")
            source = _generator_source(cfg, files)
        else:
            source = _files_source(cfg, files)
        if cfg.data_source == "memory":
            staged = _finish(_files_source(cfg.replace(interleave=True, parallel_map=True), files),
                             cfg.replace(cache=False, prefetch=True, parallel_map=True),
                             _augment(px), key, notes)
            notes.append("data_source='memory': pipeline knobs do not apply (batches staged in memory)")
            return _memory(staged, cfg), tuple(notes)
        return _finish(source, cfg, _augment(px), key, notes), tuple(notes)

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
    finished = _finish(ds, cfg, None, cfg.workload, notes)
    if cfg.data_source == "memory":
        return _memory(finished, cfg), tuple(notes)
    return finished, tuple(notes)
