"""The runner: one RunConfig in, one measured RunResult out.

A custom training loop (GradientTape under the strategy's scope), because it is
what the seeds teach, it gives exact control over what is timed, and Keras 3
``fit`` fails under MultiWorkerMirroredStrategy. Each step is timed as::

    t0 -> next(iterator) -> t1 -> train step -> read loss + sync devices -> t2

so ``step_times_s`` is ``t2 - t0`` (the wait for data included), ``input_wait_s``
is ``t1 - t0``, and device work is finished when the clock stops. Warm-up steps
(tracing, XLA compilation, autotuning) are timed the same way and kept apart.

Global state: a run sets the Keras dtype policy and restores the previous one;
it seeds Python, NumPy and TF with ``cfg.seed`` (``keras.utils.set_random_seed``),
which stays set; importing this module splits the CPU into logical devices when
there is no GPU (see ``strategies``).
"""
from __future__ import annotations

import contextlib
import datetime
import platform
import re
import time
import uuid
from dataclasses import dataclass, field
from typing import Callable, Iterator, List, Optional

import keras
import tensorflow as tf

from ..config import RunConfig
from ..monitor import Sampler, default_probes
from ..records import RunResult
from ..workloads import get_workload
from .data import build_dataset
from .strategies import ensure_cpu_replicas, make_strategy

ensure_cpu_replicas()

Progress = Callable[[int, int], None]


def make_optimizer(cfg: RunConfig) -> keras.optimizers.Optimizer:
    """The optimizer ``cfg`` names, with its clipping, wrapped for loss scaling under float16."""
    clip = {}
    if cfg.clip_spec:
        kind, value = cfg.clip_spec
        clip = {"norm": {"clipnorm": value}, "global_norm": {"global_clipnorm": value},
                "value": {"clipvalue": value}}[kind]
    lr = cfg.learning_rate
    opt = {
        "sgd": lambda: keras.optimizers.SGD(lr, **clip),
        "momentum": lambda: keras.optimizers.SGD(lr, momentum=0.9, **clip),
        "adam": lambda: keras.optimizers.Adam(lr, **clip),
        "adamw": lambda: keras.optimizers.AdamW(lr, **clip),
        "rmsprop": lambda: keras.optimizers.RMSprop(lr, **clip),
        "nadam": lambda: keras.optimizers.Nadam(lr, **clip),
    }[cfg.optimizer]()
    if cfg.mixed_precision == "mixed_float16":
        # Keras 3: scale_loss() + apply_gradients (which unscales and skips
        # non-finite steps); get_scaled_loss is Keras 2 API and is gone.
        opt = keras.mixed_precision.LossScaleOptimizer(opt)
    return opt


def _per_example_loss(loss):
    if loss is None:
        return keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction=None)
    if isinstance(loss, keras.losses.Loss):
        return loss.call  # unreduced per-example values
    return loss


def _make_step(cfg: RunConfig, strategy, model, optimizer, loss_fn, global_batch: int):
    scaled = isinstance(optimizer, keras.mixed_precision.LossScaleOptimizer)
    replicas = strategy.num_replicas_in_sync

    def replica_step(x, y):
        with tf.GradientTape() as tape:
            logits = model(x, training=True)
            per_example = tf.cast(loss_fn(y, logits), tf.float32)
            if per_example.shape.rank == 0:          # a loss that already averages
                loss = per_example / replicas
            else:
                loss = tf.nn.compute_average_loss(per_example, global_batch_size=global_batch)
            if model.losses:
                loss += tf.nn.scale_regularization_loss(tf.add_n(model.losses))
            to_differentiate = optimizer.scale_loss(loss) if scaled else loss
        grads = tape.gradient(to_differentiate, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    def one_step(x, y):
        per_replica = strategy.run(replica_step, args=(x, y))
        return strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica, axis=None)

    if cfg.steps_per_execution == 1:
        return tf.function(one_step, jit_compile=cfg.jit_compile or None), False

    def many_steps(iterator):
        loss = tf.constant(0.0)
        for _ in tf.range(cfg.steps_per_execution):
            x, y = next(iterator)
            loss = one_step(x, y)
        return loss

    return tf.function(many_steps, jit_compile=cfg.jit_compile or None), True


