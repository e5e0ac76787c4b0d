"""Observers: what happens around a run's steps, plugged in like Keras callbacks.

``tfwb.run(cfg, observers=[...])`` calls each observer's hooks, in order:

- ``on_run_start(run)``: setup is done, the first step is next;
- ``on_step_begin(run, step)`` / ``on_step_end(run, step)``: around every step, warm-up
  included (``step`` counts from 0; ``run.log`` already holds step ``step``'s figures
  in ``on_step_end``: see "Timing modes" below for what they are at that moment);
- ``on_warmup_end(run)``: after the last warm-up step (also when there is none);
- ``on_run_end(run)``: always, also after a failure or an interrupt.

``run`` is a ``RunState``: the config, the step log so far, the clock, and
``request_stop(reason, interrupted=False)``, which ends the run after the current
step (recorded as ``stop_reason`` on the result; status ``ok``, or ``interrupted``
for a user's interrupt). Observers must be cheap per step:
the runner calls only the hooks an observer overrides, and an observer that needs
per-step work should append to lists and do the rest in ``on_run_end``.

Timing modes (``RunConfig.timing``). With ``"per_step"`` every entry of ``run.log`` is final
when ``on_step_end`` sees it: the loss read and the device synced after each step. With
``"windowed"`` (the default) steps run back to back and the device is synced once per window
of steps: in ``on_step_end`` the open window's entries (``times_s``, ``starts_s``) are the
host's own figures (the time to fetch and dispatch the step), and its losses are not there
yet. When the window closes (before its last step's ``on_step_end``), its entries are
replaced by figures derived from the window's synced wall time and its losses (gradient
norms, loss scales) are appended. So ``len(run.log.losses)`` counts the settled steps: an
observer that needs a step's loss or final time reads entries below it
(``StopAtLoss`` does).

Built in here (pure): ``Progress`` (a callback with steps done and total),
``StopAtLoss`` (stop when the loss reaches a target), ``StopFlag`` (stop when
another thread sets it: the Workbench's Stop button). The utilization ``Sampler``
(``tfwb.utilization``) is an observer too; ``tfwb.tf.lab.profiler.ProfileWindow`` captures a
profiler trace for a window of steps and ``tfwb.tf.lab.tensorboard.Scalars`` writes
TensorBoard event files.
"""
from __future__ import annotations

import math
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, List, Optional, Sequence, Tuple

HOOKS = ("on_run_start", "on_step_begin", "on_step_end", "on_warmup_end", "on_run_end")


class Observer:
    """Base class: every hook does nothing. Override the ones you need.

    Example:
        >>> class CountSteps(Observer):
        ...     def __init__(self): self.n = 0
        ...     def on_step_end(self, run, step): self.n += 1
    """

    def on_run_start(self, run: "RunState") -> None:
        """Setup is done; the first (warm-up) step is next."""

    def on_step_begin(self, run: "RunState", step: int) -> None:
        """Step ``step`` (0-based, warm-up included) is about to run."""

    def on_step_end(self, run: "RunState", step: int) -> None:
        """Step ``step`` finished; its time, wait and loss are the last entries of ``run.log``."""

    def on_warmup_end(self, run: "RunState") -> None:
        """The warm-up steps are done; measured steps follow."""

    def on_run_end(self, run: "RunState") -> None:
        """The run ended (finished, stopped, failed or interrupted): release what you hold."""


@dataclass
class StepLog:
    """What the runner records, call by call (kept when a step fails).

    Attributes:
        times_s, waits_s, starts_s: per call, its time, its wait for input and its start on
            the run's clock (windowed timing: host figures until its window closes).
        losses, grad_norms, loss_scales: per settled call (windowed timing: appended when
            the window closes, so ``len(losses)`` is the number of settled calls).
        windows: windowed timing only: the calls each closed window held, in order (each
            window ended with one device sync); empty with per-step timing.
    """

    times_s: List[float] = field(default_factory=list)
    waits_s: List[float] = field(default_factory=list)
    starts_s: List[float] = field(default_factory=list)
    losses: List[float] = field(default_factory=list)
    grad_norms: List[float] = field(default_factory=list)
    loss_scales: List[float] = field(default_factory=list)
    windows: List[int] = field(default_factory=list)


