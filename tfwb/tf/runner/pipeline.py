"""The generic input pipeline: every workload's data, shaped by the RunConfig's input knobs.

``build_dataset(cfg, workload)`` asks the workload for its source (unbatched
elements, see ``Source``) and finishes it the same way for every workload::

    source -> cache -> shuffle -> repeat -> (augment) batch (augment) -> prefetch

A workload's own knobs (reading files, decoding, augmenting: ``tfwb.workloads.SOURCE_KNOBS``)
shape its source (``tfwb.tf.workloads.images``); the generic ones (``cache``,
``shuffle_buffer``, ``batch_size``, ``prefetch``, ``deterministic``) are applied here.

A knob that is off is off. tf.data rewrites a pipeline on its own (see
``tfwb.tf.lab.autotune``): it injects a final ``prefetch``, fuses ``map`` + ``batch``
into one op that fills batches ahead in its own thread, copies batch elements in
parallel, and parallelizes stateless maps. So ``prefetch=False`` also turns off the
injected prefetch, the map+batch fusion and the parallel batch (each produces ahead
of the consumer), and ``parallel_map=False`` also turns off map parallelization and
the parallel batch. ``PipelineSettings(tfdata_defaults=True)`` keeps tf.data's rewrites, to
measure what they do.

A cache caches. ``cache=True`` (memory) or ``cache="path/prefix"`` (files) is filled
with one whole epoch *before* the first step, timed apart (a note gives the time,
the elements and the bytes; it counts in the run's ``setup_s``, not in its steps),
so every measured step reads from the cache, however short the run. A cache that an
iterator leaves half-written is discarded by tf.data (it warns "The calling iterator
did not fully read the dataset being cached"), which is what a run shorter than an
epoch did before.
"""
from __future__ import annotations

import contextlib
import glob
import os
import re
import tempfile
import time
import weakref
from dataclasses import dataclass
from typing import Callable, List, Optional, Tuple

import tensorflow as tf

from tfwb.config import RunConfig
from tfwb.workloads import GENERIC_KNOBS, Workload, get_workload
from tfwb.tf.runner.quiet import native_stderr_captured
from tfwb.renamed import forward

AUTOTUNE = tf.data.AUTOTUNE
INTERLEAVE_CYCLE = 16          # shards read at once with interleave=True
MEMORY_BATCHES = 8             # distinct batches staged for data_source="memory"
#: The start of what tf.data logs when an iterator leaves a cache half-written.
INCOMPLETE_CACHE_WARNING = "The calling iterator did not fully read the dataset being cached"
FILL_BATCH = 256               # elements per pull while filling a cache (fewer Python round trips)

#: tf.data's rewrites that produce ahead of the consumer: ``prefetch=False`` turns them off.
PREFETCHING_REWRITES = ("inject_prefetch", "map_and_batch_fusion", "parallel_batch")
#: tf.data's rewrites that run work in parallel: ``parallel_map=False`` turns them off.
PARALLELIZING_REWRITES = ("map_parallelization", "parallel_batch")
#: Every asynchronous rewrite: off, a pipeline runs exactly as written.
ASYNC_REWRITES = ("inject_prefetch", "map_and_batch_fusion", "parallel_batch", "map_parallelization")


@dataclass(frozen=True)
class PipelineSettings:
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
            A workload without files always shards elements.

    Raises:
        ValueError: for a negative count, or a shard index outside ``[0, num_workers)``.

    Example:
        >>> build_dataset(cfg, workload, PipelineSettings(map_parallel_calls=2))  # doctest: +SKIP
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


DEFAULT_TUNING = PipelineSettings()


@dataclass(frozen=True)
class Source:
    """A workload's data before the generic finish: what ``Workload.source_fn`` returns.

    Args:
        dataset: unbatched, finite ``(features, label)`` elements (what ``cache`` stores).
        augment: ``augment(x, y) -> (x, y)`` mapped after the cache and the shuffle, per
            element, or per batch with ``vectorized_map`` (it must accept both); ``None``: none.
        key: names the data (workload, size, seed) in cache file names.
        notes: what the source wants said about knobs it did not apply.
    """

    dataset: tf.data.Dataset
    augment: Optional[Callable] = None
    key: str = "data"
    notes: Tuple[str, ...] = ()


