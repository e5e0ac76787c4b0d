"""Run history as rows and tables: what changed, how fast, is it significant, what limits it.

Owns the history table that the Workbench shows and the command line prints:
``history_rows`` turns RunResults into plain dict rows, each run compared with the
baseline and with the run before it, ``format_table`` renders them as fixed-width
text and ``html_table`` as escaped HTML. ``noise_band`` learns this machine's
run-to-run noise from repeated identical runs in the history, and ``short_changes``
names a run by the knobs that set it apart (for chart labels); ``loss_gap`` says how far
two runs' losses drifted apart step by step. Two runs with different global batches are
compared by their time per training example, not per step (``compare_runs``), and said so;
a run whose knobs change the arithmetic (``ARITHMETIC_KNOBS``) against the run before it
gets the final-loss gap beside its speed (``loss_note``). Ratios are never bare: a verdict
says which way it points (``stats.ratio_text``). The colours of
verdicts and failures are defined here, once. Pure: no TensorFlow,
no matplotlib, no ipywidgets, no IPython; the same inputs always give the same
output, so a notebook cell showing a table of fixed results can be checked by nbval.
"""
from __future__ import annotations

import html
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from tfwb import stats
from tfwb.config import KNOBS, RunConfig
from tfwb.diagnosis import Bound, Diagnosis, diagnose, score_bound
from tfwb.pairs import _size  # noqa: F401 - one definition of a run's size, shared
from tfwb.pairs import (LOAD_BIN_PCT, busy, compare_runs, noise_band, other_cpu_pct,  # noqa: F401 - report's names too
                        per_example)
from tfwb.records import RunResult, percent

#: ``(row key, header)`` for every table column, in order. ``diagnosis`` shows the
#: bottleneck headline for finished runs and the error for failed ones.
COLUMNS: Tuple[Tuple[str, str], ...] = (
    ("index", "#"),
    ("label", "label"),
    ("status", "status"),
    ("changes", "changes vs baseline"),
    ("median_ms", "median ms"),
    ("iqr_ms", "IQR ms"),
    ("examples_per_s", "examples/s"),
    ("input_wait_pct", "input wait"),
    ("mfu", "MFU"),
    ("verdict", "vs baseline"),
    ("prev_verdict", "vs previous run"),
    ("bound_note", "bound vs measured"),
    ("loss_note", "loss vs previous run"),
    ("diagnosis", "diagnosis"),
)
_RIGHT_ALIGNED = frozenset({"index", "median_ms", "iqr_ms", "examples_per_s", "input_wait_pct", "mfu"})

BASELINE_TEXT = "baseline"
SAME_TEXT = "no change"
EMPTY_TEXT = "No runs yet."
#: The one definition of each colour the tables and charts use.
FAILED_COLOR = "#c00"          # a run that did not finish
FASTER_COLOR = "#1a7f37"       # significantly faster than what it is compared with
SLOWER_COLOR = "#c4570c"       # significantly slower (orange: red means failed)
SAME_COLOR = "#6e6e6e"         # no significant difference, or nothing to compare
VERDICT_COLORS = {stats.FASTER: FASTER_COLOR, stats.SLOWER: SLOWER_COLOR}


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


def verdict_color(kind: Optional[str]) -> str:
    """The colour for a comparison kind (``stats.FASTER``, ``stats.SLOWER``, anything else).

    Example:
        >>> verdict_color("faster"), verdict_color("no significant difference")
        ('#1a7f37', '#6e6e6e')
    """
    return VERDICT_COLORS.get(kind or "", SAME_COLOR)


def format_changes(config: RunConfig, baseline_config: Optional[RunConfig]) -> str:
    """How ``config`` differs from ``baseline_config``, as keyword arguments.

    Args:
        config: the run's configuration.
        baseline_config: what it is compared with (``None``: nothing to compare).

    Returns:
        e.g. ``"prefetch=True, cache=True"`` (fields in declaration order, values as
        ``repr``, ``label`` ignored), or ``"baseline"`` when nothing differs.

    Example:
        >>> format_changes(RunConfig(prefetch=True), RunConfig())
        'prefetch=True'
    """
    if baseline_config is None:
        return BASELINE_TEXT
    diff = config.diff(baseline_config)
    if not diff:
        return BASELINE_TEXT
    return ", ".join(f"{name}={value!r}" for name, value in diff.items())


