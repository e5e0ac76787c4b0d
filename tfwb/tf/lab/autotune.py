"""What tf.data decides on its own, made visible: its rewrites and AUTOTUNE's choices.

TensorFlow has no public API that returns the parallelism or buffer sizes AUTOTUNE
picked (``dataset.options()`` only echoes what you set; the old
``tf.data.experimental.StatsAggregator`` is gone). Its profiler does record them:
every tf.data iterator emits a trace event named after the op that actually runs,
after tf.data's graph rewrites (``Iterator::Root::Prefetch::MapAndBatch::...``),
with the op's current settings as arguments: ``parallelism``, ``buffer_limit``,
``cycle_length``, ``autotune``, and on the root the CPU and RAM budgets and the
threadpool size. ``trace_pipeline`` iterates a dataset under the profiler and
reads those events back from the ``.xplane.pb`` file, so a notebook can print the
pipeline tf.data really runs and how AUTOTUNE's values moved over time.

Caveats: the values are samples of a moving target (AUTOTUNE re-optimizes every
few hundred milliseconds), profiling costs time (never take throughput from a
traced run), and the event format is TensorFlow's internal one; it is read
defensively and an unknown shape gives empty results, not an error. The measured
alternative, which needs no profiler, is ``scan``: fix the value yourself and
time the pipeline at each setting, AUTOTUNE included.

``train_on`` trains a ``RunConfig``'s model on any dataset (e.g. one built with a
``tfwb.tf.runner.pipeline.PipelineSettings``) and returns a RunResult, so such variants can sit in the
same tables as ``tfwb.run`` results.
"""
from __future__ import annotations

import dataclasses
import re
import time
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, List, Optional, Tuple

import tensorflow as tf

from tfwb.config import RunConfig
from tfwb.records import RunResult
from tfwb.tf.lab.profiler import ProfilerSession
from tfwb.tf.lab.stopwatch import dataset_throughput
from tfwb.workloads import get_workload
from tfwb.tf.runner.pipeline import PipelineSettings, build_dataset
from tfwb.tf.run import run

#: Settings AUTOTUNE (or you) set, shown as they change over the trace.
TUNED_KEYS = ("parallelism", "buffer_limit", "cycle_length", "max_batch_results")
#: Settings shown once (their last value).
SETTING_KEYS = ("autotune", "deterministic", "batch_size", "autotune_mode")
#: Root-iterator facts: the budgets AUTOTUNE works within.
ROOT_KEYS = ("cpu_budget", "ram_budget_megabytes", "threadpool_size", "algorithm")


@dataclass(frozen=True)
class Stage:
    """One op of the running pipeline, as the profiler saw it.

    Args:
        path: the iterator path without per-input indices, e.g. ``"Root::Prefetch::MapAndBatch"``.
        kind: the op that runs, e.g. ``"MapAndBatch"`` or ``"ParallelMapV2"``.
        depth: 0 for ``Root``.
        source: the dataset op(s) of your code it came from, numbers stripped, e.g.
            ``"fused(MapDataset,BatchDatasetV2)"`` (a rewrite) or ``"MapDataset"``.
        tuned: for each of ``TUNED_KEYS`` seen, its values in time order with
            repeats collapsed, e.g. ``{"buffer_limit": (1, 2, 4)}``.
        settings: last value of each of ``SETTING_KEYS`` seen.
        events: trace events recorded for this stage.
    """

    path: str
    kind: str
    depth: int
    source: str
    tuned: Dict[str, Tuple[Any, ...]] = field(default_factory=dict)
    settings: Dict[str, str] = field(default_factory=dict)
    events: int = 0

    @property
    def rewrite(self) -> str:
        """What tf.data changed here on its own, or ``""``."""
        if self.source.startswith("fused("):
            return "fused by tf.data"
        if self.kind.startswith("ParallelMap") and self.source.startswith("MapDataset"):
            return "parallelized by tf.data (map_parallelization)"
        if self.kind == "ParallelBatch" and self.source.startswith("BatchDataset"):
            return "parallelized by tf.data (parallel_batch)"
        if self.kind == "Prefetch" and "inject" in self.source.lower():
            return "injected by tf.data (inject_prefetch)"
        return ""


