"""tfwb.tf.lab.convergence, learning_rates, clipping and held_out: steps and seconds to a target loss,
learning-rate sweeps, clipping's direction, held-out loss; and the optimizer knobs' bad values."""
from __future__ import annotations

import math

import numpy as np
import pytest

from tfwb.config import RunConfig
from tfwb.records import RunResult

tf = pytest.importorskip("tensorflow")
import keras  # noqa: E402

from tfwb.tf.lab import clipping, convergence as cv, held_out as ho, learning_rates as lr  # noqa: E402
from tfwb.tf.runner import train  # noqa: E402
from fakes import registered, tiny_data  # noqa: E402

pytestmark = pytest.mark.tf

TINY = "test-convergence-tiny"
BIG = "test-convergence-big-inputs"
DEAD = "test-convergence-unused-layer"


def big_data(cfg):                                   # inputs 1000x larger: SGD at a high rate blows up
    return tiny_data(cfg).map(lambda x, y: (x * 1000.0, y))


@pytest.fixture(scope="module", autouse=True)
def workloads():
    with registered(TINY), registered(BIG, data_fn=big_data):    # the shared tiny workload (tests/fakes.py)
        yield


@pytest.fixture(autouse=True)
def float32_policy_after():
    yield
    keras.mixed_precision.set_global_policy("float32")


def tiny(**changes) -> RunConfig:
    base = dict(workload=TINY, batch_size=32, steps=20, warmup_steps=2, sample_interval_s=0.05,
                optimizer="adam", learning_rate=0.01)
    base.update(changes)
    return RunConfig(**base)


def no_work(*args, **kwargs):
    raise AssertionError("work started before the bad input was refused")


# -- bad input: refused before any work, naming the field --------------------------------------------
@pytest.mark.parametrize("value", [0, 0.0, -0.01, math.nan, math.inf, "0.01", True])
def test_a_weight_decay_that_is_not_a_positive_finite_number_is_refused_naming_the_field(value):
    with pytest.raises(ValueError, match=r"weight_decay=.* is not allowed; weight_decay must be a finite number > 0"):
        RunConfig(weight_decay=value)


@pytest.mark.parametrize("changes, field", [
    ({"learning_rate": 0}, "learning_rate"), ({"learning_rate": -1.0}, "learning_rate"),
    ({"learning_rate": math.nan}, "learning_rate"), ({"learning_rate": "0.1"}, "learning_rate"),
    ({"optimizer": "lion"}, "optimizer"), ({"clip": "global_norm:0"}, "clip"), ({"clip": "norm:-1"}, "clip"),
])
def test_bad_optimizer_knobs_are_refused_naming_the_field(changes, field):
    with pytest.raises(ValueError, match=field):
        RunConfig(**changes)


@pytest.mark.parametrize("rates", [[], [0.0], [0.1, -1.0], [math.nan], ["0.1"], [100.0]])
def test_lr_sweep_refuses_bad_rates_before_any_work(rates, monkeypatch):
    monkeypatch.setattr(lr, "prepared", no_work)
    monkeypatch.setattr(lr, "build_dataset", no_work)
    with pytest.raises(ValueError, match="rates|learning_rate"):
        lr.lr_sweep(tiny(), rates)


@pytest.mark.parametrize("kwargs, field", [({"steps": 0}, "steps"), ({"tail": 0}, "tail"),
                                           ({"steps": 5, "tail": 6}, "tail")])
def test_lr_sweep_refuses_bad_steps_and_tail(kwargs, field, monkeypatch):
    monkeypatch.setattr(lr, "prepared", no_work)
    with pytest.raises(ValueError, match=field):
        lr.lr_sweep(tiny(), [0.1], **kwargs)


@pytest.mark.parametrize("kwargs, field", [
    ({"target": math.nan}, "target"), ({"target": "1"}, "target"), ({"target": 1.0, "seeds": ()}, "seeds"),
    ({"target": 1.0, "seeds": (0, -1)}, "seed"), ({"target": 1.0, "window": 0}, "window"),
])
def test_to_target_refuses_bad_input_before_any_run(kwargs, field, monkeypatch):
    monkeypatch.setattr(cv, "run", no_work)
    with pytest.raises(ValueError, match=field):
        cv.to_target(tiny(), **kwargs)


@pytest.mark.parametrize("kwargs, field", [({"train_examples": 16}, "train_examples"),
                                           ({"train_examples": 64, "held_out_examples": 0}, "held_out_examples"),
                                           ({"train_examples": 64, "every": 0}, "every")])
def test_held_out_refuses_bad_counts_before_any_run(kwargs, field, monkeypatch):
    monkeypatch.setattr(ho, "run", no_work)
    with pytest.raises(ValueError, match=field):
        ho.held_out(tiny(), **kwargs)


