"""False alarms and detections of tfwb's comparison rules, measured on this machine.

Issue 8: three identical Workbench runs measured 62.5, 82.0 and 77.3 ms and the
old rule (inter-quartile ranges apart) called that noise significant. This script
measures, with real runs of the small ``images`` workload (``data_source="memory"``,
so nothing but the step itself is timed), how often each rule calls

- two runs of the *same* configuration different (A/A: a false alarm; goal <= 5 %), and
- a real change of about 15 % per step (A/B: batch 64 -> 76; goal: detected >= 90 %).

Rules:

- ``iqr only``: the old rule, IQRs apart (shown for reference);
- ``iqr + default band``: ``tfwb.stats.compare`` with ``DEFAULT_NOISE`` and no load data;
- ``tfwb rule, default band``: ``tfwb.analysis.pairs.compare_runs`` (what the Workbench history
  uses): IQRs apart, outside the band, and not explained by other programs' CPU use;
- ``tfwb rule, learned band``: the same with the band ``tfwb.analysis.noise.noise_band`` learns
  from the identical runs earlier in the same history, as the Workbench does;
- ``interleaved``: ``tfwb.tf.lab.side_by_side.compare_interleaved`` (alternating warm blocks,
  sign test over the rounds).

Phases: (1) the true ratio of B to A, from one long interleaved comparison; (2) a
history of single runs in the order A A B A A B ... (adjacent A-A pairs are A/A
trials, adjacent A-B pairs A/B trials); (3) interleaved comparisons, A/A and A/B
alternately. Rates carry exact (Clopper-Pearson) 95 % ranges.

Usage: python benchmarks/noise.py [--trials 30] [--interleaved 30] [--rounds N]
       [--truth-rounds 120] [--out benchmarks/results/noise.json] [--reading @file]
(small mode is forced: TFWB_FAST=1, size="small").
"""
from __future__ import annotations

import argparse
import json
import math
import os
import platform
import sys
import time

os.environ.setdefault("TFWB_FAST", "1")

import tfwb.tf  # noqa: E402,F401  (quiet TF import)
from tfwb import RunConfig, hardware, stats  # noqa: E402
from tfwb.analysis import noise, pairs  # noqa: E402
from tfwb.tf.lab.side_by_side import compare_interleaved  # noqa: E402
from tfwb.tf.run import run  # noqa: E402

A = RunConfig(batch_size=64, data_source="memory", size="small")
B = A.replace(batch_size=76)


# -- binomial confidence range (pure Python) -------------------------------------------
def _binom_cdf(k: int, n: int, p: float) -> float:
    if k < 0:
        return 0.0
    if k >= n:
        return 1.0
    return sum(math.comb(n, i) * p ** i * (1 - p) ** (n - i) for i in range(k + 1))


def clopper_pearson(k: int, n: int, level: float = 0.95) -> tuple:
    """Exact two-sided confidence range for a proportion ``k / n``."""
    if n == 0:
        return 0.0, 1.0
    alpha = 1 - level

    def solve(f, lo=0.0, hi=1.0):
        for _ in range(60):
            mid = (lo + hi) / 2
            if f(mid):
                hi = mid
            else:
                lo = mid
        return (lo + hi) / 2

    low = 0.0 if k == 0 else solve(lambda p: 1 - _binom_cdf(k - 1, n, p) >= alpha / 2)
    high = 1.0 if k == n else solve(lambda p: _binom_cdf(k, n, p) <= alpha / 2)
    return low, high


def rate(hits: int, n: int) -> dict:
    lo, hi = clopper_pearson(hits, n)
    return {"hits": hits, "n": n, "rate": hits / n if n else None, "ci95": [lo, hi]}


# -- the rules ---------------------------------------------------------------------
RULES = ("iqr only", "iqr + default band", "tfwb rule, default band", "tfwb rule, learned band")


def judge(base, cand, band) -> dict:
    """Each single-run rule's verdict on one pair of RunResults."""
    b, c = base.step_times_s, cand.step_times_s
    return {
        "iqr only": stats.compare(b, c, noise=stats.NoiseBand(0.0)).verdict,
        "iqr + default band": stats.compare(b, c).verdict,
        "tfwb rule, default band": pairs.compare_runs(base, cand).verdict,
        "tfwb rule, learned band": pairs.compare_runs(base, cand, noise=band).verdict,
    }


