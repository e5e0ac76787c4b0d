"""Where TensorFlow ran each op, and where it copied tensors between devices.

``placement(fn)`` runs ``fn()`` once with TensorFlow's device-placement logging on
(``tf.debugging.set_log_device_placement(True)``) and returns a ``Placement``: one row
per op that ran, with its device, the copies between devices (``_Send``/``_Recv``
pairs), and the collective ops (a distribution strategy's all-reduce).

Two sources, because TF's own log is silent in most processes:

- **TensorFlow's own log.** ``tf.debugging.set_log_device_placement(True)`` works only
  when it comes before TF's runtime starts (the first op, ``list_logical_devices``,
  ``tfwb.setup_devices()`` ...): switched on later it prints nothing, whatever the log
  level (TF 2.21). Switched on in time, it cannot be switched off again: for the rest of
  the process TF's graph placer prints ``name: (Type): /job:.../device:CPU:0`` for every
  node of every graph it instantiates, to file descriptor 1, and, when TF's C++ log
  level lets INFO through (``TF_CPP_MIN_LOG_LEVEL=0``), ``Executing op MatMul in device
  ...`` lines to file descriptor 2. Colab and nbval show neither descriptor. While
  ``fn`` runs both are captured; the placement lines are parsed into ``log_rows`` and
  held back, every other line is written back where it was going.
- **The graphs TF instantiated.** While ``fn`` runs, TF's eager context is asked to keep
  every graph it instantiates, as partitioned for the devices
  (``RunMetadata.function_graphs``): each node with the device it runs on, and the
  ``_Send``/``_Recv`` nodes the partitioner inserted wherever a tensor crosses devices.
  That is ``rows``. It is read with ``tensorflow.python.eager.context``
  (``enable_graph_collection``, the calls TF's own ``collect_graphs`` test helper makes;
  not a public API): if it moves, ``rows`` is empty and ``metadata_available`` is False.

TF keeps a graph when it *instantiates* it: switching placement logging on makes it
instantiate every function (and eager op) afresh on its next call, once. A callable
already placed by an earlier ``placement`` call in this process records nothing new
(``Placement.recorded`` is False, and its text says so): place a new function, or the
first step of a freshly built model.

Global state: the placement-logging flag is restored afterwards (also when ``fn``
raises). Before switching it on, ``placement`` calls ``tfwb.setup_devices()`` (which
starts TF's runtime), so that the flag never reaches the runtime's configuration and
nothing prints after the call.
"""
from __future__ import annotations

import html
import re
import sys
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple

import tensorflow as tf

from tfwb.tf.runner.devices import setup_devices
from tfwb.tf.runner.quiet import ABSL_PREAMBLE, native_captured

__all__ = ["Placed", "Placement", "placement", "parse_log", "short_device", "rows_from_metadata",
           "GrowthAttempt", "try_memory_growth", "OP", "COPY", "COLLECTIVE", "CALL"]

#: Row kinds: an op that computes, a copy between devices, a collective op (all-reduce,
#: all-gather...), and a whole ``tf.function`` call (the log's only line for a function).
OP, COPY, COLLECTIVE, CALL = "op", "copy", "collective", "function call"

#: Node types that only pass arguments and results in and out of a graph.
PLUMBING = frozenset({"_Arg", "_Retval", "_DeviceArg", "_DeviceRetval", "NoOp"})
#: Node types that move a tensor from one device to another.
COPY_TYPES = frozenset({"_Send", "_Recv", "_HostSend", "_HostRecv"})

_DEVICE = r"/job:[^\s]+?/device:[A-Za-z_]+:\d+"
# "Executing op MatMul in device /job:localhost/replica:0/task:0/device:CPU:0" (eager; absl prefix or none)
_EXECUTING = re.compile(rf"Executing op (?P<op>\S+) in device (?P<device>{_DEVICE}|<unspecified>)")
# "MatMul: (MatMul): /job:localhost/replica:0/task:0/device:CPU:0" (the graph placer's line)
_PLACER = re.compile(rf"(?:^|\] )(?P<op>[^\s:]+): \((?P<type>[A-Za-z_][\w]*)\): (?P<device>{_DEVICE})\s*$")


