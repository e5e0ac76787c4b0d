"""Tests of tfwb.tf.runner.flops: FLOPs counted from Keras layers, checked against the papers
and against TensorFlow's own estimate of the traced graph."""
from __future__ import annotations

import keras
import pytest
import tensorflow as tf

from tfwb.config import RunConfig
from tfwb.tf.runner.flops import FlopCount, count_flops, format_flops, tf_cost_estimate
from tfwb.workloads import get_workload, workload_names


@pytest.fixture(scope="module")
def resnet50():
    return keras.applications.ResNet50(weights=None, input_shape=(224, 224, 3))


@pytest.fixture(scope="module")
def mobilenet_v2():
    return keras.applications.MobileNetV2(weights=None, input_shape=(224, 224, 3))


def test_resnet50_matches_the_paper(resnet50):
    # He et al. 2015, Table 1: 3.8 x 10^9 "FLOPs", i.e. multiply-adds (x2 here) of the
    # convolutions and the classifier: the matmul part of the count.
    c = count_flops(resnet50)
    assert c.complete, c.uncounted
    assert 3.8e9 <= c.multiply_adds <= 4.1e9
    assert c.multiply_adds == c.matmul_per_example / 2
    assert c.matmul_per_example + c.elementwise_per_example == c.per_example


def test_mobilenet_v2_matches_the_paper(mobilenet_v2):
    # Sandler et al. 2018, Table 6: 300 M multiply-adds at 224 x 224, width 1.0.
    c = count_flops(mobilenet_v2)
    assert c.complete, c.uncounted
    assert 0.28e9 <= c.multiply_adds <= 0.33e9
    assert c.multiply_adds == pytest.approx(300e6, rel=0.01)   # the convolutions and the classifier alone
    # Its batch norms, ReLU6s, residual adds and biases are elementwise: a few % on top, reported
    # apart (MFU counts the matmuls and convolutions only, what the matmul peak measures).
    assert 0.03 <= c.elementwise_per_example / c.matmul_per_example <= 0.08


def test_by_layer_adds_up_and_names_every_layer(mobilenet_v2):
    c = count_flops(mobilenet_v2)
    assert sum(f for _, f in c.by_layer) == pytest.approx(c.per_example)
    names = {n for n, _ in c.by_layer}
    assert "Conv1" in names and "predictions" in names


@pytest.mark.parametrize("name", workload_names())
@pytest.mark.parametrize("size", ["small", "full"])
def test_every_builtin_workload_counts_complete(name, size):
    c = count_flops(get_workload(name).model_fn(RunConfig(workload=name, size=size)))
    assert c.complete, c.uncounted
    assert c.per_example > 0
    assert c.train_step(32) == pytest.approx(3 * 32 * c.per_example)


def _functional(*layers, shape):
    inputs = keras.Input(shape)
    x = inputs
    for layer in layers:
        x = layer(x)
    return keras.Model(inputs, x)


def test_dense_is_two_flops_per_multiply_add_plus_the_bias():
    m = _functional(keras.layers.Dense(4), shape=(8,))
    assert count_flops(m).per_example == 2 * 8 * 4 + 4
    assert (count_flops(m).matmul_per_example, count_flops(m).elementwise_per_example) == (2 * 8 * 4, 4)
    m = _functional(keras.layers.Dense(4, use_bias=False, activation="relu"), shape=(3, 8))
    assert count_flops(m).per_example == 3 * (2 * 8 * 4 + 4)     # 3 rows, ReLU 1 per element


def small_cnn():
    return _functional(
        keras.layers.Conv2D(4, 3, activation="relu"),        # 6x6x3 -> 4x4x4
        keras.layers.BatchNormalization(),
        keras.layers.MaxPooling2D(2),                        # -> 2x2x4
        keras.layers.Flatten(),
        keras.layers.Dense(5),                               # 16 -> 5
        shape=(6, 6, 3))


def test_the_split_of_a_small_cnn_matches_a_hand_count():
    c = count_flops(small_cnn())
    conv = 2 * (4 * 4) * (3 * 3 * 3 * 4)      # 16 output positions, a 3x3x3 kernel per filter, 4 filters
    dense = 2 * 16 * 5
    elementwise = (4 * 4 * 4) * (1 + 1)       # the conv's bias and ReLU, per output element
    elementwise += 4 * (4 * 4 * 4)            # batch norm: 4 per element
    elementwise += 2 * 2 * (2 * 2 * 4)        # max pooling 2x2: 4 per output element
    elementwise += 5                          # the dense bias
    assert c.complete
    assert c.matmul_per_example == conv + dense == 3616
    assert c.elementwise_per_example == elementwise == 453
    assert c.per_example == conv + dense + elementwise
    assert c.train_step(8, "matmul") == 3 * 8 * 3616 and c.train_step(8, "elementwise") == 3 * 8 * 453
    assert c.train_step(8) == c.train_step(8, "matmul") + c.train_step(8, "elementwise")
    assert "3.62e-06 G in matmuls and convolutions, 4.53e-07 G elementwise" in c.summary()
    with pytest.raises(ValueError, match="part='conv'"):
        c.train_step(8, "conv")


