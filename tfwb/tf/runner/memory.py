"""Peak memory of a run: TensorFlow's allocator where it has one, else the process's RSS.

NVML's "memory used" on a GPU is what TensorFlow *reserved* (by default nearly the whole
card, at start-up), not what the run needed. TensorFlow's own allocator counts what it
handed out: ``tf.config.experimental.get_memory_info(device)["peak"]``, reset per run
with ``reset_memory_stats``. That is tracked on GPUs and TPUs only (on a CPU it reads 0),
so on a CPU the observer reports the peak resident memory of the process from the
sampler's samples instead, and says which source it used.

Owns the ``MemoryPeak`` run observer. Nothing here runs at import; TensorFlow is
imported on first use unless a stand-in for ``tf.config`` is given (tests).
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional

from tfwb.observers import Observer

MIB = 2 ** 20
#: ``run.extras`` key the observer writes.
EXTRAS_KEY = "memory"
#: Device types whose allocator TensorFlow tracks (``get_memory_info`` raises or reads 0 elsewhere).
TRACKED_TYPES = ("GPU", "TPU")


def _short(name: str) -> str:
    """``"/device:GPU:0"`` or ``"/job:localhost/replica:0/task:0/device:GPU:0"`` -> ``"GPU:0"``."""
    return name.rsplit("device:", 1)[-1]


def _peak(values: Any) -> Optional[float]:
    vals = [v for v in values if v is not None]
    return max(vals) if vals else None


class MemoryPeak(Observer):
    """Records a run's peak memory in ``run.extras["memory"]`` (JSON-ready).

    At ``on_run_start`` (setup done: data, model and optimizer built) it resets the
    allocator's peak on every GPU/TPU, so the peak covers the steps (weights and optimizer
    state included, since they are still allocated). At ``on_run_end`` it reads it back.
    On a machine with neither, it takes the peak RSS of the run's utilization samples
    (the sampler is the first observer, so ``run.samples`` is set by then).

    Args:
        tf_config (module | None, default None): ``tf.config`` or a stand-in with
            ``list_logical_devices(type)`` and ``experimental.reset_memory_stats(dev)`` /
            ``experimental.get_memory_info(dev)``; None imports TensorFlow on first use.

    Writes ``run.extras["memory"]``:
        ``{"source": "tf_allocator", "peak_mib": {"GPU:0": 812.5, ...},
        "start_mib": {...}, "reserved_peak_mib": {...}, "reset": true}`` on GPUs/TPUs
        (``reserved_peak_mib``: NVML's view, per GPU index, from the samples, for contrast;
        ``reset``: false where a device refused the reset, so its peak may predate the run);
        ``{"source": "rss_samples", "peak_mib": {"process": 1234.0}}`` on a CPU; ``{"source":
        None, "peak_mib": {}, "error": ...}`` when neither could be read.

    Example:
        >>> from tfwb.tf.runner.memory import MemoryPeak
        >>> result = tfwb.run(cfg, observers=[MemoryPeak()])   # doctest: +SKIP
        >>> result.extras["memory"]                           # doctest: +SKIP
        {'source': 'tf_allocator', 'peak_mib': {'GPU:0': 812.5}, ...}
    """

    def __init__(self, tf_config: Any = None) -> None:
        self._tf_config = tf_config
        self._devices: List[str] = []
        self._start: Dict[str, Optional[float]] = {}
        self._reset_ok = True
        self._errors: List[str] = []

    def _config(self) -> Any:
        if self._tf_config is None:
            import tensorflow as tf

            self._tf_config = tf.config
        return self._tf_config

    def tracked_devices(self, strategy: Optional[str] = None) -> List[str]:
        """Short names (``"GPU:0"``) of the logical devices whose allocator TF tracks, for a run's strategy.

        A TPU's devices count only for ``strategy="tpu"``: once a process has initialised its
        TPU they stay listed, but a later run without that strategy runs on the host (and
        its GPUs, where there are any), so its peak is the host's, not the TPU's.
        """
        config = self._config()
        out: List[str] = []
        kinds = TRACKED_TYPES if strategy is None else (("TPU",) if strategy == "tpu" else ("GPU",))
        for kind in kinds:
            try:
                out.extend(_short(d.name) for d in config.list_logical_devices(kind))
            except Exception as e:  # noqa: BLE001 - an unknown device type on this build: skip it
                self._errors.append(f"list_logical_devices({kind!r}): {type(e).__name__}: {e}")
        return out

    def _info_mib(self, device: str, key: str) -> Optional[float]:
        try:
            return self._config().experimental.get_memory_info(device)[key] / MIB
        except Exception as e:  # noqa: BLE001 - not tracked here: no figure, not a failed run
            self._errors.append(f"get_memory_info({device!r}): {type(e).__name__}: {e}")
            return None

    def on_run_start(self, run: Any) -> None:
        self._errors, self._start, self._reset_ok = [], {}, True
        self._devices = self.tracked_devices(getattr(getattr(run, "config", None), "strategy", None))
        experimental = self._config().experimental if self._devices else None
        for device in self._devices:
            try:
                experimental.reset_memory_stats(device)
            except Exception as e:  # noqa: BLE001 - older TF or a device without the reset
                self._reset_ok = False
                self._errors.append(f"reset_memory_stats({device!r}): {type(e).__name__}: {e}")
            self._start[device] = self._info_mib(device, "current")

    def on_run_end(self, run: Any) -> None:
        facts: Dict[str, Any]
        peaks = {d: self._info_mib(d, "peak") for d in self._devices}
        peaks = {d: round(v, 1) for d, v in peaks.items() if v is not None}
        if peaks:
            samples = getattr(run, "samples", ()) or ()
            n_gpus = max((len(s.gpu_mem_used_mib) for s in samples), default=0)
            reserved = {str(i): _peak(s.gpu_mem_used_mib[i] if i < len(s.gpu_mem_used_mib) else None
                                      for s in samples) for i in range(n_gpus)}
            facts = {"source": "tf_allocator", "peak_mib": peaks,
                     "start_mib": {d: round(v, 1) for d, v in self._start.items() if v is not None},
                     "reserved_peak_mib": {i: round(v, 1) for i, v in reserved.items() if v is not None},
                     "reset": self._reset_ok}
        else:
            rss = _peak(getattr(s, "rss_mib", None) for s in getattr(run, "samples", ()) or ())
            if rss is not None:
                facts = {"source": "rss_samples", "peak_mib": {"process": round(rss, 1)}}
            else:
                facts = {"source": None, "peak_mib": {},
                         "error": "; ".join(self._errors[:3]) or "no tracked device and no RSS samples"}
        run.extras[EXTRAS_KEY] = facts
