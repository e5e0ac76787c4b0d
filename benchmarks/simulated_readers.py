"""Two simulated readers' scores across the book in small mode, and each chapter's nbval time.

Every chapter asks the reader for a prediction (``tfwb.ask``) before some of its experiments and
scores it against the chapter's own verdict. This script runs every chapter under nbval exactly as
the chapters leg of ``tests/run_all.py`` does (``TFWB_FAST=1``, ``--nbval-lax``, a kernel in an
empty folder), from a snapshot of a commit (``git archive``, so editing the checkout meanwhile
changes nothing), with an IPython startup file in the kernel that records, for every box the
chapter scores, what it was about, the book's expectation and the measured verdict. Offline, it
then scores two simulated readers on those verdicts with ``tfwb.prediction`` and sums them up with
``tfwb.calibration``:

- **always faster**: predicts "faster, 1.5-3x" at 80 % before every experiment;
- **the book**: predicts the book's own expectation for this machine (``tfwb.expect``'s direction:
  faster, slower, or no difference), with no range, since the book states none; where the book
  states no direction, or only "not slower" / "not faster", this reader makes no prediction.

A verdict that cannot decide ("cannot tell") scores nobody (pending), as in the book.

With ``--baseline-ref REF`` each chapter is also run at that commit right before (the chapters
without the prediction cells, say), so the two nbval times of each chapter are taken side by side.

Writes ``benchmarks/results/simulated_readers_<cpu kind>.json`` and ``.md``.

Usage: python benchmarks/simulated_readers.py [--ref HEAD] [--baseline-ref REF] [--chapters 00 03 ...]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Dict, List, Optional

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tfwb import book, hardware  # noqa: E402
from tfwb.prediction import FASTER, NO_DIFFERENCE, SLOWER, predict  # noqa: E402
from tfwb.scorecard import calibration  # noqa: E402

#: The kernel's startup file: record every box the chapter scores (about, expectation, verdict).
STARTUP = '''
import json, os
import tfwb.ui.prediction_box as _box

_score = _box.PredictionBox.score


def _recording_score(self, verdict):
    v = verdict if hasattr(verdict, "verdict") or verdict is None else getattr(verdict, "comparison", verdict)
    e = self.expectation
    record = {"about": self.about, "expected": getattr(e, "expected", None),
              "expectation": None if e is None else str(e),
              "verdict": getattr(v, "verdict", None), "speedup": getattr(v, "speedup", None),
              "interleaved": getattr(v, "rounds", None) is not None}
    with open(os.environ["TFWB_SIMULATED_LOG"], "a") as f:
        f.write(json.dumps(record, default=str) + "\\n")
    return _score(self, verdict)


_box.PredictionBox.score = _recording_score
'''

#: The book's direction -> the prediction the "book" reader makes (None: it makes none).
BOOK_DIRECTION = {"faster": FASTER, "slower": SLOWER, "no significant difference": NO_DIFFERENCE}


def cpu_kind(hw: Dict[str, Any]) -> str:
    """``amx``, ``avx512``, ``avx2``, or the machine's architecture: the results file's suffix."""
    flags = set(getattr(hw, "cpu_flags", None) or (hw.get("cpu_flags") if isinstance(hw, dict) else None) or ())
    for kind, flag in (("amx", "amx_bf16"), ("avx512", "avx512f"), ("avx2", "avx2")):
        if flag in flags:
            return kind
    return os.uname().machine


def snapshot(ref: str, into: Path) -> Path:
    """The repository at ``ref`` (``git archive``), unpacked under ``into``."""
    into.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", ref], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def run_chapter(tree: Path, chapter: book.Chapter, log: Optional[Path], timeout_s: int) -> Dict[str, Any]:
    """One chapter under nbval in ``tree``; with ``log``, the recording startup file in its kernel."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "TFWB_SIZE")}
    env.update(TFWB_FAST="1", PYTHONPATH=str(tree))
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    with tempfile.TemporaryDirectory() as ipython_dir:
        if log is not None:
            startup = Path(ipython_dir) / "profile_default" / "startup"
            startup.mkdir(parents=True)
            (startup / "00-record-predictions.py").write_text(STARTUP)
            env.update(IPYTHONDIR=ipython_dir, TFWB_SIMULATED_LOG=str(log))
        t0 = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--import-mode=importlib",
                               "--nbval-lax", "--nbval-current-env", "--nbval-cell-timeout=900", chapter.path],
                              cwd=tree, env=env, capture_output=True, text=True, timeout=timeout_s)
        wall = time.perf_counter() - t0
    tail = (proc.stdout.strip().splitlines() or [""])[-1]
    return {"ok": proc.returncode == 0, "wall_s": round(wall, 1), "pytest": tail,
            "load_after": round(os.getloadavg()[0], 2),
            "error": None if proc.returncode == 0 else proc.stdout[-3000:]}


