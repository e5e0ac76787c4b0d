"""Immutable records of a run: utilization samples and the RunResult.

Plain data with units in field names; JSON round trip; no TensorFlow, no UI.
How far a run is from the machine's limit is a typed sub-record of the result,
``tfwb.limits_record.Limits`` (``result.limits``). The history file of RunResults (JSON
lines) is ``tfwb.history``.
"""
from __future__ import annotations

import json
import math
import functools
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any, Callable, Iterable, Optional, Tuple

from tfwb import stats
from tfwb.bottleneck import input_fraction, input_verdict
from tfwb.config import COMPUTE_DTYPES as _COMPUTE_DTYPES, RunConfig, compute_dtype as _compute_dtype
from tfwb.datasheet import SUSPECT_SHARE
from tfwb.limits_record import LIMIT_FIELDS, Limits, finite

#: 2: notes are (kind, text) pairs; warm-up gradient norms and loss scales kept apart.
#: 3: model FLOPs per step, this machine's measured and datasheet peaks, MFU, per-call overhead
#: (records of schema 1 and 2 load with those fields None).
SCHEMA_VERSION = 3
#: ``running``: the record a fit writes as it starts (``tfwb.keras.Monitor``); a later record of the same
#: ``run_id`` completes it, and a history reads one never completed as failed (``tfwb.history``).
RUNNING = "running"
STATUSES = ("ok", "failed", "interrupted", "diverged", RUNNING)
#: What a note is about. ``data``: the input pipeline; ``steps``: how steps were counted or
#: timed; ``distribution``: strategies, replicas, clusters; ``tracing``: retracing;
#: ``tensorflow``: a line TensorFlow's C++ code logged during the run; ``observer``: an
#: observer failed or stopped the run; ``other``: anything else.
NOTE_KINDS = ("data", "steps", "distribution", "tracing", "tensorflow", "observer", "other")
#: Final loss: the mean of this share (at least one) of the last measured losses.
FINAL_LOSS_SHARE = 0.25
#: The dtype a run's matmuls compute in, per ``mixed_precision`` value (``tfwb.config.COMPUTE_DTYPES``).
COMPUTE_DTYPES = _COMPUTE_DTYPES
#: ``mfu_text`` names at most this many uncounted layers, then how many more.
UNCOUNTED_SHOWN = 3


class Note(str):
    """One note on a result: its text, and what it is about (``kind``, one of ``NOTE_KINDS``).

    A note is its text (a ``str``: printing, ``in`` and ``startswith`` work as on any
    string) with a ``kind``, so a reader picks notes by kind (``RunResult.notes_of``)
    instead of by the words they start with. In JSON it is a ``[kind, text]`` pair.

    Example:
        >>> n = Note("cache=True: the first epoch fills the cache", "data")
        >>> n.kind, n.startswith("cache=")
        ('data', True)
        >>> Note.of("TensorFlow: oneDNN supports DT_HALF only on ...").kind
        'tensorflow'
    """

    kind: str

    def __new__(cls, text: str, kind: str = "other") -> "Note":
        if kind not in NOTE_KINDS:
            raise ValueError(f"note kind={kind!r} is not allowed; kind must be one of {NOTE_KINDS}")
        self = super().__new__(cls, text)
        self.kind = kind
        return self

    @property
    def text(self) -> str:
        return str(self)

    def __repr__(self) -> str:
        return f"Note({str(self)!r}, {self.kind!r})"

    def __reduce__(self):
        return (Note, (str(self), self.kind))

    @classmethod
    def of(cls, value: Any) -> "Note":
        """A Note from a Note, a ``(kind, text)`` pair, or a plain string (kind read from its start).

        Raises:
            ValueError: for a kind that is not one of ``NOTE_KINDS`` or a value that is none of those.
        """
        if isinstance(value, Note):
            return value
        if isinstance(value, str):
            return cls(value, _kind_of(value))
        if isinstance(value, (tuple, list)) and len(value) == 2 and all(isinstance(v, str) for v in value):
            return cls(value[1], value[0])
        raise ValueError(f"note={value!r} is not allowed; a note is a string or a (kind, text) pair")


