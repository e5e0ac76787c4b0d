"""The book's notebooks as files: headers, badges, chapter list, stored outputs, the Colab cell.

Plain and fast: reads the .ipynb JSON, never starts a kernel or imports TensorFlow.
The Colab install cell is executed in a fresh namespace, outside Colab and with a
fake ``google.colab``, with ``subprocess`` patched so that nothing is installed.
"""
from __future__ import annotations

import importlib.util
import json
import re
import shlex
import subprocess
import sys
import types
from pathlib import Path

import pytest

from tfwb import book

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
import chapter_files  # noqa: E402 - tools/chapter_files.py: the author's header and strip tool

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "notebooks").glob("*.ipynb"))
LINK = re.compile(r"\]\((https?://[^)\s]+)\)")


def load(path: str) -> dict:
    return json.loads((ROOT / path).read_text(encoding="utf-8"))


def source(cell: dict) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else src


def text(value) -> str:
    return "".join(value) if isinstance(value, list) else str(value)


def test_there_are_notebooks():
    assert NOTEBOOKS, "no notebooks/*.ipynb found"


@pytest.mark.parametrize("path", NOTEBOOKS)
def test_notebook_starts_with_the_book_header(path):
    cells = load(path)["cells"]
    header = chapter_files.header_cells(path)
    got = [(c["cell_type"], source(c)) for c in cells[:len(header)]]
    assert got == header, f"{path}: the first cells differ from tfwb.chapter_files.header_cells({path!r})"
    assert cells[0]["cell_type"] == "markdown" and cells[1]["cell_type"] == "code"


@pytest.mark.parametrize("path", NOTEBOOKS)
def test_badges_point_at_this_notebook_and_the_repo(path):
    links = LINK.findall(source(load(path)["cells"][0]))
    colab = [u for u in links if u.startswith("https://colab.research.google.com/github/")]
    binder = [u for u in links if u.startswith("https://mybinder.org/v2/gh/")]
    assert len(colab) == 1 and len(binder) == 1, f"{path}: badge links {links}"
    assert colab[0] == f"https://colab.research.google.com/github/{chapter_files.REPO_SLUG}/blob/{chapter_files.BRANCH}/{path}"
    assert binder[0] == f"https://mybinder.org/v2/gh/{chapter_files.REPO_SLUG}/HEAD?urlpath=lab/tree/{path}"
    assert "colab-badge.svg" in source(load(path)["cells"][0])
    assert "mybinder.org/badge_logo.svg" in source(load(path)["cells"][0])


@pytest.mark.parametrize("path", NOTEBOOKS)
def test_every_cell_has_a_unique_id(path):
    """A cell without an id gets one from JupyterLab when the file opens: the chapter then shows as modified."""
    ids = [c.get("id") for c in load(path)["cells"]]
    assert None not in ids and len(set(ids)) == len(ids), [i for i, c in enumerate(ids) if c is None]


@pytest.mark.parametrize("path", NOTEBOOKS)
def test_every_notebook_is_a_listed_chapter(path):
    assert path in [c.path for c in book.CHAPTERS], f"{path} is not in tfwb.book.CHAPTERS"


def test_chapters_are_numbered_in_order_with_matching_paths():
    numbers = [c.number for c in book.CHAPTERS]
    assert numbers == sorted(numbers) and len(set(numbers)) == len(numbers)
    for c in book.CHAPTERS:
        assert c.path.startswith(f"notebooks/{c.number}_") and c.path.endswith(".ipynb"), c
        assert c.title.strip(), c


def test_readme_links_every_chapter_on_disk():
    readme = ROOT / "README.md"
    if not readme.exists():
        pytest.skip("README.md is not there yet")
    targets = set(re.findall(r"\]\(([^)\s]+)\)", readme.read_text(encoding="utf-8")))
    missing = [c.path for c in book.CHAPTERS if (ROOT / c.path).exists() and c.path not in targets]
    assert not missing, f"README.md does not link these chapters: {missing}"


