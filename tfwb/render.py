"""How the way back is said: tables and sentences rendered from ``tfwb.analysis`` rows.

This module only renders; it decides nothing. ``tfwb.analysis.rows.history_rows`` makes the
typed rows (``HistoryRow``: numbers, ``Versus`` comparisons, the diagnosis); here they become
words: ``verdict`` / ``prev_verdict`` (the sentence of a status line: the ratio with its direction,
"per example" with both batches when the batches differ, the interleaved verdict when the pair was
decided so: ``tfwb.verdict_words``), ``changes``, ``row_loss_note``, ``bound_note`` and ``headline``
(the diagnosis headline). The history table, ``format_table`` (fixed-width text, for print and the
CLI) and ``html_table`` (escaped HTML, for the Workbench and notebooks), holds one line per run of
short cells (``format_cells``: ``"4.77x faster"``, ``"cannot tell (busy 16 %)"``; each cut to
``CELL_BUDGET``, its whole text in the HTML tooltip, ``cell_titles``), with ``table_notes`` under it:
the rule and its noise band and the explanation of each phrase shown, once, then the rows' notes.
Beside them: ``noise_note`` (the comparison chart's caption), ``suggestion_text`` (a suggestion
with its bound), ``short_changes`` (a run named by its knobs, for chart labels), ``simple_html_table``
(any table in the history table's style), ``fmt`` and ``utilization_lines`` (figures that may be
missing), and ``monitor_line`` (the fit Monitor's closing line). The colours of verdicts and
failures are defined here, once.

Pure: no TensorFlow, no matplotlib, no ipywidgets, no IPython; the same rows always give the
same text, so a notebook cell showing a table of fixed results can be checked by nbval.
"""
from __future__ import annotations

import html
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from tfwb import stats
from tfwb.analysis.diagnosis import Bound, score_bound
from tfwb.analysis.pairs import final_loss_gap
from tfwb.analysis.rows import HistoryRow
from tfwb.config import RunConfig
from tfwb.records import RunResult, percent
from tfwb.verdict_words import (INTERLEAVED_TEXT, PHRASE_NOTES, comparison_phrase, previous_name,  # noqa: F401
                                rounds_phrase, verdict_text, versus_kind, versus_phrase, versus_text)

#: ``(row key, header)`` for every table column, in order. ``diagnosis`` shows the first suggestion
#: (or the bottleneck) for finished runs and how the others ended (failed, interrupted). The notes of a
#: row (its suggestion's bound scored, its final-loss gap) stand under the table, not in a column.
COLUMNS: Tuple[Tuple[str, str], ...] = (
    ("index", "#"),
    ("label", "label"),
    ("changes", "changes vs baseline"),
    ("median_ms", "median ms"),
    ("iqr_ms", "IQR ms"),
    ("examples_per_s", "examples/s"),
    ("input_wait_pct", "input wait"),
    ("mfu", "MFU"),
    ("verdict", "vs baseline"),
    ("prev_verdict", "vs previous run"),
    ("diagnosis", "diagnosis"),
)
_RIGHT_ALIGNED = frozenset({"index", "median_ms", "iqr_ms", "examples_per_s", "input_wait_pct", "mfu"})
#: The most characters a cell of each column shows: a longer text is cut to it with an ellipsis (its
#: whole text is the HTML cell's tooltip); numbers (``_RIGHT_ALIGNED``) are never cut, their budget is
#: what they take up to 1 s a step. With every column shown at its budget, the table fits the output
#: area of a 1400-px window (``tests/test_report.py`` measures it; a header may wrap, a row never).
CELL_BUDGET: Dict[str, int] = {
    "index": 3, "label": 8, "changes": 30, "median_ms": 7, "iqr_ms": 11, "examples_per_s": 9,
    "input_wait_pct": 4, "mfu": 11, "verdict": 26, "prev_verdict": 30, "diagnosis": 26, "prediction": 60,
}
#: What ends a cut cell.
CUT = "\u2026"

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


def verdict(row: HistoryRow) -> str:
    """The row's verdict against the baseline: ``"baseline"``, ``"1.42x faster"``,
    ``"1.03x slower: no significant difference"``, ``"per example: 1.21x faster (batch 128 vs 64)"``,
    ``"2.00x faster, interleaved (97 % CI ...)"``, ``"full size: not compared"`` or ``""``."""
    if row.is_baseline:
        return BASELINE_TEXT
    return versus_text(row.versus_baseline, "the baseline")


