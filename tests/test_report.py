"""tfwb.report: history rows, the text table and the HTML table, against exact strings."""
import dataclasses
import subprocess
import sys

import pytest

from tfwb import report
from tfwb.config import RunConfig
from tfwb.records import RunResult

BASE_S = (0.100, 0.104, 0.096, 0.102, 0.098)


def ok(cfg, times_s, wait_s):
    return RunResult(config=cfg, step_times_s=times_s, input_wait_s=(wait_s,) * len(times_s),
                     examples_per_step=cfg.batch_size)


def failed(cfg, error="ResourceExhaustedError: OOM"):
    return RunResult(config=cfg, status="failed", error=error)


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
    assert report.format_changes(RunConfig(cache=True, prefetch=True), base) == "prefetch=True, cache=True"
    assert report.format_changes(RunConfig(mixed_precision="mixed_bfloat16"), base) == \
        "mixed_precision='mixed_bfloat16'"
    assert report.format_changes(RunConfig(label="same knobs"), base) == "baseline"
    assert report.format_changes(RunConfig(clip="norm:1.0"), base) == "clip='norm:1.0'"


def test_rows_carry_numbers_verdicts_and_errors(results):
    rows = report.history_rows(results)
    assert [r["index"] for r in rows] == [1, 2, 3, 4]
    first, fast, repeat, oom = rows
    assert first["is_baseline"] and first["verdict"] == "baseline" and first["speedup"] == 1.0
    assert first["changes"] == "baseline"
    assert first["median_ms"] == pytest.approx(100.0)
    assert (first["q1_ms"], first["q3_ms"]) == (pytest.approx(98.0), pytest.approx(102.0))
    assert first["iqr_ms"] == pytest.approx(4.0)
    assert first["examples_per_s"] == pytest.approx(640.0)
    assert first["input_wait_pct"] == pytest.approx(30.0)
    assert first["bottleneck"].startswith("highly input-bound (input wait 30%)")
    assert first["error"] is None
    assert fast["verdict"] == "2.00x faster" and fast["speedup"] == pytest.approx(2.0)
    assert fast["changes"] == "prefetch=True, cache=True"
    assert repeat["verdict"] == "0.99x: no significant difference"
    assert oom["status"] == "failed" and oom["error"] == "ResourceExhaustedError: OOM"
    assert oom["median_ms"] is None and oom["verdict"] == "" and oom["bottleneck"] == ""


def test_baseline_is_first_ok_result_unless_given(results):
    rows = report.history_rows([results[3]] + results[:2])    # a failure first
    assert [r["verdict"] for r in rows] == ["", "baseline", "2.00x faster"]
    rows = report.history_rows(results[:2], baseline=results[1])
    assert rows[0]["verdict"] == "2.00x slower" and rows[1]["is_baseline"]
    assert rows[0]["changes"] == "prefetch=False, cache=False"   # relative to the baseline run


def test_pick_baseline_prefers_a_run_of_the_baseline_config(results):
    swapped = [results[1], results[0]]
    assert report.pick_baseline(swapped) is results[1]
    assert report.pick_baseline(swapped, RunConfig()) is results[0]
    assert report.pick_baseline([results[3]]) is None
    rows = report.history_rows(swapped, baseline_config=RunConfig())
    assert [r["verdict"] for r in rows] == ["2.00x faster", "baseline"]
    assert [r["changes"] for r in rows] == ["prefetch=True, cache=True", "baseline"]


def test_too_few_steps_says_so():
    rows = report.history_rows([ok(RunConfig(), (0.1, 0.1), 0.0), ok(RunConfig(prefetch=True), (0.05, 0.05), 0.0)])
    assert rows[1]["verdict"] == "2.00x: too few steps to tell"


def test_format_table_exact(results):
    assert report.format_table(report.history_rows(results)) == (
        "#  status  changes vs baseline        median ms      IQR ms  examples/s  input wait  vs baseline        "
        "               diagnosis\n"
        "-  ------  -------------------------  ---------  ----------  ----------  ----------  -------------------"
        "-------------  " + "-" * 54 + "\n"
        "1  ok      baseline                       100.0  98.0-102.0         640         30%  baseline           "
        "               highly input-bound (input wait 30%): try prefetch=True\n"
        "2  ok      prefetch=True, cache=True       50.0   49.0-51.0       1,280          2%  2.00x faster       "
        "               not input-bound (input wait 2%)\n"
        "3  ok      baseline                       101.0  99.0-103.0         634         30%  0.99x: no significa"
        "nt difference  highly input-bound (input wait 30%): try prefetch=True\n"
        "4  failed  batch_size=4096                                                                              "
        "               error: ResourceExhaustedError: OOM")


