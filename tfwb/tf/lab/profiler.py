"""The TensorFlow profiler, read inside the notebook: capture a window of steps, summarize it.

``ProfilerSession`` wraps ``tf.profiler.experimental.start/stop`` for a ``with`` block
and finds the ``.xplane.pb`` the capture wrote. ``ProfileWindow`` is a run observer
that captures ``steps`` calls after warm-up, each marked with a step ``Trace`` so the
profiler's step-time breakdown works (tracing and compilation stay out of the capture).

``profile(cfg, steps=5)`` runs ``cfg`` with a ``ProfileWindow`` and TensorBoard
``Scalars``, converts the capture offline with xprof (the converter TensorBoard's
Profile tab uses; no TensorBoard server needed) and returns a ``ProfileReport``:
the profiler's step-time breakdown (input / compute / other) beside tfwb's own timing
of the same steps, the profiler's input-bound verdict (its words) beside tfwb's,
and the ops with the most self time (names as in the trace). The logdir it leaves
behind opens in TensorBoard (Scalars and Profile tabs).

Never take throughput from a profiled run: profiling adds overhead
(``benchmarks/profile_overhead.py`` measures how much).
"""
from __future__ import annotations

import glob
import html
import json
import os
import tempfile
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import tensorflow as tf

from tfwb import render as report_tables
from tfwb.analysis import diagnosis
from tfwb.config import RunConfig
from tfwb.observers import Observer, Progress, RunState
from tfwb.records import RunResult
from tfwb.tf.runner.quiet import is_tf_log, native_stderr_captured
from tfwb.tf.lab.tensorboard import Scalars, check_logdir, free_run_dir
from tfwb.tf.run import run

_active = {"session": None}

#: The profiler's step-time categories (overview page column ids) in tfwb's three parts.
INPUT_CATEGORIES = ("infeedTimeMs",)
COMPUTE_CATEGORIES = ("deviceComputeTimeMs", "hostComputeTimeMs", "deviceToDeviceTimeMs",
                      "deviceCollectivesTimeMs")
OTHER_CATEGORIES = ("kernelLaunchTimeMs", "outfeedTimeMs", "compileTimeMs", "otherTimeMs")
#: Readable names of those categories (the profiler's own labels).
CATEGORY_NAMES = {
    "infeedTimeMs": "input", "deviceComputeTimeMs": "device compute", "hostComputeTimeMs": "host compute",
    "deviceToDeviceTimeMs": "device to device", "deviceCollectivesTimeMs": "device collectives",
    "kernelLaunchTimeMs": "kernel launch", "outfeedTimeMs": "output", "compileTimeMs": "compilation",
    "otherTimeMs": "all others",
}
#: The xprof tools ``profile`` reads.
TOOLS = ("overview_page", "framework_op_stats")
#: Calls of the step function before a capture above which its cheap ops may be missing from
#: it. TF's executor starts by treating every kernel as expensive and learns each one's cost
#: as it runs; a kernel measured as cheap (a few microseconds) is traced only at
#: ``host_tracer_level=3``, and TF 2.21 ignores the ``ProfilerOptions`` given from Python
#: ("host_tracer_level expects an i value"), so the default level 2 applies. Measured here
#: (TF 2.21, CPU): every op of the ``mlp`` and ``text`` steps traced after 70 calls; at 90 the
#: ``mlp`` capture had about half, at 110 a few dozen.
TRACED_CALLS_LIMIT = 60
INSTALL_HINT = ("pip install tensorboard-plugin-profile (it brings xprof), or install tfwb with its "
                "[profile] extra")


def xplane_files(logdir: str) -> List[str]:
    """The ``.xplane.pb`` captures under ``logdir``, oldest first."""
    return sorted(glob.glob(os.path.join(logdir, "**", "*.xplane.pb"), recursive=True),
                  key=os.path.getmtime)


