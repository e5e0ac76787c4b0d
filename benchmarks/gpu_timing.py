"""The runner's timing loops and the GPU matching, checked on a real GPU without TensorFlow.

The GPU machines lent to this project have no TensorFlow (its CUDA 12 libraries do not fit a
run's upload), so this drives tfwb's own code with a JAX-compiled training step, the closest
analogue of a ``tf.function`` step (asynchronous dispatch, one compiled program per call):

1. **Windowed vs per-step timing.** ``tfwb.timing``'s ``windowed_loop`` and ``per_step_loop``
   (the code ``tfwb.run`` and ``tfwb.keras.Monitor`` time every step with; TensorFlow-free, so
   imported here as it is). The runner's ``read`` (``tfwb.tf.runner.train._read``: ``tf.stack``,
   one device-to-host copy for a window's losses on an accelerator) becomes ``jnp.stack``;
   a second windowed variant reads the losses one by one (what ``_read`` does on a CPU), to
   show what that one copy is worth. For MLPs of three widths (steps of about 0.1 ms to a few ms on an H100), it
   compares the throughput each mode reports with the true one: a bare loop that dispatches
   every step and waits once at the end.
2. **PCI bus ids.** ``tfwb.hardware.cuda_pci_bus_ids`` (CUDA driver, ctypes) against NVML's (``tfwb.nvml.gpu_info``), matched by
   ``tfwb.hardware.match_gpus``; and whether asking the driver made this process hold GPU
   memory (it must not: no CUDA context).

Usage (on the GPU machine): ``python benchmarks/gpu_timing.py --out DIR``; writes
``gpu_timing.json`` and ``gpu_timing.md``. ``--dry-run`` runs it on JAX's CPU backend.
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import platform
import statistics
import sys
import time
import types
from pathlib import Path
from typing import Any, Dict, List

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tfwb import hardware, nvml, timing  # noqa: E402
from tfwb.observers import StepLog  # noqa: E402

WIDTHS = (256, 1024, 4096)
BATCH = 256
DEPTH = 4


def mlp_step(width: int, jax, jnp):
    """A jitted SGD step of a DEPTH-layer MLP (width x width), batch BATCH: returns step(params, x, y)."""
    key = jax.random.PRNGKey(0)
    keys = jax.random.split(key, DEPTH + 1)
    params = [jax.random.normal(k, (width, width), jnp.float32) / math.sqrt(width) for k in keys[:DEPTH]]
    head = jax.random.normal(keys[-1], (width, 10), jnp.float32) / math.sqrt(width)

    def loss_fn(ps, x, y):
        *hidden, out = ps
        h = x
        for w in hidden:
            h = jax.nn.relu(h @ w)
        logits = h @ out
        return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(logits), y[:, None], axis=1))

    @jax.jit
    def step(ps, x, y):
        loss, grads = jax.value_and_grad(loss_fn)(ps, x, y)
        return [p - 1e-3 * g for p, g in zip(ps, grads)], loss

    xs = [jax.random.normal(jax.random.PRNGKey(i), (BATCH, width), jnp.float32) for i in range(8)]
    ys = [jax.random.randint(jax.random.PRNGKey(100 + i), (BATCH,), 0, 10) for i in range(8)]
    return step, params + [head], list(zip(xs, ys))


def measure(width: int, steps: int, rounds: int, jax, jnp) -> Dict[str, Any]:
    step_fn, params0, batches = mlp_step(width, jax, jnp)
    state = {"params": params0}

    def step(x, y):
        state["params"], loss = step_fn(state["params"], x, y)
        return loss

    def sync():
        jax.block_until_ready(state["params"])

    def batches_forever():
        while True:
            yield from batches

    for _ in range(20):                                   # compile and warm up
        step(*batches[0])
    sync()
    def stacked(values):                                  # _read on an accelerator: one copy (tf.stack there)
        return jnp.stack(values).tolist() if len(values) > 1 else [float(v) for v in values]

    def one_by_one(values):                               # _read on a CPU
        return [float(v) for v in values]

    modes = ("bare", "windowed", "windowed_one_by_one", "per_step")
    out: Dict[str, List[float]] = {m: [] for m in modes}
    for _ in range(rounds):
        for mode in modes:                                 # interleaved, so drift hits all of them
            it = batches_forever()
            if mode == "bare":
                t0 = time.perf_counter()
                loss = None
                for _ in range(steps):
                    x, y = next(it)
                    loss = step(x, y)
                float(loss)
                sync()
                out[mode].append((time.perf_counter() - t0) / steps)
                continue
            p = types.SimpleNamespace(step=step, fetch=lambda it=it: next(it), iterator=it, takes_iterator=False)
            log = StepLog()
            if mode == "per_step":
                timing.per_step_loop(p, steps, time.perf_counter, log, sync=sync)
            else:
                read = one_by_one if mode == "windowed_one_by_one" else stacked
                timing.windowed_loop(p, steps, time.perf_counter, log, sync=sync, read=read, window_s=timing.WINDOW_S)
            out[mode].append(sum(log.times_s) / len(log.times_s))
    med = {m: statistics.median(v) for m, v in out.items()}
    return {
        "width": width, "batch": BATCH, "depth": DEPTH, "steps_per_round": steps, "rounds": rounds,
        "median_step_ms": {m: v * 1e3 for m, v in med.items()},
        "per_round_step_ms": {m: [x * 1e3 for x in v] for m, v in out.items()},
        "reported_vs_true_throughput_pct": {m: 100 * (med["bare"] / med[m] - 1) for m in modes[1:]},
    }


def pci_check() -> Dict[str, Any]:
    nvml_gpus = [hardware.Gpu.of(g) for g in nvml.gpu_info()]
    pid = os.getpid()

    def held_mib() -> float:
        import pynvml
        pynvml.nvmlInit()
        try:
            total = 0.0
            for i in range(pynvml.nvmlDeviceGetCount()):
                h = pynvml.nvmlDeviceGetHandleByIndex(i)
                for proc in pynvml.nvmlDeviceGetComputeRunningProcesses(h):
                    if proc.pid == pid:
                        total += (proc.usedGpuMemory or 0) / 2**20
            return total
        finally:
            pynvml.nvmlShutdown()

    before = held_mib()
    buses = hardware.cuda_pci_bus_ids(list(range(len(nvml_gpus))))
    after = held_mib()
    tf_like = [hardware.Gpu(index=i, name=g.name, pci_bus_id=buses.get(i)) for i, g in enumerate(nvml_gpus)]
    matched = hardware.match_gpus(nvml_gpus, tf_like)
    return {
        "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
        "nvml": [{"index": g.index, "name": g.name, "pci_bus_id": g.pci_bus_id} for g in nvml_gpus],
        "cuda_driver": {str(k): v for k, v in buses.items()},
        "matched_nvml_index": [g.nvml_index for g in matched],
        "ids_equal": all(hardware.normalize_pci_bus_id(buses.get(i)) == g.pci_bus_id
                         for i, g in enumerate(nvml_gpus)),
        "gpu_memory_held_mib_before_after": [before, after],
    }


def markdown(res: Dict[str, Any]) -> str:
    lines = [f"# Windowed vs per-step timing on a real GPU (JAX step), and PCI bus ids", "",
             f"{res['date']}, {res['device']}; command: `{res['command']}`.", "",
             "Median time per step over the rounds; 'reported vs true' is the throughput a mode reports "
             "against a bare loop that waits once at the end (negative: under-reported).", "",
             "| MLP width | bare loop ms | windowed ms | windowed, losses read one by one ms | per-step ms "
             "| windowed vs true | one by one vs true | per-step vs true |",
             "|---|---|---|---|---|---|---|---|"]
    for r in res["timing"]:
        m, d = r["median_step_ms"], r["reported_vs_true_throughput_pct"]
        lines.append(f"| {r['width']} | {m['bare']:.3f} | {m['windowed']:.3f} | {m['windowed_one_by_one']:.3f} | "
                     f"{m['per_step']:.3f} | {d['windowed']:+.1f} % | {d['windowed_one_by_one']:+.1f} % | "
                     f"{d['per_step']:+.1f} % |")
    p = res.get("pci")
    if p:
        lines += ["", f"PCI bus ids: NVML {[g['pci_bus_id'] for g in p['nvml']]}, CUDA driver "
                  f"{list(p['cuda_driver'].values())}; equal: {p['ids_equal']}; matched NVML index per CUDA "
                  f"ordinal: {p['matched_nvml_index']}; GPU memory this process held before/after asking "
                  f"the driver: {p['gpu_memory_held_mib_before_after']} MiB."]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="benchmarks/results", help="folder for gpu_timing.json / .md")
    ap.add_argument("--steps", type=int, default=400)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--dry-run", action="store_true", help="JAX's CPU backend, few steps")
    args = ap.parse_args(argv)
    if args.dry_run:
        os.environ["JAX_PLATFORMS"] = "cpu"
    # First, before JAX creates a CUDA context: asking the driver must leave this process holding nothing.
    pci = None if args.dry_run else pci_check()
    import jax
    import jax.numpy as jnp

    steps, rounds = (20, 2) if args.dry_run else (args.steps, args.rounds)
    res: Dict[str, Any] = {
        "benchmark": "gpu_timing", "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "command": "python " + " ".join(sys.argv), "device": str(jax.devices()[0].device_kind),
        "jax": jax.__version__, "python": platform.python_version(),
        "timing": [measure(w, steps, rounds, jax, jnp) for w in (WIDTHS[:1] if args.dry_run else WIDTHS)],
    }
    if pci is not None:
        res["pci"] = pci
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "gpu_timing.json").write_text(json.dumps(res, indent=1) + "\n")
    (out / "gpu_timing.md").write_text(markdown(res))
    print(markdown(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