def test_format_table_shows_labels_only_when_some_run_has_one():
    rows = report.history_rows([ok(RunConfig(label="first"), BASE_S, 0.0)])
    headline = "not input-bound (input wait 0%)"
    assert report.format_table(rows) == (
        "#  label  status  changes vs baseline  median ms      IQR ms  examples/s  input wait  vs baseline  diagnosis\n"
        "-  -----  ------  -------------------  ---------  ----------  ----------  ----------  -----------  "
        + "-" * len(headline) + "\n"
        "1  first  ok      baseline                 100.0  98.0-102.0         640          0%  baseline     "
        + headline)


def test_html_table_exact_escaped_and_failed_row_red():
    rows = report.history_rows([failed(RunConfig(label="<b>x</b>"), error="bad & <worse>")])
    td = '<td style="padding:1px 6px;text-align:{}">{}</td>'
    th = '<th style="padding:1px 6px;border-bottom:1px solid #999;text-align:{}">{}</th>'
    heads = [("right", "#"), ("left", "label"), ("left", "status"), ("left", "changes vs baseline"),
             ("right", "median ms"), ("right", "IQR ms"), ("right", "examples/s"), ("right", "input wait"),
             ("left", "vs baseline"), ("left", "diagnosis")]
    nowrap = ";white-space:nowrap"   # numbers and the verdict never wrap
    cells = [("right" + nowrap, "1"), ("left", "&lt;b&gt;x&lt;/b&gt;"), ("left", "failed"), ("left", "baseline"),
             ("right" + nowrap, ""), ("right" + nowrap, ""), ("right" + nowrap, ""), ("right" + nowrap, ""),
             ("left" + nowrap, ""), ("left", "error: bad &amp; &lt;worse&gt;")]
    assert report.html_table(rows) == (
        '<table class="tfwb-history" style="border-collapse:collapse;font-size:12px"><thead><tr>'
        + "".join(th.format(*h) for h in heads) + '</tr></thead><tbody><tr class="tfwb-row-failed" '
        'style="color:#c00">' + "".join(td.format(*c) for c in cells) + "</tr></tbody></table>")


def test_html_table_marks_baseline_and_verdicts(results):
    text = report.html_table(report.history_rows(results))
    assert text.count("<tr class=") == 4
    assert '<tr class="tfwb-row-ok tfwb-row-baseline" style="font-weight:bold">' in text
    assert ">2.00x faster<" in text and ">0.99x: no significant difference<" in text
    assert '<tr class="tfwb-row-failed" style="color:#c00">' in text


def test_empty():
    assert report.history_rows([]) == []
    assert report.format_table([]) == "No runs yet."
    assert report.html_table([]) == '<div class="tfwb-history tfwb-empty">No runs yet.</div>'


def test_output_is_deterministic(results):
    assert report.html_table(report.history_rows(results)) == report.html_table(report.history_rows(list(results)))


def test_report_is_pure():
    code = ("import sys, tfwb.report; bad = [m for m in ('tensorflow', 'matplotlib', 'ipywidgets', 'IPython') "
            "if m in sys.modules]; assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True)


def _sized(result, size):
    return dataclasses.replace(result, fingerprint={"size": size})


def test_runs_of_another_size_are_not_compared_and_baseline_follows_the_latest_size():
    small_base = _sized(ok(RunConfig(), BASE_S, 0.03), "small")
    full_base = _sized(ok(RunConfig(), (0.5, 0.51, 0.49, 0.5, 0.52), 0.03), "full")
    full_fast = _sized(ok(RunConfig(prefetch=True), (0.25, 0.26, 0.24, 0.25, 0.25), 0.0), "full")
    assert report.pick_baseline([small_base, full_base, full_fast], RunConfig()) is full_base
    rows = report.history_rows([small_base, full_base, full_fast], baseline=small_base)
    assert rows[1]["verdict"] == "full size: not compared" and rows[1]["speedup"] is None
    rows = report.history_rows([small_base, full_base, full_fast], baseline_config=RunConfig())
    assert [r["verdict"] for r in rows] == ["small size: not compared", "baseline", "2.00x faster"]
