"""Looking inside a ``tf.function``: the ops it traced, the ops Grappler leaves, Grappler on and off.

``op_counts(fn, *args)`` traces ``fn`` for ``args`` and counts op types twice: in the graph
as traced, and after Grappler, TensorFlow's graph optimizer, has run its default passes
(common-subexpression elimination, constant folding, arithmetic simplification, ...) the way
it does before a function first runs. ``grappler(False)`` switches those passes off for the
functions traced and first run inside the block, and restores the previous settings after.

Grappler's optimized graph is read with ``tensorflow.python.grappler.tf_optimizer``, the
module TensorFlow's own Grappler tests use (not a public API: ``op_counts`` returns
``optimized=None`` if it moves).
"""
from __future__ import annotations

import contextlib
from collections import Counter
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Optional

import tensorflow as tf

#: Op types that are bookkeeping, not computation (left out of ``compute`` counts).
BOOKKEEPING = frozenset({"Placeholder", "Identity", "Const", "NoOp", "_Arg", "_Retval"})


@dataclass(frozen=True)
class OpCounts:
    """Op types in a traced graph, and in the same graph after Grappler (``None`` if unavailable)."""

    traced: Counter
    optimized: Optional[Counter]

    @staticmethod
    def compute(counts: Optional[Counter]) -> Optional[int]:
        """How many ops do work (bookkeeping ops left out)."""
        if counts is None:
            return None
        return sum(n for op, n in counts.items() if op not in BOOKKEEPING)

    def describe(self) -> str:
        """One line each: the compute ops as traced and after Grappler."""
        def line(c: Optional[Counter]) -> str:
            if c is None:
                return "unavailable"
            return ", ".join(f"{op} x{n}" if n > 1 else op
                             for op, n in sorted(c.items()) if op not in BOOKKEEPING)
        return (f"traced:          {self.compute(self.traced)} ops ({line(self.traced)})\n"
                f"after Grappler:  {self.compute(self.optimized)} ops ({line(self.optimized)})")


def _grappler_optimized(concrete) -> Optional[Counter]:
    try:
        from tensorflow.core.protobuf import config_pb2, meta_graph_pb2
        from tensorflow.python.grappler import tf_optimizer
    except ImportError:
        return None
    graph = concrete.graph
    meta = tf.compat.v1.train.export_meta_graph(graph_def=graph.as_graph_def(), graph=graph)
    fetch = meta_graph_pb2.CollectionDef()
    for t in concrete.outputs:
        fetch.node_list.value.append(t.name)
    meta.collection_def["train_op"].CopyFrom(fetch)     # what Grappler must keep
    optimized = tf_optimizer.OptimizeGraph(config_pb2.ConfigProto(), meta)
    return Counter(node.op for node in optimized.node)


def op_counts(fn: Callable, *args: Any) -> OpCounts:
    """Count the op types of ``fn`` traced for ``args``, before and after Grappler.

    Args:
        fn: a ``tf.function`` (a plain Python function is wrapped in one).
        *args: example arguments (tensors) to trace with.

    Example:
        >>> print(op_counts(tf.function(lambda x: tf.sqrt(x**2 + x**2)), tf.ones(3)).describe())  # doctest: +SKIP
    """
    if not hasattr(fn, "get_concrete_function"):
        fn = tf.function(fn)
    concrete = fn.get_concrete_function(*args)
    traced = Counter(op.type for op in concrete.graph.get_operations())
    return OpCounts(traced=traced, optimized=_grappler_optimized(concrete))


@contextlib.contextmanager
def grappler(enabled: bool) -> Iterator[None]:
    """Run the block with Grappler's passes on or off, then restore the previous settings.

    Functions are optimized when first run, so trace and first-run them inside the block
    (a ``tf.function`` already run keeps the graph it was optimized into).

    Example:
        >>> with grappler(False):  # doctest: +SKIP
        ...     t = time_calls(lambda: tf.function(f)(x))
    """
    before = tf.config.optimizer.get_experimental_options()
    tf.config.optimizer.set_experimental_options({"disable_meta_optimizer": not enabled})
    try:
        yield
    finally:
        restore = {k: v for k, v in before.items()}
        restore.setdefault("disable_meta_optimizer", False)
        tf.config.optimizer.set_experimental_options(restore)