def short_changes(config: RunConfig, reference: Optional[RunConfig]) -> List[str]:
    """What sets ``config`` apart from ``reference``, one short item per knob.

    Booleans read as the knob's name (``"prefetch"``) or ``"no prefetch"``; other
    values as ``name=value`` without quotes (``"mixed_precision=mixed_float16"``).
    Nothing is cut: charts wrap the items instead.

    Args:
        config: the run's configuration.
        reference: what it is named against (usually the baseline configuration).

    Returns:
        The items in declaration order; ``[]`` when nothing differs (``label`` ignored).

    Example:
        >>> short_changes(RunConfig(prefetch=True, mixed_precision="mixed_float16"), RunConfig())
        ['prefetch', 'mixed_precision=mixed_float16']
    """
    if reference is None:
        return []
    items = []
    for name, value in config.diff(reference).items():
        if isinstance(value, bool):
            items.append(name if value else f"no {name}")
        else:
            items.append(f"{name}={value}")
    return items


def verdict_text(comparison: stats.Comparison, baseline: RunResult, candidate: RunResult,
                 reference: str = "the baseline") -> str:
    """The words for ``compare_runs(baseline, candidate)``: the ratio with its direction, and
    "per example" with both batches when the batches differ.

    Args:
        comparison: ``compare_runs(baseline, candidate)``.
        baseline, candidate: the two runs.
        reference: how ``baseline`` is named (``"the previous run (#3)"``).

    Example:
        >>> a = RunResult(config=RunConfig(batch_size=64), step_times_s=(0.049,) * 9)
        >>> b = RunResult(config=RunConfig(batch_size=128), step_times_s=(0.081,) * 9)
        >>> verdict_text(compare_runs(a, b), a, b)
        'per example: 1.21x faster (batch 128 vs 64)'
    """
    text = comparison.text(directed=True, reference=reference)
    if per_example(baseline, candidate):
        text = (f"per example: {text} (batch {candidate.config.batch_size} "
                f"vs {baseline.config.batch_size})")
    return text


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


def loss_note(previous: RunResult, result: RunResult, previous_index: int) -> str:
    """The final-loss gap between a run and the run before it, in words (``""`` without losses).

    Example:
        >>> a = RunResult(config=RunConfig(), losses=(2.0, 1.0))
        >>> loss_note(a, RunResult(config=RunConfig(optimizer="sgd"), losses=(2.0, 1.5)), 3)
        'final loss 1.5 vs 1 for #3 (+0.5, higher) after 2 steps'
    """
    gap = final_loss_gap(previous, result)
    if gap is None:
        return ""
    a, b, steps = gap
    if a != a or b != b:
        return f"final loss {b:.4g} vs {a:.4g} for #{previous_index} (not finite) after {steps} steps"
    diff = b - a
    way = "higher" if diff > 0 else "lower" if diff < 0 else "the same"
    return f"final loss {b:.4g} vs {a:.4g} for #{previous_index} ({diff:+.3g}, {way}) after {steps} steps"


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


def pick_baseline(results: Sequence[RunResult],
                  config: Optional[RunConfig] = None) -> Optional[RunResult]:
    """The result others are compared with.

    Args:
        results: runs in order.
        config: the intended baseline configuration; when given, the first ok result
            that ran exactly this configuration (``label`` ignored) wins.

    Returns:
        That result, else the first ok result, else ``None``.

    Example:
        >>> pick_baseline([]) is None
        True
    """
    ok = [r for r in results if r.ok]
    if ok and _size(ok[-1]):
        # A history can mix small (TFWB_FAST=1) and full runs of the same config:
        # compare with a run of the size the latest run used.
        same = [r for r in ok if _size(r) in (None, _size(ok[-1]))]
        ok = same or ok
    if config is not None:
        for r in ok:
            if not r.config.diff(config):
                return r
    return ok[0] if ok else None


