"""tfwb.tune against the sweep from the same naive start: what each found, at what cost.

For every start (``--starts``): the sweep (``tfwb.sweep`` over its default space, successive
halving) and the tune (``tfwb.tune``, ``--max-runs`` trials) run from the same naive
configuration. Figures per start: runs and wall seconds of each, the configuration each
found, and the two winners side by side in alternating warm blocks
(``tfwb.compare_interleaved``: the tune's best against the sweep's winner). Then every trial
the tune kept is re-checked the same way (the configuration before it against the one after):
a kept trial the re-check calls slower is a wrong keep.

Starts: the naive start of each built-in workload (``images`` read from files with its knobs
off, ``cifar10``, ``text``, ``mlp``), ``mnist_convnet`` (chapter 08's model, Keras's Simple MNIST
convnet, registered as the chapter registers it), ``keras`` (a Keras 1-D convolutional timeseries network
registered with ``tfwb.register_workload``, as a new user would bring one), and ``compute``
(a wide dense network on batches staged in memory, with XLA and 8 steps a call already on: on a
measured 2-core CPU an untuned wide network gained 1.42x from XLA, so the compute knobs are set
here; what is left is the dtype, and the tune should say "nothing to gain here, because ..."
within 3 runs where mixed precision cannot help).

Goals (issue 28): on every start but ``compute``, the tune's best reaches at least 90 % of the
sweep winner's throughput at no more than a third of the sweep's wall time; no kept trial is
called slower by the re-check; on ``compute``, "nothing to gain here" within 3 runs.

Usage:
    python benchmarks/tune.py [--size small|full] [--starts images,cifar10,text,mlp,mnist_convnet,keras,compute]
                              [--max-runs 4] [--rounds N] [--out benchmarks/results/tune]
                              [--sweeps-from benchmarks/results/tune.json]
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time

import tfwb.tf  # noqa: F401  (quiet TF import)
import tfwb
from tfwb import RunConfig, hardware, stats
from tfwb.search.tune_events import LOGGED
from tfwb.tf.lab.side_by_side import compare_interleaved

STARTS = ("images", "cifar10", "text", "mlp", "mnist_convnet", "keras", "compute")


def timeseries_model(cfg):
    """A small Keras timeseries network: 1-D convolutions over 64 steps of 8 channels, 4 classes."""
    import keras
    return keras.Sequential([
        keras.Input((64, 8)),
        keras.layers.Conv1D(32, 5, activation="relu"), keras.layers.MaxPooling1D(2),
        keras.layers.Conv1D(64, 5, activation="relu"), keras.layers.GlobalAveragePooling1D(),
        keras.layers.Dense(32, activation="relu"), keras.layers.Dense(4, dtype="float32")])


def timeseries_data(cfg, rows: int = 4096):
    """Sine waves of 4 frequencies plus noise: the class is the frequency."""
    import numpy as np
    import tensorflow as tf
    rng = np.random.default_rng(cfg.seed)
    y = rng.integers(0, 4, rows).astype("int32")
    t = np.arange(64, dtype="float32")[None, :, None]
    phase = rng.uniform(0, 6.3, (rows, 1, 8)).astype("float32")
    x = np.sin(t * (0.1 + 0.1 * y[:, None, None]) + phase) + rng.normal(0, 0.3, (rows, 64, 8))
    return tf.data.Dataset.from_tensor_slices((x.astype("float32"), y))


def wide_model(cfg):
    """A wide dense network: a few large matmuls per step (compute-bound on any machine)."""
    import keras
    return keras.Sequential([keras.Input((256,)), keras.layers.Dense(1024, activation="relu"),
                             keras.layers.Dense(1024, activation="relu"), keras.layers.Dense(10, dtype="float32")])


def wide_data(cfg, rows: int = 2048):
    import numpy as np
    import tensorflow as tf
    rng = np.random.default_rng(cfg.seed)
    x = rng.normal(size=(rows, 256)).astype("float32")
    return tf.data.Dataset.from_tensor_slices((x, (x[:, 0] > 0).astype("int32") * 3))


def start_config(name: str, size: str) -> RunConfig:
    """The naive start of ``name`` (every speed knob off, as RunConfig's defaults have them)."""
    if name == "mnist_convnet":     # chapter 08's model: Keras's Simple MNIST convnet, registered
        from tfwb.tf.examples import mnist_convnet
        mnist_convnet.register()
        return RunConfig(workload="mnist_convnet", size=size, batch_size=128, label="mnist_convnet (chapter 08)")
    if name == "keras":
        tfwb.register_workload("bench-timeseries", model_fn=timeseries_model, data_fn=timeseries_data)
        return RunConfig(workload="bench-timeseries", size=size, label="keras timeseries (naive)")
    if name == "compute":
        tfwb.register_workload("bench-wide", model_fn=wide_model, data_fn=wide_data)
        return RunConfig(workload="bench-wide", size=size, data_source="memory", batch_size=256, jit_compile=True,
                         steps_per_execution=8, label="wide dense, staged batches, XLA, 8 steps a call")
    cfg = RunConfig(workload=name, size=size, label=f"{name} (naive)")
    if name == "images":
        cfg = cfg.replace(data_source="files", prefetch=False, parallel_map=False, interleave=False, cache=False)
    return cfg


#: The knobs tune can change, with the values the sweep tries (the start's value is put first).
TUNED_VALUES = (("prefetch", (False, True)), ("parallel_map", (False, True)), ("cache", (False, True)),
                ("jit_compile", (False, True)), ("steps_per_execution", (1, 8)),
                ("mixed_precision", ("off", "mixed_bfloat16", "mixed_float16")))


def sweep_space(start: RunConfig, hw) -> dict:
    """The sweep's space: every knob tune can change that the start's workload honours, with the values
    tune could try, less those ``tfwb.expect`` says are slower on this machine (a 16-bit policy on a CPU
    without its instructions: chapter 07 leaves them out too, and tune skips them), so both search the same
    changes. The default space of ``tfwb.sweep`` lacks ``steps_per_execution``, which tune tries."""
    from tfwb.workloads import get_workload
    workload = get_workload(start.workload)
    space = {}
    for knob, values in TUNED_VALUES:
        if not workload.applies(knob):
            continue
        current = getattr(start, knob)
        others = [v for v in values if v != current
                  and tfwb.expect.change(hw, start, **{knob: v}).expected != "slower"]
        if others:
            space[knob] = [current] + others
    return space


def one_start(name: str, args) -> dict:
    start = start_config(name, args.size)
    out = {"start": name, "config": start.to_dict()}
    print(f"== {name}: tune", flush=True)
    t0 = time.perf_counter()
    tuning = tfwb.tune(start, max_runs=args.max_runs, rounds=args.rounds,
                       progress=lambda event: print("  " + event.text()) if isinstance(event, LOGGED) else None)
    out["tune"] = {"runs": tuning.runs, "wall_s": round(time.perf_counter() - t0, 1),
                   "compare_s": round(tuning.compare_s, 1), "changes": tuning.changes(),
                   "gain": round(tuning.gain, 3), "text": tuning.text(), "trials": tuning.to_dict()["trials"]}
    nothing = "nothing to gain here, because" in tuning.text()
    out["tune"]["nothing_to_gain"] = nothing
    # Re-check every kept trial: the configuration before it against the one after, interleaved.
    rechecks, before = [], start
    for trial in tuning.kept:
        after = before.replace(**{trial.knob: trial.value}, label="")
        cmp = compare_interleaved(before, after, rounds=args.rounds)
        rechecks.append({"change": trial.change, "verdict": cmp.verdict, "speedup": round(cmp.speedup, 3),
                         "text": cmp.text()})
        before = after
    out["rechecks"] = rechecks
    out["wrong_keeps"] = sum(r["verdict"] == stats.SLOWER for r in rechecks)
    if name == "compute":
        out["goal_met"] = nothing and tuning.runs <= 3
        return out
    recorded = args.recorded_sweeps.get(name)
    if recorded is not None:                # the sweep's outcome as recorded; the comparison below is fresh
        print(f"== {name}: the sweep recorded {recorded['sweep']['recorded']}", flush=True)
        out["sweep_space"], out["sweep"] = recorded["sweep_space"], recorded["sweep"]
        winner = start.replace(**out["sweep"]["changes"], label="") if out["sweep"]["winner"] else None
    else:
        print(f"== {name}: sweep", flush=True)
        t0 = time.perf_counter()
        space = sweep_space(start, hardware.detect())
        out["sweep_space"] = {k: [str(v) for v in vs] for k, vs in space.items()}
        swept = tfwb.sweep(start, space)
        out["sweep"] = {"runs": swept.runs, "wall_s": round(time.perf_counter() - t0, 1),
                        "winner": swept.winner.label if swept.winner else None,
                        "changes": swept.winner.config.diff(start) if swept.winner else {},
                        "error": swept.error}
        winner = swept.winner.config.replace(steps=start.steps, label="") if swept.winner else None
    if winner is not None and same_configuration(winner, tuning.best):
        out["tune_vs_sweep"] = {"verdict": "the same configuration", "speedup": 1.0,
                                "text": "the same configuration (nothing to compare)"}
    elif winner is not None:
        cmp = compare_interleaved(winner, tuning.best, rounds=args.rounds)
        out["tune_vs_sweep"] = {"verdict": cmp.verdict, "speedup": round(cmp.speedup, 3), "text": cmp.text()}
    out["time_ratio"] = round(out["tune"]["wall_s"] / out["sweep"]["wall_s"], 3)
    return judge_goal(out)


def same_configuration(a: RunConfig, b: RunConfig) -> bool:
    """The same knobs (labels aside): an interleaved comparison of the two would measure only the noise."""
    return not a.replace(label="").diff(b.replace(label=""))


def judge_goal(out: dict) -> dict:
    """Issue 28's goal for one start: the tune's best reaches 90 % of the sweep winner's throughput (the
    median ratio of their interleaved rounds; 100 % when both found the same configuration) at no more than
    a third of the sweep's time, and no kept trial is called slower by its re-check."""
    if out["start"] == "compute":
        return out
    vs = out.get("tune_vs_sweep") or {}
    out["share_of_winner"] = 1.0 if vs.get("verdict") == "the same configuration" else vs.get("speedup", 1.0)
    out["goal_met"] = (out["share_of_winner"] >= 0.9 and out["time_ratio"] <= 1 / 3 and out["wrong_keeps"] == 0)
    return out


def recorded_sweeps(paths: str, size: str) -> dict:
    """``{start: {"sweep": ..., "sweep_space": ...}}`` from earlier results of the same size: a sweep costs
    5 to 9 minutes a start on 2 cores, and its winner does not depend on the tune being measured."""
    found = {}
    for path in filter(None, paths.split(",")):
        with open(path, encoding="utf-8") as fh:
            old = json.load(fh)
        if old.get("size") != size:
            raise SystemExit(f"--sweeps-from {path}: its size is {old.get('size')!r}, not {size!r}")
        for r in old["starts"]:
            if r.get("sweep") and not r["sweep"].get("error"):
                sweep = dict(r["sweep"], recorded=r["sweep"].get("recorded") or f"{path} ({old['when']})")
                found[r["start"]] = {"sweep": sweep, "sweep_space": r.get("sweep_space")}
    return found


def markdown(res: dict) -> str:
    lines = [f"# tfwb.tune against the sweep ({res['size']} size)", "",
             f"Machine: {res['machine']}; {res['when']}; command: `{res['command']}`.", "",
             "| start | tune: runs, s | tune's best | sweep: runs, s | sweep's winner | tune's best vs the "
             "sweep's winner (interleaved) | time ratio | wrong keeps | goal |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in res["starts"]:
        t, s = r["tune"], r.get("sweep") or {}
        vs = (r.get("tune_vs_sweep") or {}).get("text", "")
        lines.append(f"| {r['start']} | {t['runs']}, {t['wall_s']} | {t['changes'] or 'the start'} | "
                     f"{s.get('runs', '')}, {s.get('wall_s', '')} | {s.get('changes', '')} | {vs} | "
                     f"{r.get('time_ratio', '')} | {r['wrong_keeps']} | {'met' if r['goal_met'] else 'NOT met'} |")
    if res.get("note"):
        lines += ["", f"Note: {res['note']}."]
    for r in res["starts"]:
        lines += ["", f"## {r['start']}", ""]
        if r.get("sweep_space"):
            lines += [f"The sweep's space: `{r['sweep_space']}`.", ""]
        if (r.get("sweep") or {}).get("recorded"):
            lines += [f"The sweep's runs, seconds and winner are those recorded in {r['sweep']['recorded']} "
                      "(`--sweeps-from`); the interleaved comparison of the two winners is this run's.", ""]
        lines += ["Tune:", "", "```", r["tune"]["text"], "```"]
        for check in r["rechecks"]:
            lines.append(f"- re-check of kept {check['change']}: {check['text']}")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--size", choices=("small", "full"), default="small")
    p.add_argument("--starts", default=",".join(STARTS), help=f"some of {','.join(STARTS)}")
    p.add_argument("--max-runs", type=int, default=4)
    p.add_argument("--rounds", type=int, default=None, help="interleaved rounds (default: 10 small, 30 full)")
    p.add_argument("--out", default="benchmarks/results/tune")
    p.add_argument("--sweeps-from", default="", help="results JSON files (comma-separated) whose sweeps to reuse "
                                                     "for their starts of the same size, instead of sweeping again")
    args = p.parse_args(argv)
    starts = [s for s in args.starts.split(",") if s]
    bad = [s for s in starts if s not in STARTS]
    if bad:
        p.error(f"--starts {bad} not allowed; pick from {','.join(STARTS)}")
    if args.rounds is None:
        args.rounds = 10 if args.size == "small" else 30
    args.recorded_sweeps = recorded_sweeps(args.sweeps_from, args.size)
    res = {"size": args.size, "machine": hardware.describe(hardware.detect()), "python": platform.python_version(),
           "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
           "command": "python benchmarks/tune.py " + " ".join(argv if argv is not None else sys.argv[1:]),
           "starts": []}
    os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
    for name in starts:                     # written after every start: an interrupted benchmark keeps the rest
        res["starts"].append(one_start(name, args))
        with open(args.out + ".json", "w", encoding="utf-8") as fh:
            json.dump(res, fh, indent=1, default=str)
        with open(args.out + ".md", "w", encoding="utf-8") as fh:
            fh.write(markdown(res))
    print(markdown(res))
    return 0 if all(r["goal_met"] for r in res["starts"]) else 1


if __name__ == "__main__":
    sys.exit(main())
