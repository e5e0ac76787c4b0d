"""Chapter 01's headline figures at full size: best pipeline vs the naive generator and vs the ceiling.

Three configurations of the ``images`` workload, same model, same batch size, the
default storage latency of the size:

- naive: ``data_source="generator"`` with every pipeline knob off (a Python
  generator reads and decodes one file after another, no overlap);
- best: ``data_source="files"`` with every pipeline knob on (interleaved reads,
  parallel decode, cache in memory, shuffle, vectorized augmentation, prefetch);
- ceiling: ``data_source="memory"`` (decoded, augmented batches staged in memory).

They run in rounds (order rotated each round, so drift and warm caches hit all
alike), every step timed by ``tfwb.run``; each figure is a median of the pooled
measured steps, and the ratios are of those medians. Figures to reach: best vs
naive >= 4x; best vs ceiling >= 0.95 (ceiling median / best median) with the best
pipeline's input wait < 5 % of its step time (the profiler's "not input-bound").

Usage: python benchmarks/pipeline.py [--size full] [--rounds 3] [--steps 30] [--naive-steps 12]
       [--batch-size 64] [--out benchmarks/results/pipeline]   (writes .json and .md)
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import sys
import time

import tfwb.tf  # noqa: F401  (quiet TF import)
import tfwb
from tfwb import RunConfig, hardware, stats
import tfwb.tf.runner.pipeline as tfdata
from tfwb.tf.workloads.images import storage_latency_s

GOAL_SPEEDUP = 4.0
GOAL_FRACTION = 0.95
GOAL_INPUT_WAIT = 0.05


def configs(size: str, batch_size: int, steps: int, naive_steps: int) -> dict:
    base = RunConfig(size=size, batch_size=batch_size, steps=steps, warmup_steps=5)
    return {
        "naive": base.replace(data_source="generator", steps=naive_steps, label="naive generator"),
        "best": base.replace(prefetch=True, parallel_map=True, interleave=True, cache=True,
                             vectorized_map=True, shuffle_buffer=1024, label="best pipeline"),
        "ceiling": base.replace(data_source="memory", label="memory ceiling"),
    }


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", default="full", choices=("small", "full"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--naive-steps", type=int, default=12)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--out", default="benchmarks/results/pipeline")
    args = ap.parse_args(argv)
    cfgs = configs(args.size, args.batch_size, args.steps, args.naive_steps)
    names = list(cfgs)
    times = {n: [] for n in names}
    waits = {n: [] for n in names}
    per_round = []
    t_start = time.perf_counter()
    for r in range(args.rounds):
        order = names[r % len(names):] + names[:r % len(names)]
        medians = {}
        for name in order:
            result = tfwb.run(cfgs[name])
            if not result.ok:
                raise SystemExit(f"{name} failed: {result.error}")
            times[name].extend(result.step_times_s)
            waits[name].extend(result.input_wait_s)
            medians[name] = result.median_step_s
            print(f"round {r + 1} {name:8s} {result.summary()}", flush=True)
        per_round.append({"order": order, "median_step_ms": {n: m * 1e3 for n, m in medians.items()},
                          "best_vs_naive": medians["naive"] / medians["best"],
                          "best_of_ceiling": medians["ceiling"] / medians["best"]})
    med = {n: stats.median(times[n]) for n in names}
    spread = {n: stats.iqr(times[n]) for n in names}
    wait = {n: sum(waits[n]) / sum(times[n]) for n in names}
    speedup = med["naive"] / med["best"]
    fraction = med["ceiling"] / med["best"]
    cmp_best_ceiling = stats.compare(times["ceiling"], times["best"])
    machine = hardware.describe(hardware.detect())
    result = {
        "benchmark": "input pipeline: best vs naive vs ceiling",
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": machine, "python": platform.python_version(),
        "tensorflow": __import__("tensorflow").__version__,
        "command": " ".join(["python benchmarks/pipeline.py", *(argv if argv is not None else sys.argv[1:])]),
        "size": args.size, "batch_size": args.batch_size, "rounds": args.rounds,
        "storage_latency_ms": storage_latency_s(cfgs["best"]) * 1e3,
        "configs": {n: c.to_dict() for n, c in cfgs.items()},
        "measured_steps": {n: len(times[n]) for n in names},
        "median_step_ms": {n: med[n] * 1e3 for n in names},
        "iqr_step_ms": {n: [q * 1e3 for q in spread[n]] for n in names},
        "input_wait_fraction": wait,
        "best_vs_naive": speedup,
        "best_of_ceiling": fraction,
        "best_vs_ceiling_verdict": cmp_best_ceiling.text(),
        "per_round": per_round,
        "goals": {"best_vs_naive >= 4": speedup >= GOAL_SPEEDUP,
                  "best_of_ceiling >= 0.95": fraction >= GOAL_FRACTION,
                  "best input wait < 5%": wait["best"] < GOAL_INPUT_WAIT},
        "wall_s": time.perf_counter() - t_start,
    }
    print(f"\nbest vs naive: {speedup:.2f}x; best / ceiling: {fraction:.3f} "
          f"({cmp_best_ceiling.text()}); best input wait {wait['best']:.1%}; on {machine}")
    if args.out:
        os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
        with open(args.out + ".json", "w") as fh:
            json.dump(result, fh, indent=2)
        with open(args.out + ".md", "w") as fh:
            fh.write(markdown(result))
    return result


def markdown(r: dict) -> str:
    rows = [f"| {n} | {r['median_step_ms'][n]:.1f} | {r['iqr_step_ms'][n][0]:.1f}-{r['iqr_step_ms'][n][1]:.1f} "
            f"| {r['input_wait_fraction'][n]:.1%} | {r['measured_steps'][n]} |" for n in r["median_step_ms"]]
    goals = "\n".join(f"- {k}: {'met' if v else 'NOT met'}" for k, v in r["goals"].items())
    rounds = "\n".join(f"- round {i + 1} ({', '.join(p['order'])}): best vs naive {p['best_vs_naive']:.2f}x, "
                       f"best / ceiling {p['best_of_ceiling']:.3f}" for i, p in enumerate(r["per_round"]))
    return f"""# Input pipeline: best vs naive vs ceiling

Machine: {r['machine']}; Python {r['python']}, TensorFlow {r['tensorflow']}; {r['date']}.
Command: `{r['command']}` ({r['wall_s']:.0f} s).
Workload `images`, size {r['size']}, batch {r['batch_size']}, storage latency {r['storage_latency_ms']:g} ms per file;
{r['rounds']} rounds, order rotated; medians over the pooled measured steps of all rounds.
Other processes may have been running on this machine: medians, not means.

| run | median step ms | IQR ms | input wait | steps |
|---|---:|---:|---:|---:|
{chr(10).join(rows)}

- **best vs naive: {r['best_vs_naive']:.2f}x** (naive median / best median)
- **best / ceiling: {r['best_of_ceiling']:.3f}** (ceiling median / best median; {r['best_vs_ceiling_verdict']} by the IQR rule)
- best pipeline input wait: {r['input_wait_fraction']['best']:.1%} of its step time

Goals:
{goals}

Per round:
{rounds}
"""


if __name__ == "__main__":
    main()
