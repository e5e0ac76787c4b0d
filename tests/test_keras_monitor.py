"""Tests of tfwb.keras.Monitor: tfwb's measurements inside model.fit (tiny Dense model, a few dozen steps)."""
from __future__ import annotations

import html
import math
import time

import numpy as np
import pytest

keras = pytest.importorskip("keras")
tf = pytest.importorskip("tensorflow")

import tfwb  # noqa: E402
from tfwb.analysis import pairs  # noqa: E402
from tfwb.keras import Monitor  # noqa: E402
from tfwb.fit_result import call_losses  # noqa: E402
from tfwb.render import monitor_line  # noqa: E402
from tfwb.timing import CallTiming  # noqa: E402
from tfwb.ui import fit_view  # noqa: E402


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
    assert len(path.read_text().splitlines()) == 4            # each fit: its start, then its end in its place
    assert pairs.compare_runs(loaded[0], loaded[1]) is not None


def test_steps_per_execution_divides_each_call_by_its_steps_and_leaves_short_calls_out():
    mon = Monitor(charts=False, warmup_steps=1)
    model(spe=6).fit(data(), epochs=1, verbose=0, callbacks=[mon])    # 20 steps: calls of 6, 6, 6 and 2
    r = mon.result
    assert r.steps_per_call == 6 and len(r.warmup_times_s) == 1 and len(r.step_times_s) == 2
    assert r.config.batch_size == 16                  # the first call's 96 examples over its 6 steps
    assert any("fewer steps" in n for n in r.notes_of("steps"))
    calls = [CallTiming(0.0, 0.1, 0.1, epoch=0, end_step=1, steps=2),
             CallTiming(0.1, 0.1, 0.1, epoch=0, end_step=3, steps=2)]
    assert call_losses(calls, {(0, 1): 4.0, (0, 3): 3.0}, 2) == [4.0, 2.0]   # (4*3 - 2*4) / 2


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
    monkeypatch.setattr(monitor_module, "VIEW_SHARE", 1.0)   # no budget: every chance is a chart
    draws = []
    original = fit_view.ChartView.draw

    def draw(self, r, done, total, final=False):
        original(self, r, done, total, final)
        draws.append((done, final, bytes(self.image.value), self.status.value))

    monkeypatch.setattr(fit_view.ChartView, "draw", draw)
    mon = Monitor(charts=True, warmup_steps=1)
    model().fit(data(rows=160), epochs=1, verbose=0, callbacks=[mon])   # 10 steps
    view = mon._view
    assert isinstance(view.image, widgets.Image) and isinstance(view.box, widgets.VBox)
    during = [d for d in draws if not d[1]]
    assert len(during) >= 3 and [d[0] for d in during] == sorted(d[0] for d in during)
    assert during[0][3].startswith("fit: step ") and during[0][3].endswith("/10")
    assert all(svg.startswith(b"<svg") and svg.endswith(b"</svg>") for _, _, svg, _ in draws)
    assert len({svg for _, _, svg, _ in during}) > 1                  # the picture changed as steps came in
    r = mon.result
    assert draws[-1][1] and view.status.value.startswith(html.escape(r.summary()))
    assert b"median" in draws[-1][2] and b"tiny: ms per step" in draws[-1][2]
    assert r.extras["view_charts"] == len(draws) and r.extras["view_s"] > 0
    assert view.image.format == "svg+xml" and not view.full.disabled
    view.full.click()                                  # after the fit, on request: the Workbench's run chart
    assert view.image.format == "png" and bytes(view.image.value).startswith(b"\x89PNG")
    assert "VBox" in capsys.readouterr().out          # display() outside a kernel prints the widget's repr


