"""How the way back is said: tables and sentences rendered from ``tfwb.analysis`` rows.

This module only renders; it decides nothing. ``tfwb.analysis.rows.history_rows`` makes the
typed rows (``HistoryRow``: numbers, ``Versus`` comparisons, the diagnosis); here they become
words: ``verdict`` / ``prev_verdict`` (the ratio with its direction, "per example" with both
batches when the batches differ: ``stats.Comparison.text``), ``changes``, ``row_loss_note``,
``bound_note`` and ``headline`` (the diagnosis headline); ``format_table`` (fixed-width text,
for print and the CLI) and ``html_table`` (escaped HTML, for the Workbench and notebooks);
``noise_note``, the caption
that states the noise band. Beside them: ``suggestion_text`` (a suggestion with its bound),
``short_changes`` (a run named by its knobs, for chart labels), ``simple_html_table`` (any table
in the history table's style), ``fmt`` and ``utilization_lines`` (figures that may be missing),
and ``monitor_line`` (the fit Monitor's closing line). The colours of verdicts and failures are
defined here, once.

Pure: no TensorFlow, no matplotlib, no ipywidgets, no IPython; the same rows always give the
same text, so a notebook cell showing a table of fixed results can be checked by nbval.
"""
from __future__ import annotations

import html
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from tfwb import stats
from tfwb.analysis.diagnosis import Bound, score_bound
from tfwb.analysis.pairs import final_loss_gap, per_example
from tfwb.analysis.rows import HistoryRow, Versus
from tfwb.config import RunConfig
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
    return _changes_text(config.diff(baseline_config)) or BASELINE_TEXT


def _changes_text(diff: Mapping[str, Any]) -> str:
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


def versus_text(versus: Optional[Versus], reference: str) -> str:
    """A ``Versus`` in words (``verdict_text``'s), ``""`` without a comparison.

    Args:
        versus: the pair (``HistoryRow.versus_baseline`` or ``versus_previous``).
        reference: how the other run is named (``"the baseline"``, ``"the previous run (#3)"``).
    """
    if versus is None:
        return ""
    if versus.other_size:
        return f"{versus.other_size} size: not compared"
    if versus.comparison is None:
        return ""
    text = versus.comparison.text(directed=True, reference=reference)
    return _per_example_text(text, versus.batches) if versus.per_example else text


def verdict(row: HistoryRow) -> str:
    """The row's verdict against the baseline: ``"baseline"``, ``"1.42x faster"``,
    ``"1.03x slower: no significant difference"``, ``"per example: 1.21x faster (batch 128 vs 64)"``,
    ``"full size: not compared"`` or ``""``."""
    if row.is_baseline:
        return BASELINE_TEXT
    return versus_text(row.versus_baseline, "the baseline")


def prev_verdict(row: HistoryRow) -> str:
    """The row's verdict against the previous run (``""`` without one); it names the baseline as such."""
    v = row.versus_previous
    if v is None:
        return ""
    name = f"the baseline (#{v.reference})" if v.reference_is_baseline else f"the previous run (#{v.reference})"
    return versus_text(v, name)


def changes(row: HistoryRow) -> str:
    """The knobs that set the run apart from the baseline configuration, or ``"baseline"``."""
    return _changes_text(row.changes) or BASELINE_TEXT


def prev_changes(row: HistoryRow) -> str:
    """The knobs that set the run apart from the previous run, ``"no change"``; ``""`` without one."""
    if row.previous is None:
        return ""
    return _changes_text(row.previous_changes) or SAME_TEXT


def _loss_text(gap: Optional[Tuple[float, float, int]], previous_index: int) -> str:
    if gap is None:
        return ""
    a, b, steps = gap
    if a != a or b != b:
        return f"final loss {b:.4g} vs {a:.4g} for #{previous_index} (not finite) after {steps} steps"
    diff = b - a
    way = "higher" if diff > 0 else "lower" if diff < 0 else "the same"
    return f"final loss {b:.4g} vs {a:.4g} for #{previous_index} ({diff:+.3g}, {way}) after {steps} steps"


def loss_note(previous: RunResult, result: RunResult, previous_index: int) -> str:
    """The final-loss gap between a run and the run before it, in words (``""`` without losses).

    Example:
        >>> a = RunResult(config=RunConfig(), losses=(2.0, 1.0))
        >>> loss_note(a, RunResult(config=RunConfig(optimizer="sgd"), losses=(2.0, 1.5)), 3)
        'final loss 1.5 vs 1 for #3 (+0.5, higher) after 2 steps'
    """
    return _loss_text(final_loss_gap(previous, result), previous_index)


