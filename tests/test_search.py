"""The sweeps package (tfwb.search: space, plan, search, result, progress) and the sweep's front ends
(the command, the notebook bar, the charts): the space is checked against the knob table, the plan
is what the search runs, successive halving prunes by speed among the candidates that train
correctly, the finalists are compared noise-aware, every finished run reaches the history at once
(so a stop loses nothing and resume goes on), and `python -m tfwb sweep` refuses bad input with
exit 2. A fake runner, called as runner(cfg, observers), stands in for tfwb.run, except in one tiny
real sweep."""
import dataclasses
import json
import math
import os
import re
import signal
import warnings
import weakref

import pytest

import tfwb
from tfwb import RunConfig, RunResult, stats
from tfwb.cli.commands import main
from tfwb.cli.drawer import Drawer
from tfwb.cli.options import allowed_text, option
from tfwb.cli.sweep import OUT_FILES, parse_knob
from tfwb.config import KNOBS
from tfwb.hardware import DESCRIBED
from tfwb.history import History
from tfwb.observers import Dispatch, RunState, StepLog, StopFlag
from tfwb.search import fit_plan, plan, sweep
from tfwb.search.rungs import rung_steps
from tfwb.search.progress import SweepProgress
from tfwb.search.loss_rule import judge
from tfwb.search.result import FAILED, FINALIST, PROMOTED, SLOWER, WINNER, WORSE, example_times_s
from tfwb.search.halving import exhaustive
from tfwb.search.space import FIXED_KNOBS, candidates, check_space, default_space, run_key


def load_results(path):
    """Every complete run in a history file (nothing skipped)."""
    history = History(path)
    results = history.load()
    assert history.skipped == []
    return results

BASE = RunConfig(workload="images", size="small", warmup_steps=1)


def step_time(cfg):
    """A made-up machine: cache halves the step, prefetch saves 20 %, XLA and float16 cost."""
    t = 0.1
    t *= 0.8 if cfg.prefetch else 1.0
    t *= 0.5 if cfg.cache else 1.0
    t *= 1.3 if cfg.jit_compile else 1.0
    t *= 1.6 if cfg.mixed_precision == "mixed_float16" else 1.0
    return t


class _Doomed:
    """An object to hang a weakref callback on."""


class FakeRunner:
    """``runner(cfg, observers)``: drives the observers step by step as tfwb.run does; times from
    ``time_fn``, a loss falling towards ``end_loss_fn(cfg)``.

    ``fail_if`` / ``interrupt_at`` (1-based call number: the runner lets a KeyboardInterrupt
    through) / ``sigint_at`` ((call, step): a real SIGINT, raised in a garbage-collection
    callback) / ``stop_at`` ((call, step): a Stop button sets the sweep's StopFlag) simulate
    what can happen to tfwb.run. A stop requested by an observer ends the run after that
    step, "interrupted" when the request says so.
    """

    def __init__(self, time_fn=step_time, end_loss_fn=lambda cfg: 1.0, fail_if=lambda cfg: False,
                 interrupt_at=None, jitter=0.01, sigint_at=None, stop_at=None):
        self.time_fn, self.end_loss_fn, self.fail_if = time_fn, end_loss_fn, fail_if
        self.sigint_at, self.stop_at = sigint_at, stop_at
        self.interrupt_at, self.jitter = interrupt_at, jitter
        self.configs = []

    def __call__(self, cfg, observers=()):
        self.configs.append(cfg)
        n = len(self.configs)
        if n == self.interrupt_at:
            raise KeyboardInterrupt
        total = cfg.warmup_steps + cfg.steps
        state = RunState(config=cfg, log=StepLog(), clock=lambda: 0.0, total_steps=total,
                         warmup_steps=cfg.warmup_steps)
        hooks = Dispatch(observers)
        hooks.call("on_run_start", state)
        for step in range(total):
            if (n, step + 1) == self.sigint_at:  # SIGINT lands in a garbage-collection callback, where
                doomed = _Doomed()               # a KeyboardInterrupt would be printed and lost
                weakref.finalize(doomed, signal.raise_signal, signal.SIGINT)
                del doomed
            if (n, step + 1) == self.stop_at:
                next(o for o in observers if isinstance(o, StopFlag)).set()
            state.log.times_s.append(0.1)
            hooks.call("on_step_end", state, step)
            if state.stop_reason is not None:
                break
        hooks.call("on_run_end", state)
        if state.stop_reason is not None:
            done = max(0, len(state.log.times_s) - cfg.warmup_steps)
            return RunResult(config=cfg, status="interrupted" if state.interrupted else "ok",
                             stop_reason=state.stop_reason, step_times_s=[0.1] * done, losses=[2.0] * done)
        if self.fail_if(cfg):
            return RunResult(config=cfg, status="failed", error="ResourceExhaustedError: out of memory")
        t = self.time_fn(cfg)
        end = self.end_loss_fn(cfg)
        losses = [end + 1.3 * 0.8 ** (i + 1) for i in range(cfg.steps)]   # step i's loss, however long the run
        times = [t * (1 + self.jitter * ((i % 3) - 1)) for i in range(cfg.steps)]
        return RunResult(config=cfg, step_times_s=times, input_wait_s=[0.0] * cfg.steps, losses=losses,
                         examples_per_step=cfg.batch_size)


