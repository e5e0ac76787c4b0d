"""The wall-time cost of tfwb.keras.Monitor's live view inside model.fit.

The same fit (a small convnet on generated 28x28x1 images, 4,096 of them, batch 128, 3 epochs: 96
steps) runs with no callback, with ``Monitor(charts=False)`` and with ``Monitor(charts=True)`` (the
notebook's chart view, forced on outside a kernel: its widget is printed, not shown), interleaved
over rounds on one model; each fit's wall time is timed around ``model.fit``. One fit with
``Monitor(charts=True)`` runs first, untimed, as a notebook's earlier fit would: it traces the model,
imports the widgets, measures the peak the MFU reads, and teaches the view what its first chart costs.
With ``--before`` the Monitor as it was before the view was budgeted (the newest commit whose
``tfwb/keras/monitor.py`` has no ``VIEW_SHARE``, copied from git to a temporary module) runs
``charts=True`` too, in the same rounds.

Each condition runs once quiet (what else the machine runs is left alone; the load average is
recorded) and, with ``--loaded``, once with one CPU-bound process beside it (``python -c "while
True: pass"``, started here and killed at the end of the condition).

It also times the pictures the view could draw, on the last chart fit's result: the live view's SVG
(``tfwb.ui.charts.live_svg``, what it draws), a light matplotlib figure kept across draws (``LightFigure``, for
comparison: fresh, then redrawn) and the Workbench's full run chart (``tfwb.ui.charts.run_chart_png``,
what the view drew before, now drawn only on request after the fit).

Target: the chart view's fit within 3 % of the wall time of the fit without a view
(``tfwb.keras.monitor.VIEW_SHARE``).

    python benchmarks/view_cost.py [--rounds 5] [--before] [--before-rounds 2] [--loaded] [--images 4096]
        [--out benchmarks/results/view_cost.json]
"""
from __future__ import annotations

import argparse
import contextlib
import datetime
import importlib.util
import io
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from tfwb.keras import monitor as monitor_module  # noqa: E402
from tfwb.keras import Monitor  # noqa: E402
from tfwb.ui.charts import run_chart_png  # noqa: E402
from tfwb.ui.charts.live_svg import live_svg  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
IMAGES, BATCH, EPOCHS = 4096, 128, 3


def machine() -> dict:
    """lscpu's model name, the cores this process may use, Python, TF and Keras versions."""
    name = platform.processor() or ""
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=False).stdout
        name = next((line.split(":", 1)[1].strip() for line in out.splitlines()
                     if line.startswith("Model name")), name)
    except OSError:
        pass
    return {"cpu": name, "cores": len(os.sched_getaffinity(0)), "python": platform.python_version(),
            "tensorflow": tf.__version__, "keras": keras.__version__}


def before_module(rev: str | None) -> tuple:
    """The Monitor's module before the view was budgeted, imported from a temporary file: (module, commit)."""
    if rev is None:
        revs = subprocess.run(["git", "log", "--format=%H", "--", "tfwb/keras/monitor.py"], cwd=ROOT,
                              capture_output=True, text=True, check=True).stdout.split()
        for r in revs:
            text = subprocess.run(["git", "show", f"{r}:tfwb/keras/monitor.py"], cwd=ROOT, capture_output=True,
                                  text=True, check=True).stdout
            if "VIEW_SHARE" not in text:
                rev = r
                break
        else:
            raise SystemExit("no commit of tfwb/keras/monitor.py without VIEW_SHARE")
    text = subprocess.run(["git", "show", f"{rev}:tfwb/keras/monitor.py"], cwd=ROOT, capture_output=True,
                          text=True, check=True).stdout
    path = Path(tempfile.mkdtemp(prefix="tfwb-before-")) / "tfwb_monitor_before.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location("tfwb_monitor_before", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module, rev