def capture_running() -> bool:
    """True while a profiler capture runs in this process (tfwb's or one started with ``tf.profiler``)."""
    if _active["session"] is not None:
        return True
    try:
        from tensorflow.python.profiler import profiler_v2
    except ImportError:         # pragma: no cover - TF moved it; tfwb's own sessions still count
        return False
    return getattr(profiler_v2, "_profiler", None) is not None


class ProfilerSession:
    """``with ProfilerSession() as s:`` profiles the block; ``s.xplane`` is the capture after.

    Args:
        logdir: where the capture goes; ``None`` uses a temporary folder that
            ``cleanup()`` removes (``keep=False``) once the caller has read it.

    Raises:
        RuntimeError: when another profiler session is running (TF allows one), or the
            profiler cannot start; the message says what to do.
    """

    def __init__(self, logdir: Optional[str] = None) -> None:
        self._tmp = None if logdir else tempfile.TemporaryDirectory(prefix="tfwb-trace-")
        self.logdir = logdir or self._tmp.name
        self.xplane: Optional[str] = None

    def start(self) -> "ProfilerSession":
        if _active["session"] is not None:
            raise RuntimeError("a profiler capture is already running (TensorFlow allows one at a time); "
                               "wait for it to end")
        try:
            os.makedirs(self.logdir, exist_ok=True)
            tf.profiler.experimental.start(self.logdir)
        except Exception as e:  # noqa: BLE001 - e.g. a session started outside tfwb
            raise RuntimeError(f"could not start the TensorFlow profiler ({type(e).__name__}: {e}); "
                               "stop any other profiling session and try again") from None
        _active["session"] = self
        return self

    def stop(self) -> Optional[str]:
        """Stop the capture; returns the newest ``.xplane.pb`` (or ``None``). Idempotent."""
        if _active["session"] is not self:
            return self.xplane
        try:
            tf.profiler.experimental.stop()
        finally:
            _active["session"] = None
        files = xplane_files(self.logdir)
        self.xplane = files[-1] if files else None
        return self.xplane

    def cleanup(self) -> None:
        """Remove the temporary folder (nothing, for a folder the caller gave)."""
        if self._tmp is not None:
            self._tmp.cleanup()

    def __enter__(self) -> "ProfilerSession":
        return self.start()

    def __exit__(self, *exc: Any) -> bool:
        self.stop()
        return False


class ProfileWindow(Observer):
    """Capture ``steps`` calls of the step function, starting ``skip`` calls after warm-up.

    Each captured call runs inside ``tf.profiler.experimental.Trace("train", step_num=i)``
    so the profiler sees step boundaries. ``xplane`` is the capture's path after the run.

    Args:
        logdir: folder for the capture (kept).
        steps: calls to capture (>= 1; the TF profiler guide suggests at most ~10).
        skip: calls after warm-up before the capture starts (>= 0).

    Raises:
        ValueError: for ``steps`` < 1 or ``skip`` < 0.
    """

    def __init__(self, logdir: str, steps: int = 5, skip: int = 0) -> None:
        _check_count("steps", steps, 1)
        _check_count("skip", skip, 0)
        self.session = ProfilerSession(logdir)
        self.steps, self.skip = steps, skip
        self.first: Optional[int] = None
        self._trace = None
        self.xplane: Optional[str] = None

    def on_warmup_end(self, run: RunState) -> None:
        self.first = len(run.log.times_s) + self.skip

    def on_step_begin(self, run: RunState, step: int) -> None:
        if self.first is None or not self.first <= step < self.first + self.steps:
            return
        if step == self.first:
            self.session.start()
        self._trace = tf.profiler.experimental.Trace("train", step_num=step, _r=1)
        self._trace.__enter__()

    def on_step_end(self, run: RunState, step: int) -> None:
        if self._trace is not None:
            self._trace.__exit__(None, None, None)
            self._trace = None
        if self.first is not None and step == self.first + self.steps - 1:
            self.xplane = self.session.stop()

    def on_run_end(self, run: RunState) -> None:
        if self._trace is not None:
            self._trace.__exit__(None, None, None)
            self._trace = None
        self.xplane = self.session.stop()
        if self.xplane:
            run.extras["profile"] = self.xplane
            run.notes.append(f"profiled calls {self.first}..{self.first + self.steps - 1}: {self.xplane} "
                             "(this run's times include the profiler's overhead)")


