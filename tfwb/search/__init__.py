"""Sweeps: a search over knobs for the fastest configuration that still trains correctly.

``tfwb.sweep(baseline, space)`` is the function; this package holds its parts, one
concept per module:

- ``space``: the knob space (the default space, checking a space, its candidates);
- ``rungs``: what a sweep will run (``plan``: the candidates, the steps of each rung),
  before anything runs, and how long it should take (``Plan.estimate_s``, ``fit_plan``);
- ``search``: successive halving (``sweep``) and the exhaustive grid it replaces;
- ``rule``: what "trains correctly" means (the naive run's loss drop, at equal examples seen);
- ``result``: ``SweepResult`` and ``Trial``, how a run is scored, and their text;
- ``progress``: ``SweepProgress``, what a progress bar is given.

Pure: no TensorFlow, no UI library (charts: ``tfwb.ui.charts.candidates``; a notebook bar:
``tfwb.ui.sweep_progress``; the command: ``tfwb.cli.sweep``).

Example:
    >>> from tfwb import RunConfig
    >>> from tfwb.search import plan
    >>> plan(RunConfig(workload="mlp"), {"prefetch": [False, True]}, rungs=2).rung_steps
    (10, 30)
"""
from tfwb.search.rungs import Plan, fit_plan, plan, rung_steps
from tfwb.search.progress import SweepProgress
from tfwb.search.result import SweepResult, Trial
from tfwb.search.halving import GridResult, exhaustive, sweep
from tfwb.search.space import FIXED_KNOBS, Candidate, candidates, check_space, default_space

__all__ = ["sweep", "plan", "fit_plan", "Plan", "SweepResult", "Trial", "SweepProgress", "exhaustive", "GridResult",
           "default_space", "check_space", "candidates", "Candidate", "rung_steps",
           "FIXED_KNOBS"]