def short_device(name: str) -> str:
    """``"/job:localhost/replica:0/task:0/device:CPU:0"`` -> ``"CPU:0"``; other jobs keep job and task.

    Example:
        >>> short_device("/job:localhost/replica:0/task:0/device:GPU:1")
        'GPU:1'
        >>> short_device("/job:worker/replica:0/task:1/device:CPU:0")
        'worker 1 CPU:0'
        >>> short_device("/device:CPU:1")
        'CPU:1'
    """
    m = re.match(r"/job:(?P<job>[^/]+)/replica:\d+/task:(?P<task>\d+)/device:(?P<dev>.+)$", name or "")
    if not m:
        bare = re.match(r"/device:(?P<dev>.+)$", name or "")     # a logical device's name: /device:CPU:1
        return bare.group("dev") if bare else (name or "?")
    if m.group("job") == "localhost":
        return m.group("dev")
    return f"{m.group('job')} {m.group('task')} {m.group('dev')}"


@dataclass(frozen=True)
class Placed:
    """One op and the device it ran on.

    Attributes:
        op (str): the node's name (``"dense/MatMul"``), or the op's name for an eager op.
        op_type (str): the kernel type that ran (``"_MklMatMul"``, ``"_Send"``); for a
            log line of an eager op, the op's name again.
        device (str): short device name (``short_device``), e.g. ``"CPU:0"``, ``"GPU:0"``.
        kind (str): ``OP``, ``COPY``, ``COLLECTIVE`` or ``CALL``.
        detail (str): for a copy, ``"CPU:1 -> CPU:0"``; else ``""``.
    """

    op: str
    op_type: str
    device: str
    kind: str = OP
    detail: str = ""


def _kind(op_type: str, name: str = "") -> str:
    if op_type in COPY_TYPES:
        return COPY
    if op_type.startswith(("Collective", "Nccl")):
        return COLLECTIVE
    if name.startswith("__inference_") or op_type in ("PartitionedCall", "StatefulPartitionedCall"):
        return CALL
    return OP


def parse_log(text: str) -> Tuple[Placed, ...]:
    """The placement lines of TensorFlow's log, as rows; every other line is ignored.

    Reads both forms TF writes: the eager runtime's ``Executing op X in device D`` (a
    ``tf.function`` call shows as one op named ``__inference_...``) and the graph
    placer's ``name: (Type): D`` (printed for every node of a function, but only when
    logging was on before TF's runtime started).

    Example:
        >>> parse_log("I0000 00:00:1.2 77 execute.cc:1775] Executing op MatMul in device "
        ...           "/job:localhost/replica:0/task:0/device:GPU:0")[0]
        Placed(op='MatMul', op_type='MatMul', device='GPU:0', kind='op', detail='')
    """
    rows: List[Placed] = []
    for line in text.splitlines():
        m = _EXECUTING.search(line)
        if m:
            op = m.group("op")
            rows.append(Placed(op, op, short_device(m.group("device")), _kind(op, op)))
            continue
        m = _PLACER.search(line.strip())
        if m:
            rows.append(Placed(m.group("op"), m.group("type"), short_device(m.group("device")),
                               _kind(m.group("type"), m.group("op"))))
    return tuple(rows)


def _is_placement_line(line: str) -> bool:
    return bool(_EXECUTING.search(line) or _PLACER.search(line.strip()))


def _copy_detail(node) -> str:
    attr = node.attr
    src = attr["send_device"].s.decode() if "send_device" in attr else ""
    dst = attr["recv_device"].s.decode() if "recv_device" in attr else ""
    if src and dst:
        return f"{short_device(src)} -> {short_device(dst)}"
    return ""