@pytest.mark.parametrize("path", NOTEBOOKS)
def test_stored_outputs_have_no_errors(path):
    problems = []
    for i, cell in enumerate(load(path)["cells"]):
        for out in cell.get("outputs", []):
            if out.get("output_type") == "error":
                problems.append(f"cell {i}: {out.get('ename')}: {out.get('evalue')}")
            elif out.get("output_type") == "stream" and "Traceback (most recent call last)" in text(out.get("text")):
                problems.append(f"cell {i}: a traceback in {out.get('name')}")
    assert not problems, f"{path}: {problems}"


@pytest.mark.parametrize("path", NOTEBOOKS)
def test_chapters_are_committed_without_outputs_except_the_checked_cells(path):
    nb = load(path)
    kept = [i for i, c in enumerate(nb["cells"]) if c.get("outputs") and not chapter_files.is_checked(c)]
    assert not kept, (f"{path}: cells {kept} keep outputs nbval does not check (the reader should see their "
                      "own numbers): run `python tools/chapter_files.py strip` on it")
    assert nb == chapter_files.strip_outputs(nb), f"{path}: not in committed form; run `python tools/chapter_files.py strip`"
    checked = [c for c in nb["cells"] if chapter_files.is_checked(c)]
    assert all(c.get("outputs") and c.get("execution_count") for c in checked), (
        f"{path}: a checked cell has no stored output to compare against")


@pytest.mark.parametrize("path", NOTEBOOKS)
def test_stored_outputs_have_no_tensorflow_log_lines(path):
    lines = [f"cell {i}: {line[:80]}" for i, c in enumerate(load(path)["cells"]) for o in c.get("outputs", [])
             for line in text(o.get("text", "") or json.dumps(o.get("data", {}))).splitlines()
             if re.match(r"^[EWI]\d{4} ", line) or "oneDNN" in line]
    assert not lines, f"{path}: TensorFlow's C++ log lines in stored outputs: {lines}"


def test_strip_outputs_keeps_only_checked_cells():
    nb = {"metadata": {"widgets": {"state": {}}}, "cells": [
        {"cell_type": "code", "source": "# NBVAL_CHECK_OUTPUT\nprint(1)", "outputs": [{"text": "1"}],
         "execution_count": 3, "metadata": {}},
        {"cell_type": "code", "source": ["x = 1\n", "print(x)"], "outputs": [{"text": "1"}],
         "execution_count": 4, "metadata": {}},
        {"cell_type": "markdown", "source": "hi", "metadata": {}}]}
    out = chapter_files.strip_outputs(nb)
    assert out["cells"][0]["outputs"] and out["cells"][0]["execution_count"] == 3
    assert out["cells"][1]["outputs"] == [] and out["cells"][1]["execution_count"] is None
    assert "widgets" not in out["metadata"] and nb["cells"][1]["outputs"]     # the input is not changed


@pytest.mark.parametrize("path", NOTEBOOKS)
def test_kernelspec_is_python3(path):
    assert load(path)["metadata"].get("kernelspec", {}).get("name") == "python3"


# -- the Colab install cell, executed -------------------------------------------------

def _install_cell(path: str = None) -> str:
    """The install cell as stored in the first notebook (the header test ties it to book.py)."""
    if path is None:
        if not NOTEBOOKS:
            pytest.skip("no notebooks")
        path = NOTEBOOKS[0]
    return source(load(path)["cells"][1])


def _run_cell(ns: dict = None) -> dict:
    ns = {} if ns is None else ns
    exec(compile(_install_cell(), "<install cell>", "exec"), ns)
    return ns


@pytest.fixture
def no_subprocess(monkeypatch):
    """Any subprocess call from the cell is recorded and fails the test that did not expect it."""
    calls = []

    def refuse(*args, **kwargs):
        calls.append(args[0] if args else kwargs.get("args"))
        raise AssertionError(f"the install cell started a process: {calls[-1]!r}")

    for name in ("check_call", "call", "run", "check_output", "Popen"):
        monkeypatch.setattr(subprocess, name, refuse)
    return calls