def history_rows(results: Sequence[RunResult], baseline: Optional[RunResult] = None, *,
                 baseline_config: Optional[RunConfig] = None,
                 noise: Optional[stats.NoiseBand] = None,
                 diagnoser: Callable[[RunResult], Diagnosis] = diagnose) -> List[Dict[str, Any]]:
    """One plain-data row per run, compared with the baseline run and with the run before it.

    Args:
        results: runs in the order they ran, failures included.
        baseline: the run the others are compared with; default
            ``pick_baseline(results, baseline_config)``.
        baseline_config: the configuration the ``changes`` column is relative to;
            default the baseline run's configuration (or the first run's).
        noise: the run-to-run noise band a ratio must leave to count; default
            ``noise_band(results)`` (learned from repeated identical runs, else
            ``stats.DEFAULT_NOISE``).
        diagnoser: ``tfwb.diagnose``, or a cached one (``tfwb.analysis.Analysis.diagnose``:
            each run diagnosed once, whatever draws it).

    Returns:
        A list of dicts with keys ``index`` (1-based position), ``label``,
        ``status``, ``changes`` (``"prefetch=True, cache=True"`` or ``"baseline"``),
        ``median_ms``, ``q1_ms``, ``q3_ms``, ``iqr_ms`` (q3 - q1),
        ``examples_per_s``, ``input_wait_pct`` (0-100), ``speedup`` (baseline
        median / this median; per example when the batches differ), ``verdict``
        (``"baseline"``, ``"1.42x faster"``, ``"1.03x slower: no significant difference"``,
        ``"per example: 1.21x faster (batch 128 vs 64)"``, or ``""``), ``comparison`` (the
        verdict's kind: ``stats.FASTER``, ``stats.SLOWER``, ``stats.NO_DIFFERENCE``,
        ``stats.CANNOT_TELL_BUSY``, ``stats.CANNOT_TELL_DRIFT``, ``stats.TOO_FEW``,
        ``"baseline"`` or ``None``),
        ``is_baseline``;
        the same against the previous finished run of the same size: ``previous``
        (its index, or ``None``), ``prev_changes`` (``format_changes`` against it;
        ``"no change"`` when equal), ``prev_speedup``, ``prev_verdict``,
        ``prev_comparison``, ``prev_per_example`` (True when the two batches differ and the
        verdict compares time per example), ``prev_arithmetic`` (the ``ARITHMETIC_KNOBS``
        that changed against it) and ``loss_note`` (``loss_note`` when they did, else
        ``""``); ``bound`` (the ``tfwb.diagnosis.Bound`` of the previous run's suggestion
        this run applied, else ``None``), ``bound_note`` (``score_bound``'s sentence with
        the knob: ``"prefetch=True: bound 1.9x, measured 1.7x (89 % of the bound)"``) and
        ``bound_exceeded`` (a gain above its bound beyond the noise band);
        ``mfu``, ``datasheet_mfu`` (fractions or ``None``), ``flops_uncounted`` and
        ``mfu_text`` (``RunResult.mfu_text``); ``per_example`` likewise against the baseline;
        ``noise_pct``, ``noise_learned`` and ``noise_text`` (the
        band used); ``other_cpu_pct`` (the CPU share other programs took during the
        run, ``None`` when unknown);
        ``bottleneck`` (the diagnosis headline; ``""`` for runs that did not
        finish) and ``error`` (``None`` for ok runs). Numbers are ``None`` where
        the run measured nothing. A run of another workload size than the
        baseline (small vs full, from the fingerprint) gets the verdict
        ``"<size> size: not compared"``.

    Example:
        >>> history_rows([])
        []
    """
    if baseline is None:
        baseline = pick_baseline(results, baseline_config)
    if baseline_config is None:
        if baseline is not None:
            baseline_config = baseline.config
        elif results:
            baseline_config = results[0].config
    if noise is None:
        noise = noise_band(results)
    rows = []
    for i, result in enumerate(results, 1):
        previous = _previous(results, i - 1)
        row = _row(i, result, baseline, baseline_config, noise, diagnoser)
        row.update(_versus_previous(result, previous, results, noise, baseline, diagnoser))
        rows.append(row)
    return rows