# -- options ---------------------------------------------------------------------------------
def without_rewrites(rewrites: Tuple[str, ...] = ASYNC_REWRITES,
                     opts: Optional[tf.data.Options] = None) -> tf.data.Options:
    """``opts`` (new by default) with tf.data's ``rewrites`` (names from ``ASYNC_REWRITES``) off."""
    opts = opts if opts is not None else tf.data.Options()
    for name in rewrites:
        setattr(opts.experimental_optimization, name, False)
    return opts


def io_threads(cfg: RunConfig, tuning: PipelineSettings = DEFAULT_TUNING,
               workload: Optional[Workload] = None) -> Optional[int]:
    """Size of the private threadpool the pipeline gets (``None``: tf.data's default, one per core).

    ``interleave=True`` gets one thread per shard read in flight, for workloads whose
    source honours ``interleave`` (``workload`` defaults to ``cfg.workload``'s).
    """
    if tuning.io_threads is not None:
        return tuning.io_threads or None
    if not cfg.interleave or cfg.data_source == "generator":
        return None
    if workload is None:
        try:
            workload = get_workload(cfg.workload)
        except ValueError:
            return None
    if workload.applies("interleave"):
        return max(INTERLEAVE_CYCLE, os.cpu_count() or 1)
    return None


def options(cfg: RunConfig, tuning: PipelineSettings = DEFAULT_TUNING,
            workload: Optional[Workload] = None) -> tf.data.Options:
    """The ``tf.data.Options`` that make each knob mean what it says (see the module docstring)."""
    opts = tf.data.Options()
    opts.deterministic = cfg.deterministic
    threads = io_threads(cfg, tuning, workload)
    if threads:
        opts.threading.private_threadpool_size = threads
    if tuning.tfdata_defaults:
        return opts
    off = set()
    if not cfg.prefetch:
        off.update(PREFETCHING_REWRITES)
    if not cfg.parallel_map:
        off.update(PARALLELIZING_REWRITES)
    return without_rewrites(tuple(n for n in ASYNC_REWRITES if n in off), opts)


def map_kwargs(cfg: RunConfig, tuning: PipelineSettings = DEFAULT_TUNING) -> dict:
    """``map`` arguments for the parallel_map knob (``deterministic`` only matters in parallel)."""
    if not cfg.parallel_map:
        return {}
    calls = tuning.map_parallel_calls or AUTOTUNE
    return {"num_parallel_calls": calls, "deterministic": cfg.deterministic}


# -- cache -----------------------------------------------------------------------------------
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


def _element_bytes(spec) -> Optional[int]:
    """Bytes of one element, when every component has a fully known shape."""
    total = 0
    for s in tf.nest.flatten(spec):
        if not isinstance(s, tf.TensorSpec) or not s.shape.is_fully_defined():
            return None
        total += s.shape.num_elements() * s.dtype.size
    return total


def _mib(n_bytes: float) -> str:
    return f"{n_bytes / 2**20:.1f} MiB"


def fill_cache(cached: tf.data.Dataset, opts: tf.data.Options, prefix: Optional[str] = None
               ) -> Tuple[int, float]:
    """Read one whole epoch of ``cached`` (a dataset ending in ``cache(prefix or "")``) so the cache is complete.

    TF 2.21's file-cache writer logs "did not fully read the dataset being cached"
    when it is destroyed even after a complete epoch (tensorflow#60174, #122752: it
    looks for the index of its temporary bundle, which completion merged away). That
    line is dropped when the merged index ``prefix.index`` shows the cache is
    complete; everything else TF writes meanwhile is passed on.

    Returns:
        ``(elements, seconds)``.
    """
    t0 = time.perf_counter()
    n = 0
    hold = native_stderr_captured() if prefix is not None else contextlib.nullcontext()
    with hold as held:
        ones = cached.map(lambda *_: tf.constant(1, tf.int64))      # any element shape: count them
        for batch in ones.batch(FILL_BATCH).with_options(opts):
            n += int(tf.reduce_sum(batch))
        # The loop's iterator, and so the cache writer, is destroyed here: it has logged.
    seconds = time.perf_counter() - t0
    if held is not None:
        complete = os.path.exists(prefix + ".index")
        held.replay(drop=(lambda line: INCOMPLETE_CACHE_WARNING in line) if complete else None)
    return n, seconds


