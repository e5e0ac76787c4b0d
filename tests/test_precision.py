"""Tests of tfwb.tf.lab.precision (policy, underflow counts, largest-batch search) and of the
mixed_float16-on-TPU refusal in tfwb.tf.runner.strategies."""
from __future__ import annotations

import math
import re

import pytest

pytest.importorskip("tensorflow")
import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import tfwb.tf.runner.train as train  # noqa: E402
from tfwb.config import RunConfig  # noqa: E402
from tfwb.tf.lab import precision  # noqa: E402
from tfwb.tf.lab.precision import BatchSearch, ScaleCount, Underflow, batch_ratio, batches_text, count_lost, is_out_of_memory, largest_batch, largest_batches, policy, search_largest, underflow, underflow_during
from tfwb.tf.runner.strategies import check_precision, make_strategy  # noqa: E402
from tfwb.workloads import register_workload, unregister_workload  # noqa: E402

pytestmark = pytest.mark.tf

TINY_LOSS = "test-precision-tiny-loss"


@pytest.fixture(autouse=True)
def float32_policy_after():
    yield
    keras.mixed_precision.set_global_policy("float32")


# -- a workload whose float16 gradients are known to underflow ------------------------------------
def tiny_loss_model(cfg):
    """A float16 hidden layer (under mixed_float16) and a float32 output, no biases."""
    return keras.Sequential([keras.Input((4,)), keras.layers.Dense(8, use_bias=False, name="hidden"),
                             keras.layers.Dense(1, use_bias=False, dtype="float32", name="out")])


def tiny_loss_data(cfg):
    x = np.random.default_rng(cfg.seed).normal(size=(64, 4)).astype("float32")
    return tf.data.Dataset.from_tensor_slices((x, np.zeros(64, "float32")))


def tiny_loss(y_true, y_pred):
    """Per-example 1e-10 * prediction: the gradient reaching the float16 layer is ~1e-11."""
    return 1e-10 * y_pred[:, 0]


@pytest.fixture(scope="module", autouse=True)
def tiny_loss_workload():
    register_workload(TINY_LOSS, model_fn=tiny_loss_model, data_fn=tiny_loss_data, loss=tiny_loss)
    yield
    unregister_workload(TINY_LOSS)


# -- the policy ----------------------------------------------------------------------------------------
def test_policy_sets_and_restores_even_on_error():
    keras.mixed_precision.set_global_policy("mixed_bfloat16")
    with policy("mixed_float16") as name:
        assert name == keras.mixed_precision.global_policy().name == "mixed_float16"
        layer = keras.layers.Dense(2)
    assert keras.mixed_precision.global_policy().name == "mixed_bfloat16"
    assert layer.compute_dtype == "float16" and layer.variable_dtype == "float32"   # built inside: kept
    with pytest.raises(RuntimeError):
        with policy("off"):
            assert keras.mixed_precision.global_policy().name == "float32"
            raise RuntimeError("boom")
    assert keras.mixed_precision.global_policy().name == "mixed_bfloat16"


def test_policy_refuses_an_unknown_value_before_changing_anything():
    with pytest.raises(ValueError, match=r"mixed_precision='float16' is not allowed; one of \('off'"):
        with policy("float16"):
            pass
    assert keras.mixed_precision.global_policy().name == "float32"


# -- counting -----------------------------------------------------------------------------------------
def test_count_lost_counts_zeroed_and_non_finite_elements():
    ref = [np.array([1e-9, 0.5, 0.0, 2.0]), np.array([[3.0, 1e-30]])]
    cand = [np.array([0.0, 0.5, 0.0, np.inf]), np.array([[np.nan, 0.0]])]
    assert count_lost(ref, cand) == (2, 2)           # 1e-9 and 1e-30 lost; inf and NaN overflowed
    assert count_lost(ref, ref) == (0, 0)
    with pytest.raises(ValueError, match="pair up"):
        count_lost(ref, cand[:1])
    with pytest.raises(ValueError, match="shapes differ"):
        count_lost([np.zeros(3)], [np.zeros(4)])


def test_scale_labels_and_the_underflow_record():
    assert [ScaleCount(s, 0, 0).label for s in (1.0, 2.0 ** 15, 1000.0)] == ["none", "2^15", "1000"]
    u = Underflow("text", "small", 64, 10, 0.01, 100, 80, 3,
                  (ScaleCount(1.0, 8, 0), ScaleCount(2.0 ** 15, 0, 1)))
    assert u.at(1.0).lost == 8 and u.lost_pct(1.0) == pytest.approx(10.0)
    assert u.lost_vs_unscaled_pct(2.0 ** 15) == 0.0 and u.lost_vs_unscaled_pct(1.0) == 100.0
    nothing_lost = Underflow("text", "small", 64, 0, 2.5, 100, 80, 0,
                             (ScaleCount(1.0, 0, 0), ScaleCount(8.0, 0, 0)))
    assert nothing_lost.lost_vs_unscaled_pct(8.0) is None
    assert u.rows() == [("none", "8", "10.000 %", "0"), ("2^15", "0", "0.000 %", "1")]
    assert "after 10 float32 steps" in u.text() and "loss scale 2^15: 0 lost" in u.text()
    with pytest.raises(ValueError, match=r"loss_scale=4.0 was not measured; measured: 1, 32768"):
        u.at(4.0)


