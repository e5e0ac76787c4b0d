"""Environments: installs go through constraints.txt; the Binder install imports tfwb and trains;
the Workbench works on ipywidgets 7.7.

The constraints tests are fast. The others are slow (each builds a virtual environment
with pip), so marked ``slow``: ``pytest -m slow tests/test_binder.py -s`` prints the
install and run times.

* Constraints: ``requirements.txt`` and ``binder/requirements.txt`` read
  ``constraints.txt`` with ``-c``; it pins every package they need (exactly, tfwb
  excepted), and this environment holds exactly the pinned versions, so the tests run
  on the lock (``tools/refresh_constraints.py`` regenerates it).

* Binder: a venv built from exactly ``binder/requirements.txt`` (pip run from the
  repository root, as repo2docker does, because the file installs ``.``), with the
  Python that ``binder/runtime.txt`` names when this machine has it. In it, from a
  temporary folder: ``import tfwb`` finds the installed package (and imports no
  TensorFlow), one tiny ``tfwb.run`` trains in small mode, and the venv's own
  ``python3`` kernel is the one Jupyter lists. No chapter runs here: nbval runs every
  chapter once, in the test environment, which holds the same pinned versions.
* ipywidgets 7.7 (what Colab ships, 7.7.1): in ``.venv-colab``, the environment with Colab's
  versions that tests/run_all.py builds for the chapters (it passes its interpreter in
  ``TFWB_COLAB_PYTHON``), else in a venv of its own with ``ipywidgets==7.7.*`` and tfwb's other
  dependencies; a script builds the Workbench with the shared fake runner (tests/fakes.py),
  checks its CSS classes, clicks Run and checks the chart's PNG.
"""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]
CONSTRAINTS = ROOT / "constraints.txt"
REQUIREMENT_FILES = ("requirements.txt", "binder/requirements.txt")
INSTALL_TIMEOUT_S = 1800
RUN_TIMEOUT_S = 600


# -- constraints.txt ---------------------------------------------------------------------