@pytest.fixture
def pip_calls(monkeypatch):
    calls = []
    monkeypatch.setattr(subprocess, "check_call", lambda args, **kw: calls.append(list(args)))
    return calls


TPU_VARIABLES = ("TPU_ACCELERATOR_TYPE", "TPU_NAME", "COLAB_TPU_1VM", "COLAB_TPU_ADDR")


@pytest.fixture(autouse=True)
def no_tpu(monkeypatch):
    """This machine looks like no TPU runtime to the cell, whatever it really is: no TPU variable,
    no /dev/accel*, no /dev/vfio groups, no /dev/nvidia*."""
    import glob
    import os

    for name in TPU_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    real_glob, real_listdir = glob.glob, os.listdir
    monkeypatch.setattr(glob, "glob", lambda pattern, *a, **kw: [] if str(pattern).startswith("/dev/")
                        else real_glob(pattern, *a, **kw))
    monkeypatch.setattr(os, "listdir", lambda path=".": [] if str(path).startswith("/dev/")
                        else real_listdir(path))


@pytest.fixture
def fake_colab(monkeypatch):
    """A stand-in ``google.colab`` whose ``output.enable_custom_widget_manager`` records calls."""
    enabled = []
    colab = types.ModuleType("google.colab")
    output = types.ModuleType("google.colab.output")
    output.enable_custom_widget_manager = lambda: enabled.append(True)
    colab.output = output
    monkeypatch.setitem(sys.modules, "google.colab", colab)
    monkeypatch.setitem(sys.modules, "google.colab.output", output)
    return enabled


def _runtime(monkeypatch, *, tfwb: bool, versions: dict, devices=(), environ=None):
    """A fake runtime for the cell: which of tfwb / tensorflow / tensorflow-tpu / libtpu are
    installed (``versions``: name -> version or None), which /dev entries exist, which variables."""
    import glob
    import importlib.metadata as md
    import os

    real_find_spec, real_version = importlib.util.find_spec, md.version
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "tfwb" and not tfwb else real_find_spec(name, *a))

    def version(name):
        if name in versions:
            if versions[name] is None:
                raise md.PackageNotFoundError(name)
            return versions[name]
        return real_version(name)

    monkeypatch.setattr(md, "version", version)
    devices = list(devices)
    real_glob, real_listdir = glob.glob, os.listdir
    monkeypatch.setattr(glob, "glob", lambda pattern, *a, **kw: [d for d in devices if _fn(d, pattern)]
                        if str(pattern).startswith("/dev/") else real_glob(pattern, *a, **kw))
    monkeypatch.setattr(os, "listdir", lambda path=".": sorted(
        {d[len(str(path)) + 1:].split("/")[0] for d in devices if d.startswith(str(path).rstrip("/") + "/")})
        if str(path).startswith("/dev/") else real_listdir(path))
    for name, value in (environ or {}).items():
        monkeypatch.setenv(name, value)


def _fn(path: str, pattern: str) -> bool:
    import fnmatch
    return fnmatch.fnmatch(path, pattern)


NO_TF = {"tensorflow": None, "tensorflow-tpu": None, "libtpu": None}
COLAB_TPU = {"tensorflow": None, "tensorflow-tpu": None, "libtpu": "0.0.21.1"}   # Colab's TPU image: JAX's libtpu


def test_install_cell_does_nothing_outside_colab(monkeypatch, no_subprocess):
    monkeypatch.delitem(sys.modules, "google.colab", raising=False)
    ns = _run_cell()
    assert ns["IN_COLAB"] is False and ns["ON_TPU"] is False and ns["TPU_INSTALL"] == []
    assert no_subprocess == []


def test_install_cell_on_colab_with_tfwb_installed_enables_the_widget_manager(fake_colab, no_subprocess):
    import ipywidgets

    assert importlib.util.find_spec("tfwb") is not None
    ns = _run_cell()
    assert ns["IN_COLAB"] is True
    assert no_subprocess == []                                   # no pip install
    major = int(ipywidgets.__version__.split(".")[0])
    assert fake_colab == ([True] if major >= 8 else [])


