"""How far a run is from this machine's limit, measured once per run: ``measure_limits`` -> ``Limits``.

The single-process runner (``tfwb.tf.runner.train.run_process``) calls ``measure_limits`` once
per run, after its steps (nothing here runs in the step loop), and builds its RunResult with
the record (``tfwb.limits_record.Limits``); the fit Monitor (``tfwb.keras``) calls it too. The
model's FLOPs are counted from its layers (``flops.count_flops``: once per model build,
milliseconds) and this machine's peak in the run's compute dtype is read from
``matmul_peak.measure_peak`` (a matmul benchmark cached per machine fingerprint: the first run
on a machine pays up to ``PEAK_BUDGET_S`` per dtype, later runs read the cache; in one process
each peak is read once). Under ``TFWB_FAST=1`` (tests, small chapters) the benchmark gets
``FAST_PEAK_BUDGET_S`` per dtype (``measure_peak(quick=True)``: the full figure when one is
cached, else a quick one, cached apart so later processes reuse it and a rough figure never
stands in for the real one). The float32 peak is read too (the bound of a mixed precision
suggestion is a ratio to it), and on an accelerator the other half-precision dtype as well; a
CPU is never suggested mixed precision, so its half-precision peaks are measured only for runs
that use them. A cluster's workers do not measure (they share or span machines):
``peak_reason`` says so, and ``mfu`` stays None. The datasheet figure (``tfwb.datasheet``) and
the per-call overhead (``call_overhead_s``) are read here too.

Global state: the peaks, the datasheet figures and the traced no-op are cached per process
(``_PEAKS``, ``_DATASHEET``, ``_NOOP``). Importing this module changes nothing.
"""
from __future__ import annotations

import os
import time
from typing import Any, Callable, List, Optional

import tensorflow as tf

from tfwb import datasheet, stats
from tfwb.config import RunConfig, compute_dtype
from tfwb.limits_record import Limits
from tfwb.tf.runner.flops import count_flops
from tfwb.tf.runner.strategies import CLUSTER_STRATEGIES

__all__ = ["measure_limits", "call_overhead_s", "PEAK_BUDGET_S", "FAST_PEAK_BUDGET_S", "RETRY_LOADED_S"]

#: ``calls`` of the no-op function ``call_overhead_s`` times.
OVERHEAD_CALLS = 21
#: Seconds the peak benchmark may take per dtype on a machine's first run.
PEAK_BUDGET_S = 1.5
#: Under ``TFWB_FAST=1``: per dtype; the figure is cached apart from the full ones and never replaces one.
FAST_PEAK_BUDGET_S = 0.2
#: Peaks read in this process, by (dtype, device, fast): ``(Peak, time.monotonic() when measured)``.
#: Each is benchmarked (or read) once; later reads take a better figure from the cache (another
#: process's or ``measure_peak``'s), and one measured under load is measured again after
#: ``RETRY_LOADED_S``.
_PEAKS: dict = {}
#: Seconds after which a peak this process measured under load (``Peak.loaded``) is measured again
#: (not under ``TFWB_FAST``: there each process measures once, the next process again).
RETRY_LOADED_S = 60.0
#: The no-op function ``call_overhead_s`` times, and the datasheet figures, once per process.
_NOOP: dict = {}
_DATASHEET: dict = {}


