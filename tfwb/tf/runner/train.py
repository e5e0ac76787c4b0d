"""The single-process runner: one RunConfig in, one measured RunResult out (``run_process``).

``tfwb.run`` (``tfwb.tf.run``) picks this runner, or the local cluster for a cluster
strategy; like every runner it is called as ``run_process(cfg, observers)``. The
observers' lifecycle and the step log -> RunResult conversion are ``tfwb.lifecycle``'s,
shared with the cluster.

A custom training loop (GradientTape under the strategy's scope), because it is
what the seeds teach, it gives exact control over what is timed, and Keras 3
``fit`` fails under MultiWorkerMirroredStrategy. How steps are timed is the
``timing`` knob (``timed_steps``; the loops and the window logic are ``tfwb.timing``'s):

- ``"windowed"`` (default): steps run back to back, as training runs them, and each
  step's host side is timed as ``t0 -> next(iterator) -> t1 -> dispatch -> t2``; a
  window of steps (until ``WINDOW_S`` of host time has passed) ends with one loss read
  and device sync. Each step's figure is its host time scaled so that the window's steps
  add up to the window's synced wall time (observers' hooks excluded). On a CPU, where a
  step's kernels finish before the call returns, that is the step's own time; on a GPU
  the host runs ahead while the device works, and the window's sync charges the device's
  time to the steps that caused it, so the figures add up to the throughput training gets.
- ``"per_step"``: ``t0 -> next(iterator) -> t1 -> step -> read loss + sync -> t2`` for
  every step: each step's own latency; on a GPU host and device take turns, so the
  throughput this reads is lower than training's.

Observers' hooks run between steps and are left out of a window's time, as they are
left out of a step's in per-step timing. On a GPU a hook that waits for the device (an
evaluation of the model) inside a window lets queued steps finish during the hook, and
that device time is then missing from the window: such an observer should do its work
where a window closes (when ``len(run.log.losses)`` has grown), or the run should use
``timing="per_step"``.

Either way ``step_times_s`` is the step's time with its wait for data included and
``input_wait_s`` is ``t1 - t0``, timed on the host for every step. Warm-up steps
(tracing, XLA compilation, autotuning) are timed the same way and kept apart. When the
configured warm-up's steps are still speeding up, more warm-up calls run until they settle
(``extend_warmup``, capped; ``can_extend`` says where not), and the result records how many
(``RunResult.warmup_extra_steps``).

What happens around the steps is pluggable (``tfwb.observers``): the utilization
sampler, progress, and whatever the caller passes in ``observers`` (a target-loss
stop, a profiler window, TensorBoard scalars, a Stop button). This module only
orchestrates; the optimizer (``optimizers``), the step function (``train_step``), the
fingerprint (``fingerprint``) and the devices (``devices``) live in their own modules.

How far from the limit: once per run, after its steps (nothing runs in the step loop),
``tfwb.tf.runner.step_limits.measure_limits`` counts the model's FLOPs and reads this machine's
peaks; the RunResult is built once, with that record as its ``limits``.

Global state: a run sets the Keras dtype policy and restores the previous one;
it seeds Python, NumPy and TF with ``cfg.seed`` (``keras.utils.set_random_seed``),
which stays set; before it touches TF's runtime it calls ``setup_devices()``, which
splits the CPU into logical devices when there is no GPU and the runtime has not
started yet (see ``tfwb.tf.runner.devices``). Importing this module changes nothing.
"""
from __future__ import annotations

import contextlib
import dataclasses
import re
import time
from dataclasses import dataclass, field
from typing import Callable, Iterator, List, Optional, Sequence

import keras
import tensorflow as tf