@dataclass(frozen=True)
class PipelineTrace:
    """The pipeline tf.data ran, from a profiler trace: its stages and the root's budgets."""

    stages: Tuple[Stage, ...]
    root: Dict[str, str]

    def stage(self, kind: str) -> Optional[Stage]:
        """The first stage whose op is ``kind`` (e.g. ``"Prefetch"``), or None."""
        return next((s for s in self.stages if s.kind == kind), None)

    def structure(self) -> str:
        """The op tree, one line per stage, with tf.data's own rewrites marked.

        Depends only on the pipeline and tf.data's rewrites, not on timing, so it
        is stable from run to run on one TensorFlow version.
        """
        lines = []
        for s in self.stages:
            if s.kind == "Root":
                continue
            note = f"   <- {s.rewrite}" if s.rewrite else ""
            lines.append(f"{'  ' * (s.depth - 1)}{s.kind}{note}")
        return "\n".join(lines) if lines else "(no tf.data events in the trace)"

    def describe(self) -> str:
        """The op tree with the values AUTOTUNE (or you) set, and the budgets it works within."""
        lines = []
        if self.root:
            lines.append("budgets: " + ", ".join(f"{k}={v}" for k, v in self.root.items()))
        for s in self.stages:
            if s.kind == "Root":
                continue
            parts = []
            for key, values in s.tuned.items():
                parts.append(f"{key} " + "\u2192".join(_fmt(v) for v in values))
            if s.settings.get("autotune") == "true":
                parts.append("autotuned")
            text = f"{'  ' * (s.depth - 1)}{s.kind}"
            if parts:
                text += ": " + ", ".join(parts)
            lines.append(text)
        return "\n".join(lines) if lines else "(no tf.data events in the trace)"


