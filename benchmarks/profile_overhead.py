"""What the TF profiler costs: profiled vs unprofiled steps, side by side, and the top ops it finds.

For each case (workload, size, data source) and each round, one fresh ``Prepared`` setup
(warmed up with a few calls) drives both loops, so model, data and compiled step are the
same, and the capture sees a young step function as ``tfwb.profile``'s does (TF stops
tracing cheap ops after ~60-90 calls: ``tfwb.tf.lab.profiler.TRACED_CALLS_LIMIT``):

- unprofiled: ``tfwb.tf.runner.train.timed_steps`` over ``--steps`` calls;
- profiled: the same, with a ``tfwb.tf.lab.profiler.ProfileWindow`` capturing every one of
  those calls (profiler session started before the first, a step ``Trace`` around each,
  the capture written after the last), as ``tfwb.profile`` does.

Rounds alternate the order (unprofiled first, then profiled first) so warm-up effects and
drift hit both alike. Figures per case: the
median step of each loop (medians over rounds of each round's median step), the
overhead (median over rounds of profiled / unprofiled - 1) with the sign test's verdict
(``tfwb.stats.compare_rounds``), and the cost outside the steps: starting and stopping
the capture (writing the ``.xplane.pb``) and converting it with xprof (what
``tfwb.profile`` does after the run). Then one ``tfwb.profile`` call on the case gives
the step breakdown and the top ops by self time.

Usage: python benchmarks/profile_overhead.py [--cases mlp:full:memory,images:full:memory]
       [--rounds 15] [--steps 10] [--top 8] [--out benchmarks/results/profile_overhead.json]
(the Markdown goes next to the JSON, same name, ``.md``).
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import sys
import tempfile
import time

import tfwb.tf  # noqa: F401  (quiet TF import)
from tfwb import RunConfig, hardware, stats
from tfwb.observers import Dispatch, RunState, StepLog
from tfwb.tf.lab.profiler import ProfileWindow, parse_ops, profile, tool_data
from tfwb.tf.runner.train import prepared, timed_steps

DEFAULT_CASES = "mlp:full:memory,text:small:memory,images:full:memory,images:small:files"
WARMUP_CALLS = 5


def loop(p, n: int, profile_dir: str = "") -> dict:
    """``n`` timed calls; with ``profile_dir``, all of them captured. Returns times and costs."""
    origin = time.perf_counter()
    clock = lambda: time.perf_counter() - origin  # noqa: E731
    log = StepLog()
    state = RunState(config=p.cfg, log=log, clock=clock, total_steps=n, warmup_steps=0)
    window = ProfileWindow(profile_dir, steps=n) if profile_dir else None
    if window is not None:
        window.on_warmup_end(state)
    t0 = time.perf_counter()
    timed_steps(p, n, clock, log, state=state, dispatch=Dispatch([window] if window else []))
    wall = time.perf_counter() - t0
    out = {"times_s": list(log.times_s), "outside_s": wall - sum(log.times_s)}
    if window is not None:
        window.on_run_end(state)
        out["xplane"] = window.xplane
        out["xplane_bytes"] = os.path.getsize(window.xplane) if window.xplane else None
    return out


def run_case(spec: str, rounds: int, steps: int, top: int) -> dict:
    workload, size, source = spec.split(":")
    cfg = RunConfig(workload=workload, size=size, data_source=source, steps=steps, warmup_steps=WARMUP_CALLS)
    plain_medians, prof_medians, ratios, outside, convert_s, xplane_bytes, op_counts = [], [], [], [], [], [], []
    with tempfile.TemporaryDirectory(prefix="tfwb-bench-") as tmp:
        for r in range(rounds):
            # A fresh setup per round: TF stops tracing cheap ops after ~60-90 calls of a function
            # (tfwb.tf.lab.profiler.TRACED_CALLS_LIMIT), and tfwb.profile captures a fresh run's early calls.
            with prepared(cfg) as p:
                loop(p, WARMUP_CALLS)                      # trace, allocate, autotune
                if r % 2 == 0:
                    plain = loop(p, steps)
                    prof = loop(p, steps, os.path.join(tmp, f"r{r}"))
                else:
                    prof = loop(p, steps, os.path.join(tmp, f"r{r}"))
                    plain = loop(p, steps)
            a, b = stats.median(plain["times_s"]), stats.median(prof["times_s"])
            plain_medians.append(a)
            prof_medians.append(b)
            ratios.append(b / a - 1)
            outside.append(prof["outside_s"] - plain["outside_s"])
            xplane_bytes.append(prof["xplane_bytes"])
            t0 = time.perf_counter()
            tool_data(prof["xplane"], "overview_page")
            op_counts.append(len(parse_ops(tool_data(prof["xplane"], "framework_op_stats"))))
            convert_s.append(time.perf_counter() - t0)
            print(f"{spec} round {r + 1}: unprofiled {a * 1e3:.2f} ms/step, profiled {b * 1e3:.2f} ms/step "
                  f"({ratios[-1]:+.1%}); capture start/stop {outside[-1] * 1e3:.0f} ms, "
                  f"conversion {convert_s[-1] * 1e3:.0f} ms, {op_counts[-1]} ops", flush=True)
        rep = profile(cfg.replace(label=f"{workload}-{size}-{source}"), steps=steps, top=top,
                      logdir=os.path.join(tmp, "profile"))
    verdict = stats.compare_rounds(plain_medians, prof_medians, method="alternating order, fresh setup per round")
    q1, q3 = stats.iqr(ratios)
    return {
        "case": spec, "config": cfg.to_dict(), "rounds": rounds, "steps_per_round": steps,
        "unprofiled_median_step_ms": stats.median(plain_medians) * 1e3,
        "profiled_median_step_ms": stats.median(prof_medians) * 1e3,
        "overhead_median": stats.median(ratios), "overhead_iqr": [q1, q3],
        "overhead_per_step_ms": (stats.median(prof_medians) - stats.median(plain_medians)) * 1e3,
        "verdict": verdict.text(), "ops_per_capture": [min(op_counts), max(op_counts)],
        "capture_start_stop_ms": stats.median(outside) * 1e3, "conversion_ms": stats.median(convert_s) * 1e3,
        "xplane_kib": stats.median([b for b in xplane_bytes if b]) / 1024,
        "profile": rep.to_dict(), "profile_summary": rep.summary(),
    }


def markdown(result: dict) -> str:
    lines = [
        "# The TF profiler's overhead, and the top ops it finds", "",
        f"Machine: {result['machine']}; Python {result['python']}, TensorFlow {result['tensorflow']}; "
        f"{result['date']}.",
        f"Command: `{result['command']}` ({result['wall_s']:.0f} s). Each case: "
        f"{result['cases'][0]['rounds']} rounds, each a fresh `Prepared` setup warmed up with {WARMUP_CALLS} calls "
        f"that runs {result['cases'][0]['steps_per_round']} unprofiled calls and the same number captured by a "
        "`ProfileWindow` (every call traced, as `tfwb.profile` does), in alternating order. "
        f"Other programs shared this machine (1-minute load average {result['load_average_1min'][0]:.1f} at the "
        f"start, {result['load_average_1min'][1]:.1f} at the end, on {os.cpu_count()} cores): paired rounds, "
        "medians, and a sign test over the rounds.", "",
        "| case | unprofiled ms/step | profiled ms/step | overhead (median, IQR) | sign test | "
        "capture start+stop ms | xprof conversion ms | capture KiB | ops seen |",
        "|---|---:|---:|---:|---|---:|---:|---:|---:|",
    ]
    for c in result["cases"]:
        q1, q3 = c["overhead_iqr"]
        lines.append(f"| {c['case']} | {c['unprofiled_median_step_ms']:.2f} | {c['profiled_median_step_ms']:.2f} | "
                     f"{c['overhead_median']:+.1%} ({q1:+.1%} to {q3:+.1%}) | {c['verdict']} | "
                     f"{c['capture_start_stop_ms']:.0f} | {c['conversion_ms']:.0f} | {c['xplane_kib']:.0f} | "
                     f"{c['ops_per_capture'][0]}-{c['ops_per_capture'][1]} |")
    for c in result["cases"]:
        prof = c["profile"]
        lines += ["", f"## {c['case']}: `tfwb.profile(cfg, steps={c['steps_per_round']})`", "",
                  "```", c["profile_summary"], "```", "",
                  "| # | op (as in the trace) | type | self ms | share |", "|---:|---|---|---:|---:|"]
        for i, op in enumerate(prof["top_ops"], 1):
            lines.append(f"| {i} | `{op['name']}` | {op['type']} | {op['self_ms']:.2f} | {op['share']:.1%} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", default=DEFAULT_CASES, help="workload:size:data_source, comma-separated")
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--steps", type=int, default=10, help="calls per loop (the profiler guide: at most ~10)")
    ap.add_argument("--top", type=int, default=8)
    ap.add_argument("--out", help="JSON file; the Markdown goes beside it (.md)")
    args = ap.parse_args(argv)
    import tensorflow as tf

    t0 = time.perf_counter()
    load_before = os.getloadavg()[0]
    cases = [run_case(spec, args.rounds, args.steps, args.top) for spec in args.cases.split(",")]
    result = {
        "benchmark": "profiler overhead", "machine": hardware.describe(hardware.detect()),
        "python": platform.python_version(), "tensorflow": tf.__version__,
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "command": "python benchmarks/profile_overhead.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "wall_s": time.perf_counter() - t0, "load_average_1min": [load_before, os.getloadavg()[0]],
        "cases": cases,
    }
    print()
    for c in cases:
        print(f"{c['case']}: profiled {c['profiled_median_step_ms']:.2f} vs unprofiled "
              f"{c['unprofiled_median_step_ms']:.2f} ms/step: overhead {c['overhead_median']:+.1%} "
              f"({c['verdict']}); capture start+stop {c['capture_start_stop_ms']:.0f} ms, "
              f"conversion {c['conversion_ms']:.0f} ms")
    if args.out:
        with open(args.out, "w") as fh:
            json.dump(result, fh, indent=2)
        with open(os.path.splitext(args.out)[0] + ".md", "w") as fh:
            fh.write(markdown(result))
    return result


if __name__ == "__main__":
    main()