from tfwb import stats, timing, warmup
from tfwb.timing import WINDOW_S  # noqa: F401 - part of this module's names (__all__)
from tfwb.config import RunConfig
from tfwb.lifecycle import Lifecycle, run_clock
from tfwb.utilization import Sampler, default_probes, start_delay_probe, start_load_probe
from tfwb.observers import Dispatch, Observer, RunState, StepLog, StopAtLoss
from tfwb.records import RunResult
from tfwb.workloads import Workload, get_workload
from tfwb.tf.runner.pipeline import build_dataset
from tfwb.tf.runner.quiet import TF_LOG_LINE, is_tf_log, native_stderr_captured
from tfwb.tf.runner.devices import device_sync, setup_devices
from tfwb.tf.runner.fingerprint import fingerprint
from tfwb.tf.runner.step_limits import measure_limits
from tfwb.tf.runner.memory import MemoryPeak
from tfwb.tf.runner.optimizers import make_optimizer
from tfwb.tf.runner.train_step import make_step, per_example_loss, tracing_count
from tfwb.tf.runner.strategies import CLUSTER_STRATEGIES, coordinate, distribute, distribution_facts, in_worker, make_strategy, prepare
from tfwb.renamed import forward

__all__ = ["run_process", "prepared", "timed_steps", "input_floor_s", "Prepared", "StepLog", "make_optimizer",
           "fingerprint", "WINDOW_S"]

#: ``next()`` calls timed on a second iterator over staged batches (``input_floor_s``).
FLOOR_CALLS = 21


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
    #: ``data_source="memory"``: a second iterator over the same staged batches, on which
    #: ``input_floor_s`` times ``next()`` alone (``None`` for other sources).
    floor_iterator: Optional[object] = None

    def fetch(self):
        return next(self.iterator)

    def advance(self):
        if self.takes_iterator:
            return self.step(self.iterator)
        x, y = next(self.iterator)
        return self.step(x, y)


def timed_steps(p: Prepared, n: int, clock: Callable[[], float], log: StepLog, *,
                state: Optional[RunState] = None, dispatch: Optional[Dispatch] = None,
                first: int = 0, sync: Optional[Callable[[], None]] = None,
                window_s: float = timing.WINDOW_S) -> StepLog:
    """Run ``n`` calls of ``p``'s step, timed as ``p.cfg.timing`` says (see the module docstring).

    This is all the instrumentation a step gets; ``benchmarks/overhead.py`` measures
    its cost against a bare loop over the same ``Prepared``. Observers' step hooks run
    outside the timed region; a stop they request ends the loop after the step (windowed:
    after its window is closed). A loss that is not finite ends the run at that call
    (windowed: the calls after it in its window are dropped from the log).

    Args:
        p: the built setup (``cfg``, ``step``, ``iterator``, ``fetch``, ``takes_iterator``).
        n: calls to run.
        clock: seconds on the run's clock.
        log: appended to, call by call.
        state, dispatch: the run's observers (``run_process`` passes its lifecycle's).
        first: index of the first call (observers see ``first + i``).
        sync: waits until the devices are idle; default ``device_sync()`` (a no-op on a
            machine without GPU or TPU, where the loss read already waits).
        window_s: windowed timing: host seconds after which a window closes.

    Returns:
        ``log``.

    Raises:
        Whatever a step, a fetch or an observer raises; with windowed timing the open
        window is closed first (synced, its losses read) or, when that fails too, its
        unsynced calls are dropped from the log.
    """
    if sync is None:
        sync = device_sync()
    kw = dict(sync=sync, state=state, dispatch=dispatch, first=first, grad_norms=p.cfg.grad_norms)
    if p.cfg.timing == "per_step":
        return timing.per_step_loop(p, n, clock, log, **kw)
    return timing.windowed_loop(p, n, clock, log, read=_read, window_s=window_s, **kw)


def _read(values: list) -> List[float]:
    """Scalar outputs as floats: on an accelerator with one device-to-host copy (``tf.stack``), not one each.

    On the CPU each read is a cheap host access, and ``tf.stack`` of many eager tensors
    costs more than reading them one by one (25 us against under 1 us per value here).
    """
    if len(values) > 1 and isinstance(values[0], tf.Tensor) and ":CPU:" not in values[0].device:
        try:
            return tf.stack(values).numpy().tolist()
        except (TypeError, ValueError, tf.errors.InvalidArgumentError):
            pass                                   # mixed shapes or dtypes: read them one by one
    return [float(v) for v in values]


