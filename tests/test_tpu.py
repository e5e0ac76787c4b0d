"""strategy='tpu' without a TPU: what is refused before any work, what the error says, one TPU init.

No TPU here: TensorFlow's resolver, ``initialize_tpu_system`` and ``TPUStrategy`` are replaced
by stand-ins where a test needs a TPU that works or one that TensorFlow cannot drive.
"""
from __future__ import annotations

import pytest

tf = pytest.importorskip("tensorflow")

from tfwb.book import TPU_PAIR  # noqa: E402
from tfwb.config import RunConfig  # noqa: E402
from tfwb.tf.runner import strategies  # noqa: E402

pytestmark = pytest.mark.tf

COLAB_TPU = {"tensorflow": "2.20.0", "tensorflow-tpu": "2.20.0", "libtpu": "0.0.21.1"}


@pytest.fixture
def fake_tpu(monkeypatch):
    """A TPU that TensorFlow can drive: counts resolver, connect and initialise calls."""
    calls = {"resolver": 0, "connect": 0, "initialize": 0, "strategy": 0}

    class Resolver:
        def __init__(self, tpu=None):
            assert tpu == "local"
            calls["resolver"] += 1

    def count(name, result=None):
        def f(*a, **kw):
            calls[name] += 1
            return result
        return f

    monkeypatch.setattr(tf.distribute.cluster_resolver, "TPUClusterResolver", Resolver)
    monkeypatch.setattr(tf.config, "experimental_connect_to_cluster", count("connect"))
    monkeypatch.setattr(tf.tpu.experimental, "initialize_tpu_system", count("initialize"))
    monkeypatch.setattr(tf.distribute, "TPUStrategy", lambda resolver: calls.__setitem__(
        "strategy", calls["strategy"] + 1) or ("tpu-strategy", resolver))
    monkeypatch.setattr(strategies, "_TPU", {})
    return calls


def test_the_tpu_system_is_initialised_once_per_process(fake_tpu):
    first = strategies.make_strategy(RunConfig(strategy="tpu"))
    second = strategies.make_strategy(RunConfig(strategy="tpu", batch_size=128))
    assert first is second and first[0] == "tpu-strategy"
    assert fake_tpu == {"resolver": 1, "connect": 1, "initialize": 1, "strategy": 1}


@pytest.mark.parametrize("change, words", [
    ({"execution": "eager"}, "execution='eager' is not allowed with strategy='tpu'"),
    ({"mixed_precision": "mixed_float16"}, "mixed_precision='mixed_float16' is not allowed with strategy='tpu'"),
])
def test_what_a_tpu_cannot_run_is_refused_before_connecting(fake_tpu, change, words):
    with pytest.raises(ValueError, match=words):
        strategies.make_strategy(RunConfig(strategy="tpu", **change))
    assert fake_tpu["resolver"] == fake_tpu["initialize"] == 0


def test_eager_is_refused_with_the_fix():
    with pytest.raises(ValueError) as info:
        strategies.check_tpu(RunConfig(strategy="tpu", execution="eager"))
    assert "pick execution='graph'" in str(info.value) and "strategy='default'" in str(info.value)
    strategies.check_tpu(RunConfig(execution="eager"))                  # eager on the host: allowed
    strategies.check_tpu(RunConfig(strategy="tpu", mixed_precision="mixed_bfloat16"))


def test_a_tpu_tensorflow_cannot_drive_names_the_versions_and_the_pair(monkeypatch, fake_tpu):
    """Colab's TPU runtime with its JAX libtpu: the message says TensorFlow cannot drive it, with versions."""
    def refuse(resolver):
        raise tf.errors.NotFoundError(None, None, "No TPU platform found.\nmore detail")

    monkeypatch.setattr(tf.tpu.experimental, "initialize_tpu_system", refuse)
    monkeypatch.setattr(strategies, "tpu_versions", lambda: dict(COLAB_TPU))
    monkeypatch.setattr(strategies, "detect_tpu", lambda *a, **kw: True)
    with pytest.raises(ValueError) as info:
        strategies.make_strategy(RunConfig(strategy="tpu"))
    text = str(info.value)
    assert "a TPU is attached, but TensorFlow cannot drive it" in text
    assert "TensorFlow 2.20.0 (tensorflow-tpu 2.20.0) with libtpu 0.0.21.1" in text
    assert "NotFoundError: No TPU platform found." in text and "more detail" not in text
    pair = " ".join(f"{n}=={v}" for n, v in TPU_PAIR.items())
    assert f"pip install {pair}" in text
    assert "switch" not in text and "no TPU was found" not in text
    assert "strategy" not in strategies._TPU                 # a later call tries again


def test_no_tpu_here_says_so_with_the_versions():
    """This machine: no TPU attached, TensorFlow's CPU build; the real resolver fails."""
    strategies._TPU.clear()
    with pytest.raises(ValueError) as info:
        strategies.make_strategy(RunConfig(strategy="tpu"))
    text = str(info.value)
    assert "no TPU attached" in text and f"TensorFlow {tf.__version__} (not TensorFlow's TPU build" in text
    assert "pick strategy='default'" in text


def test_the_message_without_tensorflow_tpu_or_libtpu():
    text = strategies.tpu_unavailable_message(True, {"tensorflow": "2.21.0", "tensorflow-tpu": None,
                                                     "libtpu": None}, "ValueError: x")
    assert "TensorFlow 2.21.0 (not TensorFlow's TPU build, tensorflow-tpu) with no libtpu (ValueError: x)" in text