@pytest.mark.parametrize("kwargs, match", [
    (dict(loss_scales=()), "loss_scales=()"),
    (dict(loss_scales=(0.0,)), "finite numbers > 0"),
    (dict(loss_scales=(math.inf,)), "finite numbers > 0"),
    (dict(checkpoints=()), "checkpoints=()"),
    (dict(checkpoints=(-1,)), "ints >= 0"),
    (dict(checkpoints=(5, 5)), "strictly"),
    (dict(checkpoints=(1.5,)), "ints >= 0"),
])
def test_underflow_rejects_bad_arguments_before_any_work(kwargs, match, monkeypatch):
    monkeypatch.setattr(precision, "prepared", lambda *a, **k: pytest.fail("work started"))
    args = dict(checkpoints=(0,), **kwargs) if "checkpoints" not in kwargs else kwargs
    with pytest.raises(ValueError, match=re.escape(match)):
        underflow_during(RunConfig(workload=TINY_LOSS, batch_size=8), **args)
    with pytest.raises(ValueError, match="train_steps=-1"):
        underflow(RunConfig(workload=TINY_LOSS, batch_size=8), train_steps=-1)


def test_tiny_gradients_underflow_in_float16_and_a_loss_scale_keeps_them():
    keras.mixed_precision.set_global_policy("mixed_bfloat16")
    u = underflow(RunConfig(workload=TINY_LOSS, batch_size=8), loss_scales=(1.0, 2.0 ** 30))
    assert keras.mixed_precision.global_policy().name == "mixed_bfloat16"    # restored
    assert (u.total, u.nonzero_float32) == (4 * 8 + 8, 40)
    # ~1e-11 reaches the float16 layer: below float16's smallest value, so every hidden-kernel
    # gradient is zero without scaling; the float32 output layer's own gradients survive.
    assert u.at(1.0) == ScaleCount(1.0, 32, 0)
    assert u.at(2.0 ** 30) == ScaleCount(2.0 ** 30, 0, 0)
    assert u.below_float16 == 40                    # all of them are below 2**-24 in float32


def test_the_text_workload_step_as_the_chapter_measures_it():
    cfg = RunConfig(workload="text", size="small", data_source="memory", batch_size=32, learning_rate=3e-3)
    at_start, trained = underflow_during(cfg, (0, 60), loss_scales=(1.0, 2.0 ** 15, 2.0 ** 30))
    assert (at_start.train_steps, trained.train_steps) == (0, 60)
    n_params = sum(int(np.prod(v.shape)) for v in precision_text_model(cfg).trainable_variables)
    assert at_start.total == trained.total == n_params
    assert trained.loss < at_start.loss                         # it trained
    assert at_start.at(2.0 ** 30).non_finite > 0                # a scale that large overflows
    assert trained.at(1.0).lost > trained.at(2.0 ** 15).lost    # scaling keeps what float16 flushes
    assert trained.lost_vs_unscaled_pct(2.0 ** 15) < 10


def precision_text_model(cfg):
    from tfwb.workloads import get_workload

    return get_workload("text").model_fn(cfg)


# -- the largest batch -----------------------------------------------------------------------------
@pytest.mark.parametrize("answer, start, limit", [(1000, 64, 16384), (999, 64, 16384), (300, 5000, 16384),
                                                  (8, 64, 1024), (20000, 64, 4096)])
