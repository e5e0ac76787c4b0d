"""The peak benchmark's method checked on a real GPU without TensorFlow (JAX).

``tfwb.measure_peak`` times square matmuls in a compiled function on the step's device,
per dtype, within a small time budget, and reads a scalar to sync. The GPU machines lent to
this project have no TensorFlow, so this applies the same method with JAX (a jit-compiled
matmul, asynchronous dispatch like a ``tf.function``) and answers what a first TF run on a
GPU should check:

1. how close a 1.5 s budget per dtype comes to the steady rate of a long run (same n);
2. which n reaches the peak (n = 1024 … 16384);
3. float32 at JAX's default precision (TF32 tensor cores on Ampere and Hopper, like
   TensorFlow's default ``enable_tensor_float_32_execution(True)``) against float32 at
   ``highest`` precision (true FP32), bfloat16 and float16 — against the datasheet.

Usage (on the GPU machine): ``python benchmarks/gpu_peak.py --out DIR``; ``--dry-run`` on JAX's CPU.
"""
from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tfwb import hardware, nvml  # noqa: E402


def timed_matmuls(jax, jnp, n: int, dtype, precision, budget_s: float) -> dict:
    """Warm up, then time chained matmuls in rounds until the budget is spent: FLOP/s per round."""
    key = jax.random.PRNGKey(0)
    a = jax.random.normal(key, (n, n), dtype=jnp.float32).astype(dtype)
    b = jax.random.normal(jax.random.PRNGKey(1), (n, n), dtype=jnp.float32).astype(dtype)
    reps = 8

    @jax.jit
    def chain(x, y):
        acc = jnp.zeros((), jnp.float32)
        for _ in range(reps):
            x = jnp.matmul(x, y, precision=precision) * jnp.asarray(0.01, dtype)
            acc = acc + x[0, 0].astype(jnp.float32)
        return acc

    t0 = time.perf_counter()
    float(chain(a, b))                      # compile + warm-up
    compile_s = time.perf_counter() - t0
    rates = []
    start = time.perf_counter()
    while time.perf_counter() - start < budget_s or len(rates) < 3:
        t = time.perf_counter()
        float(chain(a, b))                  # the scalar read is the sync
        rates.append(2 * n ** 3 * reps / (time.perf_counter() - t))
        if len(rates) >= 200:
            break
    return {"n": n, "rounds": len(rates), "median_flops": statistics.median(rates), "max_flops": max(rates),
            "compile_s": compile_s, "spent_s": time.perf_counter() - t0}


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=".")
    ap.add_argument("--dry-run", action="store_true")
    args = ap.parse_args(argv)
    import jax
    import jax.numpy as jnp
    if args.dry_run:
        jax.config.update("jax_platforms", "cpu")
    dev = jax.devices()[0]
    info = nvml.gpu_info() if not args.dry_run else []
    cases = [("float32 (default precision: TF32 on Ampere/Hopper)", jnp.float32, None),
             ("float32 (highest precision: true FP32)", jnp.float32, jax.lax.Precision.HIGHEST),
             ("bfloat16", jnp.bfloat16, None), ("float16", jnp.float16, None)]
    sizes = (512, 1024) if args.dry_run else (1024, 2048, 4096, 8192, 16384)
    rows = []
    for name, dtype, precision in cases:
        for n in sizes:
            short = timed_matmuls(jax, jnp, n, dtype, precision, 0.3 if args.dry_run else 1.5)
            row = {"dtype": name, **short}
            if n == sizes[-2]:                # the steady rate: a long run at a size near the peak
                long = timed_matmuls(jax, jnp, n, dtype, precision, 1.0 if args.dry_run else 10.0)
                row["steady_median_flops"] = long["median_flops"]
            rows.append(row)
            print(f"{name:50s} n={n:5d} {short['median_flops'] / 1e12:8.1f} TFLOP/s median of "
                  f"{short['rounds']} rounds in {short['spent_s']:.2f} s (compile {short['compile_s']:.2f} s)"
                  + (f"; steady {row['steady_median_flops'] / 1e12:.1f}" if "steady_median_flops" in row else ""),
                  flush=True)
    result = {"benchmark": "matmul peak per dtype (JAX, the method of tfwb.measure_peak)",
              "device": str(dev), "nvml": [g.__dict__ if hasattr(g, "__dict__") else str(g) for g in info],
              "machine": hardware.describe(hardware.detect()), "python": platform.python_version(),
              "jax": jax.__version__, "rows": rows}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "gpu_peak.json").write_text(json.dumps(result, indent=2, default=str))
    return result


if __name__ == "__main__":
    main()
