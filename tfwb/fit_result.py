"""A ``model.fit``'s measurements as a RunResult: the pure half of ``tfwb.keras.Monitor``.

The Monitor (``tfwb.keras.monitor``, the Keras adapter) hooks into ``fit``, pushes each call of the
train function into ``tfwb.timing.PushWindows`` and keeps what it reads from Keras in a ``FitRecord``
(the running losses, validation spans, the batch a step consumed) and, at each build, a ``FitModel``
(the model's facts: name, optimizer, precision policy). This module turns those into the RunResult
(``tfwb.lifecycle.result_from_log``, as ``tfwb.run`` does): each call's own loss recovered from
Keras's running means, the RunConfig that describes the fit, the notes, the wall-clock rate against
the median step's (``WALL_RATE_GAP``), what the live view cost, a failure's text, the input-rate
verdict. The closing line the view shows is words: ``tfwb.render.monitor_line``.

Pure: no Keras, TensorFlow or widgets; everything arrives as plain data.
"""
from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from tfwb import stats
from tfwb.config import MIXED_PRECISION, OPTIMIZERS, RunConfig
from tfwb.lifecycle import result_from_log
from tfwb.observers import RunState, StepLog
from tfwb.records import Note, RunResult
from tfwb.timing import CallTiming

__all__ = ["FitModel", "FitRecord", "WALL_RATE_GAP", "ERROR_CHARS", "call_losses", "error_text",
           "inside", "with_input", "with_view"]

#: The wall-clock rate and the median step's rate differing by more than this share gets a note.
WALL_RATE_GAP = 0.05
#: A failed fit's error keeps at most this many characters of the exception's text.
ERROR_CHARS = 2000


@dataclass(frozen=True)
class FitModel:
    """What a result needs to know of the Keras model, read by the adapter at each build.

    Args:
        name: the model's name (``None``: it has none).
        optimizer: its optimizer's class name, lower case (``""``: none).
        learning_rate: the optimizer's learning rate now (``None``: a schedule, or unreadable).
        policy: the dtype policy's name.
        jit_compile: whether the model compiles with XLA.
        replicas: replicas in sync of its distribution strategy (``None``: unknown).
    """

    name: Optional[str] = None
    optimizer: str = ""
    learning_rate: Optional[float] = None
    policy: str = "float32"
    jit_compile: bool = False
    replicas: Optional[int] = None


