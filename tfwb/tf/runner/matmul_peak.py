"""This machine's peak FLOP/s per dtype, measured: a square-matmul benchmark and its cache.

``measure_peak(dtype)`` times a chain of ``n x n`` matmuls in a ``tf.function`` on the device
a step runs on (every CPU core, one GPU, a TPU core): a warm-up call, then a few timed calls
within ``budget_s``, each synced by reading a scalar back, and reports ``2 n^3 / t`` of the
fastest. A dtype whose single matmul takes too long (bfloat16 or float16 emulated on a CPU)
gets a smaller ``n``: it is measured anyway, slow as it is — that is the lesson.

A peak is a maximum, and other programs on the cores pull a measurement down: while it runs,
the CPU time other programs take on this process's cores is read (psutil's CPU times, as
``cpu_percent`` counts them, minus this process's own). A CPU figure measured while they took
at least ``BUSY_SHARE`` of those cores is marked ``loaded``. (On a GPU or a TPU the share is
recorded but does not mark the figure: the host's other programs hardly slow a matmul there.)

Results are cached in ``peaks.json`` under ``$TFWB_CACHE_DIR``, else
``$XDG_CACHE_HOME/tfwb``, else ``~/.cache/tfwb``, keyed by the machine's fingerprint (the
hardware and TensorFlow parts of ``tfwb.tf.runner.fingerprint``): a machine whose fingerprint
changed is measured again; a cache that cannot be read or written is no error. The cache keeps
the best figure: a quiet one over a loaded one, else the higher (``rank``), and the last
``MAX_FIGURES`` figures measured, so a peak states its spread (``Peak.spread``). One short
measurement on a CPU is not final, however quiet: the same bfloat16 matmul swung from 28 to
1,024 GFLOP/s between quiet repeats on one machine (issue 35), so a full CPU figure is final
(``final``) once ``FINAL_FIGURES`` quiet figures were measured, the highest kept; a figure far
below the cores x clock x FLOPs/cycle formula (under ``SUSPECT_SHARE`` of it, for a dtype the CPU
has instructions for) is suspect and measured again until the entry holds ``MAX_FIGURES``. A
loaded figure is never final: the next read measures again, and a quiet figure replaces it. Quick figures (``quick=True``, ``TFWB_FAST=1``) are kept in a slot of their
own and never replace a full one.
"""
from __future__ import annotations

import hashlib
import json
import math
import os
import time
from dataclasses import asdict, dataclass, replace
from typing import Any, Callable, Dict, Optional, Sequence, Tuple

import tensorflow as tf

from tfwb import datasheet, hardware, stats
from tfwb.config import RunConfig
from tfwb.datasheet import DTYPES
from tfwb.tf.runner.fingerprint import fingerprint
from tfwb.utilization.probes import start_load_probe

CACHE_FILE = "peaks.json"
# 2: one matrix size per device for every dtype (entries of 1 mixed sizes); 3: each figure says
# whether it was measured under load, and an entry keeps its last figures (entries of 2 did not).
CACHE_VERSION = 3
# The machine parts of a run's fingerprint; logical devices (setup_devices splits the CPU)
# and the run's config do not change what a matmul can do.
MACHINE_KEYS = ("tensorflow", "platform", "cpu_model", "cpu_count", "environment", "gpus")
MIN_N = 64
#: Quick figures (``measure_peak(quick=True)``) are cached under their own slot.
QUICK_SLOT = "|quick"
#: Other programs' share of this process's cores (0..1) at or above which a CPU figure is
#: measured under load (``Peak.loaded``): not final, measured again on the next read. The
#: threshold at which a run is busy (``stats.BUSY_OTHER_CPU_PCT``: 10 %).
BUSY_SHARE = stats.BUSY_OTHER_CPU_PCT / 100
#: Figures an entry of the cache keeps (the newest, and always the one it reports).
MAX_FIGURES = 8
#: Quiet figures a CPU peak needs before it is final (the highest of them is the peak).
FINAL_FIGURES = 3
#: A CPU figure under this share of the datasheet formula (``tfwb.datasheet.cpu_peak``) is suspect.
SUSPECT_SHARE = datasheet.SUSPECT_SHARE
# One size per device for every dtype, so the dtypes compare like for like. On a CPU, 512
# (0.27 GFLOP per matmul) fits the budget even emulated, and measured higher than 1024 or
# 2048 on a shared 2-core machine (the fastest call wins; shorter calls are interrupted less).
_START_N = {"CPU": {"float32": 512, "bfloat16": 512, "float16": 512},
            "GPU": {"float32": 8192, "bfloat16": 8192, "float16": 8192},
            "TPU": {"float32": 8192, "bfloat16": 8192, "float16": 8192}}