def rows_from_metadata(metadata: Any) -> Tuple[Placed, ...]:
    """Every node of every partitioned graph in a ``RunMetadata``, with its device.

    Argument and result plumbing (``_Arg``, ``_Retval``, ``NoOp``) is left out. A copy
    appears twice, as the ``_Send`` on the device it leaves and the ``_Recv`` (or
    ``_HostRecv``) on the device it reaches, both with ``detail`` = ``"from -> to"``.
    A graph has one partition per device; where TF recorded two for one device (an
    eager op that oneDNN rewrote, e.g. ``MatMul`` into ``_MklMatMul``, is instantiated
    twice) only the last, the one that ran, is kept.
    """
    rows: List[Placed] = []
    for function_graph in getattr(metadata, "function_graphs", ()):
        last_per_device: Dict[str, Any] = {}
        for graph in function_graph.partition_graphs:
            devices = {node.device for node in graph.node if node.device}
            last_per_device[min(devices) if devices else ""] = graph
        for graph in last_per_device.values():
            for node in graph.node:
                if node.op in PLUMBING:
                    continue
                kind = _kind(node.op, node.name)
                rows.append(Placed(node.name, node.op, short_device(node.device), kind,
                                   _copy_detail(node) if kind == COPY else ""))
    return tuple(rows)


@dataclass(frozen=True)
class Placement:
    """What ``placement(fn)`` saw: ops by device, copies between devices, TF's log.

    Attributes:
        rows (tuple[Placed]): every op of the graphs TF instantiated while ``fn`` ran, by
            device (empty if ``metadata_available`` is False).
        log_rows (tuple[Placed]): the placement lines TensorFlow's log printed, parsed
            (often none: see the module docstring).
        log_lines (int): how many placement lines the log printed.
        metadata_available (bool): whether TF's collected graphs (``RunMetadata``) could be read.
        value: what ``fn`` returned.
    """

    rows: Tuple[Placed, ...]
    log_rows: Tuple[Placed, ...] = ()
    log_lines: int = 0
    metadata_available: bool = True
    value: Any = field(default=None, repr=False, compare=False)

    @property
    def recorded(self) -> bool:
        """True when at least one op was recorded (from the graphs or from the log)."""
        return bool(self.rows or self.log_rows)

    def devices(self, kinds: Iterable[str] = (OP, COLLECTIVE)) -> Dict[str, int]:
        """Ops per device (by default computing and collective ops; copies apart), sorted by device."""
        wanted = set(kinds)
        counts = Counter(r.device for r in self.rows if r.kind in wanted)
        return dict(sorted(counts.items()))

    @property
    def copies(self) -> Dict[str, int]:
        """``{"CPU:1 -> CPU:0": n}``: tensors copied between devices (each copy counted once)."""
        counts = Counter(r.detail or r.device for r in self.rows if r.kind == COPY and r.op_type.endswith("Recv"))
        return dict(sorted(counts.items()))

    @property
    def collectives(self) -> Tuple[Placed, ...]:
        """The collective ops (all-reduce and the like), one per device that ran them."""
        return tuple(r for r in self.rows if r.kind == COLLECTIVE)

    def main_device(self) -> Optional[str]:
        """The device that ran the most computing ops (``None`` when nothing was recorded)."""
        counts = self.devices(kinds=(OP,))
        return max(counts, key=counts.get) if counts else None

    def on(self, device: str) -> Tuple[Placed, ...]:
        """The rows that ran on ``device`` (short name, e.g. ``"CPU:1"``)."""
        return tuple(r for r in self.rows if r.device == device)

    def summary_rows(self) -> List[Tuple[str, str, int, str]]:
        """``(device, kind, count, op types)`` per device and kind: a table that stays short."""
        groups: Dict[Tuple[str, str], Counter] = {}
        for r in self.rows:
            groups.setdefault((r.device, r.kind), Counter())[r.op_type] += 1
        out = []
        for (device, kind), types in sorted(groups.items()):
            shown = ", ".join(f"{t} x{n}" if n > 1 else t for t, n in types.most_common(6))
            more = len(types) - 6
            out.append((device, kind, sum(types.values()), shown + (f", +{more} more types" if more > 0 else "")))
        return out

    def text(self) -> str:
        """One paragraph: ops per device, copies, collectives, and what TF's own log printed."""
        if not self.metadata_available:
            head = "the graphs TF ran could not be read in this TensorFlow version"
        elif not self.recorded:
            head = ("no new graph was instantiated, so there is nothing to show: TF records placement "
                    "when it first instantiates a graph with logging on, and this callable's graphs "
                    "had been placed that way before in this process (place a new function)")
        else:
            per_device = ", ".join(f"{d} {n}" for d, n in self.devices().items()) or "none"
            copies = ", ".join(f"{k} x{n}" for k, n in self.copies.items()) or "none"
            head = f"ops per device: {per_device}; copies between devices: {copies}"
            if self.collectives:
                head += f"; collective ops: {len(self.collectives)}"
        if self.log_lines:
            log_devices = Counter(r.device for r in self.log_rows)
            log = (f"TensorFlow's placement log printed {self.log_lines} line(s) ("
                   + ", ".join(f"{d} {n}" for d, n in sorted(log_devices.items())) + ")")
        else:
            log = ("TensorFlow's placement log printed nothing (it prints only where "
                   "set_log_device_placement(True) came before TF's runtime started)")
        return f"{head}. {log}."

    __str__ = text

    def __repr__(self) -> str:
        return f"Placement({self.text()})"

    def _repr_html_(self) -> str:
        head = "".join(f'<th style="padding:1px 6px;border-bottom:1px solid #999;text-align:left">{h}</th>'
                       for h in ("device", "kind", "ops", "op types"))
        body = "".join(
            "<tr>" + "".join(f'<td style="padding:1px 6px;text-align:left">{html.escape(str(c))}</td>'
                             for c in row) + "</tr>"
            for row in self.summary_rows())
        caption = html.escape(self.text())
        return ('<table class="tfwb-placement" style="border-collapse:collapse;font-size:12px">'
                f'<thead><tr>{head}</tr></thead><tbody>{body}</tbody>'
                f'<caption style="caption-side:bottom;text-align:left;padding:2px 6px;color:#555">'
                f"{caption}</caption></table>")


