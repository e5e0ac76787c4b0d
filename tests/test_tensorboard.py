"""TensorBoard: the event files a run writes, read back by a real TensorBoard server over HTTP.

Also the two other ways in: ``python -m tfwb run --logdir DIR`` and ``Workbench(logdir=...)``,
and the log-folder checks that run before any work.
"""
from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.parse
import urllib.request

import pytest

from tfwb import cluster_spec
from tfwb.config import RunConfig
from tfwb.records import RunResult

pytestmark = pytest.mark.tf

CFG = RunConfig(workload="mlp", size="small", data_source="memory", steps=4, warmup_steps=1,
                sample_interval_s=0.05, label="a")


@contextlib.contextmanager
def tensorboard_server(logdir: str, log_path: str):
    """A real ``tensorboard`` on a free loopback port, as a subprocess; stopped on exit.

    It is started by the command chapter 06 prints (``terminal_command``), as printed, from
    another folder and with no environment activated (``PATH`` without the venv's ``bin``),
    as in a JupyterLab terminal when JupyterLab was started as ``.venv/bin/jupyter lab``.
    """
    import shlex

    from tfwb.tf.lab.tensorboard import terminal_command

    port = cluster_spec.free_ports(1)[0]
    command = shlex.split(terminal_command(logdir))
    assert command[0] == sys.executable and "tensorboard" not in os.path.basename(command[0])
    env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep)
                                  if p and os.path.realpath(p) != os.path.realpath(os.path.dirname(sys.executable)))
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(command + ["--host", "127.0.0.1", "--port", str(port), "--reload_interval", "1"],
                                stdout=log, stderr=subprocess.STDOUT, start_new_session=True, env=env,
                                cwd=os.path.dirname(log_path))
    try:
        yield proc, f"http://127.0.0.1:{port}"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)        # its own process group: the server and its data server
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


def get_json(url: str):
    with urllib.request.urlopen(url, timeout=5) as response:
        return json.load(response)


def wait_for_tags(proc, base: str, runs: set, log_path: str, timeout_s: float = 90.0) -> dict:
    """``/data/plugin/scalars/tags`` once every run in ``runs`` has its scalars loaded."""
    deadline = time.monotonic() + timeout_s
    tags: dict = {}
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            with open(log_path, errors="replace") as fh:
                pytest.fail(f"tensorboard exited with {proc.returncode}: {fh.read()[-2000:]}")
        with contextlib.suppress(OSError, ValueError):
            tags = get_json(base + "/data/plugin/scalars/tags")
            if runs <= set(tags) and all("loss" in tags[r] for r in runs):
                return tags
        time.sleep(0.3)
    pytest.fail(f"tensorboard did not show runs {sorted(runs)} within {timeout_s:.0f} s (it had {tags})")


def scalar_values(base: str, run: str, tag: str) -> dict:
    """``{step: value}`` of one scalar series, from TensorBoard's HTTP API."""
    query = urllib.parse.urlencode({"run": run, "tag": tag})
    return {int(step): value for _, step, value in get_json(f"{base}/data/plugin/scalars/scalars?{query}")}


# -- a real server reads back what runs wrote -------------------------------------------------------------
def test_a_tensorboard_server_reads_back_each_runs_scalars(tmp_path):
    pytest.importorskip("tensorboard", reason="TensorBoard is not installed (pip install tensorboard)")
    from tfwb.tf.lab.tensorboard import Scalars
    from tfwb.tf.run import run

    logdir = str(tmp_path / "logs")
    first = run(CFG, observers=[Scalars(logdir)])
    second = run(CFG, observers=[Scalars(logdir)])            # same label: a run of its own, not mixed in
    assert first.ok and second.ok, (first.error, second.error)
    assert first.extras["tensorboard"] == os.path.join(logdir, "a")
    assert second.extras["tensorboard"] == os.path.join(logdir, "a-2")

    log_path = str(tmp_path / "tensorboard.log")
    with tensorboard_server(logdir, log_path) as (proc, base):
        tags = wait_for_tags(proc, base, {"a", "a-2"}, log_path)
        for name, result in (("a", first), ("a-2", second)):
            expected = {"step_time_ms", "input_wait_ms", "loss", "examples_per_s",
                        "utilization/cpu_process_pct", "utilization/rss_mib"}
            assert expected <= set(tags[name]), tags[name]
            losses = scalar_values(base, name, "loss")
            everything = result.warmup_losses + result.losses
            assert sorted(losses) == list(range(len(everything)))
            assert [losses[i] for i in sorted(losses)] == pytest.approx(everything, rel=1e-6)
            times = scalar_values(base, name, "step_time_ms")
            steps_ms = [t * 1e3 for t in result.warmup_times_s + result.step_times_s]
            assert [times[i] for i in sorted(times)] == pytest.approx(steps_ms, rel=1e-5)
            waits = scalar_values(base, name, "input_wait_ms")
            waits_ms = [w * 1e3 for w in result.warmup_input_wait_s + result.input_wait_s]
            assert [waits[i] for i in sorted(waits)] == pytest.approx(waits_ms, rel=1e-5, abs=1e-6)
            rss = scalar_values(base, name, "utilization/rss_mib")
            assert rss and all(v > 0 for v in rss.values())
    assert proc.poll() is not None


