"""The rungs of successive halving: a sweep's plan before anything runs (candidates, steps, how many go on).

Successive halving runs every candidate for ``min_steps`` measured steps at rung 1; the
fastest ``1/eta`` of those that train correctly go on to the next rung, which runs
``eta`` times as many steps. ``plan(baseline, space, ...)`` works out what that means
for one space: the candidates (and the combinations ``RunConfig`` refuses), the steps
of each rung (whole calls of every ``steps_per_execution`` in the space) and the most
candidates each rung can hold. ``tfwb.sweep`` follows the same plan; a chapter can
show it first.

Pure: no TensorFlow, no UI library.

Example:
    >>> p = plan(RunConfig(workload="mlp"), {"prefetch": [False, True], "cache": [False, True]},
    ...          min_steps=10, eta=3, rungs=2)
    >>> print(p.text())
    4 candidates: 2 prefetch x 2 cache
    measured steps per rung: 10 / 30
    candidates per rung, at most: 4 -> 2
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Dict, Iterable, Mapping, Optional, Sequence, Tuple

from tfwb.config import RunConfig
from tfwb.search.space import NAIVE, Candidate, Space, candidates, check_space, default_space

__all__ = ["Plan", "plan", "fit_plan", "rung_steps"]


def rung_steps(min_steps: int, eta: int, rungs: int, multiple: int = 1) -> Tuple[int, ...]:
    """Measured steps per rung: ``min_steps * eta**r``, rounded up to a multiple of ``multiple``.

    ``multiple`` is the least common multiple of the ``steps_per_execution`` values in
    the space, so every candidate runs exactly the rung's steps (a call runs whole blocks).

    Example:
        >>> rung_steps(10, 3, 3)
        (10, 30, 90)
        >>> rung_steps(10, 3, 2, multiple=4)
        (12, 32)
    """
    return tuple(-(-(min_steps * eta ** r) // multiple) * multiple for r in range(rungs))


@dataclass(frozen=True)
class Plan:
    """What a sweep will run.

    Attributes:
        baseline: the naive configuration (``size`` resolved, labelled ``"naive"``).
        space: the checked space, ``{knob: values}``.
        candidates: every configuration of the space, in product order.
        skipped: combinations ``RunConfig`` refuses, ``(changes, reason)``.
        rung_steps: measured steps of each rung.
        eta: steps grow by this factor per rung, and ``1/eta`` of the candidates go on.
    """

    baseline: RunConfig
    space: Space
    candidates: Tuple[Candidate, ...]
    skipped: Tuple[Tuple[Dict[str, Any], str], ...]
    rung_steps: Tuple[int, ...]
    eta: int

    @property
    def rungs(self) -> int:
        """How many rungs."""
        return len(self.rung_steps)

    @property
    def naive_steps(self) -> int:
        """Measured steps of the naive reference run (as long as the last rung)."""
        return self.rung_steps[-1]

    @property
    def alive(self) -> Tuple[int, ...]:
        """The most candidates each rung runs: all at rung 1, then ``ceil(n / eta)`` per rung."""
        out = [len(self.candidates)]
        for _ in self.rung_steps[1:]:
            out.append(max(1, math.ceil(out[-1] / self.eta)))
        return tuple(out)

    @property
    def runs_at_most(self) -> int:
        """Runs the search makes at most: the naive reference and every candidate at every rung it reaches."""
        return 1 + sum(self.alive)

    def estimate_s(self, step_s: float, *, setup_s: float = 0.0) -> float:
        """About how long the search takes at most, from one measured step of the naive configuration.

        Every run pays ``setup_s`` (building the model, tracing its step) and its warm-up and
        measured steps; a step of batch ``b`` is taken to cost ``step_s * b / baseline batch``
        (the naive run's time per example). Each rung holds ``alive`` candidates, later rungs
        at the space's mean batch. Candidates slower per example than the naive run (XLA or
        float16 on most CPUs) take longer than this; faster ones, less.

        Args:
            step_s: the naive configuration's step time, in seconds (> 0).
            setup_s: seconds each run pays before its first step (>= 0).

        Returns:
            Seconds.

        Raises:
            ValueError: for a ``step_s`` that is not > 0 or a ``setup_s`` below 0.

        Example:
            >>> p = plan(RunConfig(workload="mlp", warmup_steps=2), {"prefetch": [False, True]}, rungs=2)
            >>> p.estimate_s(0.1, setup_s=1.0)     # naive 32 steps + 2 x 12 + 1 x 32 steps, 4 runs
            12.8
        """
        if not (isinstance(step_s, (int, float)) and math.isfinite(step_s) and step_s > 0):
            raise ValueError(f"step_s={step_s!r} is not allowed; step_s must be a number > 0 (seconds)")
        if not (isinstance(setup_s, (int, float)) and math.isfinite(setup_s) and setup_s >= 0):
            raise ValueError(f"setup_s={setup_s!r} is not allowed; setup_s must be a number >= 0 (seconds)")
        base = self.baseline.batch_size
        factors = [c.config.batch_size / base for c in self.candidates]
        mean = sum(factors) / len(factors)
        w = self.baseline.warmup_steps
        steps = w + self.naive_steps                                     # the naive reference, batch 1x
        steps += sum(f * (w + self.rung_steps[0]) for f in factors)     # rung 1: every candidate
        steps += sum(n * mean * (w + s) for n, s in zip(self.alive[1:], self.rung_steps[1:]))
        return round(steps * step_s + self.runs_at_most * setup_s, 6)

    def text(self) -> str:
        """Three lines: the candidates, the steps per rung, the candidates per rung.

        Example:
            >>> print(plan(RunConfig(workload="mlp"), {"prefetch": [False, True]}, rungs=1).text())
            2 candidates: 2 prefetch
            measured steps per rung: 10
            candidates per rung, at most: 2
        """
        return "\n".join([
            f"{len(self.candidates)} candidates: " + " x ".join(f"{len(v)} {k}" for k, v in self.space.items()),
            "measured steps per rung: " + " / ".join(map(str, self.rung_steps)),
            "candidates per rung, at most: " + " -> ".join(map(str, self.alive)),
        ])


def check_int(name: str, value: Any, minimum: int) -> int:
    """``value`` when it is an integer >= ``minimum``.

    Raises:
        ValueError: naming the setting, its value and what is allowed.
    """
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name}={value!r} is not allowed; {name} must be an integer >= {minimum}")
    return value


def plan(baseline: Optional[RunConfig] = None, space: Optional[Mapping[str, Iterable[Any]]] = None, *,
         min_steps: int = 10, eta: int = 3, rungs: int = 3) -> Plan:
    """The candidates and rungs ``tfwb.sweep`` runs for these settings, without running anything.

    Args:
        baseline: the naive configuration every candidate changes (default ``RunConfig()``).
        space: ``{knob: values}``; default ``default_space(baseline.workload)``.
        min_steps: measured steps at the first rung.
        eta: steps grow by this factor per rung, and 1/eta of the candidates go on.
        rungs: how many rungs.

    Returns:
        A ``Plan``.

    Raises:
        ValueError: a baseline that is not a RunConfig, a bad knob or value in ``space``
            (naming them and what is allowed), a bad setting (naming it), or a space with
            no valid combination.

    Example:
        >>> plan(RunConfig(workload="mlp"), {"steps_per_execution": [1, 4]}, min_steps=10).rung_steps
        (12, 32, 92)
    """
    baseline = RunConfig() if baseline is None else baseline
    if not isinstance(baseline, RunConfig):
        raise ValueError(f"baseline must be a RunConfig, got {type(baseline).__name__}")
    check_int("min_steps", min_steps, 1)
    check_int("eta", eta, 2)
    check_int("rungs", rungs, 1)
    checked = default_space(baseline.workload) if space is None else check_space(space, baseline.workload)
    baseline = baseline.replace(size=baseline.resolved_size, label=NAIVE)
    cands, skipped = candidates(baseline, checked)
    if not cands:
        raise ValueError("no combination of the space is a valid RunConfig: "
                         + "; ".join(f"{c}: {why}" for c, why in skipped[:3]))
    multiple = math.lcm(*(c.config.steps_per_execution for c in cands), baseline.steps_per_execution)
    return Plan(baseline=baseline, space=checked, candidates=tuple(cands), skipped=tuple(skipped),
                rung_steps=rung_steps(min_steps, eta, rungs, multiple), eta=eta)


def fit_plan(baseline: Optional[RunConfig], space: Mapping[str, Iterable[Any]], budget_s: float, step_s: float, *,
             setup_s: float = 0.0, drop: Sequence[str] = (), min_steps: int = 10, eta: int = 3,
             rungs: int = 3) -> Tuple[Plan, Tuple[str, ...]]:
    """The plan, with knobs of ``drop`` left out in that order while its estimate exceeds ``budget_s``.

    A sweep's time budget, respected before anything runs: ``Plan.estimate_s(step_s,
    setup_s=setup_s)`` is compared with ``budget_s``; while it is over, the next knob of
    ``drop`` that is in the space is left out (a space keeps at least one knob). What is
    left may still be over the budget when ``drop`` runs out: the caller says so.

    Args:
        baseline, space, min_steps, eta, rungs: as ``plan``.
        budget_s: seconds the search may take (> 0).
        step_s, setup_s: as ``Plan.estimate_s``.
        drop: knobs to leave out, first first.

    Returns:
        ``(plan, dropped)``: the plan that fits (or the smallest ``drop`` allows) and the knobs
        left out, in order.

    Raises:
        ValueError: as ``plan`` and ``Plan.estimate_s``; a ``budget_s`` that is not > 0.

    Example:
        >>> p, dropped = fit_plan(RunConfig(workload="mlp", warmup_steps=0),
        ...                       {"prefetch": [False, True], "cache": [False, True]}, 4.0, 0.1,
        ...                       drop=("cache",), min_steps=10, rungs=1)
        >>> dropped, len(p.candidates), p.estimate_s(0.1)
        (('cache',), 2, 3.0)
    """
    if not (isinstance(budget_s, (int, float)) and math.isfinite(budget_s) and budget_s > 0):
        raise ValueError(f"budget_s={budget_s!r} is not allowed; budget_s must be a number > 0 (seconds)")
    left = dict(space)
    dropped = []
    p = plan(baseline, left, min_steps=min_steps, eta=eta, rungs=rungs)
    for knob in drop:
        if p.estimate_s(step_s, setup_s=setup_s) <= budget_s:
            break
        if knob not in left or len(left) == 1:
            continue
        del left[knob]
        dropped.append(knob)
        p = plan(baseline, left, min_steps=min_steps, eta=eta, rungs=rungs)
    return p, tuple(dropped)
