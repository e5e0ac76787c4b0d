"""How long each chapter takes, first cell to last, at full size and in small mode.

Each chapter is executed with ``jupyter nbconvert --execute`` (a fresh kernel, the
chapter's own cells, nothing else), once in small mode (``TFWB_FAST=1``) and once at full size
(``TFWB_SIZE=full``, whatever the machine's step). The wall time of each run, the size the chapter actually chose and the full-size
``images`` step its setup cell measured are written to ``results/chapter_times.json`` and
``.md``, with the machine; the script prints the ``tfwb.book.CHAPTER_TIMES`` entries those
figures give (paste them into ``tfwb/book.py``).

Usage: python benchmarks/chapter_times.py [--mode small|full|both] [--chapters 00 03 …]
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tfwb import book, hardware  # noqa: E402

STEP = re.compile(r"a full-size images step takes ([0-9.]+) s")
SIZE = re.compile(r"size=\"auto\" means '(small|full)' here")


def setup_output(nb_path: Path) -> str:
    """The text the chapter's setup cell printed (the first cell that prints the size choice)."""
    nb = json.loads(nb_path.read_text(encoding="utf-8"))
    for cell in nb["cells"]:
        for out in cell.get("outputs", []):
            text = "".join(out.get("text", "")) if isinstance(out.get("text"), (list, str)) else ""
            if SIZE.search(text):
                return text
    return ""


def slowest_cells(nb_path: Path, top: int = 5) -> list:
    """The ``top`` slowest code cells (0-based index, seconds, first line), from nbconvert's timing metadata."""
    from datetime import datetime
    nb = json.loads(nb_path.read_text(encoding="utf-8"))
    out = []
    for i, cell in enumerate(nb["cells"]):
        t = cell.get("metadata", {}).get("execution", {})
        start, end = t.get("iopub.execute_input"), t.get("shell.execute_reply")
        if cell["cell_type"] == "code" and start and end:
            secs = (datetime.fromisoformat(end.replace("Z", "+00:00"))
                    - datetime.fromisoformat(start.replace("Z", "+00:00"))).total_seconds()
            first = "".join(cell["source"]).strip().splitlines()[0][:70] if cell["source"] else ""
            out.append((i, round(secs, 1), first))
    return sorted(out, key=lambda x: -x[1])[:top]


def run_chapter(chapter: book.Chapter, mode: str, timeout_s: int) -> dict:
    env = dict(os.environ)
    env.pop("TFWB_FAST", None)
    env.pop("TFWB_SIZE", None)
    if mode == "small":
        env["TFWB_FAST"] = "1"
    else:
        env["TFWB_SIZE"] = "full"      # full size whatever this machine's step: the time is what is measured
    jupyter = Path(sys.executable).with_name("jupyter")
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "out.ipynb"
        t0 = time.perf_counter()
        proc = subprocess.run([str(jupyter), "nbconvert", "--to", "notebook", "--execute",
                               f"--ExecutePreprocessor.timeout={timeout_s}", "--output", str(out),
                               str(ROOT / chapter.path)], cwd=ROOT / "notebooks", env=env,
                              capture_output=True, text=True)
        wall = time.perf_counter() - t0
        text = setup_output(out) if out.exists() else ""
        slowest = slowest_cells(out) if out.exists() else []
    step = STEP.search(text)
    size = SIZE.search(text)
    return {"chapter": chapter.number, "mode": mode, "ok": proc.returncode == 0, "wall_s": round(wall, 1),
            "size_chosen": size.group(1) if size else None,
            "step_s": float(step.group(1)) if step else None, "slowest_cells": slowest,
            "error": None if proc.returncode == 0 else proc.stderr[-2000:]}


def write(runs: list, path: Path, command: str) -> dict:
    """Write ``runs`` to ``path`` (JSON) and its ``.md`` table; print the ``CHAPTER_TIMES`` entries they give."""
    runs.sort(key=lambda r: (r["chapter"], r["mode"]))
    result = {"benchmark": "chapter times", "command": command, "runs": runs}
    path.write_text(json.dumps(result, indent=2) + "\n")
    lines = ["# Chapter times: first cell to last, `jupyter nbconvert --execute`", "",
             f"Command: `{result['command']}` (each row keeps the machine and date of its own run).", "",
             "| chapter | mode | wall | size chosen | full-size step | ok | slowest cells (index: s) | machine | date |",
             "|---|---|---:|---|---:|---|---|---|---|"]
    for r in runs:
        slow = "; ".join(f"{i}: {s:.0f} s" for i, s, *_ in (r.get("slowest_cells") or [])[:3])
        lines.append(f"| {r['chapter']} | {r['mode']} | {r['wall_s']:.0f} s | {r['size_chosen']} | "
                     f"{r['step_s'] if r['step_s'] is not None else '—'} | {r['ok']} | {slow or '—'} | "
                     f"{r['machine']} | {r['date']} |")
    path.with_suffix(".md").write_text("\n".join(lines) + "\n")
    by = {(r["chapter"], r["mode"]): r for r in runs}
    print("\nCHAPTER_TIMES entries (tfwb/book.py):")
    for c in book.CHAPTERS:
        full, small = by.get((c.number, "full")), by.get((c.number, "small"))
        if full and small and full["ok"] and small["ok"] and full["size_chosen"] == "full" and full["step_s"]:
            print(f'    "{c.number}": ChapterTime({full["wall_s"]}, {small["wall_s"]}, {full["step_s"]}, '
                  f'{full["machine"]!r}),')
    return result


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mode", default="both", choices=("small", "full", "both"))
    ap.add_argument("--chapters", nargs="*", default=[c.number for c in book.CHAPTERS])
    ap.add_argument("--timeout", type=int, default=1800, help="per-cell timeout, seconds")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "chapter_times.json"))
    args = ap.parse_args(argv)
    modes = ("small", "full") if args.mode == "both" else (args.mode,)
    machine = hardware.describe(hardware.detect())
    path = Path(args.out)
    previous = json.loads(path.read_text()) if path.exists() else {"runs": []}
    runs = [r for r in previous.get("runs", [])
            if not (r["chapter"] in args.chapters and r["mode"] in modes)]
    for number in args.chapters:
        chapter = book.find_chapter(number)
        for mode in modes:
            r = run_chapter(chapter, mode, args.timeout)
            r["machine"] = machine
            r["date"] = time.strftime("%Y-%m-%d %H:%M")
            runs.append(r)
            print(f"chapter {r['chapter']} {mode}: {r['wall_s']:.0f} s, ok={r['ok']}, size chosen "
                  f"{r['size_chosen']}, full-size step {r['step_s']}", flush=True)
    result = write(runs, path, "python benchmarks/chapter_times.py " +
                   " ".join(argv if argv is not None else sys.argv[1:]))
    return result


if __name__ == "__main__":
    main()
