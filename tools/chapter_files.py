"""Writing the book: each chapter's header (badges, the Colab install cell) and its committed form.

The repository slug lives here and nowhere else: the Colab badge, the Binder badge and the
Colab install cell of every notebook are built from it, and tests/test_book.py checks that
each notebook's header matches ``header_cells``.

Chapters are committed without outputs, except the cells nbval compares (marked
``# NBVAL_CHECK_OUTPUT``): a reader sees their own numbers, never the author's. After
editing a chapter, regenerate and strip it (a test checks the stripped form)::

    TFWB_FAST=1 .venv/bin/jupyter nbconvert --to notebook --execute --inplace notebooks/NN_x.ipynb
    .venv/bin/python tools/chapter_files.py strip notebooks/NN_x.ipynb

After changing the header (the slug, ``TFWB_REF``, ``tfwb.book.TPU_PAIR``, the TPU rule in
``tfwb.hardware.detect_tpu``), write it into every chapter: ``python tools/chapter_files.py header``.

An author's tool, not a reader's: nothing in the installed package imports it. Pure (JSON in,
JSON out).
"""
from __future__ import annotations

import argparse
import ast
import copy
import inspect
import json
import sys
import textwrap
from pathlib import Path
from typing import List, Mapping, Optional, Tuple

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))   # run as a script from a checkout

from tfwb.book import CHAPTERS, TPU_PAIR  # noqa: E402
from tfwb.hardware import detect_tpu  # noqa: E402

REPO_SLUG = "tfwb-dev/tfwb"
BRANCH = "main"
INSTALL_MARKER = "# tfwb: install on Colab only"
CHECK_MARKER = "NBVAL_CHECK_OUTPUT"


def colab_url(path: str, slug: str = REPO_SLUG) -> str:
    return f"https://colab.research.google.com/github/{slug}/blob/{BRANCH}/{path}"


def binder_url(path: str, slug: str = REPO_SLUG) -> str:
    return f"https://mybinder.org/v2/gh/{slug}/HEAD?urlpath=lab/tree/{path}"


def badge_markdown(path: str, slug: str = REPO_SLUG) -> str:
    """The badge line a chapter starts with."""
    return (f"[![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)]({colab_url(path, slug)}) "
            f"[![Binder](https://mybinder.org/badge_logo.svg)]({binder_url(path, slug)})")


#: The tfwb a chapter's install cell installs on Colab: the release tag of this version (pyproject.toml's
#: ``version``), so a chapter gets the tfwb it was written for, not whatever ``main`` is that day.
#: Bump both together and regenerate the cells (``python tools/chapter_files.py header``); push the tag.
TFWB_VERSION = "0.3.0"
TFWB_REF = f"v{TFWB_VERSION}"

def tpu_requirements(on_tpu: bool, versions: Mapping[str, Optional[str]]) -> List[str]:
    """What the install cell pip-installs so that TensorFlow can drive this TPU: ``[]`` for nothing.

    The cell's decision, as a function of the runtime (its text is copied into the cell).

    Args:
        on_tpu (bool): a TPU is attached (``tfwb.hardware.detect_tpu``, the cell's copy of it).
        versions (mapping): installed version (or None) of ``tensorflow``, ``tensorflow-tpu``
            and ``libtpu``.

    Returns:
        Requirements such as ``"libtpu==0.0.14"``: nothing off a TPU, nothing when the reader's
        own (non-TPU) ``tensorflow`` is installed (kept: tfwb then says that TensorFlow cannot
        drive the TPU), else each package of ``TPU_PAIR`` not at its version.

    Example:
        >>> tpu_requirements(True, {"tensorflow": None, "tensorflow-tpu": None, "libtpu": "0.0.21.1"})
        ['tensorflow-tpu==2.20.0', 'libtpu==0.0.14']
        >>> tpu_requirements(False, {})
        []
    """
    if not on_tpu or versions.get("tensorflow"):
        return []
    return [f"{name}=={version}" for name, version in TPU_PAIR.items() if versions.get(name) != version]