def _cache(ds: tf.data.Dataset, cfg: RunConfig, key: str, opts: tf.data.Options, name: str
           ) -> Tuple[tf.data.Dataset, Optional[str], Tuple[str, ...]]:
    """``ds`` cached as ``cfg.cache`` says and filled now: ``(dataset, file prefix or None, notes)``."""
    if cfg.cache is False:
        return ds, None, ()
    if ds.cardinality() == tf.data.INFINITE_CARDINALITY:
        raise ValueError(f"cache={cfg.cache!r}: the data of workload {name!r} never ends (its dataset "
                         "repeats), so no cache can ever be complete; return a finite dataset (tfwb "
                         "repeats it) or set cache=False")
    prefix = None
    if isinstance(cfg.cache, str):
        check_cache_path(cfg.cache)
        # One file set per data identity and run: a cache of other data would be
        # silently reused, and a stale .lockfile from a killed run blocks TF. The
        # files go when the dataset does (see build_dataset).
        safe_key = re.sub(r"[^\w.-]+", "_", key)
        prefix = f"{cfg.cache}-{safe_key}-{os.getpid()}-{time.monotonic_ns()}"
        cached = ds.cache(prefix)
    else:
        cached = ds.cache()
    try:
        n, seconds = fill_cache(cached, opts, prefix)
    except BaseException:
        if prefix is not None:
            _remove_cache_files(prefix)
        raise
    if n == 0:
        raise ValueError(f"the data of workload {name!r} is empty: nothing to cache or train on")
    took = (f"in {seconds:.2f} s before the first step (part of setup_s, not of the step times); "
            "every step reads from the cache")
    if prefix is None:
        size = _element_bytes(ds.element_spec)
        mib = f", {_mib(n * size)}" if size else ""
        note = f"cache=True: filled with one epoch ({n} elements{mib}) in memory {took}"
    else:
        files = [p for p in cache_files(prefix) if not p.endswith(".lockfile")]
        written = sum(os.path.getsize(p) for p in files)
        note = (f"cache={cfg.cache!r}: filled with one epoch ({n} elements, {_mib(written)} in "
                f"{len(files)} files {prefix}*) {took}; the files go when the run's dataset does")
    return cached, prefix, (note,)


def _own_cache_files(ds: tf.data.Dataset, prefix: Optional[str]) -> tf.data.Dataset:
    """Delete a run's cache files once its dataset (and so its iterator) is gone."""
    if prefix is not None:
        weakref.finalize(ds, _remove_cache_files, prefix)
    return ds


# -- the generic finish ----------------------------------------------------------------------------
def finish(source: Source, cfg: RunConfig, tuning: PipelineSettings = DEFAULT_TUNING, *, name: str = "",
           workload: Optional[Workload] = None) -> Tuple[tf.data.Dataset, Tuple[str, ...]]:
    """cache (filled now) -> shuffle -> repeat -> (augment) batch (augment) -> prefetch, as the knobs say.

    Returns:
        The batched, endlessly repeating dataset and notes (what the cache holds and cost).
        A disk cache's files are removed when the returned dataset is garbage-collected.
    """
    opts = options(cfg, tuning, workload)
    ds, prefix, notes = _cache(source.dataset, cfg, source.key, opts, name or cfg.workload)
    try:
        if cfg.shuffle_buffer:
            ds = ds.shuffle(cfg.shuffle_buffer, seed=cfg.seed, reshuffle_each_iteration=True)
        ds = ds.repeat()
        augment = source.augment
        if augment is None:
            ds = ds.batch(cfg.batch_size, drop_remainder=True)
        elif cfg.vectorized_map:
            ds = ds.batch(cfg.batch_size, drop_remainder=True)
            ds = ds.map(augment, **map_kwargs(cfg, tuning))
        else:
            ds = ds.map(augment, **map_kwargs(cfg, tuning))
            ds = ds.batch(cfg.batch_size, drop_remainder=True)
        if cfg.prefetch:
            ds = ds.prefetch(tuning.prefetch_buffer or AUTOTUNE)
        ds = ds.with_options(opts)
    except BaseException:
        if prefix is not None:
            _remove_cache_files(prefix)
        raise
    return _own_cache_files(ds, prefix), notes


