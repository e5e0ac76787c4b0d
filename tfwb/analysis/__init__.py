"""What a run means, computed once and handed on as typed data: the way back from a run to the screen.

- ``tfwb.analysis.pairs``: two finished runs, one decision (``compare_runs``, ``other_cpu_pct``,
  ``busy``, the losses of a pair).
- ``tfwb.analysis.noise``: the run-to-run noise band learned from a history (``noise_band``).
- ``tfwb.analysis.diagnosis``: what limits a run, what to try next and how much it can gain
  (``tfwb.diagnose`` is its ``diagnose``).
- ``tfwb.analysis.rows``: the history as frozen ``HistoryRow``s holding data (``history_rows``).
- ``tfwb.analysis.tried``: the changes already measured (the history's one-knob changes, a tune's
  trials), which ``diagnosis.reorder`` puts behind the untried ones.
- ``tfwb.analysis.session``: ``Analysis``, a history's cached analysis, which pushes one
  ``RunView`` per finished run to every front end that subscribed.

The words are rendered afterwards, by ``tfwb.render``. The names below load lazily, so importing one
submodule does not import the others (``tfwb.expect`` imports ``pairs``; ``diagnosis`` imports
``tfwb.expect``). Pure: no TensorFlow, no UI library.
"""
from __future__ import annotations

import importlib
from typing import Any

__all__ = ["Analysis", "RunView", "HistoryRow", "Versus", "history_rows", "pick_baseline", "compare_runs",
           "other_cpu_pct", "busy", "noise_band", "diagnose", "Diagnosis"]

_HOME = {
    "Analysis": "session", "RunView": "session",
    "HistoryRow": "rows", "Versus": "rows", "history_rows": "rows", "pick_baseline": "rows",
    "compare_runs": "pairs", "other_cpu_pct": "pairs", "busy": "pairs",
    "noise_band": "noise",
    "diagnose": "diagnosis", "Diagnosis": "diagnosis",
}


def __getattr__(name: str) -> Any:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module 'tfwb.analysis' has no attribute {name!r}")
    return getattr(importlib.import_module(f"tfwb.analysis.{home}"), name)


def __dir__() -> list:
    return sorted(set(globals()) | set(__all__))