def build(images: int = IMAGES):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(images, 28, 28, 1)).astype("float32")
    y = rng.integers(0, 10, size=images).astype("int32")
    keras.utils.set_random_seed(0)
    m = keras.Sequential([keras.Input((28, 28, 1)), keras.layers.Conv2D(16, 3, activation="relu"),
                          keras.layers.MaxPooling2D(), keras.layers.Conv2D(32, 3, activation="relu"),
                          keras.layers.MaxPooling2D(), keras.layers.Flatten(), keras.layers.Dense(10)],
                         name="convnet")
    m.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return m, x, y


def fit(m, x, y, callbacks) -> float:
    shown = io.StringIO()                      # the chart widget's repr, printed outside a kernel
    t = time.perf_counter()
    with contextlib.redirect_stdout(shown):
        m.fit(x, y, batch_size=BATCH, epochs=EPOCHS, verbose=0, shuffle=False, callbacks=callbacks)
    return time.perf_counter() - t


def facts(r) -> dict:
    e = r.extras
    return {"view_s": e.get("view_s"), "view_share": e.get("view_share"), "view_charts": e.get("view_charts"),
            "view_updates": e.get("view_updates"), "median_examples_per_s": r.throughput_per_s,
            "wall_examples_per_s": e.get("wall_examples_per_s"), "batch_size": r.config.batch_size,
            "wall_note": any(n.startswith("steps: over the ") for n in r.notes)}


class LightFigure:
    """For comparison only: a light matplotlib chart kept across draws (two small panels, curves updated
    in place, no layout engine), the cheapest matplotlib picture tried for the live view."""

    def __init__(self) -> None:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure

        self.fig = Figure(figsize=(8.0, 2.3), dpi=72)
        self.canvas = FigureCanvasAgg(self.fig)
        self.ax, self.ax2 = self.fig.subplots(1, 2, gridspec_kw={"width_ratios": [3, 2]})
        self.fig.subplots_adjust(left=0.07, right=0.99, bottom=0.14, top=0.86, wspace=0.18)
        (self.warm,) = self.ax.plot([], [], color="#bab0ac")
        (self.meas,) = self.ax.plot([], [], color="#4e79a7")
        (self.cpu,) = self.ax2.plot([], [], color="#4e79a7")
        self.title = self.ax.set_title("", fontsize=8, loc="left")
        self.ax2.set_title("CPU %", fontsize=8, loc="left")

    def png(self, r) -> bytes:
        warm = [t * 1e3 for t in r.warmup_times_s]
        meas = [t * 1e3 for t in r.step_times_s]
        self.warm.set_data(range(-len(warm), 0), warm)
        self.meas.set_data(range(1, len(meas) + 1), meas)
        self.ax.set_xlim(-len(warm) - 1, len(meas) + 1)
        self.ax.set_ylim(0, max(warm + meas) * 1.1)
        self.title.set_text(f"ms per step, median {statistics.median(meas):.2f}")
        t = [s.t_s for s in r.samples]
        self.cpu.set_data(t, [(s.cpu_process_pct or 0) / 2 for s in r.samples])
        self.ax2.set_xlim(t[0], t[-1])
        self.ax2.set_ylim(0, 105)
        buf = io.BytesIO()
        self.canvas.print_png(buf)
        return buf.getvalue()


def chart_costs(r) -> dict:
    """Seconds per picture of ``r``: the live view's SVG (what the view draws), a light matplotlib
    figure (fresh, then redrawn), the full run chart (drawn only on request, after the fit)."""
    def timed(f, k):
        out = []
        for _ in range(k):
            t = time.perf_counter()
            f()
            out.append(time.perf_counter() - t)
        return out

    svg = timed(lambda: live_svg(r), 7)
    fresh = timed(lambda: LightFigure().png(r), 3)
    light = LightFigure()
    light.png(r)
    redraw = timed(lambda: light.png(r), 5)
    full = timed(lambda: run_chart_png(r), 3)
    return {"live_svg_s": statistics.median(svg), "light_figure_first_s": statistics.median(fresh),
            "light_figure_redraw_s": statistics.median(redraw), "full_chart_s": statistics.median(full),
            "measured_steps": r.measured_steps, "samples": len(r.samples), "live_svg_all_s": svg,
            "light_figure_first_all_s": fresh, "light_figure_redraw_all_s": redraw, "full_chart_all_s": full}


