"""Two GPUs: does the sampler keep them apart, and does the chart draw one labelled series each?

Runs without TensorFlow. A PyTorch matmul load runs in three phases while
``tfwb.utilization.Sampler`` samples every GPU through NVML in the background:

1. GPU 0 busy all the time, GPU 1 idle;
2. GPU 0 busy half of each 0.1 s window, GPU 1 idle;
3. GPU 1 busy all the time, GPU 0 idle (so a swapped index would show).

Reports each GPU's median NVML utilization per phase, and draws the samples with
``tfwb.ui.charts.draw_utilization`` (the Workbench's utilization chart) to a PNG, whose
legend labels are listed in the JSON.

Usage:
    python benchmarks/gpu_sampler_two.py [--out PATH]   # two NVIDIA GPUs, torch + nvidia-ml-py
    python benchmarks/gpu_sampler_two.py --dry-run      # anywhere: FakeProbe stands in for NVML

Writes JSON (``--out``, default ``$OUT/gpu_sampler_two.json`` when OUT is set), a markdown
table beside it (``.md``) and the chart (``.png``).
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # nvml_fakes
sys.path.insert(0, str(Path(__file__).resolve().parent))

from gpu_sampler import FakeLoad, TorchLoad, median_or_none, run_duty, window  # noqa: E402
from tfwb import hardware  # noqa: E402 - pure: no TensorFlow
from tfwb.config import RunConfig  # noqa: E402
from tfwb.utilization import NvmlProbe, PsutilProbe, Sampler, driver_version, gpu_info, nvml_available  # noqa: E402
from nvml_fakes import FakeProbe  # noqa: E402
from tfwb.records import RunResult  # noqa: E402

#: (name, duty on GPU 0, duty on GPU 1)
PHASES = (("GPU 0 busy, GPU 1 idle", 1.0, 0.0),
          ("GPU 0 half busy, GPU 1 idle", 0.5, 0.0),
          ("GPU 1 busy, GPU 0 idle", 0.0, 1.0))


def fake_two(loads: List[FakeLoad]) -> FakeProbe:
    """A FakeProbe reading both fake loads as NVML would."""
    return FakeProbe(lambda t: {"gpu_util_pct": tuple(l._util_pct() for l in loads),
                                "gpu_mem_used_mib": tuple(l.BASE_MIB + l.mem_mib for l in loads)})


def chart(samples: List[Any], cores: int, path: Path) -> List[str]:
    """Draw the samples with the Workbench's utilization chart; returns its legend labels."""
    import matplotlib
    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    from tfwb.ui.charts import draw_utilization, figure_png

    result = RunResult(config=RunConfig(workload="mlp", label="two-GPU sampler check"),
                       samples=tuple(samples), fingerprint={"cpu_count": cores})
    fig = Figure(figsize=(9, 3.2))
    ax = fig.add_subplot(1, 1, 1)
    draw_utilization(ax, result)
    ax.set_xlabel("seconds")
    fig.suptitle("Sampler, two GPUs: " + " → ".join(p[0] for p in PHASES), fontsize=9)
    fig.tight_layout()
    path.write_bytes(figure_png(fig))
    return [t.get_text() for t in ax.get_legend().get_texts()] if ax.get_legend() else []