def say(*parts) -> None:
    print(*parts, flush=True)


def single_run_phase(trials: int) -> dict:
    """Runs A A B A A B ...; judge adjacent pairs with each single-run rule."""
    history, pairs = [], []
    for t in range(trials):
        for cfg in (A, A, B):
            result = run(cfg)
            if not result.ok:
                raise RuntimeError(f"run failed: {result.error}")
            history.append(result)
        a1, a2, b = history[-3:]
        prior = history[:-3]                      # what the Workbench history knew before
        for kind, base, cand in (("A/A", a1, a2), ("A/B", a2, b)):
            band = noise.noise_band(prior + [base])
            pairs.append({
                "trial": t, "kind": kind,
                "baseline_ms": base.median_step_s * 1e3, "candidate_ms": cand.median_step_s * 1e3,
                "baseline_other_cpu_pct": pairs.other_cpu_pct(base),
                "candidate_other_cpu_pct": pairs.other_cpu_pct(cand),
                "learned band pct": band.pct, "learned from runs": band.runs,
                **judge(base, cand, band),
            })
        aa, ab = pairs[-2:]
        say(f"  trial {t + 1}/{trials}: A {a1.median_step_s * 1e3:.1f} / {a2.median_step_s * 1e3:.1f} ms, "
            f"B {b.median_step_s * 1e3:.1f} ms; other programs' CPU "
            f"{aa['baseline_other_cpu_pct'] or 0:.0f} / {aa['candidate_other_cpu_pct'] or 0:.0f} / "
            f"{ab['candidate_other_cpu_pct'] or 0:.0f} %; A/A: {aa['tfwb rule, learned band']}; "
            f"A/B: {ab['tfwb rule, learned band']} (band ±{ab['learned band pct']:.0f} %)")
    a_meds = [r.median_step_s for r in history if r.config == A]
    b_meds = [r.median_step_s for r in history if r.config == B]
    aa_pairs = [p for p in pairs if p["kind"] == "A/A"]
    ab_pairs = [p for p in pairs if p["kind"] == "A/B"]
    dev = sorted(abs(math.log(p["candidate_ms"] / p["baseline_ms"])) for p in aa_pairs)
    similar = sorted(abs(math.log(p["candidate_ms"] / p["baseline_ms"])) for p in aa_pairs
                     if None not in (p["baseline_other_cpu_pct"], p["candidate_other_cpu_pct"])
                     and abs(p["baseline_other_cpu_pct"] - p["candidate_other_cpu_pct"]) < stats.MIN_LOAD_GAP_PCT)

    def quantiles(xs):
        return {q: 100 * math.expm1(stats.quantile(xs, q / 100)) for q in (50, 90, 95, 100)} if xs else {}

    out = {"pairs": pairs, "rules": {},
           "a_median_ms": [m * 1e3 for m in a_meds], "b_median_ms": [m * 1e3 for m in b_meds],
           "a_other_cpu_pct": [pairs.other_cpu_pct(r) for r in history if r.config == A],
           "aa_ratio_deviation_pct": quantiles(dev),
           "aa_similar_load_pairs": len(similar),
           "aa_similar_load_deviation_pct": quantiles(similar),
           "band_learned_from_all": dataclass_dict(noise.noise_band(history))}
    for rule in RULES:
        out["rules"][rule] = {
            "false_alarm": rate(sum(p[rule] in (stats.FASTER, stats.SLOWER) for p in aa_pairs), len(aa_pairs)),
            "detected": rate(sum(p[rule] == stats.SLOWER for p in ab_pairs), len(ab_pairs)),
            "not_comparable": {"A/A": sum(p[rule] == stats.NOT_COMPARABLE for p in aa_pairs),
                               "A/B": sum(p[rule] == stats.NOT_COMPARABLE for p in ab_pairs)},
        }
    return out


def dataclass_dict(band: stats.NoiseBand) -> dict:
    return {"pct": band.pct, "runs": band.runs, "dof": band.dof}


