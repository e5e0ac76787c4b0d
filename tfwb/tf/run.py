"""``tfwb.run``: picks the runner for a RunConfig and calls it as every runner is called.

A runner is any callable ``runner(cfg, observers) -> RunResult``. Two are built in: the
single-process runner (``tfwb.tf.runner.train.run_process``) and the local cluster
(``tfwb.tf.cluster.parent.run_cluster``), for ``strategy="multi_worker"`` or
``"parameter_server"`` in a process that is not itself a worker of a cluster (no
``TF_CONFIG``). Both drive the same lifecycle (``tfwb.lifecycle``). The Workbench, the
sweep and the CLI take a runner with that signature and default to this one.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

from tfwb.config import RunConfig
from tfwb.observers import Observer
from tfwb.records import RunResult
from tfwb.tf.runner.strategies import CLUSTER_STRATEGIES, in_worker
from tfwb.tf.runner.train import run_process

__all__ = ["run", "runner_for"]


def runner_for(cfg: RunConfig) -> Callable[..., RunResult]:
    """The runner ``tfwb.run`` uses for ``cfg``: the local cluster or this process.

    Example:
        >>> runner_for(RunConfig(strategy="multi_worker")).__name__   # doctest: +SKIP
        'run_cluster'
    """
    if cfg.strategy in CLUSTER_STRATEGIES and not in_worker():
        from tfwb.tf.cluster.parent import run_cluster   # loaded only when a cluster is asked for
        return run_cluster
    return run_process


def run(cfg: RunConfig, observers: Sequence[Observer] = (), *, raise_errors: bool = False,
        dataset: Any = None) -> RunResult:
    """Train ``cfg.workload`` for ``warmup_steps + steps`` steps and measure each one.

    Args:
        cfg: the knobs.
        observers: ``tfwb.observers.Observer``s called around the run and each step
            (``Progress(callback)``, ``StopFlag()``, ``StopAtLoss(0.5)``,
            ``tfwb.tf.lab.profiler.ProfileWindow(dir)``, ...).
        raise_errors: re-raise a failure instead of returning a failed result.
        dataset: batches to train on instead of the pipeline ``cfg`` describes (one
            process only: a dataset cannot reach a cluster's workers).

    Returns:
        A RunResult: ``"ok"`` (``stop_reason`` set when an observer stopped it early),
        ``"interrupted"`` (a user's stop or Ctrl-C, with the steps it finished),
        ``"diverged"`` or ``"failed"`` (with the message).

    Raises:
        TypeError: for a ``cfg`` that is not a RunConfig.

    Example:
        >>> result = tfwb.run(RunConfig(steps=10, prefetch=True))   # doctest: +SKIP
        >>> print(result.summary())                                # doctest: +SKIP
    """
    if not isinstance(cfg, RunConfig):
        raise TypeError(f"run() needs a RunConfig, got {type(cfg).__name__}")
    return runner_for(cfg)(cfg, observers, raise_errors=raise_errors, dataset=dataset)
