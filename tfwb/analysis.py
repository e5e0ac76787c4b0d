"""One analysis of a run history: each finished run's typed view, computed once, for every front end.

A front end (the Workbench's status line, history table, charts and Apply button; the CLI's
report; a chapter's expectation checks) asks ``Analysis`` instead of calling ``tfwb.diagnose``
or ``tfwb.report.history_rows`` itself. Each run is diagnosed once (``Analysis.diagnose``), and
the rows of a history are computed once per state of the history (``Analysis.rows``), so one
click no longer diagnoses the same run ten times, and every front end shows the same verdict
for a pair of runs (``tfwb.pairs.compare_runs`` decides it; "cannot tell" when either run was busy).

``RunView`` is a run's view: its comparison with the baseline and with the previous run (kind
and words), the CPU share other programs used during it, the noise band used, its diagnosis
and the score of the bound it was suggested with.

The record (``RunResult``) stays data: it does not import this module or its interpretation.
Pure: no TensorFlow, no UI library.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple

from tfwb import report, stats
from tfwb.config import RunConfig
from tfwb.diagnosis import Diagnosis, diagnose
from tfwb.pairs import busy, noise_band, other_cpu_pct
from tfwb.records import RunResult

__all__ = ["Analysis", "RunView"]


@dataclass(frozen=True)
class RunView:
    """What the history says about one run (1-based ``index``), as every front end shows it.

    Attributes:
        index, result: the run and its position in the history.
        versus_baseline / versus_previous: the verdict's kind (``stats.FASTER``, ``stats.SLOWER``,
            ``stats.NO_DIFFERENCE``, a ``stats.CANNOT_TELL`` verdict, ``stats.TOO_FEW``,
            ``"baseline"``) or ``None``; ``*_text`` its words.
        previous: the index of the run it is compared with as "previous", or ``None``.
        other_cpu_pct, busy: the CPU share other programs used during it, and whether that made it busy.
        noise: the run-to-run band the verdicts used.
        diagnosis: ``tfwb.diagnose`` of it (computed once).
        bound_note: the score of the bound of the previous run's suggestion it applied, or ``""``.
        row: ``tfwb.report.history_rows``' row for it (the tables read it).
    """

    index: int
    result: RunResult
    versus_baseline: Optional[str]
    versus_baseline_text: str
    versus_previous: Optional[str]
    versus_previous_text: str
    previous: Optional[int]
    other_cpu_pct: Optional[float]
    busy: bool
    noise: stats.NoiseBand
    diagnosis: Diagnosis
    bound_note: str
    row: Dict[str, Any]


class Analysis:
    """The cached analysis of one history (a Workbench, a CLI report, a chapter).

    Example:
        >>> from tfwb.records import RunResult
        >>> a = Analysis()
        >>> runs = [RunResult(config=RunConfig(), step_times_s=(0.2,) * 9), RunResult(config=RunConfig(prefetch=True),
        ...         step_times_s=(0.1,) * 9)]
        >>> v = a.views(runs)[1]
        >>> v.versus_baseline, v.versus_baseline_text
        ('faster', '2.00x faster')
        >>> a.views(runs)[1] is v and a.diagnose(runs[1]) is v.diagnosis      # computed once
        True
    """

    def __init__(self, hardware: Any = None) -> None:
        self.hardware = hardware
        self._diagnoses: Dict[int, Tuple[RunResult, Diagnosis]] = {}
        self._rows_key: Optional[tuple] = None
        self._rows: List[Dict[str, Any]] = []
        self._views: Tuple[RunView, ...] = ()
        self.diagnosed = 0          # how many diagnoses were computed (not read from the cache)

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
             baseline_config: Optional[RunConfig] = None) -> List[Dict[str, Any]]:
        """``tfwb.report.history_rows(results, baseline, ...)``, computed once per state of the history."""
        key = (tuple(id(r) for r in results), id(baseline), repr(baseline_config))
        if key != self._rows_key:
            noise = noise_band(results)
            self._rows = report.history_rows(results, baseline, baseline_config=baseline_config, noise=noise,
                                             diagnoser=self.diagnose)
            self._views = tuple(self._view(row, r, noise) for row, r in zip(self._rows, results))
            self._rows_key = key
        return self._rows

    def views(self, results: Sequence[RunResult], baseline: Optional[RunResult] = None, *,
              baseline_config: Optional[RunConfig] = None) -> Tuple[RunView, ...]:
        """Each run's ``RunView``, in order (the same objects until the history changes)."""
        self.rows(results, baseline, baseline_config=baseline_config)
        return self._views

    def _view(self, row: Dict[str, Any], result: RunResult, noise: stats.NoiseBand) -> RunView:
        return RunView(index=row["index"], result=result, versus_baseline=row["comparison"],
                       versus_baseline_text=row["verdict"], versus_previous=row["prev_comparison"],
                       versus_previous_text=row["prev_verdict"], previous=row["previous"],
                       other_cpu_pct=other_cpu_pct(result), busy=busy(result), noise=noise,
                       diagnosis=self.diagnose(result), bound_note=row["bound_note"], row=row)
