"""Two finished runs, one decision: the comparison every front end prints for a pair of runs.

The history rows (``tfwb.analysis.rows.history_rows``), the Workbench, the fit Monitor, the CLI
and the expectation checks a chapter prints (``tfwb.expect``'s ``AB.check`` of two RunResults)
all compare two runs through ``compare_runs`` here, so one pair of runs never gets two verdicts
on a page: the same step times (per example when the batches differ), the same delay of each run
(``delay_of``: the share of its measured wall time it was kept waiting for a CPU, as the kernel
measured it), or where no kernel signal exists the CPU share other programs used during it
(``other_cpu_pct``, from the run's own utilization samples), and the same rule
(``tfwb.stats.compare``: "cannot tell" when either run was ``busy`` and the delay could explain
the ratio, or a run drifted).
Beside the speed, a pair's losses: ``arithmetic_changes`` (the knobs that change what the step
computes), ``final_loss_gap`` and ``loss_gap``. The noise band lives in ``tfwb.analysis.noise``.

Pure: ``tfwb.stats``, ``tfwb.config`` and ``tfwb.records`` only (below ``tfwb.expect``,
``tfwb.analysis.rows`` and ``tfwb.render``).
"""
from __future__ import annotations

from typing import Any, List, Optional, Sequence, Tuple

from tfwb import stats
from tfwb.config import KNOBS, RunConfig
from tfwb.records import RunResult

__all__ = ["other_cpu_pct", "delay_of", "delay_from", "DELAY_SIGNALS", "PER_CPU_SIGNALS", "busy", "workload_size", "per_example", "compare_runs", "ARITHMETIC_KNOBS",
           "arithmetic_changes", "final_loss_gap", "loss_gap"]


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


#: The kernel's waiting signals of ``RunResult.extras["delay"]`` (``tfwb.utilization.pressure``) a
#: run's delay is read from, the first one recorded winning: the container's own pressure, then the
#: machine's. ``benchmarks/load_signals.py`` compares them (and ``run_wait``) on one machine.
DELAY_SIGNALS: Tuple[str, ...] = ("cgroup_some", "psi_some")
#: Signals that are a share of the machine's CPUs, averaged over them (the kernel's PSI weighs each
#: CPU's stalled time by its busy time; steal is counted over every CPU): one task kept waiting on
#: one of 2 busy cores reads 50 %. Multiplied by the run's cores, they bound the share of the time
#: any of its threads waited.
PER_CPU_SIGNALS = ("cgroup_some", "psi_some", "steal")


def delay_from(reading: Any, signals: Sequence[str] = DELAY_SIGNALS) -> Optional[float]:
    """A delay (0..1) from one ``start_delay_probe`` reading: see ``delay_of``.

    Example:
        >>> delay_from({"psi_some": 0.1, "steal": 0.02, "cores": 2.0})
        0.24
        >>> delay_from({"run_wait": 0.3, "psi_some": 0.1, "cores": 2.0}, signals=("run_wait",))
        0.3
    """
    if not isinstance(reading, dict):
        return None
    cores = reading.get("cores")
    scale = float(cores) if isinstance(cores, (int, float)) and cores >= 1 else 1.0

    def share(name: str) -> Optional[float]:
        value = reading.get(name)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return None
        return float(value) * (scale if name in PER_CPU_SIGNALS else 1.0)

    for name in signals:
        value = share(name)
        if value is not None:
            return round(min(1.0, max(0.0, value + (share("steal") or 0.0))), 4)
    return None


def delay_of(result: RunResult, signals: Sequence[str] = DELAY_SIGNALS) -> Optional[float]:
    """The share (0..1) of the run's measured wall time it may have been kept waiting for a CPU, or None.

    From the runner's reading over the measured steps (``extras["delay"]``): the first of
    ``signals`` recorded there, plus the time a hypervisor stole (``steal``, which a guest's
    pressure does not see), at most 1; the ``PER_CPU_SIGNALS`` multiplied by the run's cores, so
    that the figure bounds the share of the time any of its threads waited rather than
    understating it (``stats.delay_bound`` needs a bound). ``None`` for a record without it
    (older records, a fit, a machine without the kernel's counters): then ``other_cpu_pct``
    decides as before.

    Example:
        >>> r = RunResult(config=RunConfig(), extras={"delay": {"psi_some": 0.1, "cgroup_some": None, "steal": 0.05,
        ...                                                       "cores": 2.0}})
        >>> delay_of(r)
        0.3
        >>> delay_of(RunResult(config=RunConfig())) is None
        True
    """
    return delay_from((result.extras or {}).get("delay"), signals)


