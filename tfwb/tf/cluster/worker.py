"""A worker of a cluster: this process's part of the run its ``TF_CONFIG`` describes.

``python -m tfwb worker`` comes here, in processes that ``tfwb.tf.cluster.parent`` starts on
this machine or that you start on your own machines (README, "Running across
machines"). The parent side (starting, watching and gathering workers) is
``tfwb.tf.cluster.parent``; this module is what runs inside each worker, and it is the only
one of the two that imports the runner.
"""
from __future__ import annotations

import json
import os
import sys
import time
from typing import Any, List, Optional, Sequence

from tfwb import cluster_spec
from tfwb.config import RunConfig
from tfwb.observers import Observer, RunState
from tfwb.records import RunResult
from tfwb.tf.runner.strategies import CLUSTER_STRATEGIES, cpu_cores, multi_worker_strategy, parameter_server_strategy
from tfwb.tf.runner.train import run_process
from tfwb.workloads import register_workload

REPORT = cluster_spec.REPORT


def register_spec(spec: Optional[dict]) -> None:
    """Register the workload ``workload_spec`` described (in a worker process)."""
    if not spec:
        return

    loss = None
    if spec.get("loss") is not None:
        import keras

        loss = keras.losses.deserialize(spec["loss"])
    register_workload(spec["name"], spec["model_fn"], spec["data_fn"], loss,
                      description=spec.get("description", ""))



def emit(event: str, **fields: Any) -> None:
    """Write one report line (``@tfwb {json}``) on stdout for the process that started this worker."""
    sys.stdout.write(REPORT + json.dumps({"event": event, **fields}, separators=(",", ":")) + "\n")
    sys.stdout.flush()


class Reporter(Observer):
    """A worker's observer: reports set-up and every step to the parent, outside the timed region.

    A step is reported once it is settled (its loss read: at once with per-step timing, when
    its window closes with windowed timing), with its final figures.
    """

    def __init__(self) -> None:
        self._sent = 0

    def on_run_start(self, run: RunState) -> None:
        self._sent = 0
        dist = run.extras.get("distribution", {})
        emit("started", setup_s=run.clock(), replicas=dist.get("replicas"), pid=os.getpid())

    def on_step_end(self, run: RunState, step: int) -> None:
        self._send(run.log)

    def on_run_end(self, run: RunState) -> None:
        self._send(run.log)                  # a window closed after its last step's hooks (a stop)

    def _send(self, log) -> None:
        waits = len(log.waits_s) >= len(log.losses)
        for j in range(self._sent, len(log.losses)):
            fields = {"step": j, "time_s": log.times_s[j], "start_s": log.starts_s[j], "loss": log.losses[j]}
            if waits:
                fields["wait_s"] = log.waits_s[j]
            if j < len(log.grad_norms):
                fields["grad_norm"], fields["loss_scale"] = log.grad_norms[j], log.loss_scales[j]
            emit("step", **fields)
        self._sent = len(log.losses)


def serve(tfc: cluster_spec.TFConfig, report: bool = False) -> None:
    """Serve as a ``parameter_server`` cluster's worker or ps: start TensorFlow's server; never return.

    The chief schedules steps on the workers and keeps variables on the ps tasks
    through it. It runs until the process is ended (the local cluster kills it when the
    chief is done; on your own machines, Ctrl-C it).
    """
    import tensorflow as tf


    # Pinned to one core, a server gets one inter-op thread from TensorFlow, and the chief's
    # first scheduled step never finished here (TF 2.21): give it at least two.
    threads = max(2, cpu_cores())
    config = tf.compat.v1.ConfigProto(inter_op_parallelism_threads=threads)
    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    server = tf.distribute.Server(resolver.cluster_spec(), job_name=tfc.task_type, task_index=tfc.task_index,
                                  protocol="grpc", config=config, start=True)
    if report:
        emit("ready", task=tfc.who, replicas=None, strategy_s=0.0)
    else:
        sys.stderr.write(f"python -m tfwb worker: {tfc.who} serving for the parameter_server chief "
                         "(Ctrl-C to stop it when the chief is done)\n")
    server.join()


def worker_main(cfg: RunConfig, *, report: bool = False, observers: Sequence[Observer] = ()) -> RunResult:
    """Run ``cfg`` as this process's part of the cluster its ``TF_CONFIG`` describes.

    ``multi_worker``: creates ``MultiWorkerMirroredStrategy`` first (before anything
    starts TensorFlow's runtime), then the single-process runner (``run_process``) under it. ``parameter_server``:
    the chief does the same with ``ParameterServerStrategy``; a worker or ps task
    serves (``serve``) and never returns. With ``report`` every set-up, step and the
    result go to stdout as ``@tfwb`` lines for ``run_cluster``.

    Raises:
        ValueError: without a (well-formed) ``TF_CONFIG``, or for a strategy that does
            not run on a cluster.
    """
    tfc = cluster_spec.from_environ()
    if cfg.strategy not in CLUSTER_STRATEGIES:
        raise ValueError(f"strategy={cfg.strategy!r} is not allowed in a worker; a worker runs "
                         f"strategy {' or '.join(map(repr, CLUSTER_STRATEGIES))}")
    if cfg.strategy == "parameter_server" and tfc.task_type != "chief":
        serve(tfc, report)
    t0 = time.perf_counter()
    strategy = multi_worker_strategy() if cfg.strategy == "multi_worker" else parameter_server_strategy()
    if report:
        emit("ready", task=tfc.who, replicas=strategy.num_replicas_in_sync, strategy_s=time.perf_counter() - t0)
    extra: List[Observer] = [Reporter()] if report else []
    result = run_process(cfg, [*extra, *observers])
    if report:
        sys.stdout.write(f'{REPORT}{{"event":"result","result":{result.to_json()}}}\n')
        sys.stdout.flush()
    return result
