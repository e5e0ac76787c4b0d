"""Two finished runs, one decision: the comparison every front end prints for a pair of runs.

The history table (``tfwb.report.history_rows``), the Workbench, the fit Monitor, the CLI and
the expectation checks a chapter prints (``tfwb.expect``'s ``AB.check`` of two RunResults) all
compare two runs through ``compare_runs`` here, so one pair of runs never gets two verdicts on a
page: the same step times (per example when the batches differ), the same CPU share other
programs used during each run (``other_cpu_pct``, from the run's own utilization samples), and
the same rule (``tfwb.stats.compare``: "cannot tell" when either run was ``busy`` or drifted).
``noise_band`` learns the run-to-run band from a history's repeated quiet runs.

Pure: ``tfwb.stats`` and ``tfwb.records`` only (below ``expect``, ``diagnosis`` and ``report``).
"""
from __future__ import annotations

from typing import Dict, List, Optional, Sequence

from tfwb import stats
from tfwb.config import RunConfig  # noqa: F401 - the doctests build RunResults with it
from tfwb.records import RunResult

__all__ = ["other_cpu_pct", "busy", "noise_band", "per_example", "compare_runs", "LOAD_BIN_PCT"]


def _machine(result: RunResult) -> tuple:
    fp = result.fingerprint or {}
    gpus = tuple(str(g.get("name")) if isinstance(g, dict) else str(g) for g in fp.get("gpus") or ())
    return fp.get("cpu_model"), fp.get("cpu_count"), gpus, fp.get("environment")


#: Width (percentage points of all cores) of the bins of other programs' CPU use within
#: which identical runs are pooled to learn the noise band.
LOAD_BIN_PCT = 20.0


def other_cpu_pct(result: RunResult) -> Optional[float]:
    """The share of all CPU cores (0-100) other programs used during the measured steps.

    From the utilization samples taken while the measured steps ran: the machine's
    CPU use minus this process's (``cpu_process_pct`` is % of one core, so it is
    divided by the cores in the fingerprint), median over the samples, never below 0.

    A run too short for a sample (the sampler reads every 0.2 s) falls back to the runner's own
    reading over its measured steps (``extras["other_cpu_pct"]``: CPU times before and after them,
    ``tfwb.utilization.start_load_probe``), so a short run on a busy machine is busy too.

    Returns:
        The share, or ``None`` when neither is known.

    Example:
        >>> other_cpu_pct(RunResult(config=RunConfig())) is None
        True
    """
    cores = (result.fingerprint or {}).get("cpu_count")
    probed = (result.extras or {}).get("other_cpu_pct")       # the runner's reading over the measured steps
    if not cores or not result.samples or not result.step_start_s or not result.step_times_s:
        return float(probed) if isinstance(probed, (int, float)) else None
    lo = result.step_start_s[0]
    hi = result.step_start_s[-1] + result.step_times_s[-1]
    values = [max(0.0, s.cpu_system_pct - s.cpu_process_pct / cores) for s in result.samples
              if lo <= s.t_s <= hi and s.cpu_system_pct is not None and s.cpu_process_pct is not None]
    if values:
        return stats.median(values)
    return float(probed) if isinstance(probed, (int, float)) else None


def busy(result: RunResult) -> bool:
    """Whether other programs used ``stats.BUSY_OTHER_CPU_PCT`` or more of the CPU during the run's steps.

    Unknown (no samples) counts as not busy.

    Example:
        >>> busy(RunResult(config=RunConfig()))
        False
    """
    load = other_cpu_pct(result)
    return load is not None and load >= stats.BUSY_OTHER_CPU_PCT


def _load_bin(result: RunResult) -> Optional[int]:
    load = other_cpu_pct(result)
    return None if load is None else int(load // LOAD_BIN_PCT)


def _size(result: RunResult) -> Optional[str]:
    """The workload size a run used ("small"/"full"), from its fingerprint, if recorded."""
    return (result.fingerprint or {}).get("size")


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
        groups.setdefault((knobs, _size(r), _load_bin(r)), []).append(r.median_step_s)
    return stats.learn_noise(list(groups.values()), default=default)


def per_example(baseline: RunResult, candidate: RunResult) -> bool:
    """Whether two runs compare by time per training example: their global batches differ.

    A step of 128 examples takes longer than one of 64 and may still train faster; only
    the time per example says which run gets through the data sooner.

    Example:
        >>> per_example(RunResult(config=RunConfig(batch_size=64)), RunResult(config=RunConfig(batch_size=128)))
        True
    """
    return baseline.config.batch_size != candidate.config.batch_size


def _times(result: RunResult, by_example: bool) -> List[float]:
    if not by_example:
        return list(result.step_times_s)
    return [t / result.config.batch_size for t in result.step_times_s]


def compare_runs(baseline: RunResult, candidate: RunResult, *,
                 noise: Optional[stats.NoiseBand] = None) -> Optional[stats.Comparison]:
    """``stats.compare`` of two finished runs, with the CPU share other programs used in each.

    Runs with the same global batch compare step times; runs whose batches differ
    (``per_example``) compare each step's time divided by its batch: time per example.

    Args:
        baseline, candidate: RunResults.
        noise: the run-to-run band; default ``stats.DEFAULT_NOISE`` (``history_rows``
            passes ``noise_band`` of the whole history).

    Returns:
        The ``stats.Comparison``, or ``None`` when a run measured nothing.

    Example:
        >>> compare_runs(RunResult(config=RunConfig()), RunResult(config=RunConfig())) is None
        True
    """
    if not baseline.step_times_s or not candidate.step_times_s:
        return None
    by_example = per_example(baseline, candidate)
    try:
        return stats.compare(_times(baseline, by_example), _times(candidate, by_example), noise=noise,
                             other_cpu_pct=(other_cpu_pct(baseline), other_cpu_pct(candidate)))
    except ValueError:
        return None


