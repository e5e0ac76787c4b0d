"""Step timing on any device, TensorFlow-free: the window logic, the two timed loops, and the
same windows pushed from a loop that runs elsewhere (Keras's ``fit``).

Device work is asynchronous: a step's call returns while the device still works, so a clock
read after the call times the dispatch, not the step. Two ways to time honestly:

- **windowed** (``windowed_loop``): calls run back to back, as training runs them; each call's
  host side is timed as ``t0 -> fetch -> t1 -> dispatch -> t2``. A window of calls closes at
  the first call that ends ``WINDOW_S`` or more after the window opened (``window_full``),
  with one loss read and one device sync. The window's synced wall time is then spread over
  its calls in proportion to their host times (``spread``): on a CPU, where a call returns
  when its kernels are done, that is each call's own time; on a GPU the sync charges the
  device's time to the calls that queued it, so the figures add up to training's throughput.
- **per step** (``per_step_loop``): fetch, step, read the loss, sync, for every call: each
  call's own latency; on a GPU host and device take turns, so its throughput is lower.

Everything a loop touches is passed in: the clock, the device sync, the step (an object with
``takes_iterator``, ``step``, ``iterator`` and ``fetch()``, such as
``tfwb.tf.runner.train.Prepared``) and, for windows, how a window's outputs are read
(``read``: one device-to-host copy on an accelerator). The runner (``tfwb.tf.runner.train``),
the fit callback (``tfwb.keras.Monitor``, driven by Keras's hooks: it pushes each finished call
into ``PushWindows``), ``benchmarks/gpu_timing.py`` (a JAX step on a real GPU) and
``tests/test_timing.py`` (a simulated asynchronous device) all use this module.

- **pushed** (``PushWindows``): the windowed timing for a loop tfwb does not run (Keras's
  ``fit``): the caller pushes each call's host start and end as it finishes; the window closes
  itself at the same rule (``window_full``), syncs, spreads its wall time (``spread``) and keeps
  one frozen ``CallTiming`` per settled call.

Observers' hooks run between calls, outside the timed region; a stop they request ends the
loop after the call (windowed: after its window is closed). A loss that is not finite ends
the run at that call.

Pure: standard library only.
"""
from __future__ import annotations

import math
from typing import Any, Callable, List, NamedTuple, Sequence, Tuple

__all__ = ["WINDOW_S", "window_full", "spread", "windowed_loop", "per_step_loop", "truncate", "read_floats",
           "CallTiming", "PushWindows"]

#: A window closes at the first call that ends this long (host seconds) after the window
#: opened. The sync at its end (and, on a GPU, the device's idle moment while the host
#: dispatches the next call) is then a small share of the window.
WINDOW_S = 0.1


def window_full(opened_s: float, now_s: float, window_s: float = WINDOW_S) -> bool:
    """Whether a window opened at ``opened_s`` closes at ``now_s`` (the end of its latest call).

    Example:
        >>> window_full(0.0, 0.05), window_full(0.0, 0.25)
        (False, True)
    """
    return now_s - opened_s >= window_s


def spread(starts_s: Sequence[float], host_s: Sequence[float], closed_s: float) -> Tuple[List[float], List[float]]:
    """A closed window's calls: (starts, times), their host times scaled to the window's synced wall time.

    The wall time is the calls' host time plus the wait at the close (``closed_s`` after the
    last call's host side ended). Starts are laid end to end from the first, keeping the
    gaps between calls (where observers' hooks ran), so the hooks stay outside every call.

    Example:
        >>> starts, times = spread([0.0, 1.0, 3.0], [1.0, 1.0, 1.0], closed_s=7.0)  # host 3 s, wall 6 s
        >>> starts, times                         # the 1 s gap before the third call is kept
        ([0.0, 2.0, 5.0], [2.0, 2.0, 2.0])
    """
    k = len(host_s)
    busy = sum(host_s)
    wall = busy + max(0.0, closed_s - (starts_s[-1] + host_s[-1]))
    t = starts_s[0]
    starts, times = [], []
    for j in range(k):
        d = host_s[j] * (wall / busy) if busy > 0 else wall / k
        gap = starts_s[j + 1] - (starts_s[j] + host_s[j]) if j + 1 < k else 0.0
        starts.append(t)
        times.append(d)
        t += d + gap
    return starts, times


def read_floats(values: Sequence[Any]) -> List[float]:
    """The default ``read``: each output as a float (a host read of each, in order)."""
    return [float(v) for v in values]


def truncate(log: Any, calls: int) -> None:
    """Keep the first ``calls`` calls of a ``StepLog``."""
    for seq in (log.times_s, log.starts_s, log.waits_s, log.losses, log.grad_norms, log.loss_scales):
        del seq[calls:]