def test_search_finds_the_largest_fitting_multiple(answer, start, limit):
    calls = []

    def fits(b):
        calls.append(b)
        return b <= answer

    best, tried, reason = search_largest(fits, start=start, limit=limit, tolerance=0)
    assert best == min(answer // 8 * 8, limit)
    assert [b for b, _ in tried] == calls and all(b % 8 == 0 and 8 <= b <= limit for b in calls)
    assert all(ok == (b <= answer) for b, ok in tried)
    assert len(calls) <= 2 * math.log2(limit) + 2
    assert ("up to the limit" in reason) == (answer >= limit)


def test_search_with_tolerance_stops_early_within_it():
    best, tried, _ = search_largest(lambda b: b <= 3000, start=64, limit=16384)     # tolerance 1/8
    assert best <= 3000 and 3000 - best <= max(8, best / 8)
    exact = search_largest(lambda b: b <= 3000, start=64, limit=16384, tolerance=0)
    assert len(tried) < len(exact[1]) and exact[0] == 3000


def test_search_when_nothing_fits():
    best, tried, reason = search_largest(lambda b: False, start=64, limit=1024)
    assert best is None and reason == "not even a batch of 8 fitted" and tried[-1] == (8, False)


@pytest.mark.parametrize("kwargs, match", [
    (dict(multiple=0), "multiple=0"), (dict(limit=4), "limit=4"), (dict(start=0), "start=0"),
    (dict(tolerance=1.0), "tolerance=1.0"), (dict(tolerance=-0.1), "tolerance=-0.1"),
])
def test_search_rejects_bad_bounds_before_trying(kwargs, match):
    args = dict(start=64, limit=1024, multiple=8, tolerance=0.125)
    args.update(kwargs)
    with pytest.raises(ValueError, match=re.escape(match)):
        search_largest(lambda b: pytest.fail("tried"), **args)


def test_largest_batch_on_this_cpu_says_why_and_runs_nothing():
    assert not tf.config.list_physical_devices("GPU"), "this test is for a machine without a GPU"
    r = largest_batch(RunConfig(workload="text", mixed_precision="mixed_bfloat16"),
                      fits=lambda b: pytest.fail("a search ran on a CPU"))
    assert isinstance(r, BatchSearch) and r.batch_size is None and not r.measured
    assert r.reason.startswith("no GPU here") and "ResourceExhaustedError" in r.reason
    assert r.text().startswith("mixed_bfloat16: no figure: no GPU here")
    tpu = largest_batch(RunConfig(workload="text"), device="tpu")
    assert tpu.batch_size is None and "GPU only" in tpu.reason


def test_largest_batch_on_a_gpu_searches_with_the_injected_check():
    r = largest_batch(RunConfig(workload="text", batch_size=64, mixed_precision="mixed_float16"),
                      fits=lambda b: b <= 1536, device="gpu", tolerance=0)
    assert r.batch_size == 1536 and r.policy == "mixed_float16" and r.measured
    assert r.tried[0] == (64, True) and "1,536 fitted" in r.reason
    assert r.text().startswith("mixed_float16: largest batch 1,536 (1,536 fitted")


@pytest.mark.parametrize("kwargs, match", [(dict(device="xpu"), "device='xpu'"),
                                           (dict(device="gpu", steps=0), "steps=0"),
                                           (dict(device="gpu", limit=4), "limit=4")])
def test_largest_batch_rejects_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=re.escape(match)):
        largest_batch(RunConfig(workload="text"), fits=lambda b: pytest.fail("tried"), **kwargs)


def test_largest_batches_per_policy_and_their_ratio():
    budget = {"off": 512, "mixed_float16": 1000, "mixed_bfloat16": 1000}      # what fits, per policy
    searches = tuple(largest_batch(RunConfig(workload="text", mixed_precision=mp), device="gpu", tolerance=0,
                                   fits=lambda b, most=most: b <= most) for mp, most in budget.items())
    assert [s.batch_size for s in searches] == [512, 1000, 1000]
    assert batch_ratio(searches, "mixed_float16") == pytest.approx(1000 / 512)
    assert batch_ratio(searches, "mixed_float16", baseline="mixed_bfloat16") == 1.0
    assert batch_ratio(searches[1:], "mixed_float16") is None                    # no float32 figure
    text = batches_text(searches).splitlines()
    assert len(text) == 3 and text[0].startswith("off: largest batch 512")
    on_cpu = largest_batches(RunConfig(workload="text"), device="cpu")
    assert [s.policy for s in on_cpu] == ["off", "mixed_float16", "mixed_bfloat16"]
    assert batch_ratio(on_cpu, "mixed_float16") is None
    (line,) = batches_text(on_cpu).splitlines()                                   # one shared reason, once
    assert line.startswith("off, mixed_float16, mixed_bfloat16: no figure: no GPU here")
    with pytest.raises(ValueError, match="mixed_precision='float16'"):
        largest_batches(RunConfig(workload="text"), policies=("off", "float16"), device="cpu")


def test_the_default_check_runs_and_treats_only_oom_as_too_large(monkeypatch):
    seen = []

    def fake_run(cfg, *, raise_errors=False, **_):
        assert raise_errors
        seen.append((cfg.batch_size, cfg.steps, cfg.warmup_steps))
        if cfg.batch_size > 256:
            raise tf.errors.ResourceExhaustedError(None, None, "OOM when allocating tensor")
        return None

    monkeypatch.setattr(precision, "run", fake_run)
    r = largest_batch(RunConfig(workload="text", batch_size=64), device="gpu", tolerance=0, steps=2)
    assert r.batch_size == 256 and seen[0] == (64, 2, 1)

    def broken_run(cfg, **_):
        raise ValueError("a bug, not memory")

    monkeypatch.setattr(precision, "run", broken_run)
    with pytest.raises(ValueError, match="a bug, not memory"):
        largest_batch(RunConfig(workload="text"), device="gpu")