def _previous(results: Sequence[RunResult], position: int) -> Optional[RunResult]:
    """The last finished run before ``results[position]`` of the same workload size."""
    size = _size(results[position])
    for r in reversed(results[:position]):
        if r.ok and (size is None or _size(r) in (None, size)):
            return r
    return None


def _versus_previous(result: RunResult, previous: Optional[RunResult], results: Sequence[RunResult],
                     noise: stats.NoiseBand, baseline: Optional[RunResult],
                     diagnoser: Callable[[RunResult], Diagnosis] = diagnose) -> Dict[str, Any]:
    out: Dict[str, Any] = {"previous": None, "prev_changes": "", "prev_speedup": None, "prev_verdict": "",
                           "prev_comparison": None, "prev_per_example": False, "prev_arithmetic": [],
                           "loss_note": "", "bound": None, "bound_note": "", "bound_exceeded": False}
    if previous is None:
        return out
    index = next(i for i, r in enumerate(results, 1) if r is previous)
    out["previous"] = index
    diff = format_changes(result.config, previous.config)
    out["prev_changes"] = SAME_TEXT if diff == BASELINE_TEXT else diff
    if result.ok:
        comparison = compare_runs(previous, result, noise=noise)
        if comparison is not None:
            name = f"the baseline (#{index})" if previous is baseline else f"the previous run (#{index})"
            out.update(prev_speedup=comparison.speedup, prev_comparison=comparison.verdict,
                       prev_verdict=verdict_text(comparison, previous, result, name),
                       prev_per_example=per_example(previous, result))
        out.update(_bound_score(previous, result, out["prev_speedup"], noise, diagnoser))
        changed = arithmetic_changes(result.config, previous.config)
        if changed:
            out.update(prev_arithmetic=changed, loss_note=loss_note(previous, result, index))
    return out


def _row(index: int, result: RunResult, baseline: Optional[RunResult],
         baseline_config: Optional[RunConfig], noise: stats.NoiseBand,
         diagnoser: Callable[[RunResult], Diagnosis] = diagnose) -> Dict[str, Any]:
    spread = result.spread
    wait = result.input_wait_fraction
    is_baseline = baseline is not None and result is baseline
    speedup, verdict, kind, by_example = None, "", None, False
    if is_baseline:
        speedup, verdict, kind = 1.0, BASELINE_TEXT, BASELINE_TEXT
    elif baseline is not None and result.ok and None not in (_size(baseline), _size(result)) \
            and _size(baseline) != _size(result):
        verdict = f"{_size(result)} size: not compared"
    elif baseline is not None and result.ok:
        comparison = compare_runs(baseline, result, noise=noise)
        if comparison is not None:
            speedup, verdict, kind = comparison.speedup, verdict_text(comparison, baseline, result), comparison.verdict
            by_example = per_example(baseline, result)
    ok = result.ok
    return {
        "index": index,
        "label": result.config.label,
        "status": result.status,
        "changes": format_changes(result.config, baseline_config),
        "median_ms": spread.median * 1e3 if spread else None,
        "q1_ms": spread.q1 * 1e3 if spread else None,
        "q3_ms": spread.q3 * 1e3 if spread else None,
        "iqr_ms": (spread.q3 - spread.q1) * 1e3 if spread else None,
        "examples_per_s": result.throughput_per_s,
        "input_wait_pct": wait * 100.0 if wait is not None else None,
        "mfu": result.mfu if ok else None,
        "datasheet_mfu": result.datasheet_mfu if ok else None,
        "flops_uncounted": list(result.flops_uncounted),
        "mfu_text": result.mfu_text() if ok else "",
        "speedup": speedup,
        "verdict": verdict,
        "comparison": kind,
        "per_example": by_example,
        "is_baseline": is_baseline,
        "noise_pct": noise.pct,
        "noise_learned": noise.learned,
        "noise_text": noise.text(),
        "other_cpu_pct": other_cpu_pct(result),
        "bottleneck": diagnoser(result).headline if ok else "",
        "error": None if result.status == "ok" else (result.error or result.status),
    }


#: The MFU cell of a run whose model has layers ``count_flops`` could not read.
NOT_COUNTED_TEXT = "not counted"


