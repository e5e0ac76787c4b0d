"""Held-out loss: what weight decay is for (it regularizes; it does not make training faster).

``held_out(cfg, train_examples=...)`` trains on a few distinct examples seen many times
and evaluates, with the ``HeldOutLoss`` observer, the loss on examples the model never
saw, from the same generator; ``held_out_curves`` reads a run's curves back and
``held_out_table`` lays runs out. Chapter 04's other instruments are in
``tfwb.tf.lab.convergence``.

Global state: as ``tfwb.run`` (the dtype policy is restored; the seed stays set).
"""
from __future__ import annotations

from typing import Any, Dict, Mapping, Optional, Sequence, Tuple

import numpy as np
import tensorflow as tf

from tfwb.config import RunConfig
from tfwb.observers import Observer, RunState
from tfwb.records import RunResult
from tfwb.workloads import get_workload
from tfwb.tf.lab.arguments import positive_int
from tfwb.tf.runner.devices import setup_devices
from tfwb.tf.runner.train_step import per_example_loss
from tfwb.tf.run import run

__all__ = ["HeldOutLoss", "held_out", "held_out_curves", "held_out_table"]

#: Keras' AdamW ``weight_decay`` default (``RunConfig(weight_decay=None)`` with ``optimizer="adamw"``).
ADAMW_DEFAULT_DECAY = 0.004


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
        self.every = positive_int("every", every)
        self.batch = positive_int("batch", batch)
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
    positive_int("train_examples", train_examples, cfg.batch_size)
    positive_int("held_out_examples", held_out_examples)
    total_steps = cfg.warmup_steps + cfg.steps
    every = max(1, total_steps // 20) if every is None else positive_int("every", every)
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
