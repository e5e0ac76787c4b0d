"""The command line: options map to RunConfig fields, errors name the field, report reads history."""
import subprocess
import sys

import pytest

from tfwb import RunConfig, RunResult
from tfwb.__main__ import _parse_value, main
from tfwb.records import append_result


def test_parse_value_types():
    assert _parse_value("none") is None
    assert _parse_value("True") is True and _parse_value("false") is False
    assert _parse_value("32") == 32 and isinstance(_parse_value("32"), int)
    assert _parse_value("0.5") == 0.5
    assert _parse_value("global_norm:1.0") == "global_norm:1.0"


def test_bad_value_exits_2_naming_the_field(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["run", "--batch-size", "0"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "batch_size=0" in err and "integer >= 1" in err


def test_report_prints_every_run(tmp_path, capsys):
    path = tmp_path / "h.jsonl"
    for label, t in (("a", 0.1), ("b", 0.05)):
        append_result(path, RunResult(config=RunConfig(label=label, prefetch=label == "b"),
                                      step_times_s=[t] * 6, input_wait_s=[0.0] * 6, examples_per_step=8))
    assert main(["report", str(path)]) == 0
    out = capsys.readouterr().out
    assert "prefetch=True" in out and "2.00x faster" in out


@pytest.mark.tf
def test_run_subprocess_writes_history(tmp_path):
    path = tmp_path / "h.jsonl"
    proc = subprocess.run(
        [sys.executable, "-m", "tfwb", "run", "--size", "small", "--steps", "3", "--warmup-steps", "1",
         "--batch-size", "8", "--data-source", "memory", "--no-prefetch", "--history", str(path)],
        capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "median step" in proc.stdout
    (result,) = __import__("tfwb").load_results(path)
    assert result.ok and len(result.step_times_s) == 3 and result.config.batch_size == 8