def mfu_cell(row: Dict[str, Any]) -> str:
    """The MFU column's cell: the share of this machine's measured peak, ``"not counted"`` when a
    layer could not be counted, ``MISSING_TEXT`` when the peak or the FLOPs are unknown.

    Example:
        >>> mfu_cell({"status": "ok", "mfu": 0.234}), mfu_cell({"status": "ok", "flops_uncounted": ["lstm (LSTM)"]})
        ('23 %', 'not counted')
        >>> mfu_cell({"status": "ok", "mfu": None}), mfu_cell({"status": "failed"}), mfu_cell({"status": "ok", "mfu": 1.3})
        ('n/a', '', 'peak read low')
    """
    if row.get("status") != "ok":
        return ""
    if row.get("flops_uncounted"):
        return NOT_COUNTED_TEXT
    mfu = row.get("mfu")
    if mfu is not None and mfu > 1.0:
        return "peak read low"      # above the measured peak: RunResult.mfu_text says why
    return MISSING_TEXT if mfu is None else percent(mfu)


def _suggested_bound(previous: RunResult, result: RunResult,
                     diagnoser: Callable[[RunResult], Diagnosis] = diagnose) -> Tuple[Optional[Bound], List[str]]:
    """The bound of the previous run's suggestion that ``result`` applied (its knob set to the
    suggested value), and the other knobs ``result`` changed as well (``label`` ignored)."""
    if not previous.ok:
        return None, []
    diff = result.config.diff(previous.config)
    for b in diagnoser(previous).bounds:
        if b.knob in diff and diff[b.knob] == b.value:
            return b, [k for k in diff if k != b.knob]
    return None, []


def _bound_score(previous: RunResult, result: RunResult, speedup: Optional[float],
                 noise: stats.NoiseBand, diagnoser: Callable[[RunResult], Diagnosis] = diagnose) -> Dict[str, Any]:
    """``bound``, ``bound_note`` and ``bound_exceeded`` of a run that applied the previous run's suggestion
    and changed nothing else (a gain of several knobs at once is not one suggestion's to score)."""
    out: Dict[str, Any] = {"bound": None, "bound_note": "", "bound_exceeded": False}
    b, others = _suggested_bound(previous, result, diagnoser)
    if b is None or not result.ok:
        return out
    out["bound"] = b
    name = f"{b.knob}={b.value!r}"
    if others:           # several knobs changed at once: the gain is not this suggestion's alone
        return out
    if speedup is None or not speedup > 0:
        out["bound_note"] = f"{name}: bound {_bound_x(b)}, no measured gain to score"
    else:
        text = score_bound(b.speedup, speedup, noise.pct / 100.0, strict=b.strict)
        out["bound_note"] = f"{name}: {text}"
        out["bound_exceeded"] = (b.strict and b.speedup is not None
                                 and speedup > b.speedup * (1 + noise.pct / 100.0))   # not strict: explained
    return out


def _bound_x(b: Bound) -> str:
    """A bound as ``score_bound`` writes it (``1.04x``, ``1.9x``, ``23x``), or ``unknown``."""
    x = b.speedup
    if x is None:
        return "unknown"
    if x == float("inf"):
        return "no limit"
    return f"{x:.2f}x" if x < 1.2 else f"{x:.1f}x" if x < 10 else f"{x:.0f}x"


def bound_clause(b: Bound) -> str:
    """The part of a bound's sentence after its knob's name: ``"can gain at most 1.9x: ..."``.

    Example:
        >>> bound_clause(Bound("prefetch", True, 1.9, "prefetch can gain at most 1.9x: the step waits"))
        'can gain at most 1.9x: the step waits'
        >>> bound_clause(Bound("jit_compile", True, None, "XLA (jit_compile=True): bound unknown: no MFU"))
        'bound unknown: no MFU'
        >>> bound_clause(Bound("cache", True, 1.4, "cache: removing the input wait (30 % of the step) gains at most 1.4x"))
        'removing the input wait (30 % of the step) gains at most 1.4x'
    """
    for marker in (": removing ", " can gain ", ": bound unknown"):
        at = b.text.find(marker)
        if at >= 0:
            return b.text[at:].lstrip(" :")
    return b.text