def test_held_out_says_how_many_examples_the_workload_has(monkeypatch):
    monkeypatch.setattr(ho, "run", no_work)
    with pytest.raises(ValueError, match="its data has 512 examples"):
        ho.held_out(tiny(), train_examples=500, held_out_examples=100)


@pytest.mark.parametrize("kwargs", [{"clip_norm": 0}, {"clip_norm": -1.0}, {"clip_value": math.inf}])
def test_clip_directions_refuses_a_threshold_that_is_not_positive(kwargs, monkeypatch):
    monkeypatch.setattr(clipping, "prepared", no_work)
    with pytest.raises(ValueError, match=next(iter(kwargs))):
        clipping.clip_directions(tiny(), **kwargs)


# -- steps and seconds to a target ---------------------------------------------------------------------
@pytest.mark.parametrize("values, q, expected", [
    ((10, 20, 30), 0.5, 20), ((10, None, 30), 0.5, 30), ((10, None, None), 0.5, None),
    ((10, 20, None, None), 0.25, 17.5), ((10, 20, None, None), 0.75, None), ((), 0.5, None),
])
def test_a_seed_that_never_reached_the_target_counts_as_slower_than_every_one_that_did(values, q, expected):
    got = cv._censored_quantile(values, q)
    assert got == (pytest.approx(expected) if expected is not None else None)


def test_to_target_reports_steps_and_seconds_per_seed_with_warm_up_counted():
    runs = cv.to_target(tiny(steps=300), target=0.6, seeds=(0, 1), window=5)
    assert runs.reached == 2 and runs.seeds == (0, 1) and len(runs.results) == 2
    for r, steps, seconds in zip(runs.results, runs.steps, runs.seconds):
        hit = r.extras["target_reached"]
        assert r.ok and r.stop_reason and steps == hit["step"] + 2            # 2 warm-up steps trained too
        # it stopped when the timing window that reached the target closed (the step itself with
        # timing="per_step")
        assert hit["step"] <= len(r.losses) <= 300 and len(r.losses) == sum(r.window_calls)
        assert np.mean(r.losses[hit["step"] - 5:hit["step"]]) <= 0.6 < np.mean((r.warmup_losses + r.losses)[:5])
        assert seconds == pytest.approx(hit["time_s"] + 2 * r.median_step_s)
        assert seconds >= sum(r.step_times_s[:hit["step"] - 1])
    assert runs.median_steps == pytest.approx(np.median(runs.steps))
    assert runs.median_step_s == pytest.approx(np.median(runs.step_times_s))
    assert "2/2 seeds" in runs.text() and runs.row()["reached"] == "2/2"


def test_to_target_never_reached_is_said_so_and_a_diverged_seed_counts_as_not_reached():
    never = cv.to_target(tiny(steps=5), target=-1.0, seeds=(0,))
    assert never.reached == 0 and never.steps == (None,) and never.median_steps is None
    assert "0/1 seeds" in never.text() and "not reached" in never.text()
    blown = cv.to_target(tiny(workload=BIG, optimizer="sgd", learning_rate=10.0, steps=30, warmup_steps=0),
                         target=0.5, seeds=(0,), window=1)
    assert blown.results[0].status == "diverged" and blown.reached == 0
    assert blown.failures and "diverged" in blown.failures[0]


def fake_runs(steps, seconds, cap_steps=100, step_s=0.01, label="x"):
    cfg = RunConfig(workload=TINY, warmup_steps=0, steps=cap_steps, label=label)
    results = tuple(RunResult(cfg, step_times_s=(step_s,) * 5) for _ in steps)
    return cv.TargetRuns(cfg, 1.0, 1, tuple(range(len(steps))), results, tuple(steps), tuple(seconds))


def test_gain_is_a_ratio_of_medians_and_a_lower_bound_when_the_slower_one_never_got_there():
    slow, fast = fake_runs((90, 100, 110), (3.0, 4.0, 5.0)), fake_runs((20, 25, 30), (2.0, 2.0, 2.0))
    assert cv.gain(slow, fast) == pytest.approx(4.0) and cv.gain(slow, fast, "seconds") == pytest.approx(2.0)
    never = fake_runs((None, None, 120), (None, None, 9.0), cap_steps=200, step_s=0.02)
    assert cv.gain(never, fast) == pytest.approx(200 / 25)                 # the cap stands in
    assert cv.gain(never, fast, "seconds") == pytest.approx(200 * 0.02 / 2.0)
    assert cv.gain(fast, never) is None
    with pytest.raises(ValueError, match="what='time'"):
        cv.gain(slow, fast, "time")
    headers, rows = cv.target_table([slow, never])
    assert rows[0][2:5] == ("3/3", "100", "95-105") and rows[1][2:4] == ("1/3", "never")


