"""MFU of each built-in workload at full size: achieved model FLOP/s against this machine's measured peak.

Each workload runs once with its data staged in memory (so the input pipeline is not what
is measured), its default batch, float32, then ``mixed_bfloat16``. The figures are the
run's own (``RunResult.model_flops_per_step``, ``achieved_flops_per_s``, ``mfu``,
``datasheet_mfu``); the peak comes from ``tfwb.measure_peak`` (cached per machine).

Usage: python benchmarks/mfu.py [--steps 12] [--size full] [--out benchmarks/results/mfu.json]
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import tfwb  # noqa: E402
from tfwb import RunConfig, hardware  # noqa: E402
from tfwb.workloads import workload_names  # noqa: E402


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--size", default="full", choices=("small", "full"))
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "mfu.json"))
    args = ap.parse_args(argv)
    t0, load0 = time.time(), os.getloadavg()[0]
    rows = []
    for name in workload_names():
        for policy in ("off", "mixed_bfloat16"):
            r = tfwb.run(RunConfig(workload=name, size=args.size, data_source="memory", steps=args.steps,
                                   warmup_steps=2, mixed_precision=policy, label=f"{name} {policy}"))
            rows.append({"workload": name, "mixed_precision": policy, "status": r.status,
                         "median_step_ms": r.median_step_s * 1e3 if r.median_step_s else None,
                         "model_flops_per_step": r.model_flops_per_step,
                         "achieved_flops_per_s": r.achieved_flops_per_s, "peak_flops_per_s": r.peak_flops_per_s,
                         "mfu": r.mfu, "datasheet_mfu": r.datasheet_mfu, "mfu_text": r.mfu_text()})
            print(f"{name:8s} {policy:15s} {r.status}: {r.mfu_text()}", flush=True)
    result = {"benchmark": "MFU per built-in workload", "size": args.size, "steps": args.steps,
              "machine": hardware.describe(hardware.detect()), "seconds": round(time.time() - t0, 1),
              "load_start": load0, "load_end": os.getloadavg()[0],
              "command": "python benchmarks/mfu.py " + " ".join(argv if argv is not None else sys.argv[1:]),
              "rows": rows}
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    lines = [f"# MFU per built-in workload ({args.size} size, data in memory)", "",
             f"Machine: {result['machine']}. Command: `{result['command']}` ({result['seconds']:.0f} s; load "
             f"average {load0:.1f} at the start, {result['load_end']:.1f} at the end).", "",
             "| workload | policy | median step | model FLOPs/step | achieved | measured peak | MFU |",
             "|---|---|---:|---:|---:|---:|---|"]
    for r in rows:
        fmt = lambda v, u: "—" if v is None else f"{v / 1e9:.3g} G{u}"  # noqa: E731
        lines.append(f"| {r['workload']} | {r['mixed_precision']} | "
                     f"{'—' if r['median_step_ms'] is None else format(r['median_step_ms'], '.1f') + ' ms'} | "
                     f"{fmt(r['model_flops_per_step'], 'FLOP')} | {fmt(r['achieved_flops_per_s'], 'FLOP/s')} | "
                     f"{fmt(r['peak_flops_per_s'], 'FLOP/s')} | {r['mfu_text'] or r['status']} |")
    Path(args.out).with_suffix(".md").write_text("\n".join(lines) + "\n")
    return result


if __name__ == "__main__":
    main()
