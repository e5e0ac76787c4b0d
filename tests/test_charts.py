"""tfwb.ui.charts: PNG output, what each draw_* puts on its Axes, speed, no pyplot."""
import subprocess
import sys
import time

import pytest
from matplotlib.figure import Figure

from tfwb.config import RunConfig
from tfwb.records import RunResult, Sample
from tfwb.ui import charts

PNG = b"\x89PNG\r\n\x1a\n"


def make_result(cfg=None, *, step_ms=80.0, wait_ms=20.0, n=20, warmup_ms=(1800.0, 110.0, 105.0), gpus=1):
    cfg = cfg or RunConfig()
    steps = [(step_ms + (i % 5) - 2) / 1e3 for i in range(n)]
    warm = [w / 1e3 for w in warmup_ms]
    t, warm_start, step_start = 0.5, [], []
    for d in warm:
        warm_start.append(t)
        t += d
    for d in steps:
        step_start.append(t)
        t += d
    samples = tuple(Sample(t_s=i * 0.2, cpu_process_pct=120.0 + i % 7, cpu_system_pct=55.0,
                           gpu_util_pct=tuple(60.0 + g * 10 for g in range(gpus)),
                           gpu_mem_used_mib=(1000.0,) * gpus)
                    for i in range(int(t / 0.2) + 2))
    return RunResult(config=cfg, step_times_s=steps, input_wait_s=[wait_ms / 1e3] * n,
                     warmup_times_s=warm, warmup_input_wait_s=[0.01] * len(warm),
                     step_start_s=step_start, warmup_start_s=warm_start, samples=samples,
                     examples_per_step=cfg.batch_size)


def texts(ax):
    return [t.get_text() for t in ax.texts]


def legend_labels(ax):
    legend = ax.get_legend()
    return [t.get_text() for t in legend.get_texts()] if legend else []


def test_run_chart_is_png_and_changes_with_the_result():
    first = charts.run_chart_png(make_result())
    assert first.startswith(PNG)
    assert charts.run_chart_png(make_result()) == first                 # deterministic
    assert charts.run_chart_png(make_result(step_ms=40.0)) != first


def test_comparison_is_png_and_changes_with_the_runs():
    runs = [make_result(), make_result(RunConfig(prefetch=True), step_ms=50.0)]
    one = charts.comparison_png(runs[:1])
    two = charts.comparison_png(runs)
    assert one.startswith(PNG) and two.startswith(PNG) and one != two
    assert charts.comparison_png([]).startswith(PNG)


def test_figure_png_leaves_no_pyplot_and_no_tensorflow():
    code = ("import sys; from tfwb.ui import charts; from matplotlib.figure import Figure; "
            "fig = Figure(); fig.subplots().plot([1, 2]); assert charts.figure_png(fig)[:4] == b'\\x89PNG'; "
            "assert 'matplotlib.pyplot' not in sys.modules and 'tensorflow' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True)


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


def test_utilization_plots_each_gpu_and_shades_warmup_and_steps():
    ax = Figure().subplots()
    charts.draw_utilization(ax, make_result(gpus=2))
    labels = legend_labels(ax)
    assert {"warm-up", "measured steps", "GPU 0", "GPU 1", "CPU, this process (% of 1 core)",
            "CPU, system (% of all cores)"} <= set(labels)
    assert "no GPU" not in texts(ax)
    assert ax.get_xlabel() == "time since run start (s)" and ax.get_ylabel() == "utilization (%)"


def test_utilization_says_no_gpu_and_handles_no_samples():
    ax = Figure().subplots()
    charts.draw_utilization(ax, make_result(gpus=0))
    assert "no GPU" in texts(ax)
    ax = Figure().subplots()
    charts.draw_utilization(ax, RunResult(config=RunConfig(), status="failed", error="x"))
    assert "no utilization samples" in texts(ax)


def test_comparison_marks_baseline_failures_and_verdicts():
    runs = [make_result(), make_result(RunConfig(prefetch=True), step_ms=40.0),
            RunResult(config=RunConfig(batch_size=4096), status="failed", error="OOM")]
    ax = Figure().subplots()
    charts.draw_comparison(ax, runs)
    ticks = [t.get_text() for t in ax.get_yticklabels()]
    assert ticks == ["#1 baseline", "#2 prefetch=True", "#3 batch_size=4096"]
    assert ax.get_yticklabels()[2].get_color() == charts.FAILED_COLOR
    notes = texts(ax)
    assert "80.0 ms  baseline" in notes and "40.0 ms  2.00x faster" in notes
    failed = [t for t in ax.texts if t.get_text() == "failed: OOM"]
    assert failed and failed[0].get_color() == charts.FAILED_COLOR
    assert len(ax.patches) == 2                                           # bars for ok runs only
    assert ax.patches[0].get_facecolor() != ax.patches[1].get_facecolor()  # the baseline stands out


def test_charts_are_fast():
    result = make_result(n=40)
    charts.run_chart_png(result)                                          # fonts load on first use
    start = time.perf_counter()
    charts.run_chart_png(result)
    charts.comparison_png([result] * 5)
    assert time.perf_counter() - start < 1.5                             # ~0.25 s idle; slack for busy CI


def test_comparison_names_runs_relative_to_the_baseline_config():
    runs = [make_result(RunConfig(prefetch=True), step_ms=40.0), make_result()]
    ax = Figure().subplots()
    charts.draw_comparison(ax, runs, baseline_config=RunConfig())
    assert [t.get_text() for t in ax.get_yticklabels()] == ["#1 prefetch=True", "#2 baseline"]
    assert "40.0 ms  2.00x faster" in texts(ax) and "80.0 ms  baseline" in texts(ax)