class SlowView:
    """A live view whose chart takes ``cost_s`` (a sleep); its progress text is free."""

    first_draw_s = 0.03

    def __init__(self, cost_s: float = 0.03) -> None:
        self.cost_s, self.draws, self.updates, self.drawn_s, self.took = cost_s, [], 0, 0.0, []

    def draw(self, r, done, total, final=False):
        t = time.perf_counter()
        time.sleep(self.cost_s)
        self.draws.append(final)
        self.took.append(time.perf_counter() - t)
        self.drawn_s += self.took[-1]

    def progress(self, done, total, final=None):
        self.updates += 1


class Pace(keras.callbacks.Callback):
    """Holds every step to at least ``step_s`` of wall time (a sleep after it), whatever the CPU."""

    def __init__(self, step_s: float) -> None:
        super().__init__()
        self.step_s = step_s

    def on_train_batch_end(self, batch, logs=None):
        time.sleep(self.step_s)


def test_a_slow_live_view_is_held_to_its_share_of_the_fit_and_its_time_is_recorded(monkeypatch):
    """Redraws offered after every window (0.1 s): a 30 ms chart each time would take ~25 % of the fit."""
    from tfwb.keras import monitor as monitor_module

    monkeypatch.setattr(monitor_module, "REDRAW_S", 0.0)
    view = SlowView()
    monkeypatch.setattr(fit_view, "make_view", lambda charts, stream: view)
    mon = Monitor(charts=True, warmup_steps=2)
    # 600 steps of at least 3 ms each, on any CPU (a fast one trains this model in under a second):
    # long enough for the budget to allow charts
    model().fit(data(rows=16 * 300), epochs=2, verbose=0, callbacks=[Pace(0.003), mon])
    r = mon.result
    share = r.extras["view_share"]
    assert r.extras["fit_wall_s"] > 1.5, r.extras
    assert 1 <= len(view.draws) < view.updates                # charts held back: progress text instead
    assert r.extras["view_charts"] == len(view.draws) and r.extras["view_updates"] == view.updates
    assert r.extras["view_s"] >= view.drawn_s and share == pytest.approx(r.extras["view_s"] / r.extras["fit_wall_s"])
    # The budget admits a draw while the share so far is under it, so the draw it admits last can carry the
    # share past it by its own cost (a sleep overruns on a loaded machine: 4.4 % was read beside other tests),
    # and the final draw comes whatever the budget: beyond the budget by at most those two draws.
    two_draws = sum(sorted(view.took)[-2:]) / r.extras["fit_wall_s"]
    assert share <= monitor_module.VIEW_SHARE * 1.15 + two_draws, (r.extras, view.took)
    assert any(n.startswith("other: the live view took") for n in r.notes_of("other"))


def test_a_view_that_slows_the_fit_shows_in_its_wall_clock_rate_and_a_note_says_why(monkeypatch):
    """Without the budget the chart costs the fit its rate: the result says so instead of hiding it."""
    from tfwb.keras import monitor as monitor_module

    monkeypatch.setattr(monitor_module, "REDRAW_S", 0.0)
    monkeypatch.setattr(monitor_module, "VIEW_SHARE", 1.0)
    view = SlowView(0.05)
    monkeypatch.setattr(fit_view, "make_view", lambda charts, stream: view)
    mon = Monitor(charts=True, warmup_steps=2)
    model().fit(data(rows=16 * 400), epochs=1, verbose=0, callbacks=[mon])     # windows of 0.1 s: several
    r = mon.result
    e = r.extras
    assert e["wall_examples_per_s"] == pytest.approx(e["wall_steps"] * 16 / e["wall_span_s"])
    assert e["wall_examples_per_s"] < 0.9 * r.throughput_per_s, (e, r.throughput_per_s)
    why = [n for n in r.notes_of("steps") if n.startswith("steps: over the ")]
    assert why and "below the" in why[0] and "the live view took" in why[0], r.notes
    took = float(why[0].split("the live view took ")[1].split(" s")[0])
    # every chart but those after the two warm-up calls (the first call's tracing fills a window) and the
    # final one fell between measured calls
    assert len(view.draws) >= 5 and took >= 0.95 * view.cost_s * (len(view.draws) - 3) - 0.01, (took, view.draws)
    assert monitor_line(r).startswith(r.summary() + "; over the ")


