"""Looking inside a ``tf.function``: the ops it traced, the ops Grappler leaves, what XLA fuses.

``op_counts(fn, *args)`` traces ``fn`` for ``args`` and counts op types twice: in the graph
as traced, and after Grappler, TensorFlow's graph optimizer, has run its default passes
(common-subexpression elimination, constant folding, arithmetic simplification, ...) the way
it does before a function first runs. ``grappler(False)`` switches those passes off for the
functions traced and first run inside the block, and restores the previous settings after.

``xla_fusion(fn, *args)`` compiles ``fn`` with XLA for ``args`` and counts HLO instructions
before and after XLA's optimizer (``experimental_get_compiler_ir``): how many ops the
function lowers to, how many kernels are left, and how many of them are fused computations.
``trace_size(fn, *args)`` traces once and returns the graph's op count and the trace time
(a Python loop is unrolled into the graph; a loop over ``tf.range`` is one ``While`` op).

Grappler's optimized graph is read with ``tensorflow.python.grappler.tf_optimizer``, the
module TensorFlow's own Grappler tests use (not a public API: ``op_counts`` returns
``optimized=None`` if it moves).
"""
from __future__ import annotations

import contextlib
import re
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterator, List, Optional

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


#: HLO opcodes that move or name data rather than compute (left out of ``XlaFusion`` counts).
HLO_BOOKKEEPING = frozenset({"parameter", "constant", "tuple", "get-tuple-element", "reshape", "bitcast",
                             "broadcast", "copy"})

_COMPUTATION = re.compile(r"^(?:ENTRY\s+)?%?([\w.-]+)\s.*\{\s*$")
_INSTRUCTION = re.compile(r"^\s+(?:ROOT\s+)?%?[\w.-]+\s*=\s*.*?\s([a-z][a-z0-9-]*)\(")


def hlo_opcodes(text: str) -> Dict[str, List[str]]:
    """The opcodes of each computation in an HLO module's text, by computation name.

    The entry computation is keyed ``"ENTRY"``.

    Example:
        >>> hlo = ("HloModule m\\n\\n%fused (p: f32[2]) -> f32[2] {\\n  %p = f32[2]{0} parameter(0)\\n"
        ...        "  ROOT %t = f32[2]{0} tanh(%p)\\n}\\n\\nENTRY %main (a: f32[2]) -> f32[2] {\\n"
        ...        "  %a = f32[2]{0} parameter(0)\\n  ROOT %f = f32[2]{0} fusion(%a), kind=kLoop, calls=%fused\\n}\\n")
        >>> hlo_opcodes(hlo)
        {'fused': ['parameter', 'tanh'], 'ENTRY': ['parameter', 'fusion']}
    """
    out: Dict[str, List[str]] = {}
    current: Optional[str] = None
    for line in text.splitlines():
        if current is None:
            m = _COMPUTATION.match(line)
            if m and not line.startswith("HloModule"):
                current = "ENTRY" if line.startswith("ENTRY") else m.group(1)
                out[current] = []
            continue
        if line.strip() == "}":
            current = None
            continue
        m = _INSTRUCTION.match(line)
        if m:
            out[current].append(m.group(1))
    return out


def _work(opcodes: List[str]) -> List[str]:
    return [op for op in opcodes if op not in HLO_BOOKKEEPING]


@dataclass(frozen=True)
class XlaFusion:
    """HLO instruction counts of one XLA-compiled function, before and after XLA's optimizer.

    Attributes:
        lowered: compute instructions the function lowers to (``stage="hlo"``), bookkeeping
            (``HLO_BOOKKEEPING``) left out.
        kernels: compute instructions left in the optimized entry computation: what runs,
            one kernel each (a fusion is one kernel).
        fusions: how many of those kernels are fused computations (``fusion`` instructions).
        fused: compute instructions inside the fused computations.
        opcodes: the optimized module's opcodes by computation (``hlo_opcodes``).
    """

    lowered: int
    kernels: int
    fusions: int
    fused: int
    opcodes: Dict[str, List[str]]

    def describe(self) -> str:
        """One line: ops lowered, kernels left, and how many are fusions of how many ops."""
        return (f"{self.lowered} HLO ops lowered -> {self.kernels} kernel(s) after XLA's optimizer, "
                f"{self.fusions} of them fused computations holding {self.fused} ops")


def xla_fusion(fn: Callable, *args: Any) -> XlaFusion:
    """Compile ``fn`` with XLA for ``args`` and count what its optimizer fused.

    Args:
        fn: a plain Python function or a ``tf.function`` (its Python function is recompiled
            with ``jit_compile=True``).
        *args: example arguments (tensors).

    Returns:
        The counts (``XlaFusion``). Nothing runs: ``experimental_get_compiler_ir`` only compiles.

    Example:
        >>> print(xla_fusion(lambda x: tf.nn.relu(x * 2.0 + 1.0) - tf.tanh(x), tf.ones((8, 8))).describe())  # doctest: +SKIP
        5 HLO ops lowered -> 1 kernel(s) after XLA's optimizer, 1 of them fused computations holding 5 ops
    """
    python_fn = getattr(fn, "python_function", fn)
    compiled = tf.function(python_fn, jit_compile=True)
    ir = compiled.experimental_get_compiler_ir(*args)
    lowered = hlo_opcodes(ir(stage="hlo"))
    optimized = hlo_opcodes(ir(stage="optimized_hlo"))
    entry = _work(optimized.get("ENTRY", []))
    fusion_names = set()
    for line in ir(stage="optimized_hlo").splitlines():
        if " fusion(" in line:
            m = re.search(r"calls=%?([\w.-]+)", line)
            if m:
                fusion_names.add(m.group(1))
    fused = sum(len(_work(optimized.get(name, []))) for name in fusion_names)
    return XlaFusion(lowered=sum(len(_work(ops)) for ops in lowered.values()), kernels=len(entry),
                     fusions=entry.count("fusion"), fused=fused, opcodes=optimized)


@dataclass(frozen=True)
class TraceSize:
    """A function traced once: its graph's op count and how long tracing took."""

    ops: int
    trace_s: float


def trace_size(fn: Callable, *args: Any) -> TraceSize:
    """Trace ``fn`` (a fresh ``tf.function`` of it) for ``args``; count its ops and time the trace.

    Example:
        >>> trace_size(lambda x: x * 2.0, tf.ones(3)).ops  # doctest: +SKIP
        4
    """
    python_fn = getattr(fn, "python_function", fn)
    start = time.perf_counter()
    concrete = tf.function(python_fn).get_concrete_function(*args)
    return TraceSize(ops=len(concrete.graph.get_operations()), trace_s=time.perf_counter() - start)
