"""tfwb.analysis.rows and tfwb.render: the typed history rows, their words, the text table and the HTML table,
against exact strings."""
import dataclasses
import re
import subprocess
import sys

import pytest

from fakes import failed_result, make_result
from tfwb import stats
from tfwb import render as words
from tfwb.analysis.diagnosis import Bound, diagnose
from tfwb.analysis.noise import noise_band
from tfwb.analysis import pairs
from tfwb.analysis.pairs import ARITHMETIC_KNOBS, compare_runs, other_cpu_pct
from tfwb.analysis.rows import history_rows, pick_baseline
from tfwb.config import RunConfig
from tfwb.records import Sample

BASE_S = (0.100, 0.104, 0.096, 0.102, 0.098)


def ok(cfg, times_s, wait_s):
    return make_result(cfg, step_times_s=times_s, wait_s=wait_s)


def failed(cfg, error="ResourceExhaustedError: OOM"):
    return failed_result(cfg, error)


@pytest.fixture
def results():
    return [
        ok(RunConfig(), BASE_S, 0.03),
        ok(RunConfig(prefetch=True, cache=True), (0.050, 0.052, 0.048, 0.051, 0.049), 0.001),
        ok(RunConfig(), (0.101, 0.105, 0.097, 0.099, 0.103), 0.03),
        failed(RunConfig(batch_size=4096)),
    ]


def test_format_changes_lists_fields_in_declaration_order_as_kwargs():
    base = RunConfig()
    assert words.format_changes(RunConfig(cache=True, prefetch=True), base) == "prefetch=True, cache=True"
    assert words.format_changes(RunConfig(mixed_precision="mixed_bfloat16"), base) == \
        "mixed_precision='mixed_bfloat16'"
    assert words.format_changes(RunConfig(label="same knobs"), base) == "baseline"
    assert words.format_changes(RunConfig(clip="norm:1.0"), base) == "clip='norm:1.0'"


def test_rows_carry_numbers_verdicts_and_errors(results):
    rows = history_rows(results)
    assert [r.index for r in rows] == [1, 2, 3, 4]
    first, fast, repeat, oom = rows
    assert first.is_baseline and words.verdict(first) == "baseline" and first.speedup == 1.0
    assert words.changes(first) == "baseline"
    assert first.median_ms == pytest.approx(100.0)
    assert (first.q1_ms, first.q3_ms) == (pytest.approx(98.0), pytest.approx(102.0))
    assert first.iqr_ms == pytest.approx(4.0)
    assert first.examples_per_s == pytest.approx(640.0)
    assert first.input_wait_pct == pytest.approx(30.0)
    assert words.headline(first).startswith("highly input-bound (input wait 30%)")
    assert first.error is None
    assert words.verdict(fast) == "2.00x faster" and fast.speedup == pytest.approx(2.0)
    assert words.changes(fast) == "prefetch=True, cache=True"
    assert words.verdict(repeat) == "1.01x slower: no significant difference"   # never a bare 0.99x
    assert oom.status == "failed" and oom.error == "ResourceExhaustedError: OOM"
    assert oom.median_ms is None and words.verdict(oom) == "" and words.headline(oom) == ""


def test_baseline_is_first_ok_result_unless_given(results):
    rows = history_rows([results[3]] + results[:2])    # a failure first
    assert [words.verdict(r) for r in rows] == ["", "baseline", "2.00x faster"]
    rows = history_rows(results[:2], baseline=results[1])
    assert words.verdict(rows[0]) == "2.00x slower" and rows[1].is_baseline
    assert words.changes(rows[0]) == "prefetch=False, cache=False"   # relative to the baseline run


def test_pick_baseline_prefers_a_run_of_the_baseline_config(results):
    swapped = [results[1], results[0]]
    assert pick_baseline(swapped) is results[1]
    assert pick_baseline(swapped, RunConfig()) is results[0]
    assert pick_baseline([results[3]]) is None
    rows = history_rows(swapped, baseline_config=RunConfig())
    assert [words.verdict(r) for r in rows] == ["2.00x faster", "baseline"]
    assert [words.changes(r) for r in rows] == ["prefetch=True, cache=True", "baseline"]


def test_too_few_steps_says_so():
    rows = history_rows([ok(RunConfig(), (0.1, 0.1), 0.0), ok(RunConfig(prefetch=True), (0.05, 0.05), 0.0)])
    assert words.verdict(rows[1]) == "2.00x faster: too few steps to tell"


