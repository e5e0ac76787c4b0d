"""Tests of tfwb.knobs: a knob's role, sweep treatment and "set" state, and what is derived from them.

Pure except the last test, which runs TensorFlow to check that ``tf32`` reaches it.
"""
from __future__ import annotations

import pytest

from tfwb import expect, knobs, workloads
from tfwb.analysis import diagnosis
from tfwb.config import KNOBS, RunConfig
from tfwb.knobs import ROLES, Knob


def test_every_runconfig_knob_declares_a_known_role():
    assert {k.role for k in KNOBS.values()} == set(ROLES)


@pytest.mark.parametrize("name, role", [
    ("interleave", "source"), ("storage_latency_ms", "source"), ("prefetch", "pipeline"),
    ("batch_size", "pipeline"), ("mixed_precision", "compute"), ("tf32", "compute"),
    ("strategy", "distribution"), ("steps", "run"), ("optimizer", "run"),
])
def test_roles_of_some_knobs(name, role):
    assert KNOBS[name].role == role


def test_the_workload_registry_lists_are_derived_from_roles():
    assert workloads.SOURCE_KNOBS == knobs.names("source") == (
        "storage_latency_ms", "parallel_map", "interleave", "vectorized_map")
    assert set(workloads.GENERIC_KNOBS) == {"batch_size", "data_source", "prefetch", "cache",
                                            "shuffle_buffer", "deterministic"}
    assert workloads.get_workload("images").source_knobs == workloads.SOURCE_KNOBS


def test_diagnosis_hardware_knobs_are_the_compute_and_distribution_knobs_with_a_rule():
    assert diagnosis.HARDWARE_KNOBS == ("mixed_precision", "tf32", "jit_compile", "steps_per_execution",
                                        "strategy")
    assert all(KNOBS[n].role in ("compute", "distribution") and n in expect.RULES
               for n in diagnosis.HARDWARE_KNOBS)


def test_sweep_space_and_fixed_reasons():
    space = knobs.sweep_space()
    assert space == {"prefetch": (False, True), "cache": (False, True), "parallel_map": (False, True),
                     "mixed_precision": ("off", "mixed_bfloat16", "mixed_float16"),
                     "jit_compile": (False, True)}
    assert list(space) == [n for n in KNOBS if n in space]           # declaration (display) order
    for name, values in space.items():                               # every value is allowed
        assert all(KNOBS[name].check(name, v) == v for v in values)
    fixed = knobs.fixed_reasons()
    assert set(fixed) == {"workload", "size", "steps", "warmup_steps", "timing", "seed", "label"}
    assert all(reason for reason in fixed.values()) and not set(fixed) & set(space)


def test_a_knob_is_swept_or_fixed_not_both():
    with pytest.raises(ValueError, match="sweep=.*fixed=.*not allowed together"):
        Knob("bool", "x", sweep=(False, True), fixed="never")


def test_an_unknown_role_names_field_value_and_allowed():
    with pytest.raises(ValueError, match=r"role='model' is not allowed; role must be one of \('source'"):
        Knob("bool", "x", role="model")
    with pytest.raises(ValueError, match="roles="):
        knobs.names("model")


@pytest.mark.parametrize("name, value, is_set", [
    ("prefetch", True, True), ("prefetch", False, False),
    ("cache", "/tmp/c", True), ("cache", False, False),
    ("storage_latency_ms", 0.0, True), ("storage_latency_ms", None, False),
    ("mixed_precision", "mixed_float16", True), ("mixed_precision", "off", False),
    ("tf32", False, True), ("tf32", True, False),                   # on by default: set means turned off
    ("deterministic", False, True), ("shuffle_buffer", 0, False), ("shuffle_buffer", 100, True),
    ("steps_per_execution", 1, False), ("steps_per_execution", 8, True),
    ("data_source", "files", False), ("data_source", "memory", True),
    ("clip", None, False), ("clip", "norm:1.0", True), ("strategy", "mirrored", True),
])
def test_when_a_knob_counts_as_set(name, value, is_set):
    assert KNOBS[name].is_set(value) is is_set


def test_a_knob_without_an_off_value_has_no_set_state():
    with pytest.raises(ValueError, match="no 'set' state"):
        KNOBS["batch_size"].is_set(64)


def test_unused_source_knobs_follow_is_set():
    mlp = workloads.get_workload("mlp")
    assert mlp.unused_knobs(RunConfig(workload="mlp", storage_latency_ms=0.0)) == ("storage_latency_ms",)
    assert mlp.unused_knobs(RunConfig(workload="mlp")) == ()


def test_tf32_is_a_bool_defaulting_to_tensorflows_default():
    assert RunConfig().tf32 is True and RunConfig(tf32=False).tf32 is False
    assert KNOBS["tf32"].group == "precision" and KNOBS["tf32"].chapter == 3
    with pytest.raises(ValueError, match="tf32='off' is not allowed; tf32 must be True or False"):
        RunConfig(tf32="off")
    assert "tf32" in knobs.markdown_table(RunConfig)


def test_tf32_reaches_tensorflow_during_a_run_and_is_restored():
    tf = pytest.importorskip("tensorflow")
    from tfwb.tf.runner.train import prepared

    before = tf.config.experimental.tensor_float_32_execution_enabled()
    cfg = RunConfig(workload="mlp", size="small", tf32=not before, batch_size=8, steps=1, warmup_steps=0)
    with prepared(cfg):
        assert tf.config.experimental.tensor_float_32_execution_enabled() is (not before)
    assert tf.config.experimental.tensor_float_32_execution_enabled() is before
