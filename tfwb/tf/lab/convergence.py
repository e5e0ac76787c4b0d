"""Convergence: how fast a configuration *trains*, not only how fast its steps run.

A faster step is worth nothing if the run needs more of them. Chapter 04's instruments,
which anyone tuning an optimizer can reuse, one module each:

- here, ``to_target(cfg, target, seeds=...)``: one ``tfwb.run`` per seed with ``StopAtLoss``;
  steps and seconds to the target loss per seed, their medians and quartiles, how many
  seeds reached it, and the per-step wall clock of the same runs (``TargetRuns``); ``gain``
  compares two of them, ``target_table`` lays them out, ``blew_up`` says whether a run exploded.
- ``tfwb.tf.lab.learning_rates``: ``lr_sweep(cfg, rates)``, the loss after a fixed number of
  steps for each learning rate, and ``schedule_curves(cfg, schedules)``, the loss of every
  step under each learning-rate schedule, from the same start.
- ``tfwb.tf.lab.clipping``: ``clip_directions(cfg)``, how far each of Keras' clipping
  arguments turns one real gradient's update away from the gradient's direction.
- ``tfwb.tf.lab.held_out``: ``HeldOutLoss`` (an observer) and ``held_out(cfg,
  train_examples=...)``: the loss on examples the model never saw, what weight decay changes.

Their arguments are checked by ``tfwb.tf.lab.arguments``. Global state: as ``tfwb.run``
(the dtype policy is restored; the seed stays set).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Dict, Optional, Sequence, Tuple

from tfwb import stats
from tfwb import render
from tfwb.config import RunConfig
from tfwb.observers import Observer, StopAtLoss
from tfwb.records import RunResult
from tfwb.tf.lab.arguments import finite_number, positive_int
from tfwb.tf.run import run
from tfwb.renamed import forward

__all__ = ["to_target", "TargetRuns", "blew_up", "gain", "target_table"]

#: Losses averaged (per call of the step function) when ``to_target`` decides the target is reached.
TARGET_WINDOW = 10


def _censored_quantile(values: Sequence[Optional[float]], q: float) -> Optional[float]:
    """The ``q``-quantile of ``values`` where ``None`` means "more than any measured value".

    A seed that never reached the target took longer than every seed that did; the
    quantile is ``None`` where it falls among those seeds.
    """
    reached = sorted(v for v in values if v is not None)
    if not values:
        return None
    pos = (len(values) - 1) * q
    lo, hi = math.floor(pos), math.ceil(pos)
    if hi >= len(reached):
        return None
    return reached[lo] + (reached[hi] - reached[lo]) * (pos - lo)


@dataclass(frozen=True)
class TargetRuns:
    """One configuration run to a target loss with several seeds.

    Attributes:
        config (RunConfig): the configuration (each run used it with its own ``seed``).
        target (float): the loss to reach.
        window (int): losses averaged to decide (``StopAtLoss(target, window)``).
        seeds (tuple): the seeds, one run each.
        results (tuple): the RunResults, in seed order.
        steps (tuple): per seed, training steps until the target, warm-up steps included
            (they train too); ``None`` where the run never reached it.
        seconds (tuple): per seed, seconds of training until the target: the measured
            steps' wall time, plus the warm-up steps counted at that run's median step time
            (their real time includes tracing and compiling, a one-off cost
            ``RunResult.warmup_times_s`` shows apart); ``None`` where not reached.
    """

    config: RunConfig
    target: float
    window: int
    seeds: Tuple[int, ...]
    results: Tuple[RunResult, ...]
    steps: Tuple[Optional[int], ...]
    seconds: Tuple[Optional[float], ...]

    @property
    def label(self) -> str:
        return self.config.label or self.config.optimizer

    @property
    def reached(self) -> int:
        """How many seeds reached the target."""
        return sum(s is not None for s in self.steps)

    @property
    def median_steps(self) -> Optional[float]:
        """Median steps to the target over every seed (``None`` when half or more never reached it)."""
        return _censored_quantile(self.steps, 0.5)

    @property
    def steps_quartiles(self) -> Tuple[Optional[float], Optional[float]]:
        """``(q1, q3)`` of the steps (``None``: beyond the seeds that reached it)."""
        return _censored_quantile(self.steps, 0.25), _censored_quantile(self.steps, 0.75)

    @property
    def median_seconds(self) -> Optional[float]:
        return _censored_quantile(self.seconds, 0.5)

    @property
    def seconds_quartiles(self) -> Tuple[Optional[float], Optional[float]]:
        return _censored_quantile(self.seconds, 0.25), _censored_quantile(self.seconds, 0.75)

    @property
    def step_times_s(self) -> Tuple[float, ...]:
        """Every measured step time of every seed's run, pooled (the per-step wall clock)."""
        return tuple(t for r in self.results for t in r.step_times_s)

    @property
    def median_step_s(self) -> Optional[float]:
        times = self.step_times_s
        return stats.median(times) if times else None

    @property
    def failures(self) -> Tuple[str, ...]:
        """``"seed N: <status>: <error>"`` for each run that did not end ok (diverged, failed)."""
        return tuple(f"seed {s}: {r.status}: {r.error}" for s, r in zip(self.seeds, self.results)
                     if r.status != "ok")

    def row(self) -> Dict[str, Any]:
        """Plain data for a table: label, rate, reached, medians and quartiles, step time."""
        return {"label": self.label, "learning_rate": self.config.learning_rate,
                "reached": f"{self.reached}/{len(self.seeds)}",
                "median_steps": self.median_steps, "steps_q1_q3": self.steps_quartiles,
                "median_seconds": self.median_seconds, "seconds_q1_q3": self.seconds_quartiles,
                "median_step_ms": None if self.median_step_s is None else self.median_step_s * 1e3}

    def text(self) -> str:
        """One line: steps and seconds to the target (median and quartiles), seeds that reached it."""
        def fmt(v: Optional[float], spec: str) -> str:
            return render.fmt(v, spec, missing="never")

        q1, q3 = self.steps_quartiles
        s1, s3 = self.seconds_quartiles
        head = f"{self.label} (lr {self.config.learning_rate:g}): loss {self.target:g} reached by " \
               f"{self.reached}/{len(self.seeds)} seeds"
        if self.median_steps is None:
            return head + f" (median: not reached within {self.config.warmup_steps + self.config.steps} steps)"
        step = self.median_step_s
        return (head + f"; median {fmt(self.median_steps, '.0f')} steps (IQR {fmt(q1, '.0f')}-{fmt(q3, '.0f')}), "
                f"{fmt(self.median_seconds, '.2f')} s (IQR {fmt(s1, '.2f')}-{fmt(s3, '.2f')}); "
                f"{step * 1e3:.2f} ms per step")