def measure_limits(cfg: RunConfig, strategy: Any, model: Any, notes: Optional[List[str]] = None) -> Limits:
    """How far a run is from this machine's limit, as the record its RunResult holds.

    Counts the model's FLOPs (``count_flops``), reads this machine's peak per dtype
    (``measure_peak``, see the module docstring for when it is measured and cached), the
    datasheet peak, and the per-call overhead (``call_overhead_s``). Nothing here raises:
    what could not be read is ``None`` with a reason (``peak_reason``) or a note.

    ``model_flops_per_step`` counts the matmuls and convolutions (``FlopCount.train_step(batch,
    "matmul")``): what the peak measures, so MFU compares like with like; the elementwise FLOPs
    are ``elementwise_flops_per_step``. Each entry of ``peaks`` also says whether its figure was
    measured under load (``"loaded"``) and the spread of the figures it was chosen from
    (``"spread"``: ``{"low", "high", "count", "measured"}``, FLOP/s times the replicas like
    ``"measured"``); for the run's dtype they are ``peak_loaded`` and ``peak_spread`` too.
    ``mfu`` is left to the RunResult (it knows the step time).

    Args:
        cfg: the run's knobs (the compute dtype, the global batch, the strategy).
        strategy: the strategy the step ran under (its devices).
        model: the built model.
        notes: where a note on a count that failed goes.

    Returns:
        The ``Limits`` (``RunResult(..., limits=...)``).
    """
    out: dict = {}
    try:
        count = count_flops(model)
        out["model_flops_per_step"] = count.train_step(cfg.batch_size, "matmul")
        out["elementwise_flops_per_step"] = count.train_step(cfg.batch_size, "elementwise")
        out["flops_uncounted"] = tuple(count.uncounted)
    except Exception as e:  # noqa: BLE001 - a model the counter cannot read: say so, never a wrong number
        out["flops_uncounted"] = (f"the whole model ({type(e).__name__}: {e})",)
    try:
        out["call_overhead_s"] = call_overhead_s()
    except Exception as e:  # noqa: BLE001 - a figure the bound does without
        if notes is not None:
            notes.append(f"steps_per_execution: the per-call overhead was not measured ({type(e).__name__}: {e})")
    if cfg.strategy in CLUSTER_STRATEGIES:
        out["peak_reason"] = "a cluster's workers do not measure a peak (they share or span machines)"
        return Limits(**out)
    out.update(_peak_facts(compute_dtype(cfg.mixed_precision), strategy))
    return Limits(**out)


def _peak_facts(dtype: str, strategy: Any) -> dict:
    """The peak fields of ``Limits`` for a run computing in ``dtype`` on ``strategy``'s devices."""
    out: dict = {}
    kind, count_devices, device = _step_devices(strategy)
    wanted = ["float32", dtype] + (["bfloat16", "float16"] if kind != "CPU" else [])
    fast = os.environ.get("TFWB_FAST") == "1"
    peaks: dict = {}
    scale = count_devices if kind != "CPU" else 1
    quick = None
    for d in dict.fromkeys(wanted):                 # in order, once each
        entry = {"measured": None, "datasheet": None, "source": "", "loaded": None, "spread": None}
        try:
            pk = _peak(d, device, fast)
            if pk.flops_per_s:
                entry["measured"] = pk.flops_per_s * scale
                entry["loaded"] = bool(getattr(pk, "loaded", False))
                spread = getattr(pk, "spread", None)
                if spread:
                    entry["spread"] = {"low": spread[0] * scale, "high": spread[1] * scale, "count": spread[2],
                                       "measured": max(len(getattr(pk, "figures", ()) or ()), spread[2])}
            if d == dtype:
                out["peak_device"] = pk.device + (f" x {count_devices}" if kind != "CPU" and count_devices > 1
                                                  else "")
                out["peak_reason"] = "" if pk.flops_per_s else (pk.reason or "not measured")
                quick = getattr(pk, "quick", None)
        except Exception as e:  # noqa: BLE001 - no peak is no error: the run says why
            if d == dtype:
                out["peak_reason"] = f"the benchmark failed: {type(e).__name__}: {e}"
        flops, source = _datasheet(kind, out.get("peak_device", ""), d)
        if flops:
            entry["datasheet"], entry["source"] = flops * (count_devices if kind != "CPU" else 1), source
        peaks[d] = entry
    out["peaks"] = peaks
    out["peak_flops_per_s"] = peaks[dtype]["measured"]
    out["datasheet_flops_per_s"] = peaks[dtype]["datasheet"]
    out["datasheet_source"] = peaks[dtype]["source"]
    out["peak_spread"] = peaks[dtype]["spread"]
    out["peak_loaded"] = peaks[dtype]["loaded"]
    if fast and out["peak_flops_per_s"] and quick is not False:
        out["peak_device"] = out.get("peak_device", "") + (
            " (TFWB_FAST=1: a short benchmark)" if quick else
            " (TFWB_FAST=1: a short benchmark unless this machine's full one was cached)")
    return out