SPACE = {"prefetch": [False, True], "cache": [False, True], "jit_compile": [False, True]}


# -- the space ------------------------------------------------------------------------------------------
def test_default_space_holds_only_knobs_the_workload_honours():
    assert set(default_space("images")) == {"prefetch", "parallel_map", "cache", "mixed_precision", "jit_compile"}
    assert "parallel_map" not in default_space("mlp")
    for name, values in default_space("images").items():
        for v in values:
            KNOBS[name].check(name, v)


@pytest.mark.parametrize("space, words", [
    ({"bogus": [1]}, ["knob 'bogus' is not a RunConfig field", "prefetch", "mixed_precision"]),
    ({"prefetch": ["maybe"]}, ["prefetch='maybe' is not allowed", "True or False"]),
    ({"mixed_precision": ["float8"]}, ["mixed_precision='float8'", "'mixed_bfloat16'"]),
    ({"steps_per_execution": [0]}, ["steps_per_execution=0", ">= 1"]),
    ({"steps": [10, 20]}, ["'steps' cannot be swept", "rung"]),
    ({"prefetch": []}, ["space['prefetch'] is empty"]),
    ({"prefetch": "true"}, ["give a list of values"]),
    ({}, ["non-empty mapping"]),
])
def test_bad_space_raises_naming_knob_value_and_allowed(space, words):
    with pytest.raises(ValueError) as exc:
        check_space(space, "images")
    for w in words:
        assert w in str(exc.value), (w, str(exc.value))


def test_knob_the_workload_ignores_is_refused_and_every_fixed_knob_too():
    with pytest.raises(ValueError, match="'interleave' does not apply to workload 'mlp'"):
        check_space({"interleave": [False, True]}, "mlp")
    for name in FIXED_KNOBS:
        with pytest.raises(ValueError, match=f"'{name}' cannot be swept"):
            check_space({name: [getattr(BASE, name)]}, "images")


def test_space_values_are_deduplicated_in_order_and_combinations_refused_are_skipped():
    assert check_space({"prefetch": [True, False, True]}) == {"prefetch": (True, False)}
    base = BASE.replace(execution="eager")
    cands, skipped = candidates(base, {"jit_compile": (False, True), "prefetch": (False, True)})
    assert [c.changes for c in cands] == [{}, {"prefetch": True}]
    assert len(skipped) == 2 and all("jit_compile=True is not allowed with execution='eager'" in why
                                     for _, why in skipped)
    assert cands[0].label == "naive" and cands[1].label == "prefetch"


def test_rung_steps_grow_by_eta_in_whole_calls():
    assert rung_steps(10, 3, 3) == (10, 30, 90)
    assert rung_steps(5, 2, 3, multiple=4) == (8, 12, 20)


def test_the_plan_is_what_the_search_runs():
    space = {**SPACE, "steps_per_execution": [1, 4]}
    p = plan(BASE, space, min_steps=6, eta=3, rungs=3)
    assert p.rung_steps == (8, 20, 56) and p.naive_steps == 56      # whole calls of 4 steps
    assert len(p.candidates) == 16 and p.alive == (16, 6, 2) and p.runs_at_most == 1 + 16 + 6 + 2
    assert p.baseline.label == "naive" and p.baseline.size == "small"
    assert p.text() == ("16 candidates: 2 prefetch x 2 cache x 2 jit_compile x 2 steps_per_execution\n"
                        "measured steps per rung: 8 / 20 / 56\n"
                        "candidates per rung, at most: 16 -> 6 -> 2")
    runner = FakeRunner()
    r = sweep(BASE, space, min_steps=6, eta=3, rungs=3, runner=runner)
    assert r.rung_steps == p.rung_steps and [t.config for t in r.trials] == [c.config for c in p.candidates]
    per_rung = [sum(1 for t in r.trials if rung in t.runs) for rung in range(3)]
    assert all(n <= most for n, most in zip(per_rung, p.alive)) and per_rung[0] == 16
    assert len(runner.configs) <= p.runs_at_most
    with pytest.raises(ValueError, match="eta=1 is not allowed"):
        plan(BASE, SPACE, eta=1)


