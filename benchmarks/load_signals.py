"""Which load signal decides separate-run comparisons on a loaded machine without false verdicts.

Runs a real small workload (``tfwb.run`` of ``mlp``, small, data in memory; ``--steps`` measured
steps) ``--runs`` times under each load pattern of ``tests/loadgen.py`` (quiet, bursty, one,
both; the load lasts for its pattern's block), then judges every pair of two of those runs
(baseline the earlier, candidate the later, across patterns too: a quiet baseline against a loaded
candidate is the Workbench's usual case) three ways:

* A/A: the pair as it is (the same configuration twice): a "faster"/"slower" verdict is false.
* a known 1.5x and a known 3x change: the candidate's measured step times multiplied by 1.5 or 3
  (an exact, synthetic change on the real run's times and its real load readings; the right
  verdict is "slower").

Each with ``tfwb.stats.compare`` and the default noise band, and each load signal as the busy rule:

* ``none``: no load rule at all (what the raw runs say);
* ``share``: today's rule, other programs' CPU share (``tfwb.analysis.pairs.other_cpu_pct``) at or
  over ``stats.BUSY_OTHER_CPU_PCT`` makes the pair "cannot tell";
* ``psi_some``, ``cgroup_some``, ``run_wait``, ``cpu_idle`` (1 - ``cpu_per_wall``): the run's delay
  from ``RunResult.extras["delay"]`` (``tfwb.utilization.pressure``), plus steal, through
  ``stats.compare(delay=...)``: busy at or over a threshold (each of ``THRESHOLDS``), and then
  decided only for a ratio the slower side's delay cannot explain (``stats.delay_explains``).

It keeps the rule that decides most known changes right with A/A false at most 5 % and the delay's
bound holding (an A/A pair's ratio beyond ``stats.delay_bound`` of its slower side, widened by the
default band, in at most 5 % of the pairs), and says which constants to set
(``tfwb.analysis.pairs.DELAY_SIGNALS``, ``tfwb.stats.DELAY_BUSY_SHARE``).
Pairs share runs, so they are not independent: read the rates as a screen, not a p-value.

Writes ``benchmarks/results/load_signals_<cpu kind>.{json,md}`` naming the machine.

Usage (from the repository root; a quiet machine, about 4 x runs x 15 s):
    PYTHONPATH=$PWD TF_CPP_MIN_LOG_LEVEL=2 python benchmarks/load_signals.py --runs 6 --steps 500
"""
from __future__ import annotations

import argparse
import itertools
import json
import os
import sys
import time
from pathlib import Path
from typing import Dict, List, Optional, Tuple

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

PATTERNS = ("quiet", "bursty", "one", "both")
FACTORS = (1.0, 1.5, 3.0)
THRESHOLDS = (0.02, 0.05, 0.1, 0.2, 0.3, 0.5)
SIGNALS = ("psi_some", "cgroup_some", "run_wait", "cpu_idle")
MAX_AA_FALSE = 0.05


def cpu_kind() -> str:
    """A short name for this CPU's kind, from its flags (``amx``, ``avx512``, ``avx2``, ``arm``, ``other``)."""
    from tfwb import hardware

    hw = hardware.detect()
    flags = set(hw.cpu_flags)
    for kind, flag in (("amx", "amx_tile"), ("avx512", "avx512f"), ("avx2", "avx2")):
        if flag in flags:
            return kind
    import platform

    return "arm" if platform.machine().lower() in ("arm64", "aarch64") else "other"


def one_run(steps: int, pattern: str) -> dict:
    import tfwb
    from tfwb.analysis import pairs

    r = tfwb.run(tfwb.RunConfig(workload="mlp", size="small", data_source="memory", steps=steps, warmup_steps=5))
    if not r.ok:
        raise RuntimeError(f"run failed: {r.error}")
    delay = dict(r.extras.get("delay") or {})
    return {"pattern": pattern, "step_times_s": list(r.step_times_s), "median_ms": 1e3 * r.median_step_s,
            "other_cpu_pct": pairs.other_cpu_pct(r), "delay": delay}