def interleaved_phase(n: int, rounds: int) -> dict:
    results = []
    for i in range(n):
        for kind, cand in (("A/A", A), ("A/B", B)):
            t0 = time.perf_counter()
            c = compare_interleaved(A, cand, rounds=rounds)
            results.append({"kind": kind, "wall_s": time.perf_counter() - t0, "method": c.method,
                            "verdict": c.verdict, "speedup": c.speedup, "low": c.low,
                            "high": c.high, "faster_rounds": c.faster_rounds, "rounds": c.rounds,
                            "p_value": c.p_value, "text": c.text()})
            say(f"  {kind} {i + 1}/{n}: {c.text()}")
    aa = [r for r in results if r["kind"] == "A/A"]
    ab = [r for r in results if r["kind"] == "A/B"]
    return {"comparisons": results, "rounds": results[0]["rounds"], "method": results[0]["method"],
            "median_wall_s": stats.median([r["wall_s"] for r in results]),
            "rule": {"false_alarm": rate(sum(r["verdict"] in (stats.FASTER, stats.SLOWER) for r in aa), len(aa)),
                     "detected": rate(sum(r["verdict"] == stats.SLOWER for r in ab), len(ab))}}


def pct(x) -> str:
    return f"{100 * x:.0f} %"


def markdown(res: dict) -> str:
    hw = res["machine"]
    truth = res["truth"]
    single, inter = res["single_runs"], res["interleaved"]

    def cell(r):
        lo, hi = r["ci95"]
        return f"{r['hits']}/{r['n']} = {pct(r['rate'])} ({pct(lo)}–{pct(hi)})"

    lines = [
        "# Noise: false alarms and detections of the comparison rules",
        "",
        f"Machine: {hw}; Python {res['python']}, TensorFlow {res['tensorflow']}; {res['date']}; "
        f"load average before / after: {res['load_before']} / {res['load_after']} (the 2 cores were shared "
        "with other work, as on Binder).",
        f"Command: `{res['command']}` ({res['wall_s'] / 60:.1f} min).",
        f"Workload `images`, size small, `data_source=\"memory\"`; A = batch 64, B = batch 76, compared "
        f"per step; single runs use the Workbench defaults ({A.steps} measured steps after "
        f"{A.warmup_steps} warm-up), one after another in one process, like Workbench clicks.",
        "",
        "## The true effect",
        "",
        f"One long interleaved comparison ({truth['rounds']} rounds of warm blocks): B takes "
        f"**{1 / truth['speedup']:.3f}×** A's time per step "
        f"({truth['coverage'] * 100:.0f} % range {1 / truth['high']:.3f}–{1 / truth['low']:.3f}×; "
        f"slower in {truth['rounds'] - truth['faster_rounds']} of {truth['rounds']} rounds).",
        "",
        "## Rates (exact 95 % ranges in brackets)",
        "",
        "| rule | A/A false alarms (goal ≤ 5 %) | A/B detected (goal ≥ 90 %) | not comparable (A/A, A/B) |",
        "|---|---|---|---|",
    ]
    for rule, r in single["rules"].items():
        nc = r["not_comparable"]
        lines.append(f"| single runs: {rule} | {cell(r['false_alarm'])} | {cell(r['detected'])} | "
                     f"{nc['A/A']}, {nc['A/B']} |")
    lines.append(f"| interleaved: `compare_interleaved` ({inter['method']}) | "
                 f"{cell(inter['rule']['false_alarm'])} | {cell(inter['rule']['detected'])} | – |")
    def by_int(d):                      # JSON turns the percentile keys into strings
        return {int(k): v for k, v in d.items()}

    dev, sim = by_int(single["aa_ratio_deviation_pct"]), by_int(single["aa_similar_load_deviation_pct"])
    band = single["band_learned_from_all"]
    n_aa = len([p for p in single["pairs"] if p["kind"] == "A/A"])
    lines += [
        "",
        "Rules: *iqr only* is the old rule (IQRs apart); *iqr + default band* adds the run-to-run band "
        f"(±{res['default_noise_pct']:.0f} %, `tfwb.stats.DEFAULT_NOISE_PCT`); the *tfwb rule* "
        "(`tfwb.analysis.pairs.compare_runs`, what the Workbench history uses) also calls a pair *not comparable* "
        "when the slower run had less CPU because other programs were busier, by enough to explain the "
        "ratio; *learned band* uses `tfwb.analysis.noise.noise_band` of the runs before the pair, as the Workbench "
        f"does. Interleaved comparisons took {inter['median_wall_s']:.0f} s each (median).",
        "",
        "## Run-to-run noise of single runs on this machine",
        "",
        f"Two identical runs one after the other differed by a median of {dev[50]:.1f} %, 90th percentile "
        f"{dev[90]:.1f} %, 95th {dev[95]:.1f} %, worst {dev[100]:.1f} % ({n_aa} A/A pairs). "
        + (f"The {single['aa_similar_load_pairs']} pairs whose other-programs' CPU share differed by less "
           f"than {stats.MIN_LOAD_GAP_PCT:.0f} points: median {sim[50]:.1f} %, 95th {sim[95]:.1f} %, "
           f"worst {sim[100]:.1f} %. " if sim else "")
        + f"The band learned from all {band['runs']} single runs: ±{band['pct']:.0f} %.",
        "",
        "Median step of A by run (ms), with other programs' share of the CPU: "
        + ", ".join(f"{m:.1f} ({o:.0f} %)" if o is not None else f"{m:.1f}"
                    for m, o in zip(single["a_median_ms"], single["a_other_cpu_pct"])) + ".",
        "",
        "## Reading it",
        "",
        res["reading"] or "(see benchmarks/README.md)",
        "",
    ]
    return "\n".join(lines)


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=30, help="A A B triples of single runs")
    ap.add_argument("--interleaved", type=int, default=30, help="interleaved A/A and A/B comparisons each")
    ap.add_argument("--rounds", type=int, default=None, help="rounds per interleaved comparison "
                    "(default: compare_interleaved's, 30)")
    ap.add_argument("--truth-rounds", type=int, default=120, help="rounds of the long comparison")
    ap.add_argument("--out", default=None, help="JSON file to write (Markdown beside it)")
    ap.add_argument("--reading", default="", help="the paragraph under 'Reading it' (from a file: @path)")
    ap.add_argument("--render", default=None, help="only rewrite the Markdown of this JSON result "
                    "(with --reading); measures nothing")
    args = ap.parse_args(argv)
    if args.reading.startswith("@"):
        with open(args.reading[1:]) as fh:
            args.reading = fh.read().strip()
    if args.render:
        with open(args.render) as fh:
            res = json.load(fh)
        res["reading"] = args.reading or res.get("reading", "")
        with open(args.render, "w") as fh:
            json.dump(res, fh, indent=2)
        with open(os.path.splitext(args.render)[0] + ".md", "w") as fh:
            fh.write(markdown(res))
        return res
    t0 = time.perf_counter()
    load_before = " ".join(f"{x:.2f}" for x in os.getloadavg())
    say(f"1/3 true ratio: {args.truth_rounds} interleaved rounds of A (batch 64) and B (batch 76)")
    truth = compare_interleaved(A, B, rounds=args.truth_rounds)
    say("  " + truth.text())
    say(f"2/3 single runs: {args.trials} triples A A B")
    single = single_run_phase(args.trials)
    say(f"3/3 interleaved: {args.interleaved} A/A and {args.interleaved} A/B comparisons")
    inter = interleaved_phase(args.interleaved, args.rounds)
    import tensorflow as tf

    res = {
        "machine": hardware.describe(hardware.detect()), "python": platform.python_version(),
        "tensorflow": tf.__version__, "date": time.strftime("%Y-%m-%d"),
        "command": "python benchmarks/noise.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "load_before": load_before, "load_after": " ".join(f"{x:.2f}" for x in os.getloadavg()),
        "default_noise_pct": stats.DEFAULT_NOISE_PCT,
        "truth": {"speedup": truth.speedup, "low": truth.low, "high": truth.high, "rounds": truth.rounds,
                  "coverage": truth.coverage,
                  "faster_rounds": truth.faster_rounds, "text": truth.text(),
                  "baseline_s": truth.baseline_s, "candidate_s": truth.candidate_s},
        "single_runs": single, "interleaved": inter, "reading": args.reading,
    }
    res["wall_s"] = time.perf_counter() - t0
    say("")
    say(markdown(res))
    if args.out:
        with open(args.out, "w") as fh:
            json.dump(res, fh, indent=2)
        with open(os.path.splitext(args.out)[0] + ".md", "w") as fh:
            fh.write(markdown(res))
    return res


if __name__ == "__main__":
    main()
