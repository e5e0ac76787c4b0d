"""Compare two configurations in alternating rounds, so the machine's drift cancels.

Two single runs minutes apart differ by more than their steps' spread suggests: on
a shared or busy machine the whole run shifts (``tfwb.stats.NoiseBand``).
``compare_interleaved`` measures the two configurations side by side instead:
baseline and candidate take turns in short blocks, in the order A B, B A, A B, ...
(so a steady trend favours neither), and each round's pair of block medians
gives one ratio. ``tfwb.stats.compare_rounds`` decides on those ratios.

Two ways to take turns:

* warm blocks (the default where possible): both configurations are built once in
  this process (``tfwb.tf.runner.train.prepared``), warmed up (their ``warmup_steps``, then
  one unmeasured turn each, because the first switch runs coldest); each turn runs
  ``settle_steps`` steps left out of the verdict and then ``steps_per_round`` steps
  whose median is the round's time. While one configuration runs, the other's
  tf.data pipeline may fill its prefetch buffer; the settle steps keep that head
  start out of the median. For an input-bound comparison whose prefetch buffer may
  hold several batches, raise ``settle_steps`` past its depth or use whole runs.
* whole runs: every turn is a complete ``tfwb.run`` (setup, warm-up and all), for
  configurations that cannot share a process: a non-default strategy, or both
  caching to the same files.

Times are per training step (a call of a ``steps_per_execution`` step divided by
its steps), so configurations that differ in ``steps_per_execution`` compare fairly.
"""
from __future__ import annotations

import contextlib
import time
from typing import Callable, List, Optional, Tuple

from tfwb import stats
from tfwb.config import RunConfig
from tfwb.observers import StepLog
from tfwb.tf.runner.quiet import is_tf_log, native_stderr_captured
from tfwb.tf.runner.train import prepared, timed_steps
from tfwb.tf.run import run

__all__ = ["compare_interleaved", "can_warm_interleave", "round_order"]

#: Measured steps per turn in warm blocks unless told otherwise. Short turns and many
#: rounds: a burst of other work then spoils a few rounds, which the sign test tolerates
#: (21 of 30 rounds in one direction suffice), instead of a few long turns.
DEFAULT_STEPS_PER_ROUND = 3
#: Rounds in warm blocks, and in whole runs (each a complete run: 10 of 10, or 9 of 10, decide).
DEFAULT_WARM_ROUNDS = 30
DEFAULT_WHOLE_RUN_ROUNDS = 10

#: ``stop_early(baseline_times, candidate_times, rounds) -> bool``, after each round.
StopEarly = Callable[[List[float], List[float], int], bool]


def round_order(round_index: int) -> Tuple[int, int]:
    """Which configuration goes first in a round: ``(0, 1)`` on even rounds, ``(1, 0)`` on odd.

    Example:
        >>> [round_order(i) for i in range(3)]
        [(0, 1), (1, 0), (0, 1)]
    """
    return (0, 1) if round_index % 2 == 0 else (1, 0)


def can_warm_interleave(a: RunConfig, b: RunConfig) -> Tuple[bool, str]:
    """Whether ``a`` and ``b`` can be built side by side in one process, and why not.

    Returns:
        ``(True, "")`` or ``(False, reason)``.
    """
    for cfg in (a, b):
        if cfg.strategy != "default":
            return False, f"strategy={cfg.strategy!r} cannot be built twice in one process"
    if isinstance(a.cache, str) and a.cache and a.cache == b.cache:
        return False, f"both configurations cache to the same files ({a.cache!r})"
    return True, ""


def _per_step(times_s: List[float], cfg: RunConfig) -> List[float]:
    return [t / cfg.steps_per_execution for t in times_s]