# -- log folders are checked before any work ----------------------------------------------------------------
def test_log_folder_checks_name_the_field_and_the_value(tmp_path):
    from tfwb.tf.lab.tensorboard import Scalars, check_logdir

    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    with pytest.raises(ValueError, match=r"logdir=.*a-file/x.* is not usable"):
        Scalars(str(blocker / "x"))
    with pytest.raises(ValueError, match=r"--logdir=.*a-file.* is not usable"):
        check_logdir(str(blocker), "--logdir")
    with pytest.raises(ValueError, match="logdir=None is not allowed"):
        check_logdir(None)
    made = tmp_path / "new" / "deeper"
    assert check_logdir(made) == str(made) and made.is_dir()


def test_run_names_are_folder_safe_and_never_reuse_a_runs_folder(tmp_path):
    from tfwb.tf.lab.tensorboard import free_run_dir, run_name

    assert run_name("prefetch=True, cache='memory'") == "prefetch_True_cache_memory"
    assert run_name("../..") == "run" and run_name("01-baseline") == "01-baseline"
    first = free_run_dir(str(tmp_path), "x")
    assert first == str(tmp_path / "x")
    os.makedirs(first)
    assert free_run_dir(str(tmp_path), "x") == first              # a folder without event files is free
    open(os.path.join(first, "events.out.tfevents.1.host"), "w").close()
    assert free_run_dir(str(tmp_path), "x") == str(tmp_path / "x-2")


# -- the command line and the Workbench ---------------------------------------------------------------------
class RecordingRunner:
    """A runner (``runner(cfg, observers)``, the run contract) that only records what it was given."""

    def __init__(self):
        self.observers = None

    def __call__(self, cfg, observers=()):
        self.observers = tuple(observers)
        return RunResult(config=cfg, step_times_s=[0.01] * 3, input_wait_s=[0.0] * 3, examples_per_step=8)

    def of(self, kind) -> list:
        """The observers it was given that are ``kind`` instances."""
        return [o for o in self.observers if isinstance(o, kind)]


def test_cli_logdir_attaches_scalars_and_refuses_a_bad_folder_before_running(tmp_path, capsys):
    from tfwb.cli.commands import main
    from tfwb.tf.lab.tensorboard import Scalars

    runner = RecordingRunner()
    assert main(["run", "--steps", "3", "--logdir", str(tmp_path / "logs")], runner=runner) == 0
    (scalars,) = runner.of(Scalars)
    assert scalars.logdir == str(tmp_path / "logs")

    blocker = tmp_path / "a-file"
    blocker.write_text("")
    runner = RecordingRunner()
    with pytest.raises(SystemExit) as exit_info:
        main(["run", "--steps", "3", "--logdir", str(blocker / "logs")], runner=runner)
    assert exit_info.value.code == 2 and runner.observers is None
    assert "--logdir=" in capsys.readouterr().err

    runner = RecordingRunner()
    assert main(["run", "--steps", "3"], runner=runner) == 0 and runner.of(Scalars) == []


