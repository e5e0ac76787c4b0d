"""TensorBoard event files for runs: step time, input wait, loss, throughput and utilization.

``Scalars(logdir)`` is a run observer. It writes nothing while steps are timed: at
the end of the run it writes every step's figures with their step numbers (and the
utilization samples against the run's clock), so logging costs the measured steps
nothing. Each run gets its own sub-folder of ``logdir`` (TensorBoard's "run"); a
name already holding event files gets a ``-2``, ``-3``... suffix instead of mixing
two runs. Point TensorBoard at ``logdir``: ``%tensorboard --logdir DIR`` in
JupyterLab or Colab; in a terminal, ``terminal_command(DIR)`` (the kernel's interpreter
with ``-m tensorboard.main``: a bare ``tensorboard`` is not found where no environment is
activated).

``check_logdir`` is the one check of a log folder (created if missing, writable),
used before any work by ``Scalars``, ``tfwb.profile``, the command line's
``--logdir`` and the Workbench. ``notebook_setup`` prepares ``%tensorboard`` for the
kernel it runs in and says where TensorBoard will show (JupyterLab, Colab, Binder);
``notebook_view`` adds whether a chapter's cell should start it here.
"""
from __future__ import annotations

import glob
import importlib.util
import json
import os
import re
import shlex
import shutil
import sys
from dataclasses import dataclass
from typing import MutableMapping, Optional, Tuple

import tensorflow as tf

from tfwb.config import fast_mode
from tfwb.observers import Observer, RunState

#: What a run's folder name may contain; anything else becomes ``_``.
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def check_logdir(logdir: "str | os.PathLike", field: str = "logdir") -> str:
    """Create ``logdir`` if missing and check that this process can write into it.

    Args:
        logdir: the folder.
        field: the argument's name in messages (``"logdir"``, ``"--logdir"``).

    Returns:
        ``logdir`` as a string.

    Raises:
        ValueError: naming ``field`` and the value, when it is not a path, cannot be
            created (a file is in the way, no permission) or is not writable.

    Example:
        >>> check_logdir("/proc/tfwb/logs")  # doctest: +SKIP
        Traceback (most recent call last):
        ValueError: logdir='/proc/tfwb/logs' is not usable: ...
    """
    if isinstance(logdir, bool) or not isinstance(logdir, (str, os.PathLike)) or not os.fspath(logdir):
        raise ValueError(f"{field}={logdir!r} is not allowed; {field} must be a folder path")
    path = os.fspath(logdir)
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as e:
        raise ValueError(f"{field}={path!r} is not usable ({e.strerror or e}); "
                         "pick a folder you can write to") from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise ValueError(f"{field}={path!r} is not writable; pick a folder you can write to")
    return path


def run_name(text: str) -> str:
    """``text`` as a folder name TensorBoard shows as a run: letters, digits, ``.``, ``_``, ``-``.

    Example:
        >>> run_name("prefetch=True, cache='memory'")
        'prefetch_True_cache_memory'
    """
    return _UNSAFE.sub("_", text).strip("_.") or "run"


def free_run_dir(logdir: str, name: str) -> str:
    """``logdir/name``, or ``logdir/name-2``, ``-3``... when that already holds event files."""
    base = os.path.join(logdir, run_name(name))
    path, n = base, 1
    while glob.glob(os.path.join(path, "events.out.tfevents.*")):
        n += 1
        path = f"{base}-{n}"
    return path


def notebook_setup(environ: Optional[MutableMapping[str, str]] = None, *, program: Optional[str] = None,
                   has_proxy: Optional[bool] = None, in_colab: Optional[bool] = None) -> str:
    """Prepare ``%tensorboard`` for this kernel; return one sentence on where TensorBoard will show.

    - The ``tensorboard`` program: ``%tensorboard`` runs it from ``PATH``. A kernel started
      from a virtual environment that was not activated has the program beside its Python
      but not on ``PATH``: then ``TENSORBOARD_BINARY`` is set to it.
    - JupyterHub (Binder): the browser reaches the notebook server only through the hub,
      not the ports of the machine the kernel runs on. With ``jupyter-server-proxy``
      installed, ``TENSORBOARD_PROXY_URL`` sends ``%tensorboard``'s frame through
      ``<hub prefix>proxy/<port>/``; without it, TensorBoard cannot show in the notebook.
    - Colab: ``%tensorboard`` works as it is (Colab proxies the port itself).

    Args:
        environ: the environment to read and set (default ``os.environ``).
        program: the ``tensorboard`` program found on ``PATH`` (default: looked up).
        has_proxy: whether ``jupyter_server_proxy`` is installed (default: looked up).
        in_colab: whether this is a Colab kernel (default: ``google.colab`` is imported).

    Returns:
        What to expect, e.g. ``"%tensorboard --logdir DIR shows TensorBoard below the cell."``.

    Example:
        >>> print(notebook_setup())  # doctest: +SKIP
        %tensorboard --logdir DIR shows TensorBoard below the cell.
    """
    return _prepare(environ, program=program, has_proxy=has_proxy, in_colab=in_colab)[1]