@dataclass
class RunState:
    """What observers see of a run in progress.

    Attributes:
        config: the RunConfig.
        log: the StepLog so far.
        clock: seconds since the run's origin (the clock step starts are on).
        total_steps: warm-up plus measured steps, in training steps.
        warmup_steps: the warm-up part of ``total_steps``.
        steps_per_call: training steps one call runs (``steps_per_execution``).
        stop_reason: set by ``request_stop``; ``None`` while the run goes on.
        interrupted: set by ``request_stop(..., interrupted=True)``: the run ends as
            ``"interrupted"``.
        diverged_at: the call (0-based, warm-up included) whose loss was not finite.
        status: ``"running"``, then ``"ok"``, ``"failed"`` or ``"interrupted"`` in ``on_run_end``.
        notes: lines observers add to the result's notes.
        extras: JSON-ready facts an observer hands to the result (``RunResult.extras``).
        samples: the utilization samples, set by the sampler when it stops (it is the
            first observer, so later observers' ``on_run_end`` can read them).
        model: the Keras model being trained, set by ``tfwb.run`` before ``on_run_start``
            (``None`` in a run that failed before it was built), so an observer can
            evaluate it (``tfwb.tf.lab.held_out.HeldOutLoss``). It runs on the training
            thread between steps; read it, do not change its weights.
    """

    config: Any
    log: StepLog
    clock: Callable[[], float]
    total_steps: int
    warmup_steps: int
    steps_per_call: int = 1
    stop_reason: Optional[str] = None
    interrupted: bool = False
    status: str = "running"
    diverged_at: Optional[int] = None
    notes: List[str] = field(default_factory=list)
    extras: dict = field(default_factory=dict)
    samples: tuple = ()
    model: Any = None

    def request_stop(self, reason: str, *, interrupted: bool = False) -> None:
        """End the run after the current step; the result records ``reason`` as ``stop_reason``.

        The first request wins. This is the one place a stop is said: the runner ends the
        run with status ``"interrupted"`` when ``interrupted`` is True (a user's Stop
        button or kernel interrupt), else ``"ok"``; nobody rewrites the status afterwards.

        Args:
            reason: why the run stops (``"stopped by the user"``, a target reached).
            interrupted: True for a user's interrupt.
        """
        if self.stop_reason is None:
            self.stop_reason = reason
            self.interrupted = bool(interrupted)

    @property
    def steps_done(self) -> int:
        """Training steps finished so far (warm-up included)."""
        return len(self.log.times_s) * self.steps_per_call


class Dispatch:
    """Calls each hook on the observers that override it (others cost nothing per step)."""

    def __init__(self, observers: Sequence[Any]) -> None:
        self.observers = tuple(observers)
        for hook in HOOKS:
            setattr(self, hook, tuple(getattr(o, hook) for o in self.observers if _overrides(o, hook)))

    def call(self, hook: str, *args: Any) -> None:
        for fn in getattr(self, hook):
            fn(*args)


def _overrides(obj: Any, hook: str) -> bool:
    """True when ``obj`` has a ``hook`` that is not the base class's no-op."""
    fn = getattr(type(obj), hook, None)
    return fn is not None and fn is not getattr(Observer, hook, None)


class Progress(Observer):
    """Calls ``callback(steps_done, steps_total)`` after every call of the step function.

    With ``settled_only`` it calls back only where no timing window is open: after a call whose
    window has closed (every call so far has its loss, ``len(run.log.losses)``: with windowed timing
    after a window's sync, with per-step timing after every call), and always at the last call. A
    view it drives then never does its work inside a measured window.

    Args:
        callback: receives training steps done (warm-up included) and the total.
        settled_only: call back only between timing windows (and at the end).

    Example:
        >>> seen = []
        >>> p = Progress(lambda done, total: seen.append(done), settled_only=True)
        >>> run = RunState(config=None, log=StepLog(times_s=[0.1, 0.1]), clock=lambda: 0.0,
        ...                total_steps=3, warmup_steps=0)
        >>> p.on_step_end(run, 1)               # two calls in an open window: nothing said
        >>> run.log.losses.extend([1.0, 0.9])   # the window closed
        >>> p.on_step_end(run, 1); seen
        [2]
    """

    def __init__(self, callback: Callable[[int, int], None], *, settled_only: bool = False) -> None:
        self.callback = callback
        self.settled_only = settled_only

    def on_step_end(self, run: RunState, step: int) -> None:
        done = min((step + 1) * run.steps_per_call, run.total_steps)
        if self.settled_only and done < run.total_steps and len(run.log.losses) < len(run.log.times_s):
            return                            # a window is open: its calls are still being timed
        self.callback(done, run.total_steps)