def test_attention_splits_its_softmax_and_biases_from_its_matmuls():
    q = keras.Input((5, 8))
    m = keras.Model(q, keras.layers.MultiHeadAttention(num_heads=2, key_dim=3)(q, q))
    c = count_flops(m)
    biases = 3 * 5 * (2 * 3) + 5 * 8                  # q, k, v biases (heads x key_dim) and the output's
    assert c.elementwise_per_example == biases + 5 * 2 * 5 * 5   # and the softmax over the scores
    matmuls = 2 * 5 * (8 * 2 * 3) * 3 + 2 * 5 * (2 * 3 * 8) + 2 * 2 * 5 * 5 * 3 * 2
    assert c.matmul_per_example == matmuls


def test_limits_counts_the_matmul_part_for_mfu_and_the_elementwise_part_apart(monkeypatch):
    from types import SimpleNamespace

    from tfwb.records import RunResult
    from tfwb.tf.runner import step_limits as limits
    from tfwb.tf.runner.matmul_peak import Peak

    peak = Peak("CPU (2 cores)", "float32", 34e9, 1.5, loaded=False,
                figures=((29e9, False), (13e9, True), (34e9, False)))
    monkeypatch.setattr(limits, "call_overhead_s", lambda: 1e-5)
    monkeypatch.setattr(limits, "_step_devices", lambda strategy: ("CPU", 1, "CPU"))
    monkeypatch.setattr(limits, "_peak", lambda d, device, fast: peak)
    monkeypatch.setattr(limits, "_datasheet", lambda kind, device, d: (None, ""))
    cfg = RunConfig(batch_size=8)
    out = limits.measure_limits(cfg, strategy=None, model=small_cnn())
    assert out.model_flops_per_step == 3 * 8 * 3616                    # what MFU divides: matmuls only
    assert out.peaks["float32"]["spread"] == {"low": 29e9, "high": 34e9, "count": 2, "measured": 3}
    assert out.peaks["float32"]["loaded"] is False
    assert RunResult(config=cfg, step_times_s=(0.1,) * 3, limits=out).limits.peaks == out.peaks   # the result's record
    assert out.elementwise_flops_per_step == 3 * 8 * 453
    assert out.peak_spread == {"low": 29e9, "high": 34e9, "count": 2, "measured": 3}
    assert out.peak_loaded is False
    busy = SimpleNamespace(flops_per_s=13e9, device="CPU", reason="", loaded=True, spread=(13e9, 13e9, 1),
                           figures=((13e9, True),))
    monkeypatch.setattr(limits, "_peak", lambda d, device, fast: busy)
    out = limits.measure_limits(cfg, strategy=None, model=small_cnn())
    assert out.peak_loaded is True and out.peak_spread["count"] == 1


def _single(layer, shape):
    m = _functional(layer, shape=shape)
    return count_flops(m).per_example, tf_cost_estimate(lambda x: m(x, training=False),
                                                        tf.TensorSpec((1,) + shape))


def test_matmul_layers_agree_exactly_with_tensorflows_estimate():
    # Without biases or activations every FLOP is in a matmul or a convolution, whose TF
    # flops statistics count 2 per multiply-add too: the two counts must be identical.
    m = _functional(
        keras.layers.Conv2D(8, 3, padding="same", use_bias=False),
        keras.layers.DepthwiseConv2D(3, strides=2, use_bias=False),
        keras.layers.Conv2D(16, 1, use_bias=False),
        keras.layers.Flatten(),
        keras.layers.Dense(10, use_bias=False),
        shape=(16, 16, 3))
    ours = count_flops(m)
    theirs = tf_cost_estimate(lambda x: m(x, training=False), tf.TensorSpec((1, 16, 16, 3)))
    assert ours.complete
    assert theirs == pytest.approx(ours.per_example)