_KIND_PREFIXES = (
    ("TensorFlow:", "tensorflow"), ("data:", "data"), ("cache", "data"), ("shuffle", "data"),
    ("prefetch", "data"), ("interleave", "data"), ("parallel_map", "data"), ("vectorized_map", "data"),
    ("storage_latency", "data"), ("data_source", "data"), ("deterministic", "data"),
    ("steps_per_execution", "steps"), ("the step function was traced", "tracing"),
    ("observer", "observer"), ("stopped by an observer", "observer"),
    ("multi_worker", "distribution"), ("parameter_server", "distribution"), ("mirrored", "distribution"),
    ("tpu", "distribution"), ("cluster", "distribution"), ("auto-shard", "distribution"),
    ("a chosen port", "distribution"), ("the workers", "distribution"), ("strategy", "distribution"),
)


def _kind_of(text: str) -> str:
    """The kind of a note written as plain text (results written before notes had kinds)."""
    for prefix, kind in _KIND_PREFIXES:
        if text.startswith(prefix):
            return kind
    return "other"


@dataclass(frozen=True)
class Sample:
    """One utilization sample, taken by the background sampler.

    Args:
        t_s: seconds since the run's clock started (same clock as the step offsets).
        cpu_process_pct: this process's CPU use, % of one core (can exceed 100).
        cpu_system_pct: whole-machine CPU use, % of all cores.
        rss_mib: this process's resident memory, MiB.
        gpu_util_pct: per GPU, NVML duty cycle over the driver's sample period.
        gpu_mem_used_mib: per GPU, memory in use, MiB.
        Any field a probe cannot read is ``None`` (or an empty tuple with no GPU).
    """

    t_s: float
    cpu_process_pct: Optional[float] = None
    cpu_system_pct: Optional[float] = None
    rss_mib: Optional[float] = None
    gpu_util_pct: Tuple[Optional[float], ...] = ()
    gpu_mem_used_mib: Tuple[Optional[float], ...] = ()

    @classmethod
    def from_dict(cls, d: dict) -> "Sample":
        return cls(t_s=float(d["t_s"]), cpu_process_pct=d.get("cpu_process_pct"),
                   cpu_system_pct=d.get("cpu_system_pct"), rss_mib=d.get("rss_mib"),
                   gpu_util_pct=tuple(d.get("gpu_util_pct") or ()),
                   gpu_mem_used_mib=tuple(d.get("gpu_mem_used_mib") or ()))


def _floats(name: str, values: Iterable[Any]) -> Tuple[float, ...]:
    out = []
    for v in values:
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise ValueError(f"{name} must hold numbers, got {v!r}")
        out.append(float(v))
    return tuple(out)


