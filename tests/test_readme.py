"""Every python and bash block in README.md runs as written, on its own.

Python blocks run in a fresh interpreter, bash blocks in ``bash -euo pipefail``, each
in an empty temporary folder with ``TFWB_FAST=1`` and this interpreter's ``bin/`` first
on ``PATH`` (so ``python`` is the environment the README's Quick start builds; the
README says to activate it). A block is skipped only when an HTML comment
``<!-- readme-test: skip (REASON) -->`` stands on the line before it, and only bash
blocks that install packages (pip, or the test command) or start JupyterLab may be skipped: the Quick start's two
commands are what ``.ci/run`` runs and ``tests/test_book.py`` checks.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
RUNNABLE = ("python", "bash")
SKIP = re.compile(r"<!-- readme-test: skip \((?P<reason>[^)]+)\) -->")
#: What a skipped block must do: install packages (pip, or the test command, which builds .venv and
#: .venv-colab) or start JupyterLab.
SKIPPABLE = re.compile(r"\bpip install\b|\bjupyter lab\b|\btests/run_all\.py\b")
#: tf.data's warning when a cache is read only in part (the next epoch then recomputes).
PARTIAL_CACHE_WARNING = "did not fully read the dataset being cached"
TIMEOUT_S = 900


@dataclass(frozen=True)
class Block:
    language: str
    code: str
    line: int                      # 1-based line of the opening fence
    skip: Optional[str]            # the reason, when marked skipped

    @property
    def id(self) -> str:
        return f"{self.language}-line{self.line}"


def blocks(text: str) -> List[Block]:
    """Fenced code blocks (indented ones too, as in list items), with their skip markers."""
    out = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        fence = re.match(r"^(\s*)```(\w*)\s*$", lines[i])
        if not fence:
            i += 1
            continue
        indent, language = fence.groups()
        body, j = [], i + 1
        while j < len(lines) and lines[j].strip() != "```":
            body.append(lines[j][len(indent):] if lines[j].startswith(indent) else lines[j])
            j += 1
        before = next((lines[k].strip() for k in range(i - 1, -1, -1) if lines[k].strip()), "")
        marker = SKIP.fullmatch(before)
        out.append(Block(language, "\n".join(body) + "\n", i + 1, marker.group("reason") if marker else None))
        i = j + 1
    return out


README_BLOCKS = blocks(README.read_text(encoding="utf-8"))
TO_RUN = [b for b in README_BLOCKS if b.language in RUNNABLE and b.skip is None]


def test_blocks_parser_finds_fences_markers_and_indented_blocks():
    text = ("intro\n<!-- readme-test: skip (starts a server) -->\n```bash\njupyter lab\n```\n"
            "- item:\n  ```python\n  print(1)\n  ```\n```\nplain\n```\n")
    found = blocks(text)
    assert [(b.language, b.code, b.line, b.skip) for b in found] == [
        ("bash", "jupyter lab\n", 3, "starts a server"),
        ("python", "print(1)\n", 7, None),
        ("", "plain\n", 10, None)]


def test_readme_has_blocks_to_run():
    languages = {b.language for b in TO_RUN}
    assert languages == {"python", "bash"}, languages


@pytest.mark.parametrize("block", [b for b in README_BLOCKS if b.skip], ids=lambda b: b.id)
def test_only_install_or_jupyterlab_blocks_are_skipped(block):
    assert block.language == "bash", f"README line {block.line}: only bash blocks may be skipped"
    assert SKIPPABLE.search(block.code), (
        f"README line {block.line} is marked skipped ({block.skip}) but neither installs packages nor "
        "starts JupyterLab: make it run as written instead")


def test_fences_use_a_known_language():
    for b in README_BLOCKS:
        assert b.language in RUNNABLE + ("text", ""), f"README line {b.line}: ```{b.language}"


def run_block(block: Block, cwd: Path) -> subprocess.CompletedProcess:
    # No TF_CPP_MIN_LOG_LEVEL: the reader has none, and TF's C++ warnings must show here too.
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "TF_CPP_MIN_LOG_LEVEL")}
    env.update(TFWB_FAST="1", MPLBACKEND="Agg",
               PATH=os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", ""))
    if block.language == "python":
        args = [sys.executable, "-c", block.code]
    else:
        args = ["bash", "-euo", "pipefail", "-c", block.code]
    return subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=TIMEOUT_S)


@pytest.mark.tf
@pytest.mark.parametrize("block", TO_RUN, ids=lambda b: b.id)
def test_block_runs_as_written(block, tmp_path):
    proc = run_block(block, tmp_path)
    said = proc.stdout + proc.stderr
    assert proc.returncode == 0, (f"README line {block.line} ({block.language}) exited {proc.returncode}:\n"
                                  f"{said[-4000:]}")
    assert "Traceback" not in said, said[-4000:]
    assert PARTIAL_CACHE_WARNING not in said, (
        f"README line {block.line}: TensorFlow warned that a cache was read only in part:\n{said[-4000:]}")
    if "tfwb.run(" in block.code or "tfwb run " in block.code:
        assert "median step" in proc.stdout, proc.stdout


SHOWN = [b for b in README_BLOCKS if b.language == "text" and b.code.startswith("$ python -m tfwb ")]


def test_readme_shows_command_line_output():
    assert SHOWN, "README.md shows no command-line session (```text starting with '$ python -m tfwb')"


@pytest.mark.parametrize("block", SHOWN, ids=lambda b: b.id)
def test_shown_command_line_output_is_what_it_prints(block, tmp_path):
    """A ```text block that starts ``$ python -m tfwb ...`` shows lines that command really prints."""
    command, *shown = block.code.splitlines()
    proc = run_block(Block("bash", command[2:] + "\n", block.line, None), tmp_path)
    said = (proc.stdout + proc.stderr).splitlines()
    for line in shown:
        assert line in said, f"README line {block.line}: {command!r} does not print {line!r}; it prints {said}"


def test_the_benchmarks_readme_lists_every_script_and_the_command_of_every_result():
    text = (ROOT / "benchmarks" / "README.md").read_text(encoding="utf-8")
    rows = [line for line in text.splitlines() if line.startswith("| ") and "](results/" in line]
    scripts = sorted(p.name for p in (ROOT / "benchmarks").glob("*.py"))
    assert [s for s in scripts if f"| `{s}` |" not in text] == []
    linked = {m for line in rows for m in re.findall(r"\]\(results/([^)]+)\)", line)}
    assert sorted(p.name for p in (ROOT / "benchmarks" / "results").iterdir()) == sorted(linked)
    assert all(re.search(r"\| `python benchmarks/\w+\.py[^`]*` \|$", line) for line in rows), rows
