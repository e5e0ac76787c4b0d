"""Tests of tfwb.config: validation messages, copying, serialising, size resolution, diff."""
from __future__ import annotations

import dataclasses
import json
import math

import pytest

from tfwb.config import RunConfig, field_names, parse_clip

CHOICES_MP = "'off', 'mixed_float16', 'mixed_bfloat16'"
CHOICES_STRATEGY = "'default', 'mirrored', 'multi_worker', 'parameter_server', 'tpu'"
CHOICES_OPT = "'sgd', 'momentum', 'adam', 'adamw', 'rmsprop', 'nadam'"
CHOICES_SOURCE = "'files', 'generator', 'memory'"
CHOICES_SIZE = "'auto', 'small', 'full'"
CLIP_FORMS = "'norm:X', 'global_norm:X', 'value:X'"

BAD_VALUES = [
    # (field, value, text naming the allowed values)
    ("batch_size", 0, "an integer >= 1"),
    ("batch_size", -1, "an integer >= 1"),
    ("batch_size", True, "an integer >= 1"),
    ("batch_size", "8", "an integer >= 1"),
    ("batch_size", 8.0, "an integer >= 1"),
    ("steps", 0, "an integer >= 1"),
    ("warmup_steps", -1, "an integer >= 0"),
    ("steps_per_execution", 0, "an integer >= 1"),
    ("mixed_precision", "float16", CHOICES_MP),
    ("mixed_precision", True, CHOICES_MP),
    ("strategy", "horovod", CHOICES_STRATEGY),
    ("optimizer", "lamb", CHOICES_OPT),
    ("optimizer", "Adam", CHOICES_OPT),
    ("workload", "no-such-workload", "'images'"),
    ("data_source", "s3", CHOICES_SOURCE),
    ("size", "huge", CHOICES_SIZE),
    ("clip", "norm", CLIP_FORMS),
    ("clip", "norm:0", CLIP_FORMS),
    ("clip", "norm:-1", CLIP_FORMS),
    ("clip", "l2:1", CLIP_FORMS),
    ("clip", "norm:x", CLIP_FORMS),
    ("clip", "norm:nan", CLIP_FORMS),
    ("clip", "norm:inf", CLIP_FORMS),
    ("clip", "norm:1:2", CLIP_FORMS),
    ("clip", 1.0, CLIP_FORMS),
    ("storage_latency_ms", -1, "a finite number >= 0"),
    ("storage_latency_ms", math.nan, "a finite number >= 0"),
    ("shuffle_buffer", -1, "an integer >= 0"),
    ("cache", "", "False, True (in memory) or a file path prefix"),
    ("cache", "   ", "False, True (in memory) or a file path prefix"),
    ("cache", 0, "False, True (in memory) or a file path prefix"),
    ("learning_rate", 0, "a finite number > 0"),
    ("learning_rate", -1e-3, "a finite number > 0"),
    ("learning_rate", math.inf, "a finite number > 0"),
    ("learning_rate", "1e-3", "a finite number > 0"),
    ("sample_interval_s", 0.01, "a finite number >= 0.05"),
    ("prefetch", 1, "True or False"),
    ("jit_compile", "yes", "True or False"),
    ("replicas", 0, "an integer >= 1"),
    ("seed", -1, "an integer >= 0"),
    ("label", None, "a string"),
]


@pytest.mark.parametrize("name, value, allowed", BAD_VALUES,
                         ids=[f"{n}={v!r}" for n, v, _ in BAD_VALUES])
def test_bad_value_names_field_value_and_allowed(name, value, allowed):
    with pytest.raises(ValueError) as info:
        RunConfig(**{name: value})
    msg = str(info.value)
    assert f"{name}=" in msg
    assert repr(value) in msg
    assert allowed in msg


def test_unknown_workload_message_lists_registered_names_and_how_to_add():
    with pytest.raises(ValueError, match="register_workload") as info:
        RunConfig(workload="mine")
    assert "'images'" in str(info.value)


def test_defaults_are_valid_and_match_the_design():
    cfg = RunConfig()
    assert (cfg.workload, cfg.prefetch, cfg.cache, cfg.mixed_precision, cfg.clip, cfg.strategy) == (
        "images", False, False, "off", None, "default")


@pytest.mark.parametrize("clip, spec", [
    (None, None), ("norm:1.0", ("norm", 1.0)), ("global_norm:0.5", ("global_norm", 0.5)),
    ("value:2", ("value", 2.0)), ("norm:1e-3", ("norm", 1e-3)),
])
def test_good_clip_forms_parse(clip, spec):
    assert parse_clip(clip) == spec
    assert RunConfig(clip=clip).clip_spec == spec


@pytest.mark.parametrize("changes", [
    {"cache": True}, {"cache": "/tmp/tfwb-cache"}, {"storage_latency_ms": 0}, {"storage_latency_ms": 2.5},
    {"learning_rate": 1}, {"sample_interval_s": 0.05}, {"warmup_steps": 0}, {"replicas": 1},
    {"mixed_precision": "mixed_bfloat16", "strategy": "mirrored", "optimizer": "adamw"},
])
def test_good_values_are_accepted_and_kept(changes):
    cfg = RunConfig(**changes)
    assert {k: getattr(cfg, k) for k in changes} == changes


def test_frozen():
    cfg = RunConfig()
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.batch_size = 8  # type: ignore[misc]


