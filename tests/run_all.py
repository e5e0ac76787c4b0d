"""Run every test, each thing once: the package tests, every ``>>>`` example in tfwb
(doctests; tfwb/conftest.py leaves out tfwb/tf and tfwb/ui where TensorFlow or the widgets
are missing) and every chapter under nbval, in one pytest run over all cores; then the
browser test, which drives the Workbench smoke notebook (tests/ui/workbench_smoke.ipynb;
every chapter in the browser is opt-in: ``TFWB_UI_ALL_CHAPTERS=1``). The Binder test
installs binder/requirements.txt, imports tfwb and trains once; it runs no chapter.

This is the README's test command (``.ci/run`` calls it). It installs Debian's
``chromium`` when it is missing and this process may use apt (root), so the browser
test can run; it never downloads a browser through Playwright. Exit status is
non-zero when any stage fails.

Usage: python tests/run_all.py [--skip-ui] [--skip-slow] [extra pytest args]
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"


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


def stage(name: str, args: list) -> int:
    t0 = time.perf_counter()
    print(f"\n=== {name}: {' '.join(args)}", flush=True)
    rc = subprocess.call(args, cwd=ROOT)
    print(f"=== {name}: {'ok' if rc == 0 else f'FAILED (exit {rc})'} in {time.perf_counter() - t0:.0f} s",
          flush=True)
    return rc


def workers() -> list:
    """pytest-xdist options: one worker per core (at most 4), whole files per worker.

    ``loadfile`` keeps a notebook's cells in one worker (one kernel, in order) and a test
    module's tests together. Two workers on a 2-core machine overlap one test's Python,
    disk and pip time with another's TensorFlow compute.
    """
    n = max(1, min(4, os.cpu_count() or 1))
    return ["-n", str(n), "--dist", "loadfile"] if n > 1 else []


def main(argv: list) -> int:
    skip_ui = "--skip-ui" in argv
    skip_slow = "--skip-slow" in argv
    extra = [a for a in argv if a not in ("--skip-ui", "--skip-slow")]
    os.environ.setdefault("TFWB_FAST", "1")
    py = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider"]
    marks = "not ui" + (" and not slow" if skip_slow else "")
    # One pytest run for the package tests and every chapter (nbval), spread over the cores.
    rcs = [
        stage("package tests and notebooks (nbval)",
              py + ["-q", "-m", marks] + workers()
              # importlib: tests/conftest.py and notebooks/conftest.py share a basename
              + ["--import-mode=importlib", "--doctest-modules", "--nbval-lax", "--nbval-current-env", "--nbval-cell-timeout=900",
                 "--ignore=tests/ui", "tfwb", "tests", "notebooks"] + extra),
    ]
    if not skip_ui:
        ensure_chromium()
        # Its own pytest process: Playwright's sync API refuses to run inside an asyncio loop.
        rcs.append(stage("browser test", py + ["-q", "-m", "ui", "tests/ui"] + extra))
    failed = sum(1 for rc in rcs if rc not in (0, 5))   # 5: no tests collected
    print(f"\nrun_all: {len(rcs) - failed}/{len(rcs)} stages passed", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