def test_format_table_exact(results):
    """Issue 34: one line per run of short cells, the rule once under the table."""
    rows = history_rows(results)
    slow, fast = words.headline(rows[0]), words.headline(rows[1])     # the diagnosis's words (tfwb.analysis.diagnosis)
    assert slow.startswith("highly input-bound (input wait 30%)") and fast == "not input-bound (input wait 2%)"
    table, notes = words.format_table(rows).split("\n\n")
    assert table == (
        "#  changes vs baseline        median ms      IQR ms  examples/s  input wait  vs baseline    vs previous run   "
        "diagnosis\n"
        "-  -------------------------  ---------  ----------  ----------  ----------  -------------  ----------------  "
        "--------------------------\n"
        "1  baseline                       100.0  98.0-102.0         640         30%  baseline                         "
        "try interleave=True\n"
        "2  prefetch=True, cache=True       50.0   49.0-51.0       1,280          2%  2.00x faster   #1: 2.00x faster  "
        "not input-bound\n"
        "3  baseline                       101.0  99.0-103.0         634         30%  no difference  #2: 2.02x slower  "
        "try interleave=True\n"
        "4  batch_size=4096                                                                                            "
        "failed: ResourceExhausted\u2026")
    assert notes.splitlines() == [
        words.table_notes(rows)[0], "\u2026 a cell cut to fit: hover it for its whole text.",
        "#4 failed: ResourceExhaustedError: OOM"]
    assert notes.startswith("Run-to-run noise: \u00b110 % (the default") and "otherwise: no difference" in notes


def test_format_table_shows_labels_only_when_some_run_has_one():
    rows = history_rows([ok(RunConfig(label="first"), BASE_S, 0.0)])
    headline = "not input-bound"
    assert words.format_table(rows) == (
        "#  label  changes vs baseline  median ms      IQR ms  examples/s  input wait  vs baseline  diagnosis\n"
        "-  -----  -------------------  ---------  ----------  ----------  ----------  -----------  "
        + "-" * len(headline) + "\n"
        "1  first  baseline                 100.0  98.0-102.0         640          0%  baseline     "
        + headline)


def test_html_table_exact_escaped_and_failed_row_red():
    rows = history_rows([failed(RunConfig(label="<b>x</b>"), error="bad & <worse>")])
    td = '<td style="padding:1px 3px;text-align:{};white-space:nowrap">{}</td>'
    th = '<th style="padding:1px 3px;border-bottom:1px solid #999;text-align:{};vertical-align:bottom">{}</th>'
    heads = [("right", "#"), ("left", "label"), ("left", "changes vs baseline"),
             ("right", "median ms"), ("right", "IQR ms"), ("right", "examples/s"), ("right", "input wait"),
             ("left", "vs baseline"), ("left", "diagnosis")]
    cells = [("right", "1"), ("left", "&lt;b&gt;x&lt;/b&gt;"), ("left", "baseline"),
             ("right", ""), ("right", ""), ("right", ""), ("right", ""),
             ("left", ""), ("left", "failed: bad &amp; &lt;worse&gt;")]
    assert words.html_table(rows) == (
        '<div class="tfwb-history-scroll" style="overflow-x:auto;max-width:100%">'
        '<table class="tfwb-history" style="border-collapse:collapse;font-size:12px"><thead><tr>'
        + "".join(th.format(*h) for h in heads) + '</tr></thead><tbody><tr class="tfwb-row-failed" '
        'style="color:#c00">' + "".join(td.format(*c) for c in cells) + "</tr></tbody></table></div>")


def test_html_table_marks_baseline_and_verdicts(results):
    text = words.html_table(history_rows(results))
    assert text.count("<tr class=") == 4
    assert '<tr class="tfwb-row-ok tfwb-row-baseline" style="font-weight:bold">' in text
    assert '<tr class="tfwb-row-failed" style="color:#c00">' in text
    # Each verdict is a short phrase coloured by its own comparison, its sentence in the tooltip: #3 is no
    # different from the baseline (grey) but 2.02x slower than #2 (orange).
    assert f'color:{words.FASTER_COLOR}">2.00x faster<' in text
    assert (f'color:{words.SAME_COLOR}" title="1.01x slower: no significant difference">no difference<'
            in text)
    assert f'color:{words.SLOWER_COLOR}" title="vs the previous run (#2): 2.02x slower; changed: prefetch=False, cache=False">' \
           "#2: 2.02x slower<" in text
    assert '<caption style="caption-side:bottom' in text and "Run-to-run noise: \u00b1" in text


def test_empty():
    assert history_rows([]) == []
    assert words.format_table([]) == "No runs yet."
    assert words.html_table([]) == '<div class="tfwb-history tfwb-empty">No runs yet.</div>'


def test_output_is_deterministic(results):
    assert words.html_table(history_rows(results)) == words.html_table(history_rows(list(results)))


