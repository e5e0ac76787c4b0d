"""Scaling: 1 vs 2 replicas (MirroredStrategy) and 1 vs 2 workers (a local MultiWorkerMirroredStrategy cluster).

Measures, on this machine, with one configuration (default: ``images`` at full size,
``data_source="memory"`` so input is not a factor, global batch 64):

- throughput (examples/s at the median step) of ``default``, ``mirrored`` with 1 and 2
  replicas and ``multi_worker`` with 1 and 2 workers, next to the ideal (linear scaling:
  twice the one-replica throughput, what two GPUs or two hosts would give if nothing
  were lost to communication). Rounds alternate the configurations so drift hits all;
  each figure is the median over rounds of the run's median step;
- the cluster's start time (processes started -> every worker has imported TensorFlow,
  joined the cluster and built the model) and its time to the first step;
- the failure path: a two-worker run whose worker 1 is SIGKILLed at step 3: seconds from
  the kill to the failed result, worker processes left, ports still taken;
- loss equivalence: the largest per-step difference between the losses of one device,
  two mirrored replicas and two workers (same seed, same batches), on ``mlp``, whose
  data are fixed (``images`` augments with random ops, so its batches differ run to run);
- where the machine allows (root, ``ip netns``): the same two-worker cluster across two
  network namespaces joined by a veth pair, on their own addresses.

Writes ``benchmarks/results/scaling.json`` and ``scaling.md`` (``--out`` changes the stem).

Usage: python benchmarks/scaling.py [--workload images] [--size full] [--steps 30] [--rounds 2]
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import time
import uuid

import tfwb
import tfwb.tf  # noqa: F401  (quiet TF import)
from tfwb import RunConfig, hardware, stats, cluster_spec
from tfwb.observers import Observer
from tfwb.tf.cluster.processes import alive

HERE = os.path.dirname(os.path.abspath(__file__))


class KillWorker(Observer):
    """In the parent, on the chief's reported steps: SIGKILL worker 1 at ``step``."""

    def __init__(self, step: int = 3) -> None:
        self.step, self.sent_at = step, None

    def on_step_end(self, run, step):
        if step == self.step and self.sent_at is None:
            self.sent_at = time.perf_counter()
            os.kill(run.extras["cluster"]["pids"][1], signal.SIGKILL)


def failure_figures(base: RunConfig) -> dict:
    killer = KillWorker()
    r = tfwb.run(base.replace(strategy="multi_worker", workers=2, steps=100000, label="killed"), observers=[killer])
    seen = time.perf_counter() - killer.sent_at if killer.sent_at else None
    facts = r.extras.get("cluster", {})
    ports = [cluster_spec.split_address(a)[1] for a in facts.get("addresses", [])]
    return {"status": r.status, "error": r.error, "seconds_to_clear_error": seen,
            "processes_left": sum(alive(p) for p in facts.get("pids", [])),
            "ports_still_taken": sum(not cluster_spec.port_free(p) for p in ports)}