def row_loss_note(row: HistoryRow) -> str:
    """``loss_note`` of the row against its previous run when the arithmetic changed; ``""`` otherwise."""
    if not row.prev_arithmetic or row.previous is None:
        return ""
    return _loss_text(row.loss_gap, row.previous)


def bound_note(row: HistoryRow) -> str:
    """The bound of the suggestion the run applied, scored against its measured gain (``score_bound``):
    ``"prefetch=True: bound 1.9x, measured 1.7x (89 % of the bound)"``; ``""`` when the run applied
    no suggestion or changed other knobs as well."""
    b = row.bound
    if b is None or not row.bound_alone or not row.ok:
        return ""
    name = f"{b.knob}={b.value!r}"
    speedup = row.prev_speedup
    if speedup is None or not speedup > 0:
        return f"{name}: bound {_bound_x(b)}, no measured gain to score"
    return f"{name}: {score_bound(b.speedup, speedup, row.noise.pct / 100.0, strict=b.strict)}"


def headline(row: HistoryRow) -> str:
    """The diagnosis headline of a finished run; ``""`` for the others."""
    return row.diagnosis.headline if row.diagnosis is not None and row.ok else ""


def mfu_text(row: HistoryRow) -> str:
    """``RunResult.mfu_text`` of a finished run; ``""`` for the others."""
    return row.result.mfu_text() if row.ok else ""


def noise_text(row: HistoryRow) -> str:
    """The noise band the row's verdicts used, in words."""
    return row.noise.text()


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



#: The MFU cell of a run whose model has layers ``count_flops`` could not read.
NOT_COUNTED_TEXT = "not counted"


def mfu_cell(row: HistoryRow) -> str:
    """The MFU column's cell: the share of this machine's measured peak, ``"not counted"`` when a
    layer could not be counted, ``MISSING_TEXT`` when the peak or the FLOPs are unknown.

    Example:
        >>> from tfwb.analysis.rows import history_rows
        >>> row = history_rows([RunResult(config=RunConfig(), step_times_s=(0.1,) * 4)])[0]
        >>> mfu_cell(row)
        'n/a'
    """
    if not row.ok:
        return ""
    if row.flops_uncounted:
        return NOT_COUNTED_TEXT
    mfu = row.mfu
    if mfu is not None and mfu > 1.0:
        return "peak read low"      # above the measured peak: RunResult.mfu_text says why
    return MISSING_TEXT if mfu is None else percent(mfu)


def format_cells(row: HistoryRow) -> Dict[str, str]:
    """The text of each table cell of one row, keyed like ``COLUMNS``.

    Example:
        >>> from tfwb.analysis.rows import history_rows
        >>> format_cells(history_rows([RunResult(config=RunConfig(), step_times_s=(0.012345,) * 4)])[0])["median_ms"]
        '12.3'
    """
    def num(value: Optional[float], spec: str) -> str:
        return "" if value is None else format(value, spec)

    q1, q3 = row.q1_ms, row.q3_ms
    error = row.error
    diagnosis = headline(row)
    if error and row.status == "interrupted":
        diagnosis = str(error)            # the user's own stop and where it happened: no error
    elif error and row.status != "ok":
        diagnosis = f"error: {error}"
    prev = prev_verdict(row)
    return {
        "index": str(row.index),
        "label": row.label or "",
        "status": row.status or "",
        "changes": changes(row),
        "median_ms": num(row.median_ms, ".1f"),
        "iqr_ms": "" if q1 is None or q3 is None else f"{q1:.1f}-{q3:.1f}",
        "examples_per_s": num(row.examples_per_s, ",.0f"),
        "input_wait_pct": "" if row.input_wait_pct is None else f"{row.input_wait_pct:.0f}%",
        "mfu": mfu_cell(row),
        "verdict": verdict(row),
        "prev_verdict": f"vs #{row.previous}: {prev}" if prev else "",
        "bound_note": bound_note(row),
        "loss_note": row_loss_note(row),
        "diagnosis": diagnosis,
    }


