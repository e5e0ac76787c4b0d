"""Run history as rows and tables: what changed, how fast, is it significant, what limits it.

Owns the history table that the Workbench shows and the command line prints:
``history_rows`` turns RunResults into plain dict rows, ``format_table`` renders
them as fixed-width text and ``html_table`` as escaped HTML. Pure: no TensorFlow,
no matplotlib, no ipywidgets, no IPython; the same inputs always give the same
output, so a notebook cell showing a table of fixed results can be checked by nbval.
"""
from __future__ import annotations

import html
from typing import Any, Dict, List, Optional, Sequence, Tuple

from . import stats
from .config import RunConfig
from .diagnosis import diagnose
from .records import RunResult

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
    ("verdict", "vs baseline"),
    ("diagnosis", "diagnosis"),
)
_RIGHT_ALIGNED = frozenset({"index", "median_ms", "iqr_ms", "examples_per_s", "input_wait_pct"})

BASELINE_TEXT = "baseline"
EMPTY_TEXT = "No runs yet."
FAILED_COLOR = "#c00"


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


def _size(result: RunResult) -> Optional[str]:
    """The workload size a run used ("small"/"full"), from its fingerprint, if recorded."""
    return (result.fingerprint or {}).get("size")


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
                 baseline_config: Optional[RunConfig] = None) -> List[Dict[str, Any]]:
    """One plain-data row per run, compared with a baseline run.

    Args:
        results: runs in the order they ran, failures included.
        baseline: the run the others are compared with; default
            ``pick_baseline(results, baseline_config)``.
        baseline_config: the configuration the ``changes`` column is relative to;
            default the baseline run's configuration (or the first run's).

    Returns:
        A list of dicts with keys ``index`` (1-based position), ``label``,
        ``status``, ``changes`` (``"prefetch=True, cache=True"`` or ``"baseline"``),
        ``median_ms``, ``q1_ms``, ``q3_ms``, ``iqr_ms`` (q3 - q1),
        ``examples_per_s``, ``input_wait_pct`` (0-100), ``speedup`` (baseline
        median / this median), ``verdict`` (``"baseline"``, ``"1.42x faster"``,
        ``"1.03x: no significant difference"``, or ``""``), ``is_baseline``,
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
    rows = []
    for i, result in enumerate(results, 1):
        rows.append(_row(i, result, baseline, baseline_config))
    return rows


def _row(index: int, result: RunResult, baseline: Optional[RunResult],
         baseline_config: Optional[RunConfig]) -> Dict[str, Any]:
    spread = result.spread
    wait = result.input_wait_fraction
    is_baseline = baseline is not None and result is baseline
    speedup, verdict = None, ""
    if is_baseline:
        speedup, verdict = 1.0, BASELINE_TEXT
    elif baseline is not None and result.ok and None not in (_size(baseline), _size(result)) \
            and _size(baseline) != _size(result):
        verdict = f"{_size(result)} size: not compared"
    elif baseline is not None and result.ok:
        try:
            comparison = stats.compare(baseline.step_times_s, result.step_times_s)
        except ValueError:
            comparison = None
        if comparison is not None:
            speedup, verdict = comparison.speedup, comparison.text()
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
        "speedup": speedup,
        "verdict": verdict,
        "is_baseline": is_baseline,
        "bottleneck": diagnose(result).headline if ok else "",
        "error": None if result.status == "ok" else (result.error or result.status),
    }


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
    if error and row.get("status") != "ok":
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
        "verdict": row.get("verdict") or "",
        "diagnosis": diagnosis,
    }


def _columns(rows: Sequence[Dict[str, Any]]) -> Tuple[Tuple[str, str], ...]:
    """COLUMNS, without ``label`` when no run has one."""
    if any(row.get("label") for row in rows):
        return COLUMNS
    return tuple(c for c in COLUMNS if c[0] != "label")


def format_table(rows: Sequence[Dict[str, Any]]) -> str:
    """Fixed-width text table of ``history_rows`` output, for print and the CLI.

    Args:
        rows: ``history_rows(...)``.

    Returns:
        Header, a dashed rule and one line per row; columns two spaces apart,
        numbers right-aligned, no trailing spaces. The ``label`` column appears only
        when some run has a label. ``"No runs yet."`` for no rows.

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


def html_table(rows: Sequence[Dict[str, Any]]) -> str:
    """Escaped HTML table of ``history_rows`` output, for the Workbench and notebooks.

    Args:
        rows: ``history_rows(...)``.

    Returns:
        ``<table class="tfwb-history">`` with one ``<tr>`` per row; each row has
        the class ``tfwb-row-<status>`` (plus ``tfwb-row-baseline`` for the
        baseline), rows that did not finish are red, numbers are right-aligned. For
        no rows, ``<div class="tfwb-history tfwb-empty">No runs yet.</div>``.

    Example:
        >>> html_table([])
        '<div class="tfwb-history tfwb-empty">No runs yet.</div>'
    """
    if not rows:
        return f'<div class="tfwb-history tfwb-empty">{EMPTY_TEXT}</div>'
    columns = _columns(rows)

    def align(key: str) -> str:
        return "right" if key in _RIGHT_ALIGNED else "left"

    def nowrap(key: str) -> str:   # numbers and verdicts never break across lines
        return ";white-space:nowrap" if key in _RIGHT_ALIGNED or key == "verdict" else ""

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
        tds = "".join(f'<td style="padding:1px 6px;text-align:{align(key)}{nowrap(key)}">'
                      f"{html.escape(cells[key])}</td>" for key, _ in columns)
        body.append(f'<tr class="{" ".join(classes)}"{style}>{tds}</tr>')
    return ('<table class="tfwb-history" style="border-collapse:collapse;font-size:12px">'
            f"<thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>")