def test_report_is_pure():
    code = ("import sys, tfwb.render, tfwb.analysis.rows, tfwb.analysis.session; bad = [m for m in ('tensorflow', 'matplotlib', 'ipywidgets', 'IPython') "
            "if m in sys.modules]; assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True)


def _sized(result, size):
    return dataclasses.replace(result, fingerprint={"size": size})


def test_runs_of_another_size_are_not_compared_and_baseline_follows_the_latest_size():
    small_base = _sized(ok(RunConfig(), BASE_S, 0.03), "small")
    full_base = _sized(ok(RunConfig(), (0.5, 0.51, 0.49, 0.5, 0.52), 0.03), "full")
    full_fast = _sized(ok(RunConfig(prefetch=True), (0.25, 0.26, 0.24, 0.25, 0.25), 0.0), "full")
    assert pick_baseline([small_base, full_base, full_fast], RunConfig()) is full_base
    rows = history_rows([small_base, full_base, full_fast], baseline=small_base)
    assert words.verdict(rows[1]) == "full size: not compared" and rows[1].speedup is None
    rows = history_rows([small_base, full_base, full_fast], baseline_config=RunConfig())
    assert [words.verdict(r) for r in rows] == ["small size: not compared", "baseline", "2.00x faster"]


# -- each run against the previous one, and the noise it is judged against ------------------

def steps(centre_s, n=20, jitter=0.01):
    return tuple(centre_s * (1 + jitter * ((i % 5) - 2) / 2) for i in range(n))


def test_a_run_is_compared_with_the_previous_run_and_the_baseline():
    # The case: mixed_float16 was faster than the all-off baseline but much
    # slower than the run before it; the row must say both.
    tuned = RunConfig(prefetch=True, parallel_map=True)
    runs = [ok(RunConfig(), steps(0.120), 0.05), ok(tuned, steps(0.043), 0.0),
            failed(RunConfig(batch_size=4096)),
            ok(tuned.replace(mixed_precision="mixed_float16"), steps(0.102), 0.0)]
    rows = history_rows(runs)
    first, second, oom, mixed = rows
    assert first.previous is None and words.prev_verdict(first) == "" and first.prev_comparison is None
    assert second.previous == 1 and words.prev_verdict(second) == "2.79x faster"
    assert oom.previous == 2 and words.prev_verdict(oom) == ""             # nothing measured to compare
    assert mixed.previous == 2                                          # the failure is skipped
    assert words.verdict(mixed) == "1.18x faster" and mixed.comparison == "faster"
    assert words.prev_verdict(mixed) == "2.37x slower" and mixed.prev_comparison == "slower"
    assert mixed.prev_speedup == pytest.approx(0.043 / 0.102)
    assert words.prev_changes(mixed) == "mixed_precision='mixed_float16'"
    assert words.changes(mixed) == "prefetch=True, parallel_map=True, mixed_precision='mixed_float16'"
    cells = words.format_cells(mixed)
    assert cells["prev_verdict"] == "#2: 2.37x slower" and cells["verdict"] == "1.18x faster"


def test_previous_run_is_of_the_same_size_and_unchanged_knobs_say_so():
    small = _sized(ok(RunConfig(), BASE_S, 0.0), "small")
    full = _sized(ok(RunConfig(), (0.5,) * 5, 0.0), "full")
    again = _sized(ok(RunConfig(), BASE_S, 0.0), "small")
    rows = history_rows([small, full, again])
    assert rows[2].previous == 1 and words.prev_changes(rows[2]) == "no change"
    assert rows[1].previous is None


def test_identical_runs_that_drift_are_no_significant_difference():
    # Three identical runs landing 62.5, 66 and 64 ms apart, each with a tight IQR: the old
    # rule called the gaps significant; within the noise band they are not.
    runs = [ok(RunConfig(), steps(m), 0.0) for m in (0.0625, 0.066, 0.064)]
    rows = history_rows(runs)
    assert [r.comparison for r in rows] == ["baseline", "no significant difference",
                                               "no significant difference"]
    assert words.verdict(rows[1]).endswith("run-to-run noise)")
    assert rows[2].prev_comparison == "no significant difference"


def test_a_15_percent_change_beyond_the_noise_is_detected():
    runs = [ok(RunConfig(), steps(0.100), 0.0), ok(RunConfig(shuffle_buffer=74), steps(0.115), 0.0)]
    assert words.verdict(history_rows(runs)[1]) == "1.15x slower"


# -- issue 18: batch sizes differ -> time per example; ratios with a direction; who "the baseline" is --------
def test_runs_with_different_batches_compare_time_per_example():
    """Chapter 03: batch 128 at 81.2 ms a step against batch 64 at 49.2 ms read "1.65x slower"
    while it trained on 1.2x more examples a second."""
    b64 = ok(RunConfig(batch_size=64), steps(0.0492), 0.0)
    b128 = ok(RunConfig(batch_size=128), steps(0.0812), 0.0)
    rows = history_rows([b64, b128])
    assert words.verdict(rows[1]) == "per example: 1.21x faster (batch 128 vs 64)"
    assert words.prev_verdict(rows[1]) == "per example: 1.21x faster (batch 128 vs 64)"
    assert rows[1].comparison == "faster" and rows[1].per_example and rows[1].prev_per_example
    assert rows[1].speedup == pytest.approx(2 * 0.0492 / 0.0812)
    table = words.format_table(rows)
    assert "#1: 1.21x faster per example" in table
    assert "per example: the batches differ, so the time per example was compared." in table
    same = history_rows([b64, ok(RunConfig(batch_size=64, prefetch=True), steps(0.0812), 0.0)])
    assert words.verdict(same[1]) == "1.65x slower" and not same[1].per_example


def test_no_ratio_prints_bare():
    """0.84x must read 1.19x slower, in every verdict of the table."""
    base = ok(RunConfig(), steps(0.100), 0.0)
    close = ok(RunConfig(prefetch=True), steps(0.119), 0.0)         # 0.84x: 1.19x slower
    near = ok(RunConfig(cache=True), steps(0.105), 0.0)             # 0.95x: within the noise
    rows = history_rows([base, close, near])
    text = words.format_table(rows) + words.html_table(rows)
    assert words.verdict(rows[2]) == "1.05x slower: no significant difference (within \u00b110 % run-to-run noise)"
    assert not re.search(r"\b0\.\d\dx", text), text


def test_cannot_tell_names_the_previous_run_as_the_previous_run():
    base = with_load(ok(RunConfig(), steps(0.100), 0.0), 3.0)
    second = with_load(ok(RunConfig(prefetch=True), steps(0.100), 0.0), 3.0)
    busy = with_load(ok(RunConfig(cache=True), steps(0.180), 0.0), 50.0)
    row = history_rows([base, second, busy])[2]
    assert words.prev_verdict(row) == ("1.80x slower: cannot tell: the machine was busy (other programs used 3 % of "
                                   f"the CPU during the previous run (#2), 50 % during this run); {HINT}")
    assert words.verdict(row).endswith(f"during the baseline, 50 % during this run); {HINT}")
    after_base = history_rows([base, busy])[1]
    assert "during the baseline (#1), 50 %" in words.prev_verdict(after_base)


def test_a_change_of_arithmetic_gets_the_final_loss_gap_beside_the_speed():
    adam = make_result(RunConfig(), step_times_s=steps(0.1), losses=(2.0,) * 15 + (1.0,) * 5)
    sgd = make_result(RunConfig(optimizer="sgd"), step_times_s=steps(0.1), losses=(2.0,) * 15 + (1.5,) * 5)
    fetch = make_result(RunConfig(optimizer="sgd", prefetch=True), step_times_s=steps(0.05),
                        losses=(2.0,) * 15 + (1.5,) * 5)
    rows = history_rows([adam, sgd, fetch])
    assert rows[1].prev_arithmetic == ["optimizer"]
    assert words.row_loss_note(rows[1]) == "final loss 1.5 vs 1 for #1 (+0.5, higher) after 20 steps"
    assert words.row_loss_note(rows[2]) == "" and rows[2].prev_arithmetic == []       # prefetch: same arithmetic
    table = words.format_table(rows)        # the row's note stands under the table
    assert "\n#2: final loss 1.5 vs 1 for #1 (+0.5, higher) after 20 steps" in table
    assert "final loss" not in words.format_table(history_rows([sgd, fetch]))
    assert {"learning_rate", "clip", "optimizer", "mixed_precision", "jit_compile"} <= set(ARITHMETIC_KNOBS)
    assert not {"prefetch", "batch_size", "steps", "label"} & set(ARITHMETIC_KNOBS)


HINT = "compare the two configurations interleaved (tfwb.compare_interleaved) to decide"


def with_load(result, other_pct, cores=2, size=None):
    """Samples during the measured steps: this process 100 % of one core, others ``other_pct`` of all."""
    t = 0.0
    starts = []
    for d in result.step_times_s:
        starts.append(t)
        t += d
    own = 100.0 / cores
    samples = tuple(Sample(t_s=i * t / 4, cpu_process_pct=100.0, cpu_system_pct=own + other_pct)
                    for i in range(5))
    fp = {"cpu_count": cores, "cpu_model": "test cpu"}
    if size:
        fp.size = size
    return dataclasses.replace(result, step_start_s=starts, samples=samples, fingerprint=fp)


def test_other_cpu_pct_reads_the_samples_of_the_measured_steps():
    run = with_load(ok(RunConfig(), steps(0.1), 0.0), 30.0)
    assert other_cpu_pct(run) == pytest.approx(30.0)
    assert other_cpu_pct(ok(RunConfig(), steps(0.1), 0.0)) is None      # no samples
    no_cores = dataclasses.replace(run, fingerprint={})
    assert other_cpu_pct(no_cores) is None


def test_a_run_while_other_programs_were_busy_cannot_tell():
    quiet = with_load(ok(RunConfig(), steps(0.100), 0.0), 3.0)
    busy = with_load(ok(RunConfig(), steps(0.180), 0.0), 50.0)
    row = history_rows([quiet, busy])[1]
    assert row.comparison == stats.CANNOT_TELL_BUSY
    assert words.verdict(row) == ("1.80x slower: cannot tell: the machine was busy (other programs used 3 % of the "
                              f"CPU during the baseline, 50 % during this run); {HINT}")
    assert row.other_cpu_pct == pytest.approx(50.0)
    cmp = compare_runs(quiet, busy)
    assert cmp.verdict == stats.CANNOT_TELL_BUSY and cmp.other_cpu_pct == (pytest.approx(3.0), pytest.approx(50.0))
    assert pairs.busy(busy) and not pairs.busy(quiet) and not pairs.busy(ok(RunConfig(), steps(0.1), 0.0))


def test_noise_band_is_learned_from_repeated_identical_runs_at_similar_load():
    runs = [with_load(ok(RunConfig(), steps(m), 0.0), 3.0) for m in (0.100, 0.101, 0.099)]
    runs.append(with_load(ok(RunConfig(prefetch=True), steps(0.05), 0.0), 3.0))
    band = noise_band(runs)
    assert band.learned and band.runs == 3 and band.dof == 2
    assert band.pct == pytest.approx(stats.learn_noise([[0.100, 0.101, 0.099]]).pct)
    # A run of the same configuration while other programs were busy teaches nothing.
    busy = with_load(ok(RunConfig(), steps(0.16), 0.0), 55.0)
    assert noise_band(runs + [busy]).pct == pytest.approx(band.pct)

    # Runs on another machine do not count.
    other_machine = [dataclasses.replace(r, fingerprint={"cpu_count": 8, "cpu_model": "other"}) for r in runs[:3]]
    assert noise_band(other_machine + [runs[3]]) is stats.DEFAULT_NOISE
    rows = history_rows(runs)
    assert rows[0].noise.learned and rows[0].noise.pct == pytest.approx(band.pct)
    assert "learned from 3 identical runs" in words.noise_note(rows)


def test_a_history_that_mixes_quiet_and_busy_runs_learns_the_quiet_band():
    """Issue 26: a long history learned "±163 % (from 54 identical runs)" from busy runs, then called
    a 1.94x slowdown "no significant difference". Busy runs, at any load, are left out."""
    quiet = [with_load(ok(RunConfig(), steps(m), 0.0), 2.0) for m in (0.100, 0.102, 0.098, 0.101)]
    busy = [with_load(ok(RunConfig(), steps(m), 0.0), load) for m, load in
            ((0.19, 45.0), (0.31, 80.0), (0.14, 25.0), (0.26, 60.0), (0.22, 50.0), (0.35, 90.0))]
    mixed = [r for pair in zip(quiet, busy) for r in pair] + busy[4:]
    band = noise_band(mixed)
    assert band.runs == 4 and band.pct == pytest.approx(stats.learn_noise([[0.100, 0.102, 0.098, 0.101]]).pct)
    assert band.pct < 10.0
    slow = with_load(ok(RunConfig(prefetch=True), steps(0.194), 0.0), 2.0)
    assert compare_runs(quiet[0], slow, noise=band).verdict == stats.SLOWER


def test_noise_band_defaults_without_repeats(results):
    assert noise_band(results) is stats.DEFAULT_NOISE
    assert noise_band([]) is stats.DEFAULT_NOISE
    rows = history_rows(results)
    assert rows[0].noise.pct == stats.DEFAULT_NOISE_PCT and not rows[0].noise.learned
    assert words.noise_note(rows).startswith(f"Run-to-run noise: \u00b1{stats.DEFAULT_NOISE_PCT:.0f} % (the default")
    assert words.noise_note(history_rows(results[:1])) == ""          # nothing compared yet


def test_short_changes_are_short_and_cut_nothing():
    base = RunConfig(prefetch=True)
    assert words.short_changes(RunConfig(prefetch=True, cache=True), base) == ["cache"]
    assert words.short_changes(RunConfig(), base) == ["no prefetch"]
    assert words.short_changes(RunConfig(prefetch=True, mixed_precision="mixed_float16", clip="norm:1.0",
                                          batch_size=74), base) == \
        ["batch_size=74", "mixed_precision=mixed_float16", "clip=norm:1.0"]
    assert words.short_changes(RunConfig(prefetch=True, label="x"), base) == []
    assert words.short_changes(RunConfig(), None) == []


def test_verdict_colors_have_one_definition():
    assert words.verdict_color("faster") == words.FASTER_COLOR
    assert words.verdict_color("slower") == words.SLOWER_COLOR
    assert words.verdict_color("no significant difference") == words.SAME_COLOR
    assert words.verdict_color(None) == words.SAME_COLOR
    assert words.FAILED_COLOR not in (words.FASTER_COLOR, words.SLOWER_COLOR, words.SAME_COLOR)


# -- figures that may be missing: a MIG slice's utilization, a failed run's figures ---------------------------
def test_fmt_reads_a_missing_figure_as_not_available():
    assert words.fmt(1234.5, ",.0f") == "1,234" and words.fmt(None, ".2f") == "n/a"
    assert words.fmt(float("nan"), ".1f", missing="-") == "-"


def test_utilization_lines_on_a_mig_slice_say_why_instead_of_raising():
    from nvml_fakes import fake_nvml
    from tfwb.nvml import NvmlProbe

    probe = NvmlProbe(nvml=fake_nvml("A100 MIG slice"))
    reads = [probe.read() for _ in range(3)]
    probe.close()
    assert all(r["gpu_util_pct"] == (None,) for r in reads), reads          # NVML refuses it
    samples = tuple(Sample(0.1 * i, 95.0, 30.0, 800.0 + i, r["gpu_util_pct"], r["gpu_mem_used_mib"])
                    for i, r in enumerate(reads))
    result = make_result(samples=samples)
    lines = words.utilization_lines(result, cpu_count=2)
    assert lines[0].startswith("3 samples; process CPU median 95 % of one core (2 cores here)")
    assert len(lines) == 2 and lines[1].startswith("GPU 0: utilization not reported: NVML refuses")
    assert "MiB" in lines[1] and "None" not in lines[1]


def test_utilization_lines_of_a_failed_run_without_samples():
    lines = words.utilization_lines(failed_result())
    assert lines == ["0 samples; process CPU median n/a % of one core; whole machine n/a %; RSS peak n/a MiB"]


def test_a_measurement_that_did_not_happen_cannot_tell_never_disagrees():
    from tfwb.expect import checks

    same = checks.equal("every worker reported the same losses", True).check(None)
    assert same.agreed is None and same.result == "cannot tell" and "did NOT agree" not in str(same)
    assert checks.equal("a count", 4).check(float("nan")).result == "cannot tell"
    assert checks.equal("a count", 4).check(3).result == "did NOT agree"          # a real miss still says so
    bad = failed_result()
    ab = checks.ab("two workers are slower", "slower").check(make_result(), bad)
    assert ab.result == "cannot tell" and ab.agreed is None
    assert f"nothing measured: {bad.config.label or 'a run'} failed" in ab.measured, ab.measured
    assert checks.at_least("the cluster start", 1, "s").check(None).result == "cannot tell"


# -- how far from the limit: MFU and bounds (issue 19) -------------------------------------------
def counted(cfg, times_s, wait_s, **fields):
    """A finished run whose FLOPs were counted: 2 GFLOPs a step, a 100 GFLOP/s measured peak."""
    return make_result(cfg, step_times_s=times_s, wait_s=wait_s, model_flops_per_step=2e9,
                       peak_flops_per_s=1e11, **fields)


def test_the_mfu_column_shows_the_share_not_counted_or_missing():
    rows = history_rows([
        counted(RunConfig(), BASE_S, 0.001, datasheet_flops_per_s=2e11),
        make_result(RunConfig(prefetch=True), step_times_s=BASE_S, wait_s=0.001, flops_uncounted=("lstm (LSTM)",)),
        make_result(RunConfig(cache=True), step_times_s=BASE_S, wait_s=0.001, model_flops_per_step=2e9),
        failed(RunConfig(batch_size=4096)),
    ])
    cells = [words.format_cells(r)["mfu"] for r in rows]
    assert cells == ["20 %", "not counted", words.MISSING_TEXT, ""]
    assert words.mfu_text(rows[0]) == "MFU 20 % of this machine's measured float32 peak (10 % of datasheet)"
    table = words.format_table(rows)
    assert re.search(r"input wait +MFU +vs baseline", table.splitlines()[0])
    assert "MFU" in words.html_table(rows)


def test_a_history_without_counted_flops_has_no_mfu_column(results):
    assert "MFU" not in words.format_table(history_rows(results))


def first_suggestion(result):
    d = diagnose(result)
    return d.suggestions[0], d.bounds[0]


def test_a_run_that_applies_the_suggestion_scores_its_bound():
    base = counted(RunConfig(), BASE_S, 0.03)               # waits 30 % of each step: bound 1.4x
    (knob, value, _), bound = first_suggestion(base)
    assert bound.speedup == pytest.approx(1 / 0.7)
    faster = counted(RunConfig().replace(**{knob: value}), tuple(t / 1.2 for t in BASE_S), 0.001)
    row = history_rows([base, faster])[1]
    assert row.bound == bound and not row.bound_exceeded
    assert words.bound_note(row) == f"{knob}={value!r}: bound 1.4x, measured 1.2x (84 % of the bound)"
    assert words.bound_note(row) in words.format_table(history_rows([base, faster]))


GPU_FP = {"gpus": [{"name": "G", "compute_capability": [8, 0]}]}


def test_a_gain_above_an_input_bound_on_a_cpu_is_explained_not_flagged():
    base = counted(RunConfig(), BASE_S, 0.03)          # no GPU in the fingerprint: the step ran on the CPU
    (knob, value, _), bound = first_suggestion(base)
    assert not bound.strict and "takes cores from the step" in bound.text
    too_fast = counted(RunConfig().replace(**{knob: value}), tuple(t / 2 for t in BASE_S), 0.001)
    row = history_rows([base, too_fast])[1]
    assert not row.bound_exceeded
    assert words.bound_note(row) == (f"{knob}={value!r}: measured 2.0x, above the input-wait bound 1.4x: on a CPU "
                                 "the pipeline shared the cores with the step, so removing its work sped the step too")


def test_a_gain_above_its_bound_beyond_noise_is_flagged():
    base = counted(RunConfig(), BASE_S, 0.03, fingerprint=GPU_FP)
    (knob, value, _), _bound = first_suggestion(base)
    too_fast = counted(RunConfig().replace(**{knob: value}), tuple(t / 2 for t in BASE_S), 0.001, fingerprint=GPU_FP)
    row = history_rows([base, too_fast])[1]
    assert row.bound_exceeded
    assert words.bound_note(row) == (f"{knob}={value!r}: measured 2.0x is above its bound 1.4x beyond noise "
                                 "(+-10 %): the bound or the measurement is wrong")
    within = counted(RunConfig().replace(**{knob: value}), tuple(t / 1.5 for t in BASE_S), 0.001, fingerprint=GPU_FP)
    assert not history_rows([base, within])[1].bound_exceeded    # 1.5x: within 10 % of 1.43x


def test_a_bound_is_not_scored_when_other_knobs_changed_too_or_no_suggestion_was_applied():
    base = counted(RunConfig(), BASE_S, 0.03)
    (knob, value, _), _bound = first_suggestion(base)
    both = counted(RunConfig().replace(**{knob: value, "batch_size": 32}), BASE_S, 0.001)
    other = counted(RunConfig(batch_size=32), BASE_S, 0.001)
    assert [words.bound_note(r) for r in history_rows([base, both, other])] == ["", "", ""]


def test_suggestion_text_carries_the_bound():
    base = counted(RunConfig(), BASE_S, 0.03)
    suggestion, bound = first_suggestion(base)
    text = words.suggestion_text(suggestion, bound)
    assert text.startswith(f"try {suggestion[0]}={suggestion[1]!r} \u2014 removing the input wait (30 % of the step) "
                           "gains at most 1.4x; on a CPU the pipeline also takes cores from the step")
    assert text.endswith(f"({suggestion[2]})")
    assert words.suggestion_text(("jit_compile", True, "fuse"), Bound("jit_compile", True, None, "XLA "
                                  "(jit_compile=True): bound unknown: no MFU")) == \
        "try jit_compile=True \u2014 bound unknown: no MFU (fuse)"


def test_an_interrupted_run_is_not_called_an_error_in_the_table():
    stopped = dataclasses.replace(failed_result(), status="interrupted",
                                  error="stopped by the user (Stop button) after 398 of 3002 steps")
    cells = words.format_cells(history_rows([stopped])[0])
    assert cells["diagnosis"] == "stopped by the user (Stop button) after 398 of 3002 steps"
    failed = words.format_cells(history_rows([failed_result(error="ResourceExhaustedError: OOM")])[0])
    assert failed["diagnosis"] == "failed: ResourceExhaustedError: OOM"


def test_a_run_too_short_for_a_sample_reads_the_runners_own_load_reading():
    """benchmarks/integrity.py: 20 steps of 2 ms held no 0.2 s sample, so a busy machine read 'unknown'."""
    short = dataclasses.replace(ok(RunConfig(), steps(0.002), 0.0), extras={"other_cpu_pct": 40.0})
    assert other_cpu_pct(short) == 40.0 and pairs.busy(short)
    quiet = with_load(ok(RunConfig(), steps(0.1), 0.0), 3.0)
    assert other_cpu_pct(dataclasses.replace(quiet, extras={"other_cpu_pct": 40.0})) == pytest.approx(3.0)
    assert compare_runs(quiet, short).verdict == stats.CANNOT_TELL_BUSY


def test_the_monitor_line_is_the_summary_and_with_a_row_its_verdict_against_the_previous_run():
    """Issue 33: the fit Monitor's closing line reads a row through tfwb.render."""
    base = ok(RunConfig(), steps(0.100), 0.0)
    fast = ok(RunConfig(prefetch=True), steps(0.050), 0.0)
    assert words.monitor_line(fast) == fast.summary()
    row = history_rows([base, fast])[1]
    assert words.monitor_line(fast, row) == f"{fast.summary()}; vs #1: 2.00x faster"
    assert words.monitor_line(base, history_rows([base])[0]) == base.summary()


# -- issue 34 item 6: a table a reader can read ---------------------------------------------------------------
def _decided(speedup, rounds=6):
    """A hand-made interleaved comparison: the candidate ``speedup`` times faster in every round."""
    return stats.compare_rounds([1.0] * rounds, [1.0 / speedup] * rounds)


def test_verdict_cells_are_short_phrases_and_the_rule_stands_once_under_the_table():
    base = with_load(ok(RunConfig(), steps(0.100), 0.0), 16.0)
    second = with_load(ok(RunConfig(prefetch=True), steps(0.050), 0.0), 3.0)
    third = with_load(ok(RunConfig(prefetch=True, cache=True), steps(0.021), 0.0), 3.0)
    rows = history_rows([base, second, third])
    assert [words.verdict_cell(r) for r in rows] == ["baseline", "cannot tell (busy 16 %)", "cannot tell (busy 16 %)"]
    assert [words.prev_cell(r) for r in rows] == ["", "#1: cannot tell (busy 16 %)", "#2: 2.38x faster"]
    assert HINT in words.verdict(rows[1])                              # the sentence stays in the status line
    notes = words.table_notes(rows)
    busy = [n for n in notes if n.startswith("cannot tell (busy N %)")]
    assert len(busy) == 1 and HINT in busy[0]                          # once, not in every cell
    assert not any(n.startswith(("cannot tell (drifted)", "interleaved", "per example")) for n in notes)
    html_text = words.html_table(rows)
    assert html_text.count(HINT) == 1 + 3          # the note, and the tooltips of the three busy cells
    drift = stats.Comparison(1.2, stats.Spread.of([1.0] * 5), stats.Spread.of([1.2] * 5), stats.CANNOT_TELL_DRIFT)
    assert words.comparison_phrase(drift) == "cannot tell (drifted)"
    assert words.comparison_phrase(stats.compare([1.0] * 5, [1.01] * 5)) == "no difference"
    assert words.comparison_phrase(stats.compare([1.0] * 3, [2.0] * 3)) == "too few steps"


def test_a_row_is_one_line_and_the_table_fits_a_1400_px_window():
    """Every cell within its column's character budget (cut with an ellipsis, the whole text in its tooltip),
    no cell wraps, and with every column at its budget the table fits the output area of a 1400-px JupyterLab
    window: 1400 px less two 33-px side bars and ~94 px of cell prompt and padding = 1240 px. DejaVu Sans, the
    widest common sans-serif, takes about 7 px a character at 12 px (checked in Chromium: the worst-case
    table below took 1118 px there, 974 px in Arial, each row 16 px tall); each cell adds 6 px of padding; a header may wrap at
    its spaces."""
    long = RunConfig(label="a long label for a run", prefetch=True, cache=True, interleave=True, parallel_map=True,
                     mixed_precision="mixed_bfloat16", steps_per_execution=8, jit_compile=True, batch_size=128)
    runs = [with_load(ok(RunConfig(label="images, knobs off"), steps(0.9876), 0.5), 16.0),
            with_load(ok(long, steps(0.9), 0.3), 3.0), with_load(ok(long.replace(batch_size=64), steps(0.5), 0.1), 3.0),
            failed(RunConfig(batch_size=4096), error="ResourceExhaustedError: OOM when allocating " + "x" * 80)]
    rows = history_rows(runs)
    rows[2] = dataclasses.replace(rows[2], versus_previous=dataclasses.replace(
        rows[2].versus_previous, reference=12, decided=_decided(3.78)), mfu=0.123)
    columns = words._columns(rows)
    assert [key for key, _ in columns] == [key for key, _ in words.COLUMNS]      # every column shows
    table_lines = words.format_table(rows).split("\n\n")[0].splitlines()
    for row in rows:
        for key, text in words.format_cells(row).items():
            if key in dict(columns) and key not in words._RIGHT_ALIGNED:
                assert len(words.cut(text, words.CELL_BUDGET[key])) <= words.CELL_BUDGET[key]
    assert "#12: 3.78x faster, interleaved" in table_lines[4]                   # a verdict is never cut
    assert len(table_lines) == 2 + len(rows)                                    # one line a run
    px = sum(max(words.CELL_BUDGET[key], *(len(w) for w in title.split())) * 7 + 6 for key, title in columns)
    assert px <= 1240, px
    text = words.html_table(rows)
    body = text[text.index("<tbody>"):]
    assert "<br>" not in body and body.count("<td ") == body.count("white-space:nowrap")
    assert f'title="failed: ResourceExhaustedError: OOM when allocating {"x" * 80}"' in body   # the cut text
    assert "a cell cut to fit: hover it for its whole text" in text
    assert max(len(line) for line in table_lines) <= sum(words.CELL_BUDGET.values()) + 2 * (len(columns) - 1)


def test_an_interleaved_verdict_stands_instead_of_the_separate_runs_everywhere():
    """Issue 34 item 5: when the pair was decided interleaved, the cell, the sentence, the colour and the
    Monitor's line say so."""
    base = with_load(ok(RunConfig(), steps(0.100), 0.0), 16.0)
    fast = with_load(ok(RunConfig(cache=True), steps(0.0265), 0.0), 3.0)
    row = history_rows([base, fast])[1]
    assert words.prev_cell(row) == "#1: cannot tell (busy 16 %)"
    decided = _decided(3.78)
    row = dataclasses.replace(row, versus_previous=dataclasses.replace(row.versus_previous, decided=decided),
                              versus_baseline=dataclasses.replace(row.versus_baseline, decided=decided))
    assert words.prev_cell(row) == "#1: 3.78x faster, interleaved"
    assert words.verdict_cell(row) == "3.78x faster, interleaved"
    assert words.prev_verdict(row) == "3.78x faster, interleaved (97 % CI 3.78-3.78x; faster in 6 of 6 rounds)"
    assert words.versus_kind(row.versus_previous) == stats.FASTER
    assert words.monitor_line(fast, row).endswith("; vs #1: 3.78x faster, interleaved (97 % CI 3.78-3.78x; "
                                                  "faster in 6 of 6 rounds)")
    text = words.html_table([history_rows([base, fast])[0], row])
    assert f'color:{words.FASTER_COLOR}" title="vs the baseline (#1): 3.78x faster, interleaved' in text
    assert "interleaved: the two configurations were measured in alternating rounds" in text
    assert "cannot tell (busy" not in text.split("<tbody>")[1].split("</tbody>")[0]
    slower = _decided(1 / 1.11)
    assert words.rounds_phrase(slower) == "1.11x slower, interleaved"
    assert words.rounds_phrase(stats.compare_rounds([1.0] * 4, [0.5] * 4)) == "too few rounds, interleaved"
