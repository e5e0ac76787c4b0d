"""``tfwb.tf.lab.graphs``: Grappler's constant folding, XLA's fusion counts, trace sizes.

The HLO parser is tested on fixed text (pure); the rest compiles tiny functions (no training).
"""
from __future__ import annotations

import pytest

HLO = """HloModule m, is_scheduled=true

%fused_computation (param_0.1: f32[4,4]) -> f32[4,4] {
  %param_0.1 = f32[4,4]{1,0} parameter(0)
  %c = f32[] constant(2)
  %b = f32[4,4]{1,0} broadcast(%c), dimensions={}
  %m = f32[4,4]{1,0} multiply(%param_0.1, %b), metadata={op_type="Mul" op_name="mul"}
  ROOT %t = f32[4,4]{1,0} tanh(%m)
}

ENTRY %main (arg0.1: f32[4,4]) -> (f32[4,4], f32[4,4]) {
  %arg0.1 = f32[4,4]{1,0} parameter(0), parameter_replication={false}
  %f = f32[4,4]{1,0} fusion(%arg0.1), kind=kLoop, calls=%fused_computation
  %d = f32[4,4]{1,0} dot(%f, %arg0.1), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT %r = (f32[4,4]{1,0}, f32[4,4]{1,0}) tuple(%f, %d)
}
"""


def test_hlo_opcodes_reads_every_computation_and_keys_the_entry():
    from tfwb.tf.lab.graphs import hlo_opcodes

    got = hlo_opcodes(HLO)
    assert got == {"fused_computation": ["parameter", "constant", "broadcast", "multiply", "tanh"],
                   "ENTRY": ["parameter", "fusion", "dot", "tuple"]}


@pytest.mark.tf
def test_grappler_folds_a_constant_subexpression():
    import tensorflow as tf

    from tfwb.tf.lab import graphs

    def folded(x):
        return x * (tf.sqrt(tf.constant(16.0)) * 0.5 + 1.0)

    counts = graphs.op_counts(folded, tf.ones((4, 4)))
    assert counts.traced["Sqrt"] == 1 and counts.compute(counts.traced) == 4
    assert counts.optimized["Sqrt"] == 0 and counts.compute(counts.optimized) == 1   # x * 3.0


@pytest.mark.tf
def test_xla_fuses_an_elementwise_chain_into_one_kernel():
    import tensorflow as tf

    from tfwb.tf.lab import graphs

    fusion = graphs.xla_fusion(lambda x: tf.nn.relu(x * 2.0 + 1.0) - tf.tanh(x), tf.ones((64, 64)))
    assert fusion.lowered == 5                     # multiply, add, maximum, tanh, subtract
    assert (fusion.kernels, fusion.fusions, fusion.fused) == (1, 1, 5)
    assert "1 kernel(s)" in fusion.describe()


@pytest.mark.tf
def test_a_python_loop_is_unrolled_and_a_tf_range_loop_is_not():
    import tensorflow as tf

    from tfwb.tf.lab import graphs

    def unrolled(x):
        for _ in range(50):
            x = x * 1.01
        return x

    def looped(x):
        for _ in tf.range(50):
            x = x * 1.01
        return x

    x = tf.ones(3)
    big, small = graphs.trace_size(unrolled, x), graphs.trace_size(looped, x)
    assert big.ops >= 100 > 4 * small.ops
    assert big.trace_s > 0 and small.trace_s > 0