class StopAtLoss(Observer):
    """Stop the run once the loss of the measured steps is at or below ``target``.

    With ``window=1`` a single step's loss decides; a larger window uses the mean of the
    last ``window`` measured losses, so that one lucky batch does not stop the run.
    Warm-up steps never stop a run (nor count in the window). The result's
    ``stop_reason`` says at which step and time the target was reached
    (``extras["target_reached"]`` holds ``{"step", "time_s", "loss", "warmup_steps"}``:
    ``step`` counted from the first measured step, 1-based, in training steps;
    ``time_s`` the measured training time from the first measured step's start to the
    end of that step; ``loss`` the (windowed) loss that reached the target;
    ``warmup_steps`` the training steps run before measuring, which trained the model too).

    Args:
        target: the loss to reach (finite).
        window: how many measured losses (one per call of the step function) to average.

    Raises:
        ValueError: for a target that is not a finite number, or a window that is not an
            integer >= 1.

    Example:
        >>> stop = StopAtLoss(0.5, window=10)   # tfwb.run(cfg, observers=[stop])
    """

    def __init__(self, target: float, window: int = 1) -> None:
        if isinstance(target, bool) or not isinstance(target, (int, float)) or not math.isfinite(target):
            raise ValueError(f"target={target!r} is not allowed; target must be a finite number")
        if isinstance(window, bool) or not isinstance(window, int) or window < 1:
            raise ValueError(f"window={window!r} is not allowed; window must be an integer >= 1")
        self.target = float(target)
        self.window = window
        self._seen = 0                      # losses judged so far in this run

    def on_run_start(self, run: RunState) -> None:
        self._seen = 0

    def on_step_end(self, run: RunState, step: int) -> None:
        # Losses arrive when a window of steps settles (windowed timing), so every loss that
        # arrived since the last call is judged in order: the first that reaches the target wins.
        log = run.log
        calls_in_warmup = -(-run.warmup_steps // run.steps_per_call)
        start = max(self._seen, calls_in_warmup + self.window - 1)
        self._seen = len(log.losses)
        for j in range(start, len(log.losses)):
            recent = log.losses[j + 1 - self.window:j + 1]
            loss = sum(recent) / len(recent)
            if loss <= self.target:
                measured = (j + 1 - calls_in_warmup) * run.steps_per_call
                elapsed = log.starts_s[j] + log.times_s[j] - log.starts_s[calls_in_warmup]
                run.extras["target_reached"] = {"step": measured, "time_s": elapsed, "loss": loss,
                                                "warmup_steps": calls_in_warmup * run.steps_per_call}
                what = "loss" if self.window == 1 else f"mean loss of the last {self.window} steps"
                run.request_stop(f"{what} {loss:.4g} reached the target {self.target:g} at measured step "
                                 f"{measured} ({elapsed:.2f} s of measured training)")
                return


class StopFlag(Observer):
    """Stop the run when ``set()`` is called, from any thread (a Stop button, a signal handler).

    Args:
        reason: the stop reason when ``set()`` names none.

    Example:
        >>> flag = StopFlag()
        >>> flag.set("interrupted by the user", interrupted=True)   # e.g. from InterruptBridge
        >>> flag.is_set, flag.interrupted
        (True, True)
    """

    def __init__(self, reason: str = "stopped by the user") -> None:
        self.reason = reason
        self._event = threading.Event()
        self._request: Tuple[Optional[str], bool] = (None, False)

    def set(self, reason: Optional[str] = None, interrupted: bool = False) -> None:
        """Ask the run to stop after its current step (thread-safe).

        Args:
            reason: the result's ``stop_reason``; ``None`` keeps the flag's own.
            interrupted: True for a user's interrupt (the result's status becomes
                ``"interrupted"``); False for a plain stop (status stays ``"ok"``).
        """
        if not self._event.is_set():
            self._request = (reason, bool(interrupted))
            self._event.set()

    def clear(self) -> None:
        """Make the flag ready for the next run."""
        self._event.clear()
        self._request = (None, False)

    @property
    def is_set(self) -> bool:
        """True once ``set()`` was called (until ``clear()``)."""
        return self._event.is_set()

    @property
    def interrupted(self) -> bool:
        """True when the stop was set as an interrupt."""
        return self._event.is_set() and self._request[1]

    def on_step_end(self, run: RunState, step: int) -> None:
        if self._event.is_set():
            reason, interrupted = self._request
            run.request_stop(reason or self.reason, interrupted=interrupted)
