"""``Monitor``: tfwb's measurements inside ``model.fit`` (a Keras callback).

Timing is the runner's windowed timing (``tfwb.timing``, which the runner uses too): calls of the train
function run back to back; each call's host time runs from one ``on_train_batch_begin`` to
the next; a window of calls (``WINDOW_S`` of host time) ends with one device sync, and the
window's calls are scaled so they add up to its synced wall time. One call runs
``steps_per_execution`` steps, so its time is divided by them (``RunResult.steps_per_call``).

The loss is read without a sync on the training thread: ``Monitor.async_safe`` lets Keras
hand ``on_train_batch_end`` (and its conversion of the logs to floats, which waits for the
device) to its callback thread pool; the Monitor only keeps the value there. Keras logs
the epoch's running mean of the loss, so each call's own mean loss is recovered from two
running means in a row.

For the length of the fit, ``model.train_function`` (and, during validation,
``model.test_function``) is wrapped: after the first call the wrapper reads how many examples
Keras's loss tracker counted, so the batch size is what a training step consumed (validation never
enters it), and an exception passing through a step is recorded (status ``"failed"``, its type and
text) and written to the history before it goes on to the caller, since Keras calls no
``on_train_end`` then. The model gets its own functions back at the end of the fit.

The live view (a light chart in a notebook, a progress line on a terminal) is updated right after a
window's sync, before the next call starts, so no device work runs meanwhile and its time is left out
of the step times; it is not free, though: it runs on the training thread, so the fit takes longer.
Its cost is budgeted and recorded: a chart is drawn only while the time the view has taken stays
within ``VIEW_SHARE`` of the fit's wall time (otherwise only the progress text changes), and the
result keeps ``extras["view_s"]`` with a note. Beside the median step's rate the result keeps the
rate the fit reached over the wall time of its measured calls (drawing, validation and other
callbacks included: ``extras["wall_examples_per_s"]``), and a note says why when they differ by
more than ``WALL_RATE_GAP``.
"""
from __future__ import annotations

import html
import math
import os
import re
import sys
import warnings
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import keras

from tfwb import stats, timing
from tfwb.config import MIXED_PRECISION, OPTIMIZERS, RunConfig
from tfwb.history import History
from tfwb.interrupts import InterruptBridge
from tfwb.keras.input_rate import InputRate, measure
from tfwb.lifecycle import new_run_id, now_iso, result_from_log, run_clock
from tfwb.utilization import Sampler
from tfwb.observers import RunState, StepLog
from tfwb.records import Note, RunResult
from tfwb.timing import WINDOW_S

__all__ = ["Monitor", "WINDOW_S", "REDRAW_S", "VIEW_SHARE", "WALL_RATE_GAP"]

#: The live view (progress text, and a chart when the budget allows) is updated at most this often.
REDRAW_S = 2.0
#: The live view may take at most this share of the fit's wall time so far: a chart is drawn only
#: when the view's time so far plus the chart's expected cost stays within it.
VIEW_SHARE = 0.03
#: Before a view has drawn its first chart in this process its cost is unknown: it is taken to be the
#: view's ``first_draw_s``, else this (seconds: a light matplotlib figure's first draw on 2 busy cores,
#: benchmarks/view_cost.py); afterwards what the first chart of that view's kind took.
FIRST_DRAW_S = 0.15
#: The wall-clock rate and the median step's rate differing by more than this share gets a note.
WALL_RATE_GAP = 0.05
#: A live chart's curve keeps at most this many points (longer ones are averaged in buckets).
LIVE_POINTS = 400
#: A failed fit's error keeps at most this many characters of the exception's text.
ERROR_CHARS = 2000
INTERRUPTED = "interrupted by the user"
#: What a first chart cost, per view class, in this process (``FIRST_DRAW_S`` until measured).
_FIRST_DRAW: Dict[str, float] = {}


