"""Overhead of tfwb's instrumentation against a bare loop over the same step function.

Both loops drive one ``Prepared`` setup (same model, optimizer, compiled step and
in-memory data, so input is not a factor):

- bare: ``for _ in range(n): loss = p.advance()``, then one ``float(loss)``;
- instrumented: ``tfwb.tf.runner.train.timed_steps`` with the run's default observers
  (the background ``Sampler`` and a ``Progress`` callback), as ``tfwb.run`` does, in each
  timing mode: ``windowed`` (the default: three clock reads and list appends per step, one
  loss read and device sync per window) and ``per_step`` (two clock reads, a loss read
  and a device sync where there is a GPU or TPU, per step).

Rounds alternate bare / windowed / per_step so drift hits all alike. Fidelity compares like with
like: the reported median step against the bare loop's median step (the bare loop reads the clock
after each step), and the reported mean against the bare mean. The overhead figure is the
median over rounds of (instrumented - bare) / bare wall time, and the same cost per step
as a fraction of the median step time. Because the real step's own noise (a few %) swamps
a sub-1 % effect on a busy machine, the script also times the instrumentation around a
step that does almost nothing, which gives its cost per step in microseconds directly.
Goals: fidelity within 2 % of the bare loop, <= 10 us per step.

Usage: python benchmarks/overhead.py [--size small|full] [--rounds 9] [--steps 60] [--out FILE]
"""
from __future__ import annotations

import argparse
import json
import platform
import sys
import time
import types

import tfwb.tf  # noqa: F401  (quiet TF import)
from tfwb import RunConfig, hardware, stats
from tfwb.utilization import Sampler, default_probes
from tfwb.observers import Dispatch, Progress, RunState, StepLog
from tfwb.tf.runner.train import prepared, timed_steps


def bare(p, n: int) -> float:
    t0 = time.perf_counter()
    loss = None
    for _ in range(n):
        loss = p.advance()
    float(loss)
    return time.perf_counter() - t0


def bare_timed(p, n: int) -> tuple:
    """The bare loop with a clock read after each step: (wall time, per-step times).

    Two ``perf_counter`` calls per step (well under a microsecond) are all it adds, so its
    median step is the like-for-like reference for the instrumented loop's reported median;
    on a CPU a ``tf.function`` call returns when its ops have run, so each delta is that
    step's own time (on a GPU it would be the dispatch time: this comparison is for the CPU).
    """
    times = []
    loss = None
    t0 = last = time.perf_counter()
    for _ in range(n):
        loss = p.advance()
        now = time.perf_counter()
        times.append(now - last)
        last = now
    float(loss)
    return time.perf_counter() - t0, times


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


MODES = ("windowed", "per_step")


def python_step_cost_s(n: int = 20000, rounds: int = 15) -> dict:
    """Instrumentation cost per step in each timing mode around a pure-Python no-op step.

    No TensorFlow in the step, so the loop's own Python work (clock reads, appends, the
    window arithmetic, a ``Progress`` hook) is all there is to measure, and the rounds
    scatter by tenths of a microsecond even on a busy machine, where the TF null step's
    own noise is tens of microseconds.
    """
    batch = (1.0, 2.0)

    def fetch():
        return batch

    def step(x, y):
        return 1.0

    def bare_python(k: int) -> float:
        t0 = time.perf_counter()
        for _ in range(k):
            x, y = fetch()
            out = step(x, y)
        float(out)
        return time.perf_counter() - t0

    costs = {mode: [] for mode in MODES}
    for _ in range(rounds):
        b = bare_python(n)
        for mode in MODES:
            cfg = RunConfig(timing=mode)
            p = types.SimpleNamespace(cfg=cfg, takes_iterator=False, fetch=fetch, step=step)
            log = StepLog()
            state = RunState(config=cfg, log=log, clock=time.perf_counter, total_steps=n, warmup_steps=0)
            t0 = time.perf_counter()
            timed_steps(p, n, time.perf_counter, log, state=state,
                        dispatch=Dispatch([Progress(lambda done, total: None)]), sync=lambda: None)
            costs[mode].append((time.perf_counter() - t0 - b) / n)
    return {mode: stats.median(c) for mode, c in costs.items()}


