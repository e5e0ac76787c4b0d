"""The book's structure: chapters, notebook paths, the header every chapter starts with, its last line.

The repository slug lives here and nowhere else: the Colab badge, the Binder
badge and the Colab install cell of every notebook are built from it, and a test
checks that each notebook's header matches ``header_cells``.

Chapters are committed without outputs, except the cells nbval compares (marked
``# NBVAL_CHECK_OUTPUT``): a reader sees their own numbers, never the author's. After
editing a chapter, regenerate and strip it (a test checks the stripped form)::

    TFWB_FAST=1 .venv/bin/jupyter nbconvert --to notebook --execute --inplace notebooks/NN_x.ipynb
    .venv/bin/python -m tfwb.book strip notebooks/NN_x.ipynb

Pure (JSON in, JSON out).
"""
from __future__ import annotations

import copy
import json
import sys
from dataclasses import dataclass
from typing import List, Tuple, Union

REPO_SLUG = "tfwb-dev/tfwb"
BRANCH = "main"
INSTALL_MARKER = "# tfwb: install on Colab only"
CHECK_MARKER = "NBVAL_CHECK_OUTPUT"


@dataclass(frozen=True)
class Chapter:
    number: str
    path: str
    title: str


CHAPTERS: Tuple[Chapter, ...] = (
    Chapter("00", "notebooks/00_measuring.ipynb", "Measuring training honestly"),
    Chapter("01", "notebooks/01_input_pipeline.ipynb", "The input pipeline"),
    Chapter("02", "notebooks/02_graphs.ipynb", "Graphs: tf.function, retracing, XLA"),
    Chapter("03", "notebooks/03_mixed_precision.ipynb", "Mixed precision"),
    Chapter("04", "notebooks/04_optimizers_and_clipping.ipynb", "Optimizers and gradient clipping"),
    Chapter("05", "notebooks/05_devices_and_strategies.ipynb", "Devices and distribution strategies"),
    Chapter("06", "notebooks/06_profiling_and_tensorboard.ipynb", "Profiling and TensorBoard"),
    Chapter("07", "notebooks/07_capstone.ipynb", "Capstone: every knob on one workload"),
)


def find_chapter(number: Union[str, int]) -> Chapter:
    """The chapter numbered ``number`` (``"00"``, ``"07"``; an int or ``"7"`` works too).

    Raises:
        ValueError: naming the number and the chapters there are.

    Example:
        >>> find_chapter("02").title
        'Graphs: tf.function, retracing, XLA'
        >>> find_chapter(7).path
        'notebooks/07_capstone.ipynb'
    """
    key = f"{number:02d}" if isinstance(number, int) and not isinstance(number, bool) else str(number).zfill(2)
    for chapter in CHAPTERS:
        if chapter.number == key:
            return chapter
    raise ValueError(f"chapter={number!r} is not allowed; chapter must be one of "
                     f"{', '.join(c.number for c in CHAPTERS)}")


def closing_line(elapsed_s: float, fast: bool, machine: str) -> str:
    """The line a chapter ends with: how long it took, in which mode, on which machine.

    Args:
        elapsed_s: seconds since the chapter's setup cell started.
        fast: True in small mode (``TFWB_FAST=1`` or ``size="auto"`` picked small).
        machine: ``tfwb.hardware.describe(hw)``.

    Example:
        >>> closing_line(83.4, True, "2 CPU cores, 8 GiB RAM, no GPU, local")
        'this chapter took 83 s here (small mode, 2 CPU cores, 8 GiB RAM, no GPU, local)'
    """
    return f"this chapter took {elapsed_s:.0f} s here ({'small mode' if fast else 'full size'}, {machine})"


def colab_url(path: str, slug: str = REPO_SLUG) -> str:
    return f"https://colab.research.google.com/github/{slug}/blob/{BRANCH}/{path}"


def binder_url(path: str, slug: str = REPO_SLUG) -> str:
    return f"https://mybinder.org/v2/gh/{slug}/HEAD?urlpath=lab/tree/{path}"