@dataclass(frozen=True)
class Peak:
    """One measured peak.

    Attributes:
        device: ``"CPU (2 cores)"``, ``"GPU 0: NVIDIA H100 …"``, ``"TPU"``.
        dtype: ``"float32"``, ``"bfloat16"`` or ``"float16"``.
        flops_per_s: measured; None when it could not be measured (``reason`` says why).
        seconds: time the measurement took (of the original measurement when ``cached``).
        reason: ``""`` or why it was not measured.
        n: the matrices' side (``2 n^3`` FLOPs per matmul); 0 when not measured.
        cached: read from the cache rather than measured now.
        note: what else to know (``"float32 matmuls run as TensorFloat-32"`` on a GPU that does).
        measured_at: ISO time of the measurement.
        loaded: measured while other programs took at least ``BUSY_SHARE`` of this
            process's cores (CPU only): it likely reads low, and is measured again on the
            next read of the cache.
        others_cpu: other programs' share of this process's cores (0..1) during the
            measurement; None when it could not be read.
        quick: a quick figure (``measure_peak(quick=True)``, a short budget).
        figures: ``(FLOP/s, loaded)`` of the last figures measured for this device and dtype
            (at most ``MAX_FIGURES``, oldest first; this one among them): what ``spread``
            reads.

    Example:
        >>> p = Peak("CPU (2 cores)", "float32", 3.4e10, 1.5, figures=((2.9e10, False), (1.3e10, True),
        ...          (3.4e10, False)))
        >>> p.spread
        (29000000000.0, 34000000000.0, 2)
    """

    device: str
    dtype: str
    flops_per_s: Optional[float]
    seconds: float
    reason: str = ""
    n: int = 0
    cached: bool = False
    note: str = ""
    measured_at: str = ""
    loaded: bool = False
    others_cpu: Optional[float] = None
    quick: bool = False
    figures: Tuple[Tuple[float, bool], ...] = ()

    @property
    def spread(self) -> Optional[Tuple[float, float, int]]:
        """``(lowest, highest, how many)`` of the kept figures measured as this one was: the
        quiet ones for a quiet peak, the loaded ones for a loaded peak; None when unmeasured."""
        same = [f for f, loaded in self.figures if loaded == self.loaded]
        if self.flops_per_s is None:
            return None
        if not same:
            return (self.flops_per_s, self.flops_per_s, 1)
        return (min(same), max(same), len(same))

    def to_dict(self) -> Dict[str, Any]:
        """JSON-ready fields."""
        return asdict(self)


def rank(peak: Peak) -> Tuple[bool, bool, float]:
    """How good a figure is as the peak: quiet over loaded, a full over a quick one, then higher.

    The cache keeps, and a read returns, the figure of highest rank.

    Example:
        >>> quiet, busy = Peak("CPU", "float32", 2e10, 1.0), Peak("CPU", "float32", 3e10, 1.0, loaded=True)
        >>> max([quiet, busy], key=rank).flops_per_s
        20000000000.0
    """
    return (not peak.loaded, not peak.quick, peak.flops_per_s or 0.0)


def final(peak: Peak, formula: Optional[float] = None) -> bool:
    """Whether a cached figure stands without measuring again.

    A loaded figure never does. A quick one (``TFWB_FAST``: rough by name) or a GPU's or a TPU's
    quiet figure does. A CPU's does once its
    entry holds ``FINAL_FIGURES`` quiet figures, or ``MAX_FIGURES`` when the kept one is under
    ``SUSPECT_SHARE`` of ``formula`` (the cores x clock x FLOPs/cycle figure; None: unknown).

    Example:
        >>> one = Peak("CPU (2 cores)", "float32", 9e10, 1.0, figures=((9e10, False),))
        >>> final(one), final(replace(one, figures=((8e10, False), (9e10, False), (7e10, False))))
        (False, True)
        >>> final(replace(one, figures=((9e10, False),) * 3), formula=3e11)     # under 40 %: suspect
        False
    """
    if peak.loaded or peak.flops_per_s is None:
        return False
    if peak.quick or not peak.device.startswith("CPU"):
        return True
    quiet = sum(1 for _, loaded in peak.figures if not loaded) or 1
    suspect = formula is not None and formula > 0 and peak.flops_per_s < SUSPECT_SHARE * formula
    return quiet >= (MAX_FIGURES if suspect else FINAL_FIGURES)


