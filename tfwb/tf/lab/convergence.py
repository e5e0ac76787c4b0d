"""Convergence: how fast a configuration *trains*, not only how fast its steps run.

A faster step is worth nothing if the run needs more of them. This module measures
what chapter 04 needs, and what anyone tuning an optimizer can reuse:

- ``to_target(cfg, target, seeds=...)``: one ``tfwb.run`` per seed with ``StopAtLoss``;
  steps and seconds to the target loss per seed, their medians and quartiles, how many
  seeds reached it, and the per-step wall clock of the same runs.
- ``lr_sweep(cfg, rates)``: the loss after a fixed number of steps for each learning rate
  (the median of the last few steps), with the rates that diverged marked.
- ``clip_directions(cfg)``: one real gradient clipped by Keras' ``clipnorm`` (per tensor),
  ``global_clipnorm`` (all tensors together) and ``clipvalue`` (per element): how far each
  turns the update away from the gradient's direction (their cosine).
- ``schedule_curves(cfg, schedules)``: the loss of every step under each learning-rate
  schedule (constant, warm-up, decay: any ``step -> rate`` callable, such as a
  ``keras.optimizers.schedules.LearningRateSchedule``), from the same start.
- ``HeldOutLoss`` (an observer) and ``held_out(cfg, train_examples=...)``: train on a few
  distinct examples seen many times and evaluate the loss on examples the model never
  saw, from the same generator: what weight decay changes (it regularizes; it does not
  make training faster).

``lr_sweep`` and ``schedule_curves`` build the setup once (``tfwb.tf.runner.train.prepared``) and, for each rate,
restores the initial weights and optimizer state, sets the rate and starts the data
again from the first batch: the same training a fresh run with that rate and seed does
(the tests compare it with ``tfwb.run``), without tracing the step again for each rate.

Global state: as ``tfwb.run`` (the dtype policy is restored; the seed stays set).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Dict, Mapping, Optional, Sequence, Tuple

import keras
import numpy as np
import tensorflow as tf

from tfwb import stats
from tfwb import text as report
from tfwb.renamed import deprecated_alias
from tfwb.config import RunConfig
from tfwb.observers import Observer, RunState, StopAtLoss
from tfwb.records import RunResult
from tfwb.workloads import get_workload
from tfwb.tf.runner.devices import setup_devices
from tfwb.tf.runner.optimizers import make_optimizer
from tfwb.tf.runner.pipeline import build_dataset
from tfwb.tf.runner.train_step import per_example_loss
from tfwb.tf.run import run
from tfwb.tf.runner.train import prepared

__all__ = ["to_target", "TargetRuns", "lr_sweep", "LearningRateSweep", "schedule_curves", "ScheduleCurve", "clip_directions", "ClipDirections",
           "ClipDirection", "HeldOutLoss", "held_out", "held_out_curves", "cosine", "blew_up",
           "gain", "target_table", "lr_sweep_table", "held_out_table"]

#: Losses averaged (per call of the step function) when ``to_target`` decides the target is reached.
TARGET_WINDOW = 10
#: Last steps whose median is a sweep's "final loss".
SWEEP_TAIL = 10
#: Keras' AdamW ``weight_decay`` default (``RunConfig(weight_decay=None)`` with ``optimizer="adamw"``).
ADAMW_DEFAULT_DECAY = 0.004


# -- small checks --------------------------------------------------------------------------------
def _positive_int(name: str, value: Any, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name}={value!r} is not allowed; {name} must be an integer >= {minimum}")
    return value


def _finite(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"{name}={value!r} is not allowed; {name} must be a finite number")
    return float(value)


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


# -- steps and seconds to a target loss ------------------------------------------------------------
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
            return report.fmt(v, spec, missing="never")

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
    _finite("target", target)
    _positive_int("window", window)
    seeds = tuple(seeds)
    if not seeds:
        raise ValueError("seeds=() is not allowed; seeds must name at least one seed")
    configs = [cfg.replace(seed=s) for s in seeds]           # a bad seed fails here, before any run
    results = tuple(run(c, observers=[StopAtLoss(target, window=window), *observers]) for c in configs)
    pairs = [_to_target_of(r) for r in results]
    return TargetRuns(cfg, float(target), window, seeds, results,
                      tuple(p[0] for p in pairs), tuple(p[1] for p in pairs))


# -- learning-rate sweep -----------------------------------------------------------------------------
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


def _snapshot(variables) -> list:
    return [v.numpy() for v in variables]


def _restore(variables, values) -> None:
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
    steps = cfg.warmup_steps + cfg.steps if steps is None else _positive_int("steps", steps)
    _positive_int("tail", tail)
    if tail > steps:
        raise ValueError(f"tail={tail} is not allowed; tail must be at most steps={steps}")
    calls = -(-steps // cfg.steps_per_execution)
    setup_devices()
    dataset, _ = build_dataset(cfg, get_workload(cfg.workload))
    finals, diverged, curves, first = [], [], [], math.nan
    with prepared(cfg, dataset) as p:
        distribute = p.strategy is not tf.distribute.get_strategy()
        model_start = _snapshot(p.model.variables)
        optimizer_start = _snapshot(p.optimizer.variables)
        for rate in rates:
            _restore(p.model.variables, model_start)
            _restore(p.optimizer.variables, optimizer_start)
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


# -- learning-rate schedules ------------------------------------------------------------------------------
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
    steps = cfg.warmup_steps + cfg.steps if steps is None else _positive_int("steps", steps)
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
        model_start = _snapshot(p.model.variables)
        optimizer_start = _snapshot(p.optimizer.variables)
        for name, rates in planned.items():
            _restore(p.model.variables, model_start)
            _restore(p.optimizer.variables, optimizer_start)
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


# -- what clipping does to the direction of an update --------------------------------------------------
@dataclass(frozen=True)
class ClipDirection:
    """One way of clipping one gradient.

    Attributes:
        clip (str): the ``RunConfig.clip`` spec used (``"norm:X"``, ``"global_norm:X"``, ``"value:X"``).
        keras_argument (str): the Keras optimizer argument it sets.
        cosine (float): cosine between the raw gradient and the update the optimizer
            applied (SGD, learning rate 1, so the update is the clipped gradient): 1 means
            the same direction.
        update_norm (float): the global norm of that update.
        tensors_changed (int): gradient tensors the clipping changed.
    """

    clip: str
    keras_argument: str
    cosine: float
    update_norm: float
    tensors_changed: int

    @property
    def angle_deg(self) -> float:
        """The angle between the gradient and the update, in degrees (0: the same direction)."""
        return math.degrees(math.acos(max(-1.0, min(1.0, self.cosine))))


@dataclass(frozen=True)
class ClipDirections:
    """A real gradient and what each clipping does to it.

    Attributes:
        config (RunConfig): the workload and seed the gradient came from.
        gradient_norm (float): the raw gradient's global norm.
        tensor_norms (dict): each variable's gradient norm, by variable path.
        rows (tuple): a ``ClipDirection`` per clipping.
    """

    config: RunConfig
    gradient_norm: float
    tensor_norms: Mapping[str, float]
    rows: Tuple[ClipDirection, ...]

    def by_kind(self, kind: str) -> ClipDirection:
        """The row whose clip spec starts with ``kind`` (``"norm"``, ``"global_norm"``, ``"value"``)."""
        for r in self.rows:
            if r.clip.partition(":")[0] == kind:
                return r
        raise ValueError(f"kind={kind!r} is not allowed; one of "
                         + ", ".join(repr(r.clip.partition(':')[0]) for r in self.rows))


def cosine(a: Sequence[np.ndarray], b: Sequence[np.ndarray]) -> float:
    """Cosine between two lists of arrays, each flattened and joined into one vector.

    Example:
        >>> round(cosine([np.array([1.0, 0.0])], [np.array([2.0, 0.0])]), 6)
        1.0
    """
    x = np.concatenate([np.ravel(v).astype(np.float64) for v in a])
    y = np.concatenate([np.ravel(v).astype(np.float64) for v in b])
    denominator = np.linalg.norm(x) * np.linalg.norm(y)
    return float(x @ y / denominator) if denominator else math.nan


def clip_directions(cfg: RunConfig, *, clip_norm: Optional[float] = None,
                    clip_value: Optional[float] = None) -> ClipDirections:
    """Clip one real gradient of ``cfg``'s model three ways and measure each update's direction.

    The gradient is the loss's on the first batch at the initial weights (float32, one
    device). Each clipping is applied by a Keras SGD optimizer with learning rate 1 and
    the clip argument ``tfwb`` sets for that spec, to weights set to zero, so the weight
    change *is* the clipped gradient, exactly; the weights are restored after each.

    Args:
        cfg: the workload, batch and seed.
        clip_norm: the threshold for ``norm`` and ``global_norm``; default the median of
            the per-tensor gradient norms, so that per-tensor clipping shrinks some tensors
            and leaves others.
        clip_value: the threshold for ``value``; default the 90th percentile of the
            gradient's absolute elements.

    Returns:
        A ``ClipDirections``.

    Raises:
        ValueError: for a threshold that is not a finite number > 0.

    Example:
        >>> d = clip_directions(RunConfig(workload="mlp"))          # doctest: +SKIP
        >>> d.by_kind("global_norm").cosine, d.by_kind("norm").cosine  # doctest: +SKIP
    """
    for name, value in (("clip_norm", clip_norm), ("clip_value", clip_value)):
        if value is not None and not (_finite(name, value) > 0):
            raise ValueError(f"{name}={value!r} is not allowed; {name} must be a finite number > 0")
    base = cfg.replace(mixed_precision="off", strategy="default", grad_norms=False, clip=None,
                       optimizer="sgd", learning_rate=1.0, steps_per_execution=1)
    setup_devices()
    with prepared(base) as p:
        loss_fn = per_example_loss(get_workload(cfg.workload).loss)
        x, y = p.fetch()
        variables = p.model.trainable_variables
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.cast(loss_fn(y, p.model(x, training=True)), tf.float32))
        grads = [g.numpy() for g in tape.gradient(loss, variables)]
        norms = {v.path: float(np.linalg.norm(g)) for v, g in zip(variables, grads)}
        c_norm = float(np.median(list(norms.values()))) if clip_norm is None else float(clip_norm)
        c_value = (float(np.quantile(np.abs(np.concatenate([g.ravel() for g in grads])), 0.9))
                   if clip_value is None else float(clip_value))
        start = _snapshot(variables)
        rows = []
        for kind, threshold in (("global_norm", c_norm), ("norm", c_norm), ("value", c_value)):
            spec = f"{kind}:{threshold:.6g}"
            optimizer = make_optimizer(base.replace(clip=spec))
            optimizer.build(variables)
            # From zero weights, the new weights are exactly minus the update (no cancellation
            # against the weights' own values); clipping does not look at the weights.
            _restore(variables, [np.zeros_like(v) for v in start])
            optimizer.apply_gradients(zip([tf.constant(g) for g in grads], variables))
            update = [-v.numpy() for v in variables]
            _restore(variables, start)
            changed = sum(not np.allclose(u, g, rtol=1e-5, atol=0.0) for u, g in zip(update, grads))
            argument = {"norm": "clipnorm", "global_norm": "global_clipnorm", "value": "clipvalue"}[kind]
            rows.append(ClipDirection(spec, argument, cosine(grads, update),
                                      float(np.sqrt(sum(float(np.sum(u.astype(np.float64) ** 2)) for u in update))),
                                      int(changed)))
    total = float(np.sqrt(sum(n ** 2 for n in norms.values())))
    return ClipDirections(cfg, total, norms, tuple(rows))


# -- held-out loss: what weight decay is for -----------------------------------------------------------
class HeldOutLoss(Observer):
    """Evaluate the model on fixed sets of examples every ``every`` training steps and at the end.

    Records into ``RunResult.extras["held_out"]``: ``steps`` (training steps done at each
    evaluation, 0 = before training) and, per set name, ``<name>_loss`` (mean loss, no
    penalty terms) and, for integer labels with logits, ``<name>_accuracy``. It needs
    ``RunState.model`` (set by ``tfwb.run``); evaluation runs between steps, outside
    the timed region.

    Args:
        sets: ``{name: (features, labels)}``, e.g. ``{"train": ..., "held_out": ...}``.
        loss: the workload's loss (``None``: sparse categorical cross-entropy on logits).
        every: training steps between evaluations.
        batch: examples per forward pass.

    Raises:
        ValueError: for no sets, ``every`` or ``batch`` not an integer >= 1.
    """

    def __init__(self, sets: Mapping[str, Tuple[Any, Any]], loss: Any = None, every: int = 50,
                 batch: int = 1024) -> None:
        if not sets:
            raise ValueError("sets={} is not allowed; name at least one (features, labels) set")
        self.sets = {name: (np.asarray(x), np.asarray(y)) for name, (x, y) in sets.items()}
        self.loss_fn = per_example_loss(loss)
        self.every = _positive_int("every", every)
        self.batch = _positive_int("batch", batch)
        self.record: Dict[str, list] = {}
        self._last = -1

    def _evaluate(self, run: RunState, steps_done: int) -> None:
        if run.model is None or steps_done == self._last:
            return
        self._last = steps_done
        self.record.setdefault("steps", []).append(steps_done)
        for name, (x, y) in self.sets.items():
            total, right, n = 0.0, 0, len(x)
            accuracy = True
            for i in range(0, n, self.batch):
                logits = run.model(x[i:i + self.batch], training=False)
                yb = y[i:i + self.batch]
                total += float(tf.reduce_sum(tf.cast(self.loss_fn(yb, logits), tf.float32)))
                if accuracy and np.issubdtype(yb.dtype, np.integer) and len(logits.shape) == 2:
                    right += int(np.sum(np.argmax(np.asarray(logits), axis=1) == yb))
                else:
                    accuracy = False
            self.record.setdefault(f"{name}_loss", []).append(total / n)
            if accuracy:
                self.record.setdefault(f"{name}_accuracy", []).append(right / n)

    def on_run_start(self, run: RunState) -> None:
        self.record, self._last = {}, -1
        self._evaluate(run, 0)

    def on_step_end(self, run: RunState, step: int) -> None:
        done = run.steps_done
        if done // self.every != (done - run.steps_per_call) // self.every:
            self._evaluate(run, done)

    def on_run_end(self, run: RunState) -> None:
        if run.status == "ok" and run.steps_done:
            self._evaluate(run, run.steps_done)
        if self.record:
            run.extras["held_out"] = {k: list(v) for k, v in self.record.items()}


def held_out(cfg: RunConfig, *, train_examples: int, held_out_examples: int = 1024,
             every: Optional[int] = None, observers: Sequence[Observer] = ()) -> RunResult:
    """Train on the first ``train_examples`` examples of ``cfg``'s data, evaluating on the next ones.

    Both sets come from the workload's own data (``data_fn``: same generator, same
    labelling rule), so the held-out loss measures generalization, not a change of task.
    The training examples are shuffled each epoch (``cfg.seed``), repeated and batched
    by ``cfg.batch_size``; the pipeline knobs do not apply (a note says the dataset was
    given). Use a workload whose data is in memory (``mlp``, ``text``, your own).

    Args:
        cfg: the configuration; ``warmup_steps + steps`` training steps.
        train_examples: distinct training examples (>= ``cfg.batch_size``): few, seen
            many times, is what overfits.
        held_out_examples: examples held out for evaluation.
        every: training steps between evaluations (default: about 20 over the run).
        observers: more observers.

    Returns:
        The RunResult; ``extras["held_out"]`` holds ``steps``, ``train_loss``,
        ``held_out_loss`` (and accuracies for classification): see ``held_out_curves``.

    Raises:
        ValueError: for counts that are not integers, ``train_examples`` below the batch
            size, or a workload with fewer examples than asked for (naming how many it has).

    Example:
        >>> r = held_out(RunConfig(workload="mlp", steps=1000), train_examples=256)  # doctest: +SKIP
        >>> held_out_curves(r)["held_out_loss"][-1]                                   # doctest: +SKIP
    """
    _positive_int("train_examples", train_examples, cfg.batch_size)
    _positive_int("held_out_examples", held_out_examples)
    total_steps = cfg.warmup_steps + cfg.steps
    every = max(1, total_steps // 20) if every is None else _positive_int("every", every)
    setup_devices()
    workload = get_workload(cfg.workload)
    if workload.data_fn is None:
        raise ValueError(f"workload={cfg.workload!r} has no data_fn to split into training and held-out sets")
    need = train_examples + held_out_examples
    rows = list(workload.data_fn(cfg).take(need).batch(need))
    have = 0 if not rows else int(rows[0][1].shape[0])
    if have < need:
        raise ValueError(f"train_examples={train_examples} + held_out_examples={held_out_examples} is not "
                         f"allowed for workload={cfg.workload!r}: its data has {have} examples")
    x, y = (np.asarray(t) for t in rows[0])
    train = (x[:train_examples], y[:train_examples])
    held = (x[train_examples:], y[train_examples:])
    dataset = (tf.data.Dataset.from_tensor_slices(train)
               .shuffle(train_examples, seed=cfg.seed, reshuffle_each_iteration=True)
               .repeat().batch(cfg.batch_size, drop_remainder=True).prefetch(2))
    watcher = HeldOutLoss({"train": train, "held_out": held}, workload.loss, every=every)
    return run(cfg, dataset=dataset, observers=[watcher, *observers])


def held_out_curves(result: RunResult) -> Dict[str, Tuple[float, ...]]:
    """``extras["held_out"]`` of a ``held_out`` run as tuples (empty dict if there is none)."""
    return {k: tuple(v) for k, v in result.extras.get("held_out", {}).items()}


# -- reading the results ---------------------------------------------------------------------------------
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
    """``(headers, rows)`` for ``tfwb.report.simple_html_table``: one row per ``TargetRuns``."""
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


def lr_sweep_table(sweeps: Sequence[LearningRateSweep]) -> Tuple[Tuple[str, ...], list]:
    """``(headers, rows)``: per sweep, the best rate, its loss, and the rates that diverged."""
    headers = ("optimizer", "best learning rate", "loss there", "start", "diverged at rates")
    rows = [(s.label, "-" if s.best_rate is None else f"{s.best_rate:g}", _q(s.best_loss, ".3f"),
             f"{s.first_loss:.3f}", ", ".join(f"{r:g}" for r in s.diverged_rates) or "none") for s in sweeps]
    return headers, rows


def held_out_table(results: Sequence[RunResult]) -> Tuple[Tuple[str, ...], list]:
    """``(headers, rows)``: per ``held_out`` run, the last training-set and held-out losses (and accuracies)."""
    headers = ("run", "weight decay", "training-set loss", "held-out loss", "lowest held-out loss",
               "held-out accuracy")
    rows = []
    for r in results:
        c = held_out_curves(r)
        if not c:
            rows.append((r.config.label or r.config.optimizer, "-", r.status, "-", "-", "-"))
            continue
        wd = r.config.weight_decay
        if r.config.optimizer == "adamw":
            kind = f"decoupled {wd if wd is not None else ADAMW_DEFAULT_DECAY:g}"
        else:
            kind = f"L2 {wd:g}" if wd else "none"
        accuracy = c.get("held_out_accuracy")
        rows.append((r.config.label or r.config.optimizer, kind, f"{c['train_loss'][-1]:.4f}",
                     f"{c['held_out_loss'][-1]:.3f}", f"{min(c['held_out_loss']):.3f}",
                     "-" if not accuracy else f"{accuracy[-1]:.1%}"))
    return headers, rows


def __getattr__(name: str) -> Any:
    """The tfwb 0.1 names ``Sweep`` and ``sweep_table``, with a DeprecationWarning (until 0.3)."""
    old = {"Sweep": "LearningRateSweep", "sweep_table": "lr_sweep_table"}
    if name in old:
        return deprecated_alias(__name__, name, old[name], lambda: globals()[old[name]])
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