def _hooks(dispatch: Any) -> Tuple[Sequence[Callable], Sequence[Callable]]:
    return (dispatch.on_step_begin, dispatch.on_step_end) if dispatch is not None else ((), ())


def per_step_loop(stepper: Any, n: int, clock: Callable[[], float], log: Any, *, sync: Callable[[], None],
                  state: Any = None, dispatch: Any = None, first: int = 0, grad_norms: bool = False) -> Any:
    """Per-step timing: fetch, step, read the loss, sync; every call's own latency. Returns ``log``.

    Args:
        stepper: ``takes_iterator``, ``step``, ``iterator``, ``fetch()``.
        n: calls to run.
        clock: seconds.
        log: a ``tfwb.observers.StepLog``, appended to call by call.
        sync: waits until the devices are idle.
        state, dispatch: the run's observers (``tfwb.observers``), or None.
        first: index of the first call (observers see ``first + i``).
        grad_norms: the step returns ``{"loss", "grad_norm", "loss_scale"}`` instead of the loss.
    """
    begin, end = _hooks(dispatch)
    for i in range(n):
        step = first + i
        for hook in begin:
            hook(state, step)
        t0 = clock()
        if stepper.takes_iterator:
            t1 = t0
            out = stepper.step(stepper.iterator)
        else:
            x, y = stepper.fetch()
            t1 = clock()
            out = stepper.step(x, y)
        loss_value = float(out["loss"] if grad_norms else out)
        sync()
        t2 = clock()
        log.starts_s.append(t0)
        log.times_s.append(t2 - t0)
        if not stepper.takes_iterator:
            log.waits_s.append(t1 - t0)
        log.losses.append(loss_value)
        if grad_norms:
            log.grad_norms.append(float(out["grad_norm"]))
            log.loss_scales.append(float(out["loss_scale"]))
        for hook in end:
            hook(state, step)
        if not math.isfinite(loss_value) and state is not None:
            state.diverged_at = step              # a NaN/inf loss: nothing after it means anything
            break
        if state is not None and state.stop_reason is not None:
            break
    return log


def windowed_loop(stepper: Any, n: int, clock: Callable[[], float], log: Any, *, sync: Callable[[], None],
                  read: Callable[[Sequence[Any]], List[float]] = read_floats, state: Any = None,
                  dispatch: Any = None, first: int = 0, grad_norms: bool = False,
                  window_s: float = WINDOW_S) -> Any:
    """Windowed timing: host figures per call, one read and sync per window. Returns ``log``.

    Arguments as ``per_step_loop``'s, and:
        read: a window's outputs as floats (waits for the window's steps).
        window_s: host seconds after which a window closes (``window_full``).

    Raises:
        Whatever a step, a fetch or an observer raises; the open window is closed first
        (synced, its losses read) or, when that fails too, its unsynced calls are dropped.
    """
    fetch = not stepper.takes_iterator
    begin, end = _hooks(dispatch)
    base = len(log.times_s)                   # log index of call ``first``
    outs: list = []                           # the open window's step outputs
    opened = 0.0

    def close() -> bool:
        return _close(log, outs, grad_norms, sync, read, clock, state, first - base)

    try:
        for i in range(n):
            step = first + i
            for hook in begin:
                hook(state, step)
            t0 = clock()
            if fetch:
                x, y = stepper.fetch()
                t1 = clock()
                out = stepper.step(x, y)
            else:
                t1 = t0
                out = stepper.step(stepper.iterator)
            t2 = clock()
            if not outs:
                opened = t0
            outs.append(out)
            log.starts_s.append(t0)
            log.times_s.append(t2 - t0)       # host time until the window closes
            if fetch:
                log.waits_s.append(t1 - t0)
            if i == n - 1 or window_full(opened, t2, window_s):
                settled = close()
                outs = []
                if not settled:
                    break                     # diverged: nothing after it means anything
            for hook in end:
                hook(state, step)
            if state is not None and state.stop_reason is not None:
                break
        if outs:                              # a stop ended the loop inside a window
            close()
    except BaseException:
        if outs:
            try:
                close()
            except Exception:  # noqa: BLE001 - the first error is the one raised
                truncate(log, len(log.times_s) - len(outs))
        raise
    return log