def _formula(kind: str, dtype: str) -> Optional[float]:
    """The CPU's cores x clock x FLOPs/cycle for ``dtype``; None elsewhere, or for a dtype it emulates."""
    if kind != "CPU":
        return None
    try:
        hw = hardware.detect()
        found = datasheet.cpu_peak(hw.cpu_count or 0, datasheet.cpu_ghz(), hw.cpu_flags, dtype)
    except (OSError, ValueError):
        return None
    return None if found is None or "no native" in found[1] else found[0]


def cache_path() -> str:
    """``peaks.json`` under ``$TFWB_CACHE_DIR``, else ``$XDG_CACHE_HOME/tfwb``, else ``~/.cache/tfwb``."""
    root = os.environ.get("TFWB_CACHE_DIR")
    if not root:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        root = os.path.join(base, "tfwb")
    return os.path.join(root, CACHE_FILE)


def machine_fingerprint() -> Dict[str, Any]:
    """The machine parts of the run fingerprint (``MACHINE_KEYS``)."""
    full = fingerprint(RunConfig())
    return {k: full.get(k) for k in MACHINE_KEYS}


def _key(machine: Dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(machine, sort_keys=True).encode()).hexdigest()[:16]


def _machine_key() -> Optional[str]:
    try:
        return _key(machine_fingerprint())
    except Exception:  # a fingerprint that cannot be taken: measure, do not cache
        return None


def measure_peak(dtype: str = "float32", device: Optional[str] = None, *, budget_s: float = 1.5,
                 cache: bool = True, quick: bool = False, refresh: bool = False) -> Peak:
    """This machine's peak matmul FLOP/s in ``dtype`` on ``device``, measured or from the cache.

    A final figure in the cache (``final``) is returned as it is; another (one measured under
    load, or one of too few quiet figures on a CPU) is measured again, and the cache keeps the better of the two (``rank``:
    a quiet one, else the higher), with the new figure added to the entry's ``figures``.

    Args:
        dtype: ``"float32"``, ``"bfloat16"`` or ``"float16"``.
        device: ``"CPU"``, ``"GPU"``/``"GPU:1"``, ``"TPU"``; None picks the device a step runs
            on (the first GPU, else a TPU, else the CPU).
        budget_s: seconds the measurement may take, warm-up included (one timed call may
            overrun it); the three dtypes at the default 1.5 s stay under 5 s.
        cache: read and write ``cache_path()``; False measures every time and writes nothing.
        quick: a short measurement (``TFWB_FAST=1``): the machine's full figure is used when
            a quiet one is cached, else a quick one (cached, quiet) or one measured now and
            cached apart from the full figures (a quick figure never replaces a full one), so
            other processes reuse it.
        refresh: measure now even when a quiet figure is cached, and keep the higher one in
            the cache (what to do when a peak seems low: an MFU above 100 %).

    Returns:
        A ``Peak``: the best figure the cache now holds (``cached`` when it is not the one
        measured now), with the spread of the figures measured; ``flops_per_s`` is None with
        a ``reason`` when it could not be measured (no such device, the dtype not supported
        there).

    Raises:
        ValueError: for a dtype outside ``DTYPES``, a device that is not CPU, GPU or TPU, or
            a budget that is not positive.

    Example:
        >>> p = measure_peak("float32", budget_s=0.5)  # doctest: +SKIP
        >>> p.device, f"{p.flops_per_s / 1e9:.0f} GFLOP/s", p.loaded, p.spread  # doctest: +SKIP
        ('CPU (2 cores)', '95 GFLOP/s', False, (91000000000.0, 95000000000.0, 3))
    """
    if dtype not in DTYPES:
        raise ValueError(f"dtype={dtype!r} is not allowed; one of {DTYPES}")
    if not (budget_s > 0):
        raise ValueError(f"budget_s={budget_s!r} is not allowed; a positive number of seconds")
    kind, index = _parse_device(device)
    kind, label, tf_device, missing = _resolve(kind, index)
    if missing:
        return Peak(device=label, dtype=dtype, flops_per_s=None, seconds=0.0, reason=missing)
    slot = f"{label}|{dtype}"
    key = _machine_key() if cache else None
    if key and not refresh:
        found = _cached(key, slot, quick)
        if found is not None and final(found, _formula(kind, dtype)):
            return found
    fresh = _measure_with_load(label, tf_device, kind, dtype, budget_s, quick)
    if not key or fresh.flops_per_s is None:
        return fresh
    kept = _record(key, slot + (QUICK_SLOT if quick else ""), fresh)
    return _best([kept, _read_cache(key, slot)]) if quick else kept