class FitRecord:
    """What a fit measured beside its calls' times, and the RunResult built from it.

    Args:
        steps_per_call: the model's ``steps_per_execution``.
        warmup_calls: calls kept apart as warm-up.
        label: the caller's label (default: the model's name).
        batch_size: the caller's global batch (default: what a train step was seen to consume).
        started_at, run_id: the result's fields of those names.

    The adapter fills ``running_loss`` (Keras's running epoch mean of the loss after each call, by
    ``(epoch, end_step)``), ``validation_spans`` (``(start, seconds)``), ``first_batch`` (examples per
    step in the first train call) and ``epoch_examples`` (``(examples, steps)`` of the first epoch, when
    the first call's count was not readable).
    """

    def __init__(self, steps_per_call: int, warmup_calls: int, *, label: Optional[str] = None,
                 batch_size: Optional[int] = None, started_at: str = "", run_id: Optional[str] = None) -> None:
        self.steps_per_call, self.warmup_calls = steps_per_call, warmup_calls
        self.label, self.batch_size, self.started_at, self.run_id = label, batch_size, started_at, run_id
        self.running_loss: Dict[tuple, float] = {}
        self.validation_spans: List[Tuple[float, float]] = []
        self.first_batch: Optional[int] = None
        self.epoch_examples: Optional[Tuple[int, int]] = None

    def batch(self) -> Tuple[Optional[int], Optional[str]]:
        """The global batch and, when it is not what a train step was seen to consume, why."""
        if self.batch_size is not None:
            return self.batch_size, None
        if self.first_batch is not None:
            return self.first_batch, None
        if self.epoch_examples is not None:
            seen, steps = self.epoch_examples
            return max(1, round(seen / steps)), (
                f"other: batch_size {round(seen / steps)} estimated from the {seen} examples of the first epoch's "
                f"{steps} steps (the first step's count was not readable); pass Monitor(batch_size=...)")
        return None, "other: batch_size unknown (Keras counted no examples); pass Monitor(batch_size=...)"

    def build(self, settled: Sequence[CallTiming], model: FitModel, *, status: str, stop_reason: Optional[str],
              clock: Callable[[], float], samples: Sequence[Any], total: Optional[int],
              view_spans: Sequence[Tuple[float, float]] = (),
              fingerprint: Optional[Callable[[RunConfig], dict]] = None,
              error: Optional[str] = None, partial: bool = False) -> RunResult:
        """The RunResult of the ``settled`` calls (calls with fewer steps than a full call left out).

        Args:
            settled: the calls settled so far (``PushWindows.settled``).
            model: the model's facts now.
            status, stop_reason, error: the run's ending (``stop_reason``: why it stopped early).
            clock: the run clock; samples: the utilization samples.
            total: the steps fit was asked for (``None``: unknown); a stop says how far it had to go.
            view_spans: ``(start, seconds)`` the live view took (``tfwb.ui.view_budget.ViewBudget.spans``).
            fingerprint: the fingerprint of the fit's RunConfig (called unless ``partial``; None: ``{}``).
            partial: for the live view: no losses, no fingerprint, no wall-clock facts.
        """
        spe = self.steps_per_call
        full = [c for c in settled if c.steps == spe]
        windows: List[int] = []
        for j, c in enumerate(full):
            if j and full[j - 1].window == c.window:
                windows[-1] += 1
            else:
                windows.append(1)
        losses: List[float] = []
        if not partial:
            per_call = call_losses(settled, self.running_loss, spe)
            losses = [per_call[i] for i, c in enumerate(settled) if c.steps == spe]
        log = StepLog(times_s=[c.time_s for c in full], starts_s=[c.start_s for c in full],
                      losses=losses, windows=windows)
        w = min(self.warmup_calls, len(full))
        batch, batch_note = self.batch()
        cfg = self.config(model, len(full) - w, w, batch)
        notes = [Note("steps: timed per call of fit's train function, windows synced as tfwb.run syncs them; "
                      "input wait is not visible inside fit's graph (see input_rate)", "steps"),
                 Note("data: the pipeline is the one given to fit; RunConfig's input knobs do not describe it",
                      "data")]
        if len(full) < len(settled):
            notes.append(Note(f"steps_per_execution={spe}: {len(settled) - len(full)} call(s) at an "
                              "epoch's end ran fewer steps and are left out of the times", "steps"))
        if batch_note:
            notes.append(Note(batch_note, "other"))
        extras: Dict[str, Any] = {"source": "keras.fit", "model": model.name if model.name is not None else ""}
        if not partial:
            wall_extras, wall_notes = self.wall_rate(settled, full[w:], batch, view_spans)
            extras.update(wall_extras)
            notes.extend(wall_notes)
        ran = len(full) * spe
        planned = total if stop_reason is not None else None    # a stop says how far fit had to go
        state = RunState(config=cfg, log=log, clock=clock, total_steps=max(ran, planned or 0),
                         warmup_steps=w * spe, steps_per_call=spe, stop_reason=stop_reason,
                         interrupted=stop_reason is not None, samples=tuple(samples))
        return result_from_log(state, warmup_calls=w, status=status, error=error, started_at=self.started_at,
                               fingerprint={} if partial or fingerprint is None else fingerprint(cfg),
                               notes=notes,
                               extras=extras, run_id=self.run_id, replicas=model.replicas)

    def wall_rate(self, settled: Sequence[CallTiming], measured: Sequence[CallTiming], batch: Optional[int],
                  view_spans: Sequence[Tuple[float, float]] = ()) -> Tuple[dict, List[Note]]:
        """The rate the fit reached over the wall time its measured calls spanned (from the first
        measured call's start to the last call's end: drawing, validation, other callbacks and
        short calls at an epoch's end included; examples counted at the global batch), against the
        median step's; a note says what the span holds beside the calls when they differ by more
        than ``WALL_RATE_GAP``."""
        if not measured:
            return {}, []
        spe = self.steps_per_call
        start = measured[0].start_s
        calls = [c for c in settled if c.start_s >= start]
        end = max(c.start_s + c.time_s for c in calls)
        span = end - start
        steps = sum(c.steps for c in calls)
        if span <= 0 or not steps:
            return {}, []
        busy = sum(c.time_s for c in calls)
        view_in = inside(view_spans, start, end)
        validation_in = inside(self.validation_spans, start, end)
        other = max(0.0, span - busy - view_in - validation_in)
        median_step = stats.median([c.time_s / spe for c in measured])
        rate, median_rate, unit = steps / span, 1.0 / median_step, "steps"
        if batch:
            rate, median_rate, unit = rate * batch, median_rate * batch, "examples"
        extras = {"wall_span_s": span, "wall_steps": steps, "wall_steps_per_s": steps / span,
                  "validation_s": sum(d for _, d in self.validation_spans)}
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

    def config(self, model: FitModel, measured_calls: int, warmup_calls: int, batch: Optional[int]) -> RunConfig:
        """The RunConfig that describes the fit (workload ``fit:<model name>``)."""
        spe = self.steps_per_call
        d = {"workload": f"fit:{model.name if model.name is not None else 'model'}", "batch_size": batch or 1,
             "steps": max(1, measured_calls * spe), "warmup_steps": warmup_calls * spe,
             "steps_per_execution": spe, "timing": "windowed", "jit_compile": model.jit_compile,
             "mixed_precision": model.policy if model.policy in MIXED_PRECISION else "off",
             "label": self.label or (model.name if model.name is not None else "")}
        if model.optimizer in OPTIMIZERS:
            d["optimizer"] = model.optimizer
        lr = model.learning_rate
        if lr and lr > 0:
            d["learning_rate"] = min(lr, 10.0)
        return RunConfig.from_dict(d, check_workload=False)