def test_runs_are_scored_by_final_loss_and_time_per_example():
    assert RunResult(config=BASE, losses=[8, 6, 4, 2, 1, 1, 1, 1]).final_loss() == 1.0
    assert math.isnan(RunResult(config=BASE, losses=[1.0, float("nan")]).final_loss())
    assert RunResult(config=BASE).final_loss() is None
    run = RunResult(config=BASE.replace(batch_size=4), step_times_s=[0.4, 0.8, 1.2])
    assert example_times_s(run) == pytest.approx([0.1, 0.2, 0.3]) and run.per_example_s == pytest.approx(0.2)


# -- successive halving ---------------------------------------------------------------------------------
def test_rungs_keep_the_fastest_third_and_the_winner_is_the_fastest():
    runner = FakeRunner()
    r = sweep(BASE, SPACE, min_steps=6, eta=3, rungs=3, runner=runner)
    assert r.finished and r.rung_steps == (6, 18, 54)
    by = {t.label: t for t in r.trials}
    assert r.winner is by["prefetch, cache"] and r.winner.status == WINNER
    # rung 0: 8 candidates (the naive one among them), ceil(8/3) = 3 go on; rung 1: ceil(3/3) = 1.
    assert sorted(t.label for t in r.trials if t.outcome.get(0) == PROMOTED) == [
        "cache", "prefetch, cache", "prefetch, cache, jit_compile"]
    assert [t.label for t in r.trials if t.outcome.get(1) == PROMOTED] == ["prefetch, cache"]
    slow = by["jit_compile"]
    assert slow.outcome == {0: SLOWER} and "rank" in slow.reason[0]
    # Every run the runner made had its rung's steps, and each configuration ran once per rung.
    assert sorted({c.steps for c in runner.configs}) == [6, 18, 54]
    keys = [run_key(c) for c in runner.configs]
    assert len(keys) == len(set(keys)) == r.runs == 1 + 8 + 3 + 1   # the naive run of 54 steps first
    assert r.speedup.verdict == "faster" and r.speedup.speedup == pytest.approx(2.5, rel=0.02)


def test_a_candidate_that_trains_worse_is_pruned_even_when_fastest_and_tolerance_decides():
    worse = FakeRunner(end_loss_fn=lambda cfg: 1.3 if cfg.cache else 1.0)     # final loss +30 % with cache
    r = sweep(BASE, SPACE, min_steps=6, rungs=2, runner=worse)
    assert all(t.status == WORSE for t in r.trials if t.config.cache)
    t = next(t for t in r.trials if t.label == "prefetch, cache")
    # The naive run drops from 2.04 to 1.38 after 7 steps' examples (warm-up's and 6 measured).
    assert "vs the naive run's 1.38 after" in t.reason[0] and "> 10% of its drop 0.657 (from 2.04)" in t.reason[0]
    assert r.winner.label == "prefetch"
    lenient = sweep(BASE, SPACE, min_steps=6, rungs=2, loss_tolerance=0.5, runner=worse)
    assert lenient.winner.label == "prefetch, cache"


def run_of(losses, batch=64, spe=1, warmup=()):
    """A finished run with these per-call losses (one step time per call)."""
    cfg = BASE.replace(batch_size=batch, steps_per_execution=spe, steps=len(losses) * spe)
    return RunResult(config=cfg, step_times_s=[0.1] * len(losses), losses=losses, warmup_losses=warmup,
                     steps_per_call=spe)


def test_the_allowance_is_a_share_of_the_naive_runs_drop_not_of_its_starting_loss():
    # A short rung near ln 10: the naive run drops 2.30 -> 2.20. A candidate at 2.25 kept only half of
    # that drop: 10 % of the *starting* loss (0.23) let it pass; 10 % of the drop (0.01) does not.
    naive = run_of([2.30, 2.28, 2.25, 2.22, 2.20, 2.20, 2.20, 2.20])
    half = run_of([2.30, 2.29, 2.28, 2.27, 2.26, 2.25, 2.25, 2.25])
    v = judge(half, naive, steps=8, tolerance=0.1)
    assert not v.passed and v.drop == pytest.approx(0.10) and v.allowance == pytest.approx(0.01)
    assert "it achieved 50% of that drop" in v.reason
    close = run_of([2.30, 2.28, 2.25, 2.22, 2.20, 2.20, 2.21, 2.209])     # 91 % of the drop
    assert judge(close, naive, steps=8, tolerance=0.1).passed
    # Final losses near zero: a +50 % relative difference is 0.005 in loss, far inside 10 % of a 2.0 drop.
    near_zero = FakeRunner(end_loss_fn=lambda cfg: 0.015 if cfg.cache else 0.01)
    r = sweep(BASE, SPACE, min_steps=40, rungs=1, runner=near_zero)
    assert not any(t.status == WORSE for t in r.trials) and r.winner.label == "prefetch, cache"


