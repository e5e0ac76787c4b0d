"""Run the tests that read the CPU under every CPU kind, and print a table of the results.

Each kind is a described machine of ``tfwb.hardware.DESCRIBED`` whose CPU stands in for the
host's (``TFWB_TEST_CPU=<name>``: ``tfwb.hardware.detect()`` then reports that CPU's model,
flags and archspec microarchitecture, with the host's cores, memory and GPUs, whatever archspec
reads on the host; a run's fingerprint records them, so a tune judges that CPU too;
tests/conftest.py refuses an unknown name).
TensorFlow itself still runs on the real CPU: the stand-in changes only what tfwb believes,
so a test that passes here under every kind makes no assumption about the host's CPU kind.

The kinds: the four x86 kinds of DESCRIBED (AVX2; AVX-512 without BF16, Colab's usual CPU;
AVX-512 BF16 without AMX; AVX-512 BF16/FP16 with AMX), an Arm server CPU and Apple silicon.
The files: the package's expectation, diagnosis, tune-candidate, search-space, advice, device
and hardware tests. One pytest process per kind, one after the other (about 1.5 min each on
2 AVX2 cores).

Usage:
    python tests/cpu_kinds.py [--kind NAME ...] [--files FILE ...] [extra pytest args]
    python tests/cpu_kinds.py --files tfwb --doctest-modules      # every ``>>>`` example in tfwb
    TFWB_TEST_CPU=cpu-2core-avx512-amx python3 tests/run_all.py   # the README's command, one kind

Processes the tests start (the CLI, notebook kernels, run_all.py's legs) inherit the variable,
so they believe the same CPU.

Exit status is non-zero when any kind has a failure or an error.
"""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List, Optional, Tuple

ROOT = Path(__file__).resolve().parents[1]

#: CPU kind -> the described machine whose CPU stands in for the host's.
KINDS: Dict[str, str] = {
    "AVX2 (AMD EPYC Zen 2)": "binder-2core-avx2",
    "AVX-512, no BF16 (Colab's Xeon)": "colab-t4",
    "AVX-512 BF16, no AMX (AMD EPYC Zen 4)": "cpu-2core-avx512-bf16",
    "AVX-512 BF16/FP16 + AMX (Sapphire Rapids)": "cpu-2core-avx512-amx",
    "Arm server (Graviton3, Neoverse V1)": "arm-graviton3",
    "Apple silicon (M2)": "apple-m2",
}

#: The test files whose code paths read the CPU's flags (expectations, diagnosis, tune
#: candidates, the search space, advice, devices, hardware).
FILES: Tuple[str, ...] = ("tests/test_expect.py", "tests/test_diagnosis.py", "tests/test_tune.py",
                          "tests/test_search.py", "tests/test_advice.py", "tests/test_devices.py",
                          "tests/test_hardware.py")

_COUNT = re.compile(r"(\d+) (passed|failed|errors?|skipped|xfailed|xpassed)")


def counts(summary: str) -> Dict[str, int]:
    """pytest's last summary line as counts, e.g. ``{"passed": 3, "failed": 1}``.

    Example:
        >>> counts("=== 1 failed, 478 passed, 2 errors in 3.56s ===")
        {'failed': 1, 'passed': 478, 'errors': 2}
    """
    out: Dict[str, int] = {}
    for n, what in _COUNT.findall(summary):
        out["errors" if what.startswith("error") else what] = int(n)
    return out


def run_kind(machine: str, files: List[str], extra: List[str]) -> Tuple[Dict[str, int], float, str]:
    """One pytest run with ``machine``'s CPU standing in; its counts, seconds and output."""
    env = dict(os.environ, TFWB_TEST_CPU=machine)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + [p for p in [env.get("PYTHONPATH")] if p])
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *files, *extra]
    start = time.monotonic()
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    took = time.monotonic() - start
    text = proc.stdout + proc.stderr
    lines = [line for line in text.splitlines() if _COUNT.search(line)]
    found = counts(lines[-1]) if lines else {}
    if proc.returncode != 0 and not found.get("failed") and not found.get("errors"):
        found["errors"] = found.get("errors", 0) + 1          # pytest stopped before its summary
    return found, took, text


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kind", action="append", metavar="NAME",
                        help="a described machine (repeatable); default: the six kinds above")
    parser.add_argument("--files", nargs="+", default=list(FILES), help="test files to run")
    args, extra = parser.parse_known_args(argv)
    machines = args.kind or list(KINDS.values())
    labels = {m: k for k, m in KINDS.items()}
    rows = []
    for machine in machines:
        found, took, text = run_kind(machine, args.files, extra)
        rows.append((labels.get(machine, machine), machine, found, took))
        print(f"{machine}: {', '.join(f'{n} {w}' for w, n in found.items()) or 'no result'} ({took:.0f} s)",
              flush=True)
        if found.get("failed") or found.get("errors"):
            print("\n".join(text.splitlines()[-40:]), flush=True)
    print(f"\nFiles: {' '.join(args.files)}\n")
    print("| CPU kind | TFWB_TEST_CPU | passed | failed | errors | skipped | time |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for label, machine, found, took in rows:
        print(f"| {label} | {machine} | {found.get('passed', 0)} | {found.get('failed', 0)} | "
              f"{found.get('errors', 0)} | {found.get('skipped', 0)} | {took:.0f} s |")
    return 1 if any(f.get("failed") or f.get("errors") for _, _, f, _ in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