def prev_verdict(row: HistoryRow) -> str:
    """The row's verdict against the previous run (``""`` without one); it names the baseline as such."""
    v = row.versus_previous
    if v is None:
        return ""
    return versus_text(v, previous_name(v))


def verdict_cell(row: HistoryRow) -> str:
    """The ``vs baseline`` cell: ``verdict``'s short phrase (``versus_phrase``)."""
    if row.is_baseline:
        return BASELINE_TEXT
    return versus_phrase(row.versus_baseline)


def prev_cell(row: HistoryRow) -> str:
    """The ``vs previous run`` cell: ``"#2: 2.02x slower"``; ``""`` without a comparison."""
    v = row.versus_previous
    phrase = versus_phrase(v)
    return f"#{v.reference}: {phrase}" if v is not None and phrase else ""


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



def trial_summary(number: int, trial: Any) -> str:
    """A tune trial folded into one line (its details open below it in the tune log):
    ``"trial 2: interleave=True: 1.11x slower, reverted"``.

    Args:
        number: the trial's number (1-based).
        trial: a ``tfwb.search.tune_result.TuneTrial`` (read by its ``change``, ``speedup``, ``decision``).

    Example:
        >>> from types import SimpleNamespace
        >>> trial_summary(2, SimpleNamespace(change="interleave=True", speedup=0.9, decision="reverted"))
        'trial 2: interleave=True: 1.11x slower, reverted'
    """
    speedup = trial.speedup
    measured = stats.ratio_text(speedup) + ", " if speedup is not None and speedup > 0 else ""
    return f"trial {number}: {trial.change}: {measured}{trial.decision}"


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
        return "above peak"         # above the measured peak: RunResult.mfu_text (its tooltip) says why
    return MISSING_TEXT if mfu is None else percent(mfu)


def cut(text: str, budget: int) -> str:
    """``text``, cut to ``budget`` characters with an ellipsis when longer.

    Example:
        >>> cut("prefetch, cache, interleave", 12)
        'prefetch, c\u2026'
    """
    return text if len(text) <= budget else text[:max(budget - 1, 0)] + CUT


def _budget(key: str, text: str) -> int:
    """The characters a cell of column ``key`` may show: a number all of them."""
    return len(text) if key in _RIGHT_ALIGNED else CELL_BUDGET.get(key, len(text))


def changes_cell(row: HistoryRow) -> str:
    """The ``changes vs baseline`` cell: ``changes`` (the knobs as keyword arguments, as the Apply button
    and ``RunConfig`` write them), or, where that is longer than its budget, the knobs as ``short_changes``
    names them (``"prefetch, cache, interleave"``), so the knob that sets a run apart stays in sight."""
    text = changes(row)
    if len(text) <= CELL_BUDGET["changes"]:
        return text
    return ", ".join(name if value is True else f"no {name}" if value is False else f"{name}={value}"
                     for name, value in row.changes.items())


def diagnosis_cell(row: HistoryRow) -> str:
    """The ``diagnosis`` cell: the first suggestion (``"try cache=True"``), else the bottleneck verdict, for
    a finished run; how the others ended (``"failed: <error>"``, the user's own stop)."""
    error = row.error
    if error and row.status == "interrupted":
        return str(error)            # the user's own stop and where it happened: no error
    if error and row.status != "ok":
        return f"{row.status}: {error}"
    d = row.diagnosis if row.ok else None
    if d is None:
        return ""
    if d.suggestions:
        knob, value, _ = d.suggestions[0]
        return f"try {knob}={value!r}"
    return d.verdict


def _diagnosis_title(row: HistoryRow) -> str:
    d = row.diagnosis if row.ok else None
    if d is None or not d.suggestions:
        return headline(row) or diagnosis_cell(row)
    first = d.suggestions[0]
    return f"{d.headline}. Next: {suggestion_text(first, d.bound_for(first[0]))}"


