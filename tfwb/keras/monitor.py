"""``Monitor``: tfwb's measurements inside ``model.fit`` (a Keras callback), an adapter.

The Monitor holds Keras's hooks and the wrapping of the model's step functions; the rest is
elsewhere: the windows in ``tfwb.timing`` (``PushWindows``), the RunResult, its notes and the closing
line in ``tfwb.fit_result``, the view's budget in ``tfwb.ui.view_budget``, the views themselves in
``tfwb.ui.fit_view`` (the live chart: ``tfwb.ui.charts.live_svg``).

Timing is the runner's windowed timing (``tfwb.timing``, which the runner uses too): calls of the train
function run back to back; each call's host time runs from one ``on_train_batch_begin`` to
the next, pushed into ``tfwb.timing.PushWindows``; a window of calls (``WINDOW_S`` of host time)
ends with one device sync, and the window's calls are scaled so they add up to its synced wall time. One call runs
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

A fit can also end outside its steps (another callback raises, Keras itself fails, the kernel dies),
and no hook says so. So the history gets a record with status ``"running"`` as the fit starts, which
the complete record (the same ``run_id``) replaces when the history is read (``tfwb.history``); one
never completed reads as failed. In IPython the Monitor also listens for the end of the cell
(``post_run_cell``): a fit still open then is recorded as failed with the exception that ended the
cell (its ``error_in_exec``). Elsewhere reading ``result`` records it.

The live view (a light chart in a notebook, a progress line on a terminal) is updated right after a
window's sync, before the next call starts, so no device work runs meanwhile and its time is left out
of the step times; it is not free, though: it runs on the training thread, so the fit takes longer.
Its cost is budgeted and recorded: a chart is drawn only while the time the view has taken stays
within ``VIEW_SHARE`` of the fit's wall time (otherwise only the progress text changes), and the
result keeps ``extras["view_s"]`` with a note. Beside the median step's rate the result keeps the
rate the fit reached over the wall time of its measured calls (drawing, validation and other
callbacks included: ``extras["wall_examples_per_s"]``), and a note says why when they differ by
more than ``WALL_RATE_GAP`` (``tfwb.fit_result``).
"""
from __future__ import annotations

import dataclasses
import sys
import threading
import warnings
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import keras

from tfwb import timing
from tfwb.config import RunConfig
from tfwb.fit_result import FitModel, FitRecord, error_text, with_input, with_view
from tfwb.history import History
from tfwb.interrupts import INTERRUPTED, InterruptBridge
from tfwb.keras.input_rate import InputRate, measure
from tfwb.lifecycle import new_run_id, now_iso, run_clock
from tfwb.records import RUNNING, Note, RunResult
from tfwb.timing import WINDOW_S
from tfwb.ui import fit_view
from tfwb.ui.view_budget import REDRAW_S, VIEW_SHARE, ViewBudget
from tfwb.utilization import Sampler

__all__ = ["Monitor", "WINDOW_S", "REDRAW_S", "VIEW_SHARE"]

#: The error of a fit that left ``fit`` outside its steps, when no exception text was seen.
LEFT_FIT = ("fit ended with an exception outside its train and validation steps (another callback or Keras "
            "itself) before on_train_end; its text was not seen")

# WINDOW_S (``tfwb.timing``), REDRAW_S and VIEW_SHARE (``tfwb.ui.view_budget``) are read from this module
# at each fit's start: setting them here changes the Monitor's fits only.


