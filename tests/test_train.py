"""Tests of tfwb.tf.runner.train: tiny real runs, their records, failures and restored global state."""
from __future__ import annotations

import math
import subprocess
import sys
import textwrap
import threading
import time

import pytest

pytest.importorskip("tensorflow")
# tests/conftest.py calls tfwb.setup_devices() at session start, before any test starts
# TF's runtime, so strategy="mirrored" gets 2 logical CPU devices in this process.
import tfwb.tf.runner.train as train  # noqa: E402
import tfwb.tf.runner.step_limits as limits  # noqa: E402
import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from tfwb.config import RunConfig  # noqa: E402
from tfwb.analysis.diagnosis import NO_INPUT_DATA, diagnose  # noqa: E402
from tfwb.history import append_result, load_results  # noqa: E402
from tfwb.observers import Observer, Progress, StopFlag  # noqa: E402
from tfwb.records import RunResult  # noqa: E402
from tfwb.tf.run import run  # noqa: E402
from tfwb.workloads import register_workload, unregister_workload  # noqa: E402

pytestmark = pytest.mark.tf

TINY = "test-train-tiny"
BAD_LABELS = "test-train-bad-labels"
BOOM = "test-train-boom"


def sampler_threads():
    return [t for t in threading.enumerate() if t.name == "tfwb-sampler" and t.is_alive()]