def suggestion_text(suggestion: Tuple[str, Any, str], b: Optional[Bound] = None) -> str:
    """A suggestion with its bound: ``"try prefetch=True — can gain at most 1.9x: ..."``.

    Args:
        suggestion: ``(field, value, why)`` from ``Diagnosis.suggestions``.
        b: its ``Bound`` (``Diagnosis.bound_for(field)``); ``None``: the reason alone.

    Example:
        >>> suggestion_text(("prefetch", True, "overlap input with the step"),
        ...                 Bound("prefetch", True, 1.9, "prefetch can gain at most 1.9x: the step waits "
        ...                       "for input 47 % of the time"))
        'try prefetch=True — can gain at most 1.9x: the step waits for input 47 % of the time (overlap input with the step)'
    """
    knob, value, why = suggestion
    text = f"try {knob}={value!r}"
    if b is not None:
        text += f" — {bound_clause(b)}"
    return text + (f" ({why})" if why else "")


def format_cells(row: Dict[str, Any]) -> Dict[str, str]:
    """The text of each table cell of one row, keyed like ``COLUMNS``.

    Example:
        >>> format_cells({"index": 1, "median_ms": 12.345})["median_ms"]
        '12.3'
    """
    def num(key: str, fmt: str) -> str:
        value = row.get(key)
        return "" if value is None else format(value, fmt)

    q1, q3 = row.get("q1_ms"), row.get("q3_ms")
    error = row.get("error")
    diagnosis = row.get("bottleneck") or ""
    if error and row.get("status") == "interrupted":
        diagnosis = str(error)            # the user's own stop and where it happened: no error
    elif error and row.get("status") != "ok":
        diagnosis = f"error: {error}"
    return {
        "index": str(row.get("index", "")),
        "label": row.get("label") or "",
        "status": row.get("status") or "",
        "changes": row.get("changes") or "",
        "median_ms": num("median_ms", ".1f"),
        "iqr_ms": "" if q1 is None or q3 is None else f"{q1:.1f}-{q3:.1f}",
        "examples_per_s": num("examples_per_s", ",.0f"),
        "input_wait_pct": "" if row.get("input_wait_pct") is None else f"{row['input_wait_pct']:.0f}%",
        "mfu": mfu_cell(row),
        "verdict": row.get("verdict") or "",
        "prev_verdict": f"vs #{row['previous']}: {row['prev_verdict']}" if row.get("prev_verdict") else "",
        "bound_note": row.get("bound_note") or "",
        "loss_note": row.get("loss_note") or "",
        "diagnosis": diagnosis,
    }


def _columns(rows: Sequence[Dict[str, Any]]) -> Tuple[Tuple[str, str], ...]:
    """COLUMNS, without ``label`` when no run has one, without ``vs previous run``
    when no run has a previous one to compare with, without ``loss vs previous run``
    when no run changed the arithmetic against the run before it, without ``bound vs
    measured`` when no run applied a suggestion, and without ``MFU`` when no run counted
    its FLOPs (records from before FLOPs were counted)."""
    drop = set()
    if not any(row.get("label") for row in rows):
        drop.add("label")
    if not any(row.get("prev_verdict") for row in rows):
        drop.add("prev_verdict")
    if not any(row.get("loss_note") for row in rows):
        drop.add("loss_note")
    if not any(row.get("bound_note") for row in rows):
        drop.add("bound_note")
    if not any(row.get("mfu") is not None or row.get("flops_uncounted") or row.get("mfu_text") for row in rows):
        drop.add("mfu")        # a history recorded before FLOPs were counted: nothing to show
    return tuple(c for c in COLUMNS if c[0] not in drop)


def noise_note(rows: Sequence[Dict[str, Any]]) -> str:
    """One sentence on the noise band the rows' verdicts used; ``""`` when nothing was compared.

    Example:
        >>> noise_note([])
        ''
    """
    used = next((row for row in rows if row.get("noise_text")
                 and (row.get("comparison") not in (None, BASELINE_TEXT) or row.get("prev_comparison"))), None)
    if used is None:
        return ""
    return (f"Run-to-run noise: {used['noise_text']}. Two runs differ significantly only when their IQRs "
            "do not overlap and their medians differ by more than that; runs during which other programs "
            f"used {stats.BUSY_OTHER_CPU_PCT:.0f} % or more of the CPU, or that drifted, cannot tell (compare "
            "them interleaved).")


