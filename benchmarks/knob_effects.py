"""Each knob's effect on this machine, measured interleaved, beside what tfwb's rule expected.

For every (workload, knob change) pair: the rule's expectation on this machine is stated first
(``tfwb.expect.change``, the sentence a chapter prints), then the change is measured against the
workload's start (data in memory for the compute knobs, files for the input knobs; every other knob
off) with ``tfwb.compare_interleaved``, and the two are set side by side: agreed, did NOT agree, or
not judged (the rule states no direction, or the rounds did not decide). The machine is named from
``tfwb.hardware`` (model and the flags that matter), so a file of results is a measurement of one
CPU kind: keep one per kind under ``benchmarks/results/knob_effects_<kind>.{json,md}``. The rules read
the kept figures from ``tfwb.advice.measured`` (one row per kind, change and workload, naming its file):
a CPU rule states a direction only where that table has one, so a new kind's file is added there too.

Usage:
    python benchmarks/knob_effects.py [--size small] [--rounds 6] [--workloads images,cifar10,mlp,text]
                                      [--knobs precision,xla,spe,input] [--out benchmarks/results/knob_effects_avx2]
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Dict, List, Optional, Tuple

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

#: Groups of changes (name -> the knob settings it changes), each against the start.
CHANGES: Dict[str, List[Tuple[str, dict]]] = {
    "precision": [("mixed_bfloat16", {"mixed_precision": "mixed_bfloat16"}),
                  ("mixed_float16", {"mixed_precision": "mixed_float16"})],
    "xla": [("jit_compile", {"jit_compile": True})],
    "spe": [("steps_per_execution=8", {"steps_per_execution": 8})],
    "input": [("prefetch", {"prefetch": True}), ("cache", {"cache": True}),
              ("parallel_map", {"parallel_map": True})],
}
INPUT_GROUPS = ("input",)


def start_config(workload: str, group: str, size: str):
    """The start a change is measured against: compute knobs on data in memory, input knobs on files."""
    from tfwb import RunConfig

    source = {} if group in INPUT_GROUPS else {"data_source": "memory"}
    return RunConfig(workload=workload, size=size, **source)


def measure(workload: str, group: str, name: str, change: dict, size: str, rounds: int) -> dict:
    import tfwb

    start = start_config(workload, group, size)
    hw = tfwb.detect_hardware()                       # TensorFlow's view: the device the step runs on
    expected = tfwb.expect.change(hw, start, **change)
    row = {"workload": workload, "change": name, "expected": expected.expected or "no fixed direction",
           "why": str(expected)}
    began = time.perf_counter()
    try:
        cmp = tfwb.compare_interleaved(start, start.replace(**change), rounds=rounds)
    except (ValueError, RuntimeError) as e:            # a knob this machine cannot honour, a failed run
        return {**row, "measured": f"not measured: {e}", "result": "not measured",
                "seconds": round(time.perf_counter() - began, 1)}
    check = expected.check(cmp)                       # the AB a chapter prints: "agreed" / "did NOT agree"
    result = "not judged" if check.agreed is None else "agreed" if check.agreed else "did NOT agree"
    return {**row, "measured": cmp.text(), "speedup": cmp.speedup, "low": cmp.low, "high": cmp.high,
            "rounds": cmp.rounds, "verdict": cmp.verdict, "result": result,
            "seconds": round(time.perf_counter() - began, 1)}


def markdown(machine: str, rows: List[dict], command: str, load: Optional[dict], cores: Optional[int] = None,
             note: str = "") -> str:
    """The results as Markdown; ``load`` None where the source recorded none, ``note`` a paragraph above the table."""
    cores = cores or os.cpu_count()
    lines = [f"# Knob effects on {machine}", "", f"Command: `{command}`", ""]
    if note:
        lines += [note, ""]
    if load:
        lines += [f"Load average (1 min) at the start {load['at_start']}, at the last row {load['now']} "
                  f"on {cores} cores: a load above the core count means other work ran beside it.", ""]
    lines += ["| workload | change | expected (the rule, stated first) | measured (interleaved) | result |",
              "|---|---|---|---|---|"]
    lines += [f"| {r['workload']} | {r['change']} | {r['expected']} | {r['measured']} | {r['result']} |" for r in rows]
    return "\n".join(lines) + "\n"


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", default="small", choices=("small", "full"))
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--workloads", default="images,cifar10,mlp,text")
    parser.add_argument("--knobs", default=",".join(CHANGES), help=f"groups of changes: {', '.join(CHANGES)}")
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "knob_effects"))
    args = parser.parse_args(argv)
    unknown = [g for g in args.knobs.split(",") if g not in CHANGES]
    if unknown:
        parser.error(f"--knobs {','.join(unknown)}: not a group; allowed: {', '.join(CHANGES)}")
    import tfwb
    from tfwb import hardware

    from tfwb.advice import measured

    hw = tfwb.detect_hardware()
    machine = hardware.describe(hw)
    kind = measured.cpu_kind(hw)
    rows = []
    load_before = os.getloadavg()
    for workload in args.workloads.split(","):
        for group in args.knobs.split(","):
            for name, change in CHANGES[group]:
                rows.append(measure(workload, group, name, change, args.size, args.rounds))
                print(f"{workload:8s} {name:22s} expected {rows[-1]['expected']:20s} {rows[-1]['measured']}"
                      f" -> {rows[-1]['result']}", flush=True)
                out = {"machine": machine, "cpu_kind": kind, "cpu_model": hw.cpu_model, "cpu_flags": list(hw.cpu_flags),
                       "load_average_1min": {"at_start": round(load_before[0], 2),
                                             "now": round(os.getloadavg()[0], 2)},
                       "command": "python " + " ".join([os.path.relpath(__file__, ROOT)] + sys.argv[1:]),
                       "rows": rows}
                Path(args.out + ".json").write_text(json.dumps(out, indent=1), encoding="utf-8")
                Path(args.out + ".md").write_text(markdown(machine, rows, out["command"], out["load_average_1min"]),
                                                  encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