def _cell_function(fn) -> str:
    """``fn``'s source as the install cell carries it: no docstring, no annotations (plain Python)."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
    node = tree.body[0]
    if ast.get_docstring(node) is not None:
        node.body = node.body[1:]
    node.returns = None
    for arg in node.args.args + node.args.kwonlyargs:
        arg.annotation = None
    return ast.unparse(tree)


def install_source(slug: str = REPO_SLUG) -> str:
    """The first code cell: installs tfwb on Colab only; does nothing anywhere else.

    On Colab it installs tfwb at ``TFWB_REF`` unless tfwb is already there. On a TPU (detected by
    ``tfwb.hardware.detect_tpu``, whose code the cell carries: one rule for both), it first
    installs ``TPU_PAIR`` where ``tpu_requirements`` says so (also carried). On ipywidgets 8 it
    enables Colab's custom widget manager (Colab's own ipywidgets 7.7 needs none).
    """
    return f'''{INSTALL_MARKER} (does nothing elsewhere)
import sys, os, glob, subprocess, importlib.util, importlib.metadata
IN_COLAB = "google.colab" in sys.modules
TPU_PAIR = {TPU_PAIR!r}
{_cell_function(detect_tpu)}
{_cell_function(tpu_requirements)}
def installed(name):
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None
ON_TPU = IN_COLAB and detect_tpu(has_gpu=bool(glob.glob("/dev/nvidia[0-9]*")))
TPU_INSTALL = tpu_requirements(ON_TPU, {{n: installed(n) for n in ("tensorflow", *TPU_PAIR)}})
if TPU_INSTALL:    # TensorFlow's TPU build and the libtpu its release pairs (not the JAX one Colab ships)
    subprocess.check_call([sys.executable, "-m", "pip", "install", "-q", *TPU_INSTALL])
if IN_COLAB and importlib.util.find_spec("tfwb") is None:
    subprocess.check_call([sys.executable, "-m", "pip", "install", "-q",
                           "tfwb[gpu,profile] @ git+https://github.com/{slug}@{TFWB_REF}"])
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


def write_header(path: str, slug: str = REPO_SLUG) -> bool:
    """Write ``header_cells(path)`` into the notebook at ``path`` (its first two cells); True when it changed.

    Only those cells' sources change (load, modify, write back at once), so other cells
    edited at the same time elsewhere are kept as they are on disk.

    Raises:
        ValueError: when the notebook does not start with a markdown and a code cell.
    """
    with open(path, encoding="utf-8") as fh:
        nb = json.load(fh)
    cells = nb.get("cells", [])
    header = header_cells(path, slug)
    kinds = [c.get("cell_type") for c in cells[:len(header)]]
    if kinds != [kind for kind, _ in header]:
        raise ValueError(f"{path} starts with cells {kinds}; a chapter starts with {[k for k, _ in header]}")
    changed = False
    for cell, (_, source) in zip(cells, header):
        if "".join(cell.get("source", "")) != source:
            cell["source"] = source.splitlines(keepends=True)
            changed = True
    if changed:
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(json.dumps(nb, indent=1, ensure_ascii=False) + "\n")
    return changed


def main(argv: List[str]) -> int:
    """``python tools/chapter_files.py strip NOTEBOOK...`` or ``python tools/chapter_files.py header [NOTEBOOK...]``."""
    parser = argparse.ArgumentParser(prog="python tools/chapter_files.py", description="Keep the book's notebooks in shape.")
    sub = parser.add_subparsers(dest="command", required=True)
    strip = sub.add_parser("strip", help="drop outputs except those nbval compares (# NBVAL_CHECK_OUTPUT)")
    strip.add_argument("notebooks", nargs="+")
    header = sub.add_parser("header", help="write the badge and the Colab install cell (every chapter by default)")
    header.add_argument("notebooks", nargs="*")
    args = parser.parse_args(argv)
    if args.command == "strip":
        for p in args.notebooks:
            print(("stripped " if strip_file(p) else "unchanged ") + p)
    else:
        for p in args.notebooks or [c.path for c in CHAPTERS]:
            print(("rewrote the header of " if write_header(p) else "header unchanged: ") + p)
    return 0


if __name__ == "__main__":   # python tools/chapter_files.py {strip,header} ...
    sys.exit(main(sys.argv[1:]))
