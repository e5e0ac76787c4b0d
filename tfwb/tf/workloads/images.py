"""The built-in ``images`` workload: a small CNN fed from PNG shards on disk.

The files are generated once per machine (``tfwb.tf.workloads.image_files``). ``data_source``
picks how the same files are read:

- ``"files"``: tf.data reads shard folders (in parallel with ``interleave``),
  decodes (in parallel with ``parallel_map``); after the generic cache and
  shuffle, augments (per batch with ``vectorized_map``).
- ``"generator"``: a Python generator reads and decodes with Pillow, wrapped by
  ``from_generator``: the naive pipeline the seeds warn about.
- ``"memory"``: the first batches decoded and augmented once, held in memory and
  repeated (``tfwb.tf.runner.pipeline.build_dataset`` stages them).

Storage latency is a ``time.sleep`` in a ``tf.py_function`` before each
``tf.io.read_file``, in each shard's sequential read. Like a real blocking read,
it occupies one of tf.data's threads while it waits, and tf.data has one thread
per CPU core by default: on 2 cores, no more than 2 reads are ever in flight,
whatever ``cycle_length`` says. So ``interleave=True`` also gives the pipeline a
private threadpool with a thread per shard in flight (``tfwb.tf.runner.pipeline.io_threads``).
"""
from __future__ import annotations

import time

import keras
import numpy as np
import tensorflow as tf

from tfwb.config import RunConfig
from tfwb.tf.workloads import image_files
from tfwb.tf.runner.pipeline import AUTOTUNE, DEFAULT_TUNING, INTERLEAVE_CYCLE, PipelineSettings, Source, map_kwargs

SPECS = image_files.SPECS


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
    return SPECS[cfg.resolved_size].default_latency_ms / 1e3


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


def augment_fn(px: int):
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


def files_source(cfg: RunConfig, files: image_files.ImageFiles, tuning: PipelineSettings) -> tf.data.Dataset:
    """Decoded images read by tf.data from the shard folders (``interleave``, ``parallel_map``, ``shard``)."""
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
    ds = ds.map(_decode(files.spec.image_px), **map_kwargs(cfg, tuning))
    if tuning.shard is not None and not tuning.shard_files:
        ds = ds.shard(*tuning.shard)
    return ds


def generator_source(cfg: RunConfig, files: image_files.ImageFiles, tuning: PipelineSettings) -> tf.data.Dataset:
    """Decoded images from a Python generator (Pillow), one file after another."""
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


def source(cfg: RunConfig, tuning: PipelineSettings = DEFAULT_TUNING) -> Source:
    """The decoded images for ``cfg.data_source`` (``"memory"`` reads the files), with the augmentation.

    Raises:
        ValueError: for a negative storage latency.
        FileNotFoundError: if some generated images vanished from disk.
        OSError: if the images cannot be generated (the message names the folder).
    """
    storage_latency_s(cfg)                      # a bad latency fails before any file is written
    files = image_files.ensure_images(cfg.resolved_size, cfg.seed)
    image_files.check_files(files)
    notes = ()
    if cfg.data_source == "generator":
        if cfg.interleave:
            notes = ("interleave does not apply to data_source='generator' (one Python generator)",)
        ds = generator_source(cfg, files, tuning)
    else:
        ds = files_source(cfg, files, tuning)
    return Source(ds, augment=augment_fn(files.spec.image_px),
                  key=f"{cfg.workload}-{cfg.resolved_size}-{cfg.seed}", notes=notes)


def data(cfg: RunConfig) -> tf.data.Dataset:
    """Unbatched decoded images and labels (not augmented), as ``data_source`` reads them."""
    return source(cfg).dataset


def cnn(image_px: int, width: int, n_classes: int, name: str) -> keras.Model:
    """Three blocks of two 3x3 convolutions (``width``, 2x, 4x filters) and a dense head.

    The logits layer is float32 whatever the dtype policy. Shared by the ``images``
    and ``cifar10`` workloads.
    """
    inputs = keras.Input((image_px, image_px, 3))
    x = keras.layers.Rescaling(1.0 / 255)(inputs)
    for mult in (1, 2, 4):
        x = keras.layers.Conv2D(width * mult, 3, padding="same", activation="relu")(x)
        x = keras.layers.Conv2D(width * mult, 3, padding="same", activation="relu")(x)
        x = keras.layers.MaxPooling2D()(x)
    x = keras.layers.GlobalAveragePooling2D()(x)
    x = keras.layers.Dense(width * 4, activation="relu")(x)
    outputs = keras.layers.Dense(n_classes, dtype="float32", name="logits")(x)
    return keras.Model(inputs, outputs, name=name)


def model(cfg: RunConfig) -> keras.Model:
    """A small CNN whose width grows with the size (logits, float32 output).

    Called after the dtype policy is set and inside the strategy scope, so its
    layers pick up both.
    """
    spec = SPECS[cfg.resolved_size]
    width = 16 if cfg.resolved_size == "small" else 32
    return cnn(spec.image_px, width, spec.n_classes, f"images_cnn_{cfg.resolved_size}")
