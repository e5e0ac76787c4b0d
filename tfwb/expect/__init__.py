"""Say what an experiment should show before it runs, and afterwards whether it did.

Every measured claim in the book goes through this package, so that "agreed / did NOT
agree" is decided by tested code, never by a conditional written in a notebook cell. It
only checks; what a knob is expected to do is ``tfwb.advice`` (rules, directions, bounds),
which it reads and re-exports here under the names the chapters use:

- ``tfwb.expect.checks``: the checks, ``ab`` / ``check`` (A/B), ``at_least`` / ``at_most`` /
  ``equal`` (one measured value), ``unjudged``;
- ``tfwb.expect.changes``: ``change(hardware, baseline, **change)``, the A/B check of turning
  knobs, its direction from each knob's rule (``tfwb.advice.expected.expected_for``);
- ``tfwb.expect.machine_checks``: checks read from the machine alone (``default_device``,
  ``precision_memory``);
- here, from ``tfwb.advice``: ``expected_for``, ``table()``, ``where``, ``target``, the
  directions (``FASTER``...), ``RULES`` and ``KNOWN`` (every knob with a rule, read from
  ``tfwb.advice.entries.ADVICE`` on each use); from ``tfwb.bottleneck``: ``limit_of`` and
  ``LIMITS``.

Pure: no TensorFlow. ``tfwb.hardware.DESCRIBED`` holds described machines (a 2-core AVX2
CPU, AVX-512 CPUs, a Colab T4, an A100, an H100, an L4, a TPU VM, a TPU v5e VM).
"""
from __future__ import annotations

from typing import Any

from tfwb.advice.directions import DIRECTIONS, FASTER, NOT_FASTER, NOT_SLOWER, SAME, SLOWER, Expected
from tfwb.advice import expected as _expected
from tfwb.advice.expected import COMPUTE_KNOBS, INPUT_KNOBS, expected_for
from tfwb.advice.machine import best_compute_capability, target, where
from tfwb.advice.rules import PREFETCH_MIN_HIDDEN, Rule
from tfwb.advice.sources import SOURCES, source
from tfwb.advice.table import TABLE_CHANGES, table
from tfwb.bottleneck import COMPUTE, INPUT, LIMITS, OVERHEAD, OVERHEAD_GPU_BUSY_PCT, limit_of
from tfwb.expect.changes import change
from tfwb.expect.checks import (AB, AGREED, CANNOT_TELL, DISAGREED, Check, Equal, Threshold, Unjudged, ab,
                                at_least, at_most, check, equal, unjudged)
from tfwb.expect.machine_checks import MEMORY_MEASURES, default_device, precision_memory
from tfwb.renamed import extend_path, forward

extend_path(__name__, __path__)   # tfwb.expect.rules (moved to tfwb.advice.rules) imports until tfwb 0.4
_MOVED_NAMES = {"bound_of": "tfwb.bottleneck:limit_of", "BOUNDS": "tfwb.bottleneck:LIMITS",
                "check_bound": "tfwb.bottleneck:check_limit"}

__all__ = [
    "ab", "check", "at_least", "at_most", "equal", "unjudged", "change", "expected_for", "table",
    "precision_memory", "default_device", "where", "target", "best_compute_capability", "limit_of",
    "source", "SOURCES",
    "AB", "Check", "Expected", "Threshold", "Equal", "Unjudged", "RULES", "KNOWN", "COMPUTE_KNOBS",
    "INPUT_KNOBS", "DIRECTIONS", "FASTER", "SLOWER", "SAME", "NOT_SLOWER", "NOT_FASTER",
    "AGREED", "DISAGREED", "CANNOT_TELL", "LIMITS", "INPUT", "COMPUTE", "OVERHEAD",
    "OVERHEAD_GPU_BUSY_PCT", "PREFETCH_MIN_HIDDEN", "MEMORY_MEASURES", "TABLE_CHANGES", "Rule",
]


def __getattr__(name: str) -> Any:
    """``RULES`` (the expectation rule of each knob, ``RULES[knob](hardware, value, baseline, limit)
    -> Expected``: the rules of ``tfwb.advice.entries.ADVICE``, read now) and ``KNOWN`` (its keys:
    every change ``expected_for`` knows)."""
    if name == "RULES":
        return _expected.rules()
    if name == "KNOWN":
        return tuple(_expected.rules())
    if name in _MOVED_NAMES:           # tfwb 0.2's names of a run's limit, until 0.4
        return forward(__name__, _MOVED_NAMES)(name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
