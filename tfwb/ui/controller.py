"""The Workbench's controller: knob values -> RunConfig -> runner -> History -> results.

Owns what a Workbench does, apart from how it looks: the pending configuration (the
baseline, the values of the knob inputs, fields set through ``run(...)`` that have no
input, the label of the next run), one run at a time through the runner (inline, or on a
background thread so a kernel stays free for the Stop click), stopping (the Stop button,
``stop()``, a kernel interrupt through ``tfwb.interrupts.InterruptBridge``), the results
and their history file (``tfwb.history.History``), and the last run's suggestion
(``tfwb.analysis.diagnosis``). Each recorded run is pushed to the history's
``tfwb.analysis.session.Analysis`` (``analysis``), which hands its ``RunView`` to the subscribed
front ends before ``on_result`` is told.

It imports no widgets. The knob inputs are any objects with ``read()``, ``show(value)``
and ``reset(value)`` (``tfwb.ui.controls.KnobControl`` in the Workbench, plain objects in
tests), and what it does is told to a ``ControllerEvents`` (the Workbench's renderer,
``tfwb.ui.panel.WorkbenchPanel``), which reads the way back from the pushed ``RunView``.

Running. ``run(...)`` trains on the calling thread and blocks until the run ends; a
launch with ``background=True`` trains on a thread named ``tfwb-workbench-run`` and arms
the interrupt bridge until it ends. The runner is called as every runner is,
``runner(cfg, observers)``: a ``tfwb.observers.Progress`` for the progress, a
``tfwb.observers.StopFlag`` for stopping (set with ``interrupted=True``, so the runner ends
the run as ``"interrupted"`` with the steps it finished), and a TensorBoard observer
when there is a ``logdir``. A runner that raises gives a ``"failed"`` result (a
``KeyboardInterrupt`` an ``"interrupted"`` one): every run is recorded, never lost.

Tuning. ``tune(max_runs)`` runs ``tfwb.search.tune_loop.tune`` from ``config()`` through the same runner,
stop flag and interrupt bridge as a run: every run it makes is recorded like a click's run
(``on_run_start`` / ``on_result``), each event it sends (``tfwb.search.tune_events``) goes to
``on_tune_event``, and at the end the best configuration's knobs are set (``set_changes``) and
``on_tune_end`` is told. Each of its interleaved comparisons is recorded through ``Analysis.decided``
(``on_decided``), so the status line and the table say what the tune log says.

Deciding. ``decide(against)`` runs the interleaved comparison (``compare``, default
``tfwb.compare_interleaved``) of the latest run's configuration against the previous run's or the
baseline's, when separate runs said "cannot tell" (``RunView.undecided``): like a run, on this thread
or a background one, stoppable after its current round (Stop, ``stop()``, a kernel interrupt). Its
verdict goes to ``Analysis.decided``; the rows then show it instead of the separate-run verdict
(``tfwb.ui.deciding`` runs the comparison).
"""
from __future__ import annotations

import os
import threading
from typing import Any, Callable, Collection, Dict, List, Mapping, Optional, Protocol, Sequence, Tuple

from tfwb import config as _config
from tfwb.analysis.rows import pick_baseline
from tfwb import stats
from tfwb.analysis.session import Analysis
from tfwb.config import RunConfig, fast_mode
from tfwb.history import History
from tfwb.interrupts import INTERRUPTED as INTERRUPT_REASON  # + " (kernel interrupt)", " (KeyboardInterrupt)"
from tfwb.interrupts import InterruptBridge, kernel_loop
from tfwb.lifecycle import new_run_id, now_iso
from tfwb.observers import Observer, Progress, StopFlag
from tfwb.records import RunResult
from tfwb.render import short_changes
from tfwb.search.tune_events import TuneEvent
from tfwb.search.tune_loop import FAST_ROUNDS, Comparer, check_arguments
from tfwb.ui import deciding
from tfwb.ui.deciding import DecideStopped, comparer
from tfwb.search.tune_loop import tune as tune_loop
from tfwb.search.tune_result import Tuning

__all__ = ["WorkbenchController", "ControllerEvents", "KnobInput", "Runner", "STOP_REASON", "DecideStopped",
           "INTERRUPT_REASON", "applied_note", "total_steps"]

STOP_REASON = "stopped by the user"          # + " (Stop button)", " (wb.stop())"
_BUSY = "a run is already in progress: click Stop or call wb.wait() first"