def test_where_tensorflows_estimate_differs():
    # A grouped convolution has no TF flops statistic: TF counts nothing.
    ours, theirs = _single(keras.layers.Conv2D(6, 3, groups=2, use_bias=False), (7, 7, 8))
    assert ours == 2 * 5 * 5 * 6 * (3 * 3 * 4) and theirs is None
    # A transposed convolution: TF's statistic runs over the output positions (11 x 11, not
    # the multiply-adds done: one kernel per input position) and differs.
    ours, theirs = _single(keras.layers.Conv2DTranspose(4, 3, strides=2, use_bias=False), (5, 5, 16))
    assert ours == 2 * 5 * 5 * (3 * 3 * 4 * 16)
    assert theirs is not None and theirs != ours


def test_separable_conv_is_depthwise_plus_pointwise():
    m = _functional(keras.layers.SeparableConv2D(8, 3, use_bias=False), shape=(10, 10, 4))
    # output 8x8; depthwise 3*3*4 and pointwise 4*8 multiply-adds per output position
    assert count_flops(m).per_example == 2 * 64 * (3 * 3 * 4 + 4 * 8)


def test_attention_counts_projections_scores_and_weighted_sum():
    q = keras.Input((5, 8))
    mha = keras.layers.MultiHeadAttention(num_heads=2, key_dim=3, use_bias=False)
    m = keras.Model(q, mha(q, q))
    proj = 2 * 5 * (8 * 2 * 3) * 3 + 2 * 5 * (2 * 3 * 8)     # q, k, v in; output out
    attend = 2 * 2 * 5 * 5 * 3 * 2 + 5 * 2 * 5 * 5             # scores and sum; softmax
    assert count_flops(m).per_example == proj + attend


def test_embedding_is_a_lookup_and_says_so():
    m = _functional(keras.layers.Embedding(100, 8), shape=(6,))
    c = count_flops(m)
    assert c.complete and c.per_example == 0
    assert "lookup" in c.by_layer[0][0]


def test_a_layer_with_unknown_weights_is_named_never_a_silent_zero():
    class Mine(keras.layers.Layer):
        def build(self, shape):
            self.w = self.add_weight(shape=(shape[-1], 3))

        def call(self, x):
            return x @ self.w

    m = _functional(keras.layers.Dense(4), Mine(name="mine"), shape=(8,))
    c = count_flops(m)
    assert not c.complete
    assert c.uncounted == ("mine (Mine)",)
    assert c.train_step(32) is None
    assert "not counted (layers: mine (Mine))" in c.summary()


def test_weightless_layers_count_zero_and_are_not_uncounted():
    m = _functional(keras.layers.Reshape((4, 2)), keras.layers.Dropout(0.5), keras.layers.Flatten(),
                    keras.layers.Rescaling(0.5), shape=(8,))
    c = count_flops(m)
    assert c.complete and c.per_example == 0


def test_subclassed_and_nested_models_recurse():
    class Sub(keras.Model):
        def __init__(self):
            super().__init__()
            self.a = keras.layers.Dense(16, activation="relu")
            self.b = keras.layers.Dense(4)

        def call(self, x):
            return self.b(self.a(x))

    sub = Sub()
    sub(tf.ones((3, 8)))                                  # built by a first call
    expected = (2 * 8 * 16 + 16 + 16) + (2 * 16 * 4 + 4)
    assert count_flops(sub).per_example == expected
    inner = keras.Sequential([keras.Input((8,)), keras.layers.Dense(16, activation="relu"),
                              keras.layers.Dense(4)], name="inner")
    outer = _functional(inner, keras.layers.Dense(2, name="head"), shape=(8,))
    c = count_flops(outer)
    assert c.per_example == expected + 2 * 4 * 2 + 2
    assert any(n.startswith("inner/") for n, _ in c.by_layer)


def test_an_unbuilt_model_is_refused():
    with pytest.raises(ValueError, match="not built"):
        count_flops(keras.Sequential([keras.layers.Dense(4)]))


def test_tf_cost_estimate_of_a_matmul_and_of_what_cannot_trace():
    est = tf_cost_estimate(lambda a, b: tf.matmul(a, b), tf.ones((4, 8)), tf.ones((8, 2)))
    assert est == 2 * 4 * 8 * 2

    def broken(a):
        raise RuntimeError("no")

    assert tf_cost_estimate(broken, tf.ones((2,))) is None


def test_flop_count_and_format():
    c = FlopCount(per_example=10.0, uncounted=("x (Y)",))
    assert not c.complete and c.train_step(4) is None and c.train_step(4, "matmul") is None
    assert c.matmul_per_example == 10.0 and c.elementwise_per_example == 0.0     # built without the split
    assert format_flops(3.2e12, "FLOP/s") == "3.2 TFLOP/s"