def input_floor_s(p: Prepared, calls: int = FLOOR_CALLS,
                  clock: Callable[[], float] = time.perf_counter) -> Optional[float]:
    """The median time of ``next()`` on staged batches: the input wait no pipeline can avoid.

    With ``data_source="memory"`` every batch is already in memory, so what a step waits
    for input is the iterator's own fixed cost (Python, tf.data's ``GetNext``, a
    distributed iterator's per-replica split). This times it on ``p.floor_iterator``, a
    second iterator over the same batches, so the training data's order is untouched.

    Returns:
        Seconds, or ``None`` when ``p`` has no floor iterator (other data sources).
    """
    it = p.floor_iterator
    if it is None:
        return None
    next(it)                                   # the first call starts the iterator
    times = []
    for _ in range(calls):
        t0 = clock()
        next(it)
        times.append(clock() - t0)
    return stats.median(times)


def set_up(cfg: RunConfig) -> Workload:
    """What must happen once per run before TF's runtime starts; returns the workload.

    A worker's multi-worker strategy first (``prepare``), then ``setup_devices()`` (a
    no-op once the runtime runs), then the workload, looked up by name once.

    Raises:
        ValueError: for a workload that is not registered.
    """
    prepare(cfg)
    setup_devices()
    return get_workload(cfg.workload)


@contextlib.contextmanager
def prepared(cfg: RunConfig, dataset: Optional[tf.data.Dataset] = None, *,
             workload: Optional[Workload] = None) -> Iterator[Prepared]:
    """Build strategy, data, model, optimizer and step for ``cfg``; restore the dtype policy on exit.

    Args:
        cfg: the knobs.
        dataset: batches of ``cfg.batch_size`` that replace the pipeline ``cfg``'s knobs
            would build, for variants a RunConfig cannot express (``tfwb.tf.runner.pipeline.PipelineSettings``).
        workload: ``set_up(cfg)``'s result when the caller already ran it (``run_process``
            does); ``None`` runs it here.

    Raises:
        ValueError: for a knob this machine or workload cannot honour.
    """
    previous_policy = keras.mixed_precision.global_policy()
    previous_tf32 = tf.config.experimental.tensor_float_32_execution_enabled()
    tf.config.experimental.enable_tensor_float_32_execution(cfg.tf32)   # TF32 on Ampere+ GPUs; no effect elsewhere
    try:
        if workload is None:
            workload = set_up(cfg)
        keras.utils.set_random_seed(cfg.seed)
        strategy = make_strategy(cfg)
        if cfg.batch_size % strategy.num_replicas_in_sync:
            raise ValueError(f"batch_size={cfg.batch_size} must be a multiple of the "
                             f"{strategy.num_replicas_in_sync} replicas of strategy={cfg.strategy!r}")
        keras.mixed_precision.set_global_policy(
            "float32" if cfg.mixed_precision == "off" else cfg.mixed_precision)
        staged = dataset is None and cfg.data_source == "memory"
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
        floor = iter(dataset) if staged and not takes_iterator else None
        yield Prepared(cfg, strategy, model, optimizer, step, iter(dataset), takes_iterator, notes, floor)
    finally:
        keras.mixed_precision.set_global_policy(previous_policy)
        tf.config.experimental.enable_tensor_float_32_execution(previous_tf32)