def busy(result: RunResult) -> bool:
    """Whether the run was busy: kept waiting ``stats.DELAY_BUSY_SHARE`` or more of its measured time
    (``delay_of``) or, where that is unknown, other programs used ``stats.BUSY_OTHER_CPU_PCT`` or more
    of the CPU during its steps.

    Unknown (neither known) counts as not busy.

    Example:
        >>> busy(RunResult(config=RunConfig()))
        False
        >>> busy(RunResult(config=RunConfig(), extras={"delay": {"psi_some": 0.02}, "other_cpu_pct": 15.0}))
        False
    """
    delay = delay_of(result)
    if delay is not None:
        return delay >= stats.DELAY_BUSY_SHARE
    load = other_cpu_pct(result)
    return load is not None and load >= stats.BUSY_OTHER_CPU_PCT


def workload_size(result: RunResult) -> Optional[str]:
    """The workload size a run used ("small"/"full"), from its fingerprint, if recorded.

    Example:
        >>> workload_size(RunResult(config=RunConfig(), fingerprint={"size": "small"}))
        'small'
    """
    return (result.fingerprint or {}).get("size")


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
    """``stats.compare`` of two finished runs, with each one's delay (``delay_of``) and the CPU share
    other programs used in each (which decides only where a delay is unknown).

    Runs with the same global batch compare step times; runs whose batches differ
    (``per_example``) compare each step's time divided by its batch: time per example.

    Args:
        baseline, candidate: RunResults.
        noise: the run-to-run band; default ``stats.DEFAULT_NOISE`` (``tfwb.analysis.rows.history_rows``
            passes ``tfwb.analysis.noise.noise_band`` of the whole history).

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
                             other_cpu_pct=(other_cpu_pct(baseline), other_cpu_pct(candidate)),
                             delay=(delay_of(baseline), delay_of(candidate)))
    except ValueError:
        return None


# -- the losses of a pair ----------------------------------------------------------------------
#: Knobs whose change alters what the training step computes, not only how fast: every knob
#: of role ``"compute"`` (precision, graph mode, XLA, steps per call) and the optimizer row
#: (optimizer, learning rate, clipping, weight decay; role ``"run"``). A run that differs from
#: the run before it in one of them gets its loss shown beside that run's.
ARITHMETIC_KNOBS: Tuple[str, ...] = tuple(n for n, k in KNOBS.items()
                                          if k.role == "compute" or k.group == "optimizer")


def arithmetic_changes(config: RunConfig, reference: Optional[RunConfig]) -> List[str]:
    """The ``ARITHMETIC_KNOBS`` in which ``config`` differs from ``reference``, in declaration order.

    Example:
        >>> arithmetic_changes(RunConfig(optimizer="sgd", prefetch=True), RunConfig())
        ['optimizer']
    """
    if reference is None:
        return []
    return [name for name in config.diff(reference) if name in ARITHMETIC_KNOBS]


def final_loss_gap(previous: RunResult, result: RunResult) -> Optional[Tuple[float, float, int]]:
    """``(previous's final loss, this run's, steps)`` over the measured steps both ran.

    Each final loss is ``RunResult.final_loss(steps)`` (the mean of the last quarter of
    the losses), ``steps`` the measured training steps with a loss of the shorter run.

    Returns:
        The triple, or ``None`` when either run has no loss.

    Example:
        >>> a = RunResult(config=RunConfig(), losses=(2.0, 1.0))
        >>> final_loss_gap(a, RunResult(config=RunConfig(), losses=(2.0, 1.5)))
        (1.0, 1.5, 2)
    """
    steps = min(len(run.losses) * max(1, run.steps_per_call) for run in (previous, result))
    if not steps:
        return None
    a, b = previous.final_loss(steps), result.final_loss(steps)
    if a is None or b is None:
        return None
    return a, b, steps


def loss_gap(a: RunResult, b: RunResult) -> Optional[float]:
    """The largest per-step loss difference between two runs, warm-up included.

    Two runs that should train the same way (same seed, same global batch, another
    strategy or device count) differ only by float rounding; a mistake such as averaging
    the loss over a replica's share instead of the global batch shows as a large gap.
    Steps are compared in order, as far as the shorter run goes.

    Args:
        a, b: RunResults (their ``all_losses``: warm-up losses, then measured ones).

    Returns:
        The largest ``|a - b|`` over the steps both ran, or ``None`` when either has no loss.

    Example:
        >>> one = RunResult(config=RunConfig(), warmup_losses=(2.0,), losses=(1.5, 1.25))
        >>> two = RunResult(config=RunConfig(), warmup_losses=(2.0,), losses=(1.5, 1.0, 0.5))
        >>> loss_gap(one, two)
        0.25
        >>> loss_gap(one, RunResult(config=RunConfig())) is None
        True
    """
    gaps = [abs(x - y) for x, y in zip(a.all_losses, b.all_losses)]
    return max(gaps) if gaps else None