def call_losses(calls: Sequence[CallTiming], running: Dict[tuple, float], spe: int) -> List[float]:
    """Each call's own mean loss from Keras's running epoch means: (n_k m_k - n_{k-1} m_{k-1}) / steps."""
    out: List[float] = []
    prev_epoch, prev_n, prev_m = None, 0, 0.0
    for c in calls:
        m = running.get((c.epoch, c.end_step), math.nan)
        if c.epoch != prev_epoch:
            prev_epoch, prev_n, prev_m = c.epoch, 0, 0.0
        n = prev_n + c.steps
        out.append((n * m - prev_n * prev_m) / c.steps if prev_n else m)
        prev_n, prev_m = n, m
    return out


def inside(spans: Sequence[Tuple[float, float]], start: float, end: float) -> float:
    """Seconds of ``(start, duration)`` spans that fall between ``start`` and ``end``.

    Example:
        >>> inside([(0.0, 2.0), (5.0, 1.0)], 1.0, 5.5)
        1.5
    """
    return sum(max(0.0, min(s + d, end) - max(s, start)) for s, d in spans)


def error_text(error: BaseException) -> str:
    """``"ValueError: the text"``, without terminal colour codes (Keras bolds a layer's message), cut
    to ``ERROR_CHARS``.

    Example:
        >>> error_text(ValueError("\\x1b[1mbad\\x1b[0m input"))
        'ValueError: bad input'
    """
    text = re.sub(r"\x1b\[[0-9;]*m", "", f"{type(error).__name__}: {error}").strip()
    return text if len(text) <= ERROR_CHARS else text[:ERROR_CHARS - 1] + "\u2026"


def with_input(r: RunResult, rate: Any) -> RunResult:
    """``r`` with the input-rate verdict (a ``tfwb.keras.InputRate``: ``text()``, ``to_dict()``) as a
    ``data`` note (replacing an earlier one) and ``extras["input_rate"]``."""
    notes = tuple(n for n in r.notes if not n.startswith("data: input-rate")) + (
        Note("data: input-rate " + rate.text(), "data"),)
    return dataclasses.replace(r, notes=notes, extras={**r.extras, "input_rate": rate.to_dict()})


def with_view(r: RunResult, *, view_s: float, wall_s: float, charts: int, updates: int, shown: bool,
              share: float) -> RunResult:
    """``r`` with what the live view cost: ``extras`` (``view_s``, ``view_share``, ``fit_wall_s``,
    ``view_charts``, ``view_updates``) and, when there was a view (``shown``), a note that names its
    budget (``share`` of the fit's wall time ``wall_s``)."""
    extras = {**r.extras, "view_s": view_s, "view_share": view_s / wall_s, "fit_wall_s": wall_s,
              "view_charts": charts, "view_updates": updates}
    notes = r.notes
    if shown:
        notes = notes + (Note(
            f"other: the live view took {view_s:.2f} s, {100 * view_s / wall_s:.1f} % of the fit's "
            f"{wall_s:.1f} s ({charts} chart(s), {updates} progress update(s)); it draws a chart "
            f"only while that keeps it within {100 * share:.0f} % of the fit's time "
            "(tfwb.keras.monitor.VIEW_SHARE)", "other"),)
    return dataclasses.replace(r, extras=extras, notes=notes)