def cached_peak(dtype: str = "float32", device: Optional[str] = None, *, quick: bool = False) -> Optional[Peak]:
    """What ``measure_peak`` would read from the cache now, measuring nothing; None when nothing is cached.

    Args:
        dtype, device, quick: as for ``measure_peak``.

    Returns:
        The cached ``Peak`` of highest ``rank`` (a quick one only with ``quick``), loaded or
        not, or None (nothing cached, no such device, a cache that cannot be read).
    """
    if dtype not in DTYPES:
        raise ValueError(f"dtype={dtype!r} is not allowed; one of {DTYPES}")
    kind, index = _parse_device(device)
    _, label, _, missing = _resolve(kind, index)
    key = None if missing else _machine_key()
    return _cached(key, f"{label}|{dtype}", quick) if key else None


def _cached(key: str, slot: str, quick: bool) -> Optional[Peak]:
    return _best([_read_cache(key, slot)] + ([_read_cache(key, slot + QUICK_SLOT)] if quick else []))


def _best(peaks: Sequence[Optional[Peak]]) -> Optional[Peak]:
    found = [p for p in peaks if p is not None]
    return max(found, key=rank) if found else None


def _parse_device(device: Optional[str]) -> Tuple[Optional[str], int]:
    if device is None:
        return None, 0
    text = str(device).upper().replace("/DEVICE:", "").replace("/", "")
    kind, _, idx = text.partition(":")
    if kind not in ("CPU", "GPU", "TPU") or (idx and not idx.isdigit()):
        raise ValueError(f"device={device!r} is not allowed; one of 'CPU', 'GPU', 'GPU:<n>', 'TPU' or None")
    return kind, int(idx or 0)


def _resolve(kind: Optional[str], index: int) -> Tuple[str, str, str, str]:
    """``(kind, label, tf device string, reason it is missing or "")``."""
    gpus = tf.config.list_physical_devices("GPU")
    tpus = tf.config.list_logical_devices("TPU")
    if kind is None:
        kind = "GPU" if gpus else ("TPU" if tpus else "CPU")
    if kind == "CPU":
        cores = os.cpu_count() or 0
        if hasattr(os, "sched_getaffinity"):
            cores = len(os.sched_getaffinity(0))
        return kind, f"CPU ({cores} cores)", "/CPU:0", ""
    if kind == "GPU":
        if index >= len(gpus):
            return kind, f"GPU {index}", "", f"no GPU {index}: TensorFlow sees {len(gpus)} GPU(s)"
        details = tf.config.experimental.get_device_details(gpus[index])
        return kind, f"GPU {index}: {details.get('device_name', gpus[index].name)}", f"/GPU:{index}", ""
    if not tpus:
        return kind, "TPU", "", ("no TPU initialised: TensorFlow lists no logical TPU device "
                           "(connect and initialise the TPU system first)")
    return kind, "TPU", tpus[min(index, len(tpus) - 1)].name, ""


def _chain(jit: bool) -> Callable[..., Any]:
    @tf.function(jit_compile=jit)
    def chain(x, b, reps):
        for _ in tf.range(reps):
            x = tf.matmul(x, b)
        return tf.cast(x[0, 0], tf.float32)
    return chain


def _measure_with_load(label: str, tf_device: str, kind: str, dtype: str, budget_s: float,
                       quick: bool) -> Peak:
    """``_measure``, with other programs' share of the cores read over it (``Peak.loaded``)."""
    others = start_load_probe()
    peak = _measure(label, tf_device, kind, dtype, budget_s)
    share = others()
    loaded = kind == "CPU" and share is not None and share >= BUSY_SHARE
    figures = ((peak.flops_per_s, loaded),) if peak.flops_per_s is not None else ()
    return replace(peak, loaded=loaded, others_cpu=None if share is None else round(share, 3), quick=quick,
                   figures=figures)