def stage_in_memory(ds: tf.data.Dataset, batches: int = MEMORY_BATCHES) -> tf.data.Dataset:
    """The first ``batches`` batches of ``ds``, held in memory and repeated."""
    taken = list(ds.take(batches))
    xs = tf.stack([b[0] for b in taken])
    ys = tf.stack([b[1] for b in taken])
    return tf.data.Dataset.from_tensor_slices((xs, ys)).repeat().prefetch(AUTOTUNE)


# -- dispatch --------------------------------------------------------------------------------------
def make_source(cfg: RunConfig, workload: Workload, tuning: PipelineSettings = DEFAULT_TUNING) -> Source:
    """The workload's ``Source``: its ``source_fn``, or its ``data_fn``'s dataset as it is.

    Raises:
        ValueError: when ``data_fn`` returns something other than a ``tf.data.Dataset``.
    """
    if workload.source_fn is not None:
        return workload.source_fn(cfg, tuning)
    ds = workload.data_fn(cfg)
    if not isinstance(ds, tf.data.Dataset):
        raise ValueError(f"data_fn of workload {cfg.workload!r} returned {type(ds).__name__}; "
                         "it must return an unbatched tf.data.Dataset of (features, label)")
    if tuning.shard is not None:
        ds = ds.shard(*tuning.shard)           # no files to shard: elements
    return Source(ds, key=f"{cfg.workload}-{cfg.resolved_size}-{cfg.seed}")


def build_dataset(cfg: RunConfig, workload: Optional[Workload] = None, tuning: Optional[PipelineSettings] = None
                  ) -> Tuple[tf.data.Dataset, Tuple[str, ...]]:
    """The batched, repeating dataset for ``cfg`` and notes on what it did and did not apply.

    Args:
        cfg: the knobs.
        workload: the registered workload (default: ``get_workload(cfg.workload)``).
        tuning: settings below the knobs (``PipelineSettings``); ``None`` is what ``tfwb.run`` uses.

    A cache is filled here, before any step (see the module docstring); a disk
    cache (``cache="prefix"``) writes one file set per call, removed when the
    returned dataset is garbage-collected.

    Raises:
        ValueError: for a knob that cannot apply (a ``data_source`` the workload does
            not have, a cache of data that never ends), a negative storage latency or
            an unwritable cache path; the message names the field and what to pick instead.
        FileNotFoundError: if some generated images vanished from disk.
        OSError: if the images cannot be generated (the message names the folder).
    """
    workload = workload if workload is not None else get_workload(cfg.workload)
    tuning = tuning if tuning is not None else DEFAULT_TUNING
    workload.check(cfg)
    if isinstance(cfg.cache, str) and cfg.data_source != "memory":
        check_cache_path(cfg.cache)
    honoured = ", ".join(GENERIC_KNOBS + tuple(workload.source_knobs))
    notes: List[str] = [f"{knob} does not apply to workload {cfg.workload!r} (its data honours {honoured})"
                        for knob in workload.unused_knobs(cfg)]
    if cfg.data_source == "memory":
        fastest = {k: True for k in ("interleave", "parallel_map") if workload.applies(k)}
        staging = cfg.replace(cache=False, prefetch=True, **fastest)
        ds, _ = finish(make_source(staging, workload, tuning), staging, DEFAULT_TUNING, workload=workload)
        notes.append("data_source='memory': pipeline knobs do not apply (batches staged in memory)")
        return stage_in_memory(ds), tuple(notes)
    source = make_source(cfg, workload, tuning)
    ds, cache_notes = finish(source, cfg, tuning, workload=workload)
    return ds, tuple(notes) + source.notes + cache_notes


#: Names that moved in tfwb 0.3, served here with a DeprecationWarning until 0.4 (``tfwb.renamed.forward``).
__getattr__ = forward(__name__, {"Tuning": "tfwb.tf.runner.pipeline:PipelineSettings"})
