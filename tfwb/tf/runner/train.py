"""The runner: one RunConfig in, one measured RunResult out.

A custom training loop (GradientTape under the strategy's scope), because it is
what the seeds teach, it gives exact control over what is timed, and Keras 3
``fit`` fails under MultiWorkerMirroredStrategy. Each step is timed as::

    t0 -> next(iterator) -> t1 -> train step -> read loss + sync devices -> t2

so ``step_times_s`` is ``t2 - t0`` (the wait for data included), ``input_wait_s``
is ``t1 - t0``, and device work is finished when the clock stops. Warm-up steps
(tracing, XLA compilation, autotuning) are timed the same way and kept apart.

What happens around the steps is pluggable (``tfwb.observers``): the utilization
sampler, progress, and whatever the caller passes in ``observers`` (a target-loss
stop, a profiler window, TensorBoard scalars, a Stop button). This module only
orchestrates; the optimizer (``optimizers``), the step function (``step``), the
fingerprint (``fingerprint``) and the devices (``devices``) live in their own modules.

Global state: a run sets the Keras dtype policy and restores the previous one;
it seeds Python, NumPy and TF with ``cfg.seed`` (``keras.utils.set_random_seed``),
which stays set; before it touches TF's runtime it calls ``setup_devices()``, which
splits the CPU into logical devices when there is no GPU and the runtime has not
started yet (see ``tfwb.tf.runner.devices``). Importing this module changes nothing.
"""
from __future__ import annotations

import contextlib
import datetime
import math
import re
import time
import uuid
from dataclasses import dataclass, field
from typing import Callable, Iterator, List, Optional, Sequence

import keras
import tensorflow as tf

from tfwb.config import RunConfig
from tfwb.monitor import Sampler, default_probes
from tfwb.observers import Dispatch, Observer, Progress as ProgressObserver, RunState, StepLog
from tfwb.records import RunResult
from tfwb.workloads import get_workload
from tfwb.tf.runner.pipeline import build_dataset
from tfwb.tf.runner.quiet import native_stderr_captured
from tfwb.tf.runner.devices import device_sync, setup_devices
from tfwb.tf.runner.fingerprint import fingerprint
from tfwb.tf.runner.memory import MemoryPeak
from tfwb.tf.runner.optimizers import make_optimizer
from tfwb.tf.runner.step import make_step, per_example_loss, tracing_count
from tfwb.tf.runner.strategies import CLUSTER_STRATEGIES, coordinate, distribute, distribution_facts, in_worker, make_strategy, prepare

__all__ = ["run", "prepared", "timed_steps", "Prepared", "StepLog", "make_optimizer", "fingerprint"]

Progress = Callable[[int, int], None]


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


def timed_steps(p: Prepared, n: int, clock: Callable[[], float], log: StepLog,
                progress: Optional[Progress] = None, *, state: Optional[RunState] = None,
                dispatch: Optional[Dispatch] = None, first: int = 0) -> StepLog:
    """Run ``n`` calls of ``p``'s step, timing each: fetch, step, read the loss, sync devices.

    This is all the instrumentation a step gets; ``benchmarks/overhead.py`` measures
    its cost against a bare loop over the same ``Prepared``. Observers' step hooks run
    outside the timed region; a stop they request ends the loop after the step.

    Args:
        p: the built setup.
        n: calls to run.
        clock: seconds on the run's clock.
        log: appended to, call by call.
        progress: ``progress(done, n)`` after each call (no observers needed).
        state, dispatch: the run's observers (``tfwb.run`` passes them).
        first: index of the first call (observers see ``first + i``).
    """
    sync = device_sync()
    norms = p.cfg.grad_norms
    begin = dispatch.on_step_begin if dispatch is not None else ()
    end = dispatch.on_step_end if dispatch is not None else ()
    for i in range(n):
        step = first + i
        for hook in begin:
            hook(state, step)
        t0 = clock()
        if p.takes_iterator:
            t1 = t0
            out = p.step(p.iterator)
        else:
            x, y = p.fetch()
            t1 = clock()
            out = p.step(x, y)
        loss_value = float(out["loss"] if norms else out)
        sync()
        t2 = clock()
        log.starts_s.append(t0)
        log.times_s.append(t2 - t0)
        if not p.takes_iterator:
            log.waits_s.append(t1 - t0)
        log.losses.append(loss_value)
        if norms:
            log.grad_norms.append(float(out["grad_norm"]))
            log.loss_scales.append(float(out["loss_scale"]))
        for hook in end:
            hook(state, step)
        if progress is not None:
            progress(i + 1, n)
        if not math.isfinite(loss_value) and state is not None:
            state.diverged_at = step              # a NaN/inf loss: nothing after it means anything
            break
        if state is not None and state.stop_reason is not None:
            break
    return log