def test_without_a_view_the_wall_clock_rate_is_recorded_and_close_to_the_median_steps():
    mon = Monitor(charts=False, warmup_steps=2)
    model().fit(data(), epochs=1, verbose=0, callbacks=[mon])
    e = mon.result.extras
    assert e["view_s"] == 0.0 and e["view_charts"] == 0 and e["wall_steps"] == 20 - 2
    assert e["wall_examples_per_s"] > 0


def arrays(rows: int):
    x = np.random.default_rng(1).normal(size=(rows, 4)).astype("float32")
    return x, (x[:, 0] > 0).astype("int32")


def test_the_batch_size_is_what_a_train_step_consumed_whatever_the_validation():
    """Keras's loss tracker counts validation examples at an epoch's end: the batch came out 7, not 32."""
    x, y = arrays(330)                                # 264 to train: 8 steps of 32 and one of 8
    mon = Monitor(charts=False, warmup_steps=1)
    model().fit(x, y, batch_size=32, validation_split=0.2, epochs=1, verbose=0, callbacks=[mon])
    r = mon.result
    assert r.config.batch_size == 32 and not any("batch_size" in n for n in r.notes)

    xv, yv = arrays(40)
    train = tf.data.Dataset.from_tensor_slices(arrays(330)).batch(32)
    for val in ((xv, yv), tf.data.Dataset.from_tensor_slices((xv, yv)).batch(8)):
        mon = Monitor(charts=False, warmup_steps=1)
        model().fit(train, validation_data=val, epochs=1, verbose=0, callbacks=[mon])
        assert mon.result.config.batch_size == 32
        assert mon.result.throughput_per_s == pytest.approx(32 / mon.result.median_step_s)

    mon = Monitor(charts=False, warmup_steps=1, batch_size=64)          # the caller's word wins
    model().fit(x, y, batch_size=32, validation_split=0.2, epochs=1, verbose=0, callbacks=[mon])
    assert mon.result.config.batch_size == 64


class Boom(keras.layers.Layer):
    """Passes its input through, until ``fail`` is set."""

    fail = False

    def call(self, x):
        if self.fail:
            raise ValueError("the batch went bad")
        return x


def test_a_fit_that_raises_is_on_disk_as_failed_with_the_exception_and_the_model_is_left_as_it_was(tmp_path):
    path = tmp_path / "runs.jsonl"
    keras.utils.set_random_seed(0)
    boom = Boom()
    m = keras.Sequential([keras.Input((4,)), boom, keras.layers.Dense(2)], name="boom")
    m.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True), run_eagerly=True)

    class Trigger(keras.callbacks.Callback):
        def on_train_batch_begin(self, batch, logs=None):
            boom.fail = batch == 6

    mon = Monitor(path, charts=False, warmup_steps=1)
    with pytest.raises(ValueError, match="the batch went bad"):
        m.fit(data(), epochs=1, verbose=0, callbacks=[mon, Trigger()])
    [r] = tfwb.load_results(path)                     # written as it ended, before the exception went on
    assert r.status == "failed" and r.error.startswith("ValueError: ") and "the batch went bad" in r.error
    assert "\x1b" not in r.error, r.error                    # Keras's bold, not kept
    assert len(r.warmup_times_s) == 1 and len(r.step_times_s) == 5          # calls 0-5 finished, 6 raised
    assert mon.result == r and mon.result.config.batch_size == 16
    assert not hasattr(m.train_function, "_tfwb_original")                 # the model's own function back
    boom.fail = False
    mon = Monitor(path, charts=False, warmup_steps=1)
    m.fit(data(), epochs=1, verbose=0, callbacks=[mon])
    assert mon.result.status == "ok" and [x.status for x in tfwb.load_results(path)] == ["failed", "ok"]