def stand_in_run(steps: int, pattern: str, n: int = 384) -> dict:
    """A run without TensorFlow (``--stand-in``): ``steps`` timed steps of a NumPy ``n`` x ``n`` matmul
    (BLAS threads as ``OPENBLAS_NUM_THREADS`` says), read by the same probes as ``tfwb.run``'s
    measured steps (``start_delay_probe``, ``start_load_probe``). For a machine without TensorFlow."""
    import numpy as np
    from tfwb.utilization import start_delay_probe, start_load_probe

    a = np.random.default_rng(0).standard_normal((n, n)).astype(np.float32)
    for _ in range(5):
        a @ a
    others, waited = start_load_probe(), start_delay_probe()
    times = []
    for _ in range(steps):
        t = time.perf_counter()
        for _ in range(4):
            a @ a
        times.append(time.perf_counter() - t)
    delay, share = waited(), others()
    return {"pattern": pattern, "step_times_s": times, "median_ms": 1e3 * sorted(times)[len(times) // 2],
            "other_cpu_pct": None if share is None else round(100 * share, 1), "delay": delay}


def signal_of(run: dict, signal: str) -> Optional[float]:
    """A run's delay (0..1) by ``signal``, as ``tfwb.analysis.pairs.delay_from`` reads it (steal added, the
    machine-wide shares times the cores); ``cpu_idle`` is 1 - ``cpu_per_wall``, plus steal."""
    from tfwb.analysis import pairs

    d = run["delay"]
    if signal != "cpu_idle":
        return pairs.delay_from(d, (signal,))
    if d.get("cpu_per_wall") is None:
        return None
    return pairs.delay_from({**d, "cpu_idle": 1.0 - d["cpu_per_wall"]}, ("cpu_idle",))


def judge(runs: List[dict], rule: str, threshold: Optional[float]) -> dict:
    """Verdict counts of every pair under ``rule`` (``none``, ``share`` or a signal at ``threshold``)."""
    from tfwb import stats

    saved = stats.DELAY_BUSY_SHARE
    counts: Dict[str, Dict[str, int]] = {str(f): {"right": 0, "wrong": 0, "cannot": 0, "nodiff": 0, "n": 0}
                                         for f in FACTORS}
    violations = aa_loaded = 0
    try:
        if threshold is not None:
            stats.DELAY_BUSY_SHARE = threshold
        for a, b in itertools.combinations(runs, 2):
            for f in FACTORS:
                kw: dict = {}
                if rule == "share":
                    kw["other_cpu_pct"] = (a["other_cpu_pct"], b["other_cpu_pct"])
                elif rule != "none":
                    kw["delay"] = (signal_of(a, rule), signal_of(b, rule))
                c = stats.compare(a["step_times_s"], [t * f for t in b["step_times_s"]], **kw)
                row = counts[str(f)]
                row["n"] += 1
                if c.verdict in (stats.FASTER, stats.SLOWER):
                    right = f > 1 and c.verdict == stats.SLOWER
                    row["right" if right else "wrong"] += 1
                elif c.verdict in stats.CANNOT_TELL or c.verdict == stats.TOO_FEW:
                    row["cannot"] += 1
                else:
                    row["nodiff"] += 1
                if f == 1.0 and rule in SIGNALS and None not in kw["delay"]:
                    slow = kw["delay"][0] if c.speedup > 1 else kw["delay"][1]
                    factor = max(c.speedup, 1 / c.speedup)
                    aa_loaded += max(kw["delay"]) >= stats.DELAY_BUSY_SHARE
                    violations += factor > stats.delay_bound(slow) * (1 + stats.DEFAULT_NOISE.pct / 100)
    finally:
        stats.DELAY_BUSY_SHARE = saved
    aa = counts["1.0"]
    known = [counts[str(f)] for f in FACTORS if f > 1]
    return {"rule": rule, "threshold": threshold, "counts": counts,
            "aa_false": aa["wrong"] / aa["n"] if aa["n"] else None,
            "detected": sum(k["right"] for k in known) / max(1, sum(k["n"] for k in known)),
            "detected_1.5": counts["1.5"]["right"] / max(1, counts["1.5"]["n"]),
            "detected_3.0": counts["3.0"]["right"] / max(1, counts["3.0"]["n"]),
            "known_wrong": sum(k["wrong"] for k in known),
            "aa_over_bound": violations, "aa_pairs": aa["n"]}


def evaluate(runs: List[dict]) -> Tuple[List[dict], Optional[dict]]:
    """Every rule's figures, and the one kept: most known changes decided right with A/A false <= 5 %, no
    known change called faster, and (for a delay signal) A/A ratios beyond the delay's bound in at most 5 % of
    the pairs: a signal whose bound fails is no bound, whatever this sample's verdicts."""
    rules = [judge(runs, "none", None), judge(runs, "share", None)]
    for signal in SIGNALS:
        if any(signal_of(r, signal) is None for r in runs):
            continue
        rules += [judge(runs, signal, t) for t in THRESHOLDS]
    ok = [r for r in rules if r["aa_false"] is not None and r["aa_false"] <= MAX_AA_FALSE and r["known_wrong"] == 0
          and (r["rule"] not in SIGNALS or r["aa_over_bound"] <= MAX_AA_FALSE * r["aa_pairs"])]
    best = max(ok, key=lambda r: (r["detected"], -(r["threshold"] or 0))) if ok else None
    return rules, (best if best and best["detected"] > 0 else None)


def pct(x: Optional[float]) -> str:
    return "–" if x is None else f"{100 * x:.0f} %"


def markdown(out: dict) -> str:
    lines = [f"# Load signals on {out['machine']}", "", f"Command: `{out['command']}`", "",
             f"Workload: {out['workload']}; {len(out['runs'])} runs.", "",
             f"{out['note']}", "",
             f"Load average (1 min) at the start {out['load_average_1min']['at_start']}, at the end "
             f"{out['load_average_1min']['end']} on {out['cores']} cores.", "",
             "## Runs", "", "| pattern | median step (ms) | share % | psi_some | cgroup_some | run_wait | cpu_per_wall | steal |",
             "|---|---|---|---|---|---|---|---|"]
    for r in out["runs"]:
        d = r["delay"]
        lines.append(f"| {r['pattern']} | {r['median_ms']:.2f} | {r['other_cpu_pct'] if r['other_cpu_pct'] is None else round(r['other_cpu_pct'])} | "
                     + " | ".join(pct(d.get(k)) for k in ("psi_some", "cgroup_some", "run_wait", "cpu_per_wall", "steal")) + " |")
    lines += ["", "## Rules (every pair of runs; known changes multiply the candidate's step times)", "",
              "| rule | threshold | A/A false | 1.5x right | 3x right | known wrong | A/A over the bound |",
              "|---|---|---|---|---|---|---|"]
    for r in out["rules"]:
        lines.append(f"| {r['rule']} | {'–' if r['threshold'] is None else r['threshold']} | {pct(r['aa_false'])} | "
                     f"{pct(r['detected_1.5'])} | {pct(r['detected_3.0'])} | {r['known_wrong']} | "
                     f"{r['aa_over_bound'] if r['rule'] in SIGNALS else '–'} of {r['aa_pairs']} |")
    best = out["kept"]
    lines += ["", "Kept: " + (f"{best['rule']} at {best['threshold']} (A/A false {pct(best['aa_false'])}, "
                              f"1.5x {pct(best['detected_1.5'])}, 3x {pct(best['detected_3.0'])})"
                              if best else "none: no rule decided a known change right with A/A false at or under 5 %, "
                                           "no known change called faster and the delay's bound holding")]
    if best and best["rule"] in SIGNALS:
        lines += ["", f"To use it: `tfwb.analysis.pairs.DELAY_SIGNALS` starting with `{best['rule']!r}` "
                      f"(now {out['delay_signals']}) and `tfwb.stats.DELAY_BUSY_SHARE = {best['threshold']}` "
                      f"(now {out['delay_busy_share']})."]
    return "\n".join(lines) + "\n"


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=6, help="runs per load pattern")
    parser.add_argument("--steps", type=int, default=500, help="measured steps per run")
    parser.add_argument("--patterns", default=",".join(PATTERNS))
    parser.add_argument("--note", default="", help="what the machine was doing (e.g. 'shared with 7 other jobs')")
    parser.add_argument("--stand-in", action="store_true",
                        help="time a NumPy matmul step instead of tfwb.run (a machine without TensorFlow)")
    parser.add_argument("--rejudge", default=None, metavar="JSON",
                        help="judge the runs of an earlier result file again (no new runs) with the rules as they are now")
    parser.add_argument("--out", default=None, help="path without suffix (default benchmarks/results/load_signals_<kind>)")
    args = parser.parse_args(argv)
    patterns = args.patterns.split(",")
    bad = [p for p in patterns if p not in PATTERNS]
    if bad:
        parser.error(f"--patterns {','.join(bad)}: not a pattern; allowed: {', '.join(PATTERNS)}")
    from loadgen import Load
    from tfwb import hardware, stats
    from tfwb.analysis import pairs

    if args.rejudge:
        earlier = json.loads(Path(args.rejudge).read_text(encoding="utf-8"))
        rules, best = evaluate(earlier["runs"])
        earlier.update(rules=rules, kept=best, delay_signals=list(pairs.DELAY_SIGNALS),
                       delay_busy_share=stats.DELAY_BUSY_SHARE)
        path = args.out or args.rejudge[:-len(".json")]
        Path(path + ".json").write_text(json.dumps(earlier, indent=1) + "\n", encoding="utf-8")
        Path(path + ".md").write_text(markdown(earlier), encoding="utf-8")
        print(markdown(earlier))
        return 0
    load_start = os.getloadavg()[0]
    run = stand_in_run if args.stand_in else one_run
    run(10, "warm-up")                                # TensorFlow's first start, not measured
    runs: List[dict] = []
    for pattern in patterns:
        with Load(pattern, duration_s=min(3600.0, 60.0 * args.runs + 120)):
            time.sleep(1.0)
            for k in range(args.runs):
                runs.append(run(args.steps, pattern))
                r = runs[-1]
                print(f"{pattern:7s} run {k + 1}: {r['median_ms']:.2f} ms, share {r['other_cpu_pct']}, "
                      f"delay {r['delay']}", flush=True)
    rules, best = evaluate(runs)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    out = {"machine": hardware.describe(hardware.detect()), "cpu_kind": cpu_kind(), "cores": cores,
           "workload": "stand-in: NumPy matmul step" if args.stand_in else "tfwb.run: mlp, small, data in memory",
           "note": args.note or "No note given on what else the machine ran.",
           "load_average_1min": {"at_start": round(load_start, 2), "end": round(os.getloadavg()[0], 2)},
           "command": "python " + " ".join([os.path.relpath(__file__, ROOT)] + (argv if argv is not None else sys.argv[1:])),
           "runs": runs, "rules": rules, "kept": best,
           "delay_signals": list(pairs.DELAY_SIGNALS), "delay_busy_share": stats.DELAY_BUSY_SHARE}
    path = args.out or str(ROOT / "benchmarks" / "results" / f"load_signals_{out['cpu_kind']}")
    Path(path + ".json").write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    Path(path + ".md").write_text(markdown(out), encoding="utf-8")
    print(markdown(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