def format_cells(row: HistoryRow) -> Dict[str, str]:
    """The text of each table cell of one row, keyed like ``COLUMNS``, before ``CELL_BUDGET`` cuts it
    (``status``, ``bound_note`` and ``loss_note`` too: the row's notes under the table).

    Example:
        >>> from tfwb.analysis.rows import history_rows
        >>> format_cells(history_rows([RunResult(config=RunConfig(), step_times_s=(0.012345,) * 4)])[0])["median_ms"]
        '12.3'
    """
    def num(value: Optional[float], spec: str) -> str:
        return "" if value is None else format(value, spec)

    q1, q3 = row.q1_ms, row.q3_ms
    return {
        "index": str(row.index),
        "label": row.label or "",
        "status": row.status or "",
        "changes": changes_cell(row),
        "median_ms": num(row.median_ms, ".1f"),
        "iqr_ms": "" if q1 is None or q3 is None else f"{q1:.1f}-{q3:.1f}",
        "examples_per_s": num(row.examples_per_s, ",.0f"),
        "input_wait_pct": "" if row.input_wait_pct is None else f"{row.input_wait_pct:.0f}%",
        "mfu": mfu_cell(row),
        "verdict": verdict_cell(row),
        "prev_verdict": prev_cell(row),
        "bound_note": bound_note(row),
        "loss_note": row_loss_note(row),
        "diagnosis": diagnosis_cell(row),
    }


def cell_titles(row: HistoryRow) -> Dict[str, str]:
    """The whole text behind each cell (its HTML tooltip) where it says more than the cell: the verdicts'
    sentences, the knobs as keyword arguments, the diagnosis headline with its suggestion's bound."""
    prev = prev_verdict(row)
    if prev:
        v = row.versus_previous
        parts = [f"vs {previous_name(v)}: {prev}", f"changed: {prev_changes(row)}", row_loss_note(row),
                 bound_note(row)]
        prev = "; ".join(p for p in parts if p)
    against = verdict(row)
    return {"changes": changes(row) if changes_cell(row) != changes(row) else "",
            "verdict": against if against not in ("", BASELINE_TEXT) else "",
            "prev_verdict": prev, "diagnosis": _diagnosis_title(row),
            "mfu": mfu_text(row) if row.mfu is not None or row.flops_uncounted else ""}


def _columns(rows: Sequence[HistoryRow]) -> Tuple[Tuple[str, str], ...]:
    """COLUMNS, without ``label`` when no run has one, without ``vs previous run`` when no run has a previous
    one to compare with, and without ``MFU`` when no run counted its FLOPs (records from before FLOPs were
    counted)."""
    drop = set()
    if not any(row.label for row in rows):
        drop.add("label")
    if not any(prev_cell(row) for row in rows):
        drop.add("prev_verdict")
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


def _rule_note(rows: Sequence[HistoryRow]) -> str:
    used = next((row for row in rows
                 if row.comparison not in (None, BASELINE_TEXT) or row.prev_comparison), None)
    if used is None:
        return ""
    return (f"Run-to-run noise: {noise_text(used)}. Two runs differ (\"faster\", \"slower\") only when their "
            "IQRs do not overlap and their medians differ by more than that; otherwise: no difference.")


def table_notes(rows: Sequence[HistoryRow]) -> List[str]:
    """What stands under the table, once: the rule and its noise band, the explanation of each phrase the
    verdict cells use (only those shown), a cut cell's hint, then each row's notes (its suggestion's bound
    scored, its final-loss gap, a failure's whole error when its cell is cut).

    Example:
        >>> table_notes([])
        []
    """
    notes = [_rule_note(rows)]
    cells = [format_cells(row) for row in rows]
    verdicts = " ".join(c["verdict"] + " " + c["prev_verdict"] for c in cells)
    notes += [text for mark, text in PHRASE_NOTES if mark in verdicts]
    columns = _columns(rows)
    if any(len(c[key]) > _budget(key, c[key]) for c in cells for key, _ in columns):
        notes.append(f"{CUT} a cell cut to fit: hover it for its whole text.")
    for row, c in zip(rows, cells):
        if c["bound_note"]:
            notes.append(f"#{row.index} applied #{row.previous}'s suggestion: {c['bound_note']}")
        if c["loss_note"]:
            notes.append(f"#{row.index}: {c['loss_note']}")
        if not row.ok and len(c["diagnosis"]) > CELL_BUDGET["diagnosis"]:
            notes.append(f"#{row.index} {c['diagnosis']}")
    return [n for n in notes if n]


