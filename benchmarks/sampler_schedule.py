"""Does the Sampler keep its schedule? Sample counts, gaps, stop latency and tick cost.

The wall-clock side of ``tfwb.utilization.Sampler`` that unit tests must not assert on (a
loaded 2-core machine delays threads by tens of milliseconds): over a few durations,
the samples taken against ``2 + duration / interval`` (one at start, one at stop, one per
tick), the gaps between thread samples, how long ``stop()`` takes with an hour-long
interval, and what one ``tick()`` costs with the default probes. Pure: no TensorFlow.

Usage:
    python benchmarks/sampler_schedule.py [--interval-s 0.05] [--out PATH]
Writes JSON (default benchmarks/results/sampler_schedule.json) and a Markdown table beside it.
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))  # nvml_fakes

from tfwb import hardware  # noqa: E402 - pure: no TensorFlow
from tfwb.utilization import Sampler, default_probes  # noqa: E402
from nvml_fakes import FakeProbe  # noqa: E402


def schedule(duration_s: float, interval_s: float) -> Dict[str, Any]:
    with Sampler(interval_s=interval_s, probes=[FakeProbe([{"rss_mib": 1.0}])]) as s:
        time.sleep(duration_s)
    times = [x.t_s for x in s.samples]
    gaps = [b - a for a, b in zip(times[1:-2], times[2:-1])]    # thread samples only
    return {"duration_s": duration_s, "interval_s": interval_s, "samples": len(times),
            "expected": 2 + round(duration_s / interval_s),
            "median_gap_s": round(statistics.median(gaps), 4) if gaps else None,
            "max_gap_s": round(max(gaps), 4) if gaps else None}


def stop_latency_s(repeats: int = 5) -> List[float]:
    out = []
    for _ in range(repeats):
        s = Sampler(interval_s=3600.0, probes=[FakeProbe([{}])]).start()
        t0 = time.perf_counter()
        s.stop()
        out.append(round(time.perf_counter() - t0, 5))
    return out


def tick_cost_us(n: int = 200) -> Dict[str, Any]:
    s = Sampler(probes=default_probes())
    s.tick()
    costs = []
    for _ in range(n):
        t0 = time.perf_counter_ns()
        s.tick()
        costs.append((time.perf_counter_ns() - t0) / 1e3)
    probes = [type(p).__name__ for p in s.probes]
    s.stop()
    costs.sort()
    return {"probes": probes, "n": n, "median_us": round(statistics.median(costs), 1),
            "p90_us": round(costs[int(0.9 * n)], 1)}


def markdown(r: Dict[str, Any]) -> str:
    lines = [f"# Sampler schedule — {r['machine']}", "", f"- date: {r['date']}; command: `{r['command']}`",
             "", "| duration | interval | samples | expected | median gap | max gap |",
             "| ---: | ---: | ---: | ---: | ---: | ---: |"]
    for row in r["schedule"]:
        lines.append(f"| {row['duration_s']} s | {row['interval_s']} s | {row['samples']} | {row['expected']} "
                     f"| {row['median_gap_s']} s | {row['max_gap_s']} s |")
    t = r["tick"]
    lines += ["", f"`stop()` with a 3600 s interval took {', '.join(f'{v * 1e3:.1f}' for v in r['stop_latency_s'])} ms.",
              f"One `tick()` with the default probes ({', '.join(t['probes'])}): median {t['median_us']} µs, "
              f"p90 {t['p90_us']} µs over {t['n']} ticks."]
    return "\n".join(lines) + "\n"


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--interval-s", type=float, default=0.05)
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "sampler_schedule.json"))
    args = parser.parse_args(argv)
    result = {
        "benchmark": "sampler_schedule",
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "command": "python " + " ".join(sys.argv),
        "machine": hardware.describe(hardware.detect()),
        "schedule": [schedule(d, args.interval_s) for d in (0.3, 1.0, 3.0)],
        "stop_latency_s": stop_latency_s(),
        "tick": tick_cost_us(),
    }
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    table = markdown(result)
    Path(args.out).with_suffix(".md").write_text(table, encoding="utf-8")
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