def readers_scores(records: List[Dict[str, Any]]) -> Dict[str, Any]:
    """Score the two simulated readers on the recorded verdicts."""
    scores: Dict[str, list] = {"always faster, 1.5-3x": [], "the book": []}
    abstained = 0
    for r in records:
        if r["verdict"] is None or r["speedup"] is None:
            continue                                    # nothing measured (small mode left it out)
        verdict = SimpleNamespace(verdict=r["verdict"], speedup=float(r["speedup"]),
                                  rounds=1 if r["interleaved"] else None)
        scores["always faster, 1.5-3x"].append(
            predict(FASTER, between=(1.5, 3.0), confidence=0.8, about=r["about"]).score(verdict))
        direction = BOOK_DIRECTION.get(r["expected"])
        if direction is None:
            abstained += 1
        else:
            scores["the book"].append(predict(direction, about=r["about"]).score(verdict))
    out: Dict[str, Any] = {"book_made_no_prediction": abstained}
    for name, s in scores.items():
        cal = calibration(s)
        out[name] = {"text": cal.text(), "predictions": len(cal.scores), "decided": len(cal.decided),
                     "hit_rate": cal.hit_rate, "coverage": {str(k): v for k, v in cal.coverage().items()},
                     "mean_interval_score": cal.mean_interval_score, "misses_by_knob": cal.misses()}
    return out


def write(result: Dict[str, Any], path: Path) -> None:
    path.with_suffix(".json").write_text(json.dumps(result, indent=1, default=str) + "\n")
    lines = [f"# Simulated readers across the book (small mode), {result['machine']}", "",
             f"Command: `{result['command']}` ({result['date']}). Each chapter ran under nbval as the chapters leg "
             "runs it; the boxes' verdicts were recorded in the kernel and the two readers scored offline.", "",
             "| chapter | boxes scored | measured | nbval (s) | ok | nbval at baseline ref (s) | ok | load after |",
             "|---|---:|---:|---:|---|---:|---|---:|"]
    for c in result["chapters"]:
        base = c.get("baseline") or {}
        lines.append(f"| {c['chapter']} | {c['boxes']} | {c['measured']} | {c['run']['wall_s']} | {c['run']['ok']} | "
                     f"{base.get('wall_s', '—')} | {base.get('ok', '—')} | {c['run']['load_after']} |")
    lines += ["", f"The book's reader made no prediction where the book states no direction (or only "
                  f"'not slower' / 'not faster'): {result['scores']['book_made_no_prediction']} experiments.", ""]
    for name in ("always faster, 1.5-3x", "the book"):
        lines += [f"## {name}", "", "```", result["scores"][name]["text"], "```", ""]
    lines += ["## Every recorded box", "", "| chapter | about | the book expects | verdict | speed-up |",
              "|---|---|---|---|---:|"]
    for r in result["records"]:
        sp = f"{r['speedup']:.3g}" if isinstance(r["speedup"], (int, float)) else "—"
        lines.append(f"| {r['chapter']} | {r['about']} | {r['expected'] or 'no direction'} | {r['verdict'] or '—'} | {sp} |")
    path.with_suffix(".md").write_text("\n".join(lines) + "\n")


def main(argv: Optional[List[str]] = None) -> Dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ref", default="HEAD", help="the commit whose chapters run (default HEAD)")
    p.add_argument("--baseline-ref", default=None, help="also time each chapter at this commit, right before")
    p.add_argument("--chapters", nargs="*", default=None)
    p.add_argument("--timeout-s", type=int, default=1800)
    p.add_argument("--out", default=None, help="results path without suffix")
    args = p.parse_args(argv)
    hw = hardware.detect()
    out = Path(args.out) if args.out else ROOT / "benchmarks" / "results" / f"simulated_readers_{cpu_kind(hw)}"
    chapters = [c for c in book.CHAPTERS if args.chapters is None or c.number in args.chapters]
    records: List[Dict[str, Any]] = []
    done: List[Dict[str, Any]] = []
    result: Dict[str, Any] = {}
    command = ("python benchmarks/simulated_readers.py " + " ".join(argv if argv is not None else sys.argv[1:])).strip()
    with tempfile.TemporaryDirectory(prefix="tfwb-readers-") as tmp:
        tree = snapshot(args.ref, Path(tmp) / "ref")
        base_tree = snapshot(args.baseline_ref, Path(tmp) / "base") if args.baseline_ref else None
        for chapter in chapters:
            entry: Dict[str, Any] = {"chapter": chapter.number}
            if base_tree is not None:
                entry["baseline"] = run_chapter(base_tree, chapter, None, args.timeout_s)
            log = Path(tmp) / f"{chapter.number}.jsonl"
            log.touch()
            entry["run"] = run_chapter(tree, chapter, log, args.timeout_s)
            mine = [dict(json.loads(line), chapter=chapter.number) for line in log.read_text().splitlines() if line]
            entry["boxes"], entry["measured"] = len(mine), sum(r["verdict"] is not None for r in mine)
            records += mine
            done.append(entry)
            print(f"{chapter.number}: {entry['boxes']} boxes, {entry['run']['wall_s']} s ({entry['run']['pytest']})"
                  + (f"; at {args.baseline_ref}: {entry['baseline']['wall_s']} s" if base_tree else ""), flush=True)
            result = {"machine": hardware.describe(hw), "date": time.strftime("%Y-%m-%d %H:%M"), "command": command,
                      "ref": args.ref, "baseline_ref": args.baseline_ref, "chapters": done, "records": records,
                      "scores": readers_scores(records)}
            write(result, out)                  # after every chapter: a long run stopped early keeps what it did
    for name in ("always faster, 1.5-3x", "the book"):
        print(f"\n{name}:\n{result['scores'][name]['text']}" if result else "no chapter ran")
    return result


if __name__ == "__main__":
    main()