class Monitor(keras.callbacks.Callback):
    """Measure a ``model.fit`` as ``tfwb.run`` measures a run; ``monitor.result`` is its RunResult.

    Args:
        history_path (str | None, default None): a JSON-lines history file (``tfwb.load_results``
            reads it), checked in ``on_train_begin``: a record with status ``"running"`` is appended
            as the fit starts and the complete one when it ends, also when it raises; a fit that
            ends without a word (another callback raised, the kernel died) reads as failed.
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
        self._unhook: Callable[[], None] = lambda: None
        if charts is True or (charts == "auto" and fit_view.in_kernel()):
            fit_view.import_widgets()         # now, not inside fit: a first import takes 0.1-0.5 s

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
        self._per_epoch = self.params.get("steps") if self.params else None
        self._record = FitRecord(self._spe, -(-self.warmup_steps // self._spe), label=self.label,
                                 batch_size=self.batch_size, started_at=now_iso(), run_id=new_run_id())
        self._calls = timing.PushWindows(self._clock, self._sync, WINDOW_S, close_after=self._record.warmup_calls)
        self._open: Optional[Tuple[float, int, int, int]] = None   # the call in progress: start, steps, epoch, end step
        self._epoch = 0
        self._validated = False
        self._val_start: Optional[float] = None
        self._stop_reason: Optional[str] = None
        self._interrupts = 0
        self._budget = ViewBudget(self._clock, share=VIEW_SHARE, interval_s=REDRAW_S, start_s=self._t0)
        self._sampler = Sampler(self.sample_interval_s, self._probes, clock=self._clock).start()
        self._bridge = InterruptBridge(self._on_interrupt, inline=True)
        self._bridge.arm()
        self._wrap("train_function", first_call=True)
        t = self._clock()
        self._view = fit_view.make_view(self.charts, self._stream)
        self._view_made = self._view is not None
        if self._view_made:
            self._budget.spend(self._clock() - t)
        if self.history_path is not None:     # on disk from the start: a fit that dies anywhere is there
            History(self.history_path).append(self._build(RUNNING, None, partial=True))
        self._unhook = _after_cell(self._cell_ended)

    def on_epoch_begin(self, epoch: int, logs: Optional[dict] = None) -> None:
        self._epoch = epoch
        self._validated = False

    def on_train_batch_begin(self, batch: int, logs: Optional[dict] = None) -> None:
        t = self._clock()
        if self._open is not None and self._end_call(t):
            t = self._redraw_maybe()          # a window closed (synced): no device work runs now
        steps = self._spe
        if self._per_epoch:
            steps = min(steps, self._per_epoch - batch)
        self._open = (t, steps, self._epoch, batch + self._spe - 1)
        if self._stop_reason is not None:
            self.model.stop_training = True

    def on_train_batch_end(self, batch: int, logs: Optional[dict] = None) -> None:
        # Keras's callback thread when async (the logs are floats by now): keep the value only.
        loss = (logs or {}).get("loss")
        if loss is not None:
            self._record.running_loss[(self._epoch, batch)] = float(loss)

    def on_test_begin(self, logs: Optional[dict] = None) -> None:
        if self._training:
            self._settle()                    # validation: the last call ended before it
            self._validated = True
            if self._record.first_batch is None and self._record.epoch_examples is None:
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
                self._record.validation_spans.append((self._val_start, t - self._val_start))
                self._val_start = None

    def on_predict_begin(self, logs: Optional[dict] = None) -> None:
        if not self._training:
            _warn("model.predict")

    def on_epoch_end(self, epoch: int, logs: Optional[dict] = None) -> None:
        self._settle()
        if self._record.first_batch is None and self._record.epoch_examples is None and not self._validated:
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
            self._finish(None, status="failed", error=LEFT_FIT)
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
        self._result = with_input(r, self.input)
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
        steps = self._open[1] if self._open is not None else self._spe
        if seen and steps:
            self._record.first_batch = max(1, round(seen / steps))

    def _count_epoch(self) -> None:
        seen = _examples_seen(self.model)
        steps = self._calls.steps(self._epoch)
        if seen and steps:
            self._record.epoch_examples = (seen, steps)

    def _raised(self, error: BaseException) -> None:
        """An exception passed through a step: record the fit as failed (interrupted for a
        KeyboardInterrupt) with the calls it finished, and write it, before it goes on."""
        if not self._training or type(error).__name__ == "OutOfRangeError":   # end of data
            return
        self._drop_open()
        if isinstance(error, KeyboardInterrupt):
            self._finish(INTERRUPTED)
        else:
            self._finish(None, status="failed", error=error_text(error))

    def _cell_ended(self, cell: Any = None) -> None:
        """IPython's ``post_run_cell``: a fit still open when its cell ended left ``fit`` without a word
        (another callback raised, or Keras itself): record it as failed with the cell's exception."""
        self._unhook()
        if not self._training:
            return
        self._drop_open()
        error = getattr(cell, "error_in_exec", None)
        if isinstance(error, KeyboardInterrupt):
            self._finish(INTERRUPTED)
        elif isinstance(error, BaseException):
            self._finish(None, status="failed", error=error_text(error))
        else:
            self._finish(None, status="failed", error=LEFT_FIT)

    def _drop_open(self) -> None:
        """The call in progress did not finish: leave it out; settle the window before it."""
        self._open = None
        try:
            self._calls.close()
        except Exception:  # noqa: BLE001 - a sync after a failure: its calls are left out
            self._calls.drop()

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

    def _end_call(self, t: float) -> bool:
        """The open call ended at ``t``: push it (``tfwb.timing.PushWindows``, whose window also closes at
        the warm-up's end); True when its window closed."""
        start, steps, epoch, end_step = self._open
        self._open = None
        return self._calls.push(start, t, steps, epoch, end_step)

    def _settle(self) -> None:
        """Close the open call and window (epoch end, validation, train end)."""
        if self._open is not None:
            self._sync()
            self._end_call(self._clock())
        self._calls.close()

    # -- internals: the live view --------------------------------------------------------------
    def _redraw_maybe(self) -> float:
        now = self._clock()
        if self._view is None or not self._budget.due(now):
            return now
        self._show()
        return self._clock()

    def _show(self, final: Optional[RunResult] = None) -> None:
        """Update the view: a chart when the budget allows (``tfwb.ui.view_budget``), else the progress
        text; timed."""
        view = self._view
        if view is None:
            return
        t = self._clock()
        chart = updated = False
        try:
            if self._budget.chart_allowed(t, view):
                chart = True
                r = final if final is not None else self._build("ok", None, partial=True)
                view.draw(r, self._calls.steps(), self._total(), final=final is not None)
            else:
                progress = getattr(view, "progress", None)
                if progress is not None:
                    progress(self._calls.steps(), self._total(), final)
                    updated = True
        except Exception as e:  # noqa: BLE001 - a drawing must never end the user's fit
            self._view = None
            warnings.warn(f"tfwb.keras.Monitor stopped drawing: {type(e).__name__}: {e}", stacklevel=2)
        self._budget.record(t, self._clock() - t, chart=chart, update=updated, kind=type(view).__name__)

    def _total(self) -> Optional[int]:
        epochs = (self.params or {}).get("epochs")
        return self._per_epoch * epochs if self._per_epoch and epochs else None

    # -- internals: the result (built by tfwb.fit_result) --------------------------------------
    def _finish(self, stop_reason: Optional[str], status: Optional[str] = None,
                error: Optional[str] = None) -> None:
        if not self._training:
            return
        self._training = False
        self._unhook()
        for attr in list(self._wrapped):
            self._unwrap(attr)
        self._bridge.disarm()
        samples = self._sampler.stop()
        status = status or ("interrupted" if stop_reason else "ok")
        r = self._build(status, stop_reason, samples=samples, error=error)
        if r.median_step_s and status != "failed":
            r = self._with_limits(r)
        if self.dataset is not None and r.median_step_s and status != "failed":
            try:
                self.input = measure(self.dataset, r.median_step_s)
                r = with_input(r, self.input)
            except Exception as e:  # noqa: BLE001 - the run's result must not be lost to the timing
                r = _replace(r, notes=r.notes + (Note(f"data: the dataset could not be timed alone: {e}", "data"),))
        self._show(final=r)
        b = self._budget
        r = with_view(r, view_s=b.spent_s, wall_s=max(self._clock() - self._t0, 1e-9), charts=b.charts,
                      updates=b.updates, shown=self._view_made, share=b.share)
        self._result = r
        if self.history_path is not None:
            History(self.history_path).append(r)

    def _with_limits(self, r: RunResult) -> RunResult:
        """How far from the limit, as on Workbench runs: the model's FLOPs and this machine's peak
        (``tfwb.tf.runner.step_limits.measure_limits`` never raises: what it cannot read is None with a reason)."""
        try:
            from tfwb.tf.runner.step_limits import measure_limits   # lazy: it loads TensorFlow's pieces

            notes: List[str] = []
            limits = measure_limits(r.config, getattr(self.model, "distribute_strategy", None), self.model, notes)
            return _replace(r, limits=limits, notes=r.notes + tuple(Note(n, "steps") for n in notes))
        except Exception as e:  # noqa: BLE001 - the run's result must not be lost to the count
            return _replace(r, notes=r.notes + (Note(f"other: MFU not counted: {e}", "other"),))

    def _build(self, status: str, stop_reason: Optional[str], *, samples: Any = None,
               error: Optional[str] = None, partial: bool = False) -> RunResult:
        """The RunResult of the settled calls so far (``tfwb.fit_result.FitRecord.build``); ``partial``: for
        the live view (no losses, no fingerprint, no wall-clock facts)."""
        model = self.model
        return self._record.build(
            self._calls.settled, _model_facts(model), status=status, stop_reason=stop_reason, clock=self._clock,
            samples=samples if samples is not None else self._sampler.samples, total=self._total(),
            view_spans=self._budget.spans, fingerprint=lambda cfg: _fingerprint(cfg, model), error=error,
            partial=partial)