def measure(args: argparse.Namespace, png: Path) -> Dict[str, Any]:
    t_start = time.perf_counter()

    def clock() -> float:
        return time.perf_counter() - t_start

    if args.dry_run:
        loads: List[Any] = [FakeLoad(), FakeLoad()]
        gpu_probe: Any = fake_two(loads)
    else:
        if not nvml_available():
            raise SystemExit("NVML is not available here: install nvidia-ml-py, need a driver")
        if len(gpu_info()) < 2:
            raise SystemExit(f"this check needs two GPUs; NVML sees {len(gpu_info())}")
        loads = [TorchLoad(0, size=args.matmul_size), TorchLoad(1, size=args.matmul_size)]
        gpu_probe = NvmlProbe()
    probes: List[Any] = [gpu_probe, PsutilProbe()]
    marks = []
    with Sampler(interval_s=args.interval_s, probes=probes, clock=clock) as sampler:
        time.sleep(args.settle_s)
        for name, d0, d1 in PHASES:
            t0 = clock()
            which = 0 if d0 else 1
            run_duty(loads[which], d0 or d1, args.level_s, args.window_s)
            marks.append((name, d0, d1, t0, clock()))
        time.sleep(args.settle_s)
    samples = list(sampler.samples)
    rows = []
    for name, d0, d1, t0, t1 in marks:
        picked = window(samples, t0 + args.settle_s, t1)
        row = {"phase": name, "intended_pct": [round(100 * d0), round(100 * d1)], "n_samples": len(picked)}
        for g in (0, 1):
            row[f"gpu{g}_median_pct"] = median_or_none(
                [s.gpu_util_pct[g] if len(s.gpu_util_pct) > g else None for s in picked])
        rows.append(row)
    labels = chart(samples, os.cpu_count() or 1, png)
    return {
        "benchmark": "gpu_sampler_two",
        "dry_run": args.dry_run,
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "command": "python " + " ".join(sys.argv),
        "machine": hardware.describe(hardware.detect()),
        "gpus": gpu_info(),
        "driver": driver_version(),
        "python": platform.python_version(),
        "load": loads[0].info,
        "gpus_per_sample": sorted({len(s.gpu_util_pct) for s in samples}),
        "n_samples": len(samples),
        "sampler_errors": sampler.error_count,
        "phases": rows,
        "chart": png.name,
        "chart_labels": labels,
    }


def markdown(r: Dict[str, Any]) -> str:
    names = ", ".join(g["name"] for g in r["gpus"]) or r["load"]["device_name"]
    lines = [f"# Sampler on two GPUs — {names}", "",
             f"- date: {r['date']}; driver: {r['driver']}; torch: {r['load']['torch']}; python {r['python']}",
             f"- machine: {r['machine']}",
             f"- command: `{r['command']}`" + (" (DRY RUN: FakeProbe, no GPU)" if r["dry_run"] else ""),
             f"- {r['n_samples']} samples, GPUs per sample {r['gpus_per_sample']}, "
             f"{r['sampler_errors']} sampler errors",
             f"- chart: `{r['chart']}`, legend: {', '.join(r['chart_labels'])}", "",
             "| phase | intended GPU 0 / GPU 1 | NVML median GPU 0 | NVML median GPU 1 | samples |",
             "| --- | ---: | ---: | ---: | ---: |"]
    for p in r["phases"]:
        lines.append(f"| {p['phase']} | {p['intended_pct'][0]} % / {p['intended_pct'][1]} % | "
                     f"{p['gpu0_median_pct']} % | {p['gpu1_median_pct']} % | {p['n_samples']} |")
    return "\n".join(lines) + "\n"


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dry-run", action="store_true", help="FakeProbe, no GPU or torch")
    parser.add_argument("--out", help="JSON path (default $OUT/gpu_sampler_two.json if OUT is set)")
    parser.add_argument("--interval-s", type=float, default=0.2)
    parser.add_argument("--level-s", type=float, default=None)
    parser.add_argument("--window-s", type=float, default=0.1)
    parser.add_argument("--settle-s", type=float, default=None)
    parser.add_argument("--matmul-size", type=int, default=4096)
    args = parser.parse_args(argv)
    args.level_s = args.level_s or (1.2 if args.dry_run else 5.0)
    args.settle_s = args.settle_s if args.settle_s is not None else (0.3 if args.dry_run else 0.6)
    out = Path(args.out or os.path.join(os.environ.get("OUT", "."), "gpu_sampler_two.json"))
    out.parent.mkdir(parents=True, exist_ok=True)
    result = measure(args, out.with_suffix(".png"))
    out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    out.with_suffix(".md").write_text(markdown(result), encoding="utf-8")
    print(json.dumps(result, indent=2))
    print(markdown(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
