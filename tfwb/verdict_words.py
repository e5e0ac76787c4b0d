"""How one comparison is said: the sentence of a status line and the short phrase of a table cell.

A separate-run comparison (``stats.Comparison``) or an interleaved one (``stats.RoundsComparison``,
``Versus.decided``) becomes ``verdict_text`` / ``versus_text`` (the sentence: the ratio with its
direction, its interval or why it cannot tell) or ``versus_phrase`` (the cell: ``"4.77x faster"``,
``"cannot tell (busy 16 %)"``, ``"no difference"``, ``"3.78x faster, interleaved"``); ``PHRASE_NOTES``
explains each phrase once, under a table. When an interleaved comparison of the pair was measured,
every one of them says it instead of the separate runs'. ``tfwb.render`` uses them for the tables,
the status line and the Monitor's line.

Pure: no TensorFlow, no UI library.
"""
from __future__ import annotations

from typing import Optional, Tuple

from tfwb import stats
from tfwb.analysis.pairs import per_example
from tfwb.analysis.rows import Versus
from tfwb.records import RunResult

__all__ = ["INTERLEAVED_TEXT", "PHRASE_NOTES", "verdict_text", "versus_text", "versus_kind", "comparison_phrase",
           "rounds_phrase", "versus_phrase", "previous_name"]


def _per_example_text(text: str, batches: Tuple[int, int]) -> str:
    return f"per example: {text} (batch {batches[0]} vs {batches[1]})"


def verdict_text(comparison: stats.Comparison, baseline: RunResult, candidate: RunResult,
                 reference: str = "the baseline") -> str:
    """The words for ``compare_runs(baseline, candidate)``: the ratio with its direction, and
    "per example" with both batches when the batches differ.

    Args:
        comparison: ``compare_runs(baseline, candidate)``.
        baseline, candidate: the two runs.
        reference: how ``baseline`` is named (``"the previous run (#3)"``).

    Example:
        >>> from tfwb.config import RunConfig
        >>> a = RunResult(config=RunConfig(batch_size=64), step_times_s=(0.049,) * 9)
        >>> b = RunResult(config=RunConfig(batch_size=128), step_times_s=(0.081,) * 9)
        >>> from tfwb.analysis.pairs import compare_runs
        >>> verdict_text(compare_runs(a, b), a, b)
        'per example: 1.21x faster (batch 128 vs 64)'
    """
    text = comparison.text(directed=True, reference=reference)
    if per_example(baseline, candidate):
        text = _per_example_text(text, (candidate.config.batch_size, baseline.config.batch_size))
    return text


#: How a verdict decided by an interleaved comparison says so.
INTERLEAVED_TEXT = "interleaved"


def versus_text(versus: Optional[Versus], reference: str) -> str:
    """A ``Versus`` in words (``verdict_text``'s), ``""`` without a comparison; its interleaved
    comparison's (``Versus.decided``) when one was measured, saying so.

    Args:
        versus: the pair (``HistoryRow.versus_baseline`` or ``versus_previous``).
        reference: how the other run is named (``"the baseline"``, ``"the previous run (#3)"``).

    Example:
        >>> d = stats.compare_rounds([1.0] * 6, [0.5] * 6)
        >>> versus_text(Versus(1, True, None, decided=d), "the baseline")
        '2.00x faster, interleaved (97 % CI 2.00-2.00x; faster in 6 of 6 rounds)'
    """
    if versus is None:
        return ""
    if versus.decided is not None:
        head, _, rest = versus.decided.text(directed=True).partition(" (")
        return f"{head}, {INTERLEAVED_TEXT}" + (f" ({rest}" if rest else "")
    if versus.other_size:
        return f"{versus.other_size} size: not compared"
    if versus.comparison is None:
        return ""
    text = versus.comparison.text(directed=True, reference=reference)
    return _per_example_text(text, versus.batches) if versus.per_example else text