def _graph_collector():
    """TF's eager context, if it offers graph collection in this version; else None."""
    try:
        from tensorflow.python.eager import context
    except ImportError:                       # pragma: no cover - TF moved it
        return None
    ctx = context.context()
    needed = ("enable_graph_collection", "disable_graph_collection", "export_run_metadata")
    return ctx if all(hasattr(ctx, n) for n in needed) else None


def _logging_flag() -> bool:
    try:
        from tensorflow.python.eager import context

        return bool(context.context().log_device_placement)
    except Exception:  # noqa: BLE001 - unknown in this TF version: assume off
        return False


def _write_back(text: str, stream) -> None:
    kept = "".join(line for line in text.splitlines(keepends=True) if not _is_placement_line(line))
    if kept:
        stream.write(kept)
        stream.flush()


def placement(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Placement:
    """Run ``fn(*args, **kwargs)`` once with placement logging on; say where each op ran.

    Args:
        fn: any callable that runs TensorFlow ops (eager ops, ``tf.function`` calls, a
            training step). Its graphs are recorded the first time they run with logging
            on (see the module docstring).
        *args, **kwargs: passed to ``fn``.

    Returns:
        A ``Placement`` (``value`` holds what ``fn`` returned). Its HTML repr is a table of
        devices, kinds and op types, with a caption that counts ops per device and copies.

    Raises:
        ValueError: if ``fn`` is not callable (before anything runs).
        Whatever ``fn`` raises, after restoring the logging flag (the captured log is
        written back to stderr then).

    Example:
        >>> p = placement(lambda: tf.matmul(tf.ones((2, 2)), tf.ones((2, 2))))   # doctest: +SKIP
        >>> p.devices()                                                           # doctest: +SKIP
        {'CPU:0': 1}
    """
    if not callable(fn):
        raise ValueError(f"fn={fn!r} is not allowed; fn must be a callable that runs TensorFlow ops")
    setup_devices()                 # start the runtime first (see the module docstring)
    ctx = _graph_collector()
    previous = _logging_flag()
    metadata = None
    if ctx is not None:
        ctx.export_run_metadata()   # drop whatever an earlier collection left behind
    with native_captured(1) as out, native_captured(2) as err:
        tf.debugging.set_log_device_placement(True)
        if ctx is not None:
            ctx.enable_graph_collection()
        try:
            value = fn(*args, **kwargs)
            if ctx is not None:
                metadata = ctx.export_run_metadata()
        finally:
            if ctx is not None:
                ctx.disable_graph_collection()
            tf.debugging.set_log_device_placement(previous)
    err.replay(drop=lambda line: _is_placement_line(line) or line.startswith(ABSL_PREAMBLE))
    _write_back(out.text, sys.stdout)
    log_rows = parse_log(out.text + "\n" + err.text)
    rows = rows_from_metadata(metadata) if metadata is not None else ()
    return Placement(rows=rows, log_rows=log_rows, log_lines=len(log_rows),
                     metadata_available=metadata is not None, value=value)


# -- memory growth ---------------------------------------------------------------------------
@dataclass(frozen=True)
class GrowthAttempt:
    """What asking for GPU memory growth did, per GPU, in words.

    Attributes:
        gpus (tuple[str]): the physical GPUs TF sees (empty on a CPU-only machine).
        outcomes (tuple[str]): one per GPU: ``"on"``, ``"off"``, or the exact text of
            the ``RuntimeError`` TF raised.
        too_late (bool): TF refused because its runtime had already started.
        meaning (str): what the outcome means, one or two sentences.
    """

    gpus: Tuple[str, ...]
    outcomes: Tuple[str, ...]
    too_late: bool
    meaning: str

    def text(self) -> str:
        if not self.gpus:
            return self.meaning
        lines = [f"{gpu}: {outcome}" for gpu, outcome in zip(self.gpus, self.outcomes)]
        return "\n".join(lines + [self.meaning])

    __str__ = text


def try_memory_growth(enable: bool = True, *, config: Any = None) -> GrowthAttempt:
    """Ask TF for memory growth on every GPU now, and report what happened (never raises for it).

    ``tf.config.experimental.set_memory_growth`` must come before TF's runtime starts
    (the first op, ``list_logical_devices``, ``tfwb.setup_devices()`` ...); later it raises
    ``RuntimeError`` -- which means "too late", not that anything fell back to the CPU.

    Args:
        enable: the growth setting to ask for.
        config: the ``tf.config`` module to use (tests pass a fake); None: TensorFlow's.

    Raises:
        ValueError: for a non-bool ``enable``.
    """
    if not isinstance(enable, bool):
        raise ValueError(f"enable={enable!r} is not allowed; enable must be True or False")
    config = tf.config if config is None else config
    gpus = config.list_physical_devices("GPU")
    if not gpus:
        return GrowthAttempt((), (), False, (
            "no GPU here: memory growth is a GPU allocator setting (on the CPU, TF allocates host "
            "memory as it goes), and set_memory_growth on a CPU device raises ValueError"))
    outcomes, too_late = [], False
    for gpu in gpus:
        try:
            config.experimental.set_memory_growth(gpu, enable)
            outcomes.append("on" if config.experimental.get_memory_growth(gpu) else "off")
        except RuntimeError as e:
            too_late = True
            outcomes.append(f"RuntimeError: {e}")
    if too_late:
        meaning = ("TensorFlow's runtime had already started, so its GPU allocator was already set up: "
                   "the setting came too late and changed nothing. Nothing moved to the CPU; the GPU is "
                   "used as before. To set it, restart the kernel and do it before any TensorFlow work "
                   "(or set TF_FORCE_GPU_ALLOW_GROWTH=true before TensorFlow starts).")
    else:
        meaning = ("set before the runtime started: TF's GPU allocator will start small and grow as the "
                   "program needs memory, instead of mapping nearly all of each GPU's memory at start.")
    return GrowthAttempt(tuple(g.name for g in gpus), tuple(outcomes), too_late, meaning)
