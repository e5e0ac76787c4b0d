"""Integrity of tfwb's verdicts on a shared machine: A/A false verdicts, the learned noise band, MFU spread.

"Verdicts that know the machine was busy" (``tfwb.analysis.pairs.compare_runs``: "cannot tell" when other
programs used ``stats.BUSY_OTHER_CPU_PCT`` or more of the CPU during either run, or a run
drifted; ``tfwb.analysis.noise.noise_band`` learned from quiet runs only; the peak cache keeps the highest
quiet figure) measured on this machine, before and after, on the same runs where that is possible:

1. A/A false verdicts under each load pattern (``tests/loadgen.py``: quiet, bursty, both): per
   pattern, ``--pairs`` pairs of two separate identical runs (``tfwb.run``, A then A again)
   judged by the current ``tfwb.analysis.pairs.compare_runs`` and by the old rule (commit 2a03990's
   ``stats.compare``, imported from the worktree under another module name, fed the same loads
   from ``tfwb.analysis.pairs.other_cpu_pct``; cross-checked with 2a03990's own ``report.compare_runs`` in
   a subprocess that imports the old package), each with the default band and with the band the
   history so far teaches (new: ``tfwb.analysis.noise.noise_band``; old: 2a03990's ``report.noise_band``); and
   ``--interleaved`` interleaved A/A comparisons (``tfwb.compare_interleaved``, ``--rounds``).
   The load runs for the duration of its pattern's block only.
2. The noise band learned from a history of ``--band-runs`` quiet runs and as many under "both"
   load: the new ``tfwb.analysis.noise.noise_band`` against 2a03990's ``report.noise_band`` on the same results.
3. The spread of MFU over ``--mfu-runs`` runs, each a fresh process (a new notebook kernel) with a
   fresh ``TFWB_CACHE_DIR``; odd-numbered runs (the first included, which measures the peak) under
   "bursty" load. With ``--before`` the same with the 2a03990 package (``PYTHONPATH`` the worktree).

Usage (from the repository root):
    PYTHONPATH=$PWD TF_CPP_MIN_LOG_LEVEL=2 python benchmarks/integrity.py \
        [--pairs 20] [--interleaved 20] [--rounds 8] [--band-runs 6] [--mfu-runs 20] \
        [--before /tmp/tfwb-before] [--out benchmarks/results/integrity.json]
(``--before`` names a worktree of commit 2a03990: ``git worktree add /tmp/tfwb-before 2a03990``.)
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PATTERNS = ("quiet", "bursty", "both")
#: Upper bound (s) of any load process this script starts (each is also stopped at its block's end).
LOAD_CAP_S = 1500.0
FALSE = ("faster", "slower")


def say(*parts) -> None:
    print(*parts, flush=True)


def config(steps: int):
    from tfwb import RunConfig

    return RunConfig(workload="mlp", size="small", data_source="memory", steps=steps, warmup_steps=3)


def other_cpu_of(result) -> "float | None":
    """``tfwb.analysis.pairs.other_cpu_pct`` without importing it (the old package has it in ``report``)."""
    cores = (result.fingerprint or {}).get("cpu_count")
    if not cores or not result.samples or not result.step_start_s or not result.step_times_s:
        return None
    lo, hi = result.step_start_s[0], result.step_start_s[-1] + result.step_times_s[-1]
    vals = sorted(max(0.0, s.cpu_system_pct - s.cpu_process_pct / cores) for s in result.samples
                  if lo <= s.t_s <= hi and s.cpu_system_pct is not None and s.cpu_process_pct is not None)
    if not vals:
        return None
    n = len(vals)
    return vals[n // 2] if n % 2 else (vals[n // 2 - 1] + vals[n // 2]) / 2


# -- children (run in their own process, with whichever tfwb is on PYTHONPATH) ----------------
def child_mfu(steps: int) -> None:
    """One run; prints its MFU fields as one JSON line (works with the old and the new package)."""
    import tfwb

    t0 = time.perf_counter()
    r = tfwb.run(config(steps))
    out = {"ok": r.ok, "error": getattr(r, "error", None), "wall_s": time.perf_counter() - t0,
           "mfu": r.mfu, "peak_flops_per_s": r.peak_flops_per_s,
           "peak_loaded": getattr(r, "peak_loaded", None), "peak_spread": getattr(r, "peak_spread", None),
           "model_flops_per_step": getattr(r, "model_flops_per_step", None),
           "median_step_s": r.median_step_s, "other_cpu_pct": other_cpu_of(r),
           "tfwb": os.path.dirname(tfwb.__file__)}
    print("MFU_JSON " + json.dumps(out), flush=True)


def child_old_judge(path: str) -> None:
    """2a03990's ``report.compare_runs`` / ``report.noise_band`` on saved results (old package on PYTHONPATH)."""
    from tfwb import report, stats
    from tfwb.records import RunResult

    with open(path) as fh:
        job = json.load(fh)
    runs = [RunResult.from_dict(d) for d in job["runs"]]
    out = {"tfwb": os.path.dirname(report.__file__), "pairs": [], "bands": {}}
    for i, j in job["pairs"]:
        band = report.noise_band(runs[: i + 1])             # the history up to the baseline, as the Workbench
        default = report.compare_runs(runs[i], runs[j])
        learned = report.compare_runs(runs[i], runs[j], noise=band)
        out["pairs"].append({"default": default.verdict if default else None,
                             "learned": learned.verdict if learned else None,
                             "band_pct": band.pct, "band_runs": band.runs})
    for name, idx in job.get("bands", {}).items():
        b = report.noise_band([runs[k] for k in idx])
        out["bands"][name] = {"pct": b.pct, "runs": b.runs, "dof": b.dof,
                              "default": b == stats.DEFAULT_NOISE}
    print("OLD_JSON " + json.dumps(out), flush=True)