def test_when_the_naive_run_did_not_drop_the_allowance_is_zero_and_the_summary_says_so():
    flat = run_of([2.30, 2.31, 2.30, 2.31])
    v = judge(run_of([2.30, 2.31, 2.30, 2.32]), flat, steps=4, tolerance=0.1)
    assert not v.passed and v.flat and v.allowance == 0.0 and "did not drop" in v.reason
    at_or_below = judge(run_of([2.30, 2.30, 2.30, 2.30]), flat, steps=4, tolerance=0.1)
    assert at_or_below.passed and at_or_below.flat and "allowance is zero" in at_or_below.reason
    stuck_losses = lambda cfg, observers=(): RunResult(           # noqa: E731 - every loss 2.3, cache 2.31
        config=cfg, step_times_s=[step_time(cfg)] * cfg.steps, losses=[2.31 if cfg.cache else 2.3] * cfg.steps)
    r = sweep(BASE, SPACE, min_steps=6, rungs=2, runner=stuck_losses)
    assert r.flat_rungs == (0, 1) and all(t.status == WORSE for t in r.trials if t.config.cache)
    assert "At rung 1 (6 steps), rung 2 (18 steps) the naive run's loss did not drop" in r.summary()
    assert r.to_dict()["flat_rungs"] == [1, 2] and "allowance is zero" in r.to_dict()["loss_rule"]