#: ``runner(cfg, observers) -> RunResult``, the contract every runner keeps (``tfwb.run``).
Runner = Callable[[RunConfig, Sequence[Observer]], RunResult]


class KnobInput(Protocol):
    """One knob's input, as the controller uses it (``tfwb.ui.controls.KnobControl`` is one)."""

    def read(self) -> Any:
        """The value it holds; raises ``ValueError`` naming the field when it is not allowed."""

    def show(self, value: Any) -> None:
        """Hold ``value`` (already checked)."""

    def reset(self, value: Any) -> None:
        """Hold ``value`` and forget any bad text."""


class ControllerEvents:
    """What the controller tells its renderer; every method does nothing here. Override them.

    The run's events (``on_run_start`` ... ``on_idle``) come from the thread the run is
    on: the background thread for a background launch.
    """

    def on_changes_refused(self, error: ValueError) -> None:
        """Changes given to ``set_changes`` / ``run(...)`` were not allowed; nothing changed."""

    def on_config_refused(self, error: ValueError) -> None:
        """A launch found a knob input holding a value it does not accept; nothing ran."""

    def on_run_start(self, cfg: RunConfig, number: int, note: Optional[str], stoppable: bool) -> None:
        """Run ``number`` (1-based) of ``cfg`` starts; ``stoppable``: it is on the background thread."""

    def on_progress(self, steps_done: int, steps_total: int, stopping: bool) -> None:
        """The runner's progress, after each timing window closes (every step with per-step timing) and at
        the last step: throttle what you draw."""

    def on_result(self, result: RunResult, number: int, note: Optional[str], problems: Sequence[str]) -> None:
        """Run ``number`` ended and is in ``results`` (and the history file, unless ``problems`` says not)."""

    def on_idle(self) -> None:
        """No run is in progress any more: a new one can start."""

    def on_tune_start(self, cfg: RunConfig, max_runs: int) -> None:
        """A tune of ``cfg`` starts (at most ``max_runs`` trials); its runs follow as runs do."""

    def on_tune_event(self, event: TuneEvent) -> None:
        """The tune says where it is (``tfwb.search.tune_events``): the start, a trial starts, a round of its
        interleaved comparison against the best so far ends, a trial's verdict, the end."""

    def on_tune_end(self, tuning: Optional[Tuning], error: Optional[BaseException]) -> None:
        """The tune ended: its ``Tuning`` (the best configuration's knobs are set), or the error that ended it."""

    def on_decide_start(self, reference: int, number: int, stoppable: bool) -> None:
        """An interleaved comparison of run ``number``'s configuration against run ``reference``'s starts."""

    def on_decide_round(self, done: int, total: int, stopping: bool) -> None:
        """A round of that comparison ended."""

    def on_decided(self, rounds: stats.RoundsComparison) -> None:
        """An interleaved verdict was recorded (``Analysis.decided``, from Decide or a tune's trial): the
        latest pushed view carries it."""

    def on_decide_end(self, rounds: Optional[stats.RoundsComparison], error: Optional[BaseException]) -> None:
        """Decide ended: its verdict (recorded), or what ended it (a stop, a failed comparison)."""


def total_steps(cfg: RunConfig) -> int:
    """Training steps a run of ``cfg`` runs, warm-up included: whole calls of
    ``steps_per_execution`` steps (``RunConfig.calls``), as the runners count them.

    Example:
        >>> total_steps(RunConfig(warmup_steps=3, steps=128, steps_per_execution=16))
        144
    """
    return sum(cfg.calls) * cfg.steps_per_execution


def applied_note(suggestion: Tuple[str, Any, str]) -> str:
    """The line said with a run that applies ``(field, value, why)``.

    Example:
        >>> applied_note(("prefetch", True, "input-bound"))
        'Applied the suggestion prefetch=True (input-bound).'
    """
    name, value, why = suggestion
    return f"Applied the suggestion {name}={value!r} ({why})."