def fingerprint(cfg: RunConfig, strategy=None) -> dict:
    """Versions, devices and machine a run used."""
    from .. import hardware

    gpus = []
    for d in tf.config.list_physical_devices("GPU"):
        details = tf.config.experimental.get_device_details(d)
        cc = details.get("compute_capability")
        gpus.append({"name": details.get("device_name", d.name),
                     "compute_capability": list(cc) if cc else None})
    hw = hardware.detect()
    return {
        "tensorflow": tf.__version__, "keras": keras.__version__,
        "python": platform.python_version(), "platform": platform.platform(),
        "cpu_model": hw.get("cpu_model"), "cpu_count": hw.get("cpu_count"),
        "environment": hw.get("environment"), "gpus": gpus,
        "logical_devices": [d.name for d in tf.config.list_logical_devices()],
        "replicas": strategy.num_replicas_in_sync if strategy is not None else None,
        "size": cfg.resolved_size,              # "auto" resolved: small under TFWB_FAST=1
        "config": cfg.to_dict(),
    }


def _sync() -> None:
    tf.test.experimental.sync_devices()


@dataclass
class Prepared:
    """A built training setup: the pieces a timed loop (or a bare one) drives.

    ``advance()`` runs one train step (``steps_per_execution`` steps when
    ``takes_iterator``) and returns the loss tensor, without timing or syncing.
    """

    cfg: RunConfig
    strategy: tf.distribute.Strategy
    model: keras.Model
    optimizer: keras.optimizers.Optimizer
    step: Callable
    iterator: object
    takes_iterator: bool
    notes: List[str] = field(default_factory=list)

    def fetch(self):
        return next(self.iterator)

    def advance(self):
        if self.takes_iterator:
            return self.step(self.iterator)
        x, y = next(self.iterator)
        return self.step(x, y)


@dataclass
class StepLog:
    """What ``timed_steps`` appends to, step by step (kept when a step fails)."""

    times_s: List[float] = field(default_factory=list)
    waits_s: List[float] = field(default_factory=list)
    starts_s: List[float] = field(default_factory=list)
    losses: List[float] = field(default_factory=list)


def timed_steps(p: Prepared, n: int, clock: Callable[[], float], log: StepLog,
                progress: Optional[Progress] = None) -> StepLog:
    """Run ``n`` steps of ``p``, timing each: fetch, step, read the loss, sync devices.

    This is all the instrumentation a step gets; ``benchmarks/overhead.py`` measures
    its cost against a bare loop over the same ``Prepared``.
    """
    for i in range(n):
        t0 = clock()
        if p.takes_iterator:
            t1 = t0
            loss = p.step(p.iterator)
        else:
            x, y = p.fetch()
            t1 = clock()
            loss = p.step(x, y)
        loss_value = float(loss)
        _sync()
        t2 = clock()
        log.starts_s.append(t0)
        log.times_s.append(t2 - t0)
        if not p.takes_iterator:
            log.waits_s.append(t1 - t0)
        log.losses.append(loss_value)
        if progress is not None:
            progress(i + 1, n)
    return log


@contextlib.contextmanager
def prepared(cfg: RunConfig, dataset: Optional[tf.data.Dataset] = None) -> Iterator[Prepared]:
    """Build strategy, data, model, optimizer and step for ``cfg``; restore the dtype policy on exit.

    ``dataset`` (batches of ``cfg.batch_size``) replaces the pipeline ``cfg``'s knobs
    would build, for variants a RunConfig cannot express (``tfwb.tf.data.Tuning``).

    Raises:
        ValueError: for a knob this machine or workload cannot honour.
    """
    previous_policy = keras.mixed_precision.global_policy()
    try:
        workload = get_workload(cfg.workload)
        keras.utils.set_random_seed(cfg.seed)
        strategy = make_strategy(cfg)
        if cfg.batch_size % strategy.num_replicas_in_sync:
            raise ValueError(f"batch_size={cfg.batch_size} must be a multiple of the "
                             f"{strategy.num_replicas_in_sync} replicas of strategy={cfg.strategy!r}")
        keras.mixed_precision.set_global_policy(
            "float32" if cfg.mixed_precision == "off" else cfg.mixed_precision)
        if dataset is None:
            dataset, data_notes = build_dataset(cfg, workload)
            notes = list(data_notes)
        else:
            notes = ["data: a dataset given to run(), not built from the pipeline knobs"]
        with strategy.scope():
            model = workload.model_fn(cfg)
            optimizer = make_optimizer(cfg)
            # Create slot variables now, under the scope: created lazily inside
            # strategy.run they break MirroredStrategy.
            optimizer.build(model.trainable_variables)
        loss_fn = _per_example_loss(workload.loss)
        step, takes_iterator = _make_step(cfg, strategy, model, optimizer, loss_fn, cfg.batch_size)
        if strategy is not tf.distribute.get_strategy():
            dataset = strategy.experimental_distribute_dataset(dataset)
            notes.append(f"strategy={cfg.strategy!r}: the distributed dataset prefetches to each "
                         "replica's device, whatever the prefetch knob says")
        if takes_iterator:
            notes.append(f"steps_per_execution={cfg.steps_per_execution}: batches are fetched inside "
                         "the graph, so input wait cannot be told apart (not recorded)")
        yield Prepared(cfg, strategy, model, optimizer, step, iter(dataset), takes_iterator, notes)
    finally:
        keras.mixed_precision.set_global_policy(previous_policy)


