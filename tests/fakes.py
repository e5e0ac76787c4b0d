"""Shared test fakes: a runner that plays ``tfwb.run``'s part, result builders, tiny workloads.

Import them as ``from fakes import FakeRunner, make_result`` (tests/conftest.py puts this
folder on ``sys.path``; the ipywidgets 7.7 check in test_binder.py puts it on
``PYTHONPATH``). Nothing here imports TensorFlow at module level: the tiny workloads
import it when they build their model or data.

* ``FakeRunner``: ``runner(cfg, observers=()) -> RunResult``, the run contract. It drives
  the observers through the real ``tfwb.lifecycle.Lifecycle`` (start, every step's
  begin and end, warm-up end, end; a stop request ends the run after its step; a
  KeyboardInterrupt becomes an interrupted result) on a made-up clock, and builds the
  result with the real ``result_from_log``. Only the step's work is made up.
* ``make_result`` / ``failed_result``: RunResults with chosen figures, no run at all.
* ``tiny_model`` / ``tiny_data`` / ``registered``: a 4-feature, 3-class workload that
  trains in milliseconds, registered for the length of a ``with`` block.
"""
from __future__ import annotations

import contextlib
import threading
from typing import Any, Callable, Iterator, Optional, Sequence

from tfwb.config import RunConfig
from tfwb.lifecycle import Lifecycle
from tfwb.observers import Progress
from tfwb.records import RunResult, Sample
from tfwb.workloads import register_workload, unregister_workload

#: A deadlock guard for ``FakeRunner(gate_step=...)``: the test releases it long before.
GATE_TIMEOUT_S = 60
OOM = "ResourceExhaustedError: OOM"


def step_time(cfg: RunConfig) -> float:
    """A made-up machine: 50 ms a step with prefetch, 100 ms without."""
    return 0.05 if cfg.prefetch else 0.10


def falling_loss(cfg: RunConfig, step: int, end: float = 1.0) -> float:
    """Loss of training step ``step`` (0-based, warm-up included): falls towards ``end``."""
    return end + 1.3 * 0.8 ** (step + 1)


class FakeRunner:
    """``runner(cfg, observers=()) -> RunResult`` with made-up step figures and the real lifecycle.

    Args:
        step_time: ``step_time(cfg) -> seconds`` per training step (default: 50 ms with
            prefetch, 100 ms without).
        jitter: each step's time is ``step_time * (1 + jitter * ((i % 3) - 1))``.
        input_wait_s: the wait for input recorded for every call.
        loss: ``loss(cfg, step) -> float`` for training step ``step`` (warm-up included).
        fail_if: ``fail_if(cfg) -> bool``: such a run ends ``"failed"`` with an out-of-memory
            error, after its steps.
        raises: an exception raised after the steps (the caller sees it, as with
            ``tfwb.run(..., raise_errors=True)``); observers' ``on_run_end`` runs first.
        on_step: ``on_step(step)`` runs during each call, before its observers (a test
            clicks Stop or raises KeyboardInterrupt there).
        gate_step: the call that waits until the test calls ``release()`` (``at_gate`` is
            set while it waits).

    Attributes:
        calls: every RunConfig run, in order. ``observers``: each run's observers.
        threads: the thread name each run ran on. ``progress_seen``: ``(done, total)``
            after every call, as a Progress observer would see it.

    Example:
        >>> runner = FakeRunner()
        >>> r = runner(RunConfig(steps=4, warmup_steps=1, prefetch=True))
        >>> r.status, len(r.step_times_s), len(r.warmup_times_s), runner.progress_seen[-1]
        ('ok', 4, 1, (5, 5))
    """

    def __init__(self, *, step_time: Callable[[RunConfig], float] = step_time, jitter: float = 0.01,
                 input_wait_s: float = 0.001, loss: Callable[[RunConfig, int], float] = falling_loss,
                 fail_if: Callable[[RunConfig], bool] = lambda cfg: False,
                 raises: Optional[BaseException] = None, on_step: Optional[Callable[[int], None]] = None,
                 gate_step: Optional[int] = None) -> None:
        self.step_time, self.jitter, self.input_wait_s, self.loss = step_time, jitter, input_wait_s, loss
        self.fail_if, self.raises, self.on_step, self.gate_step = fail_if, raises, on_step, gate_step
        self.calls: list = []
        self.observers: list = []
        self.threads: list = []
        self.progress_seen: list = []
        self.at_gate, self.released = threading.Event(), threading.Event()

    def release(self) -> None:
        """Let the run waiting at ``gate_step`` go on."""
        self.released.set()

    def __call__(self, cfg: RunConfig, observers: Sequence[Any] = (), *,
                 progress: Optional[Callable[[int, int], None]] = None) -> RunResult:
        """Run ``cfg``: ``progress=`` is turned into a Progress observer, as ``tfwb.run`` does."""
        observers = list(observers) + ([Progress(progress)] if progress is not None else [])
        self.calls.append(cfg)
        self.observers.append(tuple(observers))
        self.threads.append(threading.current_thread().name)
        now = [0.0]
        life = Lifecycle(cfg, [Progress(lambda done, total: self.progress_seen.append((done, total)))]
                         + observers, clock=lambda: now[0])
        spe = cfg.steps_per_execution
        base_s = self.step_time(cfg)
        life.start()
        try:
            for call in range(life.warmup_calls + life.calls):
                for hook in life.dispatch.on_step_begin:
                    hook(life.state, call)
                took = base_s * spe * (1 + self.jitter * ((call % 3) - 1))
                log = life.log
                log.starts_s.append(now[0])
                log.times_s.append(took)
                log.waits_s.append(self.input_wait_s)
                log.losses.append(self.loss(cfg, (call + 1) * spe - 1))
                now[0] += took
                if self.on_step is not None:
                    self.on_step(call)
                if call == self.gate_step:
                    self.at_gate.set()
                    assert self.released.wait(GATE_TIMEOUT_S), "the test never released the runner"
                life.step_end(call)
                if life.should_stop:
                    break
            if self.raises is not None:
                raise self.raises
        except KeyboardInterrupt:
            life.interrupt()
        except BaseException:
            life.end("failed")
            raise
        if self.fail_if(cfg):
            life.end("failed")
            return life.result("failed", error=OOM)
        status = life.status()
        life.end(status)
        return life.result(status)