def condition(m, x, y, rounds: int, before, before_rounds: int) -> dict:
    variants = ["none", "monitor", "chart"] + (["before_chart"] if before is not None else [])
    walls = {v: [] for v in variants}
    seen = {v: [] for v in variants if v != "none"}
    load_before = os.getloadavg()
    last = None
    for k in range(rounds):
        order = variants[k % len(variants):] + variants[:k % len(variants)]     # rotate the order
        for v in order:
            if v == "before_chart" and k >= before_rounds:
                continue
            if v == "none":
                walls[v].append(fit(m, x, y, []))
            else:
                mon = before.Monitor(charts=True) if v == "before_chart" else Monitor(charts=v == "chart")
                walls[v].append(fit(m, x, y, [mon]))
                seen[v].append(facts(mon.result))
                if v == "chart":
                    last = mon.result
            print(f"  round {k + 1} {v}: {walls[v][-1]:.2f} s", flush=True)
    medians = {v: statistics.median(w) for v, w in walls.items()}
    base = medians["none"]
    out = {"load_before": load_before, "load_after": os.getloadavg(), "wall_s": walls, "median_wall_s": medians,
           "vs_none": {v: medians[v] / base - 1 for v in variants}, "monitor_facts": seen}
    if last is not None:
        out["chart_costs"] = chart_costs(last)
    return out


