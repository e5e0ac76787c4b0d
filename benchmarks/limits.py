"""How far from the limit: model FLOPs counted from Keras models, and this machine's peak.

Figures (issue 19, items 1 and 2):

- ``count_flops`` on ResNet-50 and MobileNetV2 (``keras.applications``, ``weights=None``,
  224x224) against the multiply-adds their papers publish (He et al. 2015, Table 1: 3.8 G;
  Sandler et al. 2018, Table 6: 300 M), with the time the count took, and TensorFlow's own
  estimate of the traced forward pass (batch 1) beside it;
- each built-in workload's forward FLOPs per example and per training step (3x forward, at
  its default batch size) at both sizes;
- the measured matmul peak per dtype on this machine (``measure_peak``, not cached here),
  the time the benchmark took, and the CPU formula or the datasheet figure beside it.

Usage: python benchmarks/limits.py [--budget 1.5] [--out benchmarks/results/limits.json]
(the Markdown goes next to the JSON, same name, ``.md``).
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
import keras
import tensorflow as tf

from tfwb import datasheet, hardware
from tfwb.config import RunConfig
from tfwb.tf.runner.flops import count_flops, format_flops, tf_cost_estimate
from tfwb.tf.runner.matmul_peak import measure_peak
from tfwb.workloads import get_workload, workload_names

PAPERS = {
    "ResNet50": (3.8e9, "He et al. 2015, Table 1: 3.8 x 10^9 FLOPs (multiply-adds)"),
    "MobileNetV2": (300e6, "Sandler et al. 2018, Table 6: 300 M MAdds (224x224, width 1.0)"),
}


def paper_models() -> list:
    rows = []
    for name, (paper, source) in PAPERS.items():
        t0 = time.perf_counter()
        model = getattr(keras.applications, name)(weights=None, input_shape=(224, 224, 3))
        build_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        c = count_flops(model)
        count_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        est = tf_cost_estimate(lambda x: model(x, training=False), tf.TensorSpec((1, 224, 224, 3)))
        tf_s = time.perf_counter() - t0
        rows.append({
            "model": name, "paper_multiply_adds": paper, "paper_source": source,
            "count_flops_per_example": c.per_example, "count_multiply_adds": c.multiply_adds,
            "ratio_to_paper": c.multiply_adds / paper, "complete": c.complete,
            "uncounted": list(c.uncounted), "layers": len(c.by_layer),
            "tf_estimate_flops": est, "tf_vs_count": est / c.per_example if est else None,
            "build_s": build_s, "count_s": count_s, "tf_estimate_s": tf_s,
        })
        del model
        keras.backend.clear_session()
    return rows


def workloads() -> list:
    rows = []
    for name in workload_names():
        for size in ("small", "full"):
            cfg = RunConfig(workload=name, size=size)
            t0 = time.perf_counter()
            c = count_flops(get_workload(name).model_fn(cfg))
            rows.append({"workload": name, "size": size, "batch_size": cfg.batch_size,
                         "forward_flops_per_example": c.per_example,
                         "train_step_flops": c.train_step(cfg.batch_size),
                         "complete": c.complete, "uncounted": list(c.uncounted),
                         "count_s": time.perf_counter() - t0})
            keras.backend.clear_session()
    return rows


def peak_rows(budget_s: float) -> tuple:
    hw = hardware.detect()
    ghz = datasheet.cpu_ghz()
    rows = []
    t0 = time.perf_counter()
    for dtype in datasheet.DTYPES:
        p = measure_peak(dtype, budget_s=budget_s, cache=False)
        gpu_names = [d for d in (p.device.split(": ", 1)[-1],) if p.device.startswith("GPU")]
        if gpu_names:
            published = datasheet.datasheet_peak(gpu_names[0], dtype)
        else:
            published = datasheet.cpu_peak(len(os.sched_getaffinity(0)), ghz, hw.cpu_flags, dtype)
        rows.append({**p.to_dict(), "published_flops_per_s": published[0] if published else None,
                     "published_source": published[1] if published else None})
    return rows, time.perf_counter() - t0, ghz


def markdown(result: dict) -> str:
    lines = [
        "# How far from the limit: model FLOPs and this machine's peak",
        "",
        f"Machine: {result['machine']}; Python {result['python']}, TensorFlow {result['tensorflow']}, "
        f"Keras {result['keras']}; {result['date']}.",
        f"Command: `{result['command']}` ({result['wall_s']:.0f} s). Other programs shared this machine "
        f"(1-minute load average {result['load_average_1min'][0]:.1f} at the start, "
        f"{result['load_average_1min'][1]:.1f} at the end, on {os.cpu_count()} cores).",
        "",
        "## count_flops against the papers",
        "",
        "A multiply-add is 2 FLOPs in `count_flops`; the papers' \"FLOPs\" are multiply-adds, so the "
        "column to compare is `per_example / 2`. TF's estimate is the profiler's `float_operation` "
        "count of the traced forward pass at batch 1 (it has no statistic for ReLU, pooling or "
        "batch norm, and counts BiasAdd).",
        "",
        "| model | paper (multiply-adds) | count_flops / 2 | ratio | complete | TF estimate / 2 | TF / ours | count time | TF estimate time |",
        "|---|---:|---:|---:|---|---:|---:|---:|---:|",
    ]
    for r in result["papers"]:
        est = r["tf_estimate_flops"]
        lines.append(
            f"| {r['model']} | {format_flops(r['paper_multiply_adds'], '')} ({r['paper_source']}) | "
            f"{format_flops(r['count_multiply_adds'], '')} | {r['ratio_to_paper']:.3f} | "
            f"{'yes' if r['complete'] else 'no: ' + ', '.join(r['uncounted'])} | "
            f"{format_flops(est / 2 if est else None, '')} | "
            f"{r['tf_vs_count']:.3f} | {r['count_s'] * 1000:.0f} ms | {r['tf_estimate_s']:.1f} s |"
            if est else
            f"| {r['model']} | {format_flops(r['paper_multiply_adds'], '')} | "
            f"{format_flops(r['count_multiply_adds'], '')} | {r['ratio_to_paper']:.3f} | "
            f"{r['complete']} | n/a | n/a | {r['count_s'] * 1000:.0f} ms | {r['tf_estimate_s']:.1f} s |")
    lines += [
        "",
        "## Built-in workloads",
        "",
        "Forward FLOPs per example; a training step is 3x forward (PaLM's MFU convention) at the "
        "workload's default batch size.",
        "",
        "| workload | size | forward per example | batch | train step | complete | count time |",
        "|---|---|---:|---:|---:|---|---:|",
    ]
    for r in result["workloads"]:
        lines.append(
            f"| {r['workload']} | {r['size']} | {format_flops(r['forward_flops_per_example'])} | "
            f"{r['batch_size']} | {format_flops(r['train_step_flops'])} | "
            f"{'yes' if r['complete'] else 'no'} | {r['count_s'] * 1000:.0f} ms |")
    lines += [
        "",
        f"## Peak per dtype on this machine (`measure_peak`, budget {result['budget_s']} s each; "
        f"all three took {result['peak_wall_s']:.1f} s)",
        "",
        "| device | dtype | measured | n | time | published | source |",
        "|---|---|---:|---:|---:|---:|---|",
    ]
    for r in result["peaks"]:
        measured = format_flops(r["flops_per_s"], "FLOP/s") if r["flops_per_s"] else f"not measured: {r['reason']}"
        lines.append(
            f"| {r['device']} | {r['dtype']} | {measured} | {r['n']} | {r['seconds']:.2f} s | "
            f"{format_flops(r['published_flops_per_s'], 'FLOP/s')} | {r['published_source'] or 'none known'} |")
    lines += ["", "The CPU figure is a formula (cores x clock x FLOPs per cycle from the instruction "
              "flags, two vector units per core assumed), an upper bound; the measured figure is what "
              "a matmul reaches here, on a machine shared with other programs."]
    return "\n".join(lines) + "\n"


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--budget", type=float, default=1.5, help="seconds per dtype for measure_peak")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results", "limits.json"))
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    load_before = os.getloadavg()[0]
    peak_list, peak_wall, ghz = peak_rows(args.budget)      # first, before the models load the machine
    result = {
        "benchmark": "limits", "machine": hardware.describe(hardware.detect()),
        "python": platform.python_version(), "tensorflow": tf.__version__, "keras": keras.__version__,
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "command": " ".join(["python benchmarks/limits.py", *(argv if argv is not None else sys.argv[1:])]),
        "budget_s": args.budget, "cpu_ghz": ghz, "peaks": peak_list, "peak_wall_s": peak_wall,
        "papers": paper_models(), "workloads": workloads(),
    }
    result["wall_s"] = time.perf_counter() - t0
    result["load_average_1min"] = [load_before, os.getloadavg()[0]]
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as fh:
        json.dump(result, fh, indent=2)
    md = markdown(result)
    with open(os.path.splitext(args.out)[0] + ".md", "w") as fh:
        fh.write(md)
    print(md)
    return result


if __name__ == "__main__":
    main()