def test_a_fit_left_from_another_callback_is_recorded_when_the_result_is_read(tmp_path):
    path = tmp_path / "runs.jsonl"

    class Fails(keras.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            raise RuntimeError("a callback failed")

    m = model()
    mon = Monitor(path, charts=False, warmup_steps=1)
    with pytest.raises(RuntimeError):
        m.fit(data(), epochs=2, verbose=0, callbacks=[mon, Fails()])
    [started] = tfwb.load_results(path)               # written as the fit started: on disk before any end
    assert started.status == "failed" and started.error.startswith("the fit stopped before its end")
    r = mon.result                                    # Keras called no on_train_end: built now
    assert r.status == "failed" and "outside its train and validation steps" in r.error
    assert len(r.step_times_s) == 20 - 1 and [x.status for x in tfwb.load_results(path)] == ["failed"]
    assert tfwb.load_results(path) == [r] and len(path.read_text().splitlines()) == 2
    assert not hasattr(m.train_function, "_tfwb_original")


def test_in_ipython_a_fit_left_from_another_callback_takes_the_cells_exception(tmp_path, monkeypatch):
    IPython = pytest.importorskip("IPython")
    from IPython.core.events import EventManager, available_events

    class Shell:
        def showtraceback(self):
            raise AssertionError("a post_run_cell callback failed")

    shell = Shell()
    shell.events = EventManager(shell, available_events)
    monkeypatch.setattr(IPython, "get_ipython", lambda: shell)
    path = tmp_path / "runs.jsonl"

    class Fails(keras.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            raise RuntimeError("a callback failed")

    mon = Monitor(path, charts=False, warmup_steps=1)
    with pytest.raises(RuntimeError) as raised:
        model().fit(data(), epochs=2, verbose=0, callbacks=[mon, Fails()])
    assert shell.events.callbacks["post_run_cell"]            # waits for the cell's end
    cell = type("ExecutionResult", (), {"error_in_exec": raised.value})()
    shell.events.trigger("post_run_cell", cell)
    [r] = tfwb.load_results(path)
    assert r.status == "failed" and r.error == "RuntimeError: a callback failed" and mon.result == r
    assert len(r.step_times_s) == 20 - 1 and not shell.events.callbacks["post_run_cell"]   # and unhooked
    mon = Monitor(path, charts=False, warmup_steps=1)          # a fit that ends well unhooks at its end
    model().fit(data(64), epochs=1, verbose=0, callbacks=[mon])
    assert not shell.events.callbacks["post_run_cell"]
    assert [x.status for x in tfwb.load_results(path)] == ["failed", "ok"]


def test_a_validation_step_that_raises_is_recorded_too(tmp_path):
    path = tmp_path / "runs.jsonl"
    bad = tf.data.Dataset.from_tensor_slices((np.zeros((32, 5), "float32"), np.zeros(32, "int32"))).batch(16)
    m = model()
    mon = Monitor(path, charts=False, warmup_steps=1)
    with pytest.raises(Exception) as raised:          # 5 features where the model takes 4
        m.fit(data(), validation_data=bad, epochs=2, verbose=0, callbacks=[mon])
    [r] = tfwb.load_results(path)
    assert r.status == "failed" and r.error.startswith(f"{type(raised.value).__name__}: "), r.error
    assert len(r.step_times_s) == 20 - 1                                    # the first epoch's calls kept
    assert not hasattr(m.test_function, "_tfwb_original") and not hasattr(m.train_function, "_tfwb_original")


def test_a_fit_reports_its_model_flops_and_mfu_as_workbench_runs_do():
    mon = Monitor(charts=False, warmup_steps=1)
    model().fit(data(), epochs=2, verbose=0, callbacks=[mon])
    r = mon.result
    assert r.model_flops_per_step and r.model_flops_per_step > 0 and not r.flops_uncounted
    assert r.mfu is None or r.mfu > 0
    assert r.mfu_text().startswith("MFU")