def _check_count(name: str, value: Any, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name}={value!r} is not allowed; {name} must be an integer >= {minimum}")


# -- reading a capture (xprof, offline) ------------------------------------------------------------
def _converter() -> Optional[Callable]:
    """xprof's ``xspace_to_tool_data`` (or the older ``tensorboard_plugin_profile``'s); None if absent."""
    try:
        from xprof.convert import raw_to_tool_data
    except ImportError:
        try:
            from tensorboard_plugin_profile.convert import raw_to_tool_data
        except ImportError:
            return None
    return raw_to_tool_data.xspace_to_tool_data


def tool_data(xplane: str, tool: str) -> Any:
    """One xprof tool's output for a capture, parsed from JSON.

    Args:
        xplane: a ``.xplane.pb`` file.
        tool: ``"overview_page"``, ``"framework_op_stats"``, ``"input_pipeline_analyzer"``...

    Raises:
        RuntimeError: when xprof is not installed or returns nothing for ``tool``.
    """
    convert = _converter()
    if convert is None:
        raise RuntimeError(f"reading a profile needs xprof: {INSTALL_HINT}")

    # xprof's native library logs to file descriptor 2 (oneDNN's line, absl's start-up warning):
    # held back, so a notebook cell shows the report, not log lines; anything else is replayed.
    with native_stderr_captured() as held:
        data, _ = convert([xplane], tool, {})
    held.replay(drop=is_tf_log)
    if not data:
        raise RuntimeError(f"xprof returned no {tool} for {xplane}")
    return json.loads(data)


def _table_rows(table: dict) -> List[dict]:
    """A Google-charts DataTable's rows as ``{column id: value}`` dicts."""
    ids = [c.get("id") for c in table.get("cols", ())]
    return [dict(zip(ids, (cell.get("v") if isinstance(cell, dict) else None for cell in row.get("c", ()))))
            for row in table.get("rows", ())]


@dataclass(frozen=True)
class ProfiledStep:
    """One captured call, as the profiler split it (ms, per training step).

    Attributes:
        step: the call's number on the run (warm-up included, from 0).
        step_ms: the profiler's step time.
        input_ms / compute_ms / other_ms: its parts; ``other_ms`` is the rest of the
            step (kernel launch, compilation, output, "all others").
        categories_ms: every category the profiler reports, by its id (``infeedTimeMs``...).
    """

    step: int
    step_ms: float
    input_ms: float
    compute_ms: float
    other_ms: float
    categories_ms: Dict[str, float] = field(default_factory=dict)


def parse_steps(overview: Sequence[dict], steps_per_call: int = 1) -> Tuple[ProfiledStep, ...]:
    """The per-step rows of xprof's ``overview_page``, split into input / compute / other.

    Args:
        overview: ``tool_data(xplane, "overview_page")``.
        steps_per_call: training steps per call (the profiler times calls; the result is
            per training step, like ``RunResult.step_times_s``).
    """
    out = []
    for table in overview:
        if not isinstance(table, dict) or "stepTimeMs" not in [c.get("id") for c in table.get("cols", ())]:
            continue
        for row in _table_rows(table):
            cats = {k: float(row.get(k) or 0.0) / steps_per_call for k in CATEGORY_NAMES}
            step_ms = float(row.get("stepTimeMs") or 0.0) / steps_per_call
            inp = sum(cats[k] for k in INPUT_CATEGORIES)
            comp = sum(cats[k] for k in COMPUTE_CATEGORIES)
            label = str(row.get("stepnum", "")).split()
            number = int(label[-1]) if label and label[-1].lstrip("-").isdigit() else len(out)
            out.append(ProfiledStep(number, step_ms, inp, comp, max(0.0, step_ms - inp - comp), cats))
        break
    return tuple(out)