def badge_markdown(path: str, slug: str = REPO_SLUG) -> str:
    """The badge line a chapter starts with."""
    return (f"[![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)]({colab_url(path, slug)}) "
            f"[![Binder](https://mybinder.org/badge_logo.svg)]({binder_url(path, slug)})")


#: Where TensorFlow's TPU builds find ``libtpu`` (PyPI's ``tensorflow`` cannot drive a TPU).
TPU_TF_INDEX = "https://storage.googleapis.com/libtpu-tf-releases/index.html"


def install_source(slug: str = REPO_SLUG) -> str:
    """The first code cell: installs tfwb on Colab only; does nothing anywhere else.

    On a Colab TPU runtime (a TPU VM: ``/dev/accel*`` or a ``TPU_*`` / ``COLAB_TPU_*``
    variable), which ships without TensorFlow, it first installs ``tensorflow-tpu`` from
    TensorFlow's libtpu index, so that ``strategy="tpu"`` works. It never replaces a
    TensorFlow that is already installed.
    """
    return f'''{INSTALL_MARKER} (does nothing elsewhere)
import sys, os, glob, subprocess, importlib.util
IN_COLAB = "google.colab" in sys.modules
ON_TPU = IN_COLAB and (bool(glob.glob("/dev/accel*")) or any(
    os.environ.get(k) for k in ("TPU_ACCELERATOR_TYPE", "TPU_NAME", "COLAB_TPU_1VM", "COLAB_TPU_ADDR")))
if ON_TPU and importlib.util.find_spec("tensorflow") is None:    # Colab's TPU runtimes ship without it
    subprocess.check_call([sys.executable, "-m", "pip", "install", "-q", "tensorflow-tpu",
                           "-f", "{TPU_TF_INDEX}"])
if IN_COLAB and importlib.util.find_spec("tfwb") is None:
    subprocess.check_call([sys.executable, "-m", "pip", "install", "-q",
                           "tfwb[gpu,profile] @ git+https://github.com/{slug}@{BRANCH}"])
if IN_COLAB:
    import ipywidgets
    if int(ipywidgets.__version__.split(".")[0]) >= 8:
        from google.colab import output
        output.enable_custom_widget_manager()'''


def header_cells(path: str, slug: str = REPO_SLUG) -> List[Tuple[str, str]]:
    """``[(cell_type, source), ...]`` for the first two cells of the notebook at ``path``."""
    return [("markdown", badge_markdown(path, slug)), ("code", install_source(slug))]


def is_checked(cell: dict) -> bool:
    """True for a code cell whose output nbval compares (``# NBVAL_CHECK_OUTPUT``)."""
    source = cell.get("source", "")
    return cell.get("cell_type") == "code" and CHECK_MARKER in (
        source if isinstance(source, str) else "".join(source))


def strip_outputs(notebook: dict) -> dict:
    """A copy of ``notebook`` as it is committed: outputs only in the cells nbval checks.

    Every other code cell loses its outputs and execution count; the notebook loses
    saved widget state. Checked cells keep theirs (nbval compares against them).
    """
    nb = copy.deepcopy(notebook)
    nb.get("metadata", {}).pop("widgets", None)
    for cell in nb.get("cells", []):
        if cell.get("cell_type") != "code":
            continue
        cell.get("metadata", {}).pop("execution", None)
        if not is_checked(cell):
            cell["outputs"] = []
            cell["execution_count"] = None
    return nb


def strip_file(path: str) -> bool:
    """Strip the notebook at ``path`` in place; True when it changed."""
    with open(path, encoding="utf-8") as fh:
        before = json.load(fh)
    after = strip_outputs(before)
    if after == before:
        return False
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(after, fh, indent=1, ensure_ascii=False)
        fh.write("\n")
    return True


if __name__ == "__main__":   # python -m tfwb.book strip PATH...
    if len(sys.argv) < 3 or sys.argv[1] != "strip":
        sys.exit("usage: python -m tfwb.book strip NOTEBOOK...")
    for p in sys.argv[2:]:
        print(("stripped " if strip_file(p) else "unchanged ") + p)