def test_install_cell_on_colab_with_ipywidgets_7_leaves_the_widget_manager_alone(
        monkeypatch, fake_colab, no_subprocess):
    old = types.ModuleType("ipywidgets")
    old.__version__ = "7.7.1"                                   # what Colab ships
    monkeypatch.setitem(sys.modules, "ipywidgets", old)
    ns = _run_cell()
    assert ns["IN_COLAB"] is True and fake_colab == [] and no_subprocess == []


def test_install_cell_on_colab_without_tfwb_installs_the_pinned_release(monkeypatch, fake_colab, pip_calls):
    _runtime(monkeypatch, tfwb=False, versions={"tensorflow": "2.20.0"})
    _run_cell()
    assert len(pip_calls) == 1
    cmd = pip_calls[0]
    assert cmd[:4] == [sys.executable, "-m", "pip", "install"]
    assert cmd[-1] == f"tfwb[gpu,profile] @ git+https://github.com/{chapter_files.REPO_SLUG}@{chapter_files.TFWB_REF}"
    assert not any("tensorflow" in part for part in cmd)      # Colab's own TensorFlow is kept


def test_the_install_cell_pins_the_tfwb_version_of_pyproject():
    """The cell installs the tfwb release the chapter was written for: the tag of this version."""
    version = re.search(r'^version = "([^"]+)"', (ROOT / "pyproject.toml").read_text(encoding="utf-8"), re.M)
    assert version and chapter_files.TFWB_VERSION == version.group(1), (chapter_files.TFWB_VERSION, version)
    assert chapter_files.TFWB_REF == f"v{chapter_files.TFWB_VERSION}"
    src = chapter_files.install_source()
    assert f"git+https://github.com/{chapter_files.REPO_SLUG}@{chapter_files.TFWB_REF}\"" in src
    assert f"@{chapter_files.BRANCH}\"" not in src and re.fullmatch(r"[\w.-]+/[\w.-]+", chapter_files.REPO_SLUG)


@pytest.mark.parametrize("devices, environ", [
    (["/dev/accel0"], {}),                                        # TPU VMs up to v4
    (["/dev/vfio/vfio", "/dev/vfio/0"], {}),                      # a v5e: VFIO groups, no /dev/accel*
    ([], {"TPU_NAME": "local"}),
])
def test_install_cell_on_a_colab_tpu_installs_tensorflows_tpu_pair_first(monkeypatch, fake_colab, pip_calls,
                                                                          devices, environ):
    _runtime(monkeypatch, tfwb=False, versions=COLAB_TPU, devices=devices, environ=environ)
    ns = _run_cell()
    assert ns["ON_TPU"] is True and len(pip_calls) == 2, pip_calls
    tpu, tfwb_pkg = pip_calls
    assert tpu == [sys.executable, "-m", "pip", "install", "-q", "tensorflow-tpu==2.20.0", "libtpu==0.0.14"]
    assert tfwb_pkg[-1].startswith("tfwb") and "tensorflow" not in tfwb_pkg[-1]


def test_install_cell_fixes_only_the_libtpu_next_to_a_tensorflow_tpu(monkeypatch, fake_colab, pip_calls):
    _runtime(monkeypatch, tfwb=True, versions={"tensorflow": None, "tensorflow-tpu": "2.20.0", "libtpu": "0.0.21.1"},
             devices=["/dev/accel0"])
    _run_cell()
    assert pip_calls == [[sys.executable, "-m", "pip", "install", "-q", "libtpu==0.0.14"]]


def test_install_cell_installs_nothing_when_the_pair_is_there(monkeypatch, fake_colab, no_subprocess):
    _runtime(monkeypatch, tfwb=True, versions={"tensorflow": None, **{n: v for n, v in book.TPU_PAIR.items()}},
             devices=["/dev/accel0"])
    assert _run_cell()["TPU_INSTALL"] == [] and no_subprocess == []