def profiler_statement(overview: Sequence[dict]) -> str:
    """The profiler's own input-bound sentence (``input_conclusion``), or ``""``."""
    for key in ("input_conclusion", "statement"):
        for table in overview:
            text = (table.get("p") or {}).get(key) if isinstance(table, dict) else None
            if text:
                return str(text)
    return ""


def hardware_type(overview: Sequence[dict]) -> str:
    """The profiler's ``hardware_type`` (``CPU_ONLY``, ``GPU``, ``TPU``), or ``""``."""
    for table in overview:
        value = (table.get("p") or {}).get("hardware_type") if isinstance(table, dict) else None
        if value:
            return str(value)
    return ""


@dataclass(frozen=True)
class OpTime:
    """An op (or a type of op) and its self time over the capture.

    Attributes:
        name: the op's name as in the trace (``type`` again for a row of ``top_op_types``).
        type: the op type (``_MklNativeFusedConv2D``, ``MatMul``; ``Dataset`` for tf.data
            iterator stages).
        where: ``"host"`` or ``"device"``.
        self_ms: self time (the op's time minus its children's), summed over the capture.
        share: ``self_ms`` over all ops' self time on the same side (host or device),
            idle time left out (the profiler's own percentage). tf.data runs on its own
            threads beside the step, so host shares are shares of busy thread time, not
            of the step.
        occurrences: how many times it ran.
        ops: how many distinct ops the row sums (1 for a single op).
    """

    name: str
    type: str
    where: str
    self_ms: float
    share: float
    occurrences: int
    ops: int = 1


def parse_ops(op_stats: Sequence[dict]) -> Tuple[OpTime, ...]:
    """The ops of xprof's ``framework_op_stats``, most self time first, ``IDLE`` left out.

    xprof lists at most 500 ops (the most self time first); ``share`` is the profiler's
    own ``host_/device_total_self_time_percent``, a share of every op's self time, listed
    or not (computed from the listed ops only where those columns are missing).
    """
    tables = [t for t in op_stats if isinstance(t, dict) and t.get("rows")]
    if not tables:
        return ()
    rows = [r for r in _table_rows(tables[-1]) if r.get("operation") != "IDLE" and r.get("type") != "IDLE"]
    totals: Dict[str, float] = {}
    for r in rows:
        where = str(r.get("host_or_device") or "host").lower()
        totals[where] = totals.get(where, 0.0) + float(r.get("total_self_time") or 0.0)
    ops = []
    for r in rows:
        where = str(r.get("host_or_device") or "host").lower()
        self_us = float(r.get("total_self_time") or 0.0)
        share = r.get(f"{where}_total_self_time_percent")
        if share is None:
            share = self_us / totals[where] if totals[where] else 0.0
        ops.append(OpTime(name=str(r.get("operation") or ""), type=str(r.get("type") or ""), where=where,
                          self_ms=self_us / 1e3, share=float(share), occurrences=int(r.get("occurrences") or 0)))
    return tuple(sorted(ops, key=lambda o: -o.self_ms))


def op_types(ops: Sequence[OpTime]) -> Tuple[OpTime, ...]:
    """``ops`` summed by (side, type), most self time first."""
    groups: Dict[Tuple[str, str], List[OpTime]] = {}
    for o in ops:
        groups.setdefault((o.where, o.type), []).append(o)
    out = [OpTime(name=t, type=t, where=w, self_ms=sum(o.self_ms for o in g), share=sum(o.share for o in g),
                  occurrences=sum(o.occurrences for o in g), ops=len(g)) for (w, t), g in groups.items()]
    return tuple(sorted(out, key=lambda o: -o.self_ms))


# -- the report ------------------------------------------------------------------------------------
def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0