def _to_target_of(r: RunResult) -> Tuple[Optional[int], Optional[float]]:
    hit = r.extras.get("target_reached")
    if not hit or r.median_step_s is None:
        return None, None
    warm = int(hit.get("warmup_steps", len(r.warmup_times_s) * r.steps_per_call))
    return warm + int(hit["step"]), float(hit["time_s"]) + warm * r.median_step_s


def to_target(cfg: RunConfig, target: float, seeds: Sequence[int] = (0, 1, 2), *,
              window: int = TARGET_WINDOW, observers: Sequence[Observer] = ()) -> TargetRuns:
    """Run ``cfg`` once per seed until the loss reaches ``target`` (or ``cfg.steps`` run out).

    Args:
        cfg: the configuration; ``warmup_steps + steps`` caps each run.
        target: the loss to reach (the training loss the step returns, penalty included
            when ``weight_decay`` adds an L2 term).
        seeds: one run per seed (``RunConfig.seed``: data, shuffling and initial weights).
        window: losses averaged before comparing with the target (one lucky batch does
            not count); ``StopAtLoss(target, window)``.
        observers: more observers for every run.

    Returns:
        A ``TargetRuns``; a run that diverged or failed counts as not reaching the target
        (``failures`` says why).

    Raises:
        ValueError: for a target that is not a finite number, a window that is not an
            integer >= 1, or seeds that are empty or not valid ``RunConfig.seed`` values
            (before any run).

    Example:
        >>> runs = to_target(RunConfig(workload="mlp", optimizer="adam", steps=500), 1.0)  # doctest: +SKIP
        >>> print(runs.text())                                                           # doctest: +SKIP
    """
    finite_number("target", target)
    positive_int("window", window)
    seeds = tuple(seeds)
    if not seeds:
        raise ValueError("seeds=() is not allowed; seeds must name at least one seed")
    configs = [cfg.replace(seed=s) for s in seeds]           # a bad seed fails here, before any run
    results = tuple(run(c, observers=[StopAtLoss(target, window=window), *observers]) for c in configs)
    pairs = [_to_target_of(r) for r in results]
    return TargetRuns(cfg, float(target), window, seeds, results,
                      tuple(p[0] for p in pairs), tuple(p[1] for p in pairs))


