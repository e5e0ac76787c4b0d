"""Run every test, each thing once, in two environments, and the browser test beside them.

1. **The pinned newest** (``.venv``, built from requirements.txt and constraints.txt by the
   README's command): the package tests and every ``>>>`` example in tfwb (doctests;
   tfwb/conftest.py leaves out tfwb/tf and tfwb/ui where TensorFlow or the widgets are missing),
   in one pytest run over all cores.
2. **Colab's versions** (``.venv-colab``, built here from tests/colab-constraints.txt): every
   chapter under nbval, with the stand-in NVML of tests/standins/pynvml_t4_mig first on PYTHONPATH:
   NVML sees a Tesla T4 and an A100 MIG slice that this CPU build of TensorFlow cannot use (the
   reader who installed requirements.txt on a GPU machine), and refuses the slice's utilization
   (NVML on MIG and some vGPUs), so every chapter proves once that it runs to its end under both,
   says so, and states CPU expectations there (issue 17); on this GPU-less machine nothing else
   changes. Colab's GPU runtime (its published package list, 2026-08) has Python
   3.13, TensorFlow 2.20.0, Keras 3.13.2, numpy 2.1.3, ipywidgets 7.7.1 and protobuf 5.29.6;
   this leg has the same versions with the CPU build of that TensorFlow (``tensorflow-cpu``),
   on Python 3.13 where this machine has it (pyenv's, or ``python3.13`` on the PATH), else on
   this Python, and says so. The chapters run here and nowhere else, so the new leg costs only
   its install: each chapter runs once, under the versions most readers have.
3. The browser test, in ``.venv``: it drives the Workbench smoke notebook
   (tests/ui/workbench_smoke.ipynb; every chapter in the browser is opt-in:
   ``TFWB_UI_ALL_CHAPTERS=1``).

The three environments (``.venv``, ``.venv-colab``, the Binder venv) are built at once; leg 2
(the longer) starts when ``.venv-colab`` is ready, leg 1 and the browser test when ``.venv`` is.
They run side by side, each leg spread over all cores (pytest-xdist): while one leg finishes its
last files, the other keeps the cores busy, and the browser test mostly waits for JupyterLab and
its kernel. Each stage's output is printed whole when it ends. Measured from a fresh clone on 2
AVX2 cores (benchmarks are the place for timings; this is why the stages are arranged so):
building the environments one after the other and the Binder venv inside leg 1 took 21 min 59 s
in all; at once, 20 min 29 s with the browser test after leg 1, and 19 min 28 s with the
chapters leg started as soon as its environment was ready and the browser test beside both legs.

Why this split: the package tests exercise tfwb's code paths on the versions constraints.txt
pins (the newest that pass); the chapters are what a reader runs, mostly on Colab, so they
prove Colab's versions. The Workbench check on ipywidgets 7.7 in tests/test_binder.py runs in
the chapters' leg, inside ``.venv-colab`` (no venv of its own, no worker of leg 1 left waiting for
``.venv-colab``). The Binder test installs binder/requirements.txt (a venv kept per hash of its
inputs, tfwb reinstalled from the checkout each run), imports tfwb and trains once; it runs no
chapter.

``.venv-colab`` is cached like ``.venv``: it is rebuilt only when tests/colab-constraints.txt,
pyproject.toml or the interpreter change (a stamp file in it records them). Measured on this
machine (2 AMD EPYC cores shared with other work): building it took 84 s with pip's cache warm
and 209 s on a busier machine (a cold cache adds the downloads, about 400 MB); reusing it takes
under a second. The chapters leg alone (8 chapters, 153 nbval cells, 2 workers) took 302 s
when the machine was quiet and 783 s when it was shared (half of the 2 cores on average); it
replaces the chapters' share of the former single run, so the new leg costs its install
(once per change of its inputs) minus the ipywidgets-7 venv it saves.

``python3 tests/run_all.py`` is the README's test command (``.ci/run`` calls it), on any Python
3.10-3.13 with nothing installed: it creates ``.venv`` as the README's first command does
(``python3 -m venv .venv``, ``pip install -r requirements.txt``; run from ``.venv/bin/python`` it
uses that environment as it is) while ``.venv-colab`` builds beside it: one pip install alone
leaves the second core idle. It installs Debian's ``chromium``
when it is missing and this process may use apt (root), so the browser test can run; it never
downloads a browser through Playwright. Exit status is non-zero when any stage fails.

Usage: python tests/run_all.py [--skip-ui] [--skip-slow] [--refresh-colab] [extra pytest args]

``--refresh-colab`` rebuilds ``.venv-colab`` from Colab's own pins and tfwb's floors alone (the
blocks above ``# Resolved by pip around them:`` in tests/colab-constraints.txt), rewrites the
block below with what pip picked around them, then runs the tests.
"""
from __future__ import annotations

