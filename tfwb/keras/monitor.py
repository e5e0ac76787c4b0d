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

Redrawing the chart (every ``REDRAW_S``) happens right after a window's sync, before the
next call starts, so it is left out of the times and no device work runs meanwhile.
"""
from __future__ import annotations

import math
import sys
import warnings
from typing import Any, Dict, List, Optional, Sequence

import keras

from tfwb import timing
from tfwb.config import MIXED_PRECISION, OPTIMIZERS, RunConfig
from tfwb.history import History
from tfwb.interrupts import InterruptBridge
from tfwb.keras.input_rate import InputRate, measure
from tfwb.lifecycle import new_run_id, now_iso, result_from_log, run_clock
from tfwb.utilization import Sampler
from tfwb.observers import RunState, StepLog
from tfwb.records import Note, RunResult
from tfwb.timing import WINDOW_S

__all__ = ["Monitor", "WINDOW_S", "REDRAW_S"]

#: Charts and the progress line are redrawn at most this often.
REDRAW_S = 2.0
INTERRUPTED = "interrupted by the user"


class Monitor(keras.callbacks.Callback):
    """Measure a ``model.fit`` as ``tfwb.run`` measures a run; ``monitor.result`` is its RunResult.

    Args:
        history_path (str | None, default None): a JSON-lines history file the result is
            appended to (``tfwb.load_results`` reads it); checked in ``on_train_begin``.
        label (str | None, default None): the result's label (default: the model's name).
        charts ("auto" | bool, default "auto"): ``"auto"``: the step-time and utilization chart
            redrawn in place in a notebook, a one-line progress on a terminal, nothing
            elsewhere; ``True``: the chart even outside a kernel (a widget); ``False``: nothing.
        warmup_steps (int, default 5): steps kept apart (tracing, autotuning); rounded up to
            whole calls of the train function.
        dataset (iterable | None, default None): the dataset given to fit; after fit it is
            timed on its own (``input_rate``) and the verdict joins the result.
        batch_size (int | None, default None): the global batch; default read from Keras's
            loss tracker (examples counted over the first epoch).
        sample_interval_s (float, default 0.2): utilization sampling period.
        probes, clock, sync, stream: for tests: the sampler's probes, the run clock, the
            device sync (default: ``sync_devices`` where there is a GPU or TPU) and the
            terminal stream.

    Raises:
        ValueError: in ``on_train_begin`` (before the first step) when ``history_path``
            cannot be written.

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

    # -- Keras hooks ---------------------------------------------------------------------------
    def on_train_begin(self, logs: Optional[dict] = None) -> None:
        if self.history_path is not None:
            _check_writable(self.history_path)
        self._training, self._result, self.input = True, None, None
        self._clock = self._clock_arg or run_clock()
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
        self._examples: Optional[int] = None
        self._stop_reason: Optional[str] = None
        self._interrupts = 0
        self._started_at = now_iso()
        self._run_id = new_run_id()
        self._last_draw = -math.inf
        self._sampler = Sampler(self.sample_interval_s, self._probes, clock=self._clock).start()
        self._bridge = InterruptBridge(self._on_interrupt, inline=True)
        self._bridge.arm()
        self._view = _make_view(self.charts, self._stream)

    def on_epoch_begin(self, epoch: int, logs: Optional[dict] = None) -> None:
        self._epoch = epoch

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
        else:
            _warn("model.evaluate")

    def on_predict_begin(self, logs: Optional[dict] = None) -> None:
        if not self._training:
            _warn("model.predict")

    def on_epoch_end(self, epoch: int, logs: Optional[dict] = None) -> None:
        self._settle()
        if self._examples is None and epoch == 0:
            self._examples = _examples_seen(self.model)

    def on_train_end(self, logs: Optional[dict] = None) -> None:
        self._settle()
        self._finish(INTERRUPTED if self._stop_reason else None)

    # -- results -------------------------------------------------------------------------------
    @property
    def result(self) -> Optional[RunResult]:
        """The fit's RunResult (``None`` before a fit); a fit that left with an exception gives a
        failed result of the calls it finished."""
        if self._result is None and self._training:
            self._settle()
            self._finish(None, status="failed", error="fit ended with an exception before on_train_end")
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

    # -- internals -----------------------------------------------------------------------------
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

    def _redraw_maybe(self) -> float:
        now = self._clock()
        if self._view is not None and now - self._last_draw >= REDRAW_S:
            self._last_draw = now
            try:
                self._view.draw(self._build("ok", None, partial=True), self._steps_done(), self._total())
            except Exception as e:  # noqa: BLE001 - a drawing must never end the user's fit
                self._view = None
                warnings.warn(f"tfwb.keras.Monitor stopped drawing: {type(e).__name__}: {e}", stacklevel=2)
            return self._clock()
        return now

    def _steps_done(self) -> int:
        return sum(c["steps"] for c in self._calls)

    def _total(self) -> Optional[int]:
        epochs = (self.params or {}).get("epochs")
        return self._per_epoch * epochs if self._per_epoch and epochs else None

    def _finish(self, stop_reason: Optional[str], status: Optional[str] = None,
                error: Optional[str] = None) -> None:
        if not self._training:
            return
        self._training = False
        self._bridge.disarm()
        samples = self._sampler.stop()
        status = status or ("interrupted" if stop_reason else "ok")
        r = self._build(status, stop_reason, samples=samples, error=error)
        if r.median_step_s:
            # How far from the limit, as on Workbench runs: the model's FLOPs and this machine's peak
            # (tfwb.tf.runner.train.limits never raises: what it cannot read is None with a reason).
            try:
                from tfwb.tf.runner.train import limits   # lazy: the runner's module loads TensorFlow's pieces

                notes: List[str] = []
                fields = limits(r.config, getattr(self.model, "distribute_strategy", None), self.model, notes)
                r = _replace(r, **fields, notes=r.notes + tuple(Note(n, "steps") for n in notes))
            except Exception as e:  # noqa: BLE001 - the run's result must not be lost to the count
                r = _replace(r, notes=r.notes + (Note(f"other: MFU not counted: {e}", "other"),))
        if self.dataset is not None and r.median_step_s:
            try:
                self.input = measure(self.dataset, r.median_step_s)
                r = _with_input(r, self.input)
            except Exception as e:  # noqa: BLE001 - the run's result must not be lost to the timing
                r = _replace(r, notes=r.notes + (Note(f"data: the dataset could not be timed alone: {e}", "data"),))
        self._result = r
        if self._view is not None:
            try:
                self._view.draw(r, self._steps_done(), self._total(), final=True)
            except Exception:  # noqa: BLE001
                pass
        if self.history_path is not None:
            History(self.history_path).append(r)

    def _build(self, status: str, stop_reason: Optional[str], *, samples: Any = None,
               error: Optional[str] = None, partial: bool = False) -> RunResult:
        """The RunResult of the settled calls so far (calls with fewer steps than a full call left out)."""
        settled = [c for c in self._calls if "time" in c]
        full = [c for c in settled if c["steps"] == self._spe]
        losses = _call_losses(settled, self._running_loss, self._spe)
        keep = [i for i, c in enumerate(settled) if c["steps"] == self._spe]
        windows: List[int] = []
        for j, c in enumerate(full):
            if j and full[j - 1]["window"] == c["window"]:
                windows[-1] += 1
            else:
                windows.append(1)
        log = StepLog(times_s=[c["time"] for c in full], starts_s=[c["start"] for c in full],
                      losses=[losses[i] for i in keep] if not partial else [], windows=windows)
        w = min(self._warmup_calls, len(full))
        cfg = self._config(len(full) - w, w)
        notes = [Note("steps: timed per call of fit's train function, windows synced as tfwb.run syncs them; "
                      "input wait is not visible inside fit's graph (see input_rate)", "steps"),
                 Note("data: the pipeline is the one given to fit; RunConfig's input knobs do not describe it",
                      "data")]
        if len(full) < len(settled):
            notes.append(Note(f"steps_per_execution={self._spe}: {len(settled) - len(full)} call(s) at an "
                              "epoch's end ran fewer steps and are left out of the times", "steps"))
        if self._examples is None:
            notes.append(Note("batch_size unknown (Keras counted no examples); pass Monitor(batch_size=...)",
                              "other"))
        ran = len(full) * self._spe
        planned = self._total() if stop_reason is not None else None    # a stop says how far fit had to go
        state = RunState(config=cfg, log=log, clock=self._clock, total_steps=max(ran, planned or 0),
                         warmup_steps=w * self._spe, steps_per_call=self._spe, stop_reason=stop_reason,
                         interrupted=stop_reason is not None,
                         samples=tuple(samples if samples is not None else self._sampler.samples))
        return result_from_log(state, warmup_calls=w, status=status, error=error, started_at=self._started_at,
                               fingerprint=_fingerprint(cfg, self.model), notes=notes,
                               extras={"source": "keras.fit", "model": getattr(self.model, "name", "")},
                               run_id=self._run_id,
                               replicas=getattr(getattr(self.model, "distribute_strategy", None),
                                                "num_replicas_in_sync", None))

    def _config(self, measured_calls: int, warmup_calls: int) -> RunConfig:
        model = self.model
        batch = self.batch_size
        if batch is None and self._examples and self._per_epoch:
            batch = max(1, round(self._examples / self._per_epoch))
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


