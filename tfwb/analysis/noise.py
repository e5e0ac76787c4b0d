"""The run-to-run noise band a ratio must leave to count, learned from a history's repeated quiet runs.

``noise_band`` pools the spread of identical runs (same knobs, workload size, machine and
load bin of other programs' CPU use, ``LOAD_BIN_PCT``); the verdicts of ``tfwb.analysis.pairs``
and ``tfwb.analysis.rows`` use it.

Pure: ``tfwb.stats``, ``tfwb.records`` and ``tfwb.analysis.pairs`` only.
"""
from __future__ import annotations

from typing import Dict, List, Optional, Sequence

from tfwb import stats
from tfwb.analysis.pairs import busy, other_cpu_pct, workload_size
from tfwb.records import RunResult

__all__ = ["noise_band", "LOAD_BIN_PCT"]


def _machine(result: RunResult) -> tuple:
    fp = result.fingerprint or {}
    gpus = tuple(str(g.get("name")) if isinstance(g, dict) else str(g) for g in fp.get("gpus") or ())
    return fp.get("cpu_model"), fp.get("cpu_count"), gpus, fp.get("environment")


#: Width (percentage points of all cores) of the bins of other programs' CPU use within
#: which identical runs are pooled to learn the noise band.
LOAD_BIN_PCT = 20.0


def _load_bin(result: RunResult) -> Optional[int]:
    load = other_cpu_pct(result)
    return None if load is None else int(load // LOAD_BIN_PCT)


def noise_band(results: Sequence[RunResult], *,
               default: stats.NoiseBand = stats.DEFAULT_NOISE) -> stats.NoiseBand:
    """This machine's run-to-run noise, learned from repeated identical runs in ``results``.

    Finished runs of the same configuration (``label`` ignored), workload size and
    machine, during which other programs used a similar share of the CPU (the same
    ``LOAD_BIN_PCT`` bin), form a group; runs during which the machine was busy
    (``busy``) are left out, so a history that mixes quiet and busy runs learns the
    quiet machine's band; ``stats.learn_noise`` pools the groups' spread
    of median step times. Only runs on the machine of the latest finished run count.

    Args:
        results: runs in order, failures included (they are skipped).
        default: the band while the history holds too few repeats
            (``stats.MIN_NOISE_DOF`` + 1 runs of one configuration, or two pairs).

    Returns:
        A ``stats.NoiseBand``.

    Example:
        >>> noise_band([]) == stats.DEFAULT_NOISE
        True
    """
    ok = [r for r in results if r.ok and not busy(r)]          # a busy moment teaches no noise band
    if not ok:
        return default
    machine = _machine(ok[-1])
    groups: Dict[tuple, List[float]] = {}
    for r in ok:
        if _machine(r) != machine:
            continue
        knobs = tuple(sorted((k, repr(v)) for k, v in r.config.to_dict().items() if k != "label"))
        groups.setdefault((knobs, workload_size(r), _load_bin(r)), []).append(r.median_step_s)
    return stats.learn_noise(list(groups.values()), default=default)
