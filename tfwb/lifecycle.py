"""One run's lifecycle, shared by every runner: observers driven in order, and the result.

Owns ``Lifecycle`` (the run's clock, its ``RunState`` and observers: start, step end,
warm-up end, end; an observer that fails at the end becomes a note of kind
``"observer"``) and ``result_from_log`` (the one place a ``StepLog`` becomes a
``RunResult``). The single-process runner (``tfwb.tf.runner.train.run_process``) and the
local cluster (``tfwb.tf.cluster.parent.run_cluster``) both drive a run through it, so a
stop, a divergence or an interrupt ends every run the same way:

- ``request_stop(reason)`` -> status ``"ok"``, ``stop_reason`` = reason;
- ``request_stop(reason, interrupted=True)`` (Stop button, kernel interrupt, Ctrl-C)
  -> status ``"interrupted"``, ``stop_reason`` = reason, ``error`` says after how many steps;
- a loss that stops being finite -> status ``"diverged"``;
- an exception -> status ``"failed"`` with the runner's description of it.

Pure: no TensorFlow; the runners bring the clock, the observers and the facts.
"""
from __future__ import annotations

import datetime
import time
import uuid
from typing import Any, Callable, Collection, List, Optional, Sequence

from tfwb.config import RunConfig
from tfwb.interrupts import INTERRUPTED
from tfwb.limits_record import Limits
from tfwb.observers import Dispatch, RunState, StepLog
from tfwb.records import Note, RunResult

__all__ = ["Lifecycle", "result_from_log", "run_clock", "observer_note", "now_iso", "new_run_id", "INTERRUPTED"]



def now_iso() -> str:
    """The current UTC time, ISO-8601 to the second (``RunResult.started_at``)."""
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def new_run_id() -> str:
    """A fresh ``RunResult.run_id``: 12 hex digits."""
    return uuid.uuid4().hex[:12]


def run_clock() -> Callable[[], float]:
    """A clock for one run: seconds since this call, on ``time.perf_counter``.

    Example:
        >>> clock = run_clock(); 0.0 <= clock() < 1.0
        True
    """
    origin = time.perf_counter()

    def clock() -> float:
        return time.perf_counter() - origin
    return clock


def observer_note(owner: Any, error: BaseException) -> Note:
    """The note (kind ``"observer"``) for an observer that failed at the end of a run.

    Example:
        >>> observer_note(object(), ValueError("disk full"))
        Note('observer object failed at the end of the run: ValueError: disk full', 'observer')
    """
    return Note(f"observer {type(owner).__name__} failed at the end of the run: "
                f"{type(error).__name__}: {error}", "observer")


