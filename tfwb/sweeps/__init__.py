"""Sweeps: a search over knobs for the fastest configuration that still trains.

``tfwb.sweep(baseline, space)`` is the function; this package holds its parts.
"""
from tfwb.sweeps.search import SweepResult, sweep

__all__ = ["SweepResult", "sweep"]
