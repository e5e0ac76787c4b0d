"""The background Sampler: one daemon thread that reads the probes every ``interval_s``.

Owns the sampling thread, its timing and its record (a list of ``tfwb.records.Sample``).
A probe that raises costs that probe's fields in one sample, never the thread. The thread
never outlives ``stop()`` or the ``with`` block, even when the block raises.
"""
from __future__ import annotations

import math
import threading
import time
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from tfwb.records import Sample
from tfwb import nvml
from tfwb.utilization.probes import PROBE_FIELDS, Probe, PsutilProbe

#: Shortest allowed period: below it the probes' own cost and NVML's ~200 ms window
#: make more samples meaningless.
MIN_INTERVAL_S = 0.05
#: Name of every sampler thread (see ``sampler_threads``).
THREAD_NAME = "tfwb-sampler"
#: At most this many probe error messages are kept per Sampler (``error_count`` counts all).
MAX_ERRORS = 100
#: How long ``stop()`` waits for a probe stuck inside a read before giving up on the thread.
STOP_TIMEOUT_S = 10.0


def sampler_threads() -> List[threading.Thread]:
    """The sampler threads alive now (for leak checks in tests).

    Example:
        >>> sampler_threads()
        []
    """
    return [t for t in threading.enumerate() if t.name == THREAD_NAME and t.is_alive()]


def default_probes() -> List[Probe]:
    """The probes this machine supports: psutil's when importable, NVML's when it works.

    Returns:
        ``[PsutilProbe()]`` plus ``NvmlProbe()`` when ``nvml_available()``; a probe that
        cannot be built here (psutil missing) is left out.
    """
    probes: List[Probe] = []
    try:
        probes.append(PsutilProbe())
    except Exception:  # noqa: BLE001 - psutil missing or refused: sample without it
        pass
    if nvml.nvml_available():
        probes.append(nvml.NvmlProbe())
    return probes