def call_overhead_s(calls: int = OVERHEAD_CALLS, clock: Callable[[], float] = time.perf_counter) -> float:
    """The median cost of calling a traced ``tf.function`` that does no work: dispatch alone.

    A floor of the per-call overhead ``steps_per_execution`` amortises (the step's own
    call passes more arguments, and a strategy's ``run`` adds to it).
    """
    if "noop" not in _NOOP:                    # traced once per process
        _NOOP["noop"], _NOOP["x"] = tf.function(lambda x: x), tf.constant(0.0)
        _NOOP["noop"](_NOOP["x"])
    noop, x = _NOOP["noop"], _NOOP["x"]
    times = []
    for _ in range(calls):
        t0 = clock()
        noop(x)
        times.append(clock() - t0)
    return stats.median(times)


def _step_devices(strategy) -> tuple:
    """(kind ``"GPU"``/``"TPU"``/``"CPU"``, how many, ``measure_peak``'s device: ``"GPU:n"``, ``"TPU"``, ``"CPU"``).

    The devices the step ran on: the strategy's; for the default strategy, the first GPU
    (TensorFlow places ops there) or the CPU. Logical CPU devices count once: they share
    the same cores.
    """
    try:
        names = list(strategy.extended.worker_devices)
    except (AttributeError, NotImplementedError, RuntimeError, ValueError):
        names = []
    if _is_default(strategy) or not names:
        return ("GPU", 1, "GPU:0") if tf.config.list_logical_devices("GPU") else ("CPU", 1, "CPU")
    for kind in ("TPU", "GPU"):
        mine = [n for n in names if f"{kind}:" in n.upper()]
        if mine:
            index = mine[0].rsplit(":", 1)[-1]
            return kind, len(mine), f"GPU:{index}" if kind == "GPU" and index.isdigit() else kind
    return "CPU", 1, "CPU"


def _is_default(strategy) -> bool:
    """Whether ``strategy`` is TensorFlow's default (no distribution): TF's own placement then."""
    return strategy is tf.distribute.get_strategy() and not tf.distribute.has_strategy()


def _peak(dtype: str, device: str, fast: bool):
    """``measure_peak`` once per process per (dtype, device); under TFWB_FAST a quick one (cached apart).

    A later read takes the cache's figure when it ranks higher (``matmul_peak.rank``: a quiet
    one over one measured under load, else the higher), so a peak measured meanwhile (by
    another process, or by ``measure_peak`` in this one) is used; a figure measured under load
    is measured again once ``RETRY_LOADED_S`` have passed.
    """
    from tfwb.tf.runner.matmul_peak import cached_peak, measure_peak, rank   # lazy: only a run that measured steps reads a peak

    key = (dtype, device, fast)
    held = _PEAKS.get(key)
    now = time.monotonic()
    stale = (held is not None and not fast           # TFWB_FAST (tests, small chapters): once per process
             and getattr(held[0], "loaded", False) and now - held[1] >= RETRY_LOADED_S)
    if held is None or stale:
        _PEAKS[key] = (measure_peak(dtype, device, budget_s=FAST_PEAK_BUDGET_S if fast else PEAK_BUDGET_S,
                                    quick=fast), now)
    else:
        try:
            newer = cached_peak(dtype, device, quick=fast)
        except Exception:  # noqa: BLE001 - the figure held stands
            newer = None
        if newer is not None and rank(newer) > rank(held[0]):
            _PEAKS[key] = (newer, held[1])
    return _PEAKS[key][0]


def _datasheet(kind: str, peak_device: str, dtype: str) -> tuple:
    """(FLOP/s, source) from the datasheet table for an accelerator, the CPU formula for a CPU; (None, "")."""
    key = (kind, peak_device, dtype)
    if key not in _DATASHEET:
        _DATASHEET[key] = _read_datasheet(kind, peak_device, dtype)
    return _DATASHEET[key]


def _read_datasheet(kind: str, peak_device: str, dtype: str) -> tuple:
    try:
        if kind == "CPU":
            from tfwb import hardware

            hw = hardware.detect()
            ghz, clock = datasheet.cpu_clock()
            found = datasheet.cpu_peak(hw.cpu_count or 0, ghz, hw.cpu_flags, dtype, clock=clock)
        else:
            name = peak_device
            if kind == "GPU":
                details = tf.config.experimental.get_device_details(tf.config.list_physical_devices("GPU")[0])
                name = details.get("device_name") or peak_device
            found = datasheet.datasheet_peak(name, dtype)
    except (ValueError, IndexError, OSError):
        found = None
    return found if found else (None, "")
