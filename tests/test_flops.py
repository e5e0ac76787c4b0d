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
    # He et al. 2015, Table 1: 3.8 x 10^9 "FLOPs", i.e. multiply-adds (x2 here).
    c = count_flops(resnet50)
    assert c.complete, c.uncounted
    assert 3.8e9 <= c.multiply_adds <= 4.1e9
    assert c.multiply_adds == c.per_example / 2


def test_mobilenet_v2_matches_the_paper(mobilenet_v2):
    # Sandler et al. 2018, Table 6: 300 M multiply-adds at 224 x 224, width 1.0.
    c = count_flops(mobilenet_v2)
    assert c.complete, c.uncounted
    assert 0.28e9 <= c.multiply_adds <= 0.33e9


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
    m = _functional(keras.layers.Dense(4, use_bias=False, activation="relu"), shape=(3, 8))
    assert count_flops(m).per_example == 3 * (2 * 8 * 4 + 4)     # 3 rows, ReLU 1 per element


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
    assert not c.complete and c.train_step(4) is None
    assert format_flops(3.2e12, "FLOP/s") == "3.2 TFLOP/s"