def _examples_seen(model: Any) -> Optional[int]:
    """Examples Keras's loss tracker counted this epoch (it weights each batch by its size)."""
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


# -- what is shown during fit ----------------------------------------------------------------------
def _in_kernel() -> bool:
    ip = sys.modules.get("IPython")
    try:
        return ip is not None and getattr(ip.get_ipython(), "kernel", None) is not None
    except Exception:  # noqa: BLE001
        return False


def _make_view(charts: Any, stream: Any) -> Any:
    if charts is False:
        return None
    if charts is True or _in_kernel():
        return _ChartView()
    out = stream or sys.stderr
    return _LineView(out) if stream is not None or getattr(out, "isatty", lambda: False)() else None


class _LineView:
    """One progress line on a terminal, redrawn with ``\\r``."""

    def __init__(self, stream: Any) -> None:
        self.stream = stream

    def draw(self, r: RunResult, done: int, total: Optional[int], final: bool = False) -> None:
        head = f"step {done}/{total}" if total else f"step {done}"
        m = r.median_step_s
        text = f"{r.config.label or r.config.workload}: {head}" + (f", median step {m * 1e3:.2f} ms" if m else "")
        if final:
            text = r.summary()
        self.stream.write("\r" + text + ("\n" if final else ""))
        self.stream.flush()


class _ChartView:
    """The Workbench's run chart (``tfwb.ui.charts.run_chart_png``) in an Image widget, with a status line."""

    def __init__(self) -> None:
        import ipywidgets as W  # lazy: only a notebook needs widgets
        from IPython.display import display

        self.image = W.Image(format="png")
        self.status = W.HTML("fit: starting")
        self.box = W.VBox([self.status, self.image])
        display(self.box)

    def draw(self, r: RunResult, done: int, total: Optional[int], final: bool = False) -> None:
        from tfwb.ui.charts import run_chart_png

        self.image.value = run_chart_png(r)
        self.status.value = r.summary() if final else f"fit: step {done}" + (f"/{total}" if total else "")
