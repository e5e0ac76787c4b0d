"""This machine's peak FLOP/s per dtype, measured: a square-matmul benchmark and its cache.

``measure_peak(dtype)`` times a chain of ``n x n`` matmuls in a ``tf.function`` on the device
a step runs on (every CPU core, one GPU, a TPU core): a warm-up call, then a few timed calls
within ``budget_s``, each synced by reading a scalar back, and reports ``2 n^3 / t`` of the
fastest. A dtype whose single matmul takes too long (bfloat16 or float16 emulated on a CPU)
gets a smaller ``n``: it is measured anyway, slow as it is — that is the lesson.

Results are cached in ``peaks.json`` under ``$TFWB_CACHE_DIR``, else
``$XDG_CACHE_HOME/tfwb``, else ``~/.cache/tfwb``, keyed by the machine's fingerprint (the
hardware and TensorFlow parts of ``tfwb.tf.runner.fingerprint``): a machine whose fingerprint
changed is measured again; a cache that cannot be read or written is no error.
"""
from __future__ import annotations

import hashlib
import json
import math
import os
import time
from dataclasses import asdict, dataclass, replace
from typing import Any, Callable, Dict, Optional, Tuple

import tensorflow as tf

from tfwb.config import RunConfig
from tfwb.datasheet import DTYPES
from tfwb.tf.runner.fingerprint import fingerprint

CACHE_FILE = "peaks.json"
CACHE_VERSION = 2     # 2: one matrix size per device for every dtype (entries of 1 mixed sizes)
# The machine parts of a run's fingerprint; logical devices (setup_devices splits the CPU)
# and the run's config do not change what a matmul can do.
MACHINE_KEYS = ("tensorflow", "platform", "cpu_model", "cpu_count", "environment", "gpus")
MIN_N = 64
#: Quick figures (``measure_peak(quick=True)``) are cached under their own slot.
QUICK_SLOT = "|quick"
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

    def to_dict(self) -> Dict[str, Any]:
        """JSON-ready fields."""
        return asdict(self)


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


def measure_peak(dtype: str = "float32", device: Optional[str] = None, *, budget_s: float = 1.5,
                 cache: bool = True, quick: bool = False) -> Peak:
    """This machine's peak matmul FLOP/s in ``dtype`` on ``device``, measured or from the cache.

    Args:
        dtype: ``"float32"``, ``"bfloat16"`` or ``"float16"``.
        device: ``"CPU"``, ``"GPU"``/``"GPU:1"``, ``"TPU"``; None picks the device a step runs
            on (the first GPU, else a TPU, else the CPU).
        budget_s: seconds the measurement may take, warm-up included (one timed call may
            overrun it); the three dtypes at the default 1.5 s stay under 5 s.
        cache: read and write ``cache_path()``; False measures every time and writes nothing.
        quick: a short measurement (``TFWB_FAST=1``): the machine's full figure is used when
            cached, else a quick one is measured and cached apart from the full figures (a
            quick figure never stands in for a full one), so other processes reuse it.

    Returns:
        A ``Peak``; ``flops_per_s`` is None with a ``reason`` when it could not be measured
        (no such device, the dtype not supported there).

    Raises:
        ValueError: for a dtype outside ``DTYPES``, a device that is not CPU, GPU or TPU, or
            a budget that is not positive.

    Example:
        >>> p = measure_peak("float32", budget_s=0.5)  # doctest: +SKIP
        >>> p.device, f"{p.flops_per_s / 1e9:.0f} GFLOP/s"  # doctest: +SKIP
        ('CPU (2 cores)', '95 GFLOP/s')
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
    key = None
    if cache:
        try:
            key = _key(machine_fingerprint())
        except Exception:  # a fingerprint that cannot be taken: measure, do not cache
            key = None
        found = _read_cache(key, slot) if key else None
        if found is None and quick and key:
            found = _read_cache(key, slot + QUICK_SLOT)
        if found is not None:
            return found
    peak = _measure(label, tf_device, kind, dtype, budget_s)
    if cache and key and peak.flops_per_s is not None:
        _write_cache(key, slot + (QUICK_SLOT if quick else ""), peak)
    return peak


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
    entry = _load(cache_path())["machines"].get(key, {}).get("peaks", {}).get(slot)
    if not isinstance(entry, dict):
        return None
    try:
        return replace(Peak(**entry), cached=True)
    except TypeError:   # a record from another version of Peak
        return None


def _write_cache(key: str, slot: str, peak: Peak) -> None:
    path = cache_path()
    data = _load(path)
    machine = data["machines"].setdefault(key, {"peaks": {}})
    machine.setdefault("peaks", {})[slot] = peak.to_dict()
    try:
        machine["fingerprint"] = machine_fingerprint()
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=1, sort_keys=True)
        os.replace(tmp, path)
    except OSError:   # a read-only home, a full disk: the peak is measured again next time
        pass