@dataclass(frozen=True)
class ProfileReport:
    """What ``profile`` measured: the profiled run, the profiler's breakdown and its top ops.

    Displaying it in a notebook shows the tables (``_repr_html_``);
    ``tfwb.ui.charts.profile_png(report)`` draws the breakdown and the top ops.

    Attributes:
        result: the profiled run (its times include the profiler's overhead).
        xplane: the capture file; ``logdir``: the folder to open in TensorBoard
            (``run_dir`` holds this run's scalars and capture).
        steps: the captured calls as the profiler split them (``ProfiledStep``).
        measured_index: each captured call's index into ``result.step_times_s``.
        profiler_verdict: the profiler's own input-bound sentence.
        diagnosis: tfwb's diagnosis (``tfwb.analysis.diagnosis``) of the same steps.
        ops: every op, most self time first; ``top_ops`` the first ``top``.
        hardware_type: the profiler's ``hardware_type`` (``CPU_ONLY``, ``GPU``...).
        notes: caveats about this capture (shown under the tables).
    """

    result: RunResult
    xplane: str
    logdir: str
    run_dir: str
    steps: Tuple[ProfiledStep, ...]
    measured_index: Tuple[int, ...]
    profiler_verdict: str
    diagnosis: diagnosis.Diagnosis
    ops: Tuple[OpTime, ...]
    top: int = 10
    hardware_type: str = ""
    notes: Tuple[str, ...] = ()

    # -- the step breakdown --------------------------------------------------------------
    @property
    def step_ms(self) -> float:
        """The profiler's mean step time over the captured steps (ms)."""
        return _mean([s.step_ms for s in self.steps])

    @property
    def breakdown_ms(self) -> Dict[str, float]:
        """Mean ``{"input", "compute", "other"}`` ms per step, from the profiler."""
        return {"input": _mean([s.input_ms for s in self.steps]),
                "compute": _mean([s.compute_ms for s in self.steps]),
                "other": _mean([s.other_ms for s in self.steps])}

    @property
    def breakdown_pct(self) -> Dict[str, float]:
        """``breakdown_ms`` as % of the mean step."""
        total = self.step_ms
        return {k: (100.0 * v / total if total else 0.0) for k, v in self.breakdown_ms.items()}

    @property
    def categories_ms(self) -> Dict[str, float]:
        """Mean ms per step of every profiler category that is not zero, by readable name."""
        out = {}
        for key, name in CATEGORY_NAMES.items():
            value = _mean([s.categories_ms.get(key, 0.0) for s in self.steps])
            if value > 0:
                out[name] = value
        return out

    @property
    def profiler_input_fraction(self) -> Optional[float]:
        """The profiler's input time over its step time (captured steps)."""
        total = sum(s.step_ms for s in self.steps)
        return sum(s.input_ms for s in self.steps) / total if total else None

    # -- tfwb's timing of the same steps ---------------------------------------------------
    @property
    def profiled_times_s(self) -> Tuple[float, ...]:
        """tfwb's own step times (s) of the captured steps: pass them to ``tfwb.expect`` checks."""
        return tuple(self.result.step_times_s[i] for i in self.measured_index)

    @property
    def unprofiled_times_s(self) -> Tuple[float, ...]:
        """The measured steps of the same run outside the capture window (s)."""
        chosen = set(self.measured_index)
        return tuple(t for i, t in enumerate(self.result.step_times_s) if i not in chosen)

    @property
    def tfwb_step_ms(self) -> Optional[float]:
        """tfwb's mean time (ms) of the captured steps, to set beside ``step_ms``."""
        times = self.profiled_times_s
        return _mean(times) * 1e3 if times else None

    @property
    def tfwb_input_ms(self) -> Optional[float]:
        """tfwb's mean input wait (ms) of the captured steps (None when not recorded)."""
        waits = self.result.input_wait_s
        if not waits or not self.measured_index:
            return None
        return _mean([waits[i] for i in self.measured_index]) * 1e3

    @property
    def top_ops(self) -> Tuple[OpTime, ...]:
        """The ``top`` ops with the most self time (names as in the trace)."""
        return self.ops[: self.top]

    @property
    def top_op_types(self) -> Tuple[OpTime, ...]:
        """The ``top`` op types with the most self time (every op of a type summed)."""
        return op_types(self.ops)[: self.top]

    # -- display ---------------------------------------------------------------------------------
    def breakdown_rows(self) -> List[List[str]]:
        """``[part, profiler ms/step, % of step, tfwb ms/step]`` rows: input, compute, other, step."""
        ms, pct = self.breakdown_ms, self.breakdown_pct
        tf_step, tf_input = self.tfwb_step_ms, self.tfwb_input_ms
        tf_rest = tf_step - tf_input if tf_step is not None and tf_input is not None else None

        def num(v: Optional[float]) -> str:
            return "-" if v is None else f"{v:.2f}"

        return [["input", num(ms["input"]), f"{pct['input']:.1f}%", num(tf_input)],
                ["compute", num(ms["compute"]), f"{pct['compute']:.1f}%", num(tf_rest)],
                ["other", num(ms["other"]), f"{pct['other']:.1f}%", "(counted in compute)"],
                ["step", num(self.step_ms), "100%", num(tf_step)]]

    def op_rows(self, by: str = "op") -> List[List[str]]:
        """``[#, op, type, where, self ms, share, occurrences]`` rows of ``top_ops``
        (``by="type"``: ``[#, type, where, self ms, share, occurrences, ops]`` of ``top_op_types``)."""
        if by not in ("op", "type"):
            raise ValueError(f"by={by!r} is not allowed; one of 'op', 'type'")
        if by == "type":
            return [[str(i), o.type, o.where, f"{o.self_ms:.2f}", f"{o.share:.1%}", str(o.occurrences), str(o.ops)]
                    for i, o in enumerate(self.top_op_types, 1)]
        return [[str(i), o.name, o.type, o.where, f"{o.self_ms:.2f}", f"{o.share:.1%}", str(o.occurrences)]
                for i, o in enumerate(self.top_ops, 1)]

    def verdicts(self) -> Tuple[str, str]:
        """``(the profiler's sentence, tfwb's headline)`` for the same steps."""
        return (self.profiler_verdict or "(the profiler gave no input verdict)", self.diagnosis.headline)

    def summary(self) -> str:
        """A few lines: the window, the breakdown, both verdicts, the top op."""
        ms, pct = self.breakdown_ms, self.breakdown_pct
        first = self.steps[0].step if self.steps else "?"
        last = self.steps[-1].step if self.steps else "?"
        name = self.result.config.label or self.result.config.workload
        lines = [f"profiled calls {first}..{last} ({len(self.steps)} steps) of {name}: "
                 f"step {self.step_ms:.2f} ms = input {ms['input']:.2f} ({pct['input']:.0f}%) + compute "
                 f"{ms['compute']:.2f} ({pct['compute']:.0f}%) + other {ms['other']:.2f} ({pct['other']:.0f}%)",
                 f"TF profiler: {self.verdicts()[0]}", f"tfwb: {self.verdicts()[1]}"]
        if self.top_ops:
            o = self.top_ops[0]
            lines.append(f"top op: {o.name} ({o.type}, {o.where}): {o.self_ms:.2f} ms self time, {o.share:.0%}")
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        name = html.escape(self.result.config.label or self.result.config.workload)
        first = self.steps[0].step if self.steps else "?"
        last = self.steps[-1].step if self.steps else "?"
        head = (f"<div class='tfwb-profile'><b>Profile of {name}</b>: calls {first}..{last} "
                f"({len(self.steps)} steps, {html.escape(self.hardware_type or 'unknown hardware')}); "
                f"capture <code>{html.escape(self.xplane)}</code></div>")
        def section(title: str, table: str) -> str:
            return (f"<div style='margin:8px 0 2px 0;font-weight:bold;font-size:12px'>{html.escape(title)}</div>"
                    f"{table}")

        prof, ours = self.verdicts()
        body = [
            section("Time per step, split by the TF profiler and timed by tfwb (same steps)",
                    report_tables.simple_html_table(["part", "TF profiler ms/step", "% of step", "tfwb ms/step"],
                                                    self.breakdown_rows())),
            section("Input-bound verdicts on the same steps",
                    report_tables.simple_html_table(["who", "verdict"], [["TF profiler", prof], ["tfwb", ours]])),
            section(f"Top {len(self.top_ops)} ops by self time over the capture",
                    report_tables.simple_html_table(["#", "op (as in the trace)", "type", "where", "self ms", "share",
                                                     "occurrences"], self.op_rows())),
        ]
        notes = "".join(f"<div style='color:#555;font-size:11px'>{html.escape(n)}</div>" for n in self.notes)
        note = ("<div style='color:#555;font-size:11px;margin-top:4px'>Times of a profiled run include the "
                "profiler's overhead: take throughput from an unprofiled run. Open "
                f"<code>{html.escape(self.logdir)}</code> in TensorBoard for the trace.</div>")
        return head + "".join(body) + note + notes

    def to_dict(self) -> dict:
        """JSON-ready summary (not the RunResult: ``result.to_json()`` has it)."""
        return {"xplane": self.xplane, "logdir": self.logdir, "run_dir": self.run_dir,
                "hardware_type": self.hardware_type, "step_ms": self.step_ms, "breakdown_ms": self.breakdown_ms,
                "breakdown_pct": self.breakdown_pct, "categories_ms": self.categories_ms,
                "tfwb_step_ms": self.tfwb_step_ms, "tfwb_input_ms": self.tfwb_input_ms,
                "profiler_verdict": self.profiler_verdict, "tfwb_verdict": self.diagnosis.headline,
                "steps": [s.step for s in self.steps], "notes": list(self.notes),
                "top_ops": [vars(o) for o in self.top_ops], "top_op_types": [vars(o) for o in self.top_op_types]}