def run_process(cfg: RunConfig, observers: Sequence[Observer] = (), *, raise_errors: bool = False,
                dataset: Optional[tf.data.Dataset] = None) -> RunResult:
    """Train ``cfg.workload`` in this process for ``warmup_steps + steps`` steps and measure each one.

    The single-process runner (``tfwb.run`` picks it for every strategy but a local
    cluster's, and inside a cluster's worker).

    Args:
        cfg: the knobs.
        observers: ``tfwb.observers.Observer``s called around the run and each step,
            after the built-in utilization sampler and memory peak (e.g.
            ``Progress(callback)``, ``StopFlag()``, ``StopAtLoss(0.5)``,
            ``tfwb.tf.lab.profiler.ProfileWindow(dir)``).
        raise_errors: re-raise a failure instead of returning a failed result.
        dataset: batches to train on instead of the pipeline ``cfg`` describes
            (the pipeline knobs are then only labels; a note says so).

    Returns:
        A RunResult. A failure (bad knob for this hardware, out of memory, an error
        in user code) returns ``status="failed"`` with the message and the steps
        measured so far; a stop requested with ``interrupted=True`` (Stop button,
        kernel interrupt) or a KeyboardInterrupt returns ``status="interrupted"`` with
        the steps it finished; any other observer's stop gives ``status="ok"`` with
        ``stop_reason`` set. The dtype policy is restored either way.

    Raises:
        TypeError: for a ``cfg`` that is not a RunConfig.
        ValueError: for a cluster strategy outside a cluster's worker (``tfwb.run``
            starts a local cluster for it).

    Example:
        >>> result = run_process(RunConfig(steps=10, prefetch=True))   # doctest: +SKIP
        >>> print(result.summary())                                   # doctest: +SKIP
    """
    if not isinstance(cfg, RunConfig):
        raise TypeError(f"run() needs a RunConfig, got {type(cfg).__name__}")
    if cfg.strategy in CLUSTER_STRATEGIES and not in_worker():
        raise ValueError(f"strategy={cfg.strategy!r} runs on a cluster: call tfwb.run (it starts a local "
                         "one), or run this in a worker process (TF_CONFIG set)")
    clock = run_clock()                            # the sampler's and the steps' clock
    sampler = Sampler(interval_s=cfg.sample_interval_s, probes=default_probes(), clock=clock)
    # The sampler first (the others read its samples); its on_run_end runs even when setup failed.
    life = Lifecycle(cfg, [sampler, MemoryPeak(), *observers], always=(sampler,), clock=clock)
    state, log, spe = life.state, life.log, cfg.steps_per_execution
    if spe > 1 and (life.warmup_calls * spe, life.calls * spe) != (cfg.warmup_steps, cfg.steps):
        state.notes.append(f"steps_per_execution={spe}: warm-up {cfg.warmup_steps} -> {life.warmup_calls * spe} "
                           f"and measured {cfg.steps} -> {life.calls * spe} steps, rounded up to whole calls")
    facts: dict = {"setup_s": 0.0, "fingerprint": {}, "traces": None, "traces_warm": None, "replicas": None,
                   "input_floor_s": None}
    failed, error, extra_calls = False, None, [0]     # extra warm-up calls, counted as they run
    # TF's C++ code writes to stderr directly (oneDNN's fallbacks, ...): held back here and
    # kept as notes on the result, so a notebook cell shows the run, not TF's log lines.
    with native_stderr_captured() as native:
        try:
            workload = set_up(cfg)                 # once per run, before anything starts TF's runtime
            sampler.start()                        # from the start: setup shows on the utilization chart
            facts["fingerprint"] = fingerprint(cfg)   # so a run that fails in setup still says where it ran
            with prepared(cfg, dataset, workload=workload) as p:
                state.notes.extend(p.notes)
                state.model = p.model              # for observers that evaluate it (held-out loss)
                facts["fingerprint"] = fingerprint(cfg, p.strategy)
                facts["replicas"] = p.strategy.num_replicas_in_sync
                state.extras["distribution"] = distribution_facts(cfg, p.strategy)
                facts["setup_s"] = life.clock()
                life.start()
                timed_steps(p, life.warmup_calls, life.clock, log, state=state, dispatch=life.dispatch)
                if can_extend(cfg, dataset, observers):
                    extend_warmup(p, life, extra_calls)
                facts["traces_warm"] = tracing_count(p.step)
                facts["input_floor_s"] = input_floor_s(p)
                p.floor_iterator = None
                life.warmup_end()
                if not life.should_stop:
                    others = start_load_probe()      # other programs' CPU share over the measured steps
                    waited = start_delay_probe()     # and how long the kernel kept runnable tasks waiting
                    timed_steps(p, life.calls, life.clock, log, state=state, dispatch=life.dispatch,
                                first=len(log.times_s))
                    state.extras["delay"] = waited()  # read by tfwb.analysis.pairs.delay_of
                    share = others()
                    if share is not None:            # read by tfwb.analysis.pairs where the run is too short for samples
                        state.extras["other_cpu_pct"] = round(100.0 * share, 1)
                facts["traces"] = tracing_count(p.step)
                if log.times_s and not state.interrupted and state.diverged_at is None:
                    facts["limits"] = measure_limits(cfg, p.strategy, p.model, state.notes)   # after the steps: not timed
            if state.diverged_at is not None:
                error = (f"the loss became {log.losses[-1]} at step {(state.diverged_at + 1) * spe} "
                         f"(warm-up included): the run diverged; lower learning_rate "
                         f"(now {cfg.learning_rate:g}) or clip the gradients (clip='global_norm:1.0')")
        except KeyboardInterrupt:
            life.interrupt()                       # the same stop as a Stop button's
        except Exception as e:  # noqa: BLE001 - every failure becomes a failed result
            failed, error = True, _describe(e, cfg)
            if raise_errors:
                life.end("failed")
                raise
    state.notes.extend(_native_notes(native))
    life.end(life.status(failed))
    result = life.result(state.status, error, **facts)
    return dataclasses.replace(result, warmup_extra_steps=extra_calls[0] * spe) if extra_calls[0] else result