def test_workbench_logdir_gives_each_run_its_own_tensorboard_run(tmp_path):
    pytest.importorskip("ipywidgets")
    from tfwb.observers import StopFlag
    from tfwb.tf.lab.tensorboard import Scalars
    from tfwb.ui.workbench import Workbench

    runner = RecordingRunner()
    wb = Workbench(RunConfig(steps=3), runner=runner, background=False, hardware={}, logdir=tmp_path / "wb")
    wb.run()
    (flag,), (scalars,) = runner.of(StopFlag), runner.of(Scalars)
    assert (scalars.logdir, scalars.name) == (str(tmp_path / "wb"), "01-baseline")
    wb.run(prefetch=True)
    assert [o.name for o in runner.of(Scalars)] == ["02-prefetch"]

    blocker = tmp_path / "a-file"
    blocker.write_text("")
    with pytest.raises(ValueError, match="logdir=.*is not usable"):
        Workbench(RunConfig(steps=3), runner=runner, background=False, hardware={}, logdir=blocker / "wb")
    runner = RecordingRunner()
    Workbench(RunConfig(steps=3), runner=runner, background=False, hardware={}).run()
    assert len(runner.of(StopFlag)) == 1 and runner.of(Scalars) == []   # no logdir: no Scalars


# -- %tensorboard in a notebook: where it can show ------------------------------------------------------------
def test_notebook_setup_points_tensorboard_at_the_kernels_own_program_and_the_hub_proxy(tmp_path):
    from tfwb.tf.lab.tensorboard import notebook_setup

    env = {"PATH": str(tmp_path)}                              # a kernel whose venv is not on PATH
    beside = os.path.join(os.path.dirname(sys.executable), "tensorboard")
    text = notebook_setup(env, in_colab=False)
    if os.path.exists(beside):
        assert env["TENSORBOARD_BINARY"] == beside and "shows TensorBoard below the cell" in text
    else:
        assert "not installed" in text and "TENSORBOARD_BINARY" not in env

    found = "/usr/bin/tensorboard"
    env = {"JUPYTERHUB_SERVICE_PREFIX": "/user/abc/"}        # Binder, with jupyter-server-proxy
    assert "proxy" in notebook_setup(env, program=found, has_proxy=True, in_colab=False)
    assert env == {"JUPYTERHUB_SERVICE_PREFIX": "/user/abc/", "TENSORBOARD_PROXY_URL": "/user/abc/proxy/%PORT%/"}
    env = {"JUPYTERHUB_SERVICE_PREFIX": "/user/abc/"}        # Binder without it: say so, set nothing
    assert "cannot reach" in notebook_setup(env, program=found, has_proxy=False, in_colab=False)
    assert env == {"JUPYTERHUB_SERVICE_PREFIX": "/user/abc/"}
    assert "Colab" in notebook_setup({}, program=found, in_colab=True)


def test_notebook_view_starts_tensorboard_only_where_it_can_show_and_not_in_small_mode():
    from tfwb.tf.lab.tensorboard import notebook_view

    found = "/usr/bin/tensorboard"
    view = notebook_view("runs/06", {}, fast=False, program=found, in_colab=False)
    assert view.show and view.text == "%tensorboard --logdir runs/06 shows TensorBoard below the cell."
    assert notebook_view("runs/06", {}, fast=False, program=found, in_colab=True).show

    small = notebook_view("runs/06", {}, fast=True, program=found, in_colab=False)
    assert not small.show
    assert small.text == ("not started here (TFWB_FAST=1): run %load_ext tensorboard, then %tensorboard "
                          "--logdir runs/06; it would show TensorBoard below that cell")   # no claim it shows here

    env = {"JUPYTERHUB_SERVICE_PREFIX": "/user/abc/"}          # Binder: no proxy, nothing can show
    binder = notebook_view("runs/06", env, fast=False, program=found, has_proxy=False, in_colab=False)
    assert not binder.show and "cannot reach" in binder.text and "download runs/06" in binder.text
    hub = notebook_view("runs/06", env, fast=False, program=found, has_proxy=True, in_colab=False)
    assert hub.show and env["TENSORBOARD_PROXY_URL"] == "/user/abc/proxy/%PORT%/"

    missing = notebook_view("runs/06", {"PATH": "/nonexistent"}, fast=False, in_colab=False)
    if not os.path.exists(os.path.join(os.path.dirname(sys.executable), "tensorboard")):
        assert not missing.show and "not installed" in missing.text