def format_table(rows: Sequence[Dict[str, Any]]) -> str:
    """Fixed-width text table of ``history_rows`` output, for print and the CLI.

    Args:
        rows: ``history_rows(...)``.

    Returns:
        Header, a dashed rule and one line per row; columns two spaces apart,
        numbers right-aligned, no trailing spaces. The ``label`` column appears only
        when some run has a label, ``vs previous run`` only when some run has one.
        ``"No runs yet."`` for no rows.

    Example:
        >>> format_table([])
        'No runs yet.'
    """
    if not rows:
        return EMPTY_TEXT
    columns = _columns(rows)
    cells = [format_cells(row) for row in rows]
    widths = {key: max(len(header), *(len(c[key]) for c in cells)) for key, header in columns}

    def line(values: Dict[str, str]) -> str:
        parts = []
        for key, _ in columns:
            text = values[key]
            parts.append(text.rjust(widths[key]) if key in _RIGHT_ALIGNED else text.ljust(widths[key]))
        return "  ".join(parts).rstrip()

    header = line({key: title for key, title in columns})
    rule = "  ".join("-" * widths[key] for key, _ in columns)
    return "\n".join([header, rule] + [line(c) for c in cells])


_TH = '<th style="padding:1px 6px;border-bottom:1px solid #999;text-align:left">'
_TD = '<td style="padding:1px 6px;text-align:left">'


#: A wide table scrolls sideways inside the output area (a notebook's, the Workbench's) instead of
#: running past its right edge.
SCROLL_STYLE = "overflow-x:auto;max-width:100%"