def test_install_cell_keeps_the_readers_own_tensorflow_on_a_tpu(monkeypatch, fake_colab, pip_calls):
    _runtime(monkeypatch, tfwb=False, versions={**COLAB_TPU, "tensorflow": "2.21.0"}, devices=["/dev/accel0"])
    ns = _run_cell()
    assert ns["ON_TPU"] is True and ns["TPU_INSTALL"] == []
    assert len(pip_calls) == 1 and not any("tensorflow-tpu" in part for part in pip_calls[0])


def test_install_cell_on_a_gpu_runtime_with_vfio_is_no_tpu(monkeypatch, fake_colab, no_subprocess):
    """GPU passthrough VMs have /dev/vfio too: with an NVIDIA device there, it is not a TPU."""
    _runtime(monkeypatch, tfwb=True, versions=NO_TF, devices=["/dev/vfio/vfio", "/dev/vfio/3", "/dev/nvidia0"])
    ns = _run_cell()
    assert ns["ON_TPU"] is False and no_subprocess == []


def test_install_cell_outside_colab_ignores_tpu_signs(monkeypatch, no_subprocess):
    monkeypatch.delitem(sys.modules, "google.colab", raising=False)
    _runtime(monkeypatch, tfwb=False, versions=NO_TF, devices=["/dev/accel0"], environ={"TPU_NAME": "local"})
    ns = _run_cell()
    assert ns["ON_TPU"] is False and no_subprocess == []


def test_tpu_requirements_is_the_cells_decision():
    assert chapter_files.tpu_requirements(True, COLAB_TPU) == ["tensorflow-tpu==2.20.0", "libtpu==0.0.14"]
    assert chapter_files.tpu_requirements(True, NO_TF) == ["tensorflow-tpu==2.20.0", "libtpu==0.0.14"]
    assert chapter_files.tpu_requirements(True, {"tensorflow-tpu": "2.19.0", "libtpu": "0.0.14"}) == ["tensorflow-tpu==2.20.0"]
    assert chapter_files.tpu_requirements(True, {"tensorflow": "2.20.0"}) == []
    assert chapter_files.tpu_requirements(False, COLAB_TPU) == []
    ns = _run_cell()
    for on_tpu in (True, False):
        for versions in (COLAB_TPU, NO_TF, {"tensorflow": "2.20.0"}, {"tensorflow-tpu": "2.20.0", "libtpu": "0.0.21.1"}):
            assert ns["tpu_requirements"](on_tpu, versions) == chapter_files.tpu_requirements(on_tpu, versions)


def _dev(tmp_path, *entries) -> str:
    root = tmp_path / f"dev{len(list(tmp_path.iterdir()))}"
    root.mkdir()
    for entry in entries:
        (root / entry).parent.mkdir(parents=True, exist_ok=True)
        (root / entry).touch()
    return str(root)


def test_the_cell_and_tfwb_hardware_detect_a_tpu_by_one_rule(monkeypatch, tmp_path):
    """The cell carries tfwb.hardware.detect_tpu's code: both agree on every described runtime."""
    from tfwb import hardware

    monkeypatch.undo()                          # real glob and listdir: the rule reads tmp_path
    ns = _run_cell()
    cases = [
        ({}, _dev(tmp_path), False),                                      # a laptop
        ({}, _dev(tmp_path, "accel0"), False),                            # TPU VM v2-v4
        ({}, _dev(tmp_path, "vfio/vfio", "vfio/0"), False),               # TPU v5e VM
        ({}, _dev(tmp_path, "vfio/vfio", "vfio/0"), True),                # GPU passthrough VM
        ({}, _dev(tmp_path, "vfio/vfio"), False),                         # VFIO control file only
        ({"TPU_NAME": "local"}, _dev(tmp_path), False),
        ({"COLAB_TPU_ADDR": "10.0.0.2:8470"}, _dev(tmp_path), True),
        ({"TPU_NAME": ""}, _dev(tmp_path, "nvidia0"), True),
    ]
    got = [(ns["detect_tpu"](env, dev, gpu), hardware.detect_tpu(env, dev, gpu)) for env, dev, gpu in cases]
    assert all(a == b for a, b in got), got
    assert [a for a, _ in got] == [False, True, True, False, False, True, True, False]


