"""The command line (tfwb.cli: options, drawer, commands): every knob is an option derived from
KNOBS, errors name what is allowed, the one drawer keeps progress off pipes, run calls its runner as
runner(cfg, observers) and Ctrl-C ends it as interrupted, report skips and names lines that are not
complete runs and fails clearly on a missing file. The sweep command is tested in test_search.py."""
import io
import json
import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

from tfwb import RunConfig, RunResult
from tfwb.cli.commands import build_parser, main
from tfwb.cli.drawer import Drawer
from tfwb.cli.options import allowed_text, default_text, option
from tfwb.config import KNOBS
from tfwb.history import History
from tfwb.knobs import markdown_table
from tfwb.observers import Dispatch, RunState, StepLog

ROOT = Path(__file__).resolve().parents[1]
DEFAULTS = RunConfig(_check_workload=False)


def flat(text: str) -> str:
    """Help text with argparse's line wrapping undone."""
    return " ".join(text.split())


def squash(text: str) -> str:
    """Text without any whitespace (argparse may wrap a line after a hyphen)."""
    return "".join(text.split())


def parsed(argv):
    """The RunConfig changes ``run ARGV`` asks for (no run)."""
    args = build_parser().parse_args(["run", *argv])
    return {k: v for k, v in vars(args).items() if k in KNOBS}


def exit_code_and_err(capsys, argv):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    return exc.value.code, flat(capsys.readouterr().err)


def python_m_tfwb(*args, **kw):
    return subprocess.run([sys.executable, "-m", "tfwb", *args], capture_output=True, text=True,
                          timeout=kw.pop("timeout", 120), **kw)


def fake_result(cfg, ok=True):
    if not ok:
        return RunResult(config=cfg, status="failed", error="device lost")
    return RunResult(config=cfg, step_times_s=[0.01] * cfg.steps, input_wait_s=[0.0] * cfg.steps,
                     examples_per_step=cfg.batch_size)


def append_result(path, result):
    History(path).append(result)


def load_results(path):
    history = History(path)
    results = history.load()
    assert history.skipped == []
    return results


class FakeRunner:
    """``runner(cfg, observers)``: drives the observers step by step, records the configs.

    ``sigint_at``: a real SIGINT to this process after that step (1-based), as Ctrl-C.
    """

    def __init__(self, ok=True, sigint_at=None):
        self.ok, self.sigint_at, self.configs, self.observers = ok, sigint_at, [], []

    def __call__(self, cfg, observers=()):
        import signal

        self.configs.append(cfg)
        self.observers.append(list(observers))
        total = cfg.warmup_steps + cfg.steps
        state = RunState(config=cfg, log=StepLog(), clock=lambda: 0.0, total_steps=total,
                         warmup_steps=cfg.warmup_steps)
        hooks = Dispatch(observers)
        for step in range(total):
            state.log.times_s.append(0.01)
            if step + 1 == self.sigint_at:
                signal.raise_signal(signal.SIGINT)
            hooks.call("on_step_end", state, step)
            if state.stop_reason is not None:
                return RunResult(config=cfg, status="interrupted" if state.interrupted else "ok",
                                 stop_reason=state.stop_reason)
        return fake_result(cfg, self.ok)


