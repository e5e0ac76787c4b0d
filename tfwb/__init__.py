"""tfwb — a measured workbench for making TensorFlow training fast.

``import tfwb`` is cheap: it does not import TensorFlow, ipywidgets or matplotlib, and it changes
nothing in the import system. Those load when you call ``run``, build a ``Workbench`` or draw a
chart. ARCHITECTURE.md (at the repository's root) describes the house; in short, the layers, each
importing only the ones before it (``tests/test_layering.py`` checks it, package ``__init__``
files included):

1. the pure core: this folder's modules (knobs and ``RunConfig``, ``RunResult`` and its limits,
   the run ``history``, ``stats``, ``timing``, observers and the run ``lifecycle``, workloads, the
   machine, what limits a run (``bottleneck``), ``render`` (the words), a reader's ``prediction``
   and its ``scorecard``), and the packages ``analysis/`` (what a run means: pairs, noise,
   diagnosis, rows, the session), ``advice/`` (what a knob can do), ``expect/`` (checks) and
   ``search/`` (the sweep and the tune) — no TensorFlow, IPython, ipywidgets or matplotlib;
2. ``utilization/``: the utilization probes and the sampler thread;
3. ``tf/``: everything that imports TensorFlow. ``tf/runner/`` is what ``tfwb.run`` drives in one
   process, ``tf/cluster/`` the local multi-worker and parameter-server clusters,
   ``tf/workloads/`` the built-in workloads and their data, and ``tf/lab/`` the chapters'
   instruments and the facades that hand ``tfwb.run`` to the pure searches; the runner imports
   neither ``lab`` nor ``cluster``, and ``tf/run.py`` picks the runner;
4. ``keras/`` (the fit Monitor), ``ui/`` (the Workbench, the prediction box and the charts) and
   ``cli/`` (``python -m tfwb``); ``ui`` and ``cli`` do not import each other.

Function-local imports appear only where they keep TensorFlow, widgets or matplotlib from
loading before they are needed. Names that moved in 0.3 still import from their old places
until 0.4, with a warning (``tfwb.renamed``).
"""
from __future__ import annotations

import importlib
from typing import Any

from tfwb import expect, observers, renamed
from tfwb.config import RunConfig
from tfwb.analysis.diagnosis import diagnose  # the function; its module is tfwb.analysis.diagnosis
from tfwb.expect import check
from tfwb.history import load_results
from tfwb.records import RunResult, Sample
from tfwb.stats import compare
from tfwb import search  # noqa: F401 - the package (tfwb.search.plan, ...); tfwb.sweep is lazy, below
from tfwb.workloads import register_workload

renamed.extend_path(__name__, __path__)   # names moved in 0.3 import from tfwb/_moved/ until 0.4, with a warning

__version__ = "0.3.0"

__all__ = [
    "RunConfig", "RunResult", "Sample", "run", "Workbench", "register_workload",
    "load_results", "compare", "diagnose", "detect_hardware", "check", "setup_devices",
    "observers", "expect", "compare_interleaved", "choose_size", "profile", "sweep", "chapter", "__version__",
    "count_flops", "measure_peak", "tune", "predict", "calibration", "ask",
]

_LAZY = {
    "count_flops": ("tfwb.tf.runner.flops", "count_flops"),     # FLOPs counted from a Keras model
    "measure_peak": ("tfwb.tf.runner.matmul_peak", "measure_peak"),    # this machine's matmul peak, cached
    "run": ("tfwb.tf.run", "run"),
    "Workbench": ("tfwb.ui.workbench", "Workbench"),
    "detect_hardware": ("tfwb.tf.runner.devices", "machine"),   # TensorFlow's view of the GPUs
    "setup_devices": ("tfwb.tf.runner.devices", "setup_devices"),
    "compare_interleaved": ("tfwb.tf.lab.side_by_side", "compare_interleaved"),
    "choose_size": ("tfwb.tf.lab.sizing", "choose_size"),
    "profile": ("tfwb.tf.lab.profiler", "profile"),
    "chapter": ("tfwb.tf.lab.chapter", "chapter"),
    "predict": ("tfwb.prediction", "predict"),          # a reader's prediction of a change (pure)
    "calibration": ("tfwb.scorecard", "calibration"),   # many scored predictions summed up (pure)
    "sweep": ("tfwb.tf.lab.sweep", "sweep"),  # the pure search (tfwb.search.halving) with tfwb.run handed in
    "tune": ("tfwb.tf.lab.tune", "tune"),    # the pure loop (tfwb.search.tune_loop) with tfwb.run handed in
    "ask": ("tfwb.ui.prediction_box", "ask"),     # the prediction box a reader fills before an experiment (widgets)
}


def __getattr__(name: str) -> Any:
    if name == "keras":           # tfwb.keras (the fit callback; imports Keras): loaded on first use
        return importlib.import_module("tfwb.keras")
    if name in _LAZY:
        module, attr = _LAZY[name]
        value = getattr(importlib.import_module(module), attr)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'tfwb' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(__all__))
