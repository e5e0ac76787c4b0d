"""How to search for a faster configuration: the sweep and the tune, side by side.

``tfwb.sweep(baseline, space)`` searches a space of knobs by successive halving;
``tfwb.tune(baseline)`` walks from a run to the change its diagnosis bounds highest, keeping
what an interleaved comparison calls faster. This package holds their parts, one concept
per module:

- ``space``: the sweep's knob space (the default space, checking a space, its candidates);
- ``rungs``: what a sweep will run (``plan``: the candidates, the steps of each rung),
  before anything runs, and how long it should take (``Plan.estimate_s``, ``fit_plan``);
- ``halving``: successive halving (``sweep``) and the exhaustive grid it replaces;
- ``loss_rule``: what "trains correctly" means (the naive run's loss drop, at equal examples
  seen), for the sweep and the tune;
- ``result``: ``SweepResult`` and ``Trial``, how a sweep's run is scored, and their text;
- ``progress``: ``SweepProgress``, what a sweep's progress bar is given;
- ``recorder``: ``RunRecorder``, the runs of one search (the stop flag, the interrupt
  bridge, the history), shared by the sweep and the tune;
- ``tune_changes``: ``Change`` and ``rank_changes``, what the tune may try next;
- ``tune_loop``: the tune's loop (``tune``, with the runner and the comparison handed in;
  ``tfwb.tune`` is ``tfwb.tf.lab.tune.tune``, which hands in ``tfwb.run``);
- ``tune_result``: ``TuneTrial`` and ``Tuning``, what the tune found, and their text;
- ``tune_events``: the typed events a running tune sends (``TrialStarted``, ``RoundDone``, ...).

Pure: no TensorFlow, no UI library (charts: ``tfwb.ui.charts.candidates``; a notebook bar:
``tfwb.ui.sweep_progress``; the commands: ``tfwb.cli.sweep``, ``tfwb.cli.tune``).

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
