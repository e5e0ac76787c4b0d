"""Model FLOPs counted from a Keras model's layers, and TensorFlow's own estimate of a traced step.

``count_flops(model)`` walks a built Keras 3 model (Sequential, functional, or subclassed once
built; nested models and layers recurse) and counts each layer's forward FLOPs per example
from its weights' shapes and its input and output shapes: the functional graph's tensors
where the layer sits in one, else the shapes it was built with (``_build_shapes_dict``,
through ``compute_output_shape``).

Convention: a multiply-add is 2 FLOPs. Papers that report "FLOPs" for convolutional networks
usually mean multiply-adds (He et al. 2015, Table 1: ResNet-50 "3.8 x 10^9 FLOPs"; Sandler et
al. 2018, Table 6: MobileNetV2 300 M "MAdds"), so ``per_example / 2`` is the figure to set
beside them. Bias adds, activations, normalisation, pooling and elementwise merges add a few
FLOPs per element (the constants below); a training step is 3x the forward FLOPs (the
forward pass plus two matmuls of the same size in the backward pass, the convention behind
"model FLOPs utilization" in the PaLM paper, Chowdhery et al. 2022, Appendix B).

The count is split in two (``FlopCount.matmul_per_example`` and ``elementwise_per_example``):
the FLOPs of matmuls and convolutions (dense, einsum-dense, convolutions of every kind, dot,
attention's projections, scores and weighted sum), which is what a matmul benchmark's peak
measures and so what MFU counts, and the elementwise FLOPs (bias adds, activations,
normalisation, pooling, merges, softmax), which run far below that peak and are reported
apart. Papers' multiply-adds count the first part only (``multiply_adds``): MobileNetV2's
elementwise FLOPs add about 5 % to it.

A layer with weights this module has no formula for is named in ``FlopCount.uncounted``,
never counted as 0; a run then reports no MFU rather than a wrong one. Layers without
weights and without arithmetic worth counting (Reshape, Flatten, Dropout, padding,
Rescaling, Concatenate…) count 0. What a subclassed layer computes in its own ``call``
outside its sublayers (``x + y``) is not seen; its sublayers are.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Tuple

import keras

Shape = Tuple[Optional[int], ...]

# FLOPs per element of an activation function (a few: exp, divide, polynomial approximations).
ACTIVATION_FLOPS: Dict[str, int] = {
    "linear": 0, "relu": 1, "relu6": 2, "leaky_relu": 2, "elu": 3, "selu": 4, "exponential": 1,
    "sigmoid": 4, "hard_sigmoid": 3, "tanh": 4, "softmax": 5, "log_softmax": 5, "softplus": 4,
    "silu": 5, "swish": 5, "hard_silu": 4, "hard_swish": 4, "gelu": 8, "mish": 8,
}
UNKNOWN_ACTIVATION_FLOPS = 4
BATCHNORM_FLOPS = 4    # per element: subtract the mean, scale by 1/std, gamma, beta
LAYERNORM_FLOPS = 8    # per element: mean, variance (3), normalise (2), gamma and beta
SOFTMAX_FLOPS = 5      # per attention score


@dataclass(frozen=True)
class FlopCount:
    """Forward FLOPs per example of a model, layer by layer.

    Attributes:
        per_example: forward FLOPs per example of the layers counted (multiply-add = 2 FLOPs),
            both parts together (``matmul_per_example + elementwise_per_example``).
        uncounted: ``"name (ClassName)"`` of every layer with weights or compute not counted.
        by_layer: ``(layer name, forward FLOPs per example)`` in the model's order, both parts
            together; nested layers are named ``outer/inner``.
        elementwise_per_example: the part of ``per_example`` that is elementwise (bias adds,
            activations, normalisation, pooling, merges, softmax): not what a matmul peak
            measures. The rest is ``matmul_per_example``.

    Example:
        >>> c = FlopCount(per_example=2e6, uncounted=(), by_layer=(("dense", 2e6),),
        ...               elementwise_per_example=1e5)
        >>> c.complete, c.train_step(32), c.matmul_per_example, c.train_step(32, "elementwise")
        (True, 192000000.0, 1900000.0, 9600000.0)
    """

    per_example: float
    uncounted: Tuple[str, ...] = ()
    by_layer: Tuple[Tuple[str, float], ...] = ()
    elementwise_per_example: float = 0.0

    @property
    def complete(self) -> bool:
        """Whether every layer was counted (no ``uncounted`` layer)."""
        return not self.uncounted

    @property
    def matmul_per_example(self) -> float:
        """Forward FLOPs per example in matmuls and convolutions: what a matmul peak measures (MFU's part)."""
        return self.per_example - self.elementwise_per_example

    @property
    def multiply_adds(self) -> float:
        """``matmul_per_example / 2``: the "FLOPs" (multiply-adds) of the papers on CNNs, which
        count the matmuls and convolutions only."""
        return self.matmul_per_example / 2

    def train_step(self, batch: int, part: str = "all") -> Optional[float]:
        """FLOPs of one training step over ``batch`` examples: 3 x forward; None when not complete.

        Args:
            batch: examples per step (the global batch).
            part: ``"all"`` (``per_example``), ``"matmul"`` (matmuls and convolutions: what MFU
                counts) or ``"elementwise"``; each gets the same 3x.

        Raises:
            ValueError: for another ``part``.
        """
        forward = {"all": self.per_example, "matmul": self.matmul_per_example,
                   "elementwise": self.elementwise_per_example}.get(part)
        if forward is None:
            raise ValueError(f"part={part!r} is not allowed; one of 'all', 'matmul', 'elementwise'")
        if not self.complete:
            return None
        return 3.0 * forward * batch

    def summary(self) -> str:
        """One line: ``"4.09 GFLOPs per example (forward; 3.9 G in matmuls and convolutions, 0.19 G
        elementwise)"`` or what was not counted."""
        text = f"{self.per_example / 1e9:.3g} GFLOPs per example (forward"
        if self.elementwise_per_example:
            text += (f"; {self.matmul_per_example / 1e9:.3g} G in matmuls and convolutions, "
                     f"{self.elementwise_per_example / 1e9:.3g} G elementwise")
        text += ")"
        if self.uncounted:
            text += f"; not counted (layers: {', '.join(self.uncounted)})"
        return text


class _Unknown(Exception):
    """A shape the count needs is not known (a None dimension past the batch axis)."""


def count_flops(model: Any) -> FlopCount:
    """Forward FLOPs per example of a built Keras 3 model, from its layers.

    Args:
        model: a built ``keras.Model`` (Sequential, functional, or subclassed after
            ``build`` or a first call) or a built layer.

    Returns:
        A ``FlopCount``; layers it could not count are in ``uncounted``; its
        ``matmul_per_example`` and ``elementwise_per_example`` split the count.

    Raises:
        ValueError: for a model that is not built (no shapes to count from).

    Example:
        >>> m = keras.Sequential([keras.Input((8,)), keras.layers.Dense(4)])  # doctest: +SKIP
        >>> c = count_flops(m)   # 2*8*4 multiply-adds + 4 bias adds                # doctest: +SKIP
        >>> c.per_example, c.matmul_per_example, c.elementwise_per_example          # doctest: +SKIP
        (68.0, 64.0, 4.0)
    """
    if not getattr(model, "built", False):
        raise ValueError(f"model={getattr(model, 'name', model)!r} is not built; call "
                         "model.build(input_shape) or call it on a batch first")
    counter = _Counter()
    if _is_graph(model) or isinstance(model, keras.Sequential):
        counter.walk_model(model, "")
    else:
        counter.layer(model, None, None, "", top=True)
    return FlopCount(per_example=float(sum(f for _, f in counter.rows)),
                     uncounted=tuple(counter.uncounted), by_layer=tuple(counter.rows),
                     elementwise_per_example=float(counter.elementwise))


class _Counter:
    def __init__(self) -> None:
        self.rows: List[Tuple[str, float]] = []
        self.uncounted: List[str] = []
        self.elementwise = 0.0

    def walk_model(self, model: Any, prefix: str) -> None:
        if isinstance(model, keras.Sequential):
            functional = getattr(model, "_functional", None)
            if functional is None:
                for sub in model.layers:
                    self.layer(sub, None, None, prefix)
                return
            model = functional
        depths = sorted(model._nodes_by_depth, reverse=True)   # inputs first
        for depth in depths:
            for node in model._nodes_by_depth[depth]:
                ins = [tuple(t.shape) for t in node.arguments.keras_tensors]
                outs = [tuple(t.shape) for t in node.outputs]
                self.layer(node.operation, ins, outs, prefix)

    def layer(self, op: Any, ins: Optional[List[Shape]], outs: Optional[List[Shape]],
              prefix: str, top: bool = False) -> None:
        name = "" if top else prefix + op.name
        label = f"{name or op.name} ({type(op).__name__})"
        if isinstance(op, keras.layers.InputLayer):
            return
        if isinstance(op, keras.Layer) and (_is_graph(op) or isinstance(op, keras.Sequential)):
            self.walk_model(op, name + "/" if name else "")
            return
        if ins is None:
            ins = _build_shapes(op)
        try:
            split = _formula(op, ins or [], outs)
        except _Unknown:
            self.uncounted.append(label + ": shape unknown")
            return
        if split is not None:
            matmul, elementwise = split
            note = " (lookup: 0 FLOPs)" if isinstance(op, keras.layers.Embedding) else ""
            self.rows.append((name + note, float(matmul) + float(elementwise)))
            self.elementwise += float(elementwise)
            return
        if not isinstance(op, keras.Layer):          # a keras.ops call in a functional graph
            self.rows.append((name, 0.0))
            return
        subs = list(op._flatten_layers(include_self=False, recursive=False))
        sub_weights = {id(w) for s in subs for w in s.weights}
        own = [w for w in op.weights if id(w) not in sub_weights]
        if own:
            self.uncounted.append(label)
        elif subs:
            for sub in subs:
                self.layer(sub, None, None, name + "/" if name else "")
        else:
            self.rows.append((name, 0.0))           # no weights, nothing worth counting


def _is_graph(op: Any) -> bool:
    return hasattr(op, "_nodes_by_depth")


def _build_shapes(layer: Any) -> Optional[List[Shape]]:
    shapes = getattr(layer, "_build_shapes_dict", None)
    if not shapes:
        return None
    out = []
    for value in shapes.values():
        if _is_shape(value):
            out.append(tuple(value))
        elif isinstance(value, (list, tuple)):
            out.extend(tuple(v) for v in value if _is_shape(v))
    return out


def _is_shape(value: Any) -> bool:
    return isinstance(value, (list, tuple)) and all(v is None or isinstance(v, int) for v in value)


def _output_shapes(op: Any, ins: List[Shape], outs: Optional[List[Shape]]) -> List[Shape]:
    if outs:
        return outs
    try:
        shape = op.compute_output_shape(*ins) if len(ins) > 1 else op.compute_output_shape(ins[0])
    except Exception as e:   # a layer whose output shape needs more than its build shapes
        raise _Unknown(str(e)) from e
    if _is_shape(shape):
        return [tuple(shape)]
    return [tuple(s) for s in shape if _is_shape(s)]


def _n(shape: Shape) -> int:
    """Elements per example (every axis after the batch axis)."""
    dims = tuple(shape)[1:]
    if any(d is None for d in dims):
        raise _Unknown(f"shape {shape} has an unknown dimension")
    return int(math.prod(dims))


def _size(weight: Any) -> int:
    return int(math.prod(tuple(weight.shape)))


def _activation(fn: Any) -> int:
    name = getattr(fn, "__name__", None) or type(fn).__name__
    name = str(name).lower()
    return ACTIVATION_FLOPS.get(name, UNKNOWN_ACTIVATION_FLOPS)


def _epilogue(op: Any, n_out: int) -> float:
    """Bias add and fused activation, per output element."""
    extra = n_out if getattr(op, "bias", None) is not None else 0
    act = getattr(op, "activation", None)
    return float(extra + (_activation(act) * n_out if act is not None else 0))


def _layer_class(*names: str) -> Tuple[type, ...]:
    return tuple(c for c in (getattr(keras.layers, n, None) for n in names) if isinstance(c, type))


_TRANSPOSE = _layer_class("Conv1DTranspose", "Conv2DTranspose", "Conv3DTranspose")
_SEPARABLE = _layer_class("SeparableConv1D", "SeparableConv2D")
_DEPTHWISE = _layer_class("DepthwiseConv1D", "DepthwiseConv2D")
_CONV = _layer_class("Conv1D", "Conv2D", "Conv3D")
_BATCHNORM = _layer_class("BatchNormalization")
_LAYERNORM = _layer_class("LayerNormalization", "GroupNormalization", "UnitNormalization",
                          "RMSNormalization", "SpectralNormalization")
_POOL = _layer_class("MaxPooling1D", "MaxPooling2D", "MaxPooling3D",
                     "AveragePooling1D", "AveragePooling2D", "AveragePooling3D")
_GLOBAL_POOL = _layer_class("GlobalMaxPooling1D", "GlobalMaxPooling2D", "GlobalMaxPooling3D",
                            "GlobalAveragePooling1D", "GlobalAveragePooling2D",
                            "GlobalAveragePooling3D")
_MERGE = _layer_class("Add", "Subtract", "Multiply", "Average", "Maximum", "Minimum")
_ZERO_WITH_WEIGHTS = _layer_class("Embedding")
_ELEMENTWISE_OPS = {"Add", "Subtract", "Multiply", "Divide", "TrueDivide", "Maximum", "Minimum",
                    "Power", "Square", "Sqrt", "Exp", "Negative", "Abs"}


def _formula(op: Any, ins: List[Shape], outs: Optional[List[Shape]]) -> Optional[Tuple[float, float]]:
    """Forward FLOPs per example as ``(matmul and convolution, elementwise)``, or None when
    ``op`` has no formula here."""
    L = keras.layers
    if isinstance(op, _ZERO_WITH_WEIGHTS):
        return 0.0, 0.0
    if isinstance(op, L.MultiHeadAttention):
        return _attention(op)
    if not ins and not outs:
        raise _Unknown("no shapes")
    if isinstance(op, L.Dense):
        n_out = _n(_output_shapes(op, ins, outs)[0])
        return 2.0 * n_out * op.kernel.shape[0], _epilogue(op, n_out)
    if isinstance(op, L.EinsumDense):
        n_out = _n(_output_shapes(op, ins, outs)[0])
        return 2.0 * n_out * _contracted(op.equation, tuple(op.kernel.shape)), _epilogue(op, n_out)
    if isinstance(op, _TRANSPOSE):
        n_out = _n(_output_shapes(op, ins, outs)[0])
        spatial_in = _n(ins[0]) / op.kernel.shape[-1]
        return 2.0 * spatial_in * _size(op.kernel), _epilogue(op, n_out)
    if isinstance(op, _SEPARABLE):
        n_out = _n(_output_shapes(op, ins, outs)[0])
        spatial = n_out / op.filters
        return 2.0 * spatial * (_size(op.depthwise_kernel) + _size(op.pointwise_kernel)), _epilogue(op, n_out)
    if isinstance(op, _DEPTHWISE):
        n_out = _n(_output_shapes(op, ins, outs)[0])
        spatial = n_out / (op.kernel.shape[-2] * op.kernel.shape[-1])
        return 2.0 * spatial * _size(op.kernel), _epilogue(op, n_out)
    if isinstance(op, _CONV):
        n_out = _n(_output_shapes(op, ins, outs)[0])
        spatial = n_out / op.filters
        return 2.0 * spatial * _size(op.kernel), _epilogue(op, n_out)
    if isinstance(op, L.Dot):
        n_out = _n(_output_shapes(op, ins, outs)[0])
        axes = op.axes if isinstance(op.axes, (list, tuple)) else (op.axes, op.axes)
        return 2.0 * n_out * _dim(ins[0], axes[0]), 0.0
    if not isinstance(op, keras.Layer) and type(op).__name__ == "Matmul" and len(ins) == 2:
        return 2.0 * _n(_output_shapes(op, ins, outs)[0]) * _dim(ins[0], -1), 0.0   # keras.ops.matmul
    elementwise = _elementwise(op, ins, outs)
    return None if elementwise is None else (0.0, elementwise)


def _elementwise(op: Any, ins: List[Shape], outs: Optional[List[Shape]]) -> Optional[float]:
    """Forward FLOPs per example of a layer or op that is elementwise only, or None."""
    L = keras.layers
    if isinstance(op, _BATCHNORM):
        return float(BATCHNORM_FLOPS * _n(ins[0]))
    if isinstance(op, _LAYERNORM):
        return float(LAYERNORM_FLOPS * _n(ins[0]))
    if isinstance(op, _POOL):
        return float(math.prod(op.pool_size) * _n(_output_shapes(op, ins, outs)[0]))
    if isinstance(op, _GLOBAL_POOL):
        return float(_n(ins[0]))
    if isinstance(op, _MERGE):
        n_out = _n(_output_shapes(op, ins, outs)[0])
        return float(max(len(ins) - 1, 1) * n_out + (n_out if isinstance(op, L.Average) else 0))
    if isinstance(op, L.Activation):
        return float(_activation(op.activation) * _n(ins[0]))
    if isinstance(op, L.ReLU):
        return float(_n(ins[0]))
    if isinstance(op, _layer_class("LeakyReLU", "PReLU")):
        return float(2 * _n(ins[0]))
    if isinstance(op, L.ELU):
        return float(3 * _n(ins[0]))
    if isinstance(op, L.Softmax):
        return float(SOFTMAX_FLOPS * _n(ins[0]))
    if not isinstance(op, keras.Layer) and type(op).__name__ in _ELEMENTWISE_OPS and outs:
        return float(_n(outs[0]))                   # keras.ops in a functional graph
    return None


def _dim(shape: Shape, axis: int) -> int:
    d = tuple(shape)[axis]
    if d is None:
        raise _Unknown(f"shape {shape} has an unknown dimension")
    return int(d)


def _contracted(equation: str, kernel_shape: Tuple[int, ...]) -> int:
    """Product of the kernel's dimensions summed over in an EinsumDense equation."""
    lhs, out = equation.replace(" ", "").split("->")
    kernel = lhs.split(",")[1].replace("...", "")
    out = out.replace("...", "")
    return int(math.prod(d for letter, d in zip(kernel, kernel_shape) if letter not in out))


def _attention(op: Any) -> Tuple[float, float]:
    """(matmuls: projections, scores and weighted sum; elementwise: bias adds and softmax) of a
    built ``MultiHeadAttention``."""
    shapes = getattr(op, "_build_shapes_dict", None) or {}
    q = shapes.get("query_shape")
    v = shapes.get("value_shape")
    if q is None or v is None:
        raise _Unknown("MultiHeadAttention without build shapes")
    k = shapes.get("key_shape") or v
    tq, tv, tk = (_n(s) // _dim(s, -1) for s in (q, v, k))
    heads, key_dim, value_dim = op.num_heads, op.key_dim, op.value_dim or op.key_dim
    matmul = elementwise = 0.0
    for attr, rows in (("_query_dense", tq), ("_key_dense", tk), ("_value_dense", tv),
                       ("_output_dense", tq), ("_gate_dense", tq)):
        dense = getattr(op, attr, None)
        if dense is not None and getattr(dense, "kernel", None) is not None:
            matmul += 2.0 * rows * _size(dense.kernel)
            if getattr(dense, "bias", None) is not None:
                elementwise += rows * _size(dense.bias)
    scores = heads * tq * tk
    matmul += 2.0 * scores * key_dim + 2.0 * heads * tq * tv * value_dim
    return matmul, elementwise + SOFTMAX_FLOPS * scores


def tf_cost_estimate(step_fn: Callable[..., Any], *args: Any) -> Optional[float]:
    """TensorFlow's own FLOP estimate of ``step_fn`` traced on ``args``, or None if unavailable.

    The TF profiler's ``float_operation`` count (``tf.compat.v1.profiler.profile`` with
    ``ProfileOptionBuilder.float_operation()``) over the concrete function's graph. Where it
    differs from ``count_flops``: it counts what the graph executes, so a traced training step
    includes the backward pass and the optimizer's update, and the forward pass alone counts
    BiasAdd and a few elementwise ops but no activation, pooling or normalisation whose op has
    no registered flops statistic (Relu, MaxPool, FusedBatchNorm…); it misses every op without
    such a statistic and any op inside a nested function call or a loop body (a
    ``steps_per_execution`` loop counts one step). Per layer: a grouped convolution has no
    statistic (0); a transposed convolution's statistic runs over the output positions and
    differs from the multiply-adds it does (``count_flops`` counts one kernel per input
    position). It needs fully known shapes, so give
    ``args`` as real tensors or fully defined ``tf.TensorSpec``\\ s (a None dimension counts 0).

    Args:
        step_fn: a ``tf.function`` or a plain function (wrapped in one).
        *args: the arguments to trace it with.

    Returns:
        Total float operations of one call, or None when tracing or the profiler fails or
        counts nothing.

    Example:
        >>> import tensorflow as tf  # doctest: +SKIP
        >>> tf_cost_estimate(lambda a, b: tf.matmul(a, b), tf.ones((4, 8)), tf.ones((8, 2)))  # doctest: +SKIP
        128.0
    """
    import tensorflow as tf  # the module imports keras only; TF's profiler is needed just here

    fn = step_fn if hasattr(step_fn, "get_concrete_function") else tf.function(step_fn)
    try:
        graph = fn.get_concrete_function(*args).graph
        builder = tf.compat.v1.profiler.ProfileOptionBuilder
        options = builder(builder.float_operation()).with_empty_output().build()
        result = tf.compat.v1.profiler.profile(graph=graph, options=options)
    except Exception:  # a function that does not trace, a profiler this TF build lacks
        return None
    total = float(getattr(result, "total_float_ops", 0) or 0)
    return total or None


def format_flops(value: Optional[float], unit: str = "FLOPs") -> str:
    """``"4.09 G FLOPs"``-style text with an SI prefix; ``"n/a"`` for None.

    Example:
        >>> format_flops(4.09e9), format_flops(None), format_flops(2.5e13, "FLOP/s")
        ('4.09 GFLOPs', 'n/a', '25 TFLOP/s')
    """
    if value is None:
        return "n/a"
    for prefix, scale in (("P", 1e15), ("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(value) >= scale:
            return f"{value / scale:.3g} {prefix}{unit}"
    return f"{value:.3g} {unit}"


__all__ = ["FlopCount", "count_flops", "tf_cost_estimate", "format_flops", "ACTIVATION_FLOPS"]
