"""Tests of tfwb.keras.Monitor: tfwb's measurements inside model.fit (tiny Dense model, a few dozen steps)."""
from __future__ import annotations

import math

import numpy as np
import pytest

keras = pytest.importorskip("keras")
tf = pytest.importorskip("tensorflow")

import tfwb  # noqa: E402
from tfwb import report  # noqa: E402
from tfwb.keras import Monitor  # noqa: E402
from tfwb.keras.monitor import _call_losses  # noqa: E402


def data(rows: int = 320, batch: int = 16):
    x = np.random.default_rng(0).normal(size=(rows, 4)).astype("float32")
    y = (x[:, 0] > 0).astype("int32")
    return tf.data.Dataset.from_tensor_slices((x, y)).batch(batch)


def model(spe: int = 1):
    keras.utils.set_random_seed(0)
    m = keras.Sequential([keras.Input((4,)), keras.layers.Dense(8, activation="relu"), keras.layers.Dense(2)],
                         name="tiny")
    m.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True), steps_per_execution=spe)
    return m


def test_a_fit_gives_a_result_kept_in_the_history_and_compared_as_workbench_runs(tmp_path):
    path = tmp_path / "runs.jsonl"
    results = []
    for label in ("a", "b"):
        mon = Monitor(path, label=label, charts=False, warmup_steps=3)
        history = model().fit(data(), epochs=2, verbose=0, callbacks=[mon])
        r = mon.result
        assert r.status == "ok" and r.config.label == label and r.config.workload == "fit:tiny"
        assert len(r.warmup_times_s) == 3 and len(r.step_times_s) == 40 - 3      # 20 steps/epoch, 2 epochs
        assert r.config.batch_size == 16 and r.config.optimizer == "adam" and r.config.timing == "windowed"
        assert all(t > 0 for t in r.step_times_s) and r.samples and r.fingerprint["keras"] == keras.__version__
        assert r.window_calls and sum(r.window_calls) == len(r.step_times_s)
        # each call's loss recovered from Keras's running mean: the epoch's mean matches Keras's
        losses = r.warmup_losses + r.losses
        assert all(math.isfinite(v) for v in losses)
        assert np.mean(losses[20:]) == pytest.approx(history.history["loss"][1], rel=1e-3)
        results.append(r)
    loaded = tfwb.load_results(path)
    assert [x.run_id for x in loaded] == [x.run_id for x in results] and loaded[0] == results[0]
    assert report.compare_runs(loaded[0], loaded[1]) is not None


def test_steps_per_execution_divides_each_call_by_its_steps_and_leaves_short_calls_out():
    mon = Monitor(charts=False, warmup_steps=1)
    model(spe=6).fit(data(), epochs=1, verbose=0, callbacks=[mon])    # 20 steps: calls of 6, 6, 6 and 2
    r = mon.result
    assert r.steps_per_call == 6 and len(r.warmup_times_s) == 1 and len(r.step_times_s) == 2
    assert any("fewer steps" in n for n in r.notes_of("steps"))
    calls = [{"epoch": 0, "end_step": 1, "steps": 2}, {"epoch": 0, "end_step": 3, "steps": 2}]
    assert _call_losses(calls, {(0, 1): 4.0, (0, 3): 3.0}, 2) == [4.0, 2.0]   # (4*3 - 2*4) / 2


def test_an_interrupted_fit_ends_after_its_call_and_is_recorded_as_interrupted(tmp_path):
    path = tmp_path / "runs.jsonl"
    mon = Monitor(path, charts=False, warmup_steps=1)

    class Interrupt(keras.callbacks.Callback):      # what SIGINT does: the bridge calls the Monitor
        def on_train_batch_begin(self, batch, logs=None):
            if batch == 5:
                mon._on_interrupt()

    model().fit(data(), epochs=3, verbose=0, callbacks=[mon, Interrupt()])
    r = mon.result
    assert r.status == "interrupted" and r.stop_reason == "interrupted by the user"
    assert 5 <= r.steps_done <= 7 and "after" in r.error
    planned = 3 * mon.params["steps"]                 # fit was asked for 3 epochs: the stop says how far it had to go
    assert r.error.endswith(f"of {planned} steps"), r.error
    assert tfwb.load_results(path)[0].status == "interrupted"


