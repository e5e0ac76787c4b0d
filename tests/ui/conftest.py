"""Fixtures for the browser test: a private JupyterLab server and a headless Debian Chromium.

The server runs from the repository root with the app exposed to the page
(``window.jupyterapp``), news and update checks off, and autosave off in a private
settings folder, so opening and running a chapter never writes the notebook back.
Its kernels inherit ``TFWB_FAST=1`` and a private ``TFWB_DATA_DIR``. At the end
every kernel is shut down through the REST API before the server is stopped.

Never ``playwright install``: the browser is Debian's ``chromium`` (tests/run_all.py
installs it when missing).
"""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

CHROMIUM = "/usr/bin/chromium"
ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "artifacts" / "ui"
TOKEN = "tfwb-ui-test"
CHROMIUM_ARGS = [
    "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic",
]
SERVER_START_TIMEOUT_S = 90
#: User settings for the private server: never save, never ask about news.
LAB_SETTINGS = {
    "docmanager-extension/plugin": {"autosave": False},
    "apputils-extension/notification": {"fetchNews": "false", "checkForUpdates": False},
}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Lab:
    """A running JupyterLab server: its base URL, token, and a tiny REST client."""

    def __init__(self, base: str, token: str, log_path: Path) -> None:
        self.base, self.token, self.log_path = base, token, log_path

    def url(self, path: str) -> str:
        return f"{self.base}/{path.lstrip('/')}?token={self.token}"

    def api(self, method: str, path: str):
        req = urllib.request.Request(f"{self.base}/api/{path}", method=method,
                                     headers={"Authorization": f"token {self.token}"})
        with urllib.request.urlopen(req, timeout=30) as resp:
            body = resp.read()
        return json.loads(body) if body else None

    def shutdown_kernels(self) -> int:
        """Shut every session's kernel and every stray kernel down; returns how many kernels there were."""
        for session in self.api("GET", "sessions"):
            self.api("DELETE", f"sessions/{session['id']}")
        kernels = self.api("GET", "kernels")
        for kernel in kernels:
            self.api("DELETE", f"kernels/{kernel['id']}")
        return len(kernels)

    def log_tail(self, chars: int = 4000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return ""


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """Start JupyterLab on 127.0.0.1 and a free port; stop it and its kernels afterwards."""
    home = tmp_path_factory.mktemp("lab")
    settings = home / "settings"
    for plugin, values in LAB_SETTINGS.items():
        path = settings / "@jupyterlab" / f"{plugin}.jupyterlab-settings"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(values))
    port = _free_port()
    env = {**os.environ,
           "TFWB_FAST": "1",
           "TFWB_DATA_DIR": str(home / "tfwb-data"),
           "TF_CPP_MIN_LOG_LEVEL": "2",
           "JUPYTERLAB_SETTINGS_DIR": str(settings),
           "JUPYTERLAB_WORKSPACES_DIR": str(home / "workspaces"),
           "JUPYTER_RUNTIME_DIR": str(home / "runtime")}
    env.pop("MPLBACKEND", None)        # the kernels use the inline backend, as a reader's would
    log_path = home / "lab.log"
    cmd = [sys.executable, "-m", "jupyterlab", "--no-browser", "--expose-app-in-browser",
           "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={port}", "--ServerApp.port_retries=0",
           f"--IdentityProvider.token={TOKEN}", f"--ServerApp.root_dir={ROOT}",
           "--ServerApp.allow_root=True", "--LabApp.news_url=None",
           "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"]
    t0 = time.perf_counter()
    with open(log_path, "w") as log:
        proc = subprocess.Popen(cmd, env=env, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
    server = Lab(f"http://127.0.0.1:{port}", TOKEN, log_path)
    deadline = time.monotonic() + SERVER_START_TIMEOUT_S
    while True:
        try:
            server.api("GET", "status")
            break
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                proc.wait(10)
                pytest.fail(f"JupyterLab did not start (exit {proc.returncode}):\n{server.log_tail()}")
            time.sleep(0.25)           # polling the server, not waiting on the page
    print(f"\n[ui] JupyterLab up on port {port} in {time.perf_counter() - t0:.1f} s", flush=True)
    try:
        yield server
    finally:
        try:
            server.shutdown_kernels()
        except OSError as e:
            print(f"[ui] could not shut the kernels down through the API: {e}", flush=True)
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


@pytest.fixture(scope="module")
def browser():
    """One headless Debian Chromium for the module (Playwright's sync API)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            yield b
        finally:
            b.close()


@pytest.fixture(scope="session")
def artifacts_dir() -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return ARTIFACTS


class LabScripts:
    """Page scripts the Monitor's browser tests share (``page.evaluate`` runs them in JupyterLab's page)."""

    #: ``(path)``: the notebook at ``path`` is the current widget, its kernel idle and its cells rendered.
    READY = """(path) => {
  const w = window.jupyterapp && window.jupyterapp.shell.currentWidget;
  if (!w || !w.context || w.context.path !== path || !w.sessionContext) return false;
  const k = w.sessionContext.session && w.sessionContext.session.kernel;
  return !!k && w.sessionContext.kernelDisplayStatus === 'idle' && w.content.widgets.length > 0;
}"""
    RUN_ALL = """() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); return true; }"""
    #: ``()``: every error output of the current notebook, as "cell N: Name: value".
    ERRORS = """() => {
  const w = window.jupyterapp.shell.currentWidget;
  const out = [];
  w.content.widgets.forEach((c, i) => c.model.type === 'code' && c.model.outputs.toJSON().forEach(o => {
    if (o.output_type === 'error') out.push(`cell ${i}: ${o.ename}: ${o.evalue}`); }));
  return out;
}"""


@pytest.fixture(scope="session")
def lab_js() -> LabScripts:
    """The shared page scripts (``LabScripts``)."""
    return LabScripts()