def can_extend(cfg: RunConfig, dataset: Optional[tf.data.Dataset], observers: Sequence[Observer]) -> bool:
    """Whether a run may extend its warm-up: not with a dataset given to it (it may end), not in a
    cluster's workers (they must run the same steps together), not when it stops at a target loss
    (``StopAtLoss``: steps to the target are counted from the warm-up's end, and more warm-up would
    train the model before them)."""
    return (dataset is None and cfg.strategy not in CLUSTER_STRATEGIES
            and not any(isinstance(o, StopAtLoss) for o in observers))


def extend_warmup(p: Prepared, life: Lifecycle, added: List[int]) -> int:
    """Run warm-up calls until the steps settle (``tfwb.warmup.extend_warmup``); returns how many ran.

    Called after the configured warm-up. The calls are timed and watched as warm-up calls are
    (a stop request ends them); ``life``'s warm-up and the run's step counts grow by them, so the
    result keeps them apart as warm-up. ``added[0]`` counts them as they run, so a kernel interrupt
    inside a block (which this function lets through) leaves the caller the calls that did run.
    """
    state, log, spe = life.state, life.log, p.cfg.steps_per_execution
    settled = log.times_s[:life.warmup_calls]

    def run_calls(n: int) -> List[float]:
        before = len(log.times_s)
        state.total_steps += n * spe
        state.warmup_steps += n * spe
        try:
            timed_steps(p, n, life.clock, log, state=state, dispatch=life.dispatch, first=before)
        finally:     # a KeyboardInterrupt inside the block too: the counts keep the calls that ran, as warm-up
            ran = len(log.times_s) - before
            state.total_steps -= (n - ran) * spe
            state.warmup_steps -= (n - ran) * spe
            life.warmup_calls += ran
            added[0] += ran
        return log.times_s[before:]

    warmup.extend_warmup(settled, run_calls, calls=life.calls, clock=life.clock, should_stop=lambda: life.should_stop)
    return added[0]


def _native_notes(held) -> List[str]:
    """TF's C++ log lines held back during a run, as notes (each once); anything else goes to stderr."""
    notes: List[str] = []
    for line in held.text.splitlines():
        m = TF_LOG_LINE.match(line.strip())
        if m:
            note = "TensorFlow: " + m.group("message").strip()
            if note not in notes:
                notes.append(note)
    held.replay(drop=is_tf_log)
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


#: Names that moved in tfwb 0.3, served here with a DeprecationWarning until 0.4 (``tfwb.renamed.forward``).
__getattr__ = forward(__name__, {
    "limits": "tfwb.tf.runner.step_limits:measure_limits",
    **dict.fromkeys(("call_overhead_s", "PEAK_BUDGET_S", "FAST_PEAK_BUDGET_S", "RETRY_LOADED_S"),
                    "tfwb.tf.runner.step_limits"),
    "LIMIT_FIELDS": "tfwb.limits_record",
})