def format_table(rows: Sequence[HistoryRow]) -> str:
    """Fixed-width text table of ``history_rows`` output, for print and the CLI.

    Args:
        rows: ``history_rows(...)``.

    Returns:
        Header, a dashed rule and one line per row (cells cut to ``CELL_BUDGET``); columns two spaces
        apart, numbers right-aligned, no trailing spaces; then a blank line and ``table_notes``. The
        ``label`` column appears only when some run has a label, ``vs previous run`` only when some run
        has one. ``"No runs yet."`` for no rows.

    Example:
        >>> format_table([])
        'No runs yet.'
    """
    if not rows:
        return EMPTY_TEXT
    columns = _columns(rows)
    cells = [{key: cut(text, _budget(key, text)) for key, text in format_cells(row).items()} for row in rows]
    widths = {key: max(len(header), *(len(c[key]) for c in cells)) for key, header in columns}

    def line(values: Dict[str, str]) -> str:
        parts = []
        for key, _ in columns:
            text = values[key]
            parts.append(text.rjust(widths[key]) if key in _RIGHT_ALIGNED else text.ljust(widths[key]))
        return "  ".join(parts).rstrip()

    header = line({key: title for key, title in columns})
    rule = "  ".join("-" * widths[key] for key, _ in columns)
    notes = table_notes(rows)
    return "\n".join([header, rule] + [line(c) for c in cells] + ([""] + notes if notes else []))


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


def _html_cell(key: str, text: str, title: str, style: str) -> str:
    shown = cut(text, _budget(key, text))
    tip = title or (text if shown != text else "")
    attr = f' title="{html.escape(tip, quote=True)}"' if tip and tip != shown else ""
    return f'<td style="{style}"{attr}>{html.escape(shown)}</td>'


def html_table(rows: Sequence[HistoryRow], predictions: Optional[Mapping[int, str]] = None) -> str:
    """Escaped HTML table of ``history_rows`` output, for the Workbench and notebooks.

    Args:
        rows: ``history_rows(...)``.
        predictions: run number (``HistoryRow.index``) -> the reader's prediction and its score
            (``tfwb.prediction.Score.text``), shown in a last column "your prediction" beside the
            verdicts (the Workbench's ``tfwb.ui.next_prediction``); None or empty: no column.

    Returns:
        ``<table class="tfwb-history">``, in a ``<div>`` that scrolls sideways when the table is
        wider than the output area, with one ``<tr>`` per row, one line each (``white-space:nowrap``,
        cells cut to ``CELL_BUDGET``, the whole text in a cell's ``title`` tooltip); each row has
        the class ``tfwb-row-<status>`` (plus ``tfwb-row-baseline`` for the
        baseline), rows that did not finish are red (``FAILED_COLOR``), numbers are
        right-aligned, each verdict is a short phrase coloured by its own comparison (faster green,
        slower orange, no significant difference grey) and a caption under the
        table holds ``table_notes``. For no rows,
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

    def color(key: str, row: HistoryRow) -> str:
        if key not in ("verdict", "prev_verdict") or not row.ok or (key == "verdict" and row.is_baseline):
            return ""
        kind = versus_kind(row.versus_baseline if key == "verdict" else row.versus_previous)
        return f";color:{verdict_color(kind)}" if kind is not None else ""

    head = "".join(f'<th style="padding:1px 3px;border-bottom:1px solid #999;text-align:{align(key)};'
                   f'vertical-align:bottom">{html.escape(title)}</th>' for key, title in columns)
    body = []
    for row in rows:
        cells = {**format_cells(row), "prediction": (predictions or {}).get(row.index, "")}
        titles = cell_titles(row)
        status = str(row.status or "")
        classes = [f"tfwb-row-{html.escape(status)}"] + (["tfwb-row-baseline"] if row.is_baseline else [])
        styles = ([f"color:{FAILED_COLOR}"] if status != "ok" else []) + (
            ["font-weight:bold"] if row.is_baseline else [])
        style = f' style="{";".join(styles)}"' if styles else ""
        tds = "".join(_html_cell(key, cells[key], titles.get(key, ""),
                                 f"padding:1px 3px;text-align:{align(key)};white-space:nowrap{color(key, row)}")
                      for key, _ in columns)
        body.append(f'<tr class="{" ".join(classes)}"{style}>{tds}</tr>')
    notes = table_notes(rows)
    caption = (f'<caption style="caption-side:bottom;text-align:left;padding:2px 6px;color:#555;'
               f'font-size:11px">{"<br>".join(html.escape(n) for n in notes)}</caption>' if notes else "")
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
