"""Overhead of tfwb's instrumentation against a bare loop over the same step function.

Both loops drive one ``Prepared`` setup (same model, optimizer, compiled step and
in-memory data, so input is not a factor):

- bare: ``for _ in range(n): loss = p.advance()``, then one ``float(loss)``;
- instrumented: ``tfwb.tf.runner.train.timed_steps`` (two clock reads, a loss read, a device
  sync where there is a GPU or TPU, list appends) with the run's default observers
  (the background ``Sampler`` and a ``Progress`` callback), as ``tfwb.run`` does.

Rounds alternate bare / instrumented (ABAB...) so drift hits both alike. The
figure is the median over rounds of (instrumented - bare) / bare wall time, and
the same cost per step as a fraction of the median step time. Because the real
step's own noise (a few %) swamps a sub-1 % effect on a busy machine, the script
also times the instrumentation around a step that does almost nothing, which gives
its cost per step in microseconds directly. Goal: <= 1 % of the median step.

Usage: python benchmarks/overhead.py [--size small|full] [--rounds 9] [--steps 60] [--out FILE]
"""
from __future__ import annotations

import argparse
import json
import platform
import sys
import time

import tfwb.tf  # noqa: F401  (quiet TF import)
from tfwb import RunConfig, hardware, stats
from tfwb.monitor import Sampler, default_probes
from tfwb.observers import Dispatch, Progress, RunState, StepLog
from tfwb.tf.runner.train import prepared, timed_steps


def bare(p, n: int) -> float:
    t0 = time.perf_counter()
    loss = None
    for _ in range(n):
        loss = p.advance()
    float(loss)
    return time.perf_counter() - t0


def instrumented(p, n: int, interval_s: float) -> tuple:
    origin = time.perf_counter()
    clock = lambda: time.perf_counter() - origin  # noqa: E731
    log = StepLog()
    sampler = Sampler(interval_s=interval_s, probes=default_probes(), clock=clock)
    state = RunState(config=getattr(p, "cfg", None), log=log, clock=clock, total_steps=n, warmup_steps=0)
    dispatch = Dispatch([sampler, Progress(lambda done, total: None)])
    sampler.start()
    try:
        t0 = time.perf_counter()
        timed_steps(p, n, clock, log, state=state, dispatch=dispatch)
        wall = time.perf_counter() - t0
    finally:
        dispatch.call("on_run_end", state)
    return wall, log.times_s


def null_step_cost_s(n: int = 3000, rounds: int = 7) -> float:
    """Instrumentation cost per step, measured on a step that does almost nothing.

    With the real step's own noise removed, the difference between the two loops is
    the instrumentation alone: clock reads, the loss read, the device sync (GPU/TPU
    only), appends, the observers' hooks, and the sampler thread's share of the CPU.
    """
    import types

    import tensorflow as tf

    x, y = tf.ones((2, 2)), tf.zeros((2,))
    step = tf.function(lambda a, b: tf.reduce_sum(a) + tf.reduce_sum(b))
    p = types.SimpleNamespace(cfg=RunConfig(), takes_iterator=False, fetch=lambda: (x, y), step=step,
                              advance=lambda: step(x, y))
    bare(p, 100)
    costs = []
    for _ in range(rounds):
        b = bare(p, n)
        wall, _ = instrumented(p, n, 0.2)
        costs.append((wall - b) / n)
    return stats.median(costs)


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", default="full", choices=("small", "full"))
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--out")
    args = ap.parse_args(argv)
    cfg = RunConfig(size=args.size, batch_size=args.batch_size, data_source="memory", steps=args.steps)
    rel, step_medians, per_step_cost = [], [], []
    with prepared(cfg) as p:
        bare(p, 10)                           # warm-up: trace, allocate, autotune
        instrumented(p, 10, cfg.sample_interval_s)
        for r in range(args.rounds):
            b = bare(p, args.steps)
            wall, times = instrumented(p, args.steps, cfg.sample_interval_s)
            rel.append((wall - b) / b)
            per_step_cost.append((wall - b) / args.steps)
            step_medians.append(stats.median(times))
            print(f"round {r + 1}: bare {b / args.steps * 1e3:.2f} ms/step, "
                  f"instrumented {wall / args.steps * 1e3:.2f} ms/step ({rel[-1]:+.2%})", flush=True)
    q1, q3 = stats.iqr(rel)
    null_cost = null_step_cost_s()
    result = {
        "benchmark": "instrumentation overhead", "config": cfg.to_dict(),
        "machine": hardware.describe(hardware.detect()), "python": platform.python_version(),
        "rounds": args.rounds, "steps_per_round": args.steps,
        "median_step_ms": stats.median(step_medians) * 1e3,
        "overhead_median": stats.median(rel), "overhead_iqr": [q1, q3],
        "overhead_per_step_us": stats.median(per_step_cost) * 1e6,
        "overhead_per_step_of_median_step": stats.median(per_step_cost) / stats.median(step_medians),
        "null_step_cost_us": null_cost * 1e6,
        "null_step_cost_of_median_step": null_cost / stats.median(step_medians),
        "command": "python benchmarks/overhead.py " + " ".join(argv if argv is not None else sys.argv[1:]),
    }
    print(f"\noverhead: median {result['overhead_median']:+.2%} (IQR {q1:+.2%} to {q3:+.2%}) of the bare loop; "
          f"{result['overhead_per_step_us']:.0f} us per step = "
          f"{result['overhead_per_step_of_median_step']:+.2%} of the median step "
          f"({result['median_step_ms']:.1f} ms) on {result['machine']}")
    print(f"instrumentation alone (null step): {result['null_step_cost_us']:.0f} us per step = "
          f"{result['null_step_cost_of_median_step']:.3%} of the median step")
    if args.out:
        with open(args.out, "w") as fh:
            json.dump(result, fh, indent=2)
    return result


if __name__ == "__main__":
    main()