def make_result(cfg: Optional[RunConfig] = None, *, step_s: float = 0.1, wait_s: float = 0.0,
                n: int = 10, warmup_s: Sequence[float] = (), jitter_s: float = 0.0, t0_s: float = 0.5,
                gpus: Optional[int] = None, losses: Optional[Sequence[float]] = None, **fields: Any) -> RunResult:
    """A finished run with chosen figures (no runner at all).

    Args:
        cfg: the RunConfig (default ``RunConfig()``).
        step_s: each measured step's time; step ``i`` takes ``step_s + jitter_s * ((i % 5) - 2)``.
        wait_s: each measured step's wait for input (warm-up steps wait 10 ms).
        n: measured steps.
        warmup_s: the warm-up steps' times.
        t0_s: when the first step starts on the run clock (steps follow each other).
        gpus: with a number, utilization samples every 0.2 s over the run with that many
            GPUs (``None``: no samples).
        losses: the measured losses (default none).
        fields: any other RunResult field, over what the arguments above gave
            (``step_times_s=...`` replaces the made-up times, and ``n`` follows it).

    Example:
        >>> r = make_result(step_s=0.25, n=3)
        >>> r.step_times_s, r.step_start_s
        ((0.25, 0.25, 0.25), (0.5, 0.75, 1.0))
    """
    cfg = cfg or RunConfig()
    steps = tuple(fields.pop("step_times_s", None) or (step_s + jitter_s * ((i % 5) - 2) for i in range(n)))
    warm = tuple(warmup_s)
    t, warm_start, step_start = t0_s, [], []
    for d in warm:
        warm_start.append(t)
        t += d
    for d in steps:
        step_start.append(t)
        t += d
    samples = () if gpus is None else tuple(
        Sample(t_s=i * 0.2, cpu_process_pct=120.0 + i % 7, cpu_system_pct=55.0,
               gpu_util_pct=tuple(60.0 + g * 10 for g in range(gpus)), gpu_mem_used_mib=(1000.0,) * gpus)
        for i in range(int(t / 0.2) + 2))
    values = dict(config=cfg, step_times_s=steps, input_wait_s=(wait_s,) * len(steps), warmup_times_s=warm,
                  warmup_input_wait_s=(0.01,) * len(warm), step_start_s=step_start, warmup_start_s=warm_start,
                  samples=samples, losses=tuple(losses or ()), examples_per_step=cfg.batch_size)
    values.update(fields)
    return RunResult(**values)


def failed_result(cfg: Optional[RunConfig] = None, error: str = OOM, **fields: Any) -> RunResult:
    """A run that failed before any step (``status="failed"``, ``error``).

    Example:
        >>> failed_result().status, failed_result().error
        ('failed', 'ResourceExhaustedError: OOM')
    """
    return RunResult(config=cfg or RunConfig(), status="failed", error=error, **fields)


# -- tiny workloads (TensorFlow imported when they build) -------------------------------------
def tiny_model(cfg: RunConfig):
    """4 features -> 16 -> 8 -> 3 logits (float32 output, so mixed precision works)."""
    import keras   # here, not at the top: importing the fakes must not import TensorFlow

    return keras.Sequential([keras.Input((4,)), keras.layers.Dense(16, activation="relu"),
                             keras.layers.Dense(8, activation="relu"), keras.layers.Dense(3, dtype="float32")])


def tiny_data(cfg: RunConfig, rows: int = 512):
    """``rows`` examples of 4 normal features; the class counts how many of the first two are > 0."""
    import numpy as np
    import tensorflow as tf   # here, not at the top: importing the fakes must not import TensorFlow

    x = np.random.default_rng(cfg.seed).normal(size=(rows, 4)).astype("float32")
    y = (x[:, 0] > 0).astype("int32") + (x[:, 1] > 0).astype("int32")
    return tf.data.Dataset.from_tensor_slices((x, y))


@contextlib.contextmanager
def registered(name: str, model_fn: Callable = tiny_model, data_fn: Callable = tiny_data,
               **kwargs: Any) -> Iterator[str]:
    """Register a workload (the tiny one by default) for the ``with`` block; yields its name.

    Example:
        >>> with registered("test-fakes-tiny") as name:
        ...     RunConfig(workload=name).workload
        'test-fakes-tiny'
    """
    register_workload(name, model_fn=model_fn, data_fn=data_fn, **kwargs)
    try:
        yield name
    finally:
        unregister_workload(name)