def blew_up(result: RunResult, factor: float = 10.0) -> bool:
    """Whether a run exploded: it diverged (a NaN/inf loss), or its last loss is ``factor`` times its first.

    Example:
        >>> blew_up(RunResult(RunConfig(), warmup_losses=(2.0,), losses=(1e6,)))
        True
    """
    if result.status == "diverged":
        return True
    losses = [v for v in result.all_losses if math.isfinite(v)]
    return len(losses) >= 2 and losses[-1] > factor * losses[0]


def gain(slower: TargetRuns, faster: TargetRuns, what: str = "steps") -> Optional[float]:
    """How many times fewer steps (or seconds) ``faster`` needed than ``slower`` to reach the target (medians).

    Where ``slower`` never reached it (median ``None``), its cap stands in (warm-up + measured
    steps; in seconds, the cap at its median step time): the ratio is then a lower bound.
    ``None`` when ``faster`` never reached it.

    Raises:
        ValueError: for ``what`` other than ``"steps"`` or ``"seconds"``.

    Example:
        >>> gain(sgd_runs, adam_runs)             # doctest: +SKIP
        2.8
    """
    if what not in ("steps", "seconds"):
        raise ValueError(f"what={what!r} is not allowed; what must be 'steps' or 'seconds'")
    fast = faster.median_steps if what == "steps" else faster.median_seconds
    if fast is None:
        return None
    slow = slower.median_steps if what == "steps" else slower.median_seconds
    if slow is None:
        slow = slower.config.warmup_steps + slower.config.steps
        if what == "seconds":
            if slower.median_step_s is None:
                return None
            slow *= slower.median_step_s
    return slow / fast


def _q(v: Optional[float], spec: str) -> str:
    return "never" if v is None else format(v, spec)


def target_table(runs: Sequence[TargetRuns]) -> Tuple[Tuple[str, ...], list]:
    """``(headers, rows)`` for ``tfwb.render.simple_html_table``: one row per ``TargetRuns``."""
    headers = ("optimizer", "learning rate", "reached", "steps: median", "steps: IQR", "seconds: median",
               "seconds: IQR", "ms per step (median)")
    rows = []
    for r in runs:
        (a, b), (c, d) = r.steps_quartiles, r.seconds_quartiles
        step = r.median_step_s
        rows.append((r.label, f"{r.config.learning_rate:g}", f"{r.reached}/{len(r.seeds)}",
                     _q(r.median_steps, ".0f"), f"{_q(a, '.0f')}-{_q(b, '.0f')}", _q(r.median_seconds, ".2f"),
                     f"{_q(c, '.2f')}-{_q(d, '.2f')}", "-" if step is None else f"{step * 1e3:.3f}"))
    return headers, rows


#: Names that moved in tfwb 0.3, served here with a DeprecationWarning until 0.4 (``tfwb.renamed.forward``).
__getattr__ = forward(__name__, {
    **dict.fromkeys(("lr_sweep", "LearningRateSweep", "schedule_curves", "ScheduleCurve", "lr_sweep_table",
                     "SWEEP_TAIL"), "tfwb.tf.lab.learning_rates"),
    **dict.fromkeys(("clip_directions", "ClipDirections", "ClipDirection", "cosine"), "tfwb.tf.lab.clipping"),
    **dict.fromkeys(("HeldOutLoss", "held_out", "held_out_curves", "held_out_table", "ADAMW_DEFAULT_DECAY"),
                    "tfwb.tf.lab.held_out"),
})