# -- helpers ---------------------------------------------------------------------------------------
def _check_writable(path: Any) -> None:
    """Fail before training when ``path`` cannot take a line; its folder is created (as the Workbench's)."""
    try:
        History(path).ensure_writable()
    except OSError as e:
        raise ValueError(f"history_path={str(path)!r} cannot be written ({e.strerror or e}); pick a file in a "
                         "folder you can write, or history_path=None") from None


def _after_cell(callback: Callable[[Any], None]) -> Callable[[], None]:
    """Call ``callback(result)`` when the running IPython cell ends (its ``post_run_cell`` event: the result's
    ``error_in_exec`` is the exception that ended the cell, if any); returns what unregisters it (a no-op
    outside IPython, and for a fit on another thread than the cells': its cell may end first). IPython is
    looked up, never imported."""
    ipython = sys.modules.get("IPython")
    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    shell = None
    try:
        shell = ipython.get_ipython() if ipython is not None else None
        events = shell.events
        events.register("post_run_cell", callback)
    except Exception:  # noqa: BLE001 - no shell, or one without events: nothing to hook
        return lambda: None
    done = []

    def unregister() -> None:
        if not done:
            done.append(True)
            try:
                events.unregister("post_run_cell", callback)
            except ValueError:                # already gone
                pass

    return unregister


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