class Lifecycle:
    """Drives the observers of one run and keeps what they see (``state``).

    Args:
        cfg: the run's RunConfig (its warm-up, steps and ``steps_per_execution`` give
            ``state.total_steps`` and the calls).
        observers: called in this order; put the sampler first (others read its samples).
        always: observers whose ``on_run_end`` runs even when the run never started (a
            sampler started before setup); every other ``on_run_end`` runs only after
            ``start()``.
        clock: seconds on the run's clock; default: ``run_clock()``.

    Attributes:
        state: the ``RunState`` observers see (config, step log, clock, stop request).
        dispatch: the observers' hooks (``dispatch.on_step_begin`` / ``on_step_end`` are
            tuples a timed loop calls directly, outside its timed region).
        started_at: ISO-8601 time the lifecycle was made.
        warmup_calls, calls: calls of the step function in warm-up and measured.
        started: True once ``start()`` ran.

    Example:
        >>> from tfwb.observers import Observer
        >>> class Seen(Observer):
        ...     def __init__(self): self.hooks = []
        ...     def on_run_start(self, run): self.hooks.append("start")
        ...     def on_warmup_end(self, run): self.hooks.append("warm")
        ...     def on_run_end(self, run): self.hooks.append(run.status)
        >>> seen = Seen()
        >>> life = Lifecycle(RunConfig(steps=2, warmup_steps=0), [seen])
        >>> life.start(); life.end(life.status())
        >>> seen.hooks
        ['start', 'warm', 'ok']
    """

    def __init__(self, cfg: RunConfig, observers: Sequence[Any] = (), *, always: Collection[Any] = (),
                 clock: Optional[Callable[[], float]] = None) -> None:
        if not isinstance(cfg, RunConfig):
            raise TypeError(f"cfg must be a RunConfig, got {type(cfg).__name__}")
        self.started_at = now_iso()
        self.clock = clock if clock is not None else run_clock()
        spe = cfg.steps_per_execution
        self.warmup_calls, self.calls = cfg.calls
        self.state = RunState(config=cfg, log=StepLog(), clock=self.clock,
                              total_steps=(self.warmup_calls + self.calls) * spe,
                              warmup_steps=self.warmup_calls * spe, steps_per_call=spe)
        self.dispatch = Dispatch(observers)
        self._always = tuple(always)
        self.started = False
        self._warm = False
        self._ended = False

    @property
    def cfg(self) -> RunConfig:
        return self.state.config

    @property
    def log(self) -> StepLog:
        return self.state.log

    @property
    def should_stop(self) -> bool:
        """True once an observer asked to stop or the loss stopped being finite."""
        return self.state.stop_reason is not None or self.state.diverged_at is not None

    # -- the hooks, in order -------------------------------------------------------------
    def start(self) -> None:
        """Setup is done: ``on_run_start``; with no warm-up calls also ``on_warmup_end``."""
        self.started = True
        self.dispatch.call("on_run_start", self.state)
        if self.warmup_calls == 0:
            self.warmup_end()

    def step_end(self, step: int) -> None:
        """Call ``on_step_end`` for call ``step`` (its figures are already in the log);
        after the last warm-up call, ``on_warmup_end`` too."""
        for hook in self.dispatch.on_step_end:
            hook(self.state, step)
        if step + 1 == self.warmup_calls:
            self.warmup_end()

    def warmup_end(self) -> None:
        """``on_warmup_end``, once per run."""
        if not self._warm:
            self._warm = True
            self.dispatch.call("on_warmup_end", self.state)

    def interrupt(self) -> None:
        """A KeyboardInterrupt reached the runner: the same stop as a Stop button's."""
        self.state.request_stop(INTERRUPTED, interrupted=True)

    def status(self, failed: bool = False) -> str:
        """How the run ended: ``failed``, ``diverged``, ``interrupted`` or ``ok``."""
        if failed:
            return "failed"
        if self.state.diverged_at is not None:
            return "diverged"
        return "interrupted" if self.state.interrupted else "ok"

    def end(self, status: str) -> None:
        """``on_run_end`` on every observer (only the ``always`` ones when the run never
        started), once; an observer that fails adds a note of kind ``"observer"``."""
        if self._ended:
            return
        self._ended = True
        self.state.status = status
        for hook in self.dispatch.on_run_end:
            owner = getattr(hook, "__self__", hook)
            if not self.started and owner not in self._always:
                continue
            try:
                hook(self.state)
            except Exception as e:  # noqa: BLE001 - it must not hide the run's own result
                self.state.notes.append(observer_note(owner, e))

    # -- the result --------------------------------------------------------------------------
    def result(self, status: str, error: Optional[str] = None, **facts: Any) -> RunResult:
        """``result_from_log`` for this run (see there for ``facts``)."""
        facts.setdefault("started_at", self.started_at)
        return result_from_log(self.state, warmup_calls=self.warmup_calls, status=status, error=error,
                               **facts)


