"""Chapter 00 with a stand-in NVML first on PYTHONPATH (issue 17, "What must hold").

``tests/standins/pynvml_t4``: NVML sees one Tesla T4 while TensorFlow is this repository's
CPU build; the chapter must run to its end and its first output must say that TensorFlow
cannot use that GPU, and how to fix it. ``tests/standins/pynvml_mig``: an A100 MIG slice
whose utilization NVML refuses; the chapter must run to its end all the same.

Every chapter runs to its end under ``tests/standins/pynvml_t4_mig`` (both at once: a T4 and a
MIG slice whose utilization NVML refuses) in the test command (tests/run_all.py's chapters leg
puts it first on PYTHONPATH), so the tests here only run chapter 00's setup cell
(``tfwb.chapter("00")``) under each stand-in and read what it prints: each thing once.
``run_chapter`` runs a whole chapter under one stand-in by hand (``TFWB_STANDIN_CHAPTERS=1``).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CHAPTER = ROOT / "notebooks" / "00_measuring.ipynb"

pytestmark = [pytest.mark.slow, pytest.mark.tf]


def run_chapter(standin: str, tmp_path: Path) -> str:
    """Execute chapter 00 with the stand-in first on PYTHONPATH; the setup cell's output."""
    out = tmp_path / "00.ipynb"
    env = dict(os.environ, TFWB_FAST="1",
               PYTHONPATH=os.pathsep.join([str(ROOT / "tests" / "standins" / standin), str(ROOT)]))
    proc = subprocess.run(
        [sys.executable, "-m", "jupyter", "nbconvert", "--to", "notebook", "--execute", str(CHAPTER),
         "--output", str(out), "--ExecutePreprocessor.timeout=600"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    nb = json.loads(out.read_text(encoding="utf-8"))
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    assert all(c.get("execution_count") for c in code), "not every cell ran"
    first = next(c for c in code if c.get("outputs"))
    return "".join("".join(o.get("text", "")) for o in first["outputs"])


def setup_output(standin: str) -> str:
    """What chapter 00's setup cell prints, with the stand-in first on PYTHONPATH."""
    env = dict(os.environ, TFWB_FAST="1",
               PYTHONPATH=os.pathsep.join([str(ROOT / "tests" / "standins" / standin), str(ROOT)]))
    proc = subprocess.run([sys.executable, "-c", "import tfwb; print(tfwb.chapter('00'))"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


def test_chapter_00_on_a_t4_that_tensorflow_cannot_use():
    first = setup_output("pynvml_t4")
    assert "Tesla T4 seen by NVML but not usable by TensorFlow: this TensorFlow is a CPU-only build" in first
    assert 'pip install "tensorflow[and-cuda]"' in first


def test_chapter_00_setup_on_a_mig_slice_without_utilization():
    first = setup_output("pynvml_mig")
    assert "NVIDIA A100-SXM4-40GB seen by NVML but not usable by TensorFlow" in first


def test_chapter_00_setup_on_both_at_once_names_each_gpu_once():
    first = setup_output("pynvml_t4_mig")
    assert "Tesla T4 + NVIDIA A100-SXM4-40GB seen by NVML but not usable by TensorFlow" in first
    assert "2×" not in first


@pytest.mark.skipif(os.environ.get("TFWB_STANDIN_CHAPTERS") != "1",
                    reason="the chapters leg of the test command runs every chapter under pynvml_t4_mig")
@pytest.mark.parametrize("standin", ["pynvml_t4", "pynvml_mig"])
def test_chapter_00_runs_to_its_end_under_one_stand_in(standin, tmp_path):
    assert "seen by NVML but not usable by TensorFlow" in run_chapter(standin, tmp_path)
