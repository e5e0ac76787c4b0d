"""Tests of tfwb.history: the JSON-lines run history, torn-line safe."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import pytest

import tfwb
from tfwb.config import RunConfig
from tfwb.history import History, append_result, load_results
from tfwb.records import RunResult


def result(i: int = 0, **changes) -> RunResult:
    base = dict(config=RunConfig(batch_size=8 * (i + 1), label=f"run {i}"), step_times_s=(0.1, 0.2),
                input_wait_s=(0.01, 0.02), losses=(2.0, 1.5), examples_per_step=8 * (i + 1),
                run_id=f"run{i}", notes=("a note",))
    base.update(changes)
    return RunResult(**base)


def test_append_and_load_keep_every_result_in_order(tmp_path):
    h = History(tmp_path / "runs.jsonl")
    results = [result(i, status="failed" if i == 1 else "ok", error="boom" if i == 1 else None)
               for i in range(4)]
    for r in results:
        h.append(r)
    assert len((tmp_path / "runs.jsonl").read_text().splitlines()) == 4
    assert h.load() == results and h.skipped == []
    assert History(str(tmp_path / "runs.jsonl")).load() == results


def test_blank_lines_are_ignored_not_reported(tmp_path):
    path = tmp_path / "runs.jsonl"
    path.write_text("\n" + result().to_json() + "\n\n" + result(1).to_json() + "\n")
    h = History(path)
    assert h.load() == [result(), result(1)] and h.skipped == []


def test_a_history_not_written_yet_has_no_runs(tmp_path):
    assert History(tmp_path / "nothing-here.jsonl").load() == []
    assert load_results(tmp_path / "no-folder" / "runs.jsonl") == []


def test_append_creates_the_folder(tmp_path):
    path = tmp_path / "runs" / "nested" / "cli.jsonl"
    append_result(path, result())
    History(str(path)).append(result(1))
    assert load_results(path) == [result(), result(1)]


def test_append_into_a_file_where_the_folder_should_be_raises_oserror(tmp_path):
    (tmp_path / "runs").write_text("not a folder")
    with pytest.raises(OSError):
        History(tmp_path / "runs" / "cli.jsonl").append(result())


def test_append_refuses_what_is_not_a_result(tmp_path):
    with pytest.raises(TypeError, match="RunResult, got dict"):
        History(tmp_path / "runs.jsonl").append({"config": {}})


def test_loading_a_folder_raises_oserror(tmp_path):
    with pytest.raises(OSError):
        History(tmp_path).load()


@pytest.mark.parametrize("garbage, why", [
    (b"this is not json\n", "invalid JSON"),
    (b'{"config": {"batch_size": 0}}\n', "batch_size=0"),           # JSON, but a bad RunConfig
    (b'[1, 2, 3]\n', "expected a JSON object"),                      # JSON, not an object
    (b'{"config": {}, "samples": [7]}\n', "not a RunResult"),        # a bad sample
    (b"\xff\xfe\x00garbage\n", "not UTF-8"),
])
def test_an_invalid_line_is_skipped_and_reported_with_its_number(tmp_path, garbage, why):
    path = tmp_path / "runs.jsonl"
    h = History(path)
    h.append(result(0))
    with open(path, "ab") as fh:
        fh.write(garbage)
    h.append(result(2))
    assert h.load() == [result(0), result(2)]
    ((line, reason),) = h.skipped
    assert line == 2 and why in reason and "cut short" not in reason, reason


def test_load_results_warns_naming_the_file_and_the_skipped_line(tmp_path):
    path = tmp_path / "runs.jsonl"
    append_result(path, result(0))
    with open(path, "ab") as fh:
        fh.write(result(1).to_json()[:40].encode())              # a write cut off
    with pytest.warns(UserWarning, match=r"runs\.jsonl: skipped 1 line\(s\).*line 2: cut short"):
        assert tfwb.load_results(path) == [result(0)]


def test_load_results_is_quiet_for_a_clean_history(tmp_path, recwarn):
    path = tmp_path / "runs.jsonl"
    append_result(path, result())
    assert load_results(path) == [result()] and not recwarn.list


# A writer that dies in the middle of a record: it writes the first half of a RunResult's
# line, flushes it to the file and is killed (SIGKILL: no clean-up, no atexit).
WRITER = textwrap.dedent("""
    import os, signal, sys
    from tfwb.config import RunConfig
    from tfwb.records import RunResult
    line = (RunResult(config=RunConfig(label="torn")).to_json() + "\\n").encode()
    fd = os.open(sys.argv[1], os.O_WRONLY | os.O_APPEND)
    os.write(fd, line[: len(line) // 2])
    os.fsync(fd)
    os.kill(os.getpid(), signal.SIGKILL)
    os.write(fd, line[len(line) // 2:])          # never reached
""")


def test_a_writer_killed_mid_line_loses_only_its_own_record(tmp_path):
    path = tmp_path / "runs.jsonl"
    h = History(path)
    h.append(result(0))
    h.append(result(1))
    proc = subprocess.run([sys.executable, "-c", WRITER, str(path)], capture_output=True,
                          env={**os.environ, "PYTHONPATH": os.getcwd()}, timeout=60)
    assert proc.returncode == -signal.SIGKILL, proc.stderr.decode()
    text = path.read_bytes()
    assert not text.endswith(b"\n") and text.count(b"\n") == 2        # a torn third line

    assert h.load() == [result(0), result(1)]                       # earlier records load
    ((line, reason),) = h.skipped
    assert line == 3 and reason.startswith("cut short"), reason

    h.append(result(3))                                             # the next run after the crash
    assert path.read_bytes().startswith(text + b"\n")                # on a fresh line, torn one untouched
    assert h.load() == [result(0), result(1), result(3)]
    assert [n for n, _ in h.skipped] == [3]                          # the torn line, no longer the last
    h.append(result(4))
    assert h.load()[-1] == result(4) and len(h.load()) == 4


# -- a run written as it starts and again at its end (tfwb.keras.Monitor) --------------------------------
def test_a_running_record_is_completed_in_its_place_by_the_later_record_of_its_run(tmp_path):
    from tfwb.history import completed

    h = History(tmp_path / "runs.jsonl")
    h.append(result(0))
    h.append(result(1, status="running", step_times_s=(), losses=(), input_wait_s=()))
    h.append(result(2))                                   # another program's run, appended meanwhile
    done = result(1, step_times_s=(0.3, 0.4))
    h.append(done)
    assert len((tmp_path / "runs.jsonl").read_text().splitlines()) == 4
    loaded = h.load()
    assert [(r.run_id, r.status) for r in loaded] == [("run0", "ok"), ("run1", "ok"), ("run2", "ok")]
    assert loaded[1] == done and h.skipped == []
    # duplicates of finished records are not this mechanism's business: they stay
    assert completed([result(0), result(0)]) == [result(0), result(0)]


def test_a_run_that_never_completed_reads_as_failed_also_when_its_end_was_torn(tmp_path):
    from tfwb.history import UNFINISHED

    path = tmp_path / "runs.jsonl"
    h = History(path)
    h.append(result(0, status="running"))
    [r] = h.load()
    assert r.status == "failed" and r.error == UNFINISHED and r.error.startswith("the fit stopped before its end")
    with open(path, "a") as fh:                           # the kernel died while writing the end record
        fh.write(result(0).to_json()[:40])
    [r] = h.load()
    assert r.status == "failed" and r.error == UNFINISHED and len(h.skipped) == 1
    h.append(result(1))                                   # the next run: on a fresh line, the start still failed
    assert [(x.run_id, x.status) for x in h.load()] == [("run0", "failed"), ("run1", "ok")]