@dataclass(frozen=True)
class RunResult:
    """What one run measured. Immutable; warm-up kept apart from measured steps.

    Args:
        config: the RunConfig that ran.
        status: ``"ok"``, ``"failed"``, ``"interrupted"`` or ``"diverged"`` (the loss
            stopped being finite; ``error`` says at which step); ``"running"`` only on disk, in
            the record a fit writes as it starts (``RUNNING``).
        error: the error message when the run did not finish.
        step_times_s: wall time of each measured step, including its wait for input
            (one entry per call; see ``steps_per_call``). How it was timed is
            ``config.timing``: ``"windowed"``: steps ran back to back and a window of them
            ended with one device sync; each step's figure is its host time (fetch and
            dispatch) scaled so that a window's steps add up to its synced wall time, so
            their sum is the training time and the steps' spread is the host's (see
            ``window_calls``). ``"per_step"``: each step ended with a loss read and a device
            sync: its own latency, host and device serialised.
        input_wait_s: per measured step, time blocked fetching its batch (``next()`` on
            the host, timed per step in both modes).
        input_floor_s: with ``data_source="memory"``, the median time of ``next()`` on a
            second iterator over the same staged batches: the wait no pipeline can remove.
            ``input_wait_fraction`` counts only the wait above it. ``None`` otherwise.
        window_calls: windowed timing: the calls each synced window of the measured steps
            held (they add up to the measured calls); empty with per-step timing, and for
            results recorded before windows existed.
        warmup_times_s / warmup_input_wait_s: the same for warm-up steps.
        step_start_s: per measured step, its start on the run clock (for aligning
            utilization samples); ``warmup_start_s`` likewise.
        losses / warmup_losses: loss per step.
        samples: utilization samples on the run clock.
        examples_per_step: global batch size times steps per execution.
        setup_s: seconds spent building data, model and optimizer before step 1.
        fingerprint: versions, devices and machine the run used.
        started_at: ISO-8601 start time; ``run_id`` unique per run.
        notes: what the runner wants shown, as ``Note(kind, text)`` pairs (a plain string
            is accepted and gets its kind from its start); ``notes_of(kind)`` picks some.
        stop_reason: why an observer ended the run early; ``None`` when it ran every step.
            ``tfwb.run`` keeps the status ``"ok"`` (a target loss reached); the Workbench
            records a user's stop (Stop button, kernel interrupt) as ``"interrupted"`` and
            keeps this reason.
        extras: JSON-ready facts observers recorded (``target_reached``, ``profile``,
            ``tensorboard``).
        steps_per_call: training steps each call of the step function ran
            (``steps_per_execution``). Each entry of ``step_times_s`` is one call's
            time divided by this, so every per-step figure is per training step.
        grad_norms / loss_scales: with ``RunConfig(grad_norms=True)``, per measured call
            the global gradient norm before clipping, unscaled, and the loss scale (1 without
            ``mixed_float16``); ``warmup_grad_norms`` / ``warmup_loss_scales`` the same for
            the warm-up calls, kept apart as the times and losses are.
        traces: how many times TF traced the step function (its own count; ``None``
            in eager execution); ``traces_after_warmup``: how many of those happened
            after warm-up (retracing: new input shapes or Python-value arguments).
        limits: how far the run is from this machine's limit (``tfwb.limits_record.Limits``: the
            model's FLOPs per step, the measured and datasheet peaks, the per-call overhead, MFU),
            measured once after the steps (``tfwb.tf.runner.step_limits``). Each of its fields reads as
            an attribute of the result too (``result.mfu``, ``result.peak_flops_per_s``) and is a
            keyword of its own here (``RunResult(..., model_flops_per_step=2e9)``,
            ``dataclasses.replace(result, mfu=None)``), set over ``limits``; ``mfu`` is derived
            when not given. In JSON they are top-level keys, as before the sub-record existed.
        replicas: how many replicas trained together (``num_replicas_in_sync``: 1 for
            ``default``, the devices for ``mirrored``, every worker's devices together for
            ``multi_worker``); ``None`` when the run failed before its strategy existed.
            ``config.batch_size`` is the global batch; each replica got
            ``per_replica_batch`` examples of it.
        warmup_extra_steps: training steps the runner added to the configured warm-up because the
            steps were still speeding up (``tfwb.warmup.extend_warmup``); they are part of
            ``warmup_times_s``. 0 when the warm-up settled as configured, could not be extended,
            and for results recorded before it existed.
    """

    config: RunConfig
    status: str = "ok"
    error: Optional[str] = None
    step_times_s: Tuple[float, ...] = ()
    input_wait_s: Tuple[float, ...] = ()
    warmup_times_s: Tuple[float, ...] = ()
    warmup_input_wait_s: Tuple[float, ...] = ()
    step_start_s: Tuple[float, ...] = ()
    warmup_start_s: Tuple[float, ...] = ()
    losses: Tuple[float, ...] = ()
    warmup_losses: Tuple[float, ...] = ()
    samples: Tuple[Sample, ...] = ()
    examples_per_step: int = 0
    setup_s: float = 0.0
    fingerprint: dict = field(default_factory=dict)
    started_at: str = ""
    run_id: str = ""
    notes: Tuple[Note, ...] = ()
    stop_reason: Optional[str] = None
    extras: dict = field(default_factory=dict)
    steps_per_call: int = 1
    grad_norms: Tuple[float, ...] = ()
    loss_scales: Tuple[float, ...] = ()
    warmup_grad_norms: Tuple[float, ...] = ()
    warmup_loss_scales: Tuple[float, ...] = ()
    traces: Optional[int] = None
    traces_after_warmup: Optional[int] = None
    replicas: Optional[int] = None
    input_floor_s: Optional[float] = None
    window_calls: Tuple[int, ...] = ()
    limits: Limits = field(default_factory=Limits)
    warmup_extra_steps: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.config, RunConfig):
            raise ValueError(f"config must be a RunConfig, got {type(self.config).__name__}")
        if self.status not in STATUSES:
            raise ValueError(f"status={self.status!r} is not allowed; one of {STATUSES}")
        for name in ("step_times_s", "input_wait_s", "warmup_times_s", "warmup_input_wait_s",
                     "step_start_s", "warmup_start_s", "losses", "warmup_losses", "grad_norms", "loss_scales",
                     "warmup_grad_norms", "warmup_loss_scales"):
            object.__setattr__(self, name, _floats(name, getattr(self, name)))
        object.__setattr__(self, "samples", tuple(self.samples))
        object.__setattr__(self, "window_calls", tuple(int(k) for k in self.window_calls))
        extra = self.warmup_extra_steps
        if isinstance(extra, bool) or not isinstance(extra, int) or extra < 0:
            raise ValueError(f"warmup_extra_steps={extra!r} is not allowed; use an int >= 0")
        object.__setattr__(self, "notes", tuple(Note.of(n) for n in self.notes))
        # Keep the fingerprint in its JSON form (tuples as lists), so a result equals
        # its own round trip.
        object.__setattr__(self, "fingerprint", json.loads(json.dumps(finite(self.fingerprint), default=str)))
        object.__setattr__(self, "extras", json.loads(json.dumps(finite(self.extras), default=str)))
        if len(self.input_wait_s) not in (0, len(self.step_times_s)):
            raise ValueError("input_wait_s must have one value per measured step")
        if not isinstance(self.limits, Limits):
            raise ValueError(f"limits must be a Limits, got {type(self.limits).__name__}")
        if self.limits.mfu is None:
            achieved = self.achieved_flops_per_s
            if achieved is not None and self.peak_flops_per_s:
                object.__setattr__(self, "limits", replace(self.limits, mfu=achieved / self.peak_flops_per_s))

    # -- derived numbers ---------------------------------------------------
    @property
    def ok(self) -> bool:
        return self.status == "ok" and bool(self.step_times_s)

    @property
    def all_losses(self) -> Tuple[float, ...]:
        """Every loss in order, warm-up first (one per call of the step function)."""
        return self.warmup_losses + self.losses

    @property
    def all_grad_norms(self) -> Tuple[float, ...]:
        """Every recorded gradient norm in order, warm-up first (aligned with ``all_losses``)."""
        return self.warmup_grad_norms + self.grad_norms

    @property
    def all_loss_scales(self) -> Tuple[float, ...]:
        """Every recorded loss scale in order, warm-up first (aligned with ``all_losses``)."""
        return self.warmup_loss_scales + self.loss_scales

    @property
    def start_loss(self) -> Optional[float]:
        """The first loss of the run (warm-up included); ``None`` without a finite one there."""
        first = self.all_losses[:1]
        return first[0] if first and math.isfinite(first[0]) else None

    def final_loss(self, steps: Optional[int] = None) -> Optional[float]:
        """Mean of the last quarter (at least one) of the measured losses; NaN if any is not finite.

        Args:
            steps: count only the first ``steps`` measured training steps (what a run of
                that many steps would have ended on); ``None``: all of them.

        Returns:
            The mean; ``None`` when the run measured no loss.

        Example:
            >>> r = RunResult(config=RunConfig(), losses=[4.0, 3.0, 2.0, 1.0])
            >>> r.final_loss(), r.final_loss(steps=2)
            (1.0, 3.0)
        """
        losses = list(self.losses)
        if steps is not None:
            losses = losses[:max(1, steps // max(self.steps_per_call, 1))]
        if not losses:
            return None
        tail = losses[-max(1, math.ceil(len(losses) * FINAL_LOSS_SHARE)):]
        if not all(math.isfinite(v) for v in tail):
            return math.nan
        return sum(tail) / len(tail)

    @property
    def steps_done(self) -> int:
        """Training steps the run finished, warm-up included (whole calls times ``steps_per_call``)."""
        return (len(self.warmup_times_s) + len(self.step_times_s)) * self.steps_per_call

    @property
    def measured_steps(self) -> int:
        """Measured training steps (warm-up excluded)."""
        return len(self.step_times_s) * self.steps_per_call

    @property
    def per_example_s(self) -> Optional[float]:
        """Median seconds per training example: the median step over the global batch.

        Runs with different batch sizes compare on this, not on the step time.
        """
        m = self.median_step_s
        return m / self.config.batch_size if m is not None and self.config.batch_size else None

    def notes_of(self, *kinds: str) -> Tuple[str, ...]:
        """The texts of the notes of the given kinds, in order.

        Raises:
            ValueError: for a kind that is not one of ``NOTE_KINDS``.
        """
        bad = [k for k in kinds if k not in NOTE_KINDS]
        if bad:
            raise ValueError(f"kind={bad[0]!r} is not allowed; kind must be one of {NOTE_KINDS}")
        return tuple(n.text for n in self.notes if n.kind in kinds)

    @property
    def spread(self) -> Optional[stats.Spread]:
        """Median and IQR of the measured step times (None without steps)."""
        return stats.Spread.of(self.step_times_s) if self.step_times_s else None

    @property
    def median_step_s(self) -> Optional[float]:
        return stats.median(self.step_times_s) if self.step_times_s else None

    @property
    def throughput_per_s(self) -> Optional[float]:
        """Examples per second at the median step time."""
        m = self.median_step_s
        return self.examples_per_step / m if m and self.examples_per_step else None

    @property
    def input_wait_fraction(self) -> Optional[float]:
        """Total input wait / total step time over the measured steps; with staged batches
        (``data_source="memory"``) only the wait above the iterator's own ``input_floor_s``
        counts (``tfwb.bottleneck.input_fraction``)."""
        return input_fraction(self.step_times_s, self.input_wait_s, self.input_floor_s)

    @property
    def per_replica_batch(self) -> Optional[int]:
        """Examples each replica got per step: the global ``batch_size`` over ``replicas``."""
        return self.config.batch_size // self.replicas if self.replicas else None

    @property
    def retraces(self) -> Optional[int]:
        """TF's own tracing count of the step function (``traces``); see ``traces_after_warmup``."""
        return self.traces

    @property
    def median_wait_s(self) -> Optional[float]:
        """Median input wait per measured step (None when not recorded)."""
        return stats.median(self.input_wait_s) if self.input_wait_s else None

    @property
    def median_compute_s(self) -> Optional[float]:
        """Median step minus median input wait: the step's own work (None without steps).

        Without recorded waits (``steps_per_execution > 1``) it is the median step.
        """
        m = self.median_step_s
        if m is None:
            return None
        return max(0.0, m - (self.median_wait_s or 0.0))

    def utilization(self) -> dict:
        """Utilization over the measured steps, summarized: medians of the samples taken then.

        Returns:
            ``{"samples", "cpu_process_pct", "cpu_system_pct", "rss_peak_mib",
            "gpu_util_pct" (per GPU), "gpu_mem_peak_mib" (per GPU)}``; a figure no
            sample had is ``None`` (``[]`` per GPU without a GPU). Samples outside the
            measured steps (setup, warm-up) are left out when step starts are known.
        """
        chosen = list(self.samples)
        if self.step_start_s and self.step_times_s:
            lo = self.step_start_s[0]
            hi = self.step_start_s[-1] + self.step_times_s[-1]
            inside = [s for s in chosen if lo <= s.t_s <= hi]
            chosen = inside or chosen

        def med(values):
            values = [v for v in values if v is not None]
            return stats.median(values) if values else None

        def peak(values):
            values = [v for v in values if v is not None]
            return max(values) if values else None

        n_gpus = max((len(s.gpu_util_pct) for s in chosen), default=0)
        return {
            "samples": len(chosen),
            "cpu_process_pct": med(s.cpu_process_pct for s in chosen),
            "cpu_system_pct": med(s.cpu_system_pct for s in chosen),
            "rss_peak_mib": peak(s.rss_mib for s in chosen),
            "gpu_util_pct": [med(s.gpu_util_pct[g] if g < len(s.gpu_util_pct) else None for s in chosen)
                             for g in range(n_gpus)],
            "gpu_mem_peak_mib": [peak(s.gpu_mem_used_mib[g] if g < len(s.gpu_mem_used_mib) else None
                                      for s in chosen) for g in range(n_gpus)],
        }

    # -- how far from the limit ----------------------------------------------
    @property
    def compute_dtype(self) -> str:
        """The dtype the run's matmuls compute in: ``float32``, ``float16`` or ``bfloat16``."""
        return _compute_dtype(self.config.mixed_precision)

    @property
    def achieved_flops_per_s(self) -> Optional[float]:
        """Model FLOPs per second at the median step time; ``None`` without a counted model or steps.

        Example:
            >>> r = RunResult(config=RunConfig(), step_times_s=(0.5, 0.5), model_flops_per_step=1e9)
            >>> r.achieved_flops_per_s
            2000000000.0
        """
        m = self.median_step_s
        if self.model_flops_per_step is None or not m:
            return None
        return self.model_flops_per_step / m

    @property
    def datasheet_mfu(self) -> Optional[float]:
        """Achieved FLOP/s over the datasheet peak of the compute dtype (``None`` when either is unknown)."""
        achieved = self.achieved_flops_per_s
        if achieved is None or not self.datasheet_flops_per_s:
            return None
        return achieved / self.datasheet_flops_per_s

    @property
    def peak_reads_low(self) -> bool:
        """The measured peak this run's MFU is against likely reads low, so its MFU (and the headroom,
        1 / MFU) cannot be taken at its word: measured while other programs used the cores
        (``peak_loaded``), or a CPU figure under ``tfwb.datasheet.SUSPECT_SHARE`` of the cores x clock
        x FLOPs/cycle formula.

        Example:
            >>> RunResult(config=RunConfig(), peak_flops_per_s=50e9, datasheet_flops_per_s=300e9,
            ...           datasheet_source="formula: 2 cores x ...").peak_reads_low
            True
        """
        if self.peak_loaded:
            return True
        formula = self.datasheet_flops_per_s if self.datasheet_source.startswith("formula") else None
        return bool(self.peak_flops_per_s and formula and self.peak_flops_per_s < SUSPECT_SHARE * formula)

    def mfu_text(self) -> str:
        """How far the run is from this machine's limit, in words; ``""`` where nothing was counted.

        ``"MFU 23 % of this machine's measured bfloat16 peak (41 % of datasheet)"``;
        ``"MFU not counted (layers: lstm (LSTM))"`` when a layer could not be counted;
        ``"MFU unknown: ..."`` when the peak was not measured. Never a number that was
        not measured: a result recorded before FLOPs were counted says nothing (``""``).

        Example:
            >>> r = RunResult(config=RunConfig(), step_times_s=(0.1,) * 3, model_flops_per_step=2.3e9,
            ...               peak_flops_per_s=1e11, datasheet_flops_per_s=5.6e10)
            >>> r.mfu_text()
            "MFU 23 % of this machine's measured float32 peak (41 % of datasheet)"
        """
        if self.flops_uncounted:
            shown = ", ".join(self.flops_uncounted[:UNCOUNTED_SHOWN])
            more = len(self.flops_uncounted) - UNCOUNTED_SHOWN
            return f"MFU not counted (layers: {shown}{f' and {more} more' if more > 0 else ''})"
        if self.model_flops_per_step is None or self.achieved_flops_per_s is None:
            return ""
        dtype = self.compute_dtype
        if self.mfu is None:
            why = self.peak_reason or "no measured peak"
            text = f"MFU unknown: this machine's {dtype} peak was not measured ({why})"
            if self.datasheet_mfu is not None:
                text += f"; {percent(self.datasheet_mfu)} of {self.datasheet_kind}"
            return text
        if self.mfu > 1.0:
            # Achieved above the "peak": the benchmark read low (a short budget, other work on the
            # cores), or the step's kernels beat a square matmul of the benchmark's size.
            load = " under load" if self.peak_loaded else ""
            text = (f"MFU not meaningful: the step achieved {percent(self.mfu)} of the {dtype} peak measured "
                    f"here{load}, so that measurement read low (measure it again on a quiet machine: "
                    f"tfwb.measure_peak(\"{dtype}\", refresh=True))")
            if self.datasheet_mfu is not None:
                text += f"; {percent(self.datasheet_mfu)} of {self.datasheet_kind}"
            return text
        text = f"MFU {percent(self.mfu)} of this machine's measured {dtype} peak"
        about = [self._peak_spread_text] if self._peak_spread_text else []
        if self.datasheet_mfu is not None:
            about.append(f"{percent(self.datasheet_mfu)} of {self.datasheet_kind}")
        if about:
            text += f" ({'; '.join(about)})"
        return text

    @property
    def _peak_spread_text(self) -> str:
        """``"measured 3 times, 29-34 GFLOP/s"``, ``"measured under load, 13 GFLOP/s: it likely reads
        low"`` or ``""`` (a record without a spread)."""
        s = self.peak_spread
        if not isinstance(s, dict) or not s.get("count") or not s.get("high"):
            return ""
        n = int(s["count"])
        times = "once" if n == 1 else f"{n} times"
        span = (_flop_rate(s["high"]) if n == 1 or not s.get("low") or s["low"] == s["high"]
                else f"{_flop_rate(s['low'], unit=False)}-{_flop_rate(s['high'])}")
        if self.peak_loaded:
            return f"measured {times} under load, {span}: it likely reads low"
        return f"measured {times}, {span}"

    @property
    def datasheet_kind(self) -> str:
        """What ``datasheet_flops_per_s`` is: ``"datasheet"`` (a published figure), or for a CPU
        ``"cores x clock x FLOPs/cycle"`` (a formula: no datasheet publishes a CPU's peak)."""
        return "cores x clock x FLOPs/cycle" if self.datasheet_source.startswith("formula") else "datasheet"

    @property
    def first_step_s(self) -> Optional[float]:
        """The first step's time (tracing, compilation): warm-up if any, else step 0."""
        seq = self.warmup_times_s or self.step_times_s
        return seq[0] if seq else None

    def summary(self) -> str:
        """One line: median step time, IQR, throughput, MFU, the input-bound verdict.

        Data only: what to try next is an interpretation (``tfwb.diagnose(result)``), which the
        record does not import.
        """
        name = self.config.label or self.config.workload
        if not self.ok:
            return f"{name}: {self.status}: {self.error or 'no measured steps'}"
        s = self.spread
        parts = [f"{name}: median step {s.median * 1e3:.1f} ms (IQR {s.q1 * 1e3:.1f}-{s.q3 * 1e3:.1f})"]
        if self.throughput_per_s:
            parts.append(f"{self.throughput_per_s:,.0f} examples/s")
        mfu = self.mfu_text()
        if mfu:
            parts.append(mfu)
        frac = self.input_wait_fraction
        if frac is not None:
            parts.append(f"{input_verdict(frac)} (input wait {frac:.0%})")
        return ", ".join(parts)

    # -- JSON ----------------------------------------------------------------
    def to_dict(self) -> dict:
        d = {f.name: getattr(self, f.name) for f in fields(self)}
        d["config"] = self.config.to_dict()
        d["samples"] = [asdict(s) for s in self.samples]
        d["notes"] = [[n.kind, n.text] for n in self.notes]
        d.update(d.pop("limits").to_dict())          # top-level keys, as before the sub-record
        d["schema"] = SCHEMA_VERSION
        for k, v in d.items():
            if isinstance(v, tuple):
                d[k] = list(v)
        return d

    def to_json(self) -> str:
        """One line of JSON (NaN/inf become null)."""
        return json.dumps(finite(self.to_dict()), separators=(",", ":"))

    @classmethod
    def from_dict(cls, d: Any) -> "RunResult":
        if not isinstance(d, dict) or "config" not in d:
            raise ValueError("not a RunResult: expected a JSON object with a 'config' field")
        try:
            kwargs = {k: d[k] for k in (*(f.name for f in fields(cls) if f.name != "limits"), *LIMIT_FIELDS)
                      if k in d}
            config = dict(d["config"]) if isinstance(d["config"], dict) else d["config"]
            if isinstance(config, dict):
                config.setdefault("timing", "per_step")   # recorded before the knob: timed per step
            kwargs["config"] = RunConfig.from_dict(config, check_workload=False)
            kwargs["samples"] = tuple(Sample.from_dict(s) for s in d.get("samples") or ())
            for k in ("losses", "warmup_losses", "grad_norms", "loss_scales", "warmup_grad_norms",
                      "warmup_loss_scales"):
                if k in kwargs:
                    kwargs[k] = [math.nan if v is None else v for v in kwargs[k]]
            if d.get("schema", 1) < 2 and kwargs.get("grad_norms"):
                # Schema 1 kept warm-up calls at the front of grad_norms / loss_scales.
                w = len(kwargs.get("warmup_times_s") or ())
                for k in ("grad_norms", "loss_scales"):
                    kwargs["warmup_" + k], kwargs[k] = kwargs[k][:w], kwargs[k][w:]
            return cls(**kwargs)
        except (TypeError, KeyError, AttributeError) as e:
            raise ValueError(f"not a RunResult: {type(e).__name__}: {e}") from None

    @classmethod
    def from_json(cls, text: str) -> "RunResult":
        """Parse ``to_json()`` output.

        Raises:
            ValueError: for text that is not a RunResult (bad JSON, missing or bad fields).
        """
        try:
            data = json.loads(text)
        except (TypeError, json.JSONDecodeError) as e:
            raise ValueError(f"not a RunResult: invalid JSON ({e})") from None
        return cls.from_dict(data)


def _flop_rate(value: float, unit: bool = True) -> str:
    """``"34 GFLOP/s"`` (``"34"`` without the unit; the scale of 1e9 below a tera)."""
    scale, prefix = (1e12, "T") if value >= 1e12 else (1e9, "G")
    return f"{value / scale:.3g}" + (f" {prefix}FLOP/s" if unit else "")


def percent(fraction: float) -> str:
    """A fraction as a percentage with a space and two significant digits below 10 %.

    Example:
        >>> percent(0.2349), percent(0.0412), percent(0.00041)
        ('23 %', '4.1 %', '0.041 %')
    """
    v = fraction * 100
    if v >= 10:
        return f"{v:.0f} %"
    return f"{v:.2g} %"


def _limit_keywords(generated: Callable[..., None]) -> Callable[..., None]:
    """``RunResult.__init__``: the generated one, also taking each ``Limits`` field as a keyword
    of its own (``RunResult(..., mfu=0.2)``, ``dataclasses.replace(r, peak_flops_per_s=1e11)``),
    set over ``limits`` (or over an empty ``Limits``)."""

    @functools.wraps(generated)
    def __init__(self: "RunResult", *args: Any, **kwargs: Any) -> None:
        given = {k: kwargs.pop(k) for k in LIMIT_FIELDS if k in kwargs}
        if given:
            base = kwargs.get("limits", Limits())
            if not isinstance(base, Limits):
                raise ValueError(f"limits must be a Limits, got {type(base).__name__}")
            kwargs["limits"] = replace(base, **given)
        generated(self, *args, **kwargs)

    return __init__


def _limit_reader(name: str) -> property:
    return property(lambda self: getattr(self.limits, name),
                    doc=f"``limits.{name}``: see ``tfwb.limits_record.Limits``.")


RunResult.__init__ = _limit_keywords(RunResult.__init__)  # type: ignore[method-assign]
for _name in LIMIT_FIELDS:
    setattr(RunResult, _name, _limit_reader(_name))
del _name