def test_a_larger_batch_is_compared_after_as_many_examples_not_as_many_steps():
    # Loss falls with examples seen, the same for every batch: batch 256 after 8 steps saw 4x the examples.
    def by_examples(batch, steps, spe=1):
        return run_of([3.0 - 0.0005 * (i + 1) * batch * spe for i in range(steps // spe)], batch, spe)
    naive = by_examples(64, 8)
    big = by_examples(256, 8)
    v = judge(big, naive, steps=8, tolerance=0.1)
    assert v.examples == 512 and abs(v.loss - v.reference) < v.allowance and v.passed
    # A batch-256 run that learns half as much per example is pruned, though after 8 steps (2,048
    # examples) its loss is below the naive run's after 8 steps (512): compared step for step it passed.
    slow = run_of([3.0 - 0.00025 * (i + 1) * 256 for i in range(8)], 256)
    assert slow.final_loss() < naive.final_loss()
    assert not judge(slow, naive, steps=8, tolerance=0.1).passed
    # Several steps per call: compared at a whole number of calls of both.
    v = judge(by_examples(64, 8, spe=4), naive, steps=8, tolerance=0.1)
    assert v.examples == 512 and v.passed


def test_failed_and_diverged_runs_are_pruned_with_their_error():
    runner = FakeRunner(fail_if=lambda cfg: cfg.jit_compile,
                        end_loss_fn=lambda cfg: math.nan if cfg.cache and not cfg.prefetch else 1.0)
    r = sweep(BASE, SPACE, min_steps=6, rungs=2, runner=runner)
    by = {t.label: t for t in r.trials}
    assert by["jit_compile"].status == FAILED and "out of memory" in by["jit_compile"].reason[0]
    assert by["cache"].status == WORSE and "not finite" in by["cache"].reason[0]
    assert r.winner.label == "prefetch, cache"


def test_the_final_comparison_calls_near_equal_finalists_tied():
    near = FakeRunner(time_fn=lambda cfg: step_time(cfg.replace(jit_compile=False)) * (1.02 if cfg.jit_compile else 1))
    r = sweep(BASE, SPACE, min_steps=6, eta=2, rungs=2, runner=near)
    assert r.winner.label == "prefetch, cache"
    tied = [t.label for t in r.tied]
    assert tied == ["prefetch, cache, jit_compile"]
    assert "tied with the winner" in r.tied[0].reason[1]
    others = [t for t in r.finalists if t is not r.winner and t not in r.tied]
    assert all("the winner is" in t.reason[1] for t in others)
    assert all(t.status == FINALIST for t in r.finalists[1:])


def test_a_winner_slower_than_the_naive_run_says_to_keep_the_naive_configuration():
    # The naive configuration looks slow in short runs only (a noisy start), so it is pruned early.
    noisy = FakeRunner(time_fn=lambda cfg: 0.05 if cfg.label == "naive" and cfg.steps > 6 else step_time(cfg) + 0.1)
    r = sweep(BASE, {"prefetch": [False, True]}, min_steps=6, eta=2, rungs=2, runner=noisy)
    assert r.winner.label == "prefetch" and r.speedup.verdict == "slower"
    assert "keep the naive configuration" in r.summary()


def test_when_the_naive_run_fails_nothing_is_judged():
    r = sweep(BASE, SPACE, min_steps=6, rungs=2, runner=FakeRunner(fail_if=lambda cfg: cfg.label == "naive"))
    assert r.error and "the naive run did not finish" in r.error and r.winner is None
    assert "The sweep stopped" in r.summary()


def test_bad_search_settings_raise_naming_the_setting():
    for kw, name in (({"eta": 1}, "eta"), ({"rungs": 0}, "rungs"), ({"min_steps": 0}, "min_steps"),
                     ({"loss_tolerance": -0.1}, "loss_tolerance")):
        with pytest.raises(ValueError, match=name):
            sweep(BASE, SPACE, runner=FakeRunner(), **kw)


# -- history, interrupt, resume --------------------------------------------------------------------------
def test_every_run_is_in_the_history_and_resume_reuses_them(tmp_path):
    path = tmp_path / "runs.jsonl"
    first = sweep(BASE, SPACE, min_steps=6, rungs=2, runner=FakeRunner(), history=path)
    assert len(load_results(path)) == first.runs
    with pytest.raises(ValueError, match="already holds .* runs; pass resume=True"):
        sweep(BASE, SPACE, min_steps=6, rungs=2, runner=FakeRunner(), history=path)
    untouched = FakeRunner(fail_if=lambda cfg: pytest.fail(f"ran {cfg.label} again"))
    again = sweep(BASE, SPACE, min_steps=6, rungs=2, runner=untouched, history=path, resume=True)
    assert again.runs == 0 and again.reused == first.runs and again.winner.label == first.winner.label


@pytest.mark.parametrize("how", ["sigint", "stop_button", "keyboard_interrupt"])
def test_an_interrupted_sweep_keeps_every_finished_run_and_resumes(tmp_path, how):
    # sigint: a real Ctrl-C, landing where a KeyboardInterrupt would be lost; stop_button: another
    # thread sets the sweep's StopFlag; keyboard_interrupt: a runner that lets one through.
    path = tmp_path / "runs.jsonl"
    kw = {"sigint": {"sigint_at": (5, 3)}, "stop_button": {"stop_at": (5, 3)},
          "keyboard_interrupt": {"interrupt_at": 5}}[how]
    handler = signal.getsignal(signal.SIGINT)
    runner = FakeRunner(**kw)
    stopped = sweep(BASE, SPACE, min_steps=6, rungs=2, runner=runner, history=path)
    assert stopped.interrupted and stopped.winner is None and stopped.runs == 4
    assert len(runner.configs) == 5                          # the fifth run was stopped, and nothing after it
    assert len(load_results(path)) == 4                      # the four finished runs, not the fifth
    assert signal.getsignal(signal.SIGINT) is handler        # the sweep's bridge is disarmed
    assert "interrupted" in stopped.summary() and str(path) in stopped.summary()
    rest = FakeRunner()
    done = sweep(BASE, SPACE, min_steps=6, rungs=2, runner=rest, history=path, resume=True)
    full = sweep(BASE, SPACE, min_steps=6, rungs=2, runner=FakeRunner())
    assert done.finished and done.reused == 4 and len(rest.configs) == full.runs - 4
    assert done.winner.label == full.winner.label
    assert len(load_results(path)) == full.runs


def test_a_stop_flag_set_before_a_run_ends_the_sweep_without_running_it(tmp_path):
    flag = StopFlag()
    flag.set()
    runner = FakeRunner()
    r = sweep(BASE, SPACE, min_steps=6, rungs=2, runner=runner, history=tmp_path / "runs.jsonl", stop=flag)
    assert r.interrupted and r.runs == 0 and runner.configs == [] and r.naive is None
    assert "interrupted" in r.summary()


def test_the_runner_gets_the_stop_flag_and_a_step_progress_observer():
    seen = []

    def runner(cfg, observers):
        seen.append([type(o).__name__ for o in observers])
        return FakeRunner()(cfg, observers)

    flag = StopFlag()
    sweep(BASE, {"prefetch": [False, True]}, min_steps=3, rungs=1, runner=runner, stop=flag,
          progress=lambda p: None)
    assert seen and all(names == ["StopFlag", "Progress"] for names in seen)
    sweep(BASE, {"prefetch": [False, True]}, min_steps=3, rungs=1, runner=runner)
    assert seen[-1] == ["StopFlag"]                            # no progress asked: no Progress observer


# -- progress and output ---------------------------------------------------------------------------------
def test_progress_reports_runs_and_steps_and_ends_finished():
    events = []
    r = sweep(BASE, SPACE, min_steps=6, rungs=2, runner=FakeRunner(), progress=events.append)
    assert all(isinstance(e, SweepProgress) for e in events)
    done = [e.runs_done for e in events]
    assert done == sorted(done) and events[-1].finished and events[-1].runs_done == r.runs
    assert all(e.runs_planned >= e.runs_done for e in events)
    first = next(e for e in events if e.step == 3)
    assert first.text() == "run 1/11, the naive reference (18 steps): naive: step 3/19"
    mid = next(e for e in events if e.step == 3 and e.rung == 0)
    assert re.fullmatch(r"run \d+/\d+, rung 1/2 \(6 steps\): .+: step 3/7", mid.text())
    assert 0 < mid.fraction < 1


def test_result_table_markdown_html_json_and_explanation():
    r = sweep(BASE, SPACE, min_steps=6, rungs=2, runner=FakeRunner())
    rows = r.rows()
    assert len(rows) == len(r.trials) and rows[0]["candidate"] == r.winner.label
    md = r.markdown(DESCRIBED["binder-2core-avx2"], charts=(("by rung", "rungs.png"),))
    for t in r.trials:
        assert f"| {t.label} |" in md
    assert "![by rung](rungs.png)" in md and "## Why the winner wins" in md
    assert "<table" in r.html() and r.winner.label in r.html() and r._repr_html_() == r.html()
    assert repr(r) == f"<SweepResult: {r.summary()}>" and "\n" not in repr(r).split(": ", 1)[0]
    data = json.loads(json.dumps(r.to_dict()))
    assert data["winner"] == "prefetch, cache" and data["winner_changes"] == {"prefetch": True, "cache": True}
    why = r.explain(DESCRIBED["binder-2core-avx2"])
    assert len(why) == 3 and all("Expected:" in line and "Measured:" in line for line in why)
    assert why[0].startswith("prefetch=True") and "against 'cache'" in why[0]
    assert why[2].startswith("jit_compile=True instead") and "against the winner" in why[2]
    assert "Measured: 1.30x slower" in why[2]                  # the fake machine's XLA cost
    plain = r.explain()                                        # measurements only
    assert [line.split(" (")[0] for line in plain] == ["prefetch=True", "cache=True", "jit_compile=True instead"]
    assert all("measured" in line and "Expected" not in line for line in plain)


def test_exhaustive_grid_runs_every_candidate_once_at_full_length():
    runner = FakeRunner()
    g = exhaustive(BASE, SPACE, steps=20, runner=runner)
    assert g.best.label == "prefetch, cache" and {c.steps for c in runner.configs} == {20}
    assert len(runner.configs) == 8


def test_charts_draw_every_stage_and_a_message_when_nothing_finished():
    from matplotlib.figure import Figure

    from tfwb.ui.charts.candidates import draw_finalists, draw_rungs, finalists_png, rungs_png

    runner = FakeRunner(fail_if=lambda cfg: cfg.jit_compile,
                        end_loss_fn=lambda cfg: 2.0 if cfg.prefetch and not cfg.cache else 1.0)
    r = sweep(BASE, SPACE, min_steps=6, rungs=2, runner=runner)
    assert rungs_png(r)[:4] == b"\x89PNG" and finalists_png(r)[:4] == b"\x89PNG"
    # A busy machine's verdict is long; the finalists chart still lays out (matplotlib warned
    # "constrained_layout not applied" and drew no bars when the label carried the whole text).
    busy = dataclasses.replace(r, speedup=stats.compare([0.16] * 20, [0.14] * 20, other_cpu_pct=(60.0, 65.0)))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert finalists_png(busy)[:4] == b"\x89PNG"
    ax = Figure().subplots()
    draw_rungs(ax, r)
    assert [t.get_text() for t in ax.get_xticklabels()] == ["rung 1\n6 steps", "rung 2\n18 steps"]
    assert any("winner: prefetch, cache" in t.get_text() for t in ax.texts)
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert {"winner", "pruned: slower", "pruned: trains worse", "failed", "naive (one run of 18 steps)"} <= set(legend)
    stopped = sweep(BASE, SPACE, min_steps=6, rungs=2, runner=FakeRunner(interrupt_at=2))
    ax = Figure().subplots()
    draw_finalists(ax, stopped)
    assert not ax.axison and "interrupted" in ax.texts[0].get_text()


def test_chart_labels_wrap_between_words_only():
    from tfwb.ui.charts.candidates import wrap_label

    label = "prefetch, parallel_map, mixed_precision=mixed_bfloat16, jit_compile"
    lines = wrap_label(label, 30).split("\n")
    assert lines == ["prefetch, parallel_map,", "mixed_precision=mixed_bfloat16,", "jit_compile"]
    assert " ".join(lines) == label                     # every word whole


def test_the_plan_estimates_the_search_from_a_step_time():
    p = plan(BASE.replace(warmup_steps=2), {"prefetch": [False, True]}, min_steps=10, eta=3, rungs=2)
    # naive 2 + 30 steps; rung 1: 2 x (2 + 10); rung 2: 1 x (2 + 30); 4 runs of 1 s setup.
    assert p.estimate_s(0.1, setup_s=1.0) == pytest.approx(0.1 * (32 + 24 + 32) + 4.0)
    big = plan(BASE.replace(warmup_steps=0), {"batch_size": [64, 256]}, min_steps=10, eta=2, rungs=1)
    assert big.estimate_s(0.1) == pytest.approx(0.1 * (10 + 10 * 1 + 10 * 4))   # batch 256: 4x a step
    with pytest.raises(ValueError, match="step_s"):
        p.estimate_s(0)


def test_fit_plan_leaves_knobs_out_in_order_until_the_estimate_fits_the_budget():
    space = {"prefetch": [False, True], "cache": [False, True], "jit_compile": [False, True]}
    base = BASE.replace(warmup_steps=0)
    whole = plan(base, space, min_steps=10, rungs=1)
    assert whole.estimate_s(0.1) == pytest.approx(9.0)                  # naive + 8 candidates, 10 steps each
    p, dropped = fit_plan(base, space, 5.0, 0.1, drop=("jit_compile", "cache"), min_steps=10, rungs=1)
    assert dropped == ("jit_compile",) and set(p.space) == {"prefetch", "cache"} and p.estimate_s(0.1) <= 5.0
    p, dropped = fit_plan(base, space, 2.0, 0.1, drop=("jit_compile", "cache", "prefetch"), min_steps=10, rungs=1)
    assert dropped == ("jit_compile", "cache") and set(p.space) == {"prefetch"}     # one knob always stays
    p, dropped = fit_plan(base, space, 100.0, 0.1, drop=("jit_compile",), min_steps=10, rungs=1)
    assert dropped == () and p.space == whole.space
    with pytest.raises(ValueError, match="budget_s"):
        fit_plan(base, space, 0, 0.1)


def test_notebook_progress_bar_follows_the_sweep():
    from tfwb.ui.sweep_progress import STEPS, SweepProgressBar

    bar = SweepProgressBar()
    sweep(BASE, {"prefetch": [False, True]}, min_steps=3, rungs=1, runner=FakeRunner(), progress=bar)
    assert bar.bar.value == STEPS and bar.bar.bar_style == "success" and bar.text.value == "done: 2 runs"
    bar = SweepProgressBar()
    sweep(BASE, SPACE, min_steps=3, rungs=2, runner=FakeRunner(interrupt_at=3), progress=bar)
    assert bar.bar.bar_style == "danger" and bar.text.value.startswith("interrupted: 2 runs")


def test_one_run_recorder_keeps_the_sweeps_runs_of_full_length_and_every_run_of_the_tune(tmp_path):
    from tfwb import interrupts, lifecycle
    from tfwb.search.recorder import INTERRUPTED, RunRecorder, Stopped

    assert INTERRUPTED == "interrupted by the user" and lifecycle.INTERRUPTED is interrupts.INTERRUPTED
    for resumable, kept in ((True, 0), (False, 1)):     # the sweep's policy, then the tune's
        store = History(tmp_path / f"{resumable}.jsonl")
        rec = RunRecorder(FakeRunner(stop_at=(1, 2)), store, StopFlag(), resumable=resumable)
        with pytest.raises(Stopped):
            rec.run(BASE.replace(steps=4), [rec.flag])  # a Stop click during the run: cut short
        assert rec.made == kept and len(store.load()) == kept
        with pytest.raises(Stopped):
            rec.run(BASE.replace(steps=4), [rec.flag])  # stopped between runs: nothing runs
        assert rec.made == kept
    rec = RunRecorder(FakeRunner(), None, StopFlag(), resumable=True)
    assert rec.run(BASE.replace(steps=4), [rec.flag]).ok and rec.made == 1


def test_import_tfwb_exports_the_sweep_function():
    from tfwb.tf.lab.sweep import sweep             # the search with tfwb.run handed in
    assert tfwb.sweep is sweep and "sweep" in tfwb.__all__


# -- the command line --------------------------------------------------------------------------------------
def exit_code_and_err(capsys, argv, runner=None):
    with pytest.raises(SystemExit) as exc:
        main(argv, runner=runner)
    return exc.value.code, " ".join(capsys.readouterr().err.split())


def test_parse_knob_spells_values_as_the_options_do():
    assert parse_knob("--cache=off,memory") == ("cache", (False, True))
    assert parse_knob("steps-per-execution=1,4") == ("steps_per_execution", (1, 4))
    assert parse_knob("clip=none,global_norm:1") == ("clip", (None, "global_norm:1"))


@pytest.mark.parametrize("argv, words", [
    (["--knob", "prefetch=maybe"], ["'maybe' is not allowed", "prefetch takes true or false"]),
    (["--knob", "mixed-precision=off,fp8"], ["'fp8' is not allowed", "off, mixed_float16, mixed_bfloat16"]),
    (["--knob", "bogus=1,2"], ["unknown knob 'bogus'", "prefetch", "jit_compile"]),
    (["--knob", "seed=0,1"], ["seed cannot be swept"]),
    (["--knob", "prefetch"], ["write NAME=V1,V2"]),
    (["--knob", "prefetch=true", "--knob", "prefetch=false"], ["--knob prefetch is given twice"]),
    (["--workload", "mlp", "--knob", "interleave=true"], ["'interleave' does not apply to workload 'mlp'"]),
    (["--eta", "1"], ["--eta 1 is not allowed"]),
    (["--resume", "--force", "--out", "x"], ["--force and --resume"]),
])
def test_bad_sweep_options_exit_2_naming_what_is_allowed(capsys, argv, words):
    runner = FakeRunner(fail_if=lambda cfg: pytest.fail("nothing may run"))
    code, err = exit_code_and_err(capsys, ["sweep", *argv], runner)
    assert code == 2
    for w in words:
        assert w in err, (w, err)
    assert "Traceback" not in err


def test_sweep_help_lists_every_knob_and_its_allowed_values(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["sweep", "--help"])
    assert exc.value.code == 0
    out = "".join(capsys.readouterr().out.split())
    for name, k in KNOBS.items():
        assert "".join(option(name).split()) in out, name
        assert "".join(f"Allowed: {allowed_text(k)}.".split()) in out, name
    assert "--knobNAME=V1,V2" in out and "Without--knobthesweepsearches:prefetch=false,true" in out


def test_out_folder_refused_when_not_empty_unless_force(tmp_path, capsys):
    out = tmp_path / "sweep"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    argv = ["sweep", "--size", "small", "--knob", "prefetch=false,true", "--rungs", "1", "--min-steps", "3",
            "--out", str(out)]
    code, err = exit_code_and_err(capsys, argv, FakeRunner(fail_if=lambda cfg: pytest.fail("ran")))
    assert code == 2 and "exists and is not empty" in err and "--force" in err and "--resume" in err
    (tmp_path / "file").write_text("")
    code, err = exit_code_and_err(capsys, argv[:-1] + [str(tmp_path / "file")])
    assert code == 2 and "is a file, not a folder" in err
    runner = FakeRunner()
    assert main(argv + ["--force"], runner=runner) == 0
    assert (out / "notes.txt").read_text() == "mine"                  # --force replaces only its own files
    assert sorted(os.listdir(out)) == sorted(OUT_FILES + ("notes.txt",))
    assert len(load_results(out / "runs.jsonl")) == len(runner.configs) == 2
    report = (out / "report.md").read_text()
    assert "Winner: prefetch" in report and "![Every candidate by rung](rungs.png)" in report
    assert (out / "rungs.png").read_bytes()[:4] == b"\x89PNG"
    printed = capsys.readouterr().out
    assert "Winner: prefetch" in printed and "report.md" in printed
    assert "Trains correctly: the run finished and, after as many training examples" in printed
    assert "90% of the naive run's drop" in printed and "allowance is zero" in printed


def test_ctrl_c_keeps_the_runs_and_resume_goes_on(tmp_path, capsys):
    out = tmp_path / "sweep"
    argv = ["sweep", "--size", "small", "--warmup-steps", "1", "--knob", "prefetch=false,true",
            "--knob", "cache=off,memory", "--rungs", "2", "--min-steps", "3", "--out", str(out)]
    assert main(argv, runner=FakeRunner(interrupt_at=3)) == 130
    err = capsys.readouterr().err
    assert "interrupted after 2 runs" in err and "--resume" in err
    assert len(load_results(out / "runs.jsonl")) == 2
    rest = FakeRunner()
    assert main(argv + ["--resume"], runner=rest) == 0
    assert len(load_results(out / "runs.jsonl")) == 2 + len(rest.configs)
    assert (out / "report.md").exists()


def test_the_drawer_redraws_one_line_on_a_tty_and_writes_a_line_per_run_elsewhere():
    import io

    tty, log = io.StringIO(), io.StringIO()
    bars = Drawer(tty, tty=True).sweep(), Drawer(log, tty=False).sweep()
    sweep(BASE, {"prefetch": [False, True]}, min_steps=3, rungs=1, runner=FakeRunner(),
          progress=lambda p: [b(p) for b in bars])
    assert "\r" in tty.getvalue() and tty.getvalue().endswith("\n")
    lines = log.getvalue().splitlines()
    assert "\r" not in log.getvalue() and lines[-1].startswith("[") and lines[-1].endswith("done: 2 runs")
    assert len(lines) == 3            # after each of the 2 runs, and the end


# -- one tiny real sweep ----------------------------------------------------------------------------------
def test_a_tiny_real_sweep_in_small_mode(tmp_path):
    path = tmp_path / "runs.jsonl"
    base = RunConfig(workload="mlp", size="small", warmup_steps=1, batch_size=32)
    r = tfwb.sweep(base, {"steps_per_execution": [1, 2]}, min_steps=4, eta=2, rungs=2, history=path)
    assert r.finished, r.summary()
    assert r.winner is not None and r.speedup is not None
    results = load_results(path)
    # rung 1: both; rung 2: the faster one, and the naive run when that is not it.
    assert len(results) == r.runs in (3, 4) and all(res.ok for res in results)
    assert {res.config.steps for res in results} == {4, 8}
    assert all(res.final_loss() < 2.5 for res in results)