def markdown(data: dict) -> str:
    mch = data["machine"]
    lines = ["# The live view's cost inside `model.fit`", "",
             f"Machine: {mch['cpu']}, {mch['cores']} cores; Python {mch['python']}, TensorFlow {mch['tensorflow']}, "
             f"Keras {mch['keras']}; {data['date']}.",
             f"Command: `{data['command']}` ({data['took_s'] / 60:.1f} min).",
             f"Fit: a small convnet (two 3x3 convolutions, 16 and 32 filters) on {data['images']:,} generated "
             f"28x28x1 images, batch {BATCH}, {EPOCHS} epochs ({-(-data['images'] // BATCH) * EPOCHS} steps), after "
             "one untimed fit with `Monitor(charts=True)` (tracing, imports, the peak measured, the first chart's "
             f"cost learned); variants interleaved over {data['rounds']} rounds (the order rotated each round); "
             "medians of the wall time around `model.fit`.", ""]
    if data.get("before_commit"):
        lines += [f"`before_chart`: `Monitor(charts=True)` as of commit {data['before_commit'][:10]} (the full run "
                  f"chart redrawn every 2 s, unbudgeted), in the first {data['before_rounds']} round(s) only.", ""]
    for name, c in data["conditions"].items():
        lines += [f"## {name}", "",
                  f"Load average before / after: {' '.join(f'{v:.2f}' for v in c['load_before'])} / "
                  f"{' '.join(f'{v:.2f}' for v in c['load_after'])}." + (
                      " One CPU-bound process (`python -c \"while True: pass\"`) ran beside the fits."
                      if name == "loaded" else " Nothing started beside the fits (other work on the machine left "
                                               "as it was)."), "",
                  "| variant | median wall (s) | rounds (s) | vs no callback | view's own share (median) | "
                  "charts drawn | wall rate / median-step rate |", "|---|---|---|---|---|---|---|"]
        for v, med in c["median_wall_s"].items():
            f = c["monitor_facts"].get(v, [])
            share = statistics.median([x["view_share"] for x in f if x.get("view_share") is not None] or [0.0])
            charts = ", ".join(str(x.get("view_charts")) for x in f if x.get("view_charts") is not None) or "-"
            ratio = [x["wall_examples_per_s"] / x["median_examples_per_s"] for x in f
                     if x.get("wall_examples_per_s") and x.get("median_examples_per_s")]
            lines.append(f"| {v} | {med:.2f} | {', '.join(f'{w:.2f}' for w in c['wall_s'][v])} | "
                         f"{100 * c['vs_none'][v]:+.1f} % | "
                         f"{f'{100 * share:.1f} %' if v in ('chart',) else '-'} | {charts} | "
                         f"{', '.join(f'{q:.2f}' for q in ratio) if ratio else '-'} |")
        none = c["wall_s"]["none"]
        lines += ["", f"Run-to-run spread of the fit without a callback: {min(none):.2f}-{max(none):.2f} s "
                      f"({100 * (max(none) - min(none)) / statistics.median(none):.0f} % of its median): wall-time "
                      "differences between variants smaller than that are this machine's noise; the view's own share "
                      "is measured inside each fit and does not depend on it."]
        cc = c.get("chart_costs")
        if cc:
            lines += ["", f"Pictures of the last chart fit's result ({cc['measured_steps']} measured steps, "
                          f"{cc['samples']} samples), medians: the live view's SVG {1e3 * cc['live_svg_s']:.1f} ms; "
                          f"a light matplotlib figure {1e3 * cc['light_figure_first_s']:.0f} ms fresh, "
                          f"{1e3 * cc['light_figure_redraw_s']:.0f} ms redrawn; the full run chart "
                          f"{1e3 * cc['full_chart_s']:.0f} ms."]
        lines.append("")
    lines += ["## Reading it", "",
              "`vs no callback` is the whole cost of the callback: the Monitor's hooks, window syncs, sampler, "
              "result, history and, for `chart`, the view. `view's own share` is what the Monitor recorded "
              "(`extras[\"view_share\"]`: the view's time over the fit's wall time from `on_train_begin`). "
              "The view draws a chart only while its time stays within 3 % of the fit's "
              "(`tfwb.keras.monitor.VIEW_SHARE`); otherwise it updates only its status text. "
              "The live chart is an SVG written as text (`tfwb.ui.charts.live_svg.live_svg`) that the browser draws: "
              "it is redrawn every `REDRAW_S` (2 s) well within the budget, where even a light matplotlib figure "
              "would take a few % of a short fit on its own and the full run chart far more. The full run chart "
              "is drawn only on request (the view's \"full chart\" button), after the fit. `before_chart` redrew "
              "the full run chart every 2 s on the training thread.",
              ""]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--before", action="store_true", help="also the Monitor before the view was budgeted")
    ap.add_argument("--before-rounds", type=int, default=2,
                    help="rounds that run the Monitor before the change (the first ones; it is slow)")
    ap.add_argument("--before-rev", default=None, help="the commit to take it from (default: found in git)")
    ap.add_argument("--images", type=int, default=IMAGES, help="training images (a smoke run: fewer)")
    ap.add_argument("--loaded", action="store_true", help="also with one CPU-bound process beside the fits")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "view_cost.json"))
    args = ap.parse_args()
    t0 = time.perf_counter()
    before, rev = before_module(args.before_rev) if args.before else (None, None)
    m, x, y = build(args.images)
    # Once before anything is timed, as a notebook's second fit: traced, the widgets imported, the peak
    # the MFU reads measured and cached, the first chart's cost learned (tfwb.ui.view_budget._FIRST_DRAW).
    fit(m, x, y, [Monitor(charts=True)])
    data = {"machine": machine(), "date": datetime.datetime.now().isoformat(timespec="minutes"),
            "command": "python " + " ".join([os.path.relpath(sys.argv[0], ROOT)] + sys.argv[1:]),
            "rounds": args.rounds, "before_rounds": args.before_rounds, "images": args.images,
            "before_commit": rev, "view_share_budget": monitor_module.VIEW_SHARE, "conditions": {}}
    names = ["quiet"] + (["loaded"] if args.loaded else [])
    for name in names:
        print(f"{name}:", flush=True)
        hog = None
        if name == "loaded":
            hog = subprocess.Popen([sys.executable, "-c", "while True: pass"])
        try:
            data["conditions"][name] = condition(m, x, y, args.rounds, before, args.before_rounds)
        finally:
            if hog is not None:
                hog.kill()
                hog.wait()
    data["took_s"] = time.perf_counter() - t0
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(data, indent=1) + "\n")
    md = markdown(data)
    out.with_suffix(".md").write_text(md)
    print(md)


if __name__ == "__main__":
    main()