import glob
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import List, Optional, Tuple

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
VENV = ROOT / ".venv"
COLAB_VENV = ROOT / ".venv-colab"
COLAB_CONSTRAINTS = ROOT / "tests" / "colab-constraints.txt"
COLAB_PYTHON = "3.13"
#: What .venv-colab installs: tfwb as the Colab install cell does (gpu, profile), TensorFlow's CPU
#: build, and what nbval needs. Versions come from tests/colab-constraints.txt.
COLAB_PACKAGES = ("tensorflow-cpu", "-e", ".[gpu,profile]", "pytest", "pytest-xdist", "nbval", "ipykernel")
COLAB_PINS_END = "# Resolved by pip around them:"
STAMP = "tfwb-colab-stamp"
#: The Workbench on ipywidgets 7.7 (Colab's): it runs in the chapters' leg, in .venv-colab itself.
WIDGETS_7 = "tests/test_binder.py::test_workbench_on_ipywidgets_7_7"


#: The chapters that take longest under nbval (small mode), first: each worker takes whole notebooks
#: (``--dist loadfile``), so starting the long ones first leaves short ones to even out the end.
LONGEST_FIRST = ("07", "08", "00", "01", "03", "02", "05", "04", "06")


def chapter_order() -> List[str]:
    """Every notebook under notebooks/, the ones in ``LONGEST_FIRST`` in that order, any other after them."""
    found = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "notebooks").glob("*.ipynb"))
    rank = {n: i for i, n in enumerate(LONGEST_FIRST)}
    return sorted(found, key=lambda p: (rank.get(Path(p).name[:2], len(rank)), p))


def ensure_chromium() -> bool:
    if os.path.exists(CHROMIUM):
        return True
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        print("run_all: no chromium and no root apt: the browser test will be skipped", flush=True)
        return False
    print("run_all: installing Debian's chromium for the browser test", flush=True)
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    subprocess.run(["apt-get", "update", "-qq"], check=False, env=env)
    subprocess.run(["apt-get", "install", "-y", "-qq", "--no-install-recommends", "chromium"],
                   check=False, env=env)
    return os.path.exists(CHROMIUM)


class Background:
    """A stage that runs beside the others; its output is printed, whole, when it ends."""

    def __init__(self, name: str, args: list, env: Optional[dict] = None) -> None:
        self.name, self.t0 = name, time.perf_counter()
        self.log = tempfile.TemporaryFile(mode="w+", encoding="utf-8", errors="replace")
        print(f"\n=== {name} (beside the next stage): {' '.join(str(a) for a in args)}", flush=True)
        self.proc = subprocess.Popen(args, cwd=ROOT, env=env, stdout=self.log, stderr=subprocess.STDOUT)
        self.took_s: Optional[float] = None          # set when the stage ends, not when it is waited for
        self._reaper = threading.Thread(target=self._reap, daemon=True)
        self._reaper.start()

    def _reap(self) -> None:
        self.proc.wait()
        self.took_s = time.perf_counter() - self.t0

    def wait(self) -> int:
        self._reaper.join()
        rc = self.proc.returncode
        self.log.seek(0)
        print(f"\n=== {self.name}: output", flush=True)
        sys.stdout.write(self.log.read())
        self.log.close()
        print(f"=== {self.name}: {'ok' if rc == 0 else f'FAILED (exit {rc})'} in {self.took_s:.0f} s", flush=True)
        return rc


def workers() -> list:
    """pytest-xdist options: one worker per core (at most 4), whole files per worker.

    ``loadfile`` keeps a notebook's cells in one worker (one kernel, in order) and a test
    module's tests together. Two workers on a 2-core machine overlap one test's Python,
    disk and pip time with another's TensorFlow compute.
    """
    n = max(1, min(4, os.cpu_count() or 1))
    return ["-n", str(n), "--dist", "loadfile"] if n > 1 else []


# -- .venv-colab ---------------------------------------------------------------------------