def netns_figures(base: RunConfig) -> dict:
    """The two-worker cluster across two network namespaces (``None`` figures where not allowed)."""
    if os.geteuid() != 0 or not shutil.which("ip"):
        return {"skipped": "needs root and iproute2's ip"}
    tag = uuid.uuid4().hex[:6]
    a, b = f"tfwb-a-{tag}", f"tfwb-b-{tag}"
    hosts = ("10.213.250.1", "10.213.250.2")

    def ip(*args, check=True):
        return subprocess.run(["ip", *args], capture_output=True, text=True, check=check, timeout=30)

    if ip("netns", "add", a, check=False).returncode != 0:
        return {"skipped": "ip netns is not allowed here"}
    procs = []
    try:
        ip("netns", "add", b)
        ip("link", "add", f"va{tag}", "type", "veth", "peer", "name", f"vb{tag}")
        for ns, dev, host in ((a, f"va{tag}", hosts[0]), (b, f"vb{tag}", hosts[1])):
            ip("link", "set", dev, "netns", ns)
            ip("-n", ns, "addr", "add", f"{host}/24", "dev", dev)
            ip("-n", ns, "link", "set", dev, "up")
            ip("-n", ns, "link", "set", "lo", "up")
        spec = {"worker": [f"{hosts[0]}:23456", f"{hosts[1]}:23456"]}
        cfg = base.replace(strategy="multi_worker", workers=2)
        t0 = time.perf_counter()
        for i, ns in enumerate((a, b)):
            env = {**os.environ, "TF_CONFIG": json.dumps({"cluster": spec, "task": {"type": "worker", "index": i}})}
            procs.append(subprocess.Popen(["ip", "netns", "exec", ns, sys.executable, "-m", "tfwb", "worker",
                                           "--config", "-", "--json"], env=env, stdin=subprocess.PIPE,
                                          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True))
        for p in procs:                 # every worker gets its config before any waits for the others
            p.stdin.write(json.dumps(cfg.to_dict()))
            p.stdin.close()
        outs = [(p.stdout.read(), p.wait(timeout=900)) for p in procs]
        wall = time.perf_counter() - t0
        results = [tfwb.RunResult.from_json(out.strip().splitlines()[-1]) for out, _ in outs]
        return {"addresses": spec["worker"], "wall_s": wall, "status": [r.status for r in results],
                "replicas": results[0].replicas, "median_step_s": [r.median_step_s for r in results],
                "throughput_per_s": results[0].throughput_per_s,
                "losses_identical": results[0].losses == results[1].losses}
    finally:
        for p in procs:
            p.kill()
        ip("netns", "del", a, check=False)
        ip("netns", "del", b, check=False)


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workload", default="images")
    ap.add_argument("--size", default="full", choices=("small", "full"))
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--out", default=os.path.join(HERE, "results", "scaling"))
    args = ap.parse_args(argv)
    tfwb.setup_devices(2)                                   # before TF's runtime: 2 logical CPU devices
    t_start = time.perf_counter()
    load_start = os.getloadavg()
    base = RunConfig(workload=args.workload, size=args.size, batch_size=args.batch_size, steps=args.steps,
                     warmup_steps=5, data_source="memory", seed=0)
    configs = {
        "default (1 device)": base.replace(strategy="default"),
        "mirrored, 1 replica": base.replace(strategy="mirrored", replicas=1),
        "mirrored, 2 replicas": base.replace(strategy="mirrored", replicas=2),
        "multi_worker, 1 worker": base.replace(strategy="multi_worker", workers=1),
        "multi_worker, 2 workers": base.replace(strategy="multi_worker", workers=2),
    }
    runs = {name: [] for name in configs}
    for r in range(args.rounds):
        for name, cfg in configs.items():
            res = tfwb.run(cfg)
            runs[name].append(res)
            extra = ""
            if "cluster" in res.extras:
                extra = f", cluster start {res.extras['cluster']['start_s']:.1f} s"
            print(f"round {r + 1}: {name}: {res.summary()}{extra}", flush=True)
            if res.status != "ok":
                raise SystemExit(f"{name} failed: {res.error}")
    rows = {}
    for name, results in runs.items():
        med = stats.median([x.median_step_s for x in results])
        rows[name] = {"replicas": results[0].replicas, "median_step_s": med,
                      "step_iqr_s": list(stats.iqr([t for x in results for t in x.step_times_s])),
                      "throughput_per_s": base.batch_size / med}
        if "cluster" in results[0].extras:
            rows[name]["cluster_start_s"] = [x.extras["cluster"]["start_s"] for x in results]
            rows[name]["first_step_s"] = [x.extras["cluster"]["start_s"] + x.warmup_times_s[0] for x in results]
            rows[name]["worker_median_step_s"] = [x.extras["cluster"]["worker_median_step_s"] for x in results]
    pairs = (("mirrored, 1 replica", "mirrored, 2 replicas"), ("multi_worker, 1 worker", "multi_worker, 2 workers"))
    for single, double in pairs:
        one, two = rows[single], rows[double]
        two["ideal_throughput_per_s"] = 2 * one["throughput_per_s"]
        two["speedup_vs_1"] = two["throughput_per_s"] / one["throughput_per_s"]
        two["scaling_efficiency"] = two["speedup_vs_1"] / 2
    same = RunConfig(workload="mlp", size="small", batch_size=64, steps=20, warmup_steps=1, seed=0)
    eq = {name: tfwb.run(same.replace(**kw)) for name, kw in (
        ("default (1 device)", dict(strategy="default")),
        ("mirrored, 2 replicas", dict(strategy="mirrored", replicas=2)),
        ("multi_worker, 2 workers", dict(strategy="multi_worker", workers=2)))}
    ref_losses = eq["default (1 device)"].warmup_losses + eq["default (1 device)"].losses
    equivalence = {name: max(abs(a - b) for a, b in zip(r.warmup_losses + r.losses, ref_losses))
                   for name, r in eq.items() if name != "default (1 device)"}
    failure = failure_figures(base)
    print(f"failure: {failure}", flush=True)
    netns = netns_figures(base)
    print(f"two namespaces: {netns}", flush=True)
    result = {
        "benchmark": "scaling", "config": base.to_dict(), "rounds": args.rounds, "rows": rows,
        "loss_equivalence_largest_difference": equivalence, "loss_equivalence_config": same.to_dict(),
        "losses_compared": len(ref_losses), "failure": failure, "two_namespaces": netns,
        "machine": hardware.describe(hardware.detect()), "python": platform.python_version(),
        "load_average_start": load_start, "load_average": os.getloadavg(),
        "date": datetime.date.today().isoformat(),
        "wall_s": time.perf_counter() - t_start,
        "command": "python benchmarks/scaling.py " + " ".join(argv if argv is not None else sys.argv[1:]),
    }
    with open(args.out + ".json", "w") as fh:
        json.dump(result, fh, indent=2)
    with open(args.out + ".md", "w") as fh:
        fh.write(markdown(result))
    print(markdown(result))
    return result