def _close(log: Any, outs: list, grad_norms: bool, sync: Callable[[], None], read: Callable,
           clock: Callable[[], float], state: Any, offset: int) -> bool:
    """Close a window: read its losses, sync, ``spread`` its wall time. False when a loss was not finite
    (the log then ends at that call; ``state.diverged_at`` is set when there is a ``state``)."""
    losses = read([o["loss"] for o in outs] if grad_norms else outs)   # waits for the window's steps
    if grad_norms:
        norms = read([o["grad_norm"] for o in outs])
        scales = read([o["loss_scale"] for o in outs])
    sync()
    closed = clock()
    k = len(outs)
    a = len(log.times_s) - k
    log.starts_s[a:], log.times_s[a:] = spread(log.starts_s[a:], log.times_s[a:], closed)
    log.losses.extend(losses)
    if grad_norms:
        log.grad_norms.extend(norms)
        log.loss_scales.extend(scales)
    log.windows.append(k)
    if state is not None:
        for j, value in enumerate(losses):
            if not math.isfinite(value):
                truncate(log, a + j + 1)
                log.windows[-1] = j + 1
                state.diverged_at = a + j + offset
                return False
    return True


class CallTiming(NamedTuple):
    """One call of a train function, settled by its window's sync (``PushWindows``): a frozen record.

    A named tuple rather than a frozen dataclass: a window makes one per call as it closes, and a
    frozen dataclass takes 5-10 times as long to make (about 5 us against 0.5-1 us on 2 busy cores).

    Args:
        start_s: the call's start on the run clock, laid out by ``spread``.
        time_s: its share of the window's synced wall time (``spread``).
        host_s: its host time, from its start to the next call's start (or the sync that ended it).
        steps: the steps the call ran (``steps_per_execution``, fewer at an epoch's end).
        epoch: the epoch it ran in.
        end_step: the index, in its epoch, of its last step (where Keras logs the running loss).
        window: which window settled it (1 for the first).
    """

    start_s: float
    time_s: float
    host_s: float
    steps: int = 1
    epoch: int = 0
    end_step: int = 0
    window: int = 1


class PushWindows:
    """Windowed timing driven from outside: ``push`` each finished call; windows close themselves.

    A window closes at the first pushed call that ends ``window_s`` or more after the window's first
    call started (``window_full``), at the ``close_after``-th call pushed (the end of a warm-up), or
    when the caller asks (``close()``): one ``sync``, then the window's wall time is ``spread`` over its
    calls, each kept as a frozen ``CallTiming`` in ``settled``. Per call: one tuple while its window is
    open, one record when it closes; no sync but the window's.

    Args:
        clock: seconds (the run clock).
        sync: waits until the devices are idle.
        window_s: host seconds after which a window closes.
        close_after: also close the window that holds this call (counted from 1; 0: none).

    Example:
        >>> ticks = iter([1.5])
        >>> w = PushWindows(lambda: next(ticks), lambda: None, window_s=1.0)
        >>> w.push(0.0, 0.5), w.push(0.5, 1.0)       # the second call ends the window
        (False, True)
        >>> [(c.start_s, c.time_s) for c in w.settled]   # 1.5 s of wall time over two calls
        [(0.0, 0.75), (0.75, 0.75)]
    """

    def __init__(self, clock: Callable[[], float], sync: Callable[[], None], window_s: float = WINDOW_S,
                 close_after: int = 0) -> None:
        self.clock, self.sync, self.window_s, self.close_after = clock, sync, window_s, close_after
        #: The calls settled so far, in order.
        self.settled: List[CallTiming] = []
        #: Calls pushed so far (settled, open, dropped); windows closed so far.
        self.pushed, self.windows = 0, 0
        self._open: List[Tuple[float, float, int, int, int]] = []   # start, host, steps, epoch, end_step

    @property
    def pending(self) -> int:
        """Calls in the open window (not settled yet)."""
        return len(self._open)

    def steps(self, epoch: Any = None) -> int:
        """Steps of the calls settled and open (``epoch``: of that epoch only)."""
        return sum(c.steps for c in self.settled if epoch is None or c.epoch == epoch) + \
            sum(c[2] for c in self._open if epoch is None or c[3] == epoch)

    def push(self, start_s: float, end_s: float, steps: int = 1, epoch: int = 0, end_step: int = 0) -> bool:
        """A call ran from ``start_s`` to ``end_s`` (host clock); True when its window closed (synced)."""
        window = self._open
        window.append((start_s, end_s - start_s, steps, epoch, end_step))
        self.pushed += 1
        if window_full(window[0][0], end_s, self.window_s) or self.pushed == self.close_after:
            self.close()
            return True
        return False

    def close(self) -> None:
        """Sync and settle the open window (nothing to do when it is empty)."""
        if not self._open:
            return
        self.sync()
        closed = self.clock()
        calls, self._open = self._open, []
        self.windows += 1
        starts, times = spread([c[0] for c in calls], [c[1] for c in calls], closed)
        w, new = self.windows, tuple.__new__               # a named tuple made without its Python __new__
        self.settled += [new(CallTiming, (start, d, c[1], c[2], c[3], c[4], w))
                         for c, start, d in zip(calls, starts, times)]

    def drop(self) -> None:
        """Leave the open window's calls out, unsynced (a sync after a failure failed)."""
        self._open = []