def _version_of(python: str) -> Optional[str]:
    try:
        out = subprocess.run([python, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                             capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def find_python(version: str) -> Optional[str]:
    """An interpreter of Python ``version`` ("3.13") on this machine (``pythonX.Y`` on the PATH, pyenv's), or None."""
    candidates = [shutil.which(f"python{version}")]                     # may be a pyenv shim that fails
    candidates += sorted(glob.glob(os.path.expanduser(f"~/.pyenv/versions/{version}.*/bin/python{version}")))
    return next((p for p in filter(None, candidates) if _version_of(p) == version), None)


def colab_python(version: str = COLAB_PYTHON) -> Tuple[str, str]:
    """(python, why): an interpreter of Colab's Python version when this machine has one, else ours."""
    python = find_python(version)
    if python is not None:
        return python, f"Python {version}, as Colab ({python})"
    return sys.executable, (f"Colab has Python {version}, which this machine lacks: using "
                            f"{sys.executable} ({sys.version.split()[0]}) with Colab's package versions")


def colab_pins(text: str) -> str:
    """tests/colab-constraints.txt down to its frozen block: the header, Colab's versions, tfwb's floors.

    Raises:
        ValueError: when the file has no ``# Resolved by pip around them:`` line.
    """
    head, sep, _ = text.partition(COLAB_PINS_END)
    if not sep:
        raise ValueError(f"{COLAB_CONSTRAINTS.name} has no line {COLAB_PINS_END!r}")
    return head + sep + "\n"


def colab_stamp(python: str, constraints: str) -> str:
    """What .venv-colab was built from: a change in any of them rebuilds it."""
    parts = [python, _version_of(python) or "?", " ".join(COLAB_PACKAGES), constraints,
             (ROOT / "pyproject.toml").read_text(encoding="utf-8")]
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()


def _clean_env(**extra: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    env.update(extra)
    return env


def ensure_colab_venv(refresh: bool = False) -> Optional[Path]:
    """``.venv-colab/bin/python``, built (or reused) from tests/colab-constraints.txt; None when pip failed.

    With ``refresh``, built from Colab's own pins alone, and the file's second block rewritten
    with ``pip freeze`` of the result.
    """
    python, why = colab_python()
    text = COLAB_CONSTRAINTS.read_text(encoding="utf-8")
    constraints = colab_pins(text) if refresh else text
    stamp = colab_stamp(python, constraints)
    venv_python = COLAB_VENV / "bin" / "python"
    stamp_file = COLAB_VENV / STAMP
    print(f"run_all: Colab's versions: {why}", flush=True)
    if not refresh and venv_python.exists() and stamp_file.exists() and stamp_file.read_text() == stamp:
        print(f"run_all: reusing {COLAB_VENV.name} (built from the same constraints)", flush=True)
        return venv_python
    t0 = time.perf_counter()
    shutil.rmtree(COLAB_VENV, ignore_errors=True)
    subprocess.run([python, "-m", "venv", str(COLAB_VENV)], check=True, timeout=300)
    pins = COLAB_VENV / "constraints.txt"
    pins.write_text(constraints, encoding="utf-8")
    # --no-compile: Python compiles the modules a test imports when it imports them; compiling all of
    # TensorFlow's files up front cost CPU time the chapters' leg needs.
    proc = subprocess.run([str(venv_python), "-m", "pip", "install", "-q", "--no-compile", "-c", str(pins),
                           *COLAB_PACKAGES],
                          cwd=ROOT, env=_clean_env(), timeout=3600)
    if proc.returncode != 0:
        print(f"run_all: building {COLAB_VENV.name} failed (pip exit {proc.returncode})", flush=True)
        return None
    if refresh:
        frozen = subprocess.run([str(venv_python), "-m", "pip", "freeze", "--exclude-editable"],
                                capture_output=True, text=True, check=True, env=_clean_env()).stdout
        own = {line.split("==")[0].lower().replace("_", "-") for line in constraints.splitlines()
               if "==" in line and not line.startswith("#")}
        rest = [ln for ln in frozen.splitlines()
                if "==" in ln and ln.split("==")[0].lower().replace("_", "-") not in own]
        COLAB_CONSTRAINTS.write_text(constraints + "".join(f"{ln}\n" for ln in rest), encoding="utf-8")
        stamp = colab_stamp(python, COLAB_CONSTRAINTS.read_text(encoding="utf-8"))
    stamp_file.write_text(stamp)
    print(f"run_all: built {COLAB_VENV.name} in {time.perf_counter() - t0:.0f} s", flush=True)
    return venv_python


def in_venv() -> bool:
    """True when this process runs on ``.venv``'s interpreter (``.venv/bin/python tests/run_all.py``)."""
    return Path(sys.prefix).resolve() == VENV.resolve()


def ensure_venv() -> Optional[Path]:
    """``.venv/bin/python``, created when missing and brought up to requirements.txt; None when pip failed.

    This is the README's first command without JupyterLab: ``python3 -m venv .venv`` and
    ``pip install -q -r requirements.txt`` (a no-op when everything is installed), with ``--no-compile``:
    the same packages, whose modules Python compiles (and caches: ``main`` lets it write bytecode) when
    something first imports them, instead of compiling all of TensorFlow's beside the other builds.
    """
    venv_python = VENV / "bin" / "python"
    t0 = time.perf_counter()
    if not venv_python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True, timeout=300)
    proc = subprocess.run([str(venv_python), "-m", "pip", "install", "-q", "--no-compile", "-r", "requirements.txt"],
                          cwd=ROOT, env=_clean_env(), timeout=3600)
    if proc.returncode != 0:
        print(f"run_all: installing requirements.txt into {VENV.name} failed (pip exit {proc.returncode})",
              flush=True)
        return None
    print(f"run_all: {VENV.name} ready in {time.perf_counter() - t0:.0f} s", flush=True)
    return venv_python


#: Where the Binder venv is kept between test runs, one per hash of what it is built from.
BINDER_CACHE = Path(os.environ.get("TFWB_TEST_CACHE", os.path.expanduser("~/.cache/tfwb-tests")))
BINDER_READY = "tfwb-binder-ready"


def binder_python() -> Tuple[str, str]:
    """(python, why): the interpreter binder/runtime.txt asks for if this machine has it, else ours."""
    runtime = ROOT / "binder" / "runtime.txt"
    match = re.fullmatch(r"python-(\d+\.\d+)", runtime.read_text().strip()) if runtime.exists() else None
    if match is None:
        return sys.executable, "binder/runtime.txt names no python-X.Y; using the test's own Python"
    version = match.group(1)
    python = find_python(version)
    if python is not None:
        return python, f"python {version} as binder/runtime.txt asks ({python})"
    return sys.executable, (f"binder/runtime.txt asks for python {version}, which this machine lacks; "
                            f"using {sys.executable} ({sys.version.split()[0]})")


def binder_stamp(python: str) -> str:
    """What the Binder venv's third-party packages come from: a change in any of them builds it anew."""
    parts = [python, (ROOT / "binder" / "requirements.txt").read_text(encoding="utf-8"),
             (ROOT / "constraints.txt").read_text(encoding="utf-8"),
             (ROOT / "pyproject.toml").read_text(encoding="utf-8")]
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:16]


def ensure_binder_venv() -> Tuple[Optional[Path], str]:
    """(``bin/python`` of a venv built from exactly binder/requirements.txt, or None when pip failed; what happened).

    Built once per ``binder_stamp`` under ``BINDER_CACHE``, from the repository root as repo2docker
    does (the file installs ``.``), with ``--no-compile`` (the test compiles what it imports);
    tests/test_binder.py reinstalls tfwb from the checkout into it when it was built earlier.
    """
    python, why = binder_python()
    where = BINDER_CACHE / f"binder-{binder_stamp(python)}"
    venv_python = where / "bin" / "python"
    if (where / BINDER_READY).exists():
        return venv_python, f"{why}; reusing {where}"
    t0 = time.perf_counter()
    shutil.rmtree(where, ignore_errors=True)
    where.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run([python, "-m", "venv", str(where)], check=True, timeout=300)
    proc = subprocess.run([str(venv_python), "-m", "pip", "install", "-q", "--no-compile", "-r",
                           "binder/requirements.txt"], cwd=ROOT, env=_clean_env(), timeout=3600,
                          capture_output=True, text=True)
    if proc.returncode != 0:
        return None, f"pip install -r binder/requirements.txt failed (exit {proc.returncode}): {proc.stderr[-2000:]}"
    (where / BINDER_READY).write_text("ok")
    return venv_python, f"{why}; built in {time.perf_counter() - t0:.0f} s ({where})"


def main(argv: List[str]) -> int:
    flags = ("--skip-ui", "--skip-slow", "--refresh-colab")
    skip_ui, skip_slow, refresh = (f in argv for f in flags)
    extra = [a for a in argv if a not in flags]
    os.environ.setdefault("TFWB_FAST", "1")
    # Python may write bytecode: with PYTHONDONTWRITEBYTECODE=1 (set on some build machines) every process
    # compiled TensorFlow's modules from source again, 17 s of CPU an import instead of 5 s on a 2-core AVX2
    # machine, in each of the chapters' kernels and the tests' subprocesses. The venvs are installed with
    # --no-compile, so the first import of a module compiles it once, for every later process.
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    marks = "not ui" + (" and not slow" if skip_slow else "")
    rcs = []
    pytest_ = ["-m", "pytest", "-p", "no:cacheprovider"]
    # The environments are built at once (pip is mostly one core's work, downloads and unpacking:
    # one build alone leaves the other core idle). The chapters leg starts as soon as .venv-colab is
    # ready, the package leg as soon as .venv is, each over all cores: while one leg's last files
    # finish, the other's keep the cores busy. The ipywidgets-7.7 check runs in the chapters leg; a
    # test in leg 1 that needs .venv-colab can wait for it through TFWB_COLAB_READY ("ok" or "failed").
    # The Binder venv (tests/test_binder.py) is built in this phase too: built inside the package leg
    # it took 248 s of a worker's time beside the tests.
    built: dict = {}
    venv_build = threading.Thread(target=lambda: built.update(venv=sys.executable if in_venv() else ensure_venv()),
                                  daemon=True)
    venv_build.start()
    tmp = Path(tempfile.mkdtemp(prefix="tfwb-run-all-"))
    ready, binder_ready = tmp / "colab-ready", tmp / "binder-ready"

    def build_binder() -> None:
        venv_python, what = ensure_binder_venv()
        print(f"run_all: Binder venv: {what}", flush=True)
        binder_ready.write_text(str(venv_python) if venv_python is not None else "failed")

    binder_build = threading.Thread(target=build_binder, daemon=True)
    binder_build.start()
    # The chapters leg is the longer one: it starts as soon as .venv-colab is ready, the package leg
    # as soon as .venv is.
    colab = ensure_colab_venv(refresh)
    ready.write_text("ok" if colab is not None else "failed")
    chapters = None
    if colab is not None:
        chapters = Background("every chapter under Colab's versions (.venv-colab, nbval)",
                              [str(colab)] + pytest_ + ["-q"] + workers()
                              # importlib: tests/conftest.py and notebooks/conftest.py share a basename
                              + ["--import-mode=importlib", "--nbval-lax", "--nbval-current-env",
                                 "--nbval-cell-timeout=900", *chapter_order(), WIDGETS_7] + extra,
                              _clean_env(PYTHONPATH=str(ROOT / "tests" / "standins" / "pynvml_t4_mig"),
                                         TFWB_COLAB_PYTHON=str(colab)))
    else:
        rcs.append(1)
    venv_build.join()
    python = built.get("venv")
    env = dict(os.environ, TFWB_COLAB_PYTHON=str(COLAB_VENV / "bin" / "python"), TFWB_COLAB_READY=str(ready),
               TFWB_BINDER_READY=str(binder_ready))
    package = None
    if python is not None:
        package = Background("package tests and doctests (.venv: the pinned newest)",
                             [str(python)] + pytest_ + ["-q", "-m", marks] + workers()
                             + ["--import-mode=importlib", "--doctest-modules", "--ignore=tests/ui",
                                f"--deselect={WIDGETS_7}", "tfwb", "tests"]
                             + extra, env)
    browser = None
    if not skip_ui and python is not None:    # beside both legs: it mostly waits for JupyterLab and its kernel
        ensure_chromium()
        # Its own pytest process: Playwright's sync API refuses to run inside an asyncio loop.
        browser = Background("browser test", [str(python)] + pytest_ + ["-q", "-m", "ui", "tests/ui"] + extra)
    rcs.append(package.wait() if package is not None else 1)
    if browser is not None:
        rcs.append(browser.wait())
    if chapters is not None:
        rcs.append(chapters.wait())
    failed = sum(1 for rc in rcs if rc not in (0, 5))   # 5: no tests collected
    print(f"\nrun_all: {len(rcs) - failed}/{len(rcs)} stages passed", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