def compare_interleaved(baseline: RunConfig, candidate: RunConfig, *, rounds: Optional[int] = None,
                        steps_per_round: Optional[int] = None, settle_steps: int = 1,
                        warm: Optional[bool] = None,
                        progress: Optional[Callable[[int, int], None]] = None,
                        stop_early: Optional[StopEarly] = None) -> stats.RoundsComparison:
    """Alternate short turns of ``baseline`` and ``candidate`` and compare them round by round.

    Args:
        baseline, candidate: the two configurations (the verdict is the candidate's).
        rounds: rounds of one turn each; default 30 in warm blocks, 10 in whole runs
            (at least ``stats.MIN_ROUNDS_TO_COMPARE`` = 6 to decide).
        steps_per_round: measured steps per turn; default 3 in warm blocks, each
            configuration's own ``steps`` in whole runs.
        settle_steps: steps run before each warm turn's measured ones and left out.
        warm: ``True`` builds both once and alternates blocks; ``False`` runs
            ``tfwb.run`` for every turn; ``None`` (default) picks warm blocks where
            ``can_warm_interleave`` allows.
        progress: called as ``progress(rounds_done, rounds)``.
        stop_early: called after each round as ``stop_early(baseline_times, candidate_times,
            rounds)``; True ends the comparison there, decided on the rounds done, and its
            ``method`` says so (e.g. ``lambda b, c, n: tfwb.stats.faster_settled(b, c, n) is not
            None``, for a caller that asks only whether the candidate is faster).

    Returns:
        A ``tfwb.stats.RoundsComparison``: ``verdict``, ``speedup`` (baseline time /
        candidate time, the median over rounds), its confidence interval, the
        per-round times and ``text()``, e.g.
        ``"1.16x slower (96 % CI 1.13-1.18x; slower in 27 of 30 rounds)"``.

    Raises:
        ValueError: for ``rounds < 1``, ``warm=True`` where it is not possible, or a
            knob this machine cannot honour.
        RuntimeError: when a whole run fails (naming the configuration and its error).

    Example:
        >>> cmp = compare_interleaved(RunConfig(batch_size=64), RunConfig(batch_size=74))  # doctest: +SKIP
        >>> print(cmp.text())                                                            # doctest: +SKIP
        1.15x slower (96 % CI 1.12-1.17x; slower in 27 of 30 rounds)
    """
    if rounds is not None and rounds < 1:
        raise ValueError(f"rounds={rounds!r} is not allowed; rounds must be >= 1")
    if settle_steps < 0:
        raise ValueError(f"settle_steps={settle_steps!r} is not allowed; settle_steps must be >= 0")
    possible, why_not = can_warm_interleave(baseline, candidate)
    if warm is None:
        warm = possible
    elif warm and not possible:
        raise ValueError(f"warm=True is not possible here: {why_not}; use warm=False (whole runs)")
    configs = (baseline, candidate)
    if warm:
        rounds = rounds or DEFAULT_WARM_ROUNDS
        k = steps_per_round or DEFAULT_STEPS_PER_ROUND
        times = _warm_rounds(configs, rounds, k, settle_steps, progress, stop_early)
        method = f"alternating warm blocks of {k} steps (after {settle_steps} settle steps), {rounds} rounds"
    else:
        rounds = rounds or DEFAULT_WHOLE_RUN_ROUNDS
        times = _whole_run_rounds(configs, rounds, steps_per_round, progress, stop_early)
        method = f"alternating whole runs, {rounds} rounds"
    if len(times[0]) < rounds:
        method += f", stopped early after {len(times[0])}"
    return stats.compare_rounds(times[0], times[1], method=method, planned_rounds=rounds)


def _round_done(times, r: int, rounds: int, progress, stop_early) -> bool:
    """Report round ``r`` (0-based) done; True when ``stop_early`` ends the comparison here."""
    if progress is not None:
        progress(r + 1, rounds)
    return stop_early is not None and r + 1 < rounds and bool(stop_early(times[0], times[1], rounds))


def _calls(steps: int, cfg: RunConfig) -> int:
    """Calls of ``cfg``'s step that run at least ``steps`` training steps (at least one call).

    Example:
        >>> _calls(3, RunConfig(steps_per_execution=8)), _calls(3, RunConfig()), _calls(0, RunConfig())
        (1, 3, 0)
    """
    return -(-steps // cfg.steps_per_execution)


def _warm_rounds(configs, rounds: int, k: int, settle: int, progress,
                 stop_early: Optional[StopEarly] = None) -> Tuple[List[float], List[float]]:
    """Warm blocks: ``k`` measured steps a turn after ``settle`` steps, in whole calls of each configuration's
    ``steps_per_execution`` (a turn of 3 steps at 8 steps a call is one call, not 24 steps)."""
    t0 = time.perf_counter()

    def clock() -> float:
        return time.perf_counter() - t0

    def turn(p, cfg) -> StepLog:
        return timed_steps(p, _calls(settle, cfg) + max(1, _calls(k, cfg)), clock, StepLog())

    times: Tuple[List[float], List[float]] = ([], [])
    # TF's C++ log lines (XLA's "Compiled cluster using XLA!", oneDNN's notices) are held back, as in a run.
    with native_stderr_captured() as native, contextlib.ExitStack() as stack:
        built = [stack.enter_context(prepared(cfg)) for cfg in configs]
        for p, cfg in zip(built, configs):
            timed_steps(p, _calls(cfg.warmup_steps, cfg), clock, StepLog())
        for p, cfg in zip(built, configs):      # one turn each, unmeasured: the first switch is the coldest
            turn(p, cfg)
        for r in range(rounds):
            for which in round_order(r):
                cfg = configs[which]
                log = turn(built[which], cfg)
                times[which].append(stats.median(_per_step(log.times_s[_calls(settle, cfg):], cfg)))
            if _round_done(times, r, rounds, progress, stop_early):
                break
    native.replay(drop=is_tf_log)
    return times


def _whole_run_rounds(configs, rounds: int, steps: Optional[int], progress,
                      stop_early: Optional[StopEarly] = None) -> Tuple[List[float], List[float]]:
    times: Tuple[List[float], List[float]] = ([], [])
    for r in range(rounds):
        for which in round_order(r):
            cfg = configs[which] if steps is None else configs[which].replace(steps=steps)
            result = run(cfg)
            if not result.ok:
                name = "baseline" if which == 0 else "candidate"
                raise RuntimeError(f"the {name} run of round {r + 1} did not finish: "
                                   f"{result.status}: {result.error or 'no measured steps'}")
            times[which].append(stats.median(_per_step(list(result.step_times_s), cfg)))
        if _round_done(times, r, rounds, progress, stop_early):
            break
    return times