# -- the README's test command is what CI runs ------------------------------------------

def _readme_commands() -> list:
    readme = ROOT / "README.md"
    if not readme.exists():
        pytest.skip("README.md is not there yet")
    text_ = readme.read_text(encoding="utf-8")
    section = re.search(r"^## Quick start\s*$(.*?)(?=^## |\Z)", text_, re.M | re.S)
    if section is None:
        pytest.skip("README.md has no '## Quick start' section yet")
    block = re.search(r"^```[^\n]*\n(.*?)^```", section.group(1), re.M | re.S)
    assert block, "the Quick start section has no fenced block"
    commands = [ln.strip() for ln in block.group(1).splitlines() if ln.strip() and not ln.strip().startswith("#")]
    assert len(commands) == 2, f"expected exactly two commands in the Quick start block, got {commands}"
    return commands


def _readme_test_command() -> str:
    return _readme_commands()[1]


def test_readme_first_command_opens_chapter_00_in_lab():
    words = shlex.split(_readme_commands()[0])
    assert "lab" in words and any(w.endswith("/jupyter") or w == "jupyter" for w in words)
    assert "--allow-root" in words, "JupyterLab refuses to start as root (containers, CI) without it"
    notebook = ROOT / words[-1]
    assert notebook.exists() and notebook.name.startswith("00_"), words[-1]


def test_ci_runs_the_readme_test_command():
    command = _readme_test_command()
    ci = ROOT / ".ci" / "run"
    assert ci.exists(), ".ci/run is missing"
    lines = [ln.strip() for ln in ci.read_text(encoding="utf-8").splitlines()
             if ln.strip() and not ln.strip().startswith("#")]
    assert command in lines, f".ci/run does not run the README's test command {command!r}; it has {lines}"
    assert "tests/run_all.py" in shlex.split(command), "the test command no longer runs tests/run_all.py"


def test_readme_badges_use_the_one_repository_slug():
    text_ = (ROOT / "README.md").read_text(encoding="utf-8")
    slugs = set(re.findall(r"(?:colab\.research\.google\.com/github|mybinder\.org/v2/gh)/([\w.-]+/[\w.-]+)/", text_))
    assert slugs == {chapter_files.REPO_SLUG}, f"README badges name {slugs}; tfwb.chapter_files.REPO_SLUG is {chapter_files.REPO_SLUG!r}"
    assert chapter_files.badge_markdown("notebooks/00_measuring.ipynb") in text_


# -- the chapter session's pure parts ---------------------------------------------------------------------

def test_find_chapter_accepts_the_number_in_any_spelling_and_names_the_chapters_on_a_miss():
    assert book.find_chapter("07") is book.find_chapter(7) is book.find_chapter("7")
    assert book.find_chapter("00").path == "notebooks/00_measuring.ipynb"
    with pytest.raises(ValueError, match=r"chapter=9 is not allowed; chapter must be one of 00, 01, .*07"):
        book.find_chapter(9)
    with pytest.raises(ValueError, match="chapter=True is not allowed"):
        book.find_chapter(True)


def test_closing_line_names_the_time_the_mode_and_the_machine():
    assert book.closing_line(83.4, True, "M") == "this chapter took 83 s here (small mode, M)"
    assert book.closing_line(1200.6, False, "M") == "this chapter took 1201 s here (full size, M)"
    recorded = book.ChapterTime(400.0, 40.0, 0.3, "B")
    assert book.closing_line(42.0, True, "M", recorded) == \
        "this chapter took 42 s here (small mode, M); it took 40 s on B: about as long here"
    assert book.closing_line(1200.0, False, "M", recorded, step_s=0.6) == \
        "this chapter took 1200 s here (full size, M); the estimate from B, scaled by this machine's step, " \
        "was 800 s: 1.50x as long here"
    assert book.closing_line(200.0, False, "M", recorded).endswith("it took 400 s on B: 0.50x as long here")