def _prepare(environ: Optional[MutableMapping[str, str]], *, program: Optional[str],
             has_proxy: Optional[bool], in_colab: Optional[bool]) -> Tuple[bool, str]:
    """``notebook_setup``'s work: (whether ``%tensorboard`` can show below the cell, the sentence)."""
    env = os.environ if environ is None else environ
    if program is None:
        program = shutil.which("tensorboard", path=env.get("PATH"))
    if program is None and not env.get("TENSORBOARD_BINARY"):
        beside = os.path.join(os.path.dirname(sys.executable), "tensorboard")
        if os.path.exists(beside):
            env["TENSORBOARD_BINARY"] = beside
        else:
            return False, ("the tensorboard program is not installed in this kernel's environment: "
                           "pip install tensorboard, then %tensorboard --logdir DIR")
    colab = in_colab if in_colab is not None else "google.colab" in sys.modules
    if colab:
        return True, "%tensorboard --logdir DIR shows TensorBoard below the cell (Colab proxies its port)."
    prefix = env.get("JUPYTERHUB_SERVICE_PREFIX")
    if prefix:
        proxy = has_proxy if has_proxy is not None else importlib.util.find_spec("jupyter_server_proxy") is not None
        if proxy:
            env.setdefault("TENSORBOARD_PROXY_URL", prefix.rstrip("/") + "/proxy/%PORT%/")
            return True, ("%tensorboard --logdir DIR shows TensorBoard below the cell, through this "
                          "JupyterHub's proxy (jupyter-server-proxy).")
        return False, ("this is a JupyterHub (Binder): your browser cannot reach TensorBoard's port here, and "
                       "jupyter-server-proxy is not installed, so %tensorboard shows nothing; read the tables and "
                       "charts in the notebook, or download DIR and run tensorboard --logdir DIR on your machine.")
    return True, "%tensorboard --logdir DIR shows TensorBoard below the cell."


@dataclass(frozen=True)
class NotebookView:
    """Whether a notebook cell should open TensorBoard here, and what to print either way.

    Attributes:
        show: True when ``%tensorboard --logdir LOGDIR`` can show TensorBoard below the
            cell and should be run.
        text: what the cell prints: where TensorBoard shows, or why not and what to do instead.
    """

    show: bool
    text: str

    def __str__(self) -> str:
        return self.text


def notebook_view(logdir: "str | os.PathLike", environ: Optional[MutableMapping[str, str]] = None, *,
                  fast: Optional[bool] = None, program: Optional[str] = None,
                  has_proxy: Optional[bool] = None, in_colab: Optional[bool] = None) -> NotebookView:
    """Prepare ``%tensorboard`` for this kernel (``notebook_setup``) and decide whether to start it.

    TensorBoard is started where it can show below the cell (a local JupyterLab, Colab, a
    JupyterHub with ``jupyter-server-proxy``) and not in small mode (``TFWB_FAST=1``: the
    tests, Binder), where a server would outlive the run for nobody to look at.

    Args:
        logdir: the folder TensorBoard reads; the text names it.
        environ, program, has_proxy, in_colab: as for ``notebook_setup`` (defaults: looked up).
        fast: small mode (default ``tfwb.config.fast_mode()``).

    Returns:
        A NotebookView; the cell prints ``view.text`` and runs ``%tensorboard`` when ``view.show``.

    Example:
        >>> view = notebook_view("logs", {}, fast=True, program="/usr/bin/tensorboard", in_colab=False)
        >>> view.show
        False
        >>> print(view.text)
        not started here (TFWB_FAST=1): run %load_ext tensorboard, then %tensorboard --logdir logs; it would show TensorBoard below that cell
    """
    path = os.fspath(logdir)
    can_show, text = _prepare(environ, program=program, has_proxy=has_proxy, in_colab=in_colab)
    text = text.replace("DIR", path)
    if fast is None:
        fast = fast_mode()
    if can_show and fast:
        return NotebookView(False, f"not started here (TFWB_FAST=1): run %load_ext tensorboard, then "
                                   f"%tensorboard --logdir {path}; it would show TensorBoard below that cell")
    return NotebookView(can_show, text)