def _fmt(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _stat_value(stat, stat_metadata) -> Any:
    kind = stat.WhichOneof("value")
    if kind == "ref_value":
        return stat_metadata[stat.ref_value].name
    if kind == "bytes_value":
        return stat.bytes_value.decode(errors="replace")
    return getattr(stat, kind) if kind else None


def _number(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return int(value)
        except ValueError:
            try:
                return float(value)
            except ValueError:
                return value
    return value


def parse_xspace(path: str) -> PipelineTrace:
    """Read the tf.data iterator events of one ``.xplane.pb`` file into a PipelineTrace."""
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    space = xplane_pb2.XSpace()
    with open(path, "rb") as fh:
        space.ParseFromString(fh.read())
    seen: Dict[str, dict] = {}
    timeline: Dict[str, List[Tuple[int, str, Any]]] = {}
    root: Dict[str, str] = {}
    for plane in space.planes:
        md, sm = plane.event_metadata, plane.stat_metadata
        for line in plane.lines:
            for ev in line.events:
                meta = md[ev.metadata_id]
                if not meta.name.startswith("Iterator::"):
                    continue
                t = line.timestamp_ns * 1000 + ev.offset_ps
                values = {sm[s.metadata_id].name: _stat_value(s, sm) for s in meta.stats}
                values.update({sm[s.metadata_id].name: _stat_value(s, sm) for s in ev.stats})
                path = re.sub(r"\[\d+\]", "", meta.name[len("Iterator::"):])
                entry = seen.setdefault(path, {"first": t, "events": 0, "settings": {}, "source": ""})
                entry["events"] += 1
                entry["first"] = min(entry["first"], t)
                if values.get("name"):
                    entry["source"] = re.sub(r":\d+", "", str(values["name"]))
                for key in SETTING_KEYS:
                    if key in values:
                        entry["settings"][key] = str(values[key]).lower()
                for key in TUNED_KEYS:
                    if key in values and values[key] not in (None, "", "N/A", "unavailable"):
                        timeline.setdefault(path, []).append((t, key, _number(values[key])))
                if path == "Root":
                    for key in ROOT_KEYS:
                        if key in values:
                            root[key] = str(values[key])
    stages = []
    for path in sorted(seen):
        entry = seen[path]
        tuned: Dict[str, List[Any]] = {}
        for _, key, value in sorted(timeline.get(path, []), key=lambda x: x[0]):
            if key == "parallelism" and value in (0, 0.0):   # not started yet
                continue
            runs = tuned.setdefault(key, [])
            if not runs or runs[-1] != value:
                runs.append(value)
        parts = path.split("::")
        stages.append(Stage(path=path, kind=parts[-1], depth=len(parts) - 1, source=entry["source"],
                            tuned={k: tuple(v) for k, v in tuned.items()},
                            settings=dict(entry["settings"]), events=entry["events"]))
    return PipelineTrace(stages=tuple(stages), root=root)


def _parse_capture(session: ProfilerSession) -> PipelineTrace:
    try:
        return parse_xspace(session.xplane) if session.xplane else PipelineTrace((), {})
    finally:
        session.cleanup()


def trace_pipeline(dataset: tf.data.Dataset, batches: int = 20, *, warmup: int = 1,
                   step_s: float = 0.0) -> PipelineTrace:
    """Iterate ``dataset`` under the profiler and read back what tf.data ran.

    Args:
        dataset: any ``tf.data.Dataset``.
        batches: elements taken while tracing.
        warmup: elements taken before tracing starts (iterator start-up).
        step_s: a pause after each element, standing in for a training step (a
            consumer slower than the pipeline changes what AUTOTUNE picks).

    Returns:
        A PipelineTrace.

    Raises:
        RuntimeError: if the profiler cannot start (another session is running).

    Example:
        >>> print(trace_pipeline(ds).describe())  # doctest: +SKIP
    """
    it = iter(dataset)
    for _ in range(warmup):
        next(it)
    with ProfilerSession() as session:
        for _ in range(batches):
            next(it)
            if step_s:
                time.sleep(step_s)
    return _parse_capture(session)


def scan(cfg: RunConfig, setting: str, values: Iterable[Optional[int]], *, batches: int = 20,
         warmup: int = 3, workload=None) -> List[dict]:
    """Time the pipeline alone at each value of one ``PipelineSettings`` setting (``None`` = AUTOTUNE).

    Args:
        cfg: the knobs (turn on the one the setting belongs to, e.g. ``parallel_map``
            for ``map_parallel_calls``).
        setting: a ``tfwb.tf.runner.pipeline.PipelineSettings`` field: ``map_parallel_calls``,
            ``interleave_parallel_calls``, ``prefetch_buffer`` or ``io_threads``.
        values: the values to try; ``None`` is the default (AUTOTUNE).
        batches, warmup: as in ``tfwb.tf.lab.stopwatch.dataset_throughput``.
        workload: the workload (default: ``cfg.workload``'s).

    Returns:
        ``[{"value": v, "label": "4" or "AUTOTUNE", "median_batch_s": ..., "examples_per_s": ...}]``.

    Raises:
        ValueError: for an unknown setting or a bad value (from ``PipelineSettings``).
    """
    if setting not in ("map_parallel_calls", "interleave_parallel_calls", "prefetch_buffer", "io_threads"):
        raise ValueError(f"setting={setting!r} is not allowed; one of 'map_parallel_calls', "
                         "'interleave_parallel_calls', 'prefetch_buffer', 'io_threads'")
    workload = workload or get_workload(cfg.workload)
    rows = []
    for value in values:
        ds, _ = build_dataset(cfg, workload, PipelineSettings(**{setting: value}))
        t = dataset_throughput(ds, batches=batches, warmup=warmup, examples_per_batch=cfg.batch_size)
        label = "AUTOTUNE" if value is None else str(value)
        if setting == "io_threads" and value is None:
            label = "tfwb default"
        elif setting == "io_threads" and value == 0:
            label = "tf.data default"
        rows.append({"value": value, "label": label, **t})
    return rows


def train_on(cfg: RunConfig, dataset: tf.data.Dataset, *, label: str) -> RunResult:
    """Train ``cfg``'s model on ``dataset`` (batches of ``cfg.batch_size``), timed like ``tfwb.run``.

    For pipelines a RunConfig cannot express (a ``PipelineSettings``, tf.data's own rewrites):
    the model, optimizer, strategy and step come from ``cfg``; the batches from
    ``dataset``. ``label`` names the variant in tables; the result's config is
    ``cfg`` with that label, and a note says the data came from elsewhere.

    Raises:
        whatever building or training raises (unlike ``tfwb.run``, nothing is caught).
    """
    result = run(cfg.replace(label=label), dataset=dataset, raise_errors=True)
    return dataclasses.replace(result, notes=result.notes + (f"data: {label} (a dataset built outside RunConfig)",))
