"""tfwb.ui.charts: the package and its families (common, steps, utilization, comparison, curves, limits):
PNG output, what each draw_* puts on its Axes, no pyplot. The profiler's charts are tested in
test_profiler.py, the sweep's in test_search.py."""
import ast
import dataclasses
import importlib
import subprocess
import sys

import pytest
from matplotlib.colors import to_hex
from matplotlib.figure import Figure

import fakes
from tfwb import render as text
from tfwb.config import RunConfig
from tfwb.records import RunResult
from tfwb.ui import charts

PNG = b"\x89PNG\r\n\x1a\n"


def make_result(cfg=None, *, step_ms=80.0, wait_ms=20.0, n=20, warmup_ms=(1800.0, 110.0, 105.0), gpus=1):
    """The shared builder (tests/fakes.py) in milliseconds, with the charts' defaults: steps
    jittered by up to 2 ms, three warm-up steps, utilization samples from ``gpus`` GPUs."""
    return fakes.make_result(cfg, step_s=step_ms / 1e3, wait_s=wait_ms / 1e3, n=n,
                             warmup_s=[w / 1e3 for w in warmup_ms], jitter_s=1e-3, gpus=gpus)


def texts(ax):
    return [t.get_text() for t in ax.texts]


def legend_labels(ax):
    legend = ax.get_legend()
    return [t.get_text() for t in legend.get_texts()] if legend else []


# -- the package: one module per family, re-exported ---------------------------------------------------
FAMILIES = ("common", "step_times", "utilization", "comparison", "profile", "curves", "limits")


def test_the_package_reexports_each_family_and_holds_no_logic():
    exported = []
    for family in FAMILIES:
        module = importlib.import_module(f"tfwb.ui.charts.{family}")
        for name in module.__all__:
            assert getattr(charts, name) is getattr(module, name), (family, name)
        exported += module.__all__
        if family != "common":                # common's helpers serve the families, not the chapters
            tree = ast.parse(open(module.__file__).read())
            defined = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)} | {
                t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets
                if isinstance(t, ast.Name) and t.id.isupper()}
            assert {d for d in defined if not d.startswith("_")} == set(module.__all__), family
    assert sorted(charts.__all__) == sorted(exported) and len(set(exported)) == len(exported)
    body = ast.parse(open(charts.__file__).read()).body
    assert all(isinstance(n, (ast.ImportFrom, ast.Expr)) or (isinstance(n, ast.Assign) and
               [t.id for t in n.targets] == ["__all__"]) for n in body)


