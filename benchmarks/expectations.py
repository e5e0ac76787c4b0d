"""Write what each knob is expected to do on each described machine (no measuring).

The table comes from ``tfwb.expect.table()`` over ``tfwb.hardware.DESCRIBED``: the same
rules the chapters use to state an expectation on the reader's machine. Pure: no
TensorFlow, runs anywhere in a second.

Usage:
    python benchmarks/expectations.py [--out PATH]   # default benchmarks/results/expectations.md
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import List, Optional

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tfwb import expect  # noqa: E402 - pure: no TensorFlow


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "expectations.md"))
    args = parser.parse_args(argv)
    text = expect.table()
    Path(args.out).write_text(text, encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