def _columns(rows: Sequence[HistoryRow]) -> Tuple[Tuple[str, str], ...]:
    """COLUMNS, without ``label`` when no run has one, without ``vs previous run``
    when no run has a previous one to compare with, without ``loss vs previous run``
    when no run changed the arithmetic against the run before it, without ``bound vs
    measured`` when no run applied a suggestion, and without ``MFU`` when no run counted
    its FLOPs (records from before FLOPs were counted)."""
    drop = set()
    if not any(row.label for row in rows):
        drop.add("label")
    if not any(prev_verdict(row) for row in rows):
        drop.add("prev_verdict")
    if not any(row_loss_note(row) for row in rows):
        drop.add("loss_note")
    if not any(bound_note(row) for row in rows):
        drop.add("bound_note")
    if not any(row.mfu is not None or row.flops_uncounted or mfu_text(row) for row in rows):
        drop.add("mfu")        # a history recorded before FLOPs were counted: nothing to show
    return tuple(c for c in COLUMNS if c[0] not in drop)


def noise_note(rows: Sequence[HistoryRow]) -> str:
    """One sentence on the noise band the rows' verdicts used; ``""`` when nothing was compared.

    Example:
        >>> noise_note([])
        ''
    """
    used = next((row for row in rows
                 if row.comparison not in (None, BASELINE_TEXT) or row.prev_comparison), None)
    if used is None:
        return ""
    return (f"Run-to-run noise: {noise_text(used)}. Two runs differ significantly only when their IQRs "
            "do not overlap and their medians differ by more than that; runs during which other programs "
            f"used {stats.BUSY_OTHER_CPU_PCT:.0f} % or more of the CPU, or that drifted, cannot tell (compare "
            "them interleaved).")


def format_table(rows: Sequence[HistoryRow]) -> str:
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


def html_table(rows: Sequence[HistoryRow], predictions: Optional[Mapping[int, str]] = None) -> str:
    """Escaped HTML table of ``history_rows`` output, for the Workbench and notebooks.

    Args:
        rows: ``history_rows(...)``.
        predictions: run number (``HistoryRow.index``) -> the reader's prediction and its score
            (``tfwb.prediction.Score.text``), shown in a last column "your prediction" beside the
            verdicts (the Workbench's ``tfwb.ui.next_prediction``); None or empty: no column.

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
    columns = tuple(_columns(rows)) + ((("prediction", "your prediction"),) if predictions else ())

    def align(key: str) -> str:
        return "right" if key in _RIGHT_ALIGNED else "left"

    def nowrap(key: str) -> str:   # numbers never break across lines
        return ";white-space:nowrap" if key in _RIGHT_ALIGNED else ""

    def color(key: str, row: HistoryRow) -> str:
        kind = {"verdict": row.comparison, "prev_verdict": row.prev_comparison}.get(key)
        if key not in ("verdict", "prev_verdict") or not row.ok or kind in (None, BASELINE_TEXT):
            return ""
        return f";color:{verdict_color(kind)}"

    head = "".join(f'<th style="padding:1px 6px;border-bottom:1px solid #999;text-align:{align(key)}">'
                   f"{html.escape(title)}</th>" for key, title in columns)
    body = []
    for row in rows:
        cells = {**format_cells(row), "prediction": (predictions or {}).get(row.index, "")}
        status = str(row.status or "")
        classes = [f"tfwb-row-{html.escape(status)}"] + (["tfwb-row-baseline"] if row.is_baseline else [])
        styles = ([f"color:{FAILED_COLOR}"] if status != "ok" else []) + (
            ["font-weight:bold"] if row.is_baseline else [])
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


def monitor_line(result: RunResult, row: Optional[HistoryRow] = None) -> str:
    """The fit Monitor's closing line: the run's summary, the wall-clock rate when it differs from
    the median step's (its note of kind ``"steps"``), and, given the run's ``HistoryRow`` in a
    history, its verdict against the previous run.

    Example:
        >>> monitor_line(RunResult(config=RunConfig(), status="failed", error="ValueError: bad"))
        'images: failed: ValueError: bad'
    """
    wall = [n for n in result.notes_of("steps") if n.startswith("steps: over the ")]
    line = result.summary() + ("; " + wall[0][len("steps: "):] if wall else "")
    prev = prev_verdict(row) if row is not None else ""
    if prev:
        line += f"; vs #{row.previous}: {prev}"
    return line