def run(cfg: RunConfig, *, progress: Optional[Progress] = None, raise_errors: bool = False,
        dataset: Optional[tf.data.Dataset] = None) -> RunResult:
    """Train ``cfg.workload`` for ``warmup_steps + steps`` steps and measure each one.

    Args:
        cfg: the knobs.
        progress: called as ``progress(steps_done, steps_total)`` after every step
            (warm-up included), on the training thread.
        raise_errors: re-raise a failure instead of returning a failed result.
        dataset: batches to train on instead of the pipeline ``cfg`` describes
            (the pipeline knobs are then only labels; a note says so).

    Returns:
        A RunResult. A failure (bad knob for this hardware, out of memory, an error
        in user code) returns ``status="failed"`` with the message and the steps
        measured so far; Ctrl-C / kernel interrupt returns ``status="interrupted"``.
        The dtype policy is restored either way.

    Example:
        >>> result = run(RunConfig(steps=10, prefetch=True))   # doctest: +SKIP
        >>> print(result.summary())                           # doctest: +SKIP
    """
    if not isinstance(cfg, RunConfig):
        raise TypeError(f"run() needs a RunConfig, got {type(cfg).__name__}")
    started_at = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    t_origin = time.perf_counter()

    def clock() -> float:
        return time.perf_counter() - t_origin

    log = StepLog()
    notes: List[str] = []
    state = {"status": "ok", "error": None, "setup_s": 0.0, "fp": {}, "examples": 0}
    sampler = Sampler(interval_s=cfg.sample_interval_s, probes=default_probes(), clock=clock)
    total = cfg.warmup_steps + cfg.steps
    try:
        sampler.start()
        state["fp"] = fingerprint(cfg)       # so a run that fails in setup still says where it ran
        with prepared(cfg, dataset) as p:
            notes.extend(p.notes)
            state["fp"] = fingerprint(cfg, p.strategy)
            state["examples"] = cfg.batch_size * cfg.steps_per_execution
            state["setup_s"] = clock()
            timed_steps(p, total, clock, log, progress)
    except KeyboardInterrupt:
        state["status"], state["error"] = "interrupted", "interrupted by the user"
    except Exception as e:  # noqa: BLE001 - every failure becomes a failed result
        if raise_errors:
            sampler.stop()
            raise
        state["status"], state["error"] = "failed", _describe(e, cfg)
    finally:
        sampler.stop()
    times, waits, starts, losses = log.times_s, log.waits_s, log.starts_s, log.losses
    w = min(cfg.warmup_steps, len(times))
    return RunResult(
        config=cfg, status=state["status"], error=state["error"],
        warmup_times_s=times[:w], warmup_input_wait_s=waits[:w], warmup_start_s=starts[:w],
        warmup_losses=losses[:w],
        step_times_s=times[w:], input_wait_s=waits[w:], step_start_s=starts[w:], losses=losses[w:],
        samples=sampler.samples, examples_per_step=state["examples"], setup_s=state["setup_s"],
        fingerprint=state["fp"], started_at=started_at, run_id=uuid.uuid4().hex[:12],
        notes=tuple(notes) + tuple(f"sampler: {e}" for e in sampler.errors[:3]),
    )


_TF_NOISE = re.compile(r"^(Graph execution error:|Detected at node|\s*File |\s*\[\[|\s*$|\d+ root error|"
                       r"\s*\(\d+\) |0 successful operations|\d+ derived errors)")


def _describe(e: BaseException, cfg: RunConfig) -> str:
    """One line: the exception type and its real cause, plus advice where there is some.

    TF op errors start with "Graph execution error:" and a traceback of graph
    nodes; the cause is the last line that is not part of that frame.
    """
    text = str(e).strip()
    lines = text.splitlines() or [""]
    if isinstance(e, tf.errors.OpError):
        kept = [ln.strip() for ln in lines if not _TF_NOISE.match(ln)]
        lines = kept[-1:] or lines[:1]
    msg = f"{type(e).__name__}: {lines[0]}"
    if isinstance(e, tf.errors.ResourceExhaustedError):
        msg += f" (out of memory: try a smaller batch_size than {cfg.batch_size})"
    if isinstance(e, tf.errors.NotFoundError):
        msg += " (a data file is missing: if the data folder was deleted, run again to regenerate it)"
    return msg