def result_from_log(state: RunState, *, warmup_calls: int, status: str, error: Optional[str] = None,
                    started_at: str = "", setup_s: float = 0.0, fingerprint: Optional[dict] = None,
                    traces: Optional[int] = None, traces_warm: Optional[int] = None,
                    replicas: Optional[int] = None, notes: Sequence[str] = (),
                    extras: Optional[dict] = None, run_id: Optional[str] = None,
                    input_floor_s: Optional[float] = None, limits: Optional[Limits] = None) -> RunResult:
    """The one conversion of a run's step log (and what the runner knows) into a RunResult.

    Per-call times become per-training-step times (divided by ``steps_per_call``); the
    first ``warmup_calls`` calls are the warm-up, kept apart; input waits are kept only
    when every call recorded one; the windows of windowed timing (``log.windows``) that
    follow the warm-up become ``window_calls``. An interrupted run without an ``error`` gets one that
    says why and after how many steps.

    Args:
        state: the run's state (config, log, stop request, samples, notes, extras).
        warmup_calls: calls of the step function that were warm-up.
        status: ``ok``, ``failed``, ``interrupted`` or ``diverged`` (``Lifecycle.status``).
        error: what went wrong (failed, diverged).
        started_at, setup_s, fingerprint, replicas, run_id, input_floor_s, limits: the result's
            fields of those names (``limits``: ``tfwb.limits_record.Limits``, None: nothing measured).
        traces, traces_warm: TF's tracing count of the step function at the end and after
            warm-up (a note says when it retraced after warm-up).
        notes: the runner's own notes, before the observers' (``state.notes``).
        extras: the runner's facts, over the observers' (``state.extras``).

    Returns:
        The RunResult.

    Example:
        >>> state = RunState(config=RunConfig(steps=2, warmup_steps=1), log=StepLog(times_s=[0.5, 0.1, 0.2],
        ...                  waits_s=[0.0, 0.01, 0.02], starts_s=[0, 0.5, 0.6], losses=[3, 2, 1]),
        ...                  clock=lambda: 0.0, total_steps=3, warmup_steps=1)
        >>> r = result_from_log(state, warmup_calls=1, status="ok")
        >>> r.warmup_times_s, r.step_times_s, r.losses
        ((0.5,), (0.1, 0.2), (2.0, 1.0))
    """
    cfg, log = state.config, state.log
    spe = state.steps_per_call
    times = [t / spe for t in log.times_s]
    waits = list(log.waits_s) if len(log.waits_s) == len(log.times_s) else []
    starts, losses = list(log.starts_s), list(log.losses)
    w = min(warmup_calls, len(times))
    after = traces - traces_warm if traces is not None and traces_warm is not None else None
    all_notes: List[str] = list(notes) + list(state.notes)
    if after:
        all_notes.append(Note(f"the step function was traced {after} more time(s) after warm-up (retracing: "
                              "new input shapes or dtypes, or a Python value passed as an argument)", "tracing"))
    windows, seen = [], 0
    for k in log.windows:                  # a runner times warm-up and measured calls apart:
        if seen >= w:                      # no window holds both
            windows.append(k)
        seen += k
    if status == "interrupted" and error is None:
        done = min(state.total_steps, len(times) * spe)
        error = f"{state.stop_reason or INTERRUPTED} after {done} of {state.total_steps} steps"
    return RunResult(
        config=cfg, status=status, error=error,
        warmup_times_s=times[:w], warmup_input_wait_s=waits[:w], warmup_start_s=starts[:w],
        warmup_losses=losses[:w],
        step_times_s=times[w:], input_wait_s=waits[w:], step_start_s=starts[w:], losses=losses[w:],
        samples=state.samples, examples_per_step=cfg.batch_size, setup_s=setup_s,
        fingerprint=fingerprint or {}, started_at=started_at or now_iso(), run_id=run_id or new_run_id(),
        notes=tuple(all_notes), stop_reason=state.stop_reason, extras={**state.extras, **(extras or {})},
        steps_per_call=spe, traces=traces, traces_after_warmup=after,
        grad_norms=log.grad_norms[w:], loss_scales=log.loss_scales[w:],
        warmup_grad_norms=log.grad_norms[:w], warmup_loss_scales=log.loss_scales[:w], replicas=replicas,
        input_floor_s=input_floor_s, window_calls=windows, limits=limits or Limits(),
    )