def simple_html_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """Any table as escaped HTML in the history table's style, scrolling sideways when wider than the output.

    Example:
        >>> simple_html_table(["a"], [["<1>"]]).count("&lt;1&gt;")
        1
    """
    head = "".join(f"{_TH}{html.escape(str(h))}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"{_TD}{html.escape(str(c))}</td>" for c in row) + "</tr>" for row in rows)
    return (f'<div style="{SCROLL_STYLE}"><table class="tfwb-table" style="border-collapse:collapse;font-size:12px">'
            f"<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>")


def html_table(rows: Sequence[Dict[str, Any]]) -> str:
    """Escaped HTML table of ``history_rows`` output, for the Workbench and notebooks.

    Args:
        rows: ``history_rows(...)``.

    Returns:
        ``<table class="tfwb-history">``, in a ``<div>`` that scrolls sideways when the table is
        wider than the output area, with one ``<tr>`` per row; each row has
        the class ``tfwb-row-<status>`` (plus ``tfwb-row-baseline`` for the
        baseline), rows that did not finish are red (``FAILED_COLOR``), numbers are
        right-aligned, each verdict is coloured by its own comparison (faster green,
        slower orange, no significant difference grey) and a caption under the
        table states the noise band (``noise_note``). For no rows,
        ``<div class="tfwb-history tfwb-empty">No runs yet.</div>``.

    Example:
        >>> html_table([])
        '<div class="tfwb-history tfwb-empty">No runs yet.</div>'
    """
    if not rows:
        return f'<div class="tfwb-history tfwb-empty">{EMPTY_TEXT}</div>'
    columns = _columns(rows)

    def align(key: str) -> str:
        return "right" if key in _RIGHT_ALIGNED else "left"

    def nowrap(key: str) -> str:   # numbers never break across lines
        return ";white-space:nowrap" if key in _RIGHT_ALIGNED else ""

    def color(key: str, row: Dict[str, Any]) -> str:
        kind = {"verdict": "comparison", "prev_verdict": "prev_comparison"}.get(key)
        if kind is None or row.get("status") != "ok" or row.get(kind) in (None, BASELINE_TEXT):
            return ""
        return f";color:{verdict_color(row.get(kind))}"

    head = "".join(f'<th style="padding:1px 6px;border-bottom:1px solid #999;text-align:{align(key)}">'
                   f"{html.escape(title)}</th>" for key, title in columns)
    body = []
    for row in rows:
        cells = format_cells(row)
        status = str(row.get("status") or "")
        classes = [f"tfwb-row-{html.escape(status)}"] + (["tfwb-row-baseline"] if row.get("is_baseline") else [])
        styles = ([f"color:{FAILED_COLOR}"] if status != "ok" else []) + (
            ["font-weight:bold"] if row.get("is_baseline") else [])
        style = f' style="{";".join(styles)}"' if styles else ""
        tds = "".join(f'<td style="padding:1px 6px;text-align:{align(key)}{nowrap(key)}{color(key, row)}">'
                      f"{html.escape(cells[key])}</td>" for key, _ in columns)
        body.append(f'<tr class="{" ".join(classes)}"{style}>{tds}</tr>')
    note = noise_note(rows)
    caption = (f'<caption style="caption-side:bottom;text-align:left;padding:2px 6px;color:#555;'
               f'font-size:11px">{html.escape(note)}</caption>' if note else "")
    return (f'<div class="tfwb-history-scroll" style="{SCROLL_STYLE}">'
            '<table class="tfwb-history" style="border-collapse:collapse;font-size:12px">'
            f"{caption}<thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table></div>")


# -- figures that may be missing -------------------------------------------------------------------
#: What a figure that was not measured reads as in tables and lines.
MISSING_TEXT = "n/a"


def fmt(value: Any, spec: str = "", missing: str = MISSING_TEXT) -> str:
    """``format(value, spec)``, or ``missing`` for a figure that was not measured (None, NaN).

    For table cells and printed lines whose figure can be absent: a failed run's peak
    memory or loss scale, a gain with no run that reached the target, a GPU whose
    utilization NVML refuses (MIG slices, some vGPUs).

    Example:
        >>> fmt(3.14159, ".2f"), fmt(None, ".2f"), fmt(float("nan"), ".0f")
        ('3.14', 'n/a', 'n/a')
    """
    if value is None or (isinstance(value, float) and value != value):
        return missing
    return format(value, spec)


#: Why NVML gives no utilization for a GPU it lists.
NO_GPU_UTIL_TEXT = ("not reported: NVML refuses utilization on this GPU (a MIG slice or a vGPU does; "
                    "nvidia-smi shows N/A there too)")


def utilization_lines(result: RunResult, cpu_count: Optional[int] = None) -> List[str]:
    """The utilization of a run over its measured steps, one line for the CPU and one per GPU.

    Every figure may be missing (no samples, a failed run, NVML refusing a MIG slice's
    utilization): it reads ``n/a`` or says why, never raises.

    Example:
        >>> from tfwb.records import Sample
        >>> r = RunResult(config=RunConfig(), samples=(Sample(0.5, 150.0, 40.0, 900.0, (None,), (1200.0,)),))
        >>> for line in utilization_lines(r, cpu_count=4):
        ...     print(line)
        1 samples; process CPU median 150 % of one core (4 cores here); whole machine 40 %; RSS peak 900 MiB
        GPU 0: utilization not reported: NVML refuses utilization on this GPU (a MIG slice or a vGPU does; nvidia-smi shows N/A there too); memory in use 1,200 MiB
    """
    u = result.utilization()
    cores = f" ({cpu_count} cores here)" if cpu_count else ""
    lines = [f"{u['samples']} samples; process CPU median {fmt(u['cpu_process_pct'], '.0f')} % of one core{cores}; "
             f"whole machine {fmt(u['cpu_system_pct'], '.0f')} %; RSS peak {fmt(u['rss_peak_mib'], ',.0f')} MiB"]
    for gpu, (util, mem) in enumerate(zip(u["gpu_util_pct"], u["gpu_mem_peak_mib"])):
        util_text = f"median {util:.0f} %" if util is not None else NO_GPU_UTIL_TEXT
        lines.append(f"GPU {gpu}: utilization {util_text}; memory in use {fmt(mem, ',.0f')} MiB")
    return lines