@contextlib.contextmanager
def prepared(cfg: RunConfig, dataset: Optional[tf.data.Dataset] = None) -> Iterator[Prepared]:
    """Build strategy, data, model, optimizer and step for ``cfg``; restore the dtype policy on exit.

    ``dataset`` (batches of ``cfg.batch_size``) replaces the pipeline ``cfg``'s knobs
    would build, for variants a RunConfig cannot express (``tfwb.tf.runner.pipeline.Tuning``).

    Raises:
        ValueError: for a knob this machine or workload cannot honour.
    """
    previous_policy = keras.mixed_precision.global_policy()
    try:
        prepare(cfg)           # a worker's multi-worker strategy: before TF's runtime starts
        setup_devices()        # before anything starts TF's runtime; a no-op afterwards
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
        loss_fn = per_example_loss(workload.loss)
        step, takes_iterator = make_step(cfg, strategy, model, optimizer, loss_fn, cfg.batch_size)
        if strategy is not tf.distribute.get_strategy():
            dataset, distribution_notes = distribute(strategy, dataset, cfg)   # auto-shard policy chosen there
            notes.extend(distribution_notes)
            step, takes_iterator = coordinate(strategy, step, takes_iterator)   # parameter_server: on a worker
        if takes_iterator and cfg.steps_per_execution > 1:
            notes.append(f"steps_per_execution={cfg.steps_per_execution}: batches are fetched inside "
                         "the graph, so input wait cannot be told apart (not recorded)")
        yield Prepared(cfg, strategy, model, optimizer, step, iter(dataset), takes_iterator, notes)
    finally:
        keras.mixed_precision.set_global_policy(previous_policy)