def versus_kind(versus: Optional[Versus]) -> Optional[str]:
    """The kind of the verdict a ``Versus`` shows: its interleaved comparison's when one was measured,
    else the separate runs' (``stats.FASTER``, ...); ``None`` without a comparison."""
    if versus is None:
        return None
    if versus.decided is not None:
        return versus.decided.verdict
    return versus.comparison.verdict if versus.comparison is not None else None


def _busy_pct(c: stats.Comparison) -> str:
    loads = [p for p in (c.other_cpu_pct or ()) if p is not None]
    return f" {max(loads):.0f} %" if loads else ""


def comparison_phrase(c: stats.Comparison) -> str:
    """A separate-run comparison as a table cell says it: ``"4.77x faster"``, ``"no difference"``,
    ``"cannot tell (busy 16 %)"``, ``"cannot tell (drifted)"``, ``"too few steps"``.

    Example:
        >>> comparison_phrase(stats.compare([1.0] * 5, [1.01] * 5))
        'no difference'
    """
    if c.significant:
        return f"{c.speedup if c.verdict == stats.FASTER else 1.0 / c.speedup:.2f}x {c.verdict}"
    if c.verdict == stats.NO_DIFFERENCE:
        return "no difference"
    if c.verdict == stats.TOO_FEW:
        return "too few steps"
    if c.verdict == stats.CANNOT_TELL_BUSY:
        return f"cannot tell (busy{_busy_pct(c)})"
    if c.verdict == stats.CANNOT_TELL_DRIFT:
        return "cannot tell (drifted)"
    head, _, why = c.verdict.partition(": ")
    return f"{head} ({why})" if why else head


def rounds_phrase(d: stats.RoundsComparison) -> str:
    """An interleaved comparison as a table cell says it: ``"3.78x faster, interleaved"``.

    Example:
        >>> rounds_phrase(stats.compare_rounds([1.0] * 6, [1.0, 1.01, 0.99, 1.0, 1.02, 0.98]))
        'no difference, interleaved'
    """
    if d.significant:
        head = f"{d.speedup:.2f}x faster" if d.verdict == stats.FASTER else f"{1.0 / d.speedup:.2f}x slower"
    elif d.verdict == stats.NO_DIFFERENCE:
        head = "no difference"
    else:
        head = "too few rounds" if d.verdict == stats.TOO_FEW_ROUNDS else d.verdict
    return f"{head}, {INTERLEAVED_TEXT}"


def versus_phrase(versus: Optional[Versus]) -> str:
    """A ``Versus`` as a table cell says it (``comparison_phrase``, ``rounds_phrase`` when it was
    decided interleaved, ``"... per example"`` when the batches differ); ``""`` without a comparison."""
    if versus is None:
        return ""
    if versus.decided is not None:
        return rounds_phrase(versus.decided)
    if versus.other_size:
        return f"{versus.other_size} size: not compared"
    if versus.comparison is None:
        return ""
    text = comparison_phrase(versus.comparison)
    return f"{text} per example" if versus.per_example and versus.comparison.significant else text


def previous_name(v: Versus) -> str:
    return f"the baseline (#{v.reference})" if v.reference_is_baseline else f"the previous run (#{v.reference})"



#: The explanation of each phrase a verdict cell can hold, keyed by what marks it in a cell.
PHRASE_NOTES: Tuple[Tuple[str, str], ...] = (
    ("busy", f"cannot tell (busy N %): other programs used N % of the CPU during one of the two runs "
             f"({stats.BUSY_OTHER_CPU_PCT:.0f} % or more is busy), so separate runs cannot be compared; "
             f"{stats.INTERLEAVE_HINT}."),
    ("drifted", "cannot tell (drifted): a run's last third ran at another speed than its first third, beyond "
                f"the noise; {stats.INTERLEAVE_HINT}."),
    (INTERLEAVED_TEXT, "interleaved: the two configurations were measured in alternating rounds in one process "
                       "(tfwb.compare_interleaved); that verdict stands instead of the separate runs'."),
    ("per example", "per example: the batches differ, so the time per example was compared."),
    ("too few", "too few steps / rounds: too little was measured to tell."),
    ("not compared", "size: not compared: the runs used different workload sizes (small under TFWB_FAST=1)."),
)
