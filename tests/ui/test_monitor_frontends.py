"""``tfwb.keras.Monitor`` in other notebook frontends and under ipywidgets 7, in headless Chromium (issue 20, item 4).

tests/ui/test_monitor_browser.py checks the Monitor's chart in JupyterLab 4 with ipywidgets 8
(``.venv``). This module runs the same smoke notebook (tests/ui/monitor_smoke.ipynb) in:

- ``nb7-ipyw8``: Notebook 7 (``notebook`` 7.6.5) with ``.venv``'s kernel (ipywidgets 8);
  the server runs from a throwaway venv on ``.venv``'s Python that sees ``.venv``'s packages
  through a ``.pth`` file and adds only ``notebook``.
- ``lab3-ipyw7``: JupyterLab 3.6 with jupyterlab_widgets 1.1 (the ipywidgets 7 frontend)
  from a throwaway venv, and ``.venv-colab``'s kernel (ipywidgets 7.7.1). Colab's own
  frontend renders ipywidgets 7 messages; this is the nearest local check.

Not here: Notebook 7 with an ipywidgets 7 kernel (e.g. ``.venv-colab``'s own ``jupyter notebook``,
jupyterlab_widgets 3.0.17 in the page). No ipywidgets 7 widget renders there, not even an
``IntSlider``: the page says "Module @jupyter-widgets/controls, version ^1.5.0 is not registered,
however, 2.0.0 is". The ipywidgets 7 frontend (jupyterlab_widgets 1.x) exists only for JupyterLab 3.

In each it checks that the Monitor's chart (an ``Image`` in a ``VBox`` with a status line)
appears while ``fit`` runs, is redrawn in place (its ``src`` changes, one chart stays), and
ends with the run's summary, with no error in any cell. The notebook is copied to a private
folder, so nothing is written back to the repository whatever the frontend's autosave does.
Screenshots: artifacts/ui/monitor-<frontend>-during.png and -after.png.

Opt-in, since it builds environments (a minute or two the first time, from PyPI):
``TFWB_UI_FRONTENDS=1 .venv/bin/python -m pytest -m ui tests/ui/test_monitor_frontends.py -s``.
The venvs are kept in ``TFWB_UI_FRONTENDS_DIR`` (default /tmp/tfwb-ui-frontends) and reused.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

CHROMIUM = "/usr/bin/chromium"
ROOT = Path(__file__).resolve().parents[2]
ENV_VAR = "TFWB_UI_FRONTENDS"
WORK = Path(os.environ.get("TFWB_UI_FRONTENDS_DIR", "/tmp/tfwb-ui-frontends"))
COLAB_PYTHON = ROOT / ".venv-colab" / "bin" / "python"
pytestmark = [
    pytest.mark.ui,
    pytest.mark.slow,
    pytest.mark.skipif(os.environ.get(ENV_VAR) != "1",
                       reason=f"builds notebook-server venvs: set {ENV_VAR}=1 to run"),
    pytest.mark.skipif(not os.path.exists(CHROMIUM),
                       reason=f"no browser at {CHROMIUM} (install Debian's chromium; tests/run_all.py does)"),
]

NOTEBOOK = "monitor_smoke.ipynb"
TOKEN = "tfwb-ui-frontends"
NOTEBOOK_VERSION = "7.6.5"              # matches .venv's jupyterlab 4.6 (and .venv-colab's notebook)
LAB3_PINS = ["jupyterlab==3.6.8", "jupyterlab_widgets==1.1.11"]
SERVER_START_TIMEOUT_S = 120
KERNEL_IDLE_TIMEOUT_MS = 180_000
CHART_TIMEOUT_MS = 240_000              # kernel start, TF import and the first window on a busy machine
UI_TIMEOUT_MS = 60_000
#: Private user settings: never autosave, never fetch news.
SETTINGS = {
    "docmanager-extension/plugin": {"autosave": False},
    "apputils-extension/notification": {"fetchNews": "false", "checkForUpdates": False},
}

JS_WATCH_SRC = """(img) => {
  window.__tfwbPictures = img.naturalWidth > 0 ? 1 : 0;
  const seen = new Set([img.src]);
  img.addEventListener('load', () => { if (!seen.has(img.src)) { seen.add(img.src); window.__tfwbPictures += 1; } });
}"""
JS_VERSIONS = """() => {
  const v = {app: window.jupyterapp.name + ' ' + window.jupyterapp.version};
  return v;
}"""


def _run(cmd, **kw) -> None:
    subprocess.run(cmd, check=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **kw)


def _site_packages(python: Path) -> str:
    return subprocess.check_output([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                   text=True).strip()


def _nb7_venv() -> Path:
    """A venv on .venv's Python that sees .venv's packages (a .pth runs site.addsitedir) plus ``notebook``."""
    venv = WORK / "nb7"
    python = venv / "bin" / "python"
    if not (venv / "ok").exists():
        shutil.rmtree(venv, ignore_errors=True)
        _run([sys.executable, "-m", "venv", str(venv)])
        main_site = _site_packages(Path(sys.executable))
        Path(_site_packages(python), "zz_tfwb_main_venv.pth").write_text(
            f"import site; site.addsitedir({main_site!r})\n")
        _run([str(python), "-m", "pip", "install", "-q", f"notebook=={NOTEBOOK_VERSION}"])
        _copy_data(Path(sys.prefix) / "share" / "jupyter", venv / "share" / "jupyter")
        (venv / "ok").write_text("")
    return python


def _copy_data(src: Path, dst: Path) -> None:
    """Copy .venv's Jupyter data (JupyterLab's schemas and themes, the widgets' labextension) into the
    venv: the server looks for them under its own ``sys.prefix``, which the ``.pth`` does not change
    (copies, not links: the server's static handlers refuse files whose real path is outside their folder)."""
    for sub in ("lab/schemas", "lab/themes", "labextensions"):
        if not (src / sub).is_dir():
            continue
        (dst / sub).mkdir(parents=True, exist_ok=True)
        for entry in (src / sub).iterdir():
            if not (dst / sub / entry.name).exists():
                shutil.copytree(entry, dst / sub / entry.name)


def _lab3_venv() -> Path:
    """A venv with JupyterLab 3.6 and jupyterlab_widgets 1.x (the server only: the kernel is .venv-colab's)."""
    venv = WORK / "lab3"
    python = venv / "bin" / "python"
    if not (venv / "ok").exists():
        shutil.rmtree(venv, ignore_errors=True)
        base = shutil.which("python3.11") or sys.executable
        _run([base, "-m", "venv", str(venv)])
        _run([str(python), "-m", "pip", "install", "-q", *LAB3_PINS])
        (venv / "ok").write_text("")
    return python


def _kernel_spec(folder: Path, python: Path) -> None:
    """Kernel ``python3`` (the notebook's kernelspec) run by ``python``, found first on JUPYTER_PATH."""
    spec = folder / "kernels" / "python3"
    spec.mkdir(parents=True, exist_ok=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [str(python), "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "Python 3", "language": "python"}))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _versions(python: Path) -> str:
    code = ("import importlib.metadata as m\n"
            "out = []\n"
            "for d in ('notebook', 'jupyterlab', 'jupyterlab_widgets', 'ipywidgets', 'tensorflow-cpu', 'keras'):\n"
            "    try: out.append(f'{d} {m.version(d)}')\n"
            "    except m.PackageNotFoundError: pass\n"
            "print(', '.join(out))")
    return subprocess.check_output([str(python), "-c", code], text=True).strip()


#: frontend -> (URL path of the notebook, server app module, builds and returns the server's python,
#: the kernel's python or None for the server's own)
FRONTENDS = {
    "nb7-ipyw8": ("notebooks/" + NOTEBOOK, "notebook", _nb7_venv, None),
    "lab3-ipyw7": ("lab/tree/" + NOTEBOOK, "jupyterlab", _lab3_venv, COLAB_PYTHON),
}


class Server:
    def __init__(self, frontend: str, home: Path) -> None:
        url_path, app, build, kernel_python = FRONTENDS[frontend]
        if kernel_python is not None and not kernel_python.exists():
            pytest.skip(f"{COLAB_PYTHON} is missing (tests/run_all.py builds .venv-colab)")
        WORK.mkdir(parents=True, exist_ok=True)
        try:
            self.python = build()
        except subprocess.CalledProcessError as e:
            pytest.fail(f"could not build the {frontend} server environment: {e.cmd}\n{e.stdout[-3000:]}")
        self.url_path, self.home = url_path, home
        root = home / "root"
        root.mkdir()
        shutil.copy(ROOT / "tests" / "ui" / NOTEBOOK, root / NOTEBOOK)   # the frontend may save this copy only
        settings = home / "settings"
        for plugin, values in SETTINGS.items():
            path = settings / "@jupyterlab" / f"{plugin}.jupyterlab-settings"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(values))
        env = {**os.environ, "TFWB_FAST": "1", "TFWB_DATA_DIR": str(home / "tfwb-data"),
               "TF_CPP_MIN_LOG_LEVEL": "2", "JUPYTERLAB_SETTINGS_DIR": str(settings),
               "JUPYTERLAB_WORKSPACES_DIR": str(home / "workspaces"),
               "JUPYTER_RUNTIME_DIR": str(home / "runtime"), "JUPYTER_CONFIG_DIR": str(home / "config")}
        env.pop("MPLBACKEND", None)
        env.pop("VIRTUAL_ENV", None)
        if kernel_python is not None:
            _kernel_spec(home / "share", kernel_python)
            env["JUPYTER_PATH"] = str(home / "share")
        self.kernel_versions = _versions(kernel_python or self.python)
        self.server_versions = _versions(self.python)
        self.port = _free_port()
        self.log_path = home / "server.log"
        cmd = [str(self.python), "-m", app, "--no-browser", "--expose-app-in-browser",
               "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={self.port}", "--ServerApp.port_retries=0",
               f"--IdentityProvider.token={TOKEN}", f"--ServerApp.root_dir={root}",
               "--ServerApp.allow_root=True"]
        if app == "jupyterlab":
            cmd += ["--LabApp.news_url=None"]
        with open(self.log_path, "w") as log:
            self.proc = subprocess.Popen(cmd, env=env, cwd=root, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + SERVER_START_TIMEOUT_S
        while True:
            try:
                self.api("GET", "status")
                break
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    pytest.fail(f"{frontend} server did not start:\n{self.log_tail()}")
                time.sleep(0.25)       # polling the server, not waiting on the page

    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/{self.url_path}?token={TOKEN}"

    def api(self, method: str, path: str):
        req = urllib.request.Request(f"http://127.0.0.1:{self.port}/api/{path}", method=method,
                                     headers={"Authorization": f"token {TOKEN}"})
        with urllib.request.urlopen(req, timeout=30) as resp:
            body = resp.read()
        return json.loads(body) if body else None

    def log_tail(self, chars: int = 4000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    def stop(self) -> None:
        try:
            for kernel in self.api("GET", "kernels"):
                self.api("DELETE", f"kernels/{kernel['id']}")
        except OSError:
            pass
        self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)


# ``browser``: the module-scoped headless Chromium of tests/ui/conftest.py.


@pytest.mark.parametrize("frontend", list(FRONTENDS))
def test_the_monitor_chart_is_redrawn_in_place(frontend, browser, tmp_path, lab_js):
    from playwright.sync_api import expect

    artifacts = ROOT / "artifacts" / "ui"
    artifacts.mkdir(parents=True, exist_ok=True)
    server = Server(frontend, tmp_path)
    context = browser.new_context(viewport={"width": 1400, "height": 1100})
    page = context.new_page()
    page_errors: list = []
    page.on("pageerror", lambda e: page_errors.append(str(e)))
    t0 = time.perf_counter()
    try:
        page.goto(server.url())
        page.wait_for_function(lab_js.READY, arg=NOTEBOOK, timeout=KERNEL_IDLE_TIMEOUT_MS)
        app = page.evaluate(JS_VERSIONS)["app"]
        page.evaluate(lab_js.RUN_ALL)
        chart = page.locator(".jp-OutputArea-output .widget-vbox img.widget-image")
        status = page.locator(".jp-OutputArea-output .widget-vbox .widget-html")
        expect(chart.first).to_have_attribute("src", re.compile(r"^blob:|^data:"), timeout=CHART_TIMEOUT_MS)
        # Count the pictures this one <img> shows (an empty Image has a src too, so one change is not enough).
        chart.first.evaluate(JS_WATCH_SRC)
        expect(status.first).to_contain_text(re.compile(r"fit: step \d+/160"), timeout=UI_TIMEOUT_MS)
        t_chart = time.perf_counter() - t0
        page.wait_for_function("() => window.__tfwbPictures >= 3", timeout=UI_TIMEOUT_MS)   # redrawn in place
        chart.first.scroll_into_view_if_needed()
        page.screenshot(path=str(artifacts / f"monitor-{frontend}-during.png"))
        done = page.locator(".jp-OutputArea-output", has_text="fit done: ok")
        expect(done).to_be_visible(timeout=CHART_TIMEOUT_MS)
        assert chart.count() == 1, "the chart must be redrawn in place, not appended"
        expect(status.first).to_contain_text(re.compile(r"browser: median step .* ms"), timeout=UI_TIMEOUT_MS)
        box = chart.first.bounding_box()
        assert box and box["width"] > 200 and box["height"] > 100, box
        size = page.evaluate("(img) => [img.naturalWidth, img.naturalHeight]", chart.first.element_handle())
        assert size[0] > 200 and size[1] > 100, f"the chart image does not decode: natural size {size}"
        assert page.evaluate(lab_js.ERRORS) == []
        pictures = page.evaluate("() => window.__tfwbPictures")
        chart.first.scroll_into_view_if_needed()
        page.screenshot(path=str(artifacts / f"monitor-{frontend}-after.png"))
        print(f"\n[ui] {frontend}: page {app}; server: {server.server_versions}; kernel: {server.kernel_versions}; "
              f"chart after {t_chart:.1f} s, {pictures} pictures in one <img>, fit done after {time.perf_counter() - t0:.1f} s", flush=True)
    except Exception:
        page.screenshot(path=str(artifacts / f"monitor-{frontend}-failed.png"))
        print(f"\n[ui] {frontend} server log:\n{server.log_tail()}\npage errors: {page_errors}", flush=True)
        raise
    finally:
        context.close()
        server.stop()