class WorkbenchController:
    """Runs configurations built from a baseline and knob inputs, one at a time, and keeps the results.

    Args:
        baseline (RunConfig | None, default None): what the knobs start from and runs are
            compared with; ``None`` is ``RunConfig()``.
        history_path (str | PathLike | None, default None): a JSON-lines file
            (``tfwb.history.History``); every result, failures included, is appended.
        runner (callable | None, default None): ``runner(cfg, observers) -> RunResult``;
            ``None`` is ``tfwb.run``, imported at the first run (TensorFlow loads then).
        resume (bool, default True): load the runs already in ``history_path``.
        background (bool | None, default None): whether ``launch_default`` runs on a
            background thread; ``None``: yes inside a Jupyter kernel, else no.
        logdir (str | PathLike | None, default None): a TensorBoard log folder; each run
            writes its scalars to ``logdir/NN-<label or changes>``.
        inputs (mapping of field -> KnobInput, default none): the knob inputs; fields
            without one are set through ``set_changes`` / ``run``.

    Attributes:
        inputs: ``{field: KnobInput}``; may be set after construction (the Workbench builds
            its controls from the checked ``baseline``).
        events: the ``ControllerEvents`` told what happens (set it after building the renderer).
        results: every result so far, in order, failures included.
        skipped: ``(line number, reason)`` for each line of ``history_path`` that was not a
            complete result when it was loaded.
        bridge: the ``InterruptBridge`` armed while a background run is going.

    Raises:
        ValueError: for a baseline that is not a RunConfig, or a ``logdir`` that cannot be
            created or written.

    Example:
        >>> def runner(cfg, observers):
        ...     return RunResult(config=cfg, step_times_s=(0.1,) * cfg.steps, examples_per_step=8)
        >>> bench = WorkbenchController(RunConfig(steps=3), runner=runner)
        >>> bench.run(prefetch=True).config.prefetch, len(bench.results)
        (True, 1)
        >>> bench.config().prefetch       # a field with no input stays set until reset()
        True
    """

    def __init__(self, baseline: Optional[RunConfig] = None,
                 history_path: "str | os.PathLike | None" = None, *,
                 runner: Optional[Runner] = None, resume: bool = True, background: Optional[bool] = None,
                 logdir: "str | os.PathLike | None" = None,
                 inputs: Optional[Mapping[str, KnobInput]] = None) -> None:
        if baseline is not None and not isinstance(baseline, RunConfig):
            raise ValueError(f"baseline must be a RunConfig, got {type(baseline).__name__}")
        self.logdir: Optional[str] = None
        if logdir is not None:
            from tfwb.tf.lab.tensorboard import check_logdir    # TensorFlow loads here (tf.summary writes the logs)

            self.logdir = check_logdir(logdir)
        self.baseline: RunConfig = baseline if baseline is not None else RunConfig()
        self.history_path: Optional[str] = os.fspath(history_path) if history_path is not None else None
        self.inputs: Dict[str, KnobInput] = dict(inputs or {})
        self.events: ControllerEvents = ControllerEvents()
        self.background = background
        self._runner = runner
        self._history = History(self.history_path) if self.history_path else None
        self.results: List[RunResult] = self._history.load() if resume and self._history else []
        #: The history's analysis: each run diagnosed once, its rows once per state; it pushes each
        #: finished run's ``RunView`` to its subscribers (``tfwb.analysis.session``).
        self.analysis = Analysis()
        self.skipped: List[Tuple[int, str]] = list(self._history.skipped) if resume and self._history else []
        self._overrides: Dict[str, Any] = {}      # fields set by run(...) that have no input
        self._next_label: Optional[str] = None    # label for the next run only
        self._lock = threading.RLock()            # clicks can arrive on several kernel threads
        self._running = False
        self._thread: Optional[threading.Thread] = None
        self._stop_flag: Optional[StopFlag] = None
        self._progress_done = 0                   # what the Progress observer last saw
        #: The tune's interleaved comparison (``tfwb.search.tune_loop.Comparer``); None: ``tfwb.compare_interleaved``.
        self.compare: Optional[Comparer] = None
        #: The last finished tune's ``Tuning`` (None: none yet).
        self.tuning: Optional[Tuning] = None
        self.bridge = InterruptBridge(lambda: self.stop("kernel interrupt", interrupted=True))

    # -- the pending configuration -------------------------------------------------
    def knob_values(self, skip: Collection[str] = ()) -> Dict[str, Any]:
        """The values of the knob inputs (those in ``skip`` left out).

        Raises:
            ValueError: naming the field, for an input holding a value it does not accept.
        """
        return {name: k.read() for name, k in self.inputs.items() if name not in skip}

    def config(self) -> RunConfig:
        """The RunConfig the next run will use: the baseline with the knobs applied.

        The baseline's label names the baseline's knobs: once a knob differs from the
        baseline, the next run has no label (history tables and TensorBoard then name it by
        what it changes), unless a label was given for that run (``run(label=...)``).

        Returns:
            ``baseline.replace(...)`` with every input's value, the fields without an input
            set through ``run(...)``, and the label given to the pending run.

        Raises:
            ValueError: naming the field when an input holds a bad value (e.g. steps "abc").

        Example:
            >>> WorkbenchController(RunConfig(steps=3)).config() == RunConfig(steps=3)
            True
            >>> bench = WorkbenchController(RunConfig(steps=3, label="knobs off"))
            >>> bench.set_changes({"prefetch": True}).label
            ''
        """
        changes = {**self._overrides, **self.knob_values()}
        if self._next_label is not None:
            changes["label"] = self._next_label
        cfg = self.baseline.replace(**changes)
        if self._next_label is None and cfg.label and cfg.diff(self.baseline):
            cfg = cfg.replace(label="")        # the baseline's label no longer describes these knobs
        return cfg

    def set_changes(self, changes: Mapping[str, Any]) -> RunConfig:
        """Check ``changes`` against the current knobs, then take them: inputs show theirs.

        ``label`` names the next run only; other fields without an input apply to this
        and later runs until ``reset()``.

        Returns:
            The configuration the next run will use.

        Raises:
            ValueError: naming the field; nothing changes (``events.on_changes_refused``).
        """
        changes = dict(changes)
        label = changes.pop("label", None)
        knob_changes = {k: v for k, v in changes.items() if k in self.inputs}
        other_changes = {k: v for k, v in changes.items() if k not in self.inputs}
        try:
            merged = {**self._overrides, **other_changes, **self.knob_values(skip=knob_changes),
                      **knob_changes}
            if label is not None:
                merged["label"] = label
            cfg = self.baseline.replace(**merged)
            if label is None and cfg.label and cfg.diff(self.baseline):
                cfg = cfg.replace(label="")     # as config() does
        except ValueError as e:
            self.events.on_changes_refused(e)
            raise
        self._overrides.update(other_changes)
        self._next_label = label
        for name in knob_changes:
            self.inputs[name].show(getattr(cfg, name))
        return cfg

    def reset(self) -> None:
        """Put every input back to the baseline and forget fields set through ``run(...)``."""
        self._overrides = {}
        self._next_label = None
        for name, knob in self.inputs.items():
            knob.reset(getattr(self.baseline, name))

    def suggestion(self) -> Optional[Tuple[str, Any, str]]:
        """The first ``(field, value, why)`` the last run's diagnosis suggests, or ``None``."""
        if not self.results:
            return None
        suggestions = self.analysis.diagnose(self.results[-1]).suggestions
        return tuple(suggestions[0]) if suggestions else None   # type: ignore[return-value]

    def baseline_result(self) -> Optional[RunResult]:
        """The result the others are compared with (``tfwb.analysis.rows.pick_baseline``)."""
        return pick_baseline(self.results, self.baseline)

    # -- running -----------------------------------------------------------------
    @property
    def running(self) -> bool:
        """True while a run is in progress."""
        return self._running

    @property
    def stopping(self) -> bool:
        """True when the run in progress was asked to stop."""
        flag = self._stop_flag
        return flag is not None and flag.is_set

    def use_background(self) -> bool:
        """Whether a click's run goes to a background thread (``background``, else: in a kernel)."""
        return self.background if self.background is not None else kernel_loop() is not None

    def run(self, **changes: Any) -> RunResult:
        """Take ``changes`` (``set_changes``) and run on this thread until the run ends.

        Returns:
            The recorded RunResult (a runner that raises gives ``status="failed"``).

        Raises:
            ValueError: naming an unknown field, or the field whose value is not allowed
                (a knob input included); nothing runs.
            RuntimeError: when a run is in progress.
        """
        return self._run_changes(changes, note=None)

    def apply_suggestion(self) -> RunResult:
        """Set the field of the last run's first suggestion and run, as ``run`` does.

        Raises:
            ValueError: when there is no suggestion (or no run yet).
            RuntimeError: when a run is in progress.
        """
        suggestion = self.suggestion()
        if suggestion is None:
            last = self.analysis.diagnose(self.results[-1]).headline if self.results else "no run yet"
            raise ValueError(f"no suggestion to apply (last run: {last})")
        return self._run_changes({suggestion[0]: suggestion[1]}, note=applied_note(suggestion))

    def click(self, *, apply: bool = False) -> None:
        """What the Run (or, with ``apply``, the Apply suggestion) button does; never raises.

        Starts the run where ``use_background()`` says; does nothing while a run is in
        progress, and nothing but tell ``events`` for a value that is not allowed.
        """
        note = None
        if apply:
            suggestion = self.suggestion()
            if suggestion is None or self._running:
                return
            try:
                self.set_changes({suggestion[0]: suggestion[1]})
            except ValueError:
                return                               # told to events by set_changes
            note = applied_note(suggestion)
        self.launch(background=self.use_background(), note=note)

    def _run_changes(self, changes: Dict[str, Any], note: Optional[str]) -> RunResult:
        _config.check_fields(changes)
        if self._running:
            raise RuntimeError(_BUSY)
        self.set_changes(changes)
        result = self.launch(background=False, note=note, raise_bad_config=True)
        if result is None:  # only when another run started meanwhile
            raise RuntimeError(_BUSY)
        return result

    def launch(self, *, background: bool, note: Optional[str] = None,
               raise_bad_config: bool = False) -> Optional[RunResult]:
        """Start a run of ``config()``: the one path for clicks, ``run`` and apply.

        Args:
            background: run on a background thread (and arm the interrupt bridge).
            note: said with the run's outcome (e.g. ``applied_note``).
            raise_bad_config: raise when an input holds a bad value (else just tell events).

        Returns:
            The result when it ran here; ``None`` when it runs in the background or did not
            start (a run already in progress, or a bad input when not raising).

        Raises:
            ValueError: for a bad input, with ``raise_bad_config``.
        """
        with self._lock:
            if self._running:
                return None
            try:
                cfg = self.config()
            except ValueError as e:
                self._next_label = None
                self.events.on_config_refused(e)
                if raise_bad_config:
                    raise
                return None
            self._next_label = None
            flag = StopFlag(STOP_REASON)
            self._running, self._stop_flag, self._progress_done = True, flag, 0
            self.events.on_run_start(cfg, len(self.results) + 1, note, background)
        if not background:
            return self._execute(cfg, flag, note)
        self._thread = threading.Thread(target=self._execute, args=(cfg, flag, note),
                                        name="tfwb-workbench-run", daemon=True)
        self.bridge.arm()
        self._thread.start()
        return None

    def tune(self, max_runs: int = 4, *, background: bool = False, raise_errors: bool = True,
             rounds: Optional[int] = None) -> Optional[Tuning]:
        """Tune from ``config()`` (``tfwb.search.tune_loop.tune``), recording every run, then set the best knobs.

        Args:
            max_runs: the most trials (candidate runs), >= 1.
            background: tune on a background thread (the Tune button in a kernel).
            raise_errors: raise what ended the tune (a failed baseline) instead of only telling events.
            rounds: interleaved rounds per trial (``tfwb.tune``'s default when None).

        Returns:
            The ``Tuning`` when it ran here; ``None`` in the background or when it did not start.

        Raises:
            ValueError: for ``max_runs`` below 1 or a knob input holding a bad value.
            RuntimeError: when a run is in progress, or (``raise_errors``) the baseline run failed.
        """
        with self._lock:
            if self._running:
                if raise_errors:
                    raise RuntimeError(_BUSY)
                return None
            try:
                cfg = self.config()
                check_arguments(cfg, max_runs, rounds=rounds)
            except ValueError as e:
                self.events.on_config_refused(e)
                if raise_errors:
                    raise
                return None
            flag = StopFlag(STOP_REASON)
            self._running, self._stop_flag, self._progress_done = True, flag, 0
        self.events.on_tune_start(cfg, max_runs)
        job = (cfg, flag, max_runs, rounds, background, raise_errors)
        if not background:
            return self._execute_tune(*job)
        self._thread = threading.Thread(target=self._execute_tune, args=job, name="tfwb-workbench-tune",
                                        daemon=True)
        self.bridge.arm()
        self._thread.start()
        return None

    def _execute_tune(self, cfg: RunConfig, flag: StopFlag, max_runs: int, rounds: Optional[int],
                      background: bool, raise_errors: bool) -> Optional[Tuning]:
        def runner(run_cfg: RunConfig, observers: Sequence[Observer]) -> RunResult:
            self.events.on_run_start(run_cfg, len(self.results) + 1, "Tune", background)
            self._progress_done = 0
            result = self._call_runner(run_cfg, flag)   # its observers: the progress, the same stop flag
            self._record(result, "Tune")
            return result

        epoch_examples = None
        if self._runner is None:   # tfwb.run: the epoch's length is known (cache first, or skipped on a short run)
            from tfwb.tf.lab.tune import epoch_examples
        try:
            try:
                tuning = tune_loop(cfg, max_runs=max_runs, rounds=rounds, runner=runner, compare=deciding.recording(comparer(self.compare), self._record_decision),
                                   stop=flag, progress=self.events.on_tune_event, epoch_examples=epoch_examples)
            except (RuntimeError, KeyboardInterrupt) as e:
                self.events.on_tune_end(None, e)
                if raise_errors:
                    raise
                return None
            self.tuning = tuning
            changes = tuning.changes()
            if changes:
                self.set_changes(changes)
            self.events.on_tune_end(tuning, None)
            return tuning
        finally:
            self._ready()

    # -- deciding ------------------------------------------------------------------------
    def latest_view(self) -> Any:
        """The latest run's ``RunView`` (``tfwb.analysis.session``), or ``None`` before the first run."""
        if not self.results:
            return None
        return self.analysis.views(self.results, self.baseline_result(), baseline_config=self.baseline)[-1]

    def undecided(self) -> Tuple[str, ...]:
        """Which of the latest run's verdicts (``"previous"``, ``"baseline"``) say "cannot tell" with no
        interleaved verdict yet (``RunView.undecided``): what ``decide`` can answer."""
        view = self.latest_view()
        return view.undecided() if view is not None else ()

    def decide_pair(self, against: str = "previous") -> Tuple[int, int]:
        """``(reference, number)``: the 1-based runs whose configurations ``decide(against)`` compares.

        Raises:
            ValueError: for ``against`` not ``"previous"`` or ``"baseline"``, or nothing to compare (``RunView.pair``).
        """
        view = self.latest_view()
        if view is None:
            raise ValueError(f"nothing to decide against the {against}: no run yet")
        return view.pair(against)

    def decide(self, against: str = "previous", rounds: Optional[int] = None, *, background: bool = False,
               raise_errors: bool = True) -> Optional[stats.RoundsComparison]:
        """Compare the latest run's configuration with the ``against`` run's, interleaved (``compare``), and
        record the verdict (``Analysis.decided``): the Decide button.

        Args:
            against: ``"previous"`` or ``"baseline"``.
            rounds: interleaved rounds (>= 1; 6 or more decide); default ``FAST_ROUNDS`` (10) in small
                mode (``TFWB_FAST=1``), else the comparison's own default.
            background: compare on a background thread (the button in a kernel); Stop ends it.
            raise_errors: raise a refused start or a failed comparison instead of only telling events.

        Returns:
            The ``stats.RoundsComparison`` (the reference as baseline, the latest run as candidate) when it
            ran here to its end; ``None`` in the background, when it did not start, or was stopped.

        Raises:
            ValueError: for a bad ``against`` or ``rounds``, or nothing to compare (``decide_pair``).
            RuntimeError: when a run is in progress.
        """
        try:
            deciding.check_rounds(rounds)
            with self._lock:
                if self._running:
                    raise RuntimeError(_BUSY)
                reference, number = self.decide_pair(against)
                flag = StopFlag(STOP_REASON)
                self._running, self._stop_flag, self._progress_done = True, flag, 0
        except (ValueError, RuntimeError):
            if raise_errors:
                raise
            return None
        self.events.on_decide_start(reference, number, background)
        if rounds is None and fast_mode():
            rounds = FAST_ROUNDS
        job = (self.results[reference - 1].config, self.results[number - 1].config, flag, rounds, raise_errors)
        if not background:
            return self._execute_decide(*job)
        self._thread = threading.Thread(target=self._execute_decide, args=job, name="tfwb-workbench-decide",
                                        daemon=True)
        self.bridge.arm()
        self._thread.start()
        return None

    def _execute_decide(self, a: RunConfig, b: RunConfig, flag: StopFlag, rounds: Optional[int],
                        raise_errors: bool) -> Optional[stats.RoundsComparison]:
        try:
            return deciding.run_decide(comparer(self.compare), a, b, rounds=rounds, flag=flag, events=self.events,
                                       record=self._record_decision, raise_errors=raise_errors)
        finally:
            self._ready()

    def _record_decision(self, a: RunConfig, b: RunConfig, rounds: stats.RoundsComparison) -> None:
        """Keep an interleaved verdict (``Analysis.decided``, which pushes the views again) and tell events."""
        if self.analysis.decided(a, b, rounds) is None and self.results:
            self.analysis.push(self.results, self.baseline_result(), baseline_config=self.baseline)  # resumed
        self.events.on_decided(rounds)

    def stop(self, how: str = "wb.stop()", *, interrupted: bool = False) -> bool:
        """Ask the run in progress to end after its current step (thread-safe; a signal handler calls it).

        A user's stop is said here, once: the runner ends the run as ``"interrupted"``
        with the reason ``"stopped by the user (<how>)"`` (``"interrupted by the user
        (<how>)"`` with ``interrupted``).

        Returns:
            True when a run was in progress.
        """
        flag = self._stop_flag
        if flag is None:
            return False
        flag.set(f"{INTERRUPT_REASON if interrupted else STOP_REASON} ({how})", interrupted=True)
        return True

    def wait(self, timeout: Optional[float] = None) -> Optional[RunResult]:
        """Wait for a background run to end; the last result (``None``: no run yet).

        A KeyboardInterrupt while waiting stops the run (after its current step) and waits for it.

        Args:
            timeout: seconds to wait at most (``None``: until it ends).
        """
        thread = self._thread
        if thread is not None:
            try:
                thread.join(timeout)
            except KeyboardInterrupt:
                self.stop("KeyboardInterrupt", interrupted=True)
                thread.join()
        return self.results[-1] if self.results else None

    def _execute(self, cfg: RunConfig, flag: StopFlag, note: Optional[str]) -> RunResult:
        """Run ``cfg``, record the result, and be ready again."""
        try:
            result = self._call_runner(cfg, flag)
            self._record(result, note)
            return result
        finally:
            self._ready()

    def _ready(self) -> None:
        """A run (or a tune) ended: disarm the bridge and be ready for the next."""
        self.bridge.disarm()
        with self._lock:
            self._running, self._stop_flag = False, None
            self.events.on_idle()

    def _call_runner(self, cfg: RunConfig, flag: StopFlag) -> RunResult:
        """The runner's result; a failed or interrupted RunResult for what it raised."""
        try:
            runner = self._runner
            if runner is None:
                import tfwb       # lazy: tfwb.run imports TensorFlow

                runner = tfwb.run
            progress = Progress(self._on_progress, settled_only=True)     # the view waits for a window's end
            result = runner(cfg, (progress, flag, *self._scalars(cfg)))
            if not isinstance(result, RunResult):
                raise TypeError(f"the runner returned {type(result).__name__}, not a RunResult")
            return result
        except KeyboardInterrupt:   # a runner that let it through: the run is still the user's stop
            reason = f"{INTERRUPT_REASON} (KeyboardInterrupt)"
            total = total_steps(cfg)
            return RunResult(config=cfg, status="interrupted", stop_reason=reason,
                             error=f"{reason} after {self._progress_done} of {total} steps",
                             started_at=now_iso(), run_id=new_run_id())
        except Exception as e:  # shown by the renderer and recorded, not lost in a log console
            return RunResult(config=cfg, status="failed", error=f"{type(e).__name__}: {e}",
                             started_at=now_iso(), run_id=new_run_id())

    def _scalars(self, cfg: RunConfig) -> tuple:
        """The TensorBoard observer for the next run (none without ``logdir``)."""
        if self.logdir is None:
            return ()
        from tfwb.tf.lab.tensorboard import Scalars, run_name   # TensorFlow: only with a logdir

        what = cfg.label or "_".join(short_changes(cfg, self.baseline)) or "baseline"
        return (Scalars(self.logdir, name=f"{len(self.results) + 1:02d}-{run_name(what)}"),)

    def _on_progress(self, steps_done: int, steps_total: int) -> None:
        """The runner's progress, between timing windows only (``Progress(settled_only=True)``)."""
        self._progress_done = steps_done
        self.events.on_progress(steps_done, steps_total, self.stopping)

    def _record(self, result: RunResult, note: Optional[str]) -> None:
        """Keep the result, save it, and tell events (with what could not be saved)."""
        self.results.append(result)
        problems = []
        if self._history is not None:
            try:
                self._history.append(result)
            except OSError as e:
                problems.append(f"not saved to {self.history_path}: {e}")
        self.analysis.push(self.results, self.baseline_result(), baseline_config=self.baseline)
        self.events.on_result(result, len(self.results), note, problems)