class Sampler:
    """Samples utilization on a background thread while a run trains.

    One sample is taken on the caller's thread at ``start()`` and one at ``stop()``, so even
    a very short run has two; all others are taken by the daemon thread ``"tfwb-sampler"``
    every ``interval_s`` (on a fixed schedule; ticks missed while a probe was slow are
    skipped, not bunched). ``tick()`` takes one sample on the caller's thread, with or
    without the thread running: tests drive a Sampler tick by tick with a fake clock. The
    Sampler owns its probes: ``stop()`` closes them. It runs once: build a new one for the
    next run.

    Args:
        interval_s (float, default 0.2): seconds between samples; at least ``MIN_INTERVAL_S``.
        probes (sequence of Probe | None, default None): what to read; ``None`` means
            ``default_probes()``, built at ``start()``.
        clock (callable() -> float | None, default None): gives each sample's ``t_s``; pass
            the run's clock to align samples with step times. ``None`` is seconds since
            ``start()`` on ``time.perf_counter_ns``.

    Attributes:
        samples (tuple of Sample): everything sampled so far; safe to read while running.
        errors (tuple of str): the first ``MAX_ERRORS`` probe errors, ``"t_s=…: Probe: …"``.
        error_count (int): how many probe errors there were in all.

    Raises:
        ValueError: ``interval_s`` is not a finite number >= ``MIN_INTERVAL_S``.

    Example:
        >>> class Rss:                  # a probe: each read() returns the next of its values
        ...     def __init__(self, *mib): self.values = iter(mib)
        ...     def read(self): return {"rss_mib": next(self.values, 10.0)}
        ...     def close(self): pass
        >>> with Sampler(interval_s=0.05, probes=[Rss()]) as s:
        ...     pass
        >>> [x.rss_mib for x in s.samples][:2]
        [10.0, 10.0]
        >>> manual = Sampler(probes=[Rss(1.0, 2.0)],
        ...                  clock=iter([0.0, 0.2, 0.4]).__next__)
        >>> [manual.tick().t_s, manual.tick().t_s]      # no thread: one sample per call
        [0.0, 0.2]
        >>> [x.rss_mib for x in manual.stop()]          # stop() takes no sample unless started
        [1.0, 2.0]
    """

    def __init__(self, interval_s: float = 0.2, probes: Optional[Sequence[Probe]] = None,
                 clock: Optional[Callable[[], float]] = None) -> None:
        if (isinstance(interval_s, bool) or not isinstance(interval_s, (int, float))
                or not math.isfinite(interval_s) or interval_s < MIN_INTERVAL_S):
            raise ValueError(f"interval_s={interval_s!r} is not allowed; "
                             f"use a number of seconds >= {MIN_INTERVAL_S}")
        self.interval_s = float(interval_s)
        self._probes: Optional[List[Probe]] = list(probes) if probes is not None else None
        self._clock = clock
        self._lock = threading.Lock()
        self._read_lock = threading.Lock()  # one probe read at a time: tick() vs the thread
        self._ready = False                 # probes and clock resolved (start() or tick())
        self._samples: List[Sample] = []
        self._errors: List[str] = []
        self.error_count = 0
        self._stop_event = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self._state = "new"  # new -> running -> stopped

    # -- public ----------------------------------------------------------------
    @property
    def samples(self) -> Tuple[Sample, ...]:
        with self._lock:
            return tuple(self._samples)

    @property
    def errors(self) -> Tuple[str, ...]:
        with self._lock:
            return tuple(self._errors)

    @property
    def running(self) -> bool:
        return self._state == "running"

    @property
    def probes(self) -> Tuple[Probe, ...]:
        """The probes in use (empty before ``start()`` when they are the defaults)."""
        return tuple(self._probes or ())

    def start(self) -> "Sampler":
        """Take the first sample here, then start the thread.

        Returns:
            self, so that ``s = Sampler().start()`` works.

        Raises:
            RuntimeError: this Sampler was already started.
        """
        if self._state != "new":
            raise RuntimeError(f"this Sampler is {self._state}; build a new one for each run")
        self._prepare()
        self._take()  # a clock that raises here raises from start(): no thread exists yet
        self._state = "running"
        self._thread = threading.Thread(target=self._run, name=THREAD_NAME, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> Tuple[Sample, ...]:
        """Stop and join the thread, take the last sample here, close the probes. Idempotent.

        Returns:
            All samples (as ``samples``).
        """
        if self._state != "running":
            if self._state == "new":
                self._state = "stopped"
                if self._ready:  # driven by tick() alone: release the probes it used
                    self._close_probes()
            return self.samples
        self._state = "stopped"
        self._stop_event.set()
        thread, self._thread = self._thread, None
        stuck = False
        if thread is not None:
            thread.join(STOP_TIMEOUT_S)
            stuck = thread.is_alive()
        if stuck:
            # A probe hangs inside a read (e.g. a wedged driver): reading it again here could
            # hang the caller too. The daemon thread will end when the read returns.
            self._record_error(f"sampler thread did not stop within {STOP_TIMEOUT_S} s: "
                               "a probe is stuck in read(); no final sample")
        else:
            try:
                self._take()
            except Exception as e:  # noqa: BLE001 - e.g. a caller's clock that raised
                self._record_error(f"final sample lost: {type(e).__name__}: {e}")
            self._close_probes()
        return self.samples

    def tick(self) -> Sample:
        """Take one sample now, on the caller's thread, and return it.

        Works before ``start()`` (no thread is started: the caller decides when samples
        are taken, e.g. a test with a fake clock) and while running (an extra sample).
        A probe that raises costs its fields in this sample (recorded in ``errors``).

        Raises:
            RuntimeError: the Sampler was stopped (its probes are closed).
            Exception: whatever the clock raises.
        """
        if self._state == "stopped":
            raise RuntimeError("this Sampler is stopped; build a new one to sample again")
        self._prepare()
        return self._take()

    # -- as a run observer (tfwb.observers): sample from the first step to the end --
    def on_run_start(self, run: Any) -> None:
        if self._state == "new":
            self.start()

    def on_run_end(self, run: Any) -> None:
        run.samples = self.stop()
        for message in self.errors[:3]:
            run.notes.append(f"sampler: {message}")

    def __enter__(self) -> "Sampler":
        return self.start()

    def __exit__(self, *exc: Any) -> bool:
        self.stop()
        return False

    def __repr__(self) -> str:
        return (f"Sampler(interval_s={self.interval_s}, {self._state}, "
                f"{len(self._samples)} samples, {self.error_count} errors)")

    # -- internals ---------------------------------------------------------------
    def _prepare(self) -> None:
        """Resolve the default probes and clock once (at ``start()`` or the first ``tick()``)."""
        if self._ready:
            return
        if self._probes is None:
            self._probes = default_probes()
        if self._clock is None:
            t0_ns = time.perf_counter_ns()
            self._clock = lambda: (time.perf_counter_ns() - t0_ns) / 1e9
        self._ready = True

    def _close_probes(self) -> None:
        for probe in self._probes or ():
            try:
                probe.close()
            except Exception as e:  # noqa: BLE001 - closing must not hide the run's result
                self._record_error(f"{type(probe).__name__}.close: {type(e).__name__}: {e}")

    def _run(self) -> None:
        next_s = time.monotonic() + self.interval_s
        while not self._stop_event.wait(max(0.0, next_s - time.monotonic())):
            try:
                self._take()
            except Exception as e:  # noqa: BLE001 - e.g. a caller's clock that raised
                self._record_error(f"sample lost: {type(e).__name__}: {e}")
            next_s += self.interval_s
            behind_s = time.monotonic() - next_s
            if behind_s > 0:  # a slow read: skip the missed ticks instead of bunching them
                next_s += math.ceil(behind_s / self.interval_s) * self.interval_s

    def _take(self) -> Sample:
        with self._read_lock:
            return self._take_locked()

    def _take_locked(self) -> Sample:
        t_s = float(self._clock())
        fields: Dict[str, Any] = {}
        for probe in self._probes or ():
            try:
                values = probe.read()
                unknown = sorted(set(values) - set(PROBE_FIELDS))
                if unknown:
                    raise ValueError(f"returned unknown field(s) {unknown}; "
                                     f"allowed: {list(PROBE_FIELDS)}")
            except Exception as e:  # noqa: BLE001 - a failing probe must not kill the thread
                self._record_error(f"t_s={t_s:.3f}: {type(probe).__name__}: "
                                   f"{type(e).__name__}: {e}")
                continue
            fields.update(values)
        for name in ("gpu_util_pct", "gpu_mem_used_mib"):
            if name in fields:
                fields[name] = tuple(fields[name])
        sample = Sample(t_s=t_s, **fields)
        with self._lock:
            self._samples.append(sample)
        return sample

    def _record_error(self, message: str) -> None:
        with self._lock:
            self.error_count += 1
            if len(self._errors) < MAX_ERRORS:
                self._errors.append(message)