# -- common -------------------------------------------------------------------------------------------
def test_figure_png_leaves_no_pyplot_and_no_tensorflow():
    code = ("import sys; from tfwb.ui import charts; from matplotlib.figure import Figure; "
            "fig = Figure(); fig.subplots().plot([1, 2]); assert charts.figure_png(fig)[:4] == b'\\x89PNG'; "
            "assert 'matplotlib.pyplot' not in sys.modules and 'tensorflow' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True)


# -- steps: one run's step times, and the run's chart ------------------------------------------------
def test_run_chart_is_png_and_changes_with_the_result():
    first = charts.run_chart_png(make_result())
    assert first.startswith(PNG)
    assert charts.run_chart_png(make_result()) == first                 # deterministic
    assert charts.run_chart_png(make_result(step_ms=40.0)) != first


def test_step_times_clips_to_three_p95_and_annotates_the_tall_warmup_bar():
    ax = Figure().subplots()
    result = make_result()
    charts.draw_step_times(ax, result)
    p95_ms = sorted(t * 1e3 for t in result.step_times_s)[-1]           # quantile(0.95) of 20 values ~ max
    assert ax.get_ylim()[1] == pytest.approx(3 * p95_ms, rel=0.02)
    assert "1,800 ms \u2191" in texts(ax)
    assert "warm-up" in texts(ax)
    assert ax.get_ylabel() == "step time (ms)"
    labels = legend_labels(ax)
    assert labels[:3] == ["waiting for input", "rest of step", "warm-up (excluded)"]
    assert labels[3].startswith("median 80.0 ms")
    assert ax.get_xlim()[0] < 0 < ax.get_xlim()[1]                       # warm-up left of the divider


def test_step_times_without_outliers_is_not_clipped():
    ax = Figure().subplots()
    charts.draw_step_times(ax, make_result(warmup_ms=()))
    assert ax.get_ylim()[1] > 82.0
    assert not any("\u2191" in t for t in texts(ax)) and "warm-up" not in texts(ax)


def test_step_times_of_a_failed_run_shows_the_error():
    ax = Figure().subplots()
    charts.draw_step_times(ax, RunResult(config=RunConfig(), status="failed", error="OOM"))
    assert "run failed: OOM" in texts(ax)


# -- utilization ---------------------------------------------------------------------------------------
def test_utilization_plots_each_gpu_and_shades_warmup_and_steps():
    ax = Figure().subplots()
    charts.draw_utilization(ax, make_result(gpus=2))
    labels = legend_labels(ax)
    assert {"warm-up", "measured steps", "GPU 0", "GPU 1"} <= set(labels)
    assert "no GPU" not in texts(ax)
    assert ax.get_xlabel() == "time since run start (s)"
    assert ax.get_ylim() == (0, 105)


def test_utilization_puts_every_cpu_curve_in_one_unit():
    ax = Figure().subplots()
    result = dataclasses.replace(make_result(), fingerprint={"cpu_count": 2})
    charts.draw_utilization(ax, result)
    labels = legend_labels(ax)
    assert "CPU, this process (% of all 2 cores)" in labels
    assert "CPU, other programs (% of all 2 cores)" in labels
    assert not any("% of 1 core" in label for label in labels)
    assert ax.get_ylabel() == "% of all CPU cores / GPU busy" and ax.get_ylim() == (0, 105)
    this = next(line for line in ax.get_lines() if line.get_label().startswith("CPU, this process"))
    assert max(this.get_ydata()) <= 100                                  # 126 % of one core -> 63 %
    assert len(ax.figure.axes) == 1                                      # one axis: no twin


def test_utilization_without_a_core_count_puts_the_process_on_its_own_axis():
    fig = Figure()
    ax = fig.subplots()
    charts.draw_utilization(ax, make_result())                           # no fingerprint
    assert len(fig.axes) == 2                                            # a second y axis, labelled
    assert fig.axes[1].get_ylabel() == "this process (% of 1 core)"
    assert "CPU, this process (% of 1 core, right)" in legend_labels(ax)


def test_utilization_marks_step_boundaries_on_the_time_axis():
    ax = Figure().subplots()
    result = make_result(n=20)
    charts.draw_utilization(ax, result)
    boundaries = [line.get_xdata()[0] for line in ax.get_lines() if line.get_color() == charts.STEP_LINE_COLOR]
    assert boundaries == pytest.approx(list(result.step_start_s[1:]))
    top = [c for c in ax.child_axes]
    assert top and top[0].get_xlabel() == "measured step (start)"
    numbered = [t.get_text() for t in top[0].get_xticklabels()]
    assert numbered[0] == "1" and numbered[-1] == "20"
    ticks = sorted(list(top[0].get_xticks()) + list(top[0].get_xticks(minor=True)))
    assert ticks == pytest.approx(list(result.step_start_s))             # one tick per step start


def test_utilization_says_no_gpu_and_handles_no_samples():
    ax = Figure().subplots()
    charts.draw_utilization(ax, make_result(gpus=0))
    assert "no GPU" in texts(ax)
    ax = Figure().subplots()
    charts.draw_utilization(ax, RunResult(config=RunConfig(), status="failed", error="x"))
    assert texts(ax) == ["no utilization samples (run failed: x)"]
    assert not ax.axison                                                 # a message, not empty axes


# -- comparison ----------------------------------------------------------------------------------------
def test_comparison_is_png_and_changes_with_the_runs():
    runs = [make_result(), make_result(RunConfig(prefetch=True), step_ms=50.0)]
    one = charts.comparison_png(runs[:1])
    two = charts.comparison_png(runs)
    assert one.startswith(PNG) and two.startswith(PNG) and one != two
    assert charts.comparison_png([]).startswith(PNG)


def test_comparison_marks_baseline_failures_and_verdicts():
    runs = [make_result(), make_result(RunConfig(prefetch=True), step_ms=40.0),
            RunResult(config=RunConfig(batch_size=4096), status="failed", error="OOM")]
    ax = Figure().subplots()
    charts.draw_comparison(ax, runs)
    ticks = [t.get_text() for t in ax.get_yticklabels()]
    assert ticks == ["#1 baseline", "#2 prefetch", "#3 batch_size=4096"]
    assert ax.get_yticklabels()[2].get_color() == charts.FAILED_COLOR == text.FAILED_COLOR
    notes = texts(ax)
    assert "80.0 ms  the baseline" in notes and "40.0 ms  2.00x faster than #1 (the baseline)" in notes
    failed = [t for t in ax.texts if t.get_text() == "run failed: OOM"]
    assert failed and failed[0].get_color() == charts.FAILED_COLOR
    assert len(ax.patches) == 2                                           # bars for ok runs only
    assert ax.patches[0].get_facecolor() != ax.patches[1].get_facecolor()  # the baseline stands out


def test_comparison_names_runs_relative_to_the_baseline_config():
    runs = [make_result(RunConfig(prefetch=True), step_ms=40.0), make_result()]
    ax = Figure().subplots()
    charts.draw_comparison(ax, runs, baseline_config=RunConfig())
    assert [t.get_text() for t in ax.get_yticklabels()] == ["#1 prefetch", "#2 baseline"]
    # The first run has nothing before it: its note is the comparison with the baseline.
    assert texts(ax) == ["40.0 ms  2.00x faster than the baseline", "80.0 ms  2.00x slower than #1"]


def _issue_history():
    """The issue's history: all off, then tuned input, then mixed_float16 on top."""
    tuned = RunConfig(prefetch=True, parallel_map=True, interleave=True)
    return [make_result(step_ms=120.0), make_result(tuned, step_ms=43.0),
            make_result(tuned.replace(mixed_precision="mixed_float16"), step_ms=102.0)]


def test_labels_name_the_distinguishing_knob_wrapped_not_cut():
    ax = Figure().subplots()
    charts.draw_comparison(ax, _issue_history(), baseline_config=RunConfig())
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert "mixed_precision=mixed_float16" in labels[2]                   # the whole knob, never cut
    assert "mixed_precision" not in labels[1]                             # the two runs now read apart
    # Lines keep to the width, except one holding a single knob longer than it (never cut).
    assert all(len(line) <= charts.LABEL_WIDTH or "," not in line.strip(" ,")
               for label in labels for line in label.splitlines())
    assert labels[2].count("\n") >= 1 and "\u2026" not in "".join(labels)


def test_colour_and_words_follow_the_comparison_shown():
    runs = _issue_history()
    ax = Figure().subplots()
    charts.draw_comparison(ax, runs, baseline_config=RunConfig())          # versus the previous run
    mixed_bar = ax.patches[2]
    assert to_hex(mixed_bar.get_facecolor()) == text.SLOWER_COLOR
    head = next(t for t in ax.texts if t.get_text().startswith("102.0 ms"))
    assert head.get_text() == "102.0 ms  2.37x slower than #2" and to_hex(head.get_color()) == text.SLOWER_COLOR
    assert "1.18x faster than the baseline" in texts(ax)                  # the other comparison, in grey
    assert "colour: compared with the previous run" in ax.get_title(loc="left")

    ax = Figure().subplots()
    charts.draw_comparison(ax, runs, baseline_config=RunConfig(), versus="baseline")
    assert to_hex(ax.patches[2].get_facecolor()) == text.FASTER_COLOR
    head = next(t for t in ax.texts if t.get_text().startswith("102.0 ms"))
    assert head.get_text() == "102.0 ms  1.18x faster than the baseline"
    assert to_hex(head.get_color()) == text.FASTER_COLOR
    assert "2.37x slower than #2" in texts(ax)
    with pytest.raises(ValueError, match="versus"):
        charts.draw_comparison(Figure().subplots(), runs, versus="first")


def test_comparison_states_the_noise_band():
    ax = Figure().subplots()
    charts.draw_comparison(ax, _issue_history())
    assert "Run-to-run noise: \u00b1" in ax.get_xlabel()


# -- failures, in every family --------------------------------------------------------------------
def test_failed_runs_never_leave_empty_axes():
    failed = RunResult(config=RunConfig(), status="failed", error="ResourceExhaustedError: OOM")
    fig = Figure()
    ax = fig.subplots()
    charts.draw_step_times(ax, failed)
    assert not ax.axison and texts(ax) == ["run failed: ResourceExhaustedError: OOM"]
    assert to_hex(ax.texts[0].get_color()) == to_hex(text.FAILED_COLOR)
    ax = Figure().subplots()
    charts.draw_comparison(ax, [failed])
    assert not ax.axison and "no finished runs yet" in texts(ax)[0] and "OOM" in texts(ax)[0]
    ax = Figure().subplots()
    charts.draw_comparison(ax, [])
    assert not ax.axison and texts(ax) == ["no runs yet"]
    assert charts.run_chart_png(failed).startswith(PNG)
    assert charts.comparison_png([failed]).startswith(PNG)


def test_a_run_that_failed_mid_way_shows_its_steps_and_says_it_failed():
    partial = dataclasses.replace(make_result(), status="failed", error="InternalError: boom")
    ax = Figure().subplots()
    charts.draw_step_times(ax, partial)
    assert "run failed: InternalError: boom" in ax.get_title(loc="left")
    assert ax.axison and len(ax.patches) > 0


def test_charts_use_the_one_failure_colour():
    assert charts.FAILED_COLOR is text.FAILED_COLOR


# -- curves: convergence charts (chapter 04) ---------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class FakeSweep:
    label: str
    rates: tuple
    final_losses: tuple
    first_loss: float = 2.0
    steps: int = 100
    tail: int = 10

    @property
    def best_rate(self):
        kept = [(v, r) for r, v in zip(self.rates, self.final_losses) if v is not None]
        return min(kept)[1] if kept else None

    @property
    def best_loss(self):
        kept = [v for v in self.final_losses if v is not None]
        return min(kept) if kept else None


def test_lr_sweep_has_a_log_rate_axis_rings_the_best_rate_and_marks_divergence_on_the_top_edge():
    sgd = FakeSweep("sgd", (0.01, 0.1, 1.0, 10.0), (1.9, 1.2, 5.0, None))
    adam = FakeSweep("adam", (0.001, 0.01), (0.8, 1.0))
    ax = Figure().subplots()
    charts.draw_lr_sweep(ax, [sgd, adam])
    assert ax.get_xscale() == "log" and ax.get_ylim() == (0, pytest.approx(3.0))   # 1.5 x the start
    assert legend_labels(ax) == ["sgd (best 0.1)", "adam (best 0.001)", "loss at the start"]
    points = {tuple(line.get_xydata()[0]) + (line.get_marker(),) for line in ax.lines if len(line.get_xydata()) == 1}
    assert (10.0, 3.0, "x") in points                  # diverged: on the top edge
    assert (1.0, 3.0, "^") in points                   # 5.0 is above the axis: on the edge
    assert (0.1, 1.2, "o") in points and (0.001, 0.8, "o") in points      # the rings
    assert "100 steps" in ax.get_ylabel() and "last 10" in ax.get_ylabel()
    assert charts.lr_sweep_png([sgd]).startswith(PNG)
    empty = Figure().subplots()
    charts.draw_lr_sweep(empty, [])
    assert not empty.axison and texts(empty) == ["no sweeps to draw"]


def curve_result(label, losses, norms=(), status="ok", clip=None, extras=None):
    cfg = RunConfig(label=label, clip=clip, grad_norms=bool(norms), warmup_steps=1)
    return RunResult(config=cfg, status=status, warmup_losses=losses[:1], losses=losses[1:],
                     warmup_grad_norms=norms[:1], grad_norms=norms[1:], step_times_s=[0.01] * (len(losses) - 1),
                     extras=extras or {})


def test_grad_norm_curves_go_logarithmic_show_the_clip_and_mark_where_a_run_diverged():
    blown = curve_result("no clip", [2.0, 50.0, 1e6, float("nan")], norms=(10.0, 1e3, 1e7, float("nan")),
                         status="diverged")
    clipped = curve_result("clipped", [2.0, 1.5, 1.0, 0.8], norms=(10.0, 8.0, 5.0, 3.0), clip="global_norm:1.0")
    ax = Figure().subplots()
    charts.draw_curves(ax, [blown, clipped], "grad_norm")
    assert ax.get_yscale() == "log" and ax.get_xlabel() == "training step"
    assert list(ax.lines[0].get_xdata()) == [1, 2, 3]          # NaN left out; steps from 1
    assert "NaN next" in texts(ax) and "clip threshold 1" in texts(ax)
    assert legend_labels(ax) == ["no clip", "clipped"]
    lin = Figure().subplots()
    charts.draw_curves(lin, [clipped], "loss")
    assert lin.get_yscale() == "linear" and list(lin.lines[0].get_ydata()) == [2.0, 1.5, 1.0, 0.8]
    none = Figure().subplots()
    charts.draw_curves(none, [curve_result("x", [1.0, 0.5])], "grad_norm")
    assert not none.axison and "grad_norms=True" in texts(none)[0]
    with pytest.raises(ValueError, match="quantity='speed'"):
        charts.draw_curves(Figure().subplots(), [clipped], "speed")
    assert charts.curves_png([blown, clipped]).startswith(PNG)


def test_held_out_curves_draw_the_training_set_dashed_and_the_held_out_set_solid():
    r = curve_result("adamw", [2.0, 1.0], extras={"held_out": {"steps": [0, 10, 20], "train_loss": [2.0, 0.5, 0.1],
                                                                "held_out_loss": [2.0, 2.5, 3.0]}})
    ax = Figure().subplots()
    charts.draw_curves(ax, [r], "held_out")
    assert legend_labels(ax) == ["adamw: training set", "adamw: held out"]
    assert [line.get_linestyle() for line in ax.lines] == ["--", "-"]
    assert list(ax.lines[1].get_ydata()) == [2.0, 2.5, 3.0]


# -- issue 18 ---------------------------------------------------------------------------------------------
def _step_labels(result, width_in=9.0):
    """Draw the utilization panel as the run chart does; the top axis's shown labels and their extents."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    fig = Figure(figsize=(width_in, 5.6), dpi=96, layout="constrained")
    _, bottom = fig.subplots(2, 1, height_ratios=[3, 2])
    charts.draw_utilization(bottom, result)
    FigureCanvasAgg(fig).draw()
    top = bottom.child_axes[0]
    labels = [t for t in top.xaxis.get_ticklabels() if t.get_visible() and t.get_text()]
    return [t.get_text() for t in labels], sorted((t.get_window_extent().x0, t.get_window_extent().x1)
                                                  for t in labels)


@pytest.mark.parametrize("n, warmup_s", [(300, 60.0), (1200, 0.1)])
def test_step_labels_never_overlap_and_stay_few(n, warmup_s):
    """A long warm-up squeezed 8 labels into a few pixels; a long run keeps a bounded count."""
    run = fakes.make_result(RunConfig(), step_s=0.01, n=n, warmup_s=(warmup_s,), gpus=0,
                            fingerprint={"cpu_count": 2})
    texts, spans = _step_labels(run)
    assert texts[0] == "1" and 1 <= len(texts) <= 12
    assert all(b[0] >= a[1] for a, b in zip(spans, spans[1:])), spans
    assert all(t.isdigit() and 1 <= int(t) <= n for t in texts)


def test_the_loss_beside_the_previous_run_names_both_and_the_gap():
    adam = fakes.make_result(RunConfig(), n=8, losses=(2.0,) * 6 + (1.0,) * 2)
    sgd = fakes.make_result(RunConfig(optimizer="sgd"), n=8, losses=(2.0,) * 6 + (1.5,) * 2)
    ax = Figure().subplots()
    charts.draw_loss_beside(ax, sgd, adam, number=2, previous_number=1)
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend == ["#1 (previous run): optimizer=adam", "#2 optimizer=sgd"]
    assert ax.get_title(loc="left") == ("training loss: #2 beside #1 \u2014 final loss 1.5 vs 1 for #1 "
                                        "(+0.5, higher) after 8 steps")
    assert [len(line.get_xdata()) for line in ax.get_lines() if line.get_label().startswith("#")] == [8, 8]
    assert charts.loss_beside_png(sgd, adam, number=2, previous_number=1)[:4] == b"\x89PNG"
    empty = Figure().subplots()
    charts.draw_loss_beside(empty, fakes.make_result(), fakes.make_result(), number=2, previous_number=1)
    assert not empty.axison


def test_the_comparison_chart_says_per_example_when_batches_differ():
    b64 = fakes.make_result(RunConfig(batch_size=64), step_times_s=tuple(0.0492 * (1 + 0.002 * (i % 3)) for i in range(20)))
    b128 = fakes.make_result(RunConfig(batch_size=128), step_times_s=tuple(0.0812 * (1 + 0.002 * (i % 3)) for i in range(20)))
    ax = Figure().subplots()
    charts.draw_comparison(ax, [b64, b128])
    texts = [t.get_text() for t in ax.texts]
    assert any("per example: 1.21x faster than #1 (the baseline) (batch 128 vs 64)" in t for t in texts), texts


# -- limits (issue 19): where the step's time goes, achieved FLOP/s against the peaks ------------------
def limits_runs():
    counted = fakes.make_result(RunConfig(label="base"), step_s=0.1, wait_s=0.03, model_flops_per_step=2e9,
                      peak_flops_per_s=1e11, datasheet_flops_per_s=2e11, call_overhead_s=2e-3)
    uncounted = fakes.make_result(RunConfig(prefetch=True), step_s=0.05, wait_s=0.001,
                                  flops_uncounted=("lstm (LSTM)",))
    return [counted, fakes.failed_result(RunConfig(), "OOM"), uncounted]


def test_time_split_adds_up_to_the_median_step():
    split = charts.time_split(limits_runs()[0])
    assert split == pytest.approx({"input": 0.03, "overhead": 0.002, "compute": 0.02, "rest": 0.048, "step": 0.1})
    assert charts.time_split(limits_runs()[2])["compute"] is None
    assert charts.time_split(fakes.failed_result(RunConfig(), "OOM")) is None


def test_the_time_split_draws_a_stacked_bar_per_finished_run():
    ax = Figure().subplots()
    charts.draw_time_split(ax, limits_runs())
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels == ["#1 base", "#3 images"]                 # the failed run #2 is left out
    widths = sorted(round(p.get_width(), 3) for p in ax.patches)
    assert widths == sorted([30.0, 2.0, 20.0, 48.0, 1.0, 49.0])  # ms: #1 in four parts, #3 in two
    legend = legend_labels(ax)
    assert legend[0] == "input wait" and any(l.startswith("compute at peak: model FLOPs") for l in legend)
    assert any("not counted" in l for l in legend)


def test_the_flops_panel_has_achieved_bars_and_both_peaks_on_a_log_axis():
    ax = Figure().subplots()
    charts.draw_flops(ax, limits_runs())
    assert ax.get_xscale() == "log"
    bars = [p for p in ax.patches]
    assert len(bars) == 1 and bars[0].get_x() + bars[0].get_width() == pytest.approx(2e10)   # 2 GFLOPs / 0.1 s
    marks = {l.get_label(): l.get_xdata()[0] for l in ax.get_lines()}
    assert marks["this machine's measured peak (run's dtype)"] == 1e11 and marks["datasheet peak"] == 2e11
    assert "not counted" in texts(ax)
    mfu = next(t for t in ax.texts if t.get_text().startswith("MFU 20 %"))
    assert mfu.get_text() == "MFU 20 % = achieved / measured peak"
    assert 1e11 < mfu.get_position()[0] < 2e11          # beside the measured peak it divides by, not the datasheet's


def test_limits_png_draws_and_says_so_when_nothing_was_counted():
    assert charts.limits_png(limits_runs()).startswith(PNG)
    assert charts.limits_png([]).startswith(PNG)
    ax = Figure().subplots()
    charts.draw_flops(ax, [fakes.make_result(RunConfig())])
    assert not ax.axison and "no run counted its model FLOPs" in texts(ax)[0]


def test_the_step_chart_says_calls_when_a_bar_is_a_call():
    from matplotlib.figure import Figure

    from tfwb.records import RunResult
    from tfwb.ui.charts.step_times import draw_step_times

    r = RunResult(config=RunConfig(steps_per_execution=8), step_times_s=(0.01,) * 7, warmup_times_s=(0.2,),
                  steps_per_call=8)
    ax = Figure().subplots()
    draw_step_times(ax, r)
    assert ax.get_xlabel().startswith("measured call of 8 steps (its time / 8 per step)")
    one = Figure().subplots()
    draw_step_times(one, RunResult(config=RunConfig(), step_times_s=(0.01,) * 7))
    assert one.get_xlabel() == "measured step"


def test_a_fit_without_a_measured_input_wait_has_no_input_key():
    """Issue 27: a fit's chart listed "waiting for input", which a fit cannot measure: it read as a zero wait."""
    import dataclasses

    ax = Figure().subplots()
    fit = dataclasses.replace(make_result(), input_wait_s=())
    charts.draw_step_times(ax, fit)
    labels = legend_labels(ax)
    assert "waiting for input" not in labels and labels[0] == "step (input wait not measured)"
