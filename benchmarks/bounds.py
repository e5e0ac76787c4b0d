"""Every suggestion's bound against the gain it measured, from each chapter's Workbench baseline.

Issue 19, item 4: for each chapter's Workbench baseline (the configs the chapters' Workbench
cells start from, at small size), run the baseline, diagnose it (``tfwb.analysis.diagnosis``), apply each
suggestion in turn (one run each, same size and steps, only that knob changed), and score the
measured gain (baseline median step over the new one) against the suggestion's bound
(``tfwb.analysis.diagnosis.score_bound``) with the run-to-run noise band (``tfwb.analysis.noise.noise_band`` of
all the runs here: the default +-10 % unless repeats taught it more).

Usage: python benchmarks/bounds.py [--chapters 00,02] [--out benchmarks/results/bounds.json]
(the Markdown goes next to the JSON, same name, ``.md``). Results are written after each chapter.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import sys
import time

import tfwb
from tfwb.analysis.noise import noise_band
from tfwb.analysis.pairs import compare_runs
from tfwb.config import RunConfig
from tfwb.analysis.diagnosis import diagnose, score_bound

#: Each chapter's Workbench baseline at small size (read from notebooks/NN_*.ipynb, their
#: ``tfwb.Workbench(baseline=...)`` cells, with the small-mode step counts).
BASELINES = {
    "00": RunConfig(batch_size=32, steps=20, warmup_steps=3),
    "01": RunConfig(batch_size=32, steps=30, warmup_steps=3),
    "02": RunConfig(workload="mlp", data_source="memory", batch_size=64, steps=20, warmup_steps=3),
    "03": RunConfig(workload="text", data_source="memory", batch_size=64, steps=20, warmup_steps=3),
    "04": RunConfig(workload="mlp", batch_size=64, warmup_steps=2, steps=40, cache=True, prefetch=True),
    "05": RunConfig(workload="mlp", data_source="memory", batch_size=64, steps=20, warmup_steps=3),
    "06": RunConfig(workload="images", batch_size=32, steps=10, warmup_steps=2),
    "07": RunConfig(workload="cifar10", batch_size=64, steps=20, warmup_steps=2),
}


def _x(v):
    return "n/a" if v is None else f"{v:.2f}x"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--chapters", default=",".join(BASELINES))
    ap.add_argument("--out", default="benchmarks/results/bounds.json")
    args = ap.parse_args()
    started, t0 = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"), time.time()
    load0 = os.getloadavg()[0]
    all_results, rows = [], []
    for chapter in args.chapters.split(","):
        base_cfg = BASELINES[chapter].replace(size="small", label=f"chapter {chapter} baseline")
        base = tfwb.run(base_cfg)
        all_results.append(base)
        d = diagnose(base)
        if not base.ok:
            rows.append({"chapter": chapter, "suggestion": f"baseline {base.status}: {base.error}", "bound": None,
                         "bound_text": "", "measured": None, "score": "", "exceeded": False})
        if base.ok and not d.suggestions:
            rows.append({"chapter": chapter, "suggestion": f"none ({d.headline})", "bound": None, "bound_text": "",
                         "measured": None, "score": "", "exceeded": False, "strict": True,
                         "baseline_input_wait": base.input_wait_fraction, "baseline_mfu": base.mfu})
        for (knob, value, _why), b in zip(d.suggestions, d.bounds):
            run = tfwb.run(base_cfg.replace(**{knob: value}, label=f"chapter {chapter}: {knob}={value!r}"))
            all_results.append(run)
            cmp = compare_runs(base, run) if run.ok else None
            measured = cmp.speedup if cmp is not None else None
            rows.append({"chapter": chapter, "suggestion": f"{knob}={value!r}", "bound": b.speedup,
                         "bound_text": b.text, "strict": b.strict, "measured": measured, "verdict": cmp.verdict if cmp else run.status,
                         "baseline_ms": base.median_step_s * 1e3 if base.median_step_s else None,
                         "run_ms": run.median_step_s * 1e3 if run.median_step_s else None, "score": "",
                         "exceeded": False, "baseline_input_wait": base.input_wait_fraction,
                         "baseline_mfu": base.mfu})
        noise = noise_band(all_results)
        for row in rows:
            if row["measured"]:
                row["score"] = score_bound(row["bound"], row["measured"], noise.pct / 100, strict=row["strict"])
                row["exceeded"] = (row["strict"] and row["bound"] is not None
                                   and row["measured"] > row["bound"] * (1 + noise.pct / 100))
        _write(args.out, rows, noise, started, time.time() - t0, load0)
    return 0


def _write(out: str, rows, noise, started: str, seconds: float, load0: float) -> None:
    meta = {"started": started, "seconds": round(seconds, 1), "python": platform.python_version(),
            "machine": platform.machine(), "cpu_count": os.cpu_count(), "load_start": load0,
            "load_end": os.getloadavg()[0], "noise": noise.text(), "command": " ".join(sys.argv)}
    with open(out, "w") as f:
        json.dump({"meta": meta, "rows": rows}, f, indent=1, default=str)
    lines = ["# Bounds against measured gains (issue 19, item 4)", "",
             f"Each chapter's Workbench baseline at small size, then each suggestion its diagnosis made, one run "
             f"each, only that knob changed. Measured = baseline median step / the suggestion's. Noise band: "
             f"{noise.text()}. Started {started}, {seconds:.0f} s; {os.cpu_count()} CPU cores, 1-minute load "
             f"average {load0:.1f} at the start, {os.getloadavg()[0]:.1f} at the end (shared machine: single runs, "
             "so read small gains as noise). Command: `python benchmarks/bounds.py`.", "",
             "| chapter | suggestion | bound | measured | verdict | score | bound's reason |",
             "|---|---|---:|---:|---|---|---|"]
    for r in rows:
        flag = " **above the bound**" if r["exceeded"] else ""
        lines.append(f"| {r['chapter']} | {r['suggestion']} | {_x(r['bound'])} | {_x(r['measured'])} | "
                     f"{r.get('verdict', '')} | {r['score']}{flag} | {r['bound_text']} |")
    with open(os.path.splitext(out)[0] + ".md", "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    sys.exit(main())