# -- --help lists every knob ------------------------------------------------------------
def test_run_help_lists_every_knob_with_help_default_and_allowed(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["run", "--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    for name, k in KNOBS.items():
        assert re.search(rf"^  {re.escape(option(name))}[ ,]", out, re.M), name
        entry = squash(out[out.index(f"  {option(name)} "):])
        assert entry.startswith(squash(option(name))), name
        assert squash(k.help) in entry, name
        assert squash(f"Default: {default_text(k, getattr(DEFAULTS, name))}.") in entry, name
        assert squash(f"Allowed: {allowed_text(k)}.") in entry, name
        if k.kind == "bool":
            assert f"{option(name)} [BOOL], --no-{name.replace('_', '-')}" in out, name


def test_run_options_are_exactly_the_knobs_plus_runs_own():
    run = build_parser().commands["run"]
    dests = {a.dest for a in run._actions} - {"help"}
    assert dests == set(KNOBS) | {"history", "json", "progress", "logdir"}


def test_every_default_written_back_parses_to_itself():
    for name, k in KNOBS.items():
        default = getattr(DEFAULTS, name)
        assert parsed([f"{option(name)}={k.format(default)}"]) == {name: default}, name


# -- bad values exit 2 naming what is allowed -------------------------------------------------
def bad_values():
    """One knob of each kind (found in KNOBS, not named here) with a value it refuses."""
    by_kind = defaultdict(list)
    for name, k in KNOBS.items():
        by_kind[k.kind].append((name, k))
    cases = []
    for kind, bad in (("bool", "maybe"), ("choice", "no-such-choice"), ("int", "1.5"), ("float", "fast"),
                      ("spec", "bogus"), ("cache", "yes-please")):
        for name, k in by_kind.get(kind, [])[:1]:
            cases.append(pytest.param(name, bad, id=f"{kind}-{name}"))
    for name, k in KNOBS.items():                      # below the minimum of a bounded number
        if k.kind in ("int", "float") and k.minimum is not None:
            below = k.minimum if k.exclusive_minimum else k.minimum - 1
            cases.append(pytest.param(name, k.format(int(below) if k.kind == "int" else float(below)),
                                      id=f"{k.kind}-min-{name}"))
            break
    return cases


@pytest.mark.parametrize("name, bad", bad_values())
def test_bad_value_exits_2_naming_field_value_and_allowed(capsys, name, bad):
    code, err = exit_code_and_err(capsys, ["run", f"{option(name)}={bad}"])
    assert code == 2
    assert f"argument {option(name)}" in err and f"{name}=" in err and "is not allowed" in err, err
    k = KNOBS[name]
    words = {"bool": "true or false", "cache": "off, memory, or file:PREFIX"}.get(k.kind)
    if words is None and k.kind == "choice":
        words = ", ".join(repr(c) for c in k.values())
    if words is None:
        words = flat(k.allowed())
    assert words in err, err
    assert "Traceback" not in err


def test_every_kind_of_knob_has_a_bad_value_case():
    kinds = {p.id.split("-")[0] for p in bad_values()}
    assert kinds >= {k.kind for k in KNOBS.values()} - {"text"}


def test_unknown_option_exits_2_with_a_suggestion(capsys):
    code, err = exit_code_and_err(capsys, ["run", "--prefech"])
    assert code == 2 and "unrecognized arguments: --prefech" in err and "did you mean --prefetch?" in err


def test_abbreviated_options_are_not_guessed(capsys):
    code, err = exit_code_and_err(capsys, ["run", "--batch", "8"])
    assert code == 2 and "unrecognized arguments" in err


# -- what values become ------------------------------------------------------------------
def test_cache_words_never_become_a_file_path(capsys):
    assert parsed(["--cache", "memory"]) == {"cache": True}
    assert parsed(["--cache", "yes"]) == {"cache": True}      # a yes means memory, never a file "yes"
    assert parsed(["--cache", "on"]) == {"cache": True}
    assert parsed(["--cache", "off"]) == {"cache": False}
    assert parsed(["--cache", "no"]) == {"cache": False}
    assert parsed(["--cache", "file:/tmp/tfwb-cache"]) == {"cache": "/tmp/tfwb-cache"}
    for bare in ("/tmp/tfwb-cache", "file:", "memroy"):
        code, err = exit_code_and_err(capsys, ["run", "--cache", bare])
        assert code == 2 and "cache must be off, memory, or file:PREFIX" in err, (bare, err)


def test_bool_flags_and_values():
    assert parsed(["--prefetch"]) == {"prefetch": True}
    assert parsed(["--no-prefetch"]) == {"prefetch": False}
    assert parsed(["--prefetch=false"]) == {"prefetch": False}
    assert parsed(["--prefetch", "off"]) == {"prefetch": False}
    assert parsed(["--prefetch", "--cache", "memory"]) == {"prefetch": True, "cache": True}
    assert parsed(["--no-deterministic"]) == {"deterministic": False}


def test_no_flag_refuses_a_value(capsys):
    code, err = exit_code_and_err(capsys, ["run", "--no-prefetch=true"])
    assert code == 2 and "--no-prefetch takes no value" in err


def test_none_for_optional_knobs_and_numbers_for_the_rest():
    optional = [n for n, k in KNOBS.items() if k.optional]
    assert optional, "the table has optional knobs"
    for name in optional:
        assert parsed([option(name), "none"]) == {name: None}
    assert parsed(["--batch-size", "8", "--learning-rate", "3e-4", "--clip", "global_norm:1.0"]) == {
        "batch_size": 8, "learning_rate": 3e-4, "clip": "global_norm:1.0"}


# -- run with a fake runner: exit status, history, progress --------------------------------------
def test_run_prints_summary_and_appends_history_creating_its_folder(tmp_path, capsys):
    path = tmp_path / "runs" / "cli.jsonl"
    runner = FakeRunner()
    assert main(["run", "--steps", "3", "--warmup-steps", "1", "--prefetch", "--cache", "memory",
                 "--history", str(path)], runner=runner) == 0
    (cfg,) = runner.configs
    assert cfg.prefetch is True and cfg.cache is True and cfg.steps == 3
    out, err = capsys.readouterr()
    assert "median step 10.0 ms" in out
    assert err == ""                                   # stderr is not a terminal: no progress
    assert [r.config for r in load_results(path)] == [cfg]


def test_run_prints_mfu_and_the_bound_of_every_suggestion(capsys):
    def limited_runner(cfg, observers=()):
        return RunResult(config=cfg, step_times_s=[0.1] * cfg.steps, input_wait_s=[0.047] * cfg.steps,
                         examples_per_step=cfg.batch_size, model_flops_per_step=2.3e9, peak_flops_per_s=1e11,
                         datasheet_flops_per_s=5.6e10, datasheet_source="datasheet")

    assert main(["run", "--steps", "3", "--storage-latency-ms", "0"], runner=limited_runner) == 0
    lines = capsys.readouterr().out.splitlines()
    assert ", MFU 23 % of this machine's measured float32 peak (41 % of datasheet), " in lines[0]
    assert lines[1] == ("try prefetch=True: overlap input with the step; prefetch: removing the input wait "
                        "(47 % of the step) gains at most 1.9x; on a CPU the pipeline also takes cores from the "
                        "step, so the knob can gain more than that here")
    assert [line.split("=")[0] for line in lines[1:]] == ["try prefetch", "try parallel_map", "try interleave",
                                                          "try cache"]
    assert main(["run", "--steps", "3", "--json"], runner=limited_runner) == 0
    assert RunResult.from_json(capsys.readouterr().out).mfu == pytest.approx(0.23)   # JSON only


def test_failed_run_exits_1(capsys):
    assert main(["run", "--steps", "2"], runner=FakeRunner(ok=False)) == 1
    assert "failed: device lost" in capsys.readouterr().out


def test_json_prints_the_whole_result(capsys):
    assert main(["run", "--steps", "2", "--json"], runner=FakeRunner()) == 0
    result = RunResult.from_json(capsys.readouterr().out)
    assert result.config.steps == 2 and result.ok


def test_progress_flag_writes_plain_lines_off_a_terminal(capsys):
    assert main(["run", "--steps", "20", "--warmup-steps", "5", "--progress"], runner=FakeRunner()) == 0
    err = capsys.readouterr().err
    lines = err.splitlines()
    assert "\r" not in err
    assert lines[0] == "images: step 1/25 (warm-up)" and lines[-1] == "images: step 25/25"
    assert len(lines) <= 11                              # a line per tenth, not per step


def test_progress_on_a_terminal_rewrites_one_line():
    stream = io.StringIO()
    drawer = Drawer(stream, tty=True)
    show = drawer.steps("mine", warmup_steps=1)
    for done in range(1, 4):
        show(done, 3)
    drawer.close()
    drawer.close()                                     # a second close adds nothing
    text = stream.getvalue()
    assert text == "\rmine: step 1/3 (warm-up)\rmine: step 2/3          \rmine: step 3/3\n"


def test_progress_close_without_steps_writes_nothing():
    stream = io.StringIO()
    Drawer(stream, tty=True).close()
    assert stream.getvalue() == ""


def test_the_drawer_reaches_the_terminal_while_a_run_holds_back_descriptor_2(tmp_path, monkeypatch):
    import os

    from tfwb.cli.drawer import stderr_for_drawing

    terminal = open(tmp_path / "terminal", "w")
    monkeypatch.setattr(sys, "stderr", terminal)
    with stderr_for_drawing() as err:
        held = os.open(tmp_path / "held", os.O_WRONLY | os.O_CREAT)
        os.dup2(held, terminal.fileno())                # what the runner's capture does to fd 2
        os.close(held)
        Drawer(err, tty=False).draw("mine: step 1/2", log=True)
    terminal.close()
    assert (tmp_path / "terminal").read_text() == "mine: step 1/2\n"
    assert (tmp_path / "held").read_text() == ""


def test_run_calls_its_runner_with_observers_and_ctrl_c_ends_the_run_interrupted(tmp_path, capsys):
    import signal

    handler = signal.getsignal(signal.SIGINT)
    path = tmp_path / "h.jsonl"
    runner = FakeRunner(sigint_at=3)
    assert main(["run", "--steps", "20", "--warmup-steps", "1", "--history", str(path)], runner=runner) == 130
    assert [type(o).__name__ for o in runner.observers[0]] == ["StopFlag"]   # no --progress: no counter
    (saved,) = History(path).load()
    assert saved.status == "interrupted" and "Ctrl-C" in saved.stop_reason
    assert signal.getsignal(signal.SIGINT) is handler   # the bridge is disarmed
    runner = FakeRunner()
    assert main(["run", "--steps", "2", "--progress"], runner=runner) == 0
    assert [type(o).__name__ for o in runner.observers[0]] == ["Progress", "StopFlag"]


# -- knobs ------------------------------------------------------------------------------------
def test_knobs_lists_every_knob(capsys):
    assert main(["knobs"]) == 0
    out = capsys.readouterr().out
    for name, k in KNOBS.items():
        assert re.search(rf"^{re.escape(option(name))}  \(default ", out, re.M), name


def test_knobs_markdown_is_the_knob_table(capsys):
    assert main(["knobs", "--markdown"]) == 0
    assert capsys.readouterr().out == markdown_table(RunConfig) + "\n"


def readme_knob_table() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    match = re.search(r"<!-- knobs: begin[^>]*-->\n(.*?)\n<!-- knobs: end -->", text, re.S)
    assert match, "README.md has no <!-- knobs: begin ... --> / <!-- knobs: end --> block"
    return match.group(1).strip()


def test_readme_knob_table_is_knobs_markdown():
    # A fresh process: only the built-in workloads are registered, as for a reader.
    proc = python_m_tfwb("knobs", "--markdown")
    assert proc.returncode == 0, proc.stderr
    assert readme_knob_table() == proc.stdout.strip(), (
        "README.md's knob table is stale: run `.venv/bin/python tools/readme_knobs.py` "
        "(it pastes `python -m tfwb knobs --markdown` between the knobs markers)")


# -- hardware -----------------------------------------------------------------------------
def test_hardware_prints_a_few_lines(capsys):
    assert main(["hardware"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("machine:  ") and "RAM" in lines[0]
    assert lines[-1].startswith("python:   ")
    assert len(lines) <= 12


def test_hardware_verbose_prints_the_json(capsys):
    assert main(["hardware", "--verbose"]) == 0
    hw = json.loads(capsys.readouterr().out)
    assert {"cpu_count", "gpus", "environment"} <= set(hw)


# -- report -----------------------------------------------------------------------------
def test_report_prints_every_run(tmp_path, capsys):
    path = tmp_path / "h.jsonl"
    for label, t in (("a", 0.1), ("b", 0.05)):
        append_result(path, RunResult(config=RunConfig(label=label, prefetch=label == "b"),
                                      step_times_s=[t] * 6, input_wait_s=[0.0] * 6, examples_per_step=8))
    assert main(["report", str(path)]) == 0
    out = capsys.readouterr().out
    assert "prefetch=True" in out and "2.00x faster" in out


def test_report_of_an_empty_file_says_no_runs(tmp_path, capsys):
    path = tmp_path / "h.jsonl"
    path.write_text("")
    assert main(["report", str(path)]) == 0
    assert capsys.readouterr().out.strip() == "No runs yet."


def test_report_skips_and_names_a_garbage_or_torn_line_and_keeps_every_run(tmp_path):
    path = tmp_path / "h.jsonl"
    append_result(path, RunResult(config=RunConfig(), step_times_s=[0.1], examples_per_step=8))
    with open(path, "a", encoding="utf-8") as fh:
        fh.write("this is not a result\n")
    append_result(path, RunResult(config=RunConfig(label="third"), step_times_s=[0.1], examples_per_step=8))
    with open(path, "a", encoding="utf-8") as fh:
        fh.write('{"config": {"batch')                    # a write cut short
    proc = python_m_tfwb("report", str(path))
    assert proc.returncode == 0, proc.stderr
    assert f"{path}, line 2 skipped" in proc.stderr and f"{path}, line 4 skipped: cut short" in proc.stderr
    assert "third" in proc.stdout and "Traceback" not in proc.stderr


def test_report_of_a_file_with_no_complete_run_fails(tmp_path, capsys):
    path = tmp_path / "notes.txt"
    path.write_text("hello\nworld\n")
    assert main(["report", str(path)]) == 1
    out, err = capsys.readouterr()
    assert out == "" and "line 1 skipped" in err and "holds no complete run" in err


@pytest.mark.parametrize("what", ["missing", "folder"])
def test_report_missing_file_or_folder_is_an_error(tmp_path, capsys, what):
    path = tmp_path / "h.jsonl"
    if what == "folder":
        path.mkdir()
    assert main(["report", str(path)]) == 1
    out, err = capsys.readouterr()
    assert out == "" and str(path) in err and "No runs yet" not in err
    assert ("no such file" if what == "missing" else "is a folder") in err


def test_help_and_bad_options_need_no_tensorflow():
    script = ("import sys, tfwb.cli.commands as m\n"
              "for argv in (['run', '--help'], ['run', '--steps', '0']):\n"
              "    try:\n        m.main(argv)\n    except SystemExit:\n        pass\n"
              "print('TF', 'tensorflow' in sys.modules, file=sys.stderr)")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert "TF False" in proc.stderr, proc.stderr


# -- worker: one process of a TF_CONFIG cluster -------------------------------------------------
GOOD_TF_CONFIG = {"cluster": {"worker": ["localhost:PORT", "localhost:1"]}, "task": {"type": "worker", "index": 0}}


def test_worker_options_are_the_knobs_plus_its_own():
    worker = build_parser().commands["worker"]
    dests = {a.dest for a in worker._actions} - {"help"}
    assert dests == set(KNOBS) | {"config", "result", "history", "json", "report", "workload_spec"}


@pytest.mark.parametrize("tf_config, status, says", [
    (None, 2, "TF_CONFIG is not set"),
    ("{oops", 2, "TF_CONFIG is malformed: not JSON"),
    ('{"cluster": {"worker": ["localhost:1"]}, "task": {"type": "worker", "index": 3}}', 2, "task index 3 is outside"),
    ("taken", 3, "is already in use on this machine"),
])
def test_worker_refuses_a_bad_tf_config_or_taken_port_before_tensorflow(monkeypatch, capsys, tf_config, status, says):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        if tf_config == "taken":
            tf_config = json.dumps(GOOD_TF_CONFIG).replace("PORT", str(s.getsockname()[1]))
        if tf_config is None:
            monkeypatch.delenv("TF_CONFIG", raising=False)
        else:
            monkeypatch.setenv("TF_CONFIG", tf_config)
        assert main(["worker", "--report"]) == status
    out, err = capsys.readouterr()
    assert err.startswith("python -m tfwb worker: error: ") and says in flat(err), err
    event = json.loads(out.split("@tfwb ", 1)[1])            # the local cluster's report line
    assert event["event"] == "error" and says in event["message"]


def test_worker_errors_need_no_tensorflow():
    script = ("import os, sys, tfwb.cli.commands as m\n"
              "os.environ['TF_CONFIG'] = '{bad'\n"
              "print('STATUS', m.main(['worker']), 'TF', 'tensorflow' in sys.modules)")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert "STATUS 2 TF False" in proc.stdout, proc.stderr


def test_worker_unknown_option_points_at_worker_help(capsys):
    code, err = exit_code_and_err(capsys, ["worker", "--wokers", "2"])
    assert code == 2 and "did you mean --workers?" in err and "python -m tfwb worker --help" in err


@pytest.mark.tf
def test_worker_runs_multi_worker_only(monkeypatch, capsys, tmp_path):
    port = __import__("tfwb.cluster_spec").cluster_spec.free_ports(1)[0]
    monkeypatch.setenv("TF_CONFIG", json.dumps(GOOD_TF_CONFIG).replace("PORT", str(port)))
    assert main(["worker", "--strategy", "mirrored"]) == 2
    assert "strategy='mirrored' is not allowed for a worker" in flat(capsys.readouterr().err)
    config = tmp_path / "cfg.json"
    config.write_text("[1]")
    assert main(["worker", "--config", str(config)]) == 2
    assert "a JSON object of RunConfig fields is needed" in flat(capsys.readouterr().err)
    assert main(["worker", "--config", str(tmp_path / "missing.json")]) == 2
    assert "No such file" in capsys.readouterr().err


# -- a real run -----------------------------------------------------------------------------
@pytest.mark.tf
def test_run_subprocess_writes_history_and_keeps_pipes_clean(tmp_path):
    path = tmp_path / "runs" / "h.jsonl"
    proc = python_m_tfwb("run", "--size", "small", "--steps", "3", "--warmup-steps", "1", "--batch-size", "8",
                         "--data-source", "memory", "--no-prefetch", "--history", str(path), timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "median step" in proc.stdout
    assert "\r" not in proc.stderr and "step 1/" not in proc.stderr   # stderr is a pipe: no counter
    (result,) = load_results(path)
    assert result.ok and len(result.step_times_s) == 3 and result.config.batch_size == 8


# -- python -m tfwb compare (issue 34) ---------------------------------------------------------------
def test_compare_builds_b_from_a_and_its_changes_and_prints_the_interleaved_verdict(capsys, monkeypatch):
    from tfwb import stats
    monkeypatch.setenv("TFWB_FAST", "1")
    seen = []

    def fake_compare(a, b, rounds=None, steps_per_round=None, progress=None):
        seen.append((a, b, rounds, steps_per_round))
        return stats.compare_rounds([0.3] * 10, [0.1] * 10, method="fake rounds")
    argv = ["compare", "--workload", "mlp", "--batch-size", "16", "--b", "prefetch=true", "--b", "cache=memory"]
    assert main(argv, compare=fake_compare) == 0
    a = RunConfig(workload="mlp", batch_size=16)
    assert seen == [(a, a.replace(prefetch=True, cache=True), 10, None)]      # few rounds in small mode
    out = capsys.readouterr().out
    assert "B (prefetch=True, cache=True) against A, interleaved: 3.00x faster" in out and "10 of 10" in out
    assert main([*argv, "--json", "--rounds", "12"], compare=fake_compare) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["verdict"] == "faster" and data["b"]["cache"] is True and seen[-1][2] == 12
    for bad, says in ((["--b", "prefetch=maybe"], "'maybe' is not allowed; prefetch takes true or false"),
                      (["--b", "prefetchh=true"], "unknown knob 'prefetchh'"),
                      ([], "configuration B needs at least one --b NAME=VALUE"),
                      (["--b", "prefetch=false"], "leaves configuration A as it is"),
                      (["--b", "prefetch=true", "--rounds", "0"], "rounds=0 is not allowed; rounds must be >= 1")):
        code, err = exit_code_and_err(capsys, ["compare", "--workload", "mlp", *bad])
        assert code == 2 and says in err, err
    assert len(seen) == 2


@pytest.mark.tf
def test_compare_runs_two_configurations_interleaved(capsys, monkeypatch):
    monkeypatch.setenv("TFWB_FAST", "1")
    assert main(["compare", "--workload", "mlp", "--size", "small", "--warmup-steps", "1", "--batch-size", "8",
                 "--data-source", "memory", "--b", "steps-per-execution=2", "--rounds", "2",
                 "--steps-per-round", "2"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"B \(steps_per_execution=2\) against A, interleaved: \d+\.\d\dx", out), out
    assert re.search(r"\d of 2 rounds", out), out
    assert "alternating warm blocks of 2 steps" in out
