"""TensorBoard scalars for a run: step time, input wait, loss and utilization, as event files.

``Scalars(logdir)`` is a run observer. It writes nothing while steps are timed: at
the end of the run it writes every step's figures with their step numbers (and the
utilization samples against wall time), so logging costs the measured steps nothing.
Point TensorBoard at ``logdir`` (``%tensorboard --logdir DIR`` in a notebook).
"""
from __future__ import annotations

import os

import tensorflow as tf

from ..observers import Observer, RunState


class Scalars(Observer):
    """Write one run's scalars under ``logdir/<run name>``.

    Args:
        logdir: the TensorBoard log folder (created if missing).
        name: the run's sub-folder; default: the config's label, else ``run``.

    Raises:
        ValueError: when ``logdir`` cannot be created or written (checked at construction,
            before any work).
        RuntimeError: when TensorBoard is not installed (``tf.summary`` needs it).
    """

    def __init__(self, logdir: str, name: str = "") -> None:
        import importlib.util

        if importlib.util.find_spec("tensorboard") is None:
            raise RuntimeError("TensorBoard is not installed (tf.summary needs it): "
                               "pip install tensorboard, or install tfwb with its [profile] extra")
        try:
            os.makedirs(logdir, exist_ok=True)
        except OSError as e:
            raise ValueError(f"logdir={logdir!r} is not usable: {e}") from None
        if not os.access(logdir, os.W_OK):
            raise ValueError(f"logdir={logdir!r} is not writable; pick a folder you can write to")
        self.logdir, self.name = logdir, name
        self.path = None

    def on_run_end(self, run: RunState) -> None:
        name = self.name or run.config.label or "run"
        self.path = os.path.join(self.logdir, name)
        log = run.log
        writer = tf.summary.create_file_writer(self.path)
        with writer.as_default():
            for i, t in enumerate(log.times_s):
                tf.summary.scalar("step_time_ms", t * 1e3, step=i)
                if i < len(log.losses):
                    tf.summary.scalar("loss", log.losses[i], step=i)
                if i < len(log.waits_s):
                    tf.summary.scalar("input_wait_ms", log.waits_s[i] * 1e3, step=i)
            for s in run.samples:
                ms = int(s.t_s * 1e3)            # utilization is on the wall clock, in ms
                for field in ("cpu_process_pct", "cpu_system_pct", "rss_mib"):
                    value = getattr(s, field)
                    if value is not None:
                        tf.summary.scalar(f"utilization/{field}", value, step=ms)
                for gpu, value in enumerate(s.gpu_util_pct):
                    if value is not None:
                        tf.summary.scalar(f"utilization/gpu{gpu}_util_pct", value, step=ms)
        writer.close()
        run.extras["tensorboard"] = self.path