def run(cfg: RunConfig, *, progress: Optional[Progress] = None, raise_errors: bool = False,
        dataset: Optional[tf.data.Dataset] = None, observers: Sequence[Observer] = ()) -> RunResult:
    """Train ``cfg.workload`` for ``warmup_steps + steps`` steps and measure each one.

    Args:
        cfg: the knobs.
        progress: called as ``progress(steps_done, steps_total)`` after every step
            (warm-up included), on the training thread.
        raise_errors: re-raise a failure instead of returning a failed result.
        dataset: batches to train on instead of the pipeline ``cfg`` describes
            (the pipeline knobs are then only labels; a note says so).
        observers: ``tfwb.observers.Observer``s called around the run and each step,
            after the built-in utilization sampler (e.g. ``StopAtLoss(0.5)``,
            ``tfwb.tf.lab.profiler.ProfileWindow(dir)``, ``tfwb.tf.lab.tensorboard.Scalars(dir)``).

    Returns:
        A RunResult. A failure (bad knob for this hardware, out of memory, an error
        in user code) returns ``status="failed"`` with the message and the steps
        measured so far; Ctrl-C / kernel interrupt returns ``status="interrupted"``
        with the steps it finished; an observer's stop gives ``status="ok"`` with
        ``stop_reason`` set. The dtype policy is restored either way.

    Example:
        >>> result = run(RunConfig(steps=10, prefetch=True))   # doctest: +SKIP
        >>> print(result.summary())                           # doctest: +SKIP
    """
    if not isinstance(cfg, RunConfig):
        raise TypeError(f"run() needs a RunConfig, got {type(cfg).__name__}")
    if cfg.strategy in CLUSTER_STRATEGIES and not in_worker():
        # Not a worker of a cluster: start a local one (one process per worker) and gather it.
        from tfwb.tf.cluster.parent import run_local_cluster

        return run_local_cluster(cfg, progress=progress, raise_errors=raise_errors, dataset=dataset,
                                 observers=observers)
    started_at = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    t_origin = time.perf_counter()

    def clock() -> float:
        return time.perf_counter() - t_origin

    log = StepLog()
    spe = cfg.steps_per_execution
    warmup_calls, calls = cfg.calls
    state = RunState(config=cfg, log=log, clock=clock, total_steps=(warmup_calls + calls) * spe,
                     warmup_steps=warmup_calls * spe, steps_per_call=spe)
    if spe > 1 and (warmup_calls * spe, calls * spe) != (cfg.warmup_steps, cfg.steps):
        state.notes.append(f"steps_per_execution={spe}: warm-up {cfg.warmup_steps} -> {warmup_calls * spe} "
                           f"and measured {cfg.steps} -> {calls * spe} steps, rounded up to whole calls")
    sampler = Sampler(interval_s=cfg.sample_interval_s, probes=default_probes(), clock=clock)
    extra = [ProgressObserver(progress)] if progress is not None else []
    dispatch = Dispatch([sampler, MemoryPeak(), *extra, *observers])   # the sampler first: the others read its samples
    facts = {"error": None, "setup_s": 0.0, "fp": {}, "traces": None, "traces_warm": None, "replicas": None}
    started = False
    # TF's C++ code writes to stderr directly (oneDNN's fallbacks, ...): held back here and
    # kept as notes on the result, so a notebook cell shows the run, not TF's log lines.
    with native_stderr_captured() as native:
        try:
            prepare(cfg)                          # a worker's multi-worker strategy comes first
            setup_devices()                       # before anything starts TF's runtime (see devices.py)
            sampler.start()                       # from the start: setup shows on the utilization chart
            facts["fp"] = fingerprint(cfg)        # so a run that fails in setup still says where it ran
            with prepared(cfg, dataset) as p:
                state.notes.extend(p.notes)
                state.model = p.model             # for observers that evaluate it (held-out loss)
                facts["fp"] = fingerprint(cfg, p.strategy)
                facts["replicas"] = p.strategy.num_replicas_in_sync
                state.extras["distribution"] = distribution_facts(cfg, p.strategy)
                facts["setup_s"] = clock()
                started = True
                dispatch.call("on_run_start", state)
                timed_steps(p, warmup_calls, clock, log, state=state, dispatch=dispatch)
                facts["traces_warm"] = tracing_count(p.step)
                dispatch.call("on_warmup_end", state)
                if state.stop_reason is None and state.diverged_at is None:
                    timed_steps(p, calls, clock, log, state=state, dispatch=dispatch, first=len(log.times_s))
                facts["traces"] = tracing_count(p.step)
            state.status = "ok"
            if state.diverged_at is not None:
                state.status = "diverged"
                facts["error"] = (f"the loss became {log.losses[-1]} at step {(state.diverged_at + 1) * spe} "
                                  f"(warm-up included): the run diverged; lower learning_rate "
                                  f"(now {cfg.learning_rate:g}) or clip the gradients (clip='global_norm:1.0')")
        except KeyboardInterrupt:
            state.status, facts["error"] = "interrupted", "interrupted by the user"
        except Exception as e:  # noqa: BLE001 - every failure becomes a failed result
            state.status, facts["error"] = "failed", _describe(e, cfg)
            if raise_errors:
                _end(dispatch, state, sampler, started)
                raise
    state.notes.extend(_native_notes(native))
    _end(dispatch, state, sampler, started)
    times = [t / spe for t in log.times_s]          # per training step, whatever the call ran
    waits, starts, losses = log.waits_s, log.starts_s, log.losses
    w = min(warmup_calls, len(times))
    traces, warm = facts["traces"], facts["traces_warm"]
    after = traces - warm if traces is not None and warm is not None else None
    if after:
        state.notes.append(f"the step function was traced {after} more time(s) after warm-up (retracing: "
                           "new input shapes or dtypes, or a Python value passed as an argument)")
    return RunResult(
        config=cfg, status=state.status, error=facts["error"],
        warmup_times_s=times[:w], warmup_input_wait_s=waits[:w], warmup_start_s=starts[:w],
        warmup_losses=losses[:w],
        step_times_s=times[w:], input_wait_s=waits[w:], step_start_s=starts[w:], losses=losses[w:],
        samples=state.samples, examples_per_step=cfg.batch_size, setup_s=facts["setup_s"],
        fingerprint=facts["fp"], started_at=started_at, run_id=uuid.uuid4().hex[:12],
        notes=tuple(state.notes), stop_reason=state.stop_reason, extras=state.extras,
        steps_per_call=spe, traces=traces, traces_after_warmup=after,
        grad_norms=log.grad_norms, loss_scales=log.loss_scales, replicas=facts["replicas"],
    )


def _end(dispatch: Dispatch, state: RunState, sampler: Sampler, started: bool) -> None:
    """Call ``on_run_end`` (the sampler's always; the others' when ``on_run_start`` ran).

    An observer that fails here adds a note instead of hiding the run's own result.
    """
    for hook in dispatch.on_run_end:
        if not started and getattr(hook, "__self__", None) is not sampler:
            continue
        try:
            hook(state)
        except Exception as e:  # noqa: BLE001
            state.notes.append(f"observer {type(getattr(hook, '__self__', hook)).__name__} failed at "
                               f"the end of the run: {type(e).__name__}: {e}")


_TF_LOG_LINE = re.compile(r"^[IWEF]\d{4} [\d:. ]+\d+ [\w./-]+:\d+\] (?P<message>.*)$")


def _native_notes(held) -> List[str]:
    """TF's C++ log lines held back during a run, as notes (each once); anything else goes to stderr."""
    notes: List[str] = []
    for line in held.text.splitlines():
        m = _TF_LOG_LINE.match(line.strip())
        if m:
            note = "TensorFlow: " + m.group("message").strip()
            if note not in notes:
                notes.append(note)
    held.replay(drop=lambda line: bool(_TF_LOG_LINE.match(line.strip()))
                or line.startswith("WARNING: All log messages before absl::InitializeLog()"))
    return notes


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