def markdown(r: dict) -> str:
    cfg = r["config"]
    lines = [
        "# Scaling: 1 vs 2 replicas (mirrored) and 1 vs 2 workers (multi_worker)", "",
        f"Machine: {r['machine']}; Python {r['python']}; {r['date']}; load average (1, 5, 15 min) "
        f"{', '.join(f'{v:.1f}' for v in r['load_average_start'])} at the start, "
        f"{', '.join(f'{v:.1f}' for v in r['load_average'])} at the end. Command: `{r['command']}` "
        f"({r['wall_s'] / 60:.1f} min). Workload `{cfg['workload']}`, size {cfg['size']}, global batch "
        f"{cfg['batch_size']}, `data_source=\"memory\"` (no input cost), {cfg['steps']} measured steps after "
        f"{cfg['warmup_steps']} warm-up, {r['rounds']} rounds alternating the configurations; each figure is the "
        "median over rounds of the run's median step.", "",
        "| configuration | replicas | median step | examples/s | ideal (linear) | speedup vs 1 | cluster start |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for name, row in r["rows"].items():
        ideal = f"{row['ideal_throughput_per_s']:,.0f}" if "ideal_throughput_per_s" in row else "—"
        speed = f"{row['speedup_vs_1']:.2f}x" if "speedup_vs_1" in row else "—"
        start = (", ".join(f"{s:.1f} s" for s in row["cluster_start_s"]) if "cluster_start_s" in row else "—")
        lines.append(f"| {name} | {row['replicas']} | {row['median_step_s'] * 1e3:.1f} ms | "
                     f"{row['throughput_per_s']:,.0f} | {ideal} | {speed} | {start} |")
    f = r["failure"]
    lines += ["", f"Ideal: twice the one-replica (one-worker) throughput, what a second GPU or host would add if "
              "nothing were lost to communication. Here the second replica or worker brings no compute: both share "
              "this machine's cores (two mirrored replicas are logical devices on the same cores; two workers are "
              "pinned to one core each), so the hardware's own ceiling is 1x, and what is lost below it is the "
              "all-reduce (in process for mirrored; gRPC over loopback between processes for multi_worker). "
              "A speedup above 1x on a machine that other processes load means more CPU *share*, not more "
              "compute: the kernel shares the cores among runnable threads, and two replicas or two worker "
              "processes bring more threads to that queue than one.", "",
              "## Correctness and failure", "",
              f"- Loss equivalence (`mlp` small, fixed data, same seed and global batch 64, {r['losses_compared']} "
              "steps incl. warm-up), largest per-step difference from one device: "
              + "; ".join(f"{k}: {v:.2e}" for k, v in r["loss_equivalence_largest_difference"].items()) + ".",
              f"- A worker SIGKILLed at step 3 of a two-worker run: status `{f['status']}` "
              f"{f['seconds_to_clear_error']:.2f} s after the kill; worker processes left: {f['processes_left']}; "
              f"ports still taken: {f['ports_still_taken']}. Message: \"{f['error']}\"."]
    n = r["two_namespaces"]
    if "skipped" in n:
        lines.append(f"- Two network namespaces: skipped ({n['skipped']}).")
    else:
        lines.append(f"- Two workers in two network namespaces joined by a veth pair ({', '.join(n['addresses'])}): "
                     f"status {n['status']}, {n['replicas']} replicas, median step "
                     f"{', '.join(f'{s * 1e3:.1f} ms' for s in n['median_step_s'])}, "
                     f"{n['throughput_per_s']:,.0f} examples/s, identical losses on both: {n['losses_identical']}; "
                     f"{n['wall_s']:.1f} s from start to both results.")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