def test_blew_up_means_diverged_or_a_last_loss_ten_times_the_first():
    cfg = RunConfig(workload=TINY)
    assert cv.blew_up(RunResult(cfg, status="diverged", warmup_losses=(2.0,), losses=(3.0, math.nan)))
    assert cv.blew_up(RunResult(cfg, warmup_losses=(2.0,), losses=(5.0, 25.0)))
    assert not cv.blew_up(RunResult(cfg, warmup_losses=(2.0,), losses=(5.0, 19.0)))
    assert not cv.blew_up(RunResult(cfg, losses=(2.0,)))


# -- learning-rate sweep ----------------------------------------------------------------------------------
def test_each_rate_of_a_sweep_trains_exactly_as_a_fresh_run_with_that_rate():
    cfg = tiny(optimizer="momentum", steps=12, warmup_steps=0)
    sweep = lr.lr_sweep(cfg, [0.3, 0.01], steps=12, tail=4)
    for rate, curve in zip(sweep.rates, sweep.curves):
        fresh = train.run_process(cfg.replace(learning_rate=rate))
        np.testing.assert_allclose(curve, fresh.losses, rtol=1e-5)
    assert sweep.final_losses[1] == pytest.approx(np.median(sweep.curves[1][-4:]))
    assert sweep.first_loss == pytest.approx(sweep.curves[0][0])
    headers, rows = lr.lr_sweep_table([sweep])
    assert rows == [("momentum", f"{sweep.best_rate:g}", f"{sweep.best_loss:.3f}", f"{sweep.first_loss:.3f}", "none")]


def test_a_rate_that_diverges_is_marked_and_the_next_rate_starts_clean():
    cfg = tiny(workload=BIG, optimizer="sgd", steps=15, warmup_steps=0)
    sweep = lr.lr_sweep(cfg, [10.0, 1e-4], tail=3)
    assert sweep.diverged_at[0] is not None and sweep.final_losses[0] is None
    assert not math.isfinite(sweep.curves[0][-1]) and len(sweep.curves[0]) == sweep.diverged_at[0]
    assert sweep.diverged_rates == (10.0,) and sweep.best_rate == 1e-4
    fresh = train.run_process(cfg.replace(learning_rate=1e-4))
    np.testing.assert_allclose(sweep.curves[1], fresh.losses, rtol=1e-5)
    assert sweep.rows()[0][1].startswith("diverged at step")


def test_a_sweep_under_float16_loss_scaling_and_grad_norms_runs_and_restores_the_policy():
    sweep = lr.lr_sweep(tiny(mixed_precision="mixed_float16", grad_norms=True, steps=6, warmup_steps=0),
                        [0.01, 0.001], tail=2)
    assert all(v is not None and math.isfinite(v) for v in sweep.final_losses)
    assert keras.mixed_precision.global_policy().name == "float32"


# -- clipping and direction -----------------------------------------------------------------------------
def test_global_norm_clipping_keeps_the_direction_and_per_tensor_clipping_turns_it():
    d = clipping.clip_directions(tiny())
    glob, per_tensor, value = d.by_kind("global_norm"), d.by_kind("norm"), d.by_kind("value")
    c = float(glob.clip.partition(":")[2])
    assert c == pytest.approx(np.median(list(d.tensor_norms.values())), rel=1e-5)
    assert glob.cosine == pytest.approx(1.0, abs=1e-6) and glob.angle_deg < 0.5
    assert glob.update_norm == pytest.approx(c, rel=1e-4)                  # scaled as a whole to the threshold
    assert per_tensor.cosine < 1 - 1e-4                                    # some tensors shrunk, others not
    assert per_tensor.angle_deg == pytest.approx(math.degrees(math.acos(per_tensor.cosine)))
    above = sum(n > c * (1 + 1e-6) for n in d.tensor_norms.values())
    assert per_tensor.tensors_changed == above and 0 < above < len(d.tensor_norms)
    assert value.cosine < 1 - 1e-4 and value.keras_argument == "clipvalue"
    with pytest.raises(ValueError, match="kind"):
        d.by_kind("l2")


def test_keras_clipnorm_is_tf_clip_by_norm_per_tensor_and_global_clipnorm_is_clip_by_global_norm():
    with train.prepared(tiny(optimizer="sgd", learning_rate=1.0)) as p:
        x, y = p.fetch()
        variables = p.model.trainable_variables
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(keras.losses.sparse_categorical_crossentropy(y, p.model(x), from_logits=True))
        grads = tape.gradient(loss, variables)
        c = float(np.median([float(tf.norm(g)) for g in grads]))
        expected = {"norm": [tf.clip_by_norm(g, c) for g in grads],
                    "global_norm": tf.clip_by_global_norm(grads, c)[0]}
        start = [v.numpy() for v in variables]
        for kind, want in expected.items():
            opt = train.make_optimizer(tiny(optimizer="sgd", learning_rate=1.0, clip=f"{kind}:{c}"))
            opt.apply_gradients(zip(grads, variables))
            for s, v, w in zip(start, variables, want):
                np.testing.assert_allclose(s - v.numpy(), w.numpy(), rtol=1e-4, atol=1e-7)
                v.assign(s)