# -- helpers in the main process ---------------------------------------------------------------
def load_old_stats(before: str):
    spec = importlib.util.spec_from_file_location("tfwb_before_stats", os.path.join(before, "tfwb", "stats.py"))
    mod = importlib.util.module_from_spec(spec)
    sys.modules["tfwb_before_stats"] = mod         # dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


def probe_other(seconds: float = 1.0):
    from tfwb.utilization import other_programs_cpu_pct

    v = other_programs_cpu_pct(seconds)
    return None if v is None else round(v, 1)


def band_dict(b) -> dict:
    from tfwb import stats

    return {"pct": b.pct, "runs": b.runs, "dof": b.dof, "default": b == stats.DEFAULT_NOISE}


def run_ok(cfg):
    import tfwb

    r = tfwb.run(cfg)
    if not r.ok:
        raise RuntimeError(f"run failed: {r.error}")
    return r


def old_judge(before: str, runs, pairs_idx, bands) -> dict:
    """Runs ``child_old_judge`` with the old package; returns its JSON."""
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as fh:
        json.dump({"runs": [r.to_dict() for r in runs], "pairs": pairs_idx, "bands": bands}, fh, default=str)
        path = fh.name
    try:
        env = dict(os.environ, PYTHONPATH=before)
        p = subprocess.run([sys.executable, os.path.abspath(__file__), "--child-old-judge", path],
                           env=env, capture_output=True, text=True, timeout=600)
    finally:
        os.unlink(path)
    for line in p.stdout.splitlines():
        if line.startswith("OLD_JSON "):
            return json.loads(line[len("OLD_JSON "):])
    raise RuntimeError(f"old judge failed (rc {p.returncode}): {p.stderr[-2000:]}")