def test_out_of_memory_errors_are_recognised():
    assert is_out_of_memory(tf.errors.ResourceExhaustedError(None, None, "anything"))
    assert is_out_of_memory(tf.errors.InternalError(None, None, "Dst tensor is not initialized."))
    assert is_out_of_memory(RuntimeError("CUDNN_STATUS_ALLOC_FAILED"))
    assert not is_out_of_memory(ValueError("shapes do not match"))
    assert not is_out_of_memory(tf.errors.InvalidArgumentError(None, None, "ZOOM"))


# -- float16 on a TPU: refused before any work -------------------------------------------------------
def test_mixed_float16_with_the_tpu_strategy_is_refused_before_connecting():
    cfg = RunConfig(strategy="tpu", mixed_precision="mixed_float16")
    for call in (check_precision, make_strategy):
        with pytest.raises(ValueError, match=r"mixed_precision='mixed_float16' is not allowed with "
                                             r"strategy='tpu': TPUs have no float16.*'mixed_bfloat16'"):
            call(cfg)
    check_precision(cfg.replace(mixed_precision="mixed_bfloat16"))     # allowed: bfloat16 is the TPU's type
    check_precision(RunConfig(mixed_precision="mixed_float16"))         # allowed: float16 runs on a CPU


def test_a_run_with_that_combination_fails_with_the_message_and_restores_the_policy():
    keras.mixed_precision.set_global_policy("mixed_bfloat16")
    r = train.run_process(RunConfig(workload="text", strategy="tpu", mixed_precision="mixed_float16", steps=1,
                            warmup_steps=0, sample_interval_s=0.05))
    assert r.status == "failed" and not r.step_times_s and r.setup_s == 0.0
    assert r.error.startswith("ValueError: mixed_precision='mixed_float16' is not allowed with "
                              "strategy='tpu'")
    assert keras.mixed_precision.global_policy().name == "mixed_bfloat16"


@pytest.mark.parametrize("error", [
    tf.errors.InternalError(None, None, "Blas xGEMM launch failed: CUBLAS_STATUS_ALLOC_FAILED"),
    tf.errors.InternalError(None, None, "cuDNN launch failure: CUDNN_STATUS_ALLOC_FAILED"),
    tf.errors.UnknownError(None, None, "Failed to allocate 2147483648 bytes for new constant"),
    tf.errors.UnknownError(None, None, "OOM when allocating tensor with shape[512,4096]"),
    tf.errors.InternalError(None, None, "CUDA_ERROR_OUT_OF_MEMORY: out of memory"),
], ids=["cublas", "cudnn", "failed-to-allocate", "oom", "cuda-oom"])
def test_out_of_memory_near_the_limit_as_a_library_failure_is_too_large(monkeypatch, error):
    """Near the limit cuBLAS or cuDNN fail to allocate their workspace: the search takes that as too large."""
    assert is_out_of_memory(error)

    def fake_run(cfg, *, raise_errors=False, **_):
        if cfg.batch_size > 512:
            raise error
        return None

    collected = []                          # each try frees its model before the next; a full collection
    monkeypatch.setattr(precision.gc, "collect", lambda *a: collected.append(a) or 0)  # costs ~1 s in this process
    monkeypatch.setattr(precision, "run", fake_run)
    r = largest_batch(RunConfig(workload="text", batch_size=64), device="gpu", tolerance=0)
    assert r.batch_size == 512 and (1024, False) in r.tried, r.tried
    assert len(collected) == len(r.tried)
    assert not is_out_of_memory(tf.errors.InternalError(None, None, "CUBLAS_STATUS_EXECUTION_FAILED"))


# -- what TensorFlow logs at the first float16 op ----------------------------------------------------------
def test_tf_log_messages_keeps_only_tf_log_lines_without_their_prefix():
    text = ("E0000 00:00:1795707349.396069   25597 util.cc:131] oneDNN supports DT_HALF only on platforms "
            "with AVX-512. Falling back\nnot a log line\n"
            "I0000 00:00:1.2  7 port.cc:153] oneDNN custom operations are on.\n")
    assert precision.tf_log_messages(text) == (
        "oneDNN supports DT_HALF only on platforms with AVX-512. Falling back",
        "oneDNN custom operations are on.")
    assert precision.tf_log_messages("nothing here\n") == ()


def test_float16_first_ops_returns_tf_log_lines_instead_of_writing_them(capfd):
    said = precision.float16_first_ops()
    assert isinstance(said, tuple) and all(isinstance(m, str) and "]" not in m[:40] for m in said)
    err = capfd.readouterr().err
    assert not any(precision.TF_LOG_LINE.match(line.strip()) for line in err.splitlines())