def _model_facts(model: Any) -> FitModel:
    """What the result needs of ``model`` now (its learning rate may have changed during the fit)."""
    opt = getattr(model, "optimizer", None)
    lr = None
    try:
        lr = float(opt.learning_rate)
    except Exception:  # noqa: BLE001 - a schedule has no single value
        pass
    return FitModel(name=getattr(model, "name", None), optimizer=type(opt).__name__.lower() if opt is not None else "",
                    learning_rate=lr, policy=getattr(getattr(model, "dtype_policy", None), "name", "float32"),
                    jit_compile=bool(getattr(model, "jit_compile", False) is True),
                    replicas=getattr(getattr(model, "distribute_strategy", None), "num_replicas_in_sync", None))


def _unwrapped(fn: Callable) -> Callable:
    """``fn`` without the Monitor wrappers around it (one left by a fit that ended abruptly)."""
    while hasattr(fn, "_tfwb_original"):
        fn = fn._tfwb_original
    return fn


def _examples_seen(model: Any) -> Optional[int]:
    """Examples Keras's loss tracker counted since its last reset (it weights each batch by its size)."""
    try:
        return int(float(model._loss_tracker.count))
    except Exception:  # noqa: BLE001 - a private attribute of Keras; absent: unknown
        return None


def _replace(r: RunResult, **changes: Any) -> RunResult:
    return dataclasses.replace(r, **changes)
