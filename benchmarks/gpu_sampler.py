"""Does tfwb.utilization.Sampler read what a GPU really does? A check against known loads.

Runs without TensorFlow: a PyTorch matmul loop keeps the GPU busy for a known share of
each window (100 %, 50 %, 20 %, 0 %), then known blocks of GPU memory are allocated, while
``tfwb.utilization.Sampler`` samples in the background. Reports, per level, the median NVML
utilization against the intended duty (and the loop's own measured busy share), memory
deltas against allocations, and what one sampler tick costs on this machine.

Usage:
    python benchmarks/gpu_sampler.py [--out PATH]   # on an NVIDIA GPU with torch + nvidia-ml-py
    python benchmarks/gpu_sampler.py --dry-run      # anywhere: FakeProbe stands in for NVML

Writes JSON to stdout and to ``--out`` (default ``$OUT/gpu_sampler.json`` when OUT is set),
and a markdown table to stdout and beside the JSON (``.md``).
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # nvml_fakes

from tfwb import hardware  # noqa: E402 - pure: no TensorFlow
from tfwb.utilization import NvmlProbe, PsutilProbe, Sampler, default_probes, driver_version, gpu_info, nvml_available
from nvml_fakes import FakeProbe  # noqa: E402 - the --dry-run stand-in for NVML
from tfwb.records import Sample  # noqa: E402

DUTIES = (1.0, 0.5, 0.2, 0.0)
ALLOCATIONS_MIB = (0, 4096, 16384)


class TorchLoad:
    """Busy/idle GPU load and memory blocks through PyTorch on one CUDA device."""

    def __init__(self, device_index: int = 0, size: int = 4096) -> None:
        import torch

        self.torch = torch
        self.device = torch.device("cuda", device_index)
        self.a = torch.randn(size, size, device=self.device, dtype=torch.bfloat16)
        self.b = torch.randn(size, size, device=self.device, dtype=torch.bfloat16)
        self.block: Any = None
        for _ in range(20):  # warm-up: cuBLAS handles, kernels, clocks
            self.a @ self.b
        torch.cuda.synchronize(self.device)
        self.info = {"torch": torch.__version__, "cuda": torch.version.cuda,
                     "device_name": torch.cuda.get_device_name(self.device),
                     "matmul": f"{size}x{size} bf16"}

    def busy(self, seconds: float) -> float:
        """Run matmuls (synchronizing every few) until ``seconds`` pass; returns busy time."""
        start = time.perf_counter()
        end = start + seconds
        while time.perf_counter() < end:
            for _ in range(4):
                self.a @ self.b
            self.torch.cuda.synchronize(self.device)
        return time.perf_counter() - start

    def allocate(self, mib: int) -> None:
        if mib:
            self.block = self.torch.empty(mib * 2**20, dtype=self.torch.uint8, device=self.device)
        self.torch.cuda.synchronize(self.device)

    def free(self) -> None:
        self.block = None
        self.torch.cuda.empty_cache()
        self.torch.cuda.synchronize(self.device)


class FakeLoad:
    """The same interface with no GPU: a FakeProbe reports what the load pretends to do,
    as NVML would: the busy share of the last ``PERIOD_S``."""

    BASE_MIB = 600.0
    PERIOD_S = 0.2

    def __init__(self) -> None:
        self.busy_spans: List[tuple] = []
        self.busy_since: Optional[float] = None
        self.mem_mib = 0.0
        self.info = {"torch": None, "cuda": None, "device_name": "FakeProbe (dry run)",
                     "matmul": None}

    def _util_pct(self) -> float:
        now = time.perf_counter()
        lo = now - self.PERIOD_S
        spans = self.busy_spans[-10:]
        if self.busy_since is not None:
            spans.append((self.busy_since, now))
        busy = sum(max(0.0, min(e, now) - max(s, lo)) for s, e in spans)
        return round(100 * busy / self.PERIOD_S)

    def probe(self) -> FakeProbe:
        return FakeProbe(lambda t: {"gpu_util_pct": (self._util_pct(),),
                                    "gpu_mem_used_mib": (self.BASE_MIB + self.mem_mib,)})

    def busy(self, seconds: float) -> float:
        start = self.busy_since = time.perf_counter()
        time.sleep(seconds)
        self.busy_spans.append((start, time.perf_counter()))
        self.busy_since = None
        return time.perf_counter() - start

    def allocate(self, mib: int) -> None:
        self.mem_mib = float(mib)

    def free(self) -> None:
        self.mem_mib = 0.0


def run_duty(load: Any, duty: float, duration_s: float, window_s: float) -> float:
    """Keep the GPU busy ``duty`` of each window for ``duration_s``; returns the busy share."""
    busy_s = 0.0
    start = time.perf_counter()
    n_windows = max(1, round(duration_s / window_s))
    for k in range(n_windows):
        if duty > 0:
            busy_s += load.busy(duty * window_s)
        rest = start + (k + 1) * window_s - time.perf_counter()
        if rest > 0:
            time.sleep(rest)
    return busy_s / (time.perf_counter() - start)


def window(samples: List[Sample], t0: float, t1: float) -> List[Sample]:
    return [s for s in samples if t0 <= s.t_s <= t1]


def median_or_none(values: List[Optional[float]]) -> Optional[float]:
    values = [v for v in values if v is not None]
    return round(statistics.median(values), 2) if values else None


def tick_cost(probes: List[Any], n: int = 500) -> Dict[str, Any]:
    """Time one sampler tick (every probe's read plus building the Sample), n times."""
    per_probe: Dict[str, List[int]] = {type(p).__name__: [] for p in probes}
    ticks: List[int] = []
    for p in probes:
        p.read()  # first read may start NVML: not a tick's cost
    for _ in range(n):
        t_tick = time.perf_counter_ns()
        fields: Dict[str, Any] = {}
        for p in probes:
            t = time.perf_counter_ns()
            fields.update(p.read())
            per_probe[type(p).__name__].append(time.perf_counter_ns() - t)
        Sample(t_s=0.0, **{k: tuple(v) if isinstance(v, list) else v for k, v in fields.items()})
        ticks.append(time.perf_counter_ns() - t_tick)

    def us(ns: List[int], q: float) -> float:
        return round(sorted(ns)[int(q * (len(ns) - 1))] / 1e3, 1)

    return {"n": n, "tick_median_us": us(ticks, 0.5), "tick_p90_us": us(ticks, 0.9),
            "per_probe_median_us": {k: us(v, 0.5) for k, v in per_probe.items()}}


def measure(args: argparse.Namespace) -> Dict[str, Any]:
    t_start = time.perf_counter()

    def clock() -> float:
        return time.perf_counter() - t_start

    if args.dry_run:
        load: Any = FakeLoad()
        gpu_probe: Any = load.probe()
    else:
        if not nvml_available():
            raise SystemExit("NVML is not available here: install nvidia-ml-py, need a driver")
        load = TorchLoad(size=args.matmul_size)
        gpu_probe = NvmlProbe()
    probes: List[Any] = [gpu_probe]
    try:
        probes.append(PsutilProbe())
    except ImportError:
        pass

    marks: List[Dict[str, Any]] = []
    with Sampler(interval_s=args.interval_s, probes=probes, clock=clock) as sampler:
        for duty in DUTIES:
            t0 = clock()
            busy_share = run_duty(load, duty, args.level_s, args.window_s)
            marks.append({"kind": "duty", "duty": duty, "t0": t0, "t1": clock(),
                          "busy_share": busy_share})
        for mib in ALLOCATIONS_MIB:
            b0 = clock()
            time.sleep(args.hold_s)
            b1 = clock()
            load.allocate(mib)
            h0 = clock()
            time.sleep(args.hold_s)
            h1 = clock()
            load.free()
            marks.append({"kind": "mem", "mib": mib, "base": (b0, b1), "held": (h0, h1)})
            time.sleep(args.settle_s)
    samples = list(sampler.samples)

    gpu = 0
    duty_rows = []
    for m in (m for m in marks if m["kind"] == "duty"):
        picked = window(samples, m["t0"] + args.settle_s, m["t1"])
        utils = [s.gpu_util_pct[gpu] if len(s.gpu_util_pct) > gpu else None for s in picked]
        duty_rows.append({
            "intended_pct": round(m["duty"] * 100),
            "load_busy_pct": round(100 * m["busy_share"], 1),
            "nvml_median_pct": median_or_none(utils),
            "nvml_min_pct": min((u for u in utils if u is not None), default=None),
            "nvml_max_pct": max((u for u in utils if u is not None), default=None),
            "n_samples": sum(u is not None for u in utils),
            "cpu_process_median_pct": median_or_none([s.cpu_process_pct for s in picked]),
        })
    mem_rows = []
    for m in (m for m in marks if m["kind"] == "mem"):
        def used(t0: float, t1: float) -> List[Optional[float]]:
            return [s.gpu_mem_used_mib[gpu] if len(s.gpu_mem_used_mib) > gpu else None
                    for s in window(samples, t0, t1)]
        base = median_or_none(used(m["base"][0] + args.settle_s / 2, m["base"][1]))
        held = median_or_none(used(m["held"][0] + args.settle_s / 2, m["held"][1]))
        mem_rows.append({"allocated_mib": m["mib"], "baseline_mib": base, "held_mib": held,
                         "delta_mib": round(held - base, 1) if None not in (base, held) else None})

    gaps = [b.t_s - a.t_s for a, b in zip(samples, samples[1:])]
    # The Sampler closed its probes; a closed NvmlProbe would restart NVML on its next read.
    tick_probes = probes if args.dry_run else [NvmlProbe()] + probes[1:]
    cost = tick_cost(tick_probes)
    for p in tick_probes:
        p.close()
    defaults = default_probes()
    for p in defaults:
        p.close()
    hw = hardware.detect()
    return {
        "benchmark": "gpu_sampler",
        "dry_run": args.dry_run,
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "command": "python " + " ".join(sys.argv),
        "machine": hardware.describe(hw),
        "gpus": gpu_info(),
        "driver": driver_version(),
        "python": platform.python_version(),
        "load": load.info,
        "default_probes": [type(p).__name__ for p in defaults],
        "config": {"interval_s": args.interval_s, "level_s": args.level_s,
                   "window_s": args.window_s, "settle_s": args.settle_s, "hold_s": args.hold_s,
                   "gpu_index": gpu},
        "duty": duty_rows,
        "memory": mem_rows,
        "tick": cost,
        "sampler": {"n_samples": len(samples), "error_count": sampler.error_count,
                    "errors": list(sampler.errors)[:5],
                    "median_interval_s": round(statistics.median(gaps), 4) if gaps else None,
                    "max_gap_s": round(max(gaps), 4) if gaps else None},
    }


def markdown(r: Dict[str, Any]) -> str:
    gpu = r["gpus"][0]["name"] if r["gpus"] else r["load"]["device_name"]
    lines = [
        f"# Sampler vs known GPU load — {gpu}",
        "",
        f"- date: {r['date']}; driver: {r['driver']}; torch: {r['load']['torch']} "
        f"(CUDA {r['load']['cuda']}); python {r['python']}",
        f"- machine: {r['machine']}; default probes: {', '.join(r['default_probes'])}",
        f"- command: `{r['command']}`" + (" (DRY RUN: FakeProbe, no GPU)" if r["dry_run"] else ""),
        f"- sampler: interval {r['config']['interval_s']} s, {r['sampler']['n_samples']} samples, "
        f"median gap {r['sampler']['median_interval_s']} s, max gap {r['sampler']['max_gap_s']} s, "
        f"{r['sampler']['error_count']} errors",
        f"- load: {r['load']['matmul']} matmuls, busy `duty × {r['config']['window_s']} s` of each "
        f"window, {r['config']['level_s']} s per level; first {r['config']['settle_s']} s of each "
        "level excluded",
        "",
        "| intended duty | load's own busy share | NVML median (min–max, n) | process CPU |",
        "| ---: | ---: | ---: | ---: |",
    ]
    for d in r["duty"]:
        lines.append(f"| {d['intended_pct']} % | {d['load_busy_pct']} % | {d['nvml_median_pct']} % "
                     f"({d['nvml_min_pct']}–{d['nvml_max_pct']}, {d['n_samples']}) | "
                     f"{d['cpu_process_median_pct']} % |")
    lines += ["", "| allocated | baseline used | held used | measured delta |",
              "| ---: | ---: | ---: | ---: |"]
    for m in r["memory"]:
        lines.append(f"| {m['allocated_mib']} MiB | {m['baseline_mib']} MiB | {m['held_mib']} MiB "
                     f"| {m['delta_mib']} MiB |")
    t = r["tick"]
    per = ", ".join(f"{k} {v} µs" for k, v in t["per_probe_median_us"].items())
    lines += ["", f"One sampler tick: median {t['tick_median_us']} µs, p90 {t['tick_p90_us']} µs "
              f"over {t['n']} ticks ({per})."]
    return "\n".join(lines) + "\n"


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dry-run", action="store_true", help="FakeProbe, no GPU or torch")
    parser.add_argument("--out", help="JSON path (default $OUT/gpu_sampler.json if OUT is set)")
    parser.add_argument("--interval-s", type=float, default=0.2)
    parser.add_argument("--level-s", type=float, default=None, help="seconds per duty level")
    parser.add_argument("--window-s", type=float, default=0.1)
    parser.add_argument("--settle-s", type=float, default=None)
    parser.add_argument("--hold-s", type=float, default=None)
    parser.add_argument("--matmul-size", type=int, default=4096)
    args = parser.parse_args(argv)
    quick = args.dry_run
    args.level_s = args.level_s or (1.2 if quick else 6.0)
    args.settle_s = args.settle_s if args.settle_s is not None else (0.3 if quick else 0.6)
    args.hold_s = args.hold_s or (0.6 if quick else 1.5)

    result = measure(args)
    text = json.dumps(result, indent=2)
    table = markdown(result)
    out = args.out or (os.path.join(os.environ["OUT"], "gpu_sampler.json")
                       if os.environ.get("OUT") else None)
    if out:
        Path(out).write_text(text + "\n", encoding="utf-8")
        Path(out).with_suffix(".md").write_text(table, encoding="utf-8")
    print(text)
    print()
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