def test_replace_copies_and_validates():
    cfg = RunConfig(batch_size=32)
    other = cfg.replace(prefetch=True, batch_size=16)
    assert (other.prefetch, other.batch_size) == (True, 16)
    assert (cfg.prefetch, cfg.batch_size) == (False, 32), "replace must not change the original"
    with pytest.raises(ValueError, match=r"batch_size=0"):
        cfg.replace(batch_size=0)


def test_replace_rejects_unknown_fields_naming_them():
    with pytest.raises(ValueError) as info:
        RunConfig().replace(batchsize=8, prefetch=True, turbo=1)
    msg = str(info.value)
    assert "batchsize" in msg and "turbo" in msg
    assert "batch_size" in msg, "the message lists the known fields"


def test_replace_cannot_switch_off_workload_check():
    with pytest.raises(ValueError, match="_check_workload"):
        RunConfig().replace(_check_workload=False)


def test_to_dict_from_dict_round_trip_through_json():
    cfg = RunConfig(batch_size=16, steps=7, warmup_steps=0, cache="/tmp/c", clip="value:0.5",
                    storage_latency_ms=3.0, mixed_precision="mixed_bfloat16", replicas=2,
                    optimizer="nadam", learning_rate=0.01, label="run A", seed=3)
    d = cfg.to_dict()
    assert list(d) == list(field_names())
    assert "_check_workload" not in d
    assert RunConfig.from_dict(d) == cfg
    assert RunConfig.from_dict(json.loads(json.dumps(d))) == cfg


def test_from_dict_missing_keys_take_defaults():
    assert RunConfig.from_dict({"batch_size": 8}) == RunConfig(batch_size=8)


def test_from_dict_rejects_unknown_keys_naming_them():
    with pytest.raises(ValueError) as info:
        RunConfig.from_dict({"batch_size": 8, "warp_drive": True})
    assert "warp_drive" in str(info.value)


def test_from_dict_rejects_private_field():
    with pytest.raises(ValueError, match="_check_workload"):
        RunConfig.from_dict({"_check_workload": False, "workload": "elsewhere"})


@pytest.mark.parametrize("data", [None, 3, "batch_size=8", [("batch_size", 8)]])
def test_from_dict_needs_a_mapping(data):
    with pytest.raises(ValueError, match="mapping"):
        RunConfig.from_dict(data)


def test_from_dict_check_workload_false_accepts_unregistered_workload():
    with pytest.raises(ValueError, match="workload='from-another-kernel'"):
        RunConfig.from_dict({"workload": "from-another-kernel"})
    cfg = RunConfig.from_dict({"workload": "from-another-kernel"}, check_workload=False)
    assert cfg.workload == "from-another-kernel"
    assert cfg.to_dict()["workload"] == "from-another-kernel"
    # A copy keeps accepting it; the other fields stay validated.
    assert cfg.replace(batch_size=8).workload == "from-another-kernel"
    with pytest.raises(ValueError, match="batch_size"):
        RunConfig.from_dict({"workload": "from-another-kernel", "batch_size": 0}, check_workload=False)
    with pytest.raises(ValueError, match="workload"):
        RunConfig.from_dict({"workload": ""}, check_workload=False)


def test_check_workload_flag_does_not_affect_equality():
    a = RunConfig.from_dict({"batch_size": 8}, check_workload=False)
    assert a == RunConfig(batch_size=8)
    assert hash(a) == hash(RunConfig(batch_size=8))


@pytest.mark.parametrize("env, size, expected", [
    ("1", "auto", "small"), (None, "auto", "full"), ("0", "auto", "full"), ("true", "auto", "full"),
    ("1", "full", "full"), (None, "small", "small"),
])
def test_resolved_size_follows_tfwb_fast(monkeypatch, env, size, expected):
    if env is None:
        monkeypatch.delenv("TFWB_FAST", raising=False)
    else:
        monkeypatch.setenv("TFWB_FAST", env)
    assert RunConfig(size=size).resolved_size == expected


def test_resolved_size_is_read_when_asked_not_when_built(monkeypatch):
    monkeypatch.setenv("TFWB_FAST", "1")
    cfg = RunConfig()
    assert cfg.resolved_size == "small"
    monkeypatch.setenv("TFWB_FAST", "0")
    assert cfg.resolved_size == "full"


def test_diff_names_changed_fields_with_own_values_and_ignores_label():
    a = RunConfig(batch_size=32, prefetch=True, label="A")
    b = RunConfig(label="B")
    assert a.diff(b) == {"batch_size": 32, "prefetch": True}
    assert b.diff(a) == {"batch_size": 64, "prefetch": False}
    assert a.diff(a.replace(label="other")) == {}
    assert a.diff(a) == {}


def test_a_data_source_the_workload_does_not_honour_fails_at_construction():
    with pytest.raises(ValueError, match="data_source='generator' does not apply to workload 'mlp'"):
        RunConfig(workload="mlp", data_source="generator")
    assert RunConfig(workload="mlp", data_source="memory").data_source == "memory"


def test_auto_size_follows_fast_mode_then_the_measured_choice(monkeypatch):
    from tfwb import config

    monkeypatch.setenv("TFWB_FAST", "1")
    assert RunConfig().resolved_size == "small"
    monkeypatch.delenv("TFWB_FAST")
    try:
        assert RunConfig().resolved_size == "full"
        config.set_auto_size("small")
        assert RunConfig().resolved_size == "small" and RunConfig(size="full").resolved_size == "full"
        with pytest.raises(ValueError, match="size='tiny'"):
            config.set_auto_size("tiny")
    finally:
        config.set_auto_size(None)
