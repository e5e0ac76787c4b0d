"""One analysis of a run history, pushed to its front ends: each finished run's ``RunView``, computed once.

A front end (the Workbench's status line, history table, charts and Apply button; the CLI's
report; a chapter's expectation checks) asks ``Analysis`` instead of calling ``tfwb.diagnose``
or ``tfwb.analysis.rows.history_rows`` itself. Each run is diagnosed once (``Analysis.diagnose``),
and the rows of a history are computed once per state of the history (``Analysis.rows``), so one
click does not diagnose the same run ten times, and every front end shows the same verdict for a
pair of runs (``tfwb.analysis.pairs.compare_runs`` decides it; "cannot tell" when either run was
busy).

Interleaved verdicts. Separate runs on a busy or drifting machine say "cannot tell"; an interleaved
comparison of the pair's two configurations decides (the Workbench's Decide button, ``tfwb tune``'s
trials). ``Analysis.decided(a, b, rounds)`` keeps such a verdict (``tfwb.analysis.decisions``, per ordered
pair of configurations, inverted for the reversed pair), and every row whose pair has one carries it as
its ``Versus.decided``, which every front end shows instead of the separate-run verdict: one story per
page. It pushes the views again, so the subscribers redraw.

Observer style: a front end subscribes (``Analysis.subscribe(callback)``); the owner of the
history calls ``Analysis.push`` when a run finishes, and every subscriber receives that run's
``RunView``. The words are rendered by ``tfwb.render`` from the view's rows.

The record (``RunResult``) stays data: it does not import this module or its interpretation.
Pure: no TensorFlow, no UI library.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from tfwb import stats
from tfwb.analysis import rows as _rows
from tfwb.analysis.decisions import Decisions
from tfwb.analysis.diagnosis import Diagnosis, diagnose
from tfwb.analysis.noise import noise_band
from tfwb.analysis.pairs import busy
from tfwb.analysis.rows import HistoryRow
from tfwb.config import RunConfig
from tfwb.records import RunResult

__all__ = ["Analysis", "RunView", "AGAINST"]

#: What a run's verdict can be against: ``"previous"`` (the previous finished run) or ``"baseline"``.
AGAINST = ("previous", "baseline")


@dataclass(frozen=True)
class RunView:
    """What the history says about one run (1-based ``index``), as every front end shows it.

    Attributes:
        index, result: the run and its position in the history.
        row: its ``HistoryRow`` (comparisons with the baseline and the previous run, notes' data).
        rows: the rows of the whole history as it stood when the view was made (the tables
            and the comparison chart read them).
        versus_baseline / versus_previous: the verdict's kind (``stats.FASTER``, ``stats.SLOWER``,
            ``stats.NO_DIFFERENCE``, a ``stats.CANNOT_TELL`` verdict, ``stats.TOO_FEW``,
            ``"baseline"``) or ``None``.
        previous: the index of the run it is compared with as "previous", or ``None``.
        other_cpu_pct, busy: the CPU share other programs used during it, and whether that made it busy.
        noise: the run-to-run band the verdicts used.
        diagnosis: ``tfwb.diagnose`` of it (computed once).
        baseline_config: the configuration the rows' ``changes`` are relative to, as asked
            (``None``: the baseline run's).
    """

    index: int
    result: RunResult
    row: HistoryRow
    rows: Tuple[HistoryRow, ...]
    versus_baseline: Optional[str]
    versus_previous: Optional[str]
    previous: Optional[int]
    other_cpu_pct: Optional[float]
    busy: bool
    noise: stats.NoiseBand
    diagnosis: Diagnosis
    baseline_config: Optional[RunConfig] = None

    @property
    def results(self) -> Tuple[RunResult, ...]:
        """The runs of the history as it stood when the view was made, in order."""
        return tuple(r.result for r in self.rows)

    def versus(self, against: str) -> Any:
        """The run's ``Versus`` the previous run or the baseline (``against`` in ``AGAINST``), or ``None``.

        Raises:
            ValueError: for ``against`` not in ``AGAINST``.
        """
        if against not in AGAINST:
            raise ValueError(f"against={against!r} is not allowed; allowed: {', '.join(map(repr, AGAINST))}")
        return self.row.versus_previous if against == "previous" else self.row.versus_baseline

    def pair(self, against: str) -> Tuple[int, int]:
        """``(reference, index)``: the 1-based runs an interleaved comparison ``against`` the previous run or
        the baseline compares (the run itself as the candidate).

        Raises:
            ValueError: for ``against`` not in ``AGAINST``, or when the run has no measured comparison
                against that run (it failed, it is the baseline, another workload size).
        """
        versus = self.versus(against)
        if versus is None or versus.comparison is None:
            raise ValueError(f"nothing to decide against the {against}: the last run (#{self.index}, "
                             f"{self.result.status}) has no measured comparison with it")
        return versus.reference, self.index

    def undecided(self) -> Tuple[str, ...]:
        """Which of the run's verdicts (``AGAINST``) say "cannot tell" (busy or drifted) with no interleaved
        verdict for their pair yet: each is one interleaved comparison from an answer.

        Example:
            >>> from tfwb.records import RunResult
            >>> runs = [RunResult(config=RunConfig(), step_times_s=(0.2,) * 9, extras={"other_cpu_pct": 30.0}),
            ...         RunResult(config=RunConfig(prefetch=True), step_times_s=(0.1,) * 9, extras={"other_cpu_pct": 1.0})]
            >>> Analysis().push(runs).undecided()       # the baseline is the previous run: one pair to decide
            ('previous',)
        """
        out = []
        for against in AGAINST:
            v = self.versus(against)
            if v is not None and v.decided is None and v.kind in stats.CANNOT_TELL \
                    and not (against == "baseline" and v.reference_is_baseline and "previous" in out):
                out.append(against)
        return tuple(out)


class Analysis:
    """The cached analysis of one history (a Workbench, a CLI report, a chapter).

    Example:
        >>> from tfwb.records import RunResult
        >>> a = Analysis()
        >>> seen = []
        >>> a.subscribe(seen.append)
        >>> runs = [RunResult(config=RunConfig(), step_times_s=(0.2,) * 9), RunResult(config=RunConfig(prefetch=True),
        ...         step_times_s=(0.1,) * 9)]
        >>> v = a.push(runs)
        >>> v.versus_baseline, v.row.speedup, seen == [v]
        ('faster', 2.0, True)
        >>> a.views(runs)[1] is v and a.diagnose(runs[1]) is v.diagnosis      # computed once
        True
        >>> w = a.decided(runs[0].config, runs[1].config, stats.compare_rounds([0.2] * 6, [0.125] * 6))
        >>> w.row.versus_baseline.decided.speedup, w.row.speedup, seen[-1] is w
        (1.6, 1.6, True)
    """

    def __init__(self, hardware: Any = None) -> None:
        self.hardware = hardware
        self._diagnoses: Dict[int, Tuple[RunResult, Diagnosis]] = {}
        self._rows_key: Optional[tuple] = None
        self._rows: List[HistoryRow] = []
        self._views: Tuple[RunView, ...] = ()
        self._subscribers: List[Callable[[RunView], None]] = []
        #: The interleaved verdicts recorded through ``decided`` (``tfwb.analysis.decisions.Decisions``).
        self.decisions = Decisions()
        self._decided_version = 0
        self._pushed: Optional[tuple] = None      # the last push's (results, baseline, baseline_config)
        self.diagnosed = 0          # how many diagnoses were computed (not read from the cache)

    def subscribe(self, callback: Callable[[RunView], None]) -> None:
        """Call ``callback(view)`` with each run's ``RunView`` that ``push`` hands on."""
        self._subscribers.append(callback)

    def unsubscribe(self, callback: Callable[[RunView], None]) -> None:
        """Stop calling ``callback`` (nothing happens when it was not subscribed)."""
        if callback in self._subscribers:
            self._subscribers.remove(callback)

    def push(self, results: Sequence[RunResult], baseline: Optional[RunResult] = None, *,
             baseline_config: Optional[RunConfig] = None) -> RunView:
        """The latest run's ``RunView`` (the history just grew), handed to every subscriber.

        Raises:
            ValueError: for an empty history.
        """
        if not results:
            raise ValueError("push needs a history with at least one run")
        view = self.views(results, baseline, baseline_config=baseline_config)[-1]
        self._pushed = (list(results), baseline, baseline_config)
        for callback in list(self._subscribers):
            callback(view)
        return view

    def decided(self, a: RunConfig, b: RunConfig, rounds: stats.RoundsComparison) -> Optional[RunView]:
        """Record ``rounds``, the interleaved comparison of ``b`` (the candidate) against ``a``, and push the
        latest run's view again (its rows now carry it as ``Versus.decided`` wherever a row compares runs of
        these two configurations, either way round: the reversed pair gets the ratio inverted).

        Returns:
            The latest run's new ``RunView``, handed to every subscriber; ``None`` when nothing was pushed yet.

        Raises:
            ValueError: for a configuration that is not a RunConfig or ``rounds`` that is not a
                ``stats.RoundsComparison``.
        """
        self.decisions.record(a, b, rounds)
        self._decided_version += 1
        if self._pushed is None:
            return None
        results, baseline, baseline_config = self._pushed
        return self.push(results, baseline, baseline_config=baseline_config)

    def decision(self, a: RunConfig, b: RunConfig) -> Optional[stats.RoundsComparison]:
        """The interleaved verdict of ``b`` against ``a`` recorded so far (inverted when it was measured the
        other way round), or ``None``."""
        return self.decisions.get(a, b)

    def diagnose(self, result: RunResult) -> Diagnosis:
        """``tfwb.diagnose(result)``, computed once per run."""
        hit = self._diagnoses.get(id(result))
        if hit is not None and hit[0] is result:
            return hit[1]
        d = diagnose(result, self.hardware)
        self.diagnosed += 1
        self._diagnoses[id(result)] = (result, d)
        return d

    def rows(self, results: Sequence[RunResult], baseline: Optional[RunResult] = None, *,
             baseline_config: Optional[RunConfig] = None) -> List[HistoryRow]:
        """``tfwb.analysis.rows.history_rows(results, baseline, ...)``, computed once per state of the history."""
        key = (tuple(id(r) for r in results), id(baseline), repr(baseline_config), self._decided_version)
        if key != self._rows_key:
            noise = noise_band(results)
            self._rows = _rows.history_rows(results, baseline, baseline_config=baseline_config, noise=noise,
                                            diagnoser=self.diagnose, decided=self.decisions.get)
            table = tuple(self._rows)
            self._views = tuple(self._view(row, table, baseline_config) for row in self._rows)
            self._rows_key = key
        return self._rows

    def views(self, results: Sequence[RunResult], baseline: Optional[RunResult] = None, *,
              baseline_config: Optional[RunConfig] = None) -> Tuple[RunView, ...]:
        """Each run's ``RunView``, in order (the same objects until the history changes)."""
        self.rows(results, baseline, baseline_config=baseline_config)
        return self._views

    def _view(self, row: HistoryRow, table: Tuple[HistoryRow, ...],
              baseline_config: Optional[RunConfig]) -> RunView:
        result = row.result
        return RunView(index=row.index, result=result, row=row, rows=table, versus_baseline=row.comparison,
                       versus_previous=row.prev_comparison, previous=row.previous,
                       other_cpu_pct=row.other_cpu_pct, busy=busy(result), noise=row.noise,
                       diagnosis=self.diagnose(result), baseline_config=baseline_config)