def terminal_command(logdir: "str | os.PathLike", python: Optional[str] = None) -> str:
    """A shell command that starts TensorBoard on ``logdir`` with this kernel's own interpreter.

    A bare ``tensorboard`` is "command not found" in a terminal where the environment that
    holds it is not activated (JupyterLab started as ``.venv/bin/jupyter lab``, the README's
    way); the interpreter running this kernel has TensorBoard, so ``python -m
    tensorboard.main`` with that interpreter works as printed, from any folder (the path is
    made absolute).

    Args:
        logdir: the folder TensorBoard reads.
        python: the interpreter (default ``sys.executable``, the kernel's).

    Returns:
        The command, quoted for a POSIX shell.

    Example:
        >>> terminal_command("/runs/logs", python="/opt/venv/bin/python")
        '/opt/venv/bin/python -m tensorboard.main --logdir /runs/logs'
        >>> terminal_command("/my logs", python="/usr/bin/python3")
        "/usr/bin/python3 -m tensorboard.main --logdir '/my logs'"
    """
    return (f"{shlex.quote(python or sys.executable)} -m tensorboard.main "
            f"--logdir {shlex.quote(os.path.abspath(os.fspath(logdir)))}")


class Scalars(Observer):
    """Write one run's scalars under ``logdir/<run name>``.

    Tags (``step`` is the training step, warm-up included, counted from 0):
    ``step_time_ms``, ``input_wait_ms`` (when recorded), ``loss``, ``examples_per_s``;
    ``utilization/cpu_process_pct``, ``utilization/cpu_system_pct``,
    ``utilization/rss_mib``, ``utilization/gpu<i>_util_pct``, ``utilization/gpu<i>_mem_mib``
    against the run's clock in milliseconds; the text ``config`` (the RunConfig as JSON).

    Args:
        logdir: the TensorBoard log folder (created if missing).
        name: the run's sub-folder; default: the config's label, else its workload.
            A folder that already holds event files gets a ``-2``, ``-3``... suffix.

    Attributes:
        path: the run's folder, after the run (also ``RunResult.extras["tensorboard"]``).

    Raises:
        ValueError: when ``logdir`` cannot be created or written (checked at construction,
            before any work).
        RuntimeError: when TensorBoard is not installed (``tf.summary`` needs it).

    Example:
        >>> tfwb.run(cfg, observers=[Scalars("logs")])  # doctest: +SKIP
        >>> %tensorboard --logdir logs                   # doctest: +SKIP
    """

    def __init__(self, logdir: "str | os.PathLike", name: str = "") -> None:
        if importlib.util.find_spec("tensorboard") is None:
            raise RuntimeError("TensorBoard is not installed (tf.summary needs it): "
                               "pip install tensorboard, or install tfwb with its [profile] extra")
        self.logdir = check_logdir(logdir)
        self.name = name
        self.path: Optional[str] = None

    def on_run_end(self, run: RunState) -> None:
        cfg = run.config
        self.path = free_run_dir(self.logdir, self.name or getattr(cfg, "label", "") or
                                 getattr(cfg, "workload", "") or "run")
        log, spe = run.log, run.steps_per_call
        batch = getattr(cfg, "batch_size", None)
        writer = tf.summary.create_file_writer(self.path)
        with writer.as_default():
            if hasattr(cfg, "to_dict"):
                tf.summary.text("config", "```\n" + json.dumps(cfg.to_dict(), indent=1) + "\n```", step=0)
            for i, t in enumerate(log.times_s):
                step = i * spe
                tf.summary.scalar("step_time_ms", t / spe * 1e3, step=step)
                if batch and t > 0:
                    tf.summary.scalar("examples_per_s", batch * spe / t, step=step)
                if i < len(log.losses):
                    tf.summary.scalar("loss", log.losses[i], step=step)
                if i < len(log.waits_s):
                    tf.summary.scalar("input_wait_ms", log.waits_s[i] * 1e3, step=step)
            for s in run.samples:
                ms = int(s.t_s * 1e3)            # utilization is on the run's clock, in ms
                for field in ("cpu_process_pct", "cpu_system_pct", "rss_mib"):
                    value = getattr(s, field)
                    if value is not None:
                        tf.summary.scalar(f"utilization/{field}", value, step=ms)
                for gpu, value in enumerate(s.gpu_util_pct):
                    if value is not None:
                        tf.summary.scalar(f"utilization/gpu{gpu}_util_pct", value, step=ms)
                for gpu, value in enumerate(s.gpu_mem_used_mib):
                    if value is not None:
                        tf.summary.scalar(f"utilization/gpu{gpu}_mem_mib", value, step=ms)
        writer.close()
        run.extras["tensorboard"] = self.path