# -- profile() ---------------------------------------------------------------------------------------
def profile(cfg: RunConfig, steps: int = 5, *, skip: int = 0, logdir: "str | os.PathLike | None" = None,
            top: int = 10, hardware: Optional[dict] = None, progress: Optional[Callable[[int, int], None]] = None,
            dataset: Optional[tf.data.Dataset] = None, observers: Sequence[Observer] = ()) -> ProfileReport:
    """Run ``cfg`` with the TF profiler on ``steps`` calls after warm-up and summarize the capture.

    The run is ``cfg`` as given; the capture covers measured calls ``skip`` to
    ``skip + steps - 1``. The scalars and the capture go to ``logdir/<run name>``
    (TensorBoard's Scalars and Profile tabs read them). Step marks come from
    ``tf.profiler.experimental.Trace`` around each captured call, so tracing and
    compilation (warm-up) stay out of the breakdown.

    Two things the TF profiler does on its own, which ``ProfileReport.notes`` reports:
    when more than 5 calls are captured it leaves out the first and the last as possibly
    incomplete steps (seen with xprof 2.24: 6 captured calls gave 4 steps); and after
    ``TRACED_CALLS_LIMIT`` or so calls of the step function it stops tracing ops it has
    measured as cheap, so keep warm-up plus ``skip`` short.

    Args:
        cfg: the knobs.
        steps: calls to capture (>= 1; the TF profiler guide suggests at most ~10).
        skip: measured calls to run before the capture starts.
        logdir: where to keep the scalars and the capture; ``None`` makes a new folder
            under the system's temporary folder (kept, so TensorBoard can open it).
        top: how many ops ``top_ops`` keeps.
        hardware: ``tfwb.hardware.detect()`` output for tfwb's diagnosis (``None``: the
            run's fingerprint).
        progress, dataset, observers: passed to ``tfwb.run``.

    Returns:
        A ``ProfileReport``.

    Raises:
        ValueError: for ``steps`` < 1, ``skip`` < 0, ``top`` < 1, a window longer than
            ``cfg``'s measured calls, ``strategy="multi_worker"`` (its steps run in other
            processes), or a ``logdir`` that cannot be created or written, all before any work.
        RuntimeError: when a profiler capture is already running (TensorFlow allows one),
            xprof is not installed, the run fails, or the profiler wrote no capture.

    Example:
        >>> rep = tfwb.profile(tfwb.RunConfig(steps=10), steps=5)  # doctest: +SKIP
        >>> rep                          # tables: breakdown, verdicts, top ops  # doctest: +SKIP
    """
    if not isinstance(cfg, RunConfig):
        raise TypeError(f"profile() needs a RunConfig, got {type(cfg).__name__}")
    _check_count("steps", steps, 1)
    _check_count("skip", skip, 0)
    _check_count("top", top, 1)
    if cfg.strategy == "multi_worker":
        raise ValueError("strategy='multi_worker' is not allowed here: its steps run in worker processes, "
                         "and the profiler captures this one; profile strategy='default' or 'mirrored'")
    warmup_calls, calls = cfg.calls
    if skip + steps > calls:
        raise ValueError(f"steps={steps} with skip={skip} needs {skip + steps} measured calls, but cfg runs "
                         f"{calls} (steps={cfg.steps}, steps_per_execution={cfg.steps_per_execution}); "
                         f"raise cfg.steps or lower steps/skip")
    if capture_running():
        raise RuntimeError("a profiler capture is already running in this process (TensorFlow allows one "
                           "at a time): wait for it to end, or stop it with tf.profiler.experimental.stop()")
    if _converter() is None:
        raise RuntimeError(f"reading a profile needs xprof: {INSTALL_HINT}")
    if logdir is None:
        root = tempfile.mkdtemp(prefix="tfwb-profile-")
    else:
        root = check_logdir(logdir)
    run_dir = free_run_dir(root, cfg.label or cfg.workload)
    name = os.path.basename(run_dir)
    window = ProfileWindow(run_dir, steps=steps, skip=skip)

    shown = [Progress(progress)] if progress is not None else []
    result = run(cfg, dataset=dataset, observers=[*shown, window, Scalars(root, name=name), *observers])
    if not result.ok:
        raise RuntimeError(f"the profiled run did not finish ({result.status}): {result.error}")
    if not window.xplane:
        raise RuntimeError(f"the profiler wrote no capture under {run_dir} (run notes: {'; '.join(result.notes)})")
    overview = tool_data(window.xplane, "overview_page")
    profiled = parse_steps(overview, cfg.steps_per_execution)
    warmup_calls = len(result.warmup_times_s)          # the runner may have extended the warm-up
    index = tuple(s.step - warmup_calls for s in profiled if 0 <= s.step - warmup_calls < len(result.step_times_s))
    notes = []
    if warmup_calls + skip > TRACED_CALLS_LIMIT:
        notes.append(f"{warmup_calls + skip} calls ran before the capture: TensorFlow stops tracing ops it has "
                     "measured as cheap (a few microseconds each), so they may be missing from the top ops; "
                     f"keep warm-up + skip within {TRACED_CALLS_LIMIT} calls to see every op")
    if len(profiled) < steps:
        notes.append(f"the profiler kept {len(profiled)} of the {steps} captured calls as steps (it leaves out "
                     "a first or last step it takes as incomplete)")
    same_steps = replace(result, step_times_s=[result.step_times_s[i] for i in index],
                         input_wait_s=[result.input_wait_s[i] for i in index] if result.input_wait_s else [],
                         step_start_s=[], losses=[])
    return ProfileReport(
        result=result, xplane=window.xplane, logdir=root, run_dir=run_dir, steps=profiled,
        measured_index=index, profiler_verdict=profiler_statement(overview),
        diagnosis=diagnosis.diagnose(same_steps, hardware),
        ops=parse_ops(tool_data(window.xplane, "framework_op_stats")), top=top,
        hardware_type=hardware_type(overview), notes=tuple(notes))


__all__ = ["ProfilerSession", "ProfileWindow", "ProfileReport", "ProfiledStep", "OpTime", "profile",
           "xplane_files", "capture_running", "tool_data", "parse_steps", "parse_ops", "op_types",
           "profiler_statement", "hardware_type"]
