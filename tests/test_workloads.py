"""Tests of tfwb.workloads: the registry of (model_fn, data_fn, loss) and RunConfig's view of it."""
from __future__ import annotations

import pytest

import tfwb
from tfwb.config import RunConfig
from tfwb.workloads import get_workload, register_workload, unregister_workload, workload_names

NAME = "test-workloads-mine"


def model_a(cfg):
    return "model a"


def model_b(cfg):
    return "model b"


def data_a(cfg):
    return "data a"


@pytest.fixture(autouse=True)
def clean_registry():
    unregister_workload(NAME)
    yield
    unregister_workload(NAME)


def test_images_is_built_in_and_first():
    assert workload_names()[0] == "images"
    w = get_workload("images")
    assert w.builtin and w.data_fn is None and callable(w.model_fn)


def test_register_then_use_in_runconfig():
    with pytest.raises(ValueError):
        RunConfig(workload=NAME)
    w = register_workload(NAME, model_fn=model_a, data_fn=data_a, description="mine")
    assert (w.name, w.builtin, w.description, w.loss) == (NAME, False, "mine", None)
    assert get_workload(NAME) is w
    assert NAME in workload_names()
    assert RunConfig(workload=NAME).workload == NAME


def test_public_register_is_the_same_function():
    assert tfwb.register_workload is register_workload


def test_register_replaces_a_user_workload():
    register_workload(NAME, model_fn=model_a, data_fn=data_a)
    loss = object()
    register_workload(NAME, model_fn=model_b, data_fn=data_a, loss=loss)
    w = get_workload(NAME)
    assert w.model_fn is model_b and w.loss is loss
    assert workload_names().count(NAME) == 1


def test_unregister_then_runconfig_fails_listing_names():
    register_workload(NAME, model_fn=model_a, data_fn=data_a)
    cfg = RunConfig(workload=NAME)
    unregister_workload(NAME)
    assert NAME not in workload_names()
    with pytest.raises(ValueError) as info:
        RunConfig(workload=NAME)
    msg = str(info.value)
    assert f"workload={NAME!r}" in msg and "'images'" in msg
    with pytest.raises(ValueError) as info:
        get_workload(NAME)
    assert NAME in str(info.value) and "'images'" in str(info.value)
    # A config built before still exists, but copies of it are re-validated.
    with pytest.raises(ValueError, match="workload"):
        cfg.replace(batch_size=8)


def test_unregister_unknown_is_ignored_and_builtins_stay():
    unregister_workload("never-registered")
    unregister_workload("images")
    assert "images" in workload_names()
    assert get_workload("images").builtin


def test_builtin_cannot_be_replaced():
    before = get_workload("images")
    with pytest.raises(ValueError, match="built-in"):
        register_workload("images", model_fn=model_a, data_fn=data_a)
    assert get_workload("images") is before


@pytest.mark.parametrize("name", ["", "   ", None, 3])
def test_bad_names_rejected(name):
    with pytest.raises(ValueError, match="name="):
        register_workload(name, model_fn=model_a, data_fn=data_a)


@pytest.mark.parametrize("arg", ["model_fn", "data_fn"])
@pytest.mark.parametrize("bad", [None, "model", 3])
def test_non_callable_factories_rejected_naming_the_argument(arg, bad):
    kwargs = {"model_fn": model_a, "data_fn": data_a, arg: bad}
    with pytest.raises(ValueError) as info:
        register_workload(NAME, **kwargs)
    assert f"{arg}=" in str(info.value) and "callable" in str(info.value)
    assert NAME not in workload_names()