def _measure(label: str, tf_device: str, kind: str, dtype: str, budget_s: float,
             clock: Callable[[], float] = time.perf_counter) -> Peak:
    start = clock()
    note = ""
    if kind == "GPU" and dtype == "float32" and tf.config.experimental.tensor_float_32_execution_enabled():
        note = "float32 matmuls run as TensorFloat-32 (TensorFlow's default on Ampere and later)"
    chain = _chain(jit=kind == "TPU")
    n = _START_N[kind][dtype]
    try:
        with tf.device(tf_device):
            while True:
                x = tf.cast(tf.random.normal((n, n)), dtype)
                b = tf.cast(tf.random.normal((n, n)) / math.sqrt(n), dtype)
                float(chain(x, b, tf.constant(1)))               # trace and warm up
                t0 = clock()
                float(chain(x, b, tf.constant(1)))
                one = clock() - t0
                if one > budget_s / 6 and n > MIN_N:
                    n //= 2
                    continue
                break
            # Short timed calls (<= 50 ms), as many as the budget allows: on a shared machine
            # the fastest of many short calls is the one other programs interrupted least.
            reps = max(1, min(256, int(min(budget_s / 10, 0.05) / max(one, 1e-6))))
            best = one / 1
            best_reps = 1
            while clock() - start < budget_s:
                t0 = clock()
                float(chain(x, b, tf.constant(reps)))
                dt = clock() - t0
                if dt / reps < best / best_reps:
                    best, best_reps = dt, reps
    except (tf.errors.OpError, RuntimeError, ValueError) as e:   # a dtype the device lacks
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        return Peak(device=label, dtype=dtype, flops_per_s=None, seconds=clock() - start,
                    reason=f"{dtype} matmul failed on {label}: {first[:200]}", note=note)
    flops = 2.0 * n ** 3 * best_reps / best
    return Peak(device=label, dtype=dtype, flops_per_s=flops, seconds=clock() - start, n=n,
                note=note, measured_at=time.strftime("%Y-%m-%dT%H:%M:%S"))


def _load(path: str) -> Dict[str, Any]:
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError):
        return {"version": CACHE_VERSION, "machines": {}}
    if not isinstance(data, dict) or data.get("version") != CACHE_VERSION \
            or not isinstance(data.get("machines"), dict):
        return {"version": CACHE_VERSION, "machines": {}}
    return data


def _read_cache(key: str, slot: str) -> Optional[Peak]:
    return _as_peak(_load(cache_path())["machines"].get(key, {}).get("peaks", {}).get(slot), cached=True)


def _as_peak(entry: Any, cached: bool) -> Optional[Peak]:
    """A cache entry as a ``Peak``, or None for one that is not (another version's record)."""
    if not isinstance(entry, dict):
        return None
    try:
        figures = tuple((float(f), bool(loaded)) for f, loaded in entry.get("figures") or ())
        return replace(Peak(**dict(entry, figures=figures)), cached=cached)
    except (TypeError, ValueError):
        return None


def _merge(old: Optional[Peak], new: Peak) -> Peak:
    """The entry a slot keeps after ``new`` is measured: the better (``rank``) of the two, with
    ``new`` added to the figures (the last ``MAX_FIGURES``, the kept one's always among them)."""
    best = new if old is None or rank(new) > rank(old) else old
    figures = list(old.figures if old is not None else ()) + [(float(new.flops_per_s or 0.0), new.loaded)]
    if old is not None and not old.figures and old.flops_per_s is not None:
        figures.insert(0, (old.flops_per_s, old.loaded))
    mine = (best.flops_per_s, best.loaded)
    keep = max(i for i, f in enumerate(figures) if f == mine) if mine in figures else -1
    while len(figures) > MAX_FIGURES:
        drop = next(i for i in range(len(figures)) if i != keep)
        del figures[drop]
        keep -= 1 if drop < keep else 0
    return replace(best, figures=tuple(figures), cached=best is not new)


def _record(key: str, slot: str, peak: Peak) -> Peak:
    """Merges ``peak`` into the cache's ``slot`` (``_merge``) and returns what the slot keeps now."""
    path = cache_path()
    data = _load(path)
    machine = data["machines"].setdefault(key, {"peaks": {}})
    peaks = machine.setdefault("peaks", {})
    kept = _merge(_as_peak(peaks.get(slot), cached=True), peak)
    peaks[slot] = replace(kept, cached=False).to_dict()
    try:
        machine["fingerprint"] = machine_fingerprint()
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=1, sort_keys=True)
        os.replace(tmp, path)
    except OSError:   # a read-only home, a full disk: the peak is measured again next time
        pass
    return kept
