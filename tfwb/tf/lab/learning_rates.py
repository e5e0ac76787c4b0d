"""Learning rates: a sweep of rates and a set of schedules, each trained from the same start.

- ``lr_sweep(cfg, rates)``: the loss after a fixed number of steps for each learning rate
  (the median of the last few steps), with the rates that diverged marked
  (``LearningRateSweep``; ``lr_sweep_table`` lays sweeps out).
- ``schedule_curves(cfg, schedules)``: the loss of every step under each learning-rate
  schedule (constant, warm-up, decay: any ``step -> rate`` callable, such as a
  ``keras.optimizers.schedules.LearningRateSchedule``), from the same start (``ScheduleCurve``).

Both build the setup once (``tfwb.tf.runner.train.prepared``) and, for each rate,
restore the initial weights and optimizer state, set the rate and start the data
again from the first batch: the same training a fresh run with that rate and seed does
(the tests compare it with ``tfwb.run``), without tracing the step again for each rate.
Chapter 04's other instruments are in ``tfwb.tf.lab.convergence``.

Global state: as ``tfwb.run`` (the dtype policy is restored; the seed stays set).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping, Optional, Sequence, Tuple

import tensorflow as tf

from tfwb import stats
from tfwb.config import RunConfig
from tfwb.workloads import get_workload
from tfwb.tf.lab.arguments import positive_int
from tfwb.tf.runner.devices import setup_devices
from tfwb.tf.runner.pipeline import build_dataset
from tfwb.tf.runner.train import prepared

__all__ = ["lr_sweep", "LearningRateSweep", "schedule_curves", "ScheduleCurve", "lr_sweep_table"]

#: Last steps whose median is a sweep's "final loss".
SWEEP_TAIL = 10


@dataclass(frozen=True)
class LearningRateSweep:
    """The loss after a fixed number of steps, for each learning rate.

    Attributes:
        config (RunConfig): the configuration swept (its own ``learning_rate`` unused).
        rates (tuple): the learning rates, as given.
        steps (int): training steps per rate.
        tail (int): the last losses whose median is the final loss.
        final_losses (tuple): per rate, the median of the last ``tail`` losses; ``None``
            for a rate that diverged.
        diverged_at (tuple): per rate, the 1-based step whose loss was not finite
            (``None``: it stayed finite).
        curves (tuple): per rate, the loss of every step (one per call of the step
            function), up to the divergence.
        first_loss (float): the loss of the first step (the same for every rate).
    """

    config: RunConfig
    rates: Tuple[float, ...]
    steps: int
    tail: int
    final_losses: Tuple[Optional[float], ...]
    diverged_at: Tuple[Optional[int], ...]
    curves: Tuple[Tuple[float, ...], ...] = field(repr=False)
    first_loss: float = math.nan

    @property
    def label(self) -> str:
        return self.config.label or self.config.optimizer

    @property
    def best_rate(self) -> Optional[float]:
        """The rate with the lowest final loss (``None`` when every rate diverged)."""
        kept = [(loss, rate) for rate, loss in zip(self.rates, self.final_losses) if loss is not None]
        return min(kept)[1] if kept else None

    @property
    def best_loss(self) -> Optional[float]:
        kept = [loss for loss in self.final_losses if loss is not None]
        return min(kept) if kept else None

    @property
    def diverged_rates(self) -> Tuple[float, ...]:
        return tuple(r for r, d in zip(self.rates, self.diverged_at) if d is not None)

    def rows(self) -> Tuple[Tuple[Any, ...], ...]:
        """``(rate, final loss or "diverged at step N", best?)`` per rate, for a table."""
        best = self.best_rate
        return tuple((rate, f"diverged at step {d}" if d is not None else loss, rate == best)
                     for rate, loss, d in zip(self.rates, self.final_losses, self.diverged_at))


def snapshot(variables: Sequence[Any]) -> list:
    """The values of ``variables`` (model or optimizer state), to ``restore`` them: the same start again."""
    return [v.numpy() for v in variables]


def restore(variables: Sequence[Any], values: Sequence[Any]) -> None:
    """Assign ``values`` (``snapshot``'s) back to ``variables``."""
    for v, value in zip(variables, values):
        v.assign(value)


def _set_learning_rate(optimizer, rate: float) -> None:
    inner = getattr(optimizer, "inner_optimizer", optimizer)
    inner.learning_rate = rate


def _loss_value(out) -> float:
    return float(out["loss"] if isinstance(out, dict) else out)


def lr_sweep(cfg: RunConfig, rates: Sequence[float], *, steps: Optional[int] = None,
             tail: int = SWEEP_TAIL) -> LearningRateSweep:
    """Train ``cfg`` for ``steps`` steps at each learning rate, from the same start.

    Every rate starts from the same initial weights, optimizer state and first batch
    (``cfg.seed``), as a fresh ``tfwb.run`` with that rate would; the step is traced once.

    Args:
        cfg: the configuration (optimizer, clipping, workload...).
        rates: learning rates, each a valid ``RunConfig.learning_rate``.
        steps: training steps per rate (default ``cfg.warmup_steps + cfg.steps``).
        tail: the final loss is the median of the last ``tail`` losses (at most ``steps``).

    Returns:
        A ``LearningRateSweep``. A rate whose loss stops being finite is marked diverged (with the
        step) and the next rate starts clean.

    Raises:
        ValueError: for no rates, a rate ``RunConfig`` refuses (<= 0, not finite, not a
            number, > 10), bad ``steps`` / ``tail``, or ``strategy="multi_worker"``, before any work.

    Example:
        >>> sweep = lr_sweep(RunConfig(workload="mlp", optimizer="sgd"), [0.01, 0.1, 1.0])  # doctest: +SKIP
        >>> sweep.best_rate                                                             # doctest: +SKIP
    """
    if cfg.strategy == "multi_worker":
        raise ValueError("strategy='multi_worker' is not allowed in lr_sweep: it sweeps in this process; "
                         "pick strategy='default' or 'mirrored'")
    rates = tuple(rates)
    if not rates:
        raise ValueError("rates=() is not allowed; rates must hold at least one learning rate")
    for rate in rates:
        cfg.replace(learning_rate=rate)                     # RunConfig's own check and message
    steps = cfg.warmup_steps + cfg.steps if steps is None else positive_int("steps", steps)
    positive_int("tail", tail)
    if tail > steps:
        raise ValueError(f"tail={tail} is not allowed; tail must be at most steps={steps}")
    calls = -(-steps // cfg.steps_per_execution)
    setup_devices()
    dataset, _ = build_dataset(cfg, get_workload(cfg.workload))
    finals, diverged, curves, first = [], [], [], math.nan
    with prepared(cfg, dataset) as p:
        distribute = p.strategy is not tf.distribute.get_strategy()
        model_start = snapshot(p.model.variables)
        optimizer_start = snapshot(p.optimizer.variables)
        for rate in rates:
            restore(p.model.variables, model_start)
            restore(p.optimizer.variables, optimizer_start)
            _set_learning_rate(p.optimizer, rate)
            p.iterator = iter(p.strategy.experimental_distribute_dataset(dataset) if distribute else dataset)
            losses: list = []
            at = None
            for i in range(calls):
                loss = _loss_value(p.advance())
                losses.append(loss)
                if not math.isfinite(loss):
                    at = (i + 1) * cfg.steps_per_execution
                    break
            if math.isnan(first) and losses and math.isfinite(losses[0]):
                first = losses[0]
            curves.append(tuple(losses))
            diverged.append(at)
            finals.append(None if at is not None else stats.median(losses[-min(tail, len(losses)):]))
    return LearningRateSweep(cfg, rates, calls * cfg.steps_per_execution, tail, tuple(finals), tuple(diverged),
                 tuple(curves), first)


@dataclass(frozen=True)
class ScheduleCurve:
    """One learning-rate schedule's training: the rate and the loss of every step.

    Attributes:
        label (str): the schedule's name, as given.
        rates (tuple): the learning rate each call of the step function used.
        losses (tuple): the loss of each call, up to the divergence.
        diverged_at (int or None): the 1-based step whose loss was not finite.
    """

    label: str
    rates: Tuple[float, ...] = field(repr=False)
    losses: Tuple[float, ...] = field(repr=False)
    diverged_at: Optional[int] = None

    def final_loss(self, tail: int = SWEEP_TAIL) -> Optional[float]:
        """The median of the last ``tail`` losses (``None`` if the run diverged)."""
        if self.diverged_at is not None or not self.losses:
            return None
        return stats.median(self.losses[-min(tail, len(self.losses)):])


def schedule_curves(cfg: RunConfig, schedules: Mapping[str, Any], *,
                    steps: Optional[int] = None) -> Tuple[ScheduleCurve, ...]:
    """Train ``cfg`` under each learning-rate schedule, from the same start.

    Every schedule starts from the same initial weights, optimizer state and first batch
    (``cfg.seed``), as ``lr_sweep``'s rates do; the step is traced once. Before each call
    of the step function the optimizer's rate is set to ``float(schedule(step))`` (``step``
    counts from 0): the value an optimizer built with that schedule reads at that step.
    With ``steps_per_execution`` > 1 the rate changes once per call.

    Args:
        cfg: the configuration (optimizer, clipping, workload...); its ``learning_rate`` is unused.
        schedules: name -> a callable of the step returning the rate: a
            ``keras.optimizers.schedules.LearningRateSchedule``, or ``lambda step: 1e-3``.
        steps: training steps per schedule (default ``cfg.warmup_steps + cfg.steps``).

    Returns:
        A ``ScheduleCurve`` per schedule, in the order given.

    Raises:
        ValueError: for no schedules, bad ``steps``, a rate that is not a finite number >= 0,
            or ``strategy="multi_worker"``, before any training.

    Example:
        >>> warm = keras.optimizers.schedules.CosineDecay(0.0, 1, alpha=1.0, warmup_target=3e-3,
        ...                                               warmup_steps=50)     # doctest: +SKIP
        >>> schedule_curves(RunConfig(workload="mlp", optimizer="adam"),
        ...                 {"constant": lambda step: 3e-3, "warm-up": warm})  # doctest: +SKIP
    """
    if cfg.strategy == "multi_worker":
        raise ValueError("strategy='multi_worker' is not allowed in schedule_curves: it trains in this "
                         "process; pick strategy='default' or 'mirrored'")
    if not schedules:
        raise ValueError("schedules={} is not allowed; schedules must name at least one schedule")
    steps = cfg.warmup_steps + cfg.steps if steps is None else positive_int("steps", steps)
    spe = cfg.steps_per_execution
    calls = -(-steps // spe)
    planned = {}
    for name, schedule in schedules.items():
        rates = tuple(float(schedule(i * spe)) for i in range(calls))
        bad = [r for r in rates if not math.isfinite(r) or r < 0]
        if bad:
            raise ValueError(f"schedules[{name!r}] gave the rate {bad[0]!r}; a rate must be a finite number >= 0")
        planned[name] = rates
    setup_devices()
    dataset, _ = build_dataset(cfg, get_workload(cfg.workload))
    out = []
    with prepared(cfg, dataset) as p:
        distribute = p.strategy is not tf.distribute.get_strategy()
        model_start = snapshot(p.model.variables)
        optimizer_start = snapshot(p.optimizer.variables)
        for name, rates in planned.items():
            restore(p.model.variables, model_start)
            restore(p.optimizer.variables, optimizer_start)
            p.iterator = iter(p.strategy.experimental_distribute_dataset(dataset) if distribute else dataset)
            losses: list = []
            at = None
            for i, rate in enumerate(rates):
                _set_learning_rate(p.optimizer, rate)
                loss = _loss_value(p.advance())
                losses.append(loss)
                if not math.isfinite(loss):
                    at = (i + 1) * spe
                    break
            out.append(ScheduleCurve(name, rates, tuple(losses), at))
    return tuple(out)


def lr_sweep_table(sweeps: Sequence[LearningRateSweep]) -> Tuple[Tuple[str, ...], list]:
    """``(headers, rows)``: per sweep, the best rate, its loss, and the rates that diverged."""
    headers = ("optimizer", "best learning rate", "loss there", "start", "diverged at rates")
    rows = [(s.label, "-" if s.best_rate is None else f"{s.best_rate:g}", "never" if s.best_loss is None else f"{s.best_loss:.3f}",
             f"{s.first_loss:.3f}", ", ".join(f"{r:g}" for r in s.diverged_rates) or "none") for s in sweeps]
    return headers, rows