class Monitor(keras.callbacks.Callback):
    """Measure a ``model.fit`` as ``tfwb.run`` measures a run; ``monitor.result`` is its RunResult.

    Args:
        history_path (str | None, default None): a JSON-lines history file the result is
            appended to (``tfwb.load_results`` reads it) when the fit ends, also when it raises;
            checked in ``on_train_begin``.
        label (str | None, default None): the result's label (default: the model's name).
        charts ("auto" | bool, default "auto"): ``"auto"``: a live step-time and utilization chart
            redrawn in place in a notebook, a one-line progress on a terminal, nothing
            elsewhere; ``True``: the chart even outside a kernel (a widget); ``False``: nothing.
            The view takes at most ``VIEW_SHARE`` of the fit's wall time (``extras["view_s"]``).
        warmup_steps (int, default 5): steps kept apart (tracing, autotuning); rounded up to
            whole calls of the train function.
        dataset (iterable | None, default None): the dataset given to fit; after fit it is
            timed on its own (``input_rate``) and the verdict joins the result.
        batch_size (int | None, default None): the global batch; default: the examples Keras's
            loss tracker counted in the first call of the train function, over its steps.
        sample_interval_s (float, default 0.2): utilization sampling period.
        probes, clock, sync, stream: for tests: the sampler's probes, the run clock, the
            device sync (default: ``sync_devices`` where there is a GPU or TPU) and the
            terminal stream.

    Raises:
        ValueError: in ``on_train_begin`` (before the first step) when ``history_path``
            cannot be written.

    The result's ``extras`` hold, beside ``source`` and ``model``: ``view_s`` (seconds the live view
    took: made, progress text, charts), ``view_share`` (of ``fit_wall_s``, the wall time from
    ``on_train_begin`` to the end), ``view_charts`` and ``view_updates`` (charts drawn, progress-only
    updates); ``wall_span_s`` (from the first measured call's start to the last call's end),
    ``wall_steps`` (the steps in it), ``wall_steps_per_s`` and ``wall_examples_per_s`` (the rate the fit
    reached over that span, at the global batch) and ``validation_s`` (seconds in validation).

    Example:
        >>> monitor = tfwb.keras.Monitor("runs.jsonl")                   # doctest: +SKIP
        >>> model.fit(ds, epochs=2, callbacks=[monitor])                 # doctest: +SKIP
        >>> monitor.result.summary()                                      # doctest: +SKIP
    """

    #: Keras may run ``on_train_batch_end`` on its callback thread: the loss is read there.
    async_safe = True

    def __init__(self, history_path: Optional[str] = None, *, label: Optional[str] = None,
                 charts: Any = "auto", warmup_steps: int = 5, dataset: Any = None,
                 batch_size: Optional[int] = None, sample_interval_s: float = 0.2,
                 probes: Optional[Sequence[Any]] = None, clock: Any = None, sync: Any = None,
                 stream: Any = None) -> None:
        super().__init__()
        if charts not in ("auto", True, False):
            raise ValueError(f"charts={charts!r} is not allowed; charts must be 'auto', True or False")
        if isinstance(warmup_steps, bool) or not isinstance(warmup_steps, int) or warmup_steps < 0:
            raise ValueError(f"warmup_steps={warmup_steps!r} is not allowed; use an int >= 0")
        self.history_path = history_path
        self.label = label
        self.charts = charts
        self.warmup_steps = warmup_steps
        self.dataset = dataset
        self.batch_size = batch_size
        self.sample_interval_s = sample_interval_s
        self._probes, self._clock_arg, self._sync_arg = probes, clock, sync
        self._stream = stream
        self.input: Optional[InputRate] = None
        self._result: Optional[RunResult] = None
        self._training = False
        self._view: Any = None
        self._wrapped: Dict[str, Tuple[Callable, Callable]] = {}
        if charts is True or (charts == "auto" and _in_kernel()):
            _import_widgets()                 # now, not inside fit: a first import takes 0.1-0.5 s

    # -- Keras hooks ---------------------------------------------------------------------------
    def on_train_begin(self, logs: Optional[dict] = None) -> None:
        if self._training:                    # its last fit left without a word: record that one first
            _ = self.result
        if self.history_path is not None:
            _check_writable(self.history_path)
        self._training, self._result, self.input = True, None, None
        self._clock = self._clock_arg or run_clock()
        self._t0 = self._clock()
        self._sync = self._sync_arg or _device_sync()
        self._spe = int(getattr(self.model, "steps_per_execution", 1) or 1)
        self._warmup_calls = -(-self.warmup_steps // self._spe)
        self._per_epoch = self.params.get("steps") if self.params else None
        self._calls: List[dict] = []         # per call: start, host, time, steps, epoch, end_step, settled
        self._window: List[dict] = []
        self._windows = 0
        self._running_loss: Dict[tuple, float] = {}
        self._open: Optional[dict] = None
        self._epoch = 0
        self._batch: Optional[int] = None            # examples per step the first train call consumed
        self._epoch_examples: Optional[Tuple[int, int]] = None   # fallback: (examples, steps) of epoch 1
        self._validated = False
        self._val_spans: List[Tuple[float, float]] = []
        self._val_start: Optional[float] = None
        self._stop_reason: Optional[str] = None
        self._interrupts = 0
        self._started_at = now_iso()
        self._run_id = new_run_id()
        self._last_show = -math.inf
        self._view_s = 0.0                   # all the view's time: made, progress, charts, final
        self._view_spans: List[Tuple[float, float]] = []
        self._chart_s, self._charts, self._last_chart_s, self._updates = 0.0, 0, 0.0, 0
        self._sampler = Sampler(self.sample_interval_s, self._probes, clock=self._clock).start()
        self._bridge = InterruptBridge(self._on_interrupt, inline=True)
        self._bridge.arm()
        self._wrap("train_function", first_call=True)
        t = self._clock()
        self._view = _make_view(self.charts, self._stream)
        self._view_made = self._view is not None
        if self._view_made:
            self._view_s += self._clock() - t

    def on_epoch_begin(self, epoch: int, logs: Optional[dict] = None) -> None:
        self._epoch = epoch
        self._validated = False

    def on_train_batch_begin(self, batch: int, logs: Optional[dict] = None) -> None:
        t = self._clock()
        if self._open is not None:
            self._end_call(t)
            if self._window and (timing.window_full(self._window[0]["start"], t, WINDOW_S)
                                 or len(self._calls) == self._warmup_calls):
                self._close()
                t = self._redraw_maybe()
        steps = self._spe
        if self._per_epoch:
            steps = min(steps, self._per_epoch - batch)
        self._open = {"start": t, "steps": steps, "epoch": self._epoch, "end_step": batch + self._spe - 1}
        if self._stop_reason is not None:
            self.model.stop_training = True

    def on_train_batch_end(self, batch: int, logs: Optional[dict] = None) -> None:
        # Keras's callback thread when async (the logs are floats by now): keep the value only.
        loss = (logs or {}).get("loss")
        if loss is not None:
            self._running_loss[(self._epoch, batch)] = float(loss)

    def on_test_begin(self, logs: Optional[dict] = None) -> None:
        if self._training:
            self._settle()                    # validation: the last call ended before it
            self._validated = True
            if self._batch is None and self._epoch_examples is None:
                self._count_epoch()           # before evaluate resets the loss tracker
            self._wrap("test_function")
            self._val_start = self._clock()
        else:
            _warn("model.evaluate")

    def on_test_end(self, logs: Optional[dict] = None) -> None:
        if self._training:
            self._unwrap("test_function")
            if self._val_start is not None:
                t = self._clock()
                self._val_spans.append((self._val_start, t - self._val_start))
                self._val_start = None

    def on_predict_begin(self, logs: Optional[dict] = None) -> None:
        if not self._training:
            _warn("model.predict")

    def on_epoch_end(self, epoch: int, logs: Optional[dict] = None) -> None:
        self._settle()
        if self._batch is None and self._epoch_examples is None and not self._validated:
            self._count_epoch()               # validation reset the tracker: only an epoch without it

    def on_train_end(self, logs: Optional[dict] = None) -> None:
        self._settle()
        self._finish(INTERRUPTED if self._stop_reason else None)

    # -- results -------------------------------------------------------------------------------
    @property
    def result(self) -> Optional[RunResult]:
        """The fit's RunResult (``None`` before a fit).

        A fit whose train or validation step raised gives the failed result written when it
        raised (the exception's type and text, the calls it finished); one that left ``fit``
        from elsewhere (another callback, Keras itself) gives a failed result of the calls it
        finished, built (and written to the history) on first reading.
        """
        if self._result is None and self._training:
            self._drop_open()
            self._finish(None, status="failed",
                         error="fit ended with an exception outside its train and validation steps (another "
                               "callback or Keras itself) before on_train_end; its text was not seen")
        return self._result

    def input_rate(self, dataset: Any, **kwargs: Any) -> InputRate:
        """Time ``dataset`` alone and compare its rate with the fit's step rate.

        The verdict and both rates join ``result`` as a ``data`` note and
        ``extras["input_rate"]`` (the history file keeps the line written at the end of fit).

        Raises:
            ValueError: before a fit with measured steps, or for a dataset too short to time.
        """
        r = self.result
        self.input = measure(dataset, r.median_step_s if r is not None else None, **kwargs)
        self._result = _with_input(r, self.input)
        return self.input

    # -- internals: the model's step functions -------------------------------------------------
    def _wrap(self, attr: str, first_call: bool = False) -> None:
        """Put a wrapper around ``model.<attr>`` that records an exception passing through it (and,
        with ``first_call``, reads the batch after the first call); ``_unwrap`` puts it back."""
        fn = getattr(self.model, attr, None)
        if not callable(fn) or attr in self._wrapped:
            return
        original = _unwrapped(fn)
        monitor = self
        pending = first_call

        def step_function(*args: Any, **kwargs: Any) -> Any:
            nonlocal pending
            try:
                out = original(*args, **kwargs)
            except StopIteration:             # the data ran out: Keras ends the epoch
                raise
            except BaseException as e:
                monitor._raised(e)
                raise
            if pending:
                pending = False
                monitor._first_call_done()
            return out

        step_function._tfwb_original = original        # type: ignore[attr-defined]
        try:
            setattr(self.model, attr, step_function)
        except Exception:  # noqa: BLE001 - a model that refuses the attribute: measured without it
            return
        self._wrapped[attr] = (step_function, original)

    def _unwrap(self, attr: str) -> None:
        wrapper, original = self._wrapped.pop(attr, (None, None))
        if wrapper is not None and getattr(self.model, attr, None) is wrapper:
            try:
                setattr(self.model, attr, original)
            except Exception:  # noqa: BLE001
                pass

    def _first_call_done(self) -> None:
        """The first train call returned: the examples Keras's loss tracker counted in it (one
        device read, in warm-up) over its steps are the batch a training step consumed."""
        seen = _examples_seen(self.model)
        steps = self._open["steps"] if self._open is not None else self._spe
        if seen and steps:
            self._batch = max(1, round(seen / steps))

    def _count_epoch(self) -> None:
        seen = _examples_seen(self.model)
        steps = sum(c["steps"] for c in self._calls if c["epoch"] == self._epoch)
        if seen and steps:
            self._epoch_examples = (seen, steps)

    def _raised(self, error: BaseException) -> None:
        """An exception passed through a step: record the fit as failed (interrupted for a
        KeyboardInterrupt) with the calls it finished, and write it, before it goes on."""
        if not self._training or type(error).__name__ == "OutOfRangeError":   # end of data
            return
        self._drop_open()
        if isinstance(error, KeyboardInterrupt):
            self._finish(INTERRUPTED)
        else:
            self._finish(None, status="failed", error=_error_text(error))

    def _drop_open(self) -> None:
        """The call in progress did not finish: leave it out; settle the window before it."""
        self._open = None
        if self._window:
            try:
                self._close()
            except Exception:  # noqa: BLE001 - a sync after a failure: its calls are left out
                self._window = []

    # -- internals: timing ---------------------------------------------------------------------
    def _on_interrupt(self) -> None:
        """SIGINT (Kernel -> Interrupt, Ctrl-C): stop after the current call; a second one leaves fit."""
        self._interrupts += 1
        if self._stop_reason is None:
            self._stop_reason = INTERRUPTED
        if self.model is not None:
            self.model.stop_training = True
        if self._interrupts > 1 and self._training:       # KeyboardInterrupt follows: keep what ran
            self._finish(INTERRUPTED)

    def _end_call(self, t: float) -> None:
        call = self._open
        self._open = None
        call["host"] = t - call["start"]
        self._calls.append(call)
        self._window.append(call)

    def _close(self) -> None:
        """Sync; spread the window's synced wall time over its calls by their host times (``tfwb.timing``)."""
        self._sync()
        closed = self._clock()
        w, self._window = self._window, []
        self._windows += 1
        starts, times = timing.spread([c["start"] for c in w], [c["host"] for c in w], closed)
        for c, start, d in zip(w, starts, times):
            c["window"], c["start"], c["time"] = self._windows, start, d

    def _settle(self) -> None:
        """Close the open call and window (epoch end, validation, train end)."""
        if self._open is not None:
            self._sync()
            self._end_call(self._clock())
        if self._window:
            self._close()

    # -- internals: the live view --------------------------------------------------------------
    def _redraw_maybe(self) -> float:
        now = self._clock()
        if self._view is None or now - self._last_show < REDRAW_S:
            return now
        self._last_show = now
        self._show()
        return self._clock()

    def _chart_allowed(self, now: float) -> bool:
        """Whether a chart now keeps the view's time within ``VIEW_SHARE`` of the fit's wall time."""
        if self._charts:
            expected = max(self._last_chart_s, self._chart_s / self._charts)
        else:
            name = type(self._view).__name__
            expected = _FIRST_DRAW.get(name, getattr(self._view, "first_draw_s", FIRST_DRAW_S))
        return self._view_s + expected <= VIEW_SHARE * (now - self._t0 + expected)

    def _show(self, final: Optional[RunResult] = None) -> None:
        """Update the view: a chart when the budget allows, else the progress text; timed."""
        view = self._view
        if view is None:
            return
        t = self._clock()
        chart = False
        try:
            if self._chart_allowed(t):
                chart = True
                r = final if final is not None else self._build("ok", None, partial=True)
                view.draw(r, self._steps_done(), self._total(), final=final is not None)
            else:
                progress = getattr(view, "progress", None)
                if progress is not None:
                    progress(self._steps_done(), self._total(), final)
                    self._updates += 1
        except Exception as e:  # noqa: BLE001 - a drawing must never end the user's fit
            self._view = None
            warnings.warn(f"tfwb.keras.Monitor stopped drawing: {type(e).__name__}: {e}", stacklevel=2)
        dt = self._clock() - t
        self._view_s += dt
        self._view_spans.append((t, dt))
        if chart:
            self._charts += 1
            self._chart_s += dt
            self._last_chart_s = dt
            if self._charts == 1:
                _FIRST_DRAW[type(view).__name__] = dt

    def _steps_done(self) -> int:
        return sum(c["steps"] for c in self._calls)

    def _total(self) -> Optional[int]:
        epochs = (self.params or {}).get("epochs")
        return self._per_epoch * epochs if self._per_epoch and epochs else None

    # -- internals: the result -----------------------------------------------------------------
    def _finish(self, stop_reason: Optional[str], status: Optional[str] = None,
                error: Optional[str] = None) -> None:
        if not self._training:
            return
        self._training = False
        for attr in list(self._wrapped):
            self._unwrap(attr)
        self._bridge.disarm()
        samples = self._sampler.stop()
        status = status or ("interrupted" if stop_reason else "ok")
        r = self._build(status, stop_reason, samples=samples, error=error)
        if r.median_step_s and status != "failed":
            # How far from the limit, as on Workbench runs: the model's FLOPs and this machine's peak
            # (tfwb.tf.runner.step_limits.measure_limits never raises: what it cannot read is None with a reason).
            try:
                from tfwb.tf.runner.step_limits import measure_limits as limits   # lazy: it loads TensorFlow's pieces

                notes: List[str] = []
                fields = limits(r.config, getattr(self.model, "distribute_strategy", None), self.model, notes)
                r = _replace(r, limits=fields, notes=r.notes + tuple(Note(n, "steps") for n in notes))
            except Exception as e:  # noqa: BLE001 - the run's result must not be lost to the count
                r = _replace(r, notes=r.notes + (Note(f"other: MFU not counted: {e}", "other"),))
        if self.dataset is not None and r.median_step_s and status != "failed":
            try:
                self.input = measure(self.dataset, r.median_step_s)
                r = _with_input(r, self.input)
            except Exception as e:  # noqa: BLE001 - the run's result must not be lost to the timing
                r = _replace(r, notes=r.notes + (Note(f"data: the dataset could not be timed alone: {e}", "data"),))
        self._show(final=r)
        r = self._with_view(r)
        self._result = r
        if self.history_path is not None:
            History(self.history_path).append(r)

    def _with_view(self, r: RunResult) -> RunResult:
        """``r`` with what the live view cost: ``extras`` (``view_s``, ``view_share``, ``fit_wall_s``,
        ``view_charts``, ``view_updates``) and, when there was a view, a note."""
        wall = max(self._clock() - self._t0, 1e-9)
        extras = {**r.extras, "view_s": self._view_s, "view_share": self._view_s / wall, "fit_wall_s": wall,
                  "view_charts": self._charts, "view_updates": self._updates}
        notes = r.notes
        if self._view_made:
            notes = notes + (Note(
                f"other: the live view took {self._view_s:.2f} s, {100 * self._view_s / wall:.1f} % of the fit's "
                f"{wall:.1f} s ({self._charts} chart(s), {self._updates} progress update(s)); it draws a chart "
                f"only while that keeps it within {100 * VIEW_SHARE:.0f} % of the fit's time "
                "(tfwb.keras.monitor.VIEW_SHARE)", "other"),)
        return _replace(r, extras=extras, notes=notes)

    def _batch_now(self) -> Tuple[Optional[int], Optional[str]]:
        """The global batch and, when it is not what a train step was seen to consume, why."""
        if self.batch_size is not None:
            return self.batch_size, None
        if self._batch is not None:
            return self._batch, None
        if self._epoch_examples is not None:
            seen, steps = self._epoch_examples
            return max(1, round(seen / steps)), (
                f"other: batch_size {round(seen / steps)} estimated from the {seen} examples of the first epoch's "
                f"{steps} steps (the first step's count was not readable); pass Monitor(batch_size=...)")
        return None, "other: batch_size unknown (Keras counted no examples); pass Monitor(batch_size=...)"

    def _build(self, status: str, stop_reason: Optional[str], *, samples: Any = None,
               error: Optional[str] = None, partial: bool = False) -> RunResult:
        """The RunResult of the settled calls so far (calls with fewer steps than a full call left out);
        ``partial``: for the live view (no losses, no fingerprint, no wall-clock facts)."""
        settled = [c for c in self._calls if "time" in c]
        full = [c for c in settled if c["steps"] == self._spe]
        windows: List[int] = []
        for j, c in enumerate(full):
            if j and full[j - 1]["window"] == c["window"]:
                windows[-1] += 1
            else:
                windows.append(1)
        losses: List[float] = []
        if not partial:
            per_call = _call_losses(settled, self._running_loss, self._spe)
            losses = [per_call[i] for i, c in enumerate(settled) if c["steps"] == self._spe]
        log = StepLog(times_s=[c["time"] for c in full], starts_s=[c["start"] for c in full],
                      losses=losses, windows=windows)
        w = min(self._warmup_calls, len(full))
        batch, batch_note = self._batch_now()
        cfg = self._config(len(full) - w, w, batch)
        notes = [Note("steps: timed per call of fit's train function, windows synced as tfwb.run syncs them; "
                      "input wait is not visible inside fit's graph (see input_rate)", "steps"),
                 Note("data: the pipeline is the one given to fit; RunConfig's input knobs do not describe it",
                      "data")]
        if len(full) < len(settled):
            notes.append(Note(f"steps_per_execution={self._spe}: {len(settled) - len(full)} call(s) at an "
                              "epoch's end ran fewer steps and are left out of the times", "steps"))
        if batch_note:
            notes.append(Note(batch_note, "other"))
        extras: Dict[str, Any] = {"source": "keras.fit", "model": getattr(self.model, "name", "")}
        if not partial:
            wall_extras, wall_notes = self._wall_rate(settled, full[w:], batch)
            extras.update(wall_extras)
            notes.extend(wall_notes)
        ran = len(full) * self._spe
        planned = self._total() if stop_reason is not None else None    # a stop says how far fit had to go
        state = RunState(config=cfg, log=log, clock=self._clock, total_steps=max(ran, planned or 0),
                         warmup_steps=w * self._spe, steps_per_call=self._spe, stop_reason=stop_reason,
                         interrupted=stop_reason is not None,
                         samples=tuple(samples if samples is not None else self._sampler.samples))
        return result_from_log(state, warmup_calls=w, status=status, error=error, started_at=self._started_at,
                               fingerprint={} if partial else _fingerprint(cfg, self.model), notes=notes,
                               extras=extras, run_id=self._run_id,
                               replicas=getattr(getattr(self.model, "distribute_strategy", None),
                                                "num_replicas_in_sync", None))

    def _wall_rate(self, settled: Sequence[dict], measured: Sequence[dict],
                   batch: Optional[int]) -> Tuple[dict, List[Note]]:
        """The rate the fit reached over the wall time its measured calls spanned (from the first
        measured call's start to the last call's end: drawing, validation, other callbacks and
        short calls at an epoch's end included; examples counted at the global batch), against the
        median step's; a note says what the span holds beside the calls when they differ by more
        than ``WALL_RATE_GAP``."""
        if not measured:
            return {}, []
        start = measured[0]["start"]
        calls = [c for c in settled if c["start"] >= start]
        end = max(c["start"] + c["time"] for c in calls)
        span = end - start
        steps = sum(c["steps"] for c in calls)
        if span <= 0 or not steps:
            return {}, []
        busy = sum(c["time"] for c in calls)
        view_in = _inside(self._view_spans, start, end)
        validation_in = _inside(self._val_spans, start, end)
        other = max(0.0, span - busy - view_in - validation_in)
        median_step = stats.median([c["time"] / self._spe for c in measured])
        rate, median_rate, unit = steps / span, 1.0 / median_step, "steps"
        if batch:
            rate, median_rate, unit = rate * batch, median_rate * batch, "examples"
        extras = {"wall_span_s": span, "wall_steps": steps, "wall_steps_per_s": steps / span,
                  "validation_s": sum(d for _, d in self._val_spans)}
        if batch:
            extras["wall_examples_per_s"] = rate
        notes: List[Note] = []
        gap = rate / median_rate - 1
        if abs(gap) > WALL_RATE_GAP:
            mean_gap = (busy / steps) / median_step - 1
            notes.append(Note(
                f"steps: over the {span:.1f} s its measured calls spanned the fit ran {rate:,.0f} {unit}/s, "
                f"{100 * abs(gap):.0f} % {'below' if gap < 0 else 'above'} the {median_rate:,.0f} {unit}/s of its "
                f"median step: the live view took {view_in:.2f} s of that span, validation {validation_in:.2f} s, "
                f"other time between calls (callbacks, epoch ends) {other:.2f} s, and the calls' mean step is "
                f"{100 * abs(mean_gap):.0f} % {'above' if mean_gap >= 0 else 'below'} their median", "steps"))
        return extras, notes

    def _config(self, measured_calls: int, warmup_calls: int, batch: Optional[int]) -> RunConfig:
        model = self.model
        opt = getattr(model, "optimizer", None)
        name = type(opt).__name__.lower() if opt is not None else ""
        lr = None
        try:
            lr = float(opt.learning_rate)
        except Exception:  # noqa: BLE001 - a schedule has no single value
            pass
        policy = getattr(getattr(model, "dtype_policy", None), "name", "float32")
        d = {"workload": f"fit:{getattr(model, 'name', 'model')}", "batch_size": batch or 1,
             "steps": max(1, measured_calls * self._spe), "warmup_steps": warmup_calls * self._spe,
             "steps_per_execution": self._spe, "timing": "windowed",
             "jit_compile": bool(getattr(model, "jit_compile", False) is True),
             "mixed_precision": policy if policy in MIXED_PRECISION else "off",
             "label": self.label or getattr(model, "name", "")}
        if name in OPTIMIZERS:
            d["optimizer"] = name
        if lr and lr > 0:
            d["learning_rate"] = min(lr, 10.0)
        return RunConfig.from_dict(d, check_workload=False)


# -- helpers ---------------------------------------------------------------------------------------
def _check_writable(path: Any) -> None:
    """Fail before training when ``path`` cannot take a line; its folder is created (as the Workbench's)."""
    try:
        History(path).ensure_writable()
    except OSError as e:
        raise ValueError(f"history_path={str(path)!r} cannot be written ({e.strerror or e}); pick a file in a "
                         "folder you can write, or history_path=None") from None


def _warn(what: str) -> None:
    warnings.warn(f"tfwb.keras.Monitor was given to {what}, which does not train: it measures nothing there; "
                  "pass it to model.fit(callbacks=[...])", UserWarning, stacklevel=3)


def _device_sync():
    from tfwb.tf.runner.devices import device_sync
    return device_sync()


def _fingerprint(cfg: RunConfig, model: Any) -> dict:
    from tfwb.tf.runner.fingerprint import fingerprint
    try:
        return fingerprint(cfg, getattr(model, "distribute_strategy", None))
    except Exception:  # noqa: BLE001 - a fingerprint must not cost the result
        return {"config": cfg.to_dict()}


def _unwrapped(fn: Callable) -> Callable:
    """``fn`` without the Monitor wrappers around it (one left by a fit that ended abruptly)."""
    while hasattr(fn, "_tfwb_original"):
        fn = fn._tfwb_original
    return fn


def _error_text(error: BaseException) -> str:
    """``"ValueError: the text"``, without terminal colour codes (Keras bolds a layer's message), cut
    to ``ERROR_CHARS``.

    Example:
        >>> _error_text(ValueError("\\x1b[1mbad\\x1b[0m input"))
        'ValueError: bad input'
    """
    text = re.sub(r"\x1b\[[0-9;]*m", "", f"{type(error).__name__}: {error}").strip()
    return text if len(text) <= ERROR_CHARS else text[:ERROR_CHARS - 1] + "\u2026"


def _inside(spans: Sequence[Tuple[float, float]], start: float, end: float) -> float:
    """Seconds of ``(start, duration)`` spans that fall between ``start`` and ``end``."""
    return sum(max(0.0, min(s + d, end) - max(s, start)) for s, d in spans)


def _examples_seen(model: Any) -> Optional[int]:
    """Examples Keras's loss tracker counted since its last reset (it weights each batch by its size)."""
    try:
        return int(float(model._loss_tracker.count))
    except Exception:  # noqa: BLE001 - a private attribute of Keras; absent: unknown
        return None


def _call_losses(calls: Sequence[dict], running: Dict[tuple, float], spe: int) -> List[float]:
    """Each call's own mean loss from Keras's running epoch means: (n_k m_k - n_{k-1} m_{k-1}) / steps."""
    out: List[float] = []
    prev_epoch, prev_n, prev_m = None, 0, 0.0
    for c in calls:
        m = running.get((c["epoch"], c["end_step"]), math.nan)
        if c["epoch"] != prev_epoch:
            prev_epoch, prev_n, prev_m = c["epoch"], 0, 0.0
        n = prev_n + c["steps"]
        out.append((n * m - prev_n * prev_m) / c["steps"] if prev_n else m)
        prev_n, prev_m = n, m
    return out


def _replace(r: RunResult, **changes: Any) -> RunResult:
    import dataclasses
    return dataclasses.replace(r, **changes)


def _with_input(r: RunResult, rate: InputRate) -> RunResult:
    notes = tuple(n for n in r.notes if not n.startswith("data: input-rate")) + (
        Note("data: input-rate " + rate.text(), "data"),)
    return _replace(r, notes=notes, extras={**r.extras, "input_rate": rate.to_dict()})


def _final_text(r: RunResult) -> str:
    """What the view says at the end: the summary, and the wall-clock rate when it differs from the
    median step's (the note of kind ``"steps"`` that says why).

    Example:
        >>> _final_text(RunResult(config=RunConfig(), status="failed", error="ValueError: bad"))
        'images: failed: ValueError: bad'
    """
    wall = [n for n in r.notes_of("steps") if n.startswith("steps: over the ")]
    return r.summary() + ("; " + wall[0][len("steps: "):] if wall else "")


# -- what is shown during fit ----------------------------------------------------------------------
def _in_kernel() -> bool:
    ip = sys.modules.get("IPython")
    try:
        return ip is not None and getattr(ip.get_ipython(), "kernel", None) is not None
    except Exception:  # noqa: BLE001
        return False


def _import_widgets() -> None:
    """Import what the chart view needs (a first import of ipywidgets takes 0.1-0.5 s on 2 cores)."""
    import importlib

    for name in ("ipywidgets", "IPython.display"):
        try:
            importlib.import_module(name)
        except ImportError:
            pass


def _make_view(charts: Any, stream: Any) -> Any:
    if charts is False:
        return None
    if charts is True or _in_kernel():
        return _ChartView()
    out = stream or sys.stderr
    return _LineView(out) if stream is not None or getattr(out, "isatty", lambda: False)() else None


class _LineView:
    """One progress line on a terminal, redrawn with ``\\r``."""

    #: A line costs about a millisecond (building the partial result included).
    first_draw_s = 0.01

    def __init__(self, stream: Any) -> None:
        self.stream = stream

    def draw(self, r: RunResult, done: int, total: Optional[int], final: bool = False) -> None:
        m = r.median_step_s
        text = _final_text(r) if final else (self._head(r.config.label or r.config.workload, done, total)
                                            + (f", median step {m * 1e3:.2f} ms" if m else ""))
        self._write(text, final)

    def progress(self, done: int, total: Optional[int], final: Optional[RunResult] = None) -> None:
        if final is not None:
            self._write(_final_text(final), True)
        else:
            self._write(self._head("fit", done, total), False)

    @staticmethod
    def _head(name: str, done: int, total: Optional[int]) -> str:
        return f"{name}: " + (f"step {done}/{total}" if total else f"step {done}")

    def _write(self, text: str, final: bool) -> None:
        self.stream.write("\r" + text + ("\n" if final else ""))
        self.stream.flush()


class _ChartView:
    """The live chart (``_live_svg``, an SVG the browser draws) in an Image widget, a status line, and a
    button that draws the Workbench's full run chart (``tfwb.ui.charts.run_chart_png``) after the fit,
    on request: a full chart takes seconds on 2 busy cores, far over the view's budget inside a fit."""

    #: An SVG of a few hundred points and its widget update: about a millisecond.
    first_draw_s = 0.01

    def __init__(self) -> None:
        import ipywidgets as W  # lazy: only a notebook needs widgets
        from IPython.display import display

        self.image = W.Image(format="svg+xml")
        self.status = W.HTML("fit: starting")
        self.full = W.Button(description="full chart", disabled=True,
                             tooltip="draw the Workbench's run chart of this fit (every step; takes a while)")
        self.full.on_click(self._draw_full)
        self.box = W.VBox([self.status, self.image, self.full])
        self.result: Optional[RunResult] = None
        display(self.box)

    def draw(self, r: RunResult, done: int, total: Optional[int], final: bool = False) -> None:
        self.image.format = "svg+xml"
        self.image.value = _live_svg(r)
        self.progress(done, total, r if final else None)

    def progress(self, done: int, total: Optional[int], final: Optional[RunResult] = None) -> None:
        if final is not None:
            self.result = final
            self.status.value = html.escape(_final_text(final))
            self.full.disabled = False
        else:
            self.status.value = f"fit: step {done}" + (f"/{total}" if total else "")

    def _draw_full(self, _button: Any = None) -> None:
        from tfwb.ui.charts import run_chart_png

        if self.result is not None:
            png = run_chart_png(self.result)
            self.image.format = "png"
            self.image.value = png


#: The live chart's size (px) and its two panels' left and right edges.
SVG_W, SVG_H = 760, 190
_STEPS_X, _UTIL_X, _TOP, _BOTTOM = (48, 430), (490, 745), 26, 160


def _live_svg(r: RunResult) -> bytes:
    """The live view's chart of ``r`` as SVG: time per step of each call (warm-up grey, measured
    blue, their median dashed) beside CPU (and GPU) utilization on the run clock, at most
    ``LIVE_POINTS`` points a curve. Built as text, without matplotlib: about a millisecond, against
    0.1-0.3 s for a light matplotlib figure and 1.2-3 s for the full run chart on 2 busy cores
    (benchmarks/view_cost.py).

    Example:
        >>> _live_svg(result)[:4]
        b'<svg'
    """
    from tfwb.ui.charts.common import COMPUTE_COLOR, MEDIAN_COLOR, MUTED_COLOR, WARMUP_COLOR
    from tfwb.ui.charts.utilization import GPU_COLORS, OTHER_CPU_COLOR

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{SVG_W}" height="{SVG_H}" '
           f'font-family="sans-serif" font-size="11"><rect width="100%" height="100%" fill="white"/>']

    def text(x: float, y: float, s: str, anchor: str = "start", color: str = "black", size: int = 11) -> None:
        out.append(f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}" fill="{color}" font-size="{size}">'
                   f'{html.escape(s)}</text>')

    def line(xs: Sequence[float], ys: Sequence[float], color: str, dash: str = "", width: float = 1.3) -> None:
        runs: List[List[str]] = [[]]
        for x, y in zip(xs, ys):
            if y == y:                                    # a NaN ends a run of points
                runs[-1].append(f"{x:.1f},{y:.1f}")
            elif runs[-1]:
                runs.append([])
        for pts in runs:
            if len(pts) > 1:
                out.append(f'<polyline points="{" ".join(pts)}" fill="none" stroke="{color}" '
                           f'stroke-width="{width}"' + (f' stroke-dasharray="{dash}"' if dash else "") + "/>")

    def frame(x0: float, x1: float) -> None:
        out.append(f'<rect x="{x0}" y="{_TOP}" width="{x1 - x0}" height="{_BOTTOM - _TOP}" fill="none" '
                   f'stroke="#cccccc"/>')

    # Left: time per step of each call.
    x0, x1 = _STEPS_X
    frame(x0, x1)
    warm = [t * 1e3 for t in r.warmup_times_s]
    meas = [t * 1e3 for t in r.step_times_s]
    name = r.config.label or r.config.workload
    reference = meas or warm
    if reference:
        top = max(reference)
        top = min(top * 1.12, 3 * stats.quantile(reference, 0.95)) if top > 0 else 1.0
        n = len(warm) + len(meas)
        px = (x1 - x0) / max(n, 1)

        def y_of(v: float) -> float:
            return _BOTTOM - (_BOTTOM - _TOP) * min(v, top) / top

        wx, wy = _thin([x0 + (i + 0.5) * px for i in range(len(warm))], [y_of(v) for v in warm])
        mx, my = _thin([x0 + (len(warm) + i + 0.5) * px for i in range(len(meas))], [y_of(v) for v in meas])
        if len(warm) == 1:
            out.append(f'<circle cx="{wx[0]:.1f}" cy="{wy[0]:.1f}" r="2" fill="{WARMUP_COLOR}"/>')
        line(wx, wy, WARMUP_COLOR)
        line(mx, my, COMPUTE_COLOR)
        divider = x0 + len(warm) * px
        if warm:
            out.append(f'<line x1="{divider:.1f}" x2="{divider:.1f}" y1="{_TOP}" y2="{_BOTTOM}" '
                       f'stroke="{MUTED_COLOR}" stroke-dasharray="3 3"/>')
            text(divider - 3, _BOTTOM + 13, "warm-up", "end", MUTED_COLOR, 10)
        if meas:
            med = stats.median(meas)
            y = y_of(med)
            out.append(f'<line x1="{divider:.1f}" x2="{x1}" y1="{y:.1f}" y2="{y:.1f}" '
                       f'stroke="{MEDIAN_COLOR}" stroke-dasharray="4 3"/>')
            text(x1 - 4, y - 4, f"median {med:,.2f} ms", "end", MEDIAN_COLOR, 10)
            text(divider + 3, _BOTTOM + 13, "1", "start", MUTED_COLOR, 10)
            text(x1, _BOTTOM + 13, f"{len(meas)}", "end", MUTED_COLOR, 10)
        text(x0 - 4, _TOP + 4, f"{top:,.0f}" if top >= 10 else f"{top:.2g}", "end", MUTED_COLOR, 10)
        text(x0 - 4, _BOTTOM, "0", "end", MUTED_COLOR, 10)
    title = f"{name}: ms per step of each call" + (f" ({len(meas)} measured)" if meas else "")
    text(x0, _TOP - 8, title, size=12)
    text((x0 + x1) / 2, _BOTTOM + 26, "calls of the train function, in order", "middle", MUTED_COLOR, 10)

    # Right: utilization on the run clock.
    x0, x1 = _UTIL_X
    frame(x0, x1)
    samples = r.samples
    cores = (r.fingerprint or {}).get("cpu_count") or os.cpu_count() or 1
    n_gpus = max((len(s.gpu_util_pct) for s in samples), default=0)
    if samples:
        t0, t1 = samples[0].t_s, max(samples[-1].t_s, samples[0].t_s + 1e-3)
        xs = [x0 + (x1 - x0) * (s.t_s - t0) / (t1 - t0) for s in samples]

        def y_pct(v: Optional[float]) -> float:
            return math.nan if v is None or v != v else _BOTTOM - (_BOTTOM - _TOP) * min(max(v, 0.0), 100.0) / 100

        proc = [s.cpu_process_pct / cores if s.cpu_process_pct is not None else None for s in samples]
        other = [max(0.0, s.cpu_system_pct - p) if s.cpu_system_pct is not None and p is not None else None
                 for s, p in zip(samples, proc)]
        line(*_thin(xs, [y_pct(v) for v in other]), OTHER_CPU_COLOR, "4 3")
        line(*_thin(xs, [y_pct(v) for v in proc]), COMPUTE_COLOR)
        for g in range(n_gpus):
            util = [s.gpu_util_pct[g] if g < len(s.gpu_util_pct) else None for s in samples]
            line(*_thin(xs, [y_pct(v) for v in util]), GPU_COLORS[g % len(GPU_COLORS)])
        text(x0, _BOTTOM + 13, f"{t0:.{0 if t1 >= 10 else 1}f} s", "start", MUTED_COLOR, 10)
        text(x1, _BOTTOM + 13, f"{t1:.{0 if t1 >= 10 else 1}f} s", "end", MUTED_COLOR, 10)
    text(x0 - 4, _TOP + 4, "100", "end", MUTED_COLOR, 10)
    text(x0 - 4, _BOTTOM, "0", "end", MUTED_COLOR, 10)
    text(x0, _TOP - 8, f"% CPU of {cores} cores" + (", GPU busy" if n_gpus else ", no GPU"), size=12)
    text((x0 + x1) / 2 - 4, _BOTTOM + 26, "this process (\u2014)", "end", COMPUTE_COLOR, 10)
    text((x0 + x1) / 2 + 4, _BOTTOM + 26, "other programs (- -)", "start", OTHER_CPU_COLOR, 10)
    out.append("</svg>")
    return "".join(out).encode()


def _thin(xs: Sequence[float], ys: Sequence[float], most: int = LIVE_POINTS) -> Tuple[List[float], List[float]]:
    """At most ``most`` points: longer series averaged in buckets of consecutive points.

    Example:
        >>> _thin([1, 2, 3, 4], [10, 20, 30, 40], most=2)
        ([1.5, 3.5], [15.0, 35.0])
    """
    n = len(ys)
    if n <= most:
        return list(xs), list(ys)
    k = -(-n // most)
    bx, by = [], []
    for i in range(0, n, k):
        cx, cy = xs[i:i + k], ys[i:i + k]
        bx.append(sum(cx) / len(cx))
        by.append(sum(cy) / len(cy))
    return bx, by