def null_step_cost_s(n: int = 3000, rounds: int = 7) -> dict:
    """Instrumentation cost per step in each timing mode, measured on a step that does almost nothing.

    With the real step's own noise removed, the difference between the loops is the
    instrumentation alone: clock reads, the loss reads, the device sync (GPU/TPU only),
    appends, the observers' hooks, and the sampler thread's share of the CPU.
    """
    import tensorflow as tf

    x, y = tf.ones((2, 2)), tf.zeros((2,))
    step = tf.function(lambda a, b: tf.reduce_sum(a) + tf.reduce_sum(b))
    p = types.SimpleNamespace(cfg=RunConfig(), takes_iterator=False, fetch=lambda: (x, y), step=step,
                              advance=lambda: step(x, y))
    bare(p, 100)
    costs = {mode: [] for mode in MODES}
    for _ in range(rounds):
        b = bare(p, n)
        for mode in MODES:
            p.cfg = RunConfig(timing=mode)
            wall, _ = instrumented(p, n, 0.2)
            costs[mode].append((wall - b) / n)
    return {mode: stats.median(c) for mode, c in costs.items()}


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", default="full", choices=("small", "full"))
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--out")
    args = ap.parse_args(argv)
    cfg = RunConfig(size=args.size, batch_size=args.batch_size, data_source="memory", steps=args.steps)
    rel = {m: [] for m in MODES}
    per_step_cost = {m: [] for m in MODES}
    step_medians = {m: [] for m in MODES}
    bare_step = []
    fidelity = {m: [] for m in MODES}      # per round: reported median step / bare loop's median step - 1
    fidelity_mean = {m: [] for m in MODES}  # per round: reported mean step / bare loop's mean step - 1
    with prepared(cfg) as p:
        bare(p, 10)                           # warm-up: trace, allocate, autotune
        instrumented(p, 10, cfg.sample_interval_s)
        for r in range(args.rounds):
            b, b_times = bare_timed(p, args.steps)
            b_med, b_mean = stats.median(b_times), sum(b_times) / len(b_times)
            bare_step.append(b_med)
            line = [f"round {r + 1}: bare median {b_med * 1e3:.2f} ms/step"]
            for mode in MODES:
                p.cfg = cfg.replace(timing=mode)
                wall, times = instrumented(p, args.steps, cfg.sample_interval_s)
                rel[mode].append((wall - b) / b)
                fidelity[mode].append(stats.median(times) / b_med - 1)
                fidelity_mean[mode].append((sum(times) / len(times)) / b_mean - 1)
                per_step_cost[mode].append((wall - b) / args.steps)
                step_medians[mode].append(stats.median(times))
                line.append(f"{mode} {wall / args.steps * 1e3:.2f} ms/step ({rel[mode][-1]:+.2%}, "
                            f"reported median {step_medians[mode][-1] * 1e3:.2f} ms)")
            print(", ".join(line), flush=True)
    null_cost = null_step_cost_s()
    python_cost = python_step_cost_s()
    modes = {}
    for mode in MODES:
        q1, q3 = stats.iqr(rel[mode])
        med_step = stats.median(step_medians[mode])
        modes[mode] = {
            "median_step_ms": med_step * 1e3,
            "reported_vs_bare": stats.median(fidelity[mode]), "reported_vs_bare_iqr": list(stats.iqr(fidelity[mode])),
            "reported_mean_vs_bare_mean": stats.median(fidelity_mean[mode]),
            "reported_mean_vs_bare_mean_iqr": list(stats.iqr(fidelity_mean[mode])),
            "overhead_median": stats.median(rel[mode]), "overhead_iqr": [q1, q3],
            "overhead_per_step_us": stats.median(per_step_cost[mode]) * 1e6,
            "null_step_cost_us": null_cost[mode] * 1e6,
            "null_step_cost_of_median_step": null_cost[mode] / med_step,
            "python_step_cost_us": python_cost[mode] * 1e6,
        }
    result = {
        "benchmark": "instrumentation overhead", "config": cfg.to_dict(),
        "machine": hardware.describe(hardware.detect()), "python": platform.python_version(),
        "rounds": args.rounds, "steps_per_round": args.steps,
        "bare_median_step_ms": stats.median(bare_step) * 1e3,
        "modes": modes,
        "command": "python benchmarks/overhead.py " + " ".join(argv if argv is not None else sys.argv[1:]),
    }
    print()
    for mode, m in modes.items():
        q1, q3 = m["overhead_iqr"]
        print(f"{mode}: wall {m['overhead_median']:+.2%} (IQR {q1:+.2%} to {q3:+.2%}) of the bare loop; "
              f"reported median step vs the bare loop's median step, median of paired rounds {m['reported_vs_bare']:+.2%} "
              f"(means: {m['reported_mean_vs_bare_mean']:+.2%}); "
              f"instrumentation alone: {m['null_step_cost_us']:.1f} us per step around a TF null step, "
              f"{m['python_step_cost_us']:.2f} us around a Python no-op step")
    print(f"on {result['machine']}")
    if args.out:
        with open(args.out, "w") as fh:
            json.dump(result, fh, indent=2)
    return result


if __name__ == "__main__":
    main()
