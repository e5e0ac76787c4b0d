"""Rewrite README.md's knob table from ``python -m tfwb knobs --markdown``.

tests/test_cli.py fails when the two differ; after adding or changing a knob run

    .venv/bin/python tools/readme_knobs.py

and commit README.md with the knob. Only the text between ``<!-- knobs: begin ... -->``
and ``<!-- knobs: end -->`` changes.
"""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"
BLOCK = re.compile(r"(<!-- knobs: begin[^>]*-->\n)(.*?)(\n<!-- knobs: end -->)", re.S)


def main() -> int:
    # A fresh process, as the test does: only the built-in workloads are registered.
    table = subprocess.run([sys.executable, "-m", "tfwb", "knobs", "--markdown"], capture_output=True,
                           text=True, check=True, cwd=README.parent).stdout.strip()
    text = README.read_text(encoding="utf-8")
    if not BLOCK.search(text):
        sys.exit("readme_knobs: README.md has no <!-- knobs: begin --> ... <!-- knobs: end --> block")
    new = BLOCK.sub(lambda m: m.group(1) + table + m.group(3), text, count=1)
    if new != text:
        README.write_text(new, encoding="utf-8")
    print("readme_knobs: README.md's knob table " + ("updated" if new != text else "was up to date"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