@pytest.fixture(scope="module", autouse=True)
def data_dir(tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        root = tmp_path_factory.mktemp("tfwb-data")
        mp.setenv("TFWB_DATA_DIR", str(root))
        yield root


@pytest.fixture(autouse=True)
def float32_policy_after():
    yield
    keras.mixed_precision.set_global_policy("float32")


# -- a tiny user workload that records how tfwb calls it ----------------------------------------
SEEN: dict = {}


def tiny_model(cfg):
    SEEN["policy"] = keras.mixed_precision.global_policy().name
    SEEN["cfg"] = cfg
    return keras.Sequential([keras.Input((4,)), keras.layers.Dense(8, activation="relu"),
                             keras.layers.Dense(3, dtype="float32")])


def tiny_data(cfg):
    rng = np.random.default_rng(cfg.seed)
    x = rng.normal(size=(64, 4)).astype("float32")
    y = (x[:, 0] > 0).astype("int32") + (x[:, 1] > 0).astype("int32")
    return tf.data.Dataset.from_tensor_slices((x, y))


def bad_label_data(cfg):
    return tf.data.Dataset.from_tensor_slices((np.zeros((32, 4), "float32"), np.full((32,), 7, "int32")))


def exploding_model(cfg):
    raise RuntimeError("model exploded on purpose")


@pytest.fixture(scope="module", autouse=True)
def user_workloads():
    register_workload(TINY, model_fn=tiny_model, data_fn=tiny_data, description="tiny dense")
    register_workload(BAD_LABELS, model_fn=tiny_model, data_fn=bad_label_data)
    register_workload(BOOM, model_fn=exploding_model, data_fn=tiny_data)
    yield
    for name in (TINY, BAD_LABELS, BOOM):
        unregister_workload(name)


def small(**changes) -> RunConfig:
    base = dict(size="small", batch_size=16, steps=6, warmup_steps=2, sample_interval_s=0.05,
                storage_latency_ms=0)
    base.update(changes)
    return RunConfig(**base)


def tiny(**changes) -> RunConfig:
    base = dict(workload=TINY, batch_size=16, steps=1, warmup_steps=0, sample_interval_s=0.05)
    base.update(changes)
    return RunConfig(**base)


# -- one ordinary run --------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def timed_run():
    before = time.perf_counter()
    result = run(small())
    return result, time.perf_counter() - before


def test_run_is_ok_with_one_record_per_step(timed_run):
    r, _ = timed_run
    assert r.status == "ok" and r.error is None and r.ok
    assert len(r.step_times_s) == len(r.input_wait_s) == len(r.step_start_s) == len(r.losses) == 6
    assert len(r.warmup_times_s) == len(r.warmup_input_wait_s) == len(r.warmup_start_s) == 2
    assert len(r.warmup_losses) == 2
    assert r.examples_per_step == 16
    assert r.run_id and r.started_at


def test_the_measured_steps_delay_is_recorded_over_their_span(timed_run):
    from tfwb.utilization.pressure import DELAY_KEYS

    r, _ = timed_run
    delay = r.extras["delay"]
    assert set(delay) == set(DELAY_KEYS)
    assert delay["wall_s"] >= 0.99 * sum(r.step_times_s)      # the span holds every measured step
    assert all(delay[k] is None or 0.0 <= delay[k] <= 1.0 for k in DELAY_KEYS if k not in ("wall_s", "cores"))


def test_step_timing_is_consistent(timed_run):
    r, elapsed = timed_run
    times = r.warmup_times_s + r.step_times_s
    waits = r.warmup_input_wait_s + r.input_wait_s
    starts = r.warmup_start_s + r.step_start_s
    assert all(t > 0 for t in times)
    assert all(0 <= w <= t for w, t in zip(waits, times))
    assert all(b > a for a, b in zip(starts, starts[1:]))
    assert all(starts[i] + times[i] <= starts[i + 1] for i in range(len(starts) - 1)), "steps do not overlap"
    assert 0 < r.setup_s <= starts[0]
    assert starts[-1] + times[-1] <= elapsed


def test_losses_are_finite(timed_run):
    r, _ = timed_run
    assert all(math.isfinite(v) and v > 0 for v in r.warmup_losses + r.losses)


def test_samples_cover_the_run(timed_run):
    r, elapsed = timed_run
    assert r.samples
    ts = [s.t_s for s in r.samples]
    assert ts == sorted(ts)
    assert all(0 <= t <= elapsed for t in ts)
    assert ts[0] <= r.warmup_start_s[0], "a sample is taken before the first step"
    assert ts[-1] >= r.step_start_s[-1] + r.step_times_s[-1], "and one after the last"
    assert any(s.rss_mib for s in r.samples)


def test_real_result_json_round_trip_and_history(timed_run, tmp_path):
    r, _ = timed_run
    assert RunResult.from_json(r.to_json()) == r
    path = tmp_path / "runs.jsonl"
    append_result(path, r)
    append_result(path, r)
    assert load_results(path) == [r, r]


def test_summary_of_real_result(timed_run):
    text = timed_run[0].summary()
    assert text.startswith("images: median step ")
    assert "examples/s" in text and "input-bound" in text


def test_fingerprint(timed_run):
    r, _ = timed_run
    fp = r.fingerprint
    assert fp["tensorflow"] == tf.__version__
    assert fp["keras"] == keras.__version__
    assert fp["config"] == r.config.to_dict()
    assert fp["replicas"] == 1
    assert r.replicas == 1 and r.per_replica_batch == r.config.batch_size    # the default strategy: one replica
    assert r.extras["distribution"] == {"strategy": "default", "replicas": 1, "workers": 1,
                                        "global_batch": r.config.batch_size,
                                        "per_replica_batch": r.config.batch_size, "auto_shard_policy": None}
    assert fp["size"] == r.config.resolved_size     # "auto" is recorded resolved
    assert any("CPU" in d for d in fp["logical_devices"])
    assert fp["gpus"] == [] or all("compute_capability" in g for g in fp["gpus"])


def test_non_config_is_rejected():
    with pytest.raises(TypeError, match="RunConfig"):
        run({"batch_size": 16})


# -- learning -------------------------------------------------------------------------------------------
def test_loss_falls_over_a_longer_run():
    r = run(small(steps=60, warmup_steps=1, data_source="memory", learning_rate=3e-3))
    assert r.status == "ok", r.error
    # One configured warm-up call is too few to tell settled steps: the runner extends it, in warm-up.
    assert r.warmup_extra_steps >= 4 and len(r.warmup_times_s) == 1 + r.warmup_extra_steps
    assert len(r.step_times_s) == len(r.losses) == 60
    assert np.mean(r.losses[-10:]) < np.mean(r.losses[:10])


@pytest.mark.parametrize("source", ["generator", "memory"])
def test_other_data_sources_run(source):
    r = run(small(data_source=source, steps=3, warmup_steps=1))
    assert r.status == "ok", r.error
    assert len(r.step_times_s) == 3 and all(math.isfinite(v) for v in r.losses)


# -- precision and global state ---------------------------------------------------------------------
def test_mixed_float16_runs_and_restores_the_policy():
    keras.mixed_precision.set_global_policy("mixed_bfloat16")
    r = run(small(mixed_precision="mixed_float16", steps=3, warmup_steps=1))
    assert r.status == "ok", r.error
    assert all(math.isfinite(v) for v in r.losses)
    assert keras.mixed_precision.global_policy().name == "mixed_bfloat16"


@pytest.mark.parametrize("mp, policy", [("off", "float32"), ("mixed_float16", "mixed_float16"),
                                        ("mixed_bfloat16", "mixed_bfloat16")])
def test_model_fn_sees_the_policy(mp, policy):
    SEEN.clear()
    keras.mixed_precision.set_global_policy("float32")
    r = run(tiny(mixed_precision=mp))
    assert r.status == "ok", r.error
    assert SEEN["policy"] == policy
    assert SEEN["cfg"] == r.config
    assert keras.mixed_precision.global_policy().name == "float32"


# -- failures ---------------------------------------------------------------------------------------------
def test_failing_model_fn_gives_failed_result_and_restores_state():
    keras.mixed_precision.set_global_policy("mixed_bfloat16")
    r = run(tiny(workload=BOOM, mixed_precision="mixed_float16", steps=3))
    assert r.status == "failed"
    assert "RuntimeError" in r.error and "model exploded on purpose" in r.error
    assert r.step_times_s == () and r.losses == ()
    assert "model exploded on purpose" in r.summary()
    assert diagnose(r).verdict == "run failed"
    assert keras.mixed_precision.global_policy().name == "mixed_bfloat16"
    assert sampler_threads() == []
    assert RunResult.from_json(r.to_json()) == r


def test_raise_errors_reraises_and_restores_state():
    keras.mixed_precision.set_global_policy("mixed_bfloat16")
    with pytest.raises(RuntimeError, match="model exploded on purpose"):
        run(tiny(workload=BOOM, mixed_precision="mixed_float16"), raise_errors=True)
    assert keras.mixed_precision.global_policy().name == "mixed_bfloat16"
    assert sampler_threads() == []


def test_failure_mid_run_keeps_the_steps_measured_so_far():
    def progress(done, total):
        if done == 3:
            raise RuntimeError("stop at step 3")

    r = run(tiny(steps=4, warmup_steps=1), observers=[Progress(progress)])
    assert r.status == "failed" and "stop at step 3" in r.error
    assert len(r.warmup_times_s) == 1 and len(r.step_times_s) == 2 == len(r.losses)


def test_keyboard_interrupt_gives_interrupted_result():
    def progress(done, total):
        if done == 2:
            raise KeyboardInterrupt

    keras.mixed_precision.set_global_policy("mixed_bfloat16")
    r = run(tiny(steps=4, warmup_steps=0, mixed_precision="off"), observers=[Progress(progress)])
    assert r.status == "interrupted" and r.stop_reason == "interrupted by the user"
    assert r.error == "interrupted by the user after 2 of 4 steps"
    assert len(r.step_times_s) == 2
    assert keras.mixed_precision.global_policy().name == "mixed_bfloat16"
    assert sampler_threads() == []


def test_tpu_without_tpu_fails_saying_what_to_pick():
    r = run(small(strategy="tpu", steps=1, warmup_steps=0))
    assert r.status == "failed"
    assert "strategy='tpu'" in r.error and "no TPU" in r.error
    assert "pick strategy='default'" in r.error
    assert r.step_times_s == ()
    with pytest.raises(ValueError, match="no TPU"):
        run(small(strategy="tpu", steps=1, warmup_steps=0), raise_errors=True)


def test_user_workload_with_generator_source_fails_clearly():
    with pytest.raises(ValueError) as info:           # refused when the config is built: nothing runs
        tiny(data_source="generator")
    assert "data_source='generator'" in str(info.value) and TINY in str(info.value)


def test_tf_op_error_message_keeps_its_cause():
    r = run(tiny(workload=BAD_LABELS))
    assert r.status == "failed"
    assert "InvalidArgumentError" in r.error
    assert "label value of 7" in r.error, r.error


# -- distribution --------------------------------------------------------------------------------------------
def test_cpu_was_split_for_mirrored():
    assert len(tf.config.list_logical_devices("CPU")) >= 2, (
        "TF's runtime started before conftest's tfwb.setup_devices(); mirrored cannot get 2 replicas")


def _fresh_python(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=300)


def test_importing_the_runner_changes_no_devices_and_run_splits_the_cpu_itself():
    proc = _fresh_python("""
        import tensorflow as tf
        import tfwb.tf.runner.train as train
        from tfwb import RunConfig
        cpu = tf.config.list_physical_devices("CPU")[0]
        assert tf.config.get_logical_device_configuration(cpu) is None, "import split the CPU"
        r = train.run_process(RunConfig(size="small", data_source="memory", strategy="mirrored",
                                batch_size=8, steps=2, warmup_steps=1))
        assert r.status == "ok", r.error
        print("replicas", r.fingerprint["replicas"])
    """)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "replicas 2" in proc.stdout


def test_mirrored_after_tf_started_fails_before_any_work_saying_what_to_do():
    proc = _fresh_python("""
        import tensorflow as tf
        tf.constant(1.0) + 1                     # the user's own TF work starts the runtime
        import tfwb
        from tfwb import RunConfig
        r = tfwb.run(RunConfig(size="small", data_source="memory", strategy="mirrored",
                               batch_size=8, steps=2, warmup_steps=1))
        print("STATUS", r.status, len(r.step_times_s) + len(r.warmup_times_s))
        print("ERROR", r.error)
    """)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "STATUS failed 0" in proc.stdout
    assert "tfwb.setup_devices(2)" in proc.stdout and "restart the kernel" in proc.stdout


def test_mirrored_runs_on_two_replicas():
    r = run(small(strategy="mirrored", steps=3, warmup_steps=1))
    assert r.status == "ok", r.error
    assert r.fingerprint["replicas"] == 2 and r.replicas == 2
    assert r.per_replica_batch == r.config.batch_size // 2       # batch_size is the global batch
    assert len(r.step_times_s) == 3 and all(math.isfinite(v) for v in r.losses)
    assert any("distributed dataset" in n for n in r.notes)
    assert any(f"global batch {r.config.batch_size} = 2 replica(s) x {r.config.batch_size // 2}" in n
               for n in r.notes)
    assert RunResult.from_json(r.to_json()).replicas == 2


def test_mirrored_batch_must_divide_among_replicas():
    r = run(small(strategy="mirrored", batch_size=15, steps=1, warmup_steps=0))
    assert r.status == "failed"
    assert "batch_size=15" in r.error and "multiple" in r.error


def test_two_mirrored_runs_with_different_models_in_one_process():
    # In a subprocess: the failure poisons the process's collectives for later mirrored runs.
    code = textwrap.dedent(f"""
        import tfwb.tf.runner.train as train
        import keras, numpy as np, tensorflow as tf
        from tfwb import RunConfig, register_workload
        def data(cfg):
            return tf.data.Dataset.from_tensor_slices(
                (np.zeros((32, 4), "float32"), np.zeros((32,), "int32")))
        for n in (3, 5):
            register_workload(f"w{{n}}", lambda cfg, n=n: keras.Sequential(
                [keras.Input((4,)), keras.layers.Dense(n)]), data)
        for n in (3, 5):
            r = train.run_process(RunConfig(workload=f"w{{n}}", strategy="mirrored", batch_size=8, steps=1,
                                    warmup_steps=0, sample_interval_s=0.05))
            print(f"w{{n}}", r.status, r.error)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    lines = [line for line in out.stdout.splitlines() if line.startswith("w")]
    assert lines == ["w3 ok None", "w5 ok None"], out.stdout


# -- optimizers, clipping, steps per execution -------------------------------------------------------------
@pytest.mark.parametrize("changes", [
    {"optimizer": name} for name in ("sgd", "momentum", "adam", "adamw", "rmsprop", "nadam")
] + [{"clip": clip} for clip in ("norm:1.0", "global_norm:1.0", "value:0.5")],
    ids=lambda c: next(iter(c.values())))
def test_every_optimizer_and_clip_runs_a_step(changes):
    r = run(tiny(**changes))
    assert r.status == "ok", r.error
    assert len(r.losses) == 1 and math.isfinite(r.losses[0])


@pytest.mark.parametrize("name, cls, extra", [
    ("sgd", "SGD", {"momentum": 0.0}), ("momentum", "SGD", {"momentum": 0.9}), ("adam", "Adam", {}),
    ("adamw", "AdamW", {}), ("rmsprop", "RMSprop", {}), ("nadam", "Nadam", {}),
])
def test_make_optimizer_builds_what_the_config_names(name, cls, extra):
    opt = train.make_optimizer(tiny(optimizer=name, learning_rate=0.25))
    assert type(opt).__name__ == cls
    assert float(opt.learning_rate) == 0.25
    for attr, value in extra.items():
        assert getattr(opt, attr) == value


@pytest.mark.parametrize("clip, attr", [("norm:1.5", "clipnorm"), ("global_norm:1.5", "global_clipnorm"),
                                        ("value:1.5", "clipvalue")])
def test_make_optimizer_applies_the_clip(clip, attr):
    opt = train.make_optimizer(tiny(clip=clip))
    assert getattr(opt, attr) == 1.5
    others = {"clipnorm", "global_clipnorm", "clipvalue"} - {attr}
    assert all(getattr(opt, o) is None for o in others)


def test_make_optimizer_wraps_for_loss_scaling_only_under_float16():
    assert isinstance(train.make_optimizer(tiny(mixed_precision="mixed_float16")),
                      keras.mixed_precision.LossScaleOptimizer)
    assert not isinstance(train.make_optimizer(tiny(mixed_precision="mixed_bfloat16")),
                          keras.mixed_precision.LossScaleOptimizer)


def test_weight_decay_is_decoupled_for_adamw_and_an_l2_penalty_for_the_others():
    assert train.make_optimizer(tiny(optimizer="adamw", weight_decay=0.05)).weight_decay == 0.05
    assert train.make_optimizer(tiny(optimizer="adamw")).weight_decay == 0.004   # Keras' own default
    assert not train.make_optimizer(tiny(optimizer="sgd", weight_decay=0.05)).weight_decay

    def kernel_norm(cfg):
        with train.prepared(cfg) as p:
            for _ in range(5):
                p.advance()
            return sum(float(tf.reduce_sum(v * v)) for v in p.model.trainable_variables if len(v.shape) >= 2)

    plain = kernel_norm(tiny(optimizer="sgd", learning_rate=0.1))
    decayed = kernel_norm(tiny(optimizer="sgd", learning_rate=0.1, weight_decay=0.5))
    assert decayed < plain * 0.9, (plain, decayed)


def test_steps_per_execution_counts_training_steps_and_reports_per_step_times():
    r = run(tiny(steps=6, warmup_steps=2, steps_per_execution=2))
    assert r.status == "ok", r.error
    assert r.steps_per_call == 2
    assert len(r.step_times_s) == 3 and len(r.warmup_times_s) == 1      # calls, 2 steps each
    assert r.input_wait_s == () and r.warmup_input_wait_s == ()
    assert r.examples_per_step == 16                                    # per training step
    assert any("steps_per_execution=2" in n for n in r.notes)
    assert diagnose(r).verdict == NO_INPUT_DATA
    call_s = [b - a for a, b in zip(r.step_start_s, r.step_start_s[1:])]
    assert all(t < c for t, c in zip(r.step_times_s, call_s)), "a per-step time is a call's time / 2"


def test_steps_per_execution_rounds_up_to_whole_calls_and_says_so():
    r = run(tiny(steps=5, warmup_steps=1, steps_per_execution=4))
    assert r.status == "ok", r.error
    assert len(r.step_times_s) == 2 and len(r.warmup_times_s) == 1
    assert any("rounded up to whole calls" in n and "5 -> 8" in n for n in r.notes), r.notes


@pytest.mark.parametrize("changes", [{"steps_per_execution": 3}, {}])
def test_jit_compile_works_with_steps_per_execution(changes):
    r = run(tiny(jit_compile=True, steps=3, warmup_steps=3, **changes))
    assert r.status == "ok", r.error
    assert all(math.isfinite(v) for v in r.losses)


def test_jit_compile_with_mirrored_cpu_devices_fails_before_any_step_saying_what_to_pick():
    r = run(tiny(jit_compile=True, strategy="mirrored", steps=3, warmup_steps=1))
    assert r.status == "failed" and not r.warmup_times_s and not r.step_times_s
    assert "jit_compile=True with strategy='mirrored'" in r.error and "jit_compile=False" in r.error


def test_eager_execution_runs_the_same_step_without_tracing():
    graph = run(tiny(steps=3, warmup_steps=1))
    eager = run(tiny(steps=3, warmup_steps=1, execution="eager"))
    assert eager.status == "ok", eager.error
    assert eager.traces is None and graph.traces == graph.retraces == 1 and graph.traces_after_warmup == 0
    np.testing.assert_allclose(eager.warmup_losses, graph.warmup_losses, rtol=1e-4)


def test_jit_compile_with_eager_execution_is_refused_naming_both_fields():
    with pytest.raises(ValueError, match="jit_compile=True.*execution='eager'"):
        tiny(jit_compile=True, execution="eager")


def test_a_new_input_shape_after_warm_up_is_counted_as_a_retrace():
    shapes = [8, 8, 4, 8, 8]          # a partial batch after warm-up: a new shape, so a new trace
    batches = tf.data.Dataset.from_generator(
        lambda: ((np.zeros((n, 4), "float32"), np.zeros((n,), "int32")) for n in shapes),
        output_signature=(tf.TensorSpec((None, 4), tf.float32), tf.TensorSpec((None,), tf.int32)))
    r = run(tiny(steps=4, warmup_steps=1, batch_size=8), dataset=batches)
    assert r.status == "ok", r.error
    assert r.traces == 2 and r.traces_after_warmup == 1
    assert any("traced 1 more time" in n for n in r.notes)


# -- callbacks and user workloads --------------------------------------------------------------------------
def test_progress_called_once_per_step_with_increasing_counts():
    calls = []
    r = run(tiny(steps=3, warmup_steps=2), observers=[Progress(lambda done, total: calls.append((done, total)))])
    assert r.status == "ok", r.error
    assert calls == [(1, 5), (2, 5), (3, 5), (4, 5), (5, 5)]


def test_user_workload_runs_end_to_end_with_its_own_loss():
    traced = []

    def my_loss(y, logits):
        traced.append(True)
        return keras.losses.sparse_categorical_crossentropy(y, logits, from_logits=True)

    register_workload(TINY + "-loss", model_fn=tiny_model, data_fn=tiny_data, loss=my_loss)
    try:
        r = run(tiny(workload=TINY + "-loss", steps=5, warmup_steps=1, learning_rate=1e-2))
    finally:
        unregister_workload(TINY + "-loss")
    assert r.status == "ok", r.error
    assert traced, "the workload's loss is the one trained on"
    assert len(r.losses) == 5 and all(math.isfinite(v) for v in r.losses)
    assert r.fingerprint["config"]["workload"] == TINY + "-loss"


def test_user_workload_with_keras_loss_object():
    register_workload(TINY + "-obj", model_fn=tiny_model, data_fn=tiny_data,
                      loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    try:
        r = run(tiny(workload=TINY + "-obj", steps=2))
    finally:
        unregister_workload(TINY + "-obj")
    assert r.status == "ok", r.error
    assert all(math.isfinite(v) for v in r.losses)


def test_import_tfwb_does_not_import_tensorflow():
    code = ("import sys, tfwb; tfwb.RunConfig(batch_size=8); tfwb.diagnose; tfwb.compare; "
            "tfwb.load_results; tfwb.register_workload; "
            "print(sorted(m for m in ('tensorflow', 'keras') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_jit_compile_runs():
    r = run(tiny(jit_compile=True, steps=2))
    assert r.status == "ok", r.error
    assert all(math.isfinite(v) for v in r.losses)


def test_run_on_a_given_dataset_builds_no_pipeline(monkeypatch):
    import tensorflow as tf

    def no_pipeline(*args, **kwargs):
        raise AssertionError("run(dataset=...) must not build the config's pipeline")

    monkeypatch.setattr(train, "build_dataset", no_pipeline)
    x = tf.random.uniform((64, 32, 32, 3), maxval=255)
    y = tf.zeros((64,), tf.int32)
    ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(16, drop_remainder=True).repeat()
    r = run(small(steps=3, warmup_steps=1), dataset=ds, raise_errors=True)
    assert r.ok and len(r.step_times_s) == 3
    assert any("not built from the pipeline knobs" in n for n in r.notes)


def test_grad_norms_are_recorded_unscaled_under_float16():
    plain = run(tiny(steps=3, warmup_steps=1, grad_norms=True, learning_rate=0.01))
    half = run(tiny(steps=3, warmup_steps=1, grad_norms=True, learning_rate=0.01,
                          mixed_precision="mixed_float16"))
    assert plain.ok and half.ok, (plain.error, half.error)
    assert len(plain.warmup_grad_norms) == 1 and len(plain.grad_norms) == 3     # warm-up kept apart
    assert plain.all_loss_scales == (1.0,) * 4
    assert half.all_loss_scales[0] > 1000                   # Keras' dynamic loss scale starts at 2**15
    np.testing.assert_allclose(half.all_grad_norms[0], plain.all_grad_norms[0], rtol=0.05)   # unscaled: same norm
    assert run(tiny(steps=2)).grad_norms == ()                                 # off by default


@pytest.mark.parametrize("clip", ["global_norm:0.05", "norm:0.05"])
def test_clipping_under_float16_acts_on_the_unscaled_gradients(clip):
    """One SGD step (rate 1) with a clip far below the raw gradient: the weights move by the clip,
    as in float32. Clipping the scaled gradients (x 2**15) would move them 2**15 times less."""
    def update_and_norm(cfg):
        with train.prepared(cfg) as p:
            before = [v.numpy() for v in p.model.trainable_variables]
            out = p.advance()
            deltas = [b - v.numpy() for b, v in zip(before, p.model.trainable_variables)]
            return deltas, float(out["grad_norm"]), float(out["loss_scale"])

    cfg = tiny(optimizer="sgd", learning_rate=1.0, clip=clip, grad_norms=True)
    plain, plain_norm, one = update_and_norm(cfg)
    half, half_norm, scale = update_and_norm(cfg.replace(mixed_precision="mixed_float16"))
    assert one == 1.0 and scale > 1000 and plain_norm > 0.5            # far above the clip: it clips
    np.testing.assert_allclose(half_norm, plain_norm, rtol=0.05)       # the norm is unscaled
    for a, b in zip(half, plain):
        np.testing.assert_allclose(a, b, rtol=0.05, atol=2e-4)          # the same clipped step
    size = math.sqrt(sum(float(np.sum(d * d)) for d in half))
    if clip.startswith("global_norm"):
        assert size == pytest.approx(0.05, rel=0.02)                    # exactly the clip, not clip / scale
    else:
        assert all(np.linalg.norm(d) <= 0.05 * 1.02 for d in half) and size > 0.05


def test_a_run_whose_loss_becomes_nan_is_recorded_as_diverged_and_the_next_run_is_clean():
    def big_data(cfg):                               # inputs 1000x larger: plain SGD at lr 10 blows up
        return tiny_data(cfg).map(lambda x, y: (x * 1000.0, y))

    register_workload(TINY + "-big", model_fn=tiny_model, data_fn=big_data)
    try:
        r = run(tiny(steps=30, warmup_steps=0, optimizer="sgd", learning_rate=10.0, workload=TINY + "-big"))
    finally:
        unregister_workload(TINY + "-big")
    assert r.status == "diverged" and "diverged" in r.error and "learning_rate" in r.error
    assert not math.isfinite(r.losses[-1]) and len(r.losses) < 30
    after = run(tiny(steps=2))
    assert after.ok and all(math.isfinite(v) for v in after.losses)


def test_tensorflow_log_lines_written_during_a_run_become_notes_not_stderr(capfd):
    import os

    def noisy_model(cfg):
        os.write(2, b"E0000 00:00:1795675178.110535   24976 util.cc:131] oneDNN says something\n")
        os.write(2, b"E0000 00:00:1795675178.110536   24976 util.cc:131] oneDNN says something\n")
        os.write(2, b"a line that is not TensorFlow's\n")
        return tiny_model(cfg)

    register_workload(TINY + "-noisy", model_fn=noisy_model, data_fn=tiny_data)
    try:
        r = run(tiny(workload=TINY + "-noisy", steps=2))
    finally:
        unregister_workload(TINY + "-noisy")
    assert r.ok, r.error
    assert [n for n in r.notes if n.startswith("TensorFlow:")] == ["TensorFlow: oneDNN says something"]
    err = capfd.readouterr().err
    assert "oneDNN says something" not in err and "a line that is not TensorFlow's" in err


def test_choose_size_measures_a_full_step_and_sets_what_auto_means(monkeypatch):
    from tfwb import config
    from tfwb.tf.lab import sizing

    monkeypatch.delenv("TFWB_FAST", raising=False)
    probes = []
    real_run = sizing.run
    monkeypatch.setattr(sizing, "run", lambda cfg: probes.append((cfg, real_run(cfg))) or probes[-1][1])
    try:
        slow = sizing.choose_size(budget_s=1e-6, steps=1)       # any real step is over this budget
        assert slow.size == "small" and slow.step_s > 0 and "over the" in slow.reason
        assert probes[0][0].size == "full" and probes[0][1].median_step_s == slow.step_s
        assert RunConfig().resolved_size == "small"
        assert slow.estimate_s(10) == pytest.approx(10 * slow.step_s)
        # The same measured step against a budget it fits (a full-size step costs 0.2 to 1.1 s: measured once)
        monkeypatch.setattr(sizing, "run", lambda cfg: probes[0][1])
        fast = sizing.choose_size(budget_s=1e6, steps=1)
        assert fast.size == "full" and fast.step_s == slow.step_s and RunConfig().resolved_size == "full"
    finally:
        config.set_auto_size(None)
    monkeypatch.setenv("TFWB_FAST", "1")
    choice = sizing.choose_size()
    assert choice.size == "small" and choice.step_s is None and "TFWB_FAST=1" in str(choice)
    with pytest.raises(ValueError, match="budget_s"):
        sizing.choose_size(budget_s=0)


# -- the runner contract: runner(cfg, observers), a stop said once, setup once ----------------------------
def test_run_process_is_called_as_every_runner_is():
    seen = []
    r = train.run_process(tiny(steps=2, warmup_steps=1), [Progress(lambda d, t: seen.append((d, t)))])
    assert r.status == "ok", r.error
    assert seen == [(1, 3), (2, 3), (3, 3)]


def test_a_users_stop_is_interrupted_with_its_reason_and_steps():
    flag = StopFlag()

    class SetAt(Observer):
        def on_step_end(self, run, step):
            if step == 1:
                flag.set("stopped by the user (Stop button)", interrupted=True)

    r = train.run_process(tiny(steps=6, warmup_steps=1), [SetAt(), flag])
    assert r.status == "interrupted" and r.stop_reason == "stopped by the user (Stop button)"
    assert r.error == "stopped by the user (Stop button) after 2 of 7 steps"
    assert len(r.warmup_times_s) == 1 and len(r.step_times_s) == 1
    assert sampler_threads() == []


def test_a_plain_stop_stays_ok_with_its_reason():
    flag = StopFlag("enough")
    flag.set()
    r = train.run_process(tiny(steps=6, warmup_steps=0), [flag])
    assert r.status == "ok" and r.stop_reason == "enough" and r.error is None
    assert len(r.step_times_s) == 1


def test_setup_runs_once_per_run(monkeypatch):
    counts = {"prepare": 0, "setup_devices": 0, "get_workload": 0}

    def counted(name, fn):
        def wrapper(*args, **kwargs):
            counts[name] += 1
            return fn(*args, **kwargs)
        return wrapper

    for name in counts:
        monkeypatch.setattr(train, name, counted(name, getattr(train, name)))
    r = train.run_process(tiny(steps=1, warmup_steps=0))
    assert r.status == "ok", r.error
    assert counts == {"prepare": 1, "setup_devices": 1, "get_workload": 1}


def test_run_process_refuses_a_cluster_strategy_outside_a_worker():
    with pytest.raises(ValueError, match="strategy='multi_worker' runs on a cluster: call tfwb.run"):
        train.run_process(tiny(strategy="multi_worker"))


def test_an_observer_failing_at_the_end_becomes_a_note():
    class Broken(Observer):
        def on_run_end(self, run):
            raise OSError("disk full")

    r = train.run_process(tiny(steps=1, warmup_steps=0), [Broken()])
    assert r.status == "ok"
    assert "observer Broken failed at the end of the run: OSError: disk full" in r.notes


# -- timing modes (tests/test_timing.py drives the same loop on a simulated asynchronous device) ------
def test_windowed_timing_is_the_default_and_records_its_windows():
    r = run(tiny(steps=12, warmup_steps=2))
    assert r.status == "ok", r.error
    assert r.config.timing == "windowed"
    assert sum(r.window_calls) == 12 and r.window_calls
    assert len(r.step_times_s) == len(r.losses) == len(r.input_wait_s) == 12
    starts, times = r.step_start_s, r.step_times_s
    assert all(starts[i] + times[i] <= starts[i + 1] + 1e-9 for i in range(len(starts) - 1)), "no overlap"
    assert all(0 <= w <= t for w, t in zip(r.input_wait_s, r.step_times_s))


def test_per_step_timing_syncs_every_step_and_records_no_windows():
    r = run(tiny(steps=5, warmup_steps=1, timing="per_step"))
    assert r.status == "ok", r.error
    assert r.window_calls == () and len(r.step_times_s) == len(r.losses) == 5


def test_both_modes_train_the_same_losses():
    a = run(tiny(steps=6, warmup_steps=1, optimizer="sgd", learning_rate=0.1))
    b = run(tiny(steps=6, warmup_steps=1, optimizer="sgd", learning_rate=0.1, timing="per_step"))
    assert a.all_losses == pytest.approx(b.all_losses, rel=1e-6)


def test_grad_norms_are_read_per_window_too():
    r = run(tiny(steps=4, warmup_steps=1, grad_norms=True))
    assert r.status == "ok", r.error
    assert len(r.grad_norms) == len(r.loss_scales) == 4 and all(g > 0 for g in r.grad_norms)


def test_staged_batches_measure_the_iterators_floor_and_count_only_the_wait_above_it():
    r = run(tiny(steps=6, warmup_steps=1, data_source="memory"))
    assert r.status == "ok", r.error
    assert r.input_floor_s is not None and 0 < r.input_floor_s < 0.05
    raw = sum(r.input_wait_s) / sum(r.step_times_s)
    assert r.input_wait_fraction <= raw
    assert run(tiny(steps=2)).input_floor_s is None          # a pipeline's wait is all its own


def test_a_result_recorded_before_the_timing_knob_reads_as_per_step():
    import json

    d = json.loads(run(tiny(steps=1)).to_json())
    del d["config"]["timing"]
    assert RunResult.from_dict(d).config.timing == "per_step"


# -- how far from the limit: model FLOPs, the measured peak, MFU (issue 19) ----------------------
def test_a_run_counts_its_flops_and_reads_the_peak_of_its_dtype(timed_run):
    r, _ = timed_run
    assert r.flops_uncounted == ()
    assert r.model_flops_per_step and r.model_flops_per_step > 0
    assert r.peak_flops_per_s and r.peak_flops_per_s > 0 and r.peak_reason == ""
    assert r.peak_device.startswith("CPU")
    assert r.peaks["float32"]["measured"] == r.peak_flops_per_s
    assert set(r.peaks) == {"float32"}          # a CPU run in float32: its half-precision peaks are not read
    assert r.mfu == pytest.approx(r.model_flops_per_step / r.median_step_s / r.peak_flops_per_s)
    assert r.call_overhead_s is not None and 0 < r.call_overhead_s < 0.05
    assert "MFU " in r.summary() and "of this machine's measured float32 peak" in r.summary()


def test_flops_are_three_times_forward_times_the_global_batch():
    r = run(tiny(steps=2))
    # Dense(4->8) and Dense(8->3): 2 FLOPs per multiply-add, plus bias and ReLU; 3x for the training step.
    from tfwb.tf.runner.flops import count_flops

    count = count_flops(tiny_model(r.config))
    assert count.matmul_per_example == 2 * (4 * 8 + 8 * 3)          # MFU's part: the matmuls
    assert r.model_flops_per_step == pytest.approx(3 * count.matmul_per_example * 16)
    assert r.elementwise_flops_per_step == pytest.approx(3 * count.elementwise_per_example * 16)


class Mystery(keras.layers.Layer):
    """A layer with weights the FLOP counter does not know."""

    def build(self, shape):
        self.w = self.add_weight(shape=(shape[-1], 3))

    def call(self, x):
        return tf.matmul(x, self.w)


def test_a_model_with_an_uncounted_layer_reports_no_mfu_and_names_it():
    model = keras.Sequential([keras.Input((4,)), Mystery(name="mystery")])
    facts = limits.measure_limits(tiny(), tf.distribute.get_strategy(), model)
    assert facts.model_flops_per_step is None
    assert facts.flops_uncounted == ("mystery (Mystery)",)
    r = RunResult(config=tiny(), step_times_s=(0.1,) * 3, input_wait_s=(0.0,) * 3, limits=facts)
    assert r.mfu is None and r.achieved_flops_per_s is None
    assert "MFU not counted (layers: mystery (Mystery))" in r.summary()


def test_the_peak_is_read_once_per_process(monkeypatch):
    import tfwb.tf.runner.matmul_peak as peak_module

    calls = []
    real = peak_module.measure_peak

    def counting(*a, **kw):
        calls.append((a, kw))
        return real(*a, **kw)

    monkeypatch.setattr(peak_module, "measure_peak", counting)
    monkeypatch.setattr(limits, "_PEAKS", {})
    model = tiny_model(tiny())
    first = limits.measure_limits(tiny(), tf.distribute.get_strategy(), model)
    again = limits.measure_limits(tiny(), tf.distribute.get_strategy(), model)
    assert len(calls) == 1 and first.peaks == again.peaks
    assert calls[0][1]["quick"] is True and calls[0][1]["budget_s"] == limits.FAST_PEAK_BUDGET_S   # TFWB_FAST=1