# -- part 1: A/A false verdicts -----------------------------------------------------------------
def part_aa(args, old_stats) -> dict:
    from loadgen import Load
    from tfwb import stats
    from tfwb.analysis import noise, pairs
    import tfwb

    cfg = config(args.steps)
    history, pair_idx, blocks = [], [], {}
    for pattern in PATTERNS:
        block = {"other_cpu_pct_before_load": probe_other(1.0)}
        t0 = time.perf_counter()
        with Load(pattern, LOAD_CAP_S):
            block["other_cpu_pct_with_load"] = probe_other(1.0)
            say(f"[1] {pattern}: other programs' CPU before the load {block['other_cpu_pct_before_load']} %, "
                f"with it {block['other_cpu_pct_with_load']} %")
            rows = []
            for k in range(args.pairs):
                a1, a2 = run_ok(cfg), run_ok(cfg)
                history += [a1, a2]
                i, j = len(history) - 2, len(history) - 1
                pair_idx.append([i, j])
                band = noise.noise_band(history[: i + 1])
                new_d = pairs.compare_runs(a1, a2)
                new_l = pairs.compare_runs(a1, a2, noise=band)
                loads = (pairs.other_cpu_pct(a1), pairs.other_cpu_pct(a2))
                old_d = old_stats.compare(a1.step_times_s, a2.step_times_s, other_cpu_pct=loads)
                rows.append({"pair": k, "a1_ms": a1.median_step_s * 1e3, "a2_ms": a2.median_step_s * 1e3,
                             "ratio": a2.median_step_s / a1.median_step_s,
                             "other_cpu_pct": list(loads), "drift": list(new_d.drift),
                             "new_default": new_d.verdict, "new_learned": new_l.verdict,
                             "new_band_pct": band.pct, "new_band_runs": band.runs,
                             "old_default": old_d.verdict})
                say(f"  pair {k + 1}/{args.pairs}: {a1.median_step_s * 1e3:.2f} / {a2.median_step_s * 1e3:.2f} ms, "
                    f"others {loads[0] if loads[0] is None else round(loads[0])} / "
                    f"{loads[1] if loads[1] is None else round(loads[1])} %; new: {new_d.verdict}; old: {old_d.verdict}")
            inter = []
            for k in range(args.interleaved):
                t1 = time.perf_counter()
                c = tfwb.compare_interleaved(cfg, cfg.replace(label="A2"), rounds=args.rounds)
                inter.append({"verdict": c.verdict, "speedup": c.speedup, "faster_rounds": c.faster_rounds,
                              "rounds": c.rounds, "p_value": c.p_value, "wall_s": time.perf_counter() - t1,
                              "method": c.method})
                say(f"  interleaved {k + 1}/{args.interleaved}: {c.text()}")
        block["other_cpu_pct_after"] = probe_other(1.0)
        block.update(pairs=rows, interleaved=inter, wall_s=time.perf_counter() - t0)
        blocks[pattern] = block
    # the old package's own report.compare_runs and report.noise_band on the same runs
    old = old_judge(args.before, history, pair_idx, {})
    n = 0
    for pattern in PATTERNS:
        for row in blocks[pattern]["pairs"]:
            o = old["pairs"][n]
            n += 1
            row["old_default_report"] = o["default"]
            row["old_learned"] = o["learned"]
            row["old_band_pct"], row["old_band_runs"] = o["band_pct"], o["band_runs"]
    for pattern in PATTERNS:
        b = blocks[pattern]
        rows = b["pairs"]
        loads = [x for r in rows for x in r["other_cpu_pct"]]
        known = [x for x in loads if x is not None]
        b["summary"] = {
            "pairs": len(rows),
            "new_false_default": sum(r["new_default"] in FALSE for r in rows),
            "new_false_learned": sum(r["new_learned"] in FALSE for r in rows),
            "new_cannot_tell_busy": sum(r["new_default"] == stats.CANNOT_TELL_BUSY for r in rows),
            "new_cannot_tell_drift": sum(r["new_default"] == stats.CANNOT_TELL_DRIFT for r in rows),
            "new_cannot_tell_learned": sum(r["new_learned"] in stats.CANNOT_TELL for r in rows),
            "old_false_default": sum(r["old_default"] in FALSE for r in rows),
            "old_false_learned": sum(r["old_learned"] in FALSE for r in rows),
            "old_not_comparable": sum(r["old_default"] == "not comparable" for r in rows),
            "old_not_comparable_learned": sum(r["old_learned"] == "not comparable" for r in rows),
            "old_importlib_matches_report": sum(r["old_default"] == r["old_default_report"] for r in rows),
            "interleaved": len(b["interleaved"]),
            "interleaved_false": sum(c["verdict"] in FALSE for c in b["interleaved"]),
            "runs_load_unknown": sum(x is None for x in loads),
            "runs_busy": sum(x >= stats.BUSY_OTHER_CPU_PCT for x in known),
            "run_other_cpu_median": sorted(known)[len(known) // 2] if known else None,
            "run_other_cpu_min": min(known) if known else None,
            "run_other_cpu_max": max(known) if known else None,
            "aa_ratio_abs_dev_pct_max": max(abs(r["ratio"] - 1) * 100 for r in rows) if rows else None,
            "last_new_band_pct": rows[-1]["new_band_pct"] if rows else None,
            "last_old_band_pct": rows[-1]["old_band_pct"] if rows else None,
        }
        say(f"[1] {pattern}: {json.dumps(b['summary'])}")
    return blocks


# -- part 2: the learned noise band from a mixed history ------------------------------------------
def part_band(args) -> dict:
    from loadgen import Load
    from tfwb import stats
    from tfwb.analysis import noise, pairs

    cfg = config(args.steps)
    res = {"other_cpu_pct_before": probe_other(1.0)}
    quiet = [run_ok(cfg) for _ in range(args.band_runs)]
    with Load("both", LOAD_CAP_S):
        res["other_cpu_pct_with_load"] = probe_other(1.0)
        busy = [run_ok(cfg) for _ in range(args.band_runs)]
    res["other_cpu_pct_after"] = probe_other(1.0)
    allr = quiet + busy
    res["runs"] = [{"set": "quiet" if k < len(quiet) else "both", "median_ms": r.median_step_s * 1e3,
                    "other_cpu_pct": pairs.other_cpu_pct(r), "busy": pairs.busy(r)} for k, r in enumerate(allr)]
    res["new_noise_band_all"] = band_dict(noise.noise_band(allr))
    res["new_noise_band_quiet_set"] = band_dict(noise.noise_band(quiet))
    res["pooled_one_group_all"] = band_dict(stats.learn_noise([[r.median_step_s for r in allr]]))
    res["pooled_one_group_quiet_set"] = band_dict(stats.learn_noise([[r.median_step_s for r in quiet]]))
    res["pooled_one_group_both_set"] = band_dict(stats.learn_noise([[r.median_step_s for r in busy]]))
    n = len(allr)
    old = old_judge(args.before, allr, [], {"all": list(range(n)), "quiet_set": list(range(len(quiet))),
                                             "both_set": list(range(len(quiet), n))})
    res["old_noise_band_all"] = old["bands"]["all"]
    res["old_noise_band_quiet_set"] = old["bands"]["quiet_set"]
    res["old_noise_band_both_set"] = old["bands"]["both_set"]
    say(f"[2] band: new {res['new_noise_band_all']}, old {res['old_noise_band_all']}, "
        f"pooled {res['pooled_one_group_all']}")
    return res


# -- part 3: MFU spread over fresh processes --------------------------------------------------------
def part_mfu(args, pythonpath: str, label: str, count: int) -> dict:
    from loadgen import Load

    cache = tempfile.mkdtemp(prefix=f"tfwb-integrity-{label}-")
    env = dict(os.environ, PYTHONPATH=pythonpath, TFWB_CACHE_DIR=cache, TF_CPP_MIN_LOG_LEVEL="2")
    env.pop("TFWB_FAST", None)
    runs = []
    try:
        for k in range(count):
            pattern = "bursty" if k % 2 == 0 else "quiet"
            before = probe_other(0.5)
            with Load(pattern, 300.0):
                p = subprocess.run([sys.executable, os.path.abspath(__file__), "--child-mfu",
                                    "--steps", str(args.steps)], env=env, capture_output=True, text=True,
                                   timeout=280)
            line = next((x for x in p.stdout.splitlines() if x.startswith("MFU_JSON ")), None)
            if line is None:
                raise RuntimeError(f"MFU child failed (rc {p.returncode}): {p.stderr[-2000:]}")
            d = json.loads(line[len("MFU_JSON "):])
            d.update(run=k + 1, load=pattern, other_cpu_pct_before=before)
            runs.append(d)
            say(f"[3 {label}] run {k + 1}/{count} ({pattern}): MFU {d['mfu']}, peak "
                f"{(d['peak_flops_per_s'] or 0) / 1e9:.1f} GFLOP/s, loaded {d['peak_loaded']}, "
                f"others {d['other_cpu_pct']}")
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    mfus = sorted(d["mfu"] for d in runs if d["mfu"] is not None)
    peaks = sorted(d["peak_flops_per_s"] for d in runs if d["peak_flops_per_s"])
    med = (lambda xs: xs[len(xs) // 2] if len(xs) % 2 else (xs[len(xs) // 2 - 1] + xs[len(xs) // 2]) / 2)
    summary = {"runs": len(runs), "mfu_min": mfus[0] if mfus else None, "mfu_median": med(mfus) if mfus else None,
               "mfu_max": mfus[-1] if mfus else None,
               "mfu_max_over_min": mfus[-1] / mfus[0] if mfus and mfus[0] else None,
               "not_meaningful": sum(m > 1 for m in mfus),
               "peak_min": peaks[0] if peaks else None, "peak_max": peaks[-1] if peaks else None,
               "distinct_peaks": len(set(peaks)),
               "peak_loaded_runs": sum(bool(d["peak_loaded"]) for d in runs)}
    say(f"[3 {label}] {json.dumps(summary)}")
    return {"runs": runs, "summary": summary}


# -- output ------------------------------------------------------------------------------------------
def machine() -> dict:
    model = ""
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=10).stdout
        model = next((ln.split(":", 1)[1].strip() for ln in out.splitlines() if ln.startswith("Model name")), "")
    except (OSError, subprocess.SubprocessError):
        pass
    return {"cpu_model": model, "cores": os.cpu_count()}


def fmt(x, spec=".0f", none="–"):
    return none if x is None else format(x, spec)


def markdown(res: dict) -> str:
    m = res["machine"]
    a = res["args"]
    L = [
        "# Integrity of verdicts on a busy machine: before (2a03990) and after",
        "",
        f"Machine: {m['cpu_model']}, {m['cores']} cores; Python {res['python']}, TensorFlow {res['tensorflow']}; "
        f"{res['date']}; load average before / after: {res['load_before']} / {res['load_after']}.",
        f"Command: `{res['command']}` ({res['wall_s'] / 60:.1f} min).",
        f"Workload: `RunConfig(workload=\"mlp\", size=\"small\", data_source=\"memory\", steps={a['steps']}, "
        "warmup_steps=3)` (batch 64, windowed timing). "
        + "Other programs' share of the CPU during a run is read from its utilization samples (every 0.2 s) "
        "within its measured steps, so a run needs a window of several tenths of a second: with 20 steps "
        "(about 50 ms here) most runs held no sample and their load read unknown, which the busy rule treats "
        "as not busy.",
        "",
        "The machine was shared with other sessions' work (test suites, notebook executions) throughout; "
        "each block records other programs' share of the CPU (`tfwb.utilization.other_programs_cpu_pct(1.0)`) "
        "before its load started, with it, and after, and each run's own reading (`tfwb.analysis.pairs.other_cpu_pct`). "
        "\"quiet\" means no load *of ours*; it was not necessarily quiet.",
        "",
    ]
    if "aa" in res:
        L += ["## 1. A/A: two identical runs, how often a verdict says faster or slower", "",
              f"Per pattern: {a['pairs']} pairs of separate runs (A, then A again; `tfwb.run`), and "
              f"{a['interleaved']} interleaved A/A comparisons (`tfwb.compare_interleaved(cfg, cfg.replace(label=\"A2\"), "
              f"rounds={a['rounds']})`). Every faster/slower is a false verdict. *Old* is 2a03990's rule on the same "
              "runs; *default band* is ±10 %; *learned band* is the band the history so far teaches (all runs of this "
              "part up to the pair's baseline; new: `tfwb.analysis.noise.noise_band`, quiet runs only; old: 2a03990's "
              "`report.noise_band`, every run, binned by load).", "",
              "| pattern | others' CPU: before load / with load / after (%) | runs' others' CPU min–median–max (%); busy; unknown | "
              "separate, new (default band): false; cannot tell busy / drift | separate, old (default band): false; not comparable | "
              "separate, new (learned band): false; cannot tell | separate, old (learned band): false; not comparable | "
              "learned band at the end: new / old | interleaved: false |",
              "|---|---|---|---|---|---|---|---|---|"]
        for p, b in res["aa"].items():
            s = b["summary"]
            n2 = 2 * s["pairs"]
            L.append(
                f"| {p} | {fmt(b['other_cpu_pct_before_load'])} / {fmt(b['other_cpu_pct_with_load'])} / "
                f"{fmt(b['other_cpu_pct_after'])} | {fmt(s['run_other_cpu_min'])}–{fmt(s['run_other_cpu_median'])}–"
                f"{fmt(s['run_other_cpu_max'])}; {s['runs_busy']}/{n2}; {s['runs_load_unknown']}/{n2} | "
                f"**{s['new_false_default']}/{s['pairs']}**; {s['new_cannot_tell_busy']} / {s['new_cannot_tell_drift']} | "
                f"**{s['old_false_default']}/{s['pairs']}**; {s['old_not_comparable']} | "
                f"{s['new_false_learned']}/{s['pairs']}; {s['new_cannot_tell_learned']} | "
                f"{s['old_false_learned']}/{s['pairs']}; {s['old_not_comparable_learned']} | "
                f"±{fmt(s['last_new_band_pct'])} / ±{fmt(s['last_old_band_pct'])} % | "
                f"**{s['interleaved_false']}/{s['interleaved']}** |")
        checks = sum(b["summary"]["old_importlib_matches_report"] for b in res["aa"].values())
        total = sum(b["summary"]["pairs"] for b in res["aa"].values())
        L += ["", f"The old rule was run two ways: 2a03990's `stats.compare` loaded from the worktree with importlib "
              f"(fed `tfwb.analysis.pairs.other_cpu_pct` of each run) and 2a03990's own `report.compare_runs` in a subprocess "
              f"that imports the old package and reads the same RunResults back; they agreed on {checks} of {total} pairs.",
              ""]
    if "band" in res:
        bd = res["band"]
        q = [r for r in bd["runs"] if r["set"] == "quiet"]
        bz = [r for r in bd["runs"] if r["set"] == "both"]

        def runs_text(rs):
            return ", ".join(f"{r['median_ms']:.2f} ({fmt(r['other_cpu_pct'])} %{', busy' if r['busy'] else ''})"
                             for r in rs)

        def bt(b):
            return f"±{b['pct']:.1f} % ({b['runs']} runs{', the default' if b['default'] else ''})"
        L += ["## 2. The noise band learned from a history mixing quiet and busy runs", "",
              f"{len(q)} identical runs with no load of ours, then {len(bz)} under \"both\" (others' CPU before / with "
              f"the load / after: {fmt(bd['other_cpu_pct_before'])} / {fmt(bd['other_cpu_pct_with_load'])} / "
              f"{fmt(bd['other_cpu_pct_after'])} %).", "",
              "| band learned from all runs | value |", "|---|---|",
              f"| new: `tfwb.noise.noise_band(all)` (not-busy runs only) | **{bt(bd['new_noise_band_all'])}** |",
              f"| old: 2a03990 `report.noise_band(all)` (every run, binned by load) | **{bt(bd['old_noise_band_all'])}** |",
              f"| all medians pooled in one group (`stats.learn_noise`, no binning) | {bt(bd['pooled_one_group_all'])} |",
              f"| reference: the no-load set alone, one group | {bt(bd['pooled_one_group_quiet_set'])} |",
              f"| reference: the \"both\" set alone, one group | {bt(bd['pooled_one_group_both_set'])} |",
              "", f"Median step (ms) and others' CPU, no load of ours: {runs_text(q)}.",
              "", f"Under \"both\": {runs_text(bz)}.", ""]
    for key, title in (("mfu", "after (this tree)"), ("mfu_before", "before (2a03990)")):
        if key not in res:
            continue
        s = res[key]["summary"]
        if key == "mfu":
            L += ["## 3. MFU across fresh processes", "",
                  f"{s['runs']} runs, each `tfwb.run` in a fresh process (as a new notebook kernel) sharing one fresh "
                  "`TFWB_CACHE_DIR`; the first run measures the peak; odd-numbered runs (the first included) under "
                  "\"bursty\" load (one core busy 0.4 s of every 1 s), even ones with no load of ours.", "",
                  "| code | MFU min / median / max | max/min | read not meaningful (MFU > 1) | peak FLOP/s min–max "
                  "(distinct figures) | runs whose peak was marked loaded |", "|---|---|---|---|---|---|"]
        L.append(f"| {title} | {s['mfu_min']:.4f} / {s['mfu_median']:.4f} / {s['mfu_max']:.4f} | "
                 f"{s['mfu_max_over_min']:.2f} | {s['not_meaningful']}/{s['runs']} | "
                 f"{s['peak_min'] / 1e9:.1f}–{s['peak_max'] / 1e9:.1f} G ({s['distinct_peaks']}) | "
                 f"{s['peak_loaded_runs'] if key == 'mfu' else 'not recorded'} |")
    if "mfu" in res:
        L += ["", "Per run (after): " + "; ".join(
            f"#{d['run']} {d['load']}: MFU {fmt(d['mfu'], '.4f')}, peak {fmt((d['peak_flops_per_s'] or 0) / 1e9, '.1f')} G"
            f"{' (loaded)' if d['peak_loaded'] else ''}, others {fmt(d['other_cpu_pct'])} %" for d in res["mfu"]["runs"]) + "."]
        if "mfu_before" in res:
            L += ["", "Per run (before): " + "; ".join(
                f"#{d['run']} {d['load']}: MFU {fmt(d['mfu'], '.4f')}, peak {fmt((d['peak_flops_per_s'] or 0) / 1e9, '.1f')} G, "
                f"others {fmt(d['other_cpu_pct'])} %" for d in res["mfu_before"]["runs"]) + ".",
                  "", "2a03990 counted elementwise FLOPs into the model FLOPs (this tree counts matmuls only), so the "
                  "two MFU levels differ by convention; compare their spreads (max/min) and the peaks."]
        L.append("")
    if res.get("notes"):
        L += ["## Notes", ""] + [f"- {n}" for n in res["notes"]] + [""]
    return "\n".join(L)


def summary_table(res: dict) -> str:
    rows = ["pattern   sep new false  cannot tell  sep old false  old n/c  interleaved false"]
    for p, b in res.get("aa", {}).items():
        s = b["summary"]
        rows.append(f"{p:9} {s['new_false_default']:>3}/{s['pairs']:<9} {s['new_cannot_tell_busy'] + s['new_cannot_tell_drift']:>5}"
                    f"        {s['old_false_default']:>3}/{s['pairs']:<9} {s['old_not_comparable']:>4}    "
                    f"{s['interleaved_false']:>3}/{s['interleaved']}")
    if "band" in res:
        bd = res["band"]
        rows.append(f"noise band (mixed history): new ±{bd['new_noise_band_all']['pct']:.1f} % "
                    f"({bd['new_noise_band_all']['runs']} runs), old ±{bd['old_noise_band_all']['pct']:.1f} % "
                    f"({bd['old_noise_band_all']['runs']} runs)")
    for key in ("mfu", "mfu_before"):
        if key in res:
            s = res[key]["summary"]
            rows.append(f"MFU {key}: min {s['mfu_min']:.4f} median {s['mfu_median']:.4f} max {s['mfu_max']:.4f} "
                        f"(max/min {s['mfu_max_over_min']:.2f}); >1: {s['not_meaningful']}/{s['runs']}")
    return "\n".join(rows)


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=20, help="separate A/A pairs per load pattern")
    ap.add_argument("--interleaved", type=int, default=20, help="interleaved A/A comparisons per load pattern")
    ap.add_argument("--rounds", type=int, default=8, help="rounds per interleaved comparison")
    ap.add_argument("--band-runs", type=int, default=6, help="runs with no load, and as many under 'both'")
    ap.add_argument("--mfu-runs", type=int, default=20, help="fresh-process runs for the MFU spread")
    ap.add_argument("--steps", type=int, default=300, help="measured steps per run")
    ap.add_argument("--before", default="/tmp/tfwb-before", help="worktree of commit 2a03990")
    ap.add_argument("--mfu-before-runs", type=int, default=10, help="the same with the 2a03990 package (0: skip)")
    ap.add_argument("--parts", default="aa,band,mfu", help="comma-separated: aa, band, mfu")
    ap.add_argument("--out", default=None, help="JSON to write (Markdown beside it)")
    ap.add_argument("--note", action="append", default=[], help="a line for the Markdown's notes")
    ap.add_argument("--child-mfu", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--child-old-judge", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child_mfu:
        child_mfu(args.steps)
        return {}
    if args.child_old_judge:
        child_old_judge(args.child_old_judge)
        return {}

    sys.path.insert(0, os.path.join(ROOT, "tests"))              # loadgen
    import tfwb
    import tensorflow as tf

    if not os.path.abspath(tfwb.__file__).startswith(ROOT):
        raise SystemExit(f"tfwb imported from {tfwb.__file__}, not this tree: set PYTHONPATH={ROOT}")
    cache = tempfile.mkdtemp(prefix="tfwb-integrity-main-")     # this process's peak cache, apart from ~/.cache
    os.environ["TFWB_CACHE_DIR"] = cache
    old_stats = load_old_stats(args.before)
    parts = set(args.parts.split(","))
    t0 = time.perf_counter()
    res = {"machine": machine(), "python": platform.python_version(), "tensorflow": tf.__version__,
           "date": time.strftime("%Y-%m-%d %H:%M %Z"),
           "command": "PYTHONPATH=$PWD TF_CPP_MIN_LOG_LEVEL=2 python benchmarks/integrity.py "
                      + " ".join(argv if argv is not None else sys.argv[1:]),
           "load_before": " ".join(f"{x:.2f}" for x in os.getloadavg()),
           "busy_other_cpu_pct": tfwb.stats.BUSY_OTHER_CPU_PCT, "args": vars(args), "notes": list(args.note)}
    try:
        if "aa" in parts:
            res["aa"] = part_aa(args, old_stats)
        if "band" in parts:
            res["band"] = part_band(args)
        if "mfu" in parts:
            res["mfu"] = part_mfu(args, ROOT, "after", args.mfu_runs)
            if args.mfu_before_runs:
                res["mfu_before"] = part_mfu(args, args.before, "before", args.mfu_before_runs)
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    res["load_after"] = " ".join(f"{x:.2f}" for x in os.getloadavg())
    res["wall_s"] = time.perf_counter() - t0
    say("")
    say(summary_table(res))
    if args.out:
        with open(args.out, "w") as fh:
            json.dump(res, fh, indent=2, default=str)
        with open(os.path.splitext(args.out)[0] + ".md", "w") as fh:
            fh.write(markdown(res))
    return res


if __name__ == "__main__":
    main()