def test_an_unwritable_history_fails_before_the_first_step(tmp_path):
    (tmp_path / "a_file").write_text("not a folder")
    m = model()
    before = [w.copy() for w in m.get_weights()]
    with pytest.raises(ValueError, match="history_path=.*a_file.*cannot be written"):
        m.fit(data(), epochs=1, verbose=0, callbacks=[Monitor(tmp_path / "a_file" / "r.jsonl", charts=False)])
    assert all((a == b).all() for a, b in zip(before, m.get_weights()))


def test_a_history_folder_that_does_not_exist_yet_is_created(tmp_path):
    """A chapter opened first in a fresh clone: tfwb-runs/ is gitignored, so nothing made it yet."""
    path = tmp_path / "tfwb-runs" / "08.jsonl"
    model().fit(data(), epochs=1, verbose=0, callbacks=[Monitor(path, charts=False)])
    assert [r.status for r in tfwb.load_results(path)] == ["ok"]


def test_predict_and_evaluate_say_the_monitor_measures_nothing_there():
    m = model()
    mon = Monitor(charts=False)
    with pytest.warns(UserWarning, match="model.predict, which does not train"):
        m.predict(data(), verbose=0, callbacks=[mon])
    with pytest.warns(UserWarning, match="model.evaluate, which does not train"):
        m.evaluate(data(), verbose=0, callbacks=[mon])
    assert mon.result is None


def test_validation_inside_fit_is_no_misuse_and_input_rate_compares_the_dataset_alone():
    mon = Monitor(charts=False, dataset=data())
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        warnings.filterwarnings("ignore", message=".*shuffle.*")
        model().fit(data(), validation_data=data(64), epochs=1, verbose=0, callbacks=[mon])
    r = mon.result
    rate = r.extras["input_rate"]
    assert rate["dataset_batches_per_s"] > 0 and rate["verdict"] in ("input-bound", "close to input-bound",
                                                                      "not input-bound")
    assert any("dataset alone delivers" in n for n in r.notes_of("data"))
    assert mon.input_rate(data()).step_batches_per_s == pytest.approx(1 / r.median_step_s)


def test_a_bad_charts_value_is_refused_naming_it():
    with pytest.raises(ValueError, match="charts='yes' is not allowed"):
        Monitor(charts="yes")



def test_the_chart_is_an_image_widget_redrawn_during_fit_and_final_after_it(monkeypatch, capsys):
    """The notebook path (charts=True builds it outside a kernel too): ipywidgets 7 and 8 alike."""
    widgets = pytest.importorskip("ipywidgets")
    from tfwb.keras import monitor as monitor_module

    monkeypatch.setattr(monitor_module, "REDRAW_S", 0.0)     # redraw after every window
    monkeypatch.setattr(monitor_module, "WINDOW_S", 0.0)     # a window per call
    draws = []
    original = monitor_module._ChartView.draw

    def draw(self, r, done, total, final=False):
        original(self, r, done, total, final)
        draws.append((done, final, bytes(self.image.value), self.status.value))

    monkeypatch.setattr(monitor_module._ChartView, "draw", draw)
    mon = Monitor(charts=True, warmup_steps=1)
    model().fit(data(rows=160), epochs=1, verbose=0, callbacks=[mon])   # 10 steps
    view = mon._view
    assert isinstance(view.image, widgets.Image) and isinstance(view.box, widgets.VBox)
    during = [d for d in draws if not d[1]]
    assert len(during) >= 3 and [d[0] for d in during] == sorted(d[0] for d in during)
    assert during[0][3].startswith("fit: step ") and during[0][3].endswith("/10")
    assert all(png.startswith(b"\x89PNG") for _, _, png, _ in draws)
    assert len({png for _, _, png, _ in during}) > 1                  # the picture changed as steps came in
    assert draws[-1][1] and view.status.value == mon.result.summary()
    assert bytes(view.image.value).startswith(b"\x89PNG")
    assert "VBox" in capsys.readouterr().out          # display() outside a kernel prints the widget's repr


def test_a_fit_reports_its_model_flops_and_mfu_as_workbench_runs_do():
    mon = Monitor(charts=False, warmup_steps=1)
    model().fit(data(), epochs=2, verbose=0, callbacks=[mon])
    r = mon.result
    assert r.model_flops_per_step and r.model_flops_per_step > 0 and not r.flops_uncounted
    assert r.mfu is None or r.mfu > 0
    assert r.mfu_text().startswith("MFU")