def test_the_seeds_per_tensor_clip_by_norm_fails_on_a_none_gradient_and_global_norm_skips_it():
    grads = [tf.ones(3), None]                               # a variable the loss does not use
    with pytest.raises(ValueError, match="None"):
        [tf.clip_by_norm(g, 1.0) for g in grads]
    clipped, norm = tf.clip_by_global_norm(grads, 1.0)
    assert clipped[1] is None and float(norm) == pytest.approx(math.sqrt(3))


# -- held-out loss ------------------------------------------------------------------------------------------
def test_held_out_evaluates_both_sets_from_the_start_to_the_end_of_the_run():
    r = ho.held_out(tiny(steps=40, warmup_steps=1), train_examples=64, held_out_examples=128, every=10)
    assert r.ok, r.error
    curves = ho.held_out_curves(r)
    assert curves["steps"] == (0, 10, 20, 30, 40, 41)
    for name in ("train", "held_out"):
        assert len(curves[f"{name}_loss"]) == 6 and all(math.isfinite(v) for v in curves[f"{name}_loss"])
        assert all(0.0 <= a <= 1.0 for a in curves[f"{name}_accuracy"])
    assert curves["train_loss"][-1] < curves["train_loss"][0]           # it trained on those 64
    assert any("given to run()" in n for n in r.notes)
    decayed = ho.held_out(tiny(steps=3, warmup_steps=0, optimizer="adamw"), train_examples=32,
                           held_out_examples=64, every=3)
    l2 = ho.held_out(tiny(steps=3, warmup_steps=0, weight_decay=0.01), train_examples=32,
                      held_out_examples=64, every=3)
    headers, rows = ho.held_out_table([r, decayed, l2])
    assert [row[1] for row in rows] == ["none", "decoupled 0.004", "L2 0.01"]      # adamw's Keras default
    assert rows[0][3] == f"{curves['held_out_loss'][-1]:.3f}" and headers[3] == "held-out loss"


def test_held_out_loss_is_the_mean_loss_of_the_model_on_those_examples():
    seen = {}

    class Keep(cv.Observer):
        def on_run_end(self, run):
            seen["model"] = run.model

    r = ho.held_out(tiny(steps=5, warmup_steps=0), train_examples=64, held_out_examples=100, every=5,
                    observers=[Keep()])
    x, y = (np.asarray(t) for t in next(iter(tiny_data(tiny()).skip(64).batch(100))))
    logits = seen["model"](x, training=False)
    want = float(tf.reduce_mean(keras.losses.sparse_categorical_crossentropy(y, logits, from_logits=True)))
    assert ho.held_out_curves(r)["held_out_loss"][-1] == pytest.approx(want, rel=1e-5)


# -- learning-rate schedules ---------------------------------------------------------------------------
@pytest.mark.parametrize("schedules, field", [({}, "schedules"), ({"bad": lambda step: math.nan}, "bad"),
                                              ({"neg": lambda step: -1.0}, "neg")])
def test_schedule_curves_refuses_bad_schedules_before_any_work(schedules, field, monkeypatch):
    monkeypatch.setattr(lr, "prepared", no_work)
    monkeypatch.setattr(lr, "build_dataset", no_work)
    with pytest.raises(ValueError, match=field):
        lr.schedule_curves(tiny(), schedules)


def test_schedule_curves_follows_each_schedule_from_the_same_start():
    ramp = keras.optimizers.schedules.CosineDecay(0.0, decay_steps=1, alpha=1.0, warmup_target=0.01,
                                                  warmup_steps=4)
    constant, warmed, frozen = lr.schedule_curves(
        tiny(), {"constant": lambda step: 0.01, "warm-up": ramp, "frozen": lambda step: 0.0}, steps=8)
    assert constant.rates == (0.01,) * 8
    assert warmed.rates[0] == 0.0 and warmed.rates[2] == pytest.approx(0.005) and warmed.rates[4:] == (
        pytest.approx(0.01),) * 4
    assert constant.losses[0] == pytest.approx(warmed.losses[0]) == pytest.approx(frozen.losses[0])
    assert constant.losses[1] != pytest.approx(frozen.losses[1])     # the rate reached the optimizer
    assert constant.final_loss(3) == pytest.approx(sorted(constant.losses[-3:])[1])