def _refresh_module():
    spec = importlib.util.spec_from_file_location("refresh_constraints", ROOT / "tools" / "refresh_constraints.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _pins() -> dict:
    """``{name: version}`` of the constraints that apply to this Python and platform."""
    pins = {}
    for n, line in enumerate(CONSTRAINTS.read_text(encoding="utf-8").splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        req = Requirement(line)
        spec = str(req.specifier)
        assert spec.startswith("==") and "," not in spec and not req.extras, \
            f"constraints.txt line {n} is not an exact pin: {line!r}"
        if req.marker is None or req.marker.evaluate():
            name = canonicalize_name(req.name)
            assert name not in pins, f"constraints.txt pins {name} twice for this Python (line {n})"
            pins[name] = spec[2:]
    return pins


@pytest.mark.parametrize("rel", REQUIREMENT_FILES)
def test_requirement_files_install_through_the_constraints(rel):
    path = ROOT / rel
    lines = [ln.strip() for ln in path.read_text(encoding="utf-8").splitlines()]
    targets = [ln.split(None, 1)[1] for ln in lines if ln.startswith(("-c ", "--constraint "))]
    assert targets, f"{rel} does not read constraints.txt (-c)"
    # pip reads a -c path relative to the file that names it.
    assert [(path.parent / t).resolve() for t in targets] == [CONSTRAINTS.resolve()], targets


def test_constraints_pin_every_requirement_exactly_and_never_tfwb():
    pins = _pins()
    module = _refresh_module()
    pinned_anyway = set(module.NOT_PINNED) & set(pins)
    assert not pinned_anyway, f"constraints.txt pins {pinned_anyway}: tfwb is the checkout; pip, setuptools " \
        "and wheel come with the venv"
    for root in module.roots():
        req = Requirement(root)
        if req.marker is not None and not req.marker.evaluate({"extra": ""}):
            continue
        name = canonicalize_name(req.name)
        if name != "tfwb":
            assert name in pins, f"{root!r} has no pin in constraints.txt: run tools/refresh_constraints.py"
            assert req.specifier.contains(pins[name], prereleases=True), (root, pins[name])


def test_this_environment_is_the_one_the_constraints_pin():
    """The tests run on the lock: every package the requirement files need is installed at its pin."""
    closure = _refresh_module().closure(sys.executable)["pins"]       # tfwb, pip, setuptools left out
    pins = _pins()
    unpinned = sorted(set(closure) - set(pins))
    differ = {n: (v, pins[n]) for n, v in closure.items() if n in pins and v != pins[n]}
    assert not unpinned, (f"installed but not in constraints.txt: {unpinned}; refresh it with "
                          "tools/refresh_constraints.py (README, 'Pinned environments')")
    assert not differ, (f"installed version differs from constraints.txt (installed, pinned): {differ}; "
                        "reinstall with `.venv/bin/pip install -r requirements.txt`, or refresh the pins")


def test_readme_documents_the_refresh_command():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "python3 tools/refresh_constraints.py --upgrade" in readme
    assert "python3 tools/refresh_constraints.py --upgrade" in CONSTRAINTS.read_text(encoding="utf-8")


# -- Colab's versions (tests/colab-constraints.txt) and tfwb's floors ------------------------

COLAB_CONSTRAINTS = ROOT / "tests" / "colab-constraints.txt"
#: Colab's GPU runtime, 2026-08 (its published package list); TensorFlow as its CPU build here.
COLAB_VERSIONS = {"tensorflow-cpu": "2.20.0", "keras": "3.13.2", "numpy": "2.1.3", "ipywidgets": "7.7.1",
                  "protobuf": "5.29.6"}


def _colab_pins() -> dict:
    pins = {}
    for n, line in enumerate(COLAB_CONSTRAINTS.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        req = Requirement(line)
        spec = str(req.specifier)
        assert spec.startswith("==") and "," not in spec and req.marker is None, \
            f"colab-constraints.txt line {n} is not an exact pin: {line!r}"
        name = canonicalize_name(req.name)
        assert name not in pins, f"colab-constraints.txt pins {name} twice (line {n})"
        pins[name] = spec[2:]
    return pins


def test_the_colab_leg_pins_colabs_versions_first():
    pins = _colab_pins()
    assert "tfwb" not in pins
    assert {n: pins.get(n) for n in COLAB_VERSIONS} == COLAB_VERSIONS
    text = COLAB_CONSTRAINTS.read_text(encoding="utf-8")
    first = [ln for ln in text.split("# Resolved by pip around them:")[0].splitlines() if "==" in ln]
    assert [canonicalize_name(ln.split("==")[0]) for ln in first[:len(COLAB_VERSIONS)]] == list(COLAB_VERSIONS)


def _run_all_module():
    """tests/run_all.py as a module (it builds the environments: .venv-colab, the Binder venv)."""
    spec = importlib.util.spec_from_file_location("run_all", ROOT / "tests" / "run_all.py")
    run_all = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(run_all)
    return run_all


def test_the_colab_leg_installs_tfwb_as_the_install_cell_does():
    run_all = _run_all_module()
    sys.path.insert(0, str(ROOT / "tools"))
    import chapter_files

    assert ".[gpu,profile]" in run_all.COLAB_PACKAGES and "tfwb[gpu,profile] @ git+" in chapter_files.install_source()
    assert run_all.COLAB_CONSTRAINTS == COLAB_CONSTRAINTS and run_all.COLAB_PYTHON == "3.13"
    kept = run_all.colab_pins(COLAB_CONSTRAINTS.read_text(encoding="utf-8"))    # what --refresh-colab keeps
    assert all(f"{n}=={v}" in kept for n, v in COLAB_VERSIONS.items()) and "jupyterlab" not in kept
    with pytest.raises(ValueError, match="Resolved by pip around them"):
        run_all.colab_pins("numpy==2.1.3\n")


def _floors() -> dict:
    """``{name: floor}`` of tfwb's runtime requirements in pyproject.toml (dependencies, tf, gpu, profile)."""
    try:
        import tomllib
    except ImportError:                                  # Python 3.10
        pytest.skip("tomllib needs Python 3.11")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    reqs = list(project["dependencies"])
    for extra in ("tf", "gpu", "profile"):
        reqs += project["optional-dependencies"][extra]
    floors = {}
    for line in reqs:
        req = Requirement(line)
        low = [s.version for s in req.specifier if s.operator == ">="]
        assert low, f"pyproject.toml: {line!r} has no floor (>=): say the oldest version the tests run"
        floors[canonicalize_name(req.name)] = low[0]
    return floors


def test_tfwbs_floors_are_versions_the_tests_run():
    """Each floor is the oldest version a leg of the test command installs: the Colab leg's pin
    (TensorFlow: its CPU build), never newer than the pinned newest (constraints.txt)."""
    from packaging.version import Version

    colab, newest = _colab_pins(), _pins()
    for name, floor in _floors().items():
        tested = "tensorflow-cpu" if name == "tensorflow" else name
        assert tested in colab and tested in newest, f"{name} is not installed by both legs"
        assert Version(floor) == Version(colab[tested]), \
            f"pyproject.toml's floor {name}>={floor} is not the version the Colab leg tests ({colab[tested]})"
        assert Version(colab[tested]) <= Version(newest[tested]), (name, colab[tested], newest[tested])


# -- fresh virtual environments ------------------------------------------------------------

def _tail(text: str, chars: int = 3000) -> str:
    lines = [ln for ln in text.splitlines() if "is ignored: it is neither a file nor a directory" not in ln]
    return "\n".join(lines)[-chars:]


def _clean_env(**extra: str) -> dict:
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "VIRTUAL_ENV", "MPLBACKEND", "PYTHONHOME", "JUPYTER_PATH")}
    env.update(extra)
    return env


def make_venv(python: str, where: Path) -> Path:
    subprocess.run([python, "-m", "venv", str(where)], check=True, timeout=300)
    return where / "bin" / "python"


def pip_install(venv_python: Path, args: list, *, cwd: Path) -> float:
    """pip install ``args``; ``--no-compile``: the probe compiles what it imports, the rest of TensorFlow's
    files need no bytecode here (repo2docker compiles; that changes no resolution or file)."""
    t0 = time.perf_counter()
    proc = subprocess.run([str(venv_python), "-m", "pip", "install", "-q", "--no-compile", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S, env=_clean_env())
    if proc.returncode != 0:
        pytest.fail(f"pip install {' '.join(args)} failed (exit {proc.returncode}):\n"
                    f"{_tail(proc.stdout + proc.stderr)}")
    return time.perf_counter() - t0


@pytest.fixture(scope="module")
def binder_venv() -> Path:
    """A virtual environment built from exactly binder/requirements.txt, from the repository root.

    ``run_all.ensure_binder_venv`` builds it once per hash of binder/requirements.txt,
    constraints.txt, pyproject.toml and the interpreter (2 minutes of one core, mostly unpacking
    TensorFlow); tests/run_all.py builds it beside the other environments, before the tests, and
    says when it is ready through ``TFWB_BINDER_READY``. Each run then reinstalls only tfwb itself
    from this checkout (``--no-deps``), so the code under test is always this tree's, installed as
    repo2docker installs it (not editable).
    """
    run_all = _run_all_module()
    ready = os.environ.get("TFWB_BINDER_READY")
    deadline = time.monotonic() + INSTALL_TIMEOUT_S
    while ready and not os.path.exists(ready) and time.monotonic() < deadline:
        time.sleep(1)
    venv_python, what = run_all.ensure_binder_venv()
    print(f"\n[binder] {what}", flush=True)
    if venv_python is None:
        pytest.fail(f"[binder] {what}")
    seconds = pip_install(venv_python, ["--no-deps", "--force-reinstall", ".[profile]"], cwd=ROOT)
    print(f"[binder] tfwb reinstalled from this checkout in {seconds:.0f} s", flush=True)
    return venv_python


BINDER_PROBE = """
import importlib.metadata as md, json, sys
import tfwb
tf_at_import = "tensorflow" in sys.modules
result = tfwb.run(tfwb.RunConfig(workload="mlp", steps=3, warmup_steps=1, batch_size=16))
print(json.dumps({"tfwb": tfwb.__file__, "python": sys.executable, "tf_at_import": tf_at_import,
                  "status": result.status, "error": result.error, "steps": len(result.step_times_s),
                  "size": result.config.resolved_size,
                  "have": {n: md.version(n) for n in ("ipykernel", "ipywidgets", "jupyterlab", "tensorflow-cpu")}}))
"""


@pytest.mark.slow
def test_binder_env_imports_tfwb_trains_once_and_has_its_kernel(binder_venv, tmp_path):
    """Install, import, one tiny run: what a Binder reader's first cell needs, nothing more."""
    venv_dir = binder_venv.parent.parent.resolve()
    env = _clean_env(TFWB_FAST="1", TFWB_DATA_DIR=str(tmp_path / "tfwb-data"), TF_CPP_MIN_LOG_LEVEL="2",
                     JUPYTER_DATA_DIR=str(tmp_path / "jupyter-data"))   # no user kernelspec can shadow the venv's
    t0 = time.perf_counter()
    probe = subprocess.run([str(binder_venv), "-c", BINDER_PROBE], cwd=tmp_path, capture_output=True, text=True,
                           env=env, timeout=RUN_TIMEOUT_S)
    seconds = time.perf_counter() - t0
    assert probe.returncode == 0, f"import tfwb / tfwb.run failed in the Binder venv:\n{_tail(probe.stderr)}"
    info = json.loads(probe.stdout.strip().splitlines()[-1])
    print(f"\n[binder] import tfwb + a 4-step tfwb.run in {seconds:.0f} s; {info['have']}", flush=True)
    assert Path(info["tfwb"]).resolve().is_relative_to(venv_dir), \
        f"tfwb was imported from {info['tfwb']}, not installed into the Binder venv by the '.' line"
    assert Path(info["python"]).parent.parent.resolve() == venv_dir, info["python"]
    assert not info["tf_at_import"], "import tfwb imported TensorFlow"
    assert (info["status"], info["error"], info["steps"]) == ("ok", None, 3), info
    assert info["size"] == "small", "TFWB_FAST=1 (binder/start sets it) did not pick the small workloads"
    # TF_CPP_MIN_LOG_LEVEL=2 is set here, and the lines TF writes before its logger starts ignore it:
    # tfwb.tf's quiet import still holds them back (a notebook's first cell would show them in red)
    assert "InitializeLog" not in probe.stderr and "oneDNN custom operations" not in probe.stderr, probe.stderr

    specs = subprocess.run([str(binder_venv), "-m", "jupyter", "kernelspec", "list", "--json"],
                           capture_output=True, text=True, env=env, timeout=120)
    assert specs.returncode == 0, specs.stderr
    python3 = json.loads(specs.stdout)["kernelspecs"]["python3"]
    assert Path(python3["resource_dir"]).resolve().is_relative_to(venv_dir), python3


# -- ipywidgets 7.7 ----------------------------------------------------------------------

WIDGETS_7_SCRIPT = r'''
import json
import ipywidgets
from fakes import FakeRunner                  # tests/fakes.py: 50 ms steps with prefetch, 100 ms without
from tfwb.config import RunConfig
from tfwb.ui.workbench import KNOB_FIELDS, Workbench

runner = FakeRunner()
calls = runner.calls

wb = Workbench(RunConfig(steps=6, warmup_steps=2), runner=runner, hardware={"gpus": [], "cpu_count": 2})
classes = {
    "widget": list(wb.widget._dom_classes), "run_button": list(wb.run_button._dom_classes),
    "status": list(wb.status._dom_classes), "progress": list(wb.progress._dom_classes),
    "run_chart": list(wb.run_chart._dom_classes), "compare_chart": list(wb.compare_chart._dom_classes),
    "history": list(wb.history._dom_classes),
    "knobs": {name: list(wb.knobs[name]._dom_classes) for name in KNOB_FIELDS},
}
chart_before = bytes(wb.run_chart.value or b"")
wb.knobs["prefetch"].value = True
wb.run_button.click()
first = bytes(wb.run_chart.value)
wb.knobs["prefetch"].value = False
wb.run_button.click()
print(json.dumps({
    "version": ipywidgets.__version__,
    "classes": classes,
    "knob_fields": list(KNOB_FIELDS),
    "calls_prefetch": [c.prefetch for c in calls],
    "chart_before_len": len(chart_before),
    "chart_png": first.startswith(b"\x89PNG"),
    "chart_changed": bytes(wb.run_chart.value) != first,
    "compare_png": bytes(wb.compare_chart.value).startswith(b"\x89PNG"),
    "history_ok_rows": wb.history.value.count("tfwb-row-ok"),
    "button_enabled": not wb.run_button.disabled,
    "mimebundle": sorted(wb._repr_mimebundle_()),
}))
'''


@pytest.fixture(scope="module")
def widgets7_venv(tmp_path_factory) -> Path:
    """Colab's environment (``.venv-colab``, ipywidgets 7.7.1) when tests/run_all.py built it, else a venv of its own."""
    colab = os.environ.get("TFWB_COLAB_PYTHON")
    ready = os.environ.get("TFWB_COLAB_READY")       # tests/run_all.py builds .venv-colab beside this run
    deadline = time.monotonic() + 900
    while ready and not os.path.exists(ready) and time.monotonic() < deadline:
        time.sleep(1)
    if colab and Path(colab).exists() and (not ready or Path(ready).read_text() == "ok"):
        print(f"\n[ipywidgets 7.7] reusing Colab's versions ({colab})", flush=True)
        return Path(colab)
    venv_python = make_venv(sys.executable, tmp_path_factory.mktemp("ipywidgets7") / "venv")
    seconds = pip_install(venv_python, ["ipywidgets==7.7.*", "numpy", "psutil>=5.8", "matplotlib>=3.5", "pillow"],
                          cwd=ROOT)
    print(f"\n[ipywidgets 7.7] venv ({sys.version.split()[0]}) installed in {seconds:.0f} s", flush=True)
    return venv_python


@pytest.mark.slow
def test_workbench_on_ipywidgets_7_7(widgets7_venv, tmp_path):
    script = tmp_path / "check_widgets7.py"
    script.write_text(WIDGETS_7_SCRIPT)
    proc = subprocess.run([str(widgets7_venv), str(script)], cwd=tmp_path, capture_output=True, text=True,
                          env=_clean_env(PYTHONPATH=os.pathsep.join([str(ROOT), str(ROOT / "tests")]),
                                         MPLBACKEND="Agg"), timeout=300)
    assert proc.returncode == 0, f"the Workbench failed on ipywidgets 7.7:\n{_tail(proc.stderr)}"
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    print(f"\n[ipywidgets 7.7] {got['version']}: classes and a click checked", flush=True)
    assert got["version"].startswith("7.7."), got["version"]
    c = got["classes"]
    assert "tfwb-workbench" in c["widget"]
    for name, css in (("run_button", "tfwb-run"), ("status", "tfwb-status"), ("progress", "tfwb-progress"),
                      ("run_chart", "tfwb-run-chart"), ("compare_chart", "tfwb-compare-chart"),
                      ("history", "tfwb-history")):
        assert css in c[name], (name, c[name])
    for field in got["knob_fields"]:
        assert f"tfwb-knob-{field}" in c["knobs"][field], (field, c["knobs"][field])
    assert got["calls_prefetch"] == [True, False]
    assert got["chart_before_len"] == 0 and got["chart_png"] and got["chart_changed"] and got["compare_png"]
    assert got["history_ok_rows"] == 2 and got["button_enabled"]
    assert "application/vnd.jupyter.widget-view+json" in got["mimebundle"]


def test_binder_starts_the_book_in_small_mode():
    start = ROOT / "binder" / "start"
    text = start.read_text()
    assert os.access(start, os.X_OK), "binder/start must be executable"
    assert text.startswith("#!/bin/bash") and "export TFWB_FAST=1" in text
    assert text.rstrip().endswith('exec "$@"'), "repo2docker's start script must end with exec \"$@\""
