"""The fit's live chart as SVG text: time per step of each call beside utilization, without matplotlib.

``live_svg`` writes the chart ``tfwb.ui.fit_view.ChartView`` shows during ``model.fit`` (an SVG the
browser draws: about a millisecond, where a light matplotlib figure takes 0.1-0.3 s on 2 busy cores
and the full run chart, ``tfwb.ui.charts.step_times.run_chart_png``, seconds); ``thin`` keeps a curve
to ``LIVE_POINTS`` points. The colours are the other charts' (``tfwb.ui.charts.common``,
``tfwb.ui.charts.utilization``).
"""
from __future__ import annotations

import html
import math
import os
from typing import List, Optional, Sequence, Tuple

from tfwb import stats
from tfwb.records import RunResult
from tfwb.ui.charts.common import COMPUTE_COLOR, MEDIAN_COLOR, MUTED_COLOR, WARMUP_COLOR
from tfwb.ui.charts.utilization import GPU_COLORS, OTHER_CPU_COLOR

__all__ = ["live_svg", "thin", "LIVE_POINTS", "SVG_W", "SVG_H"]

#: A live chart's curve keeps at most this many points (longer ones are averaged in buckets).
LIVE_POINTS = 400
#: The live chart's size (px) and its two panels' left and right edges.
SVG_W, SVG_H = 760, 190
_STEPS_X, _UTIL_X, _TOP, _BOTTOM = (48, 430), (490, 745), 26, 160


def live_svg(r: RunResult) -> bytes:
    """The live view's chart of ``r`` as SVG: time per step of each call (warm-up grey, measured
    blue, their median dashed) beside CPU (and GPU) utilization on the run clock, at most
    ``LIVE_POINTS`` points a curve. Built as text, without matplotlib: about a millisecond, against
    0.1-0.3 s for a light matplotlib figure and 1.2-3 s for the full run chart on 2 busy cores
    (benchmarks/view_cost.py).

    Example:
        >>> live_svg(result)[:4]
        b'<svg'
    """
    svg = _Svg()
    _steps_panel(svg, r)
    _utilization_panel(svg, r)
    return svg.done()


class _Svg:
    """An SVG document written as text: the live chart's few shapes."""

    def __init__(self) -> None:
        self.out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{SVG_W}" height="{SVG_H}" '
                    f'font-family="sans-serif" font-size="11"><rect width="100%" height="100%" fill="white"/>']

    def text(self, x: float, y: float, s: str, anchor: str = "start", color: str = "black", size: int = 11) -> None:
        self.out.append(f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}" fill="{color}" font-size="{size}">'
                        f'{html.escape(s)}</text>')

    def line(self, xs: Sequence[float], ys: Sequence[float], color: str, dash: str = "", width: float = 1.3) -> None:
        runs: List[List[str]] = [[]]
        for x, y in zip(xs, ys):
            if y == y:                                    # a NaN ends a run of points
                runs[-1].append(f"{x:.1f},{y:.1f}")
            elif runs[-1]:
                runs.append([])
        for pts in runs:
            if len(pts) > 1:
                self.out.append(f'<polyline points="{" ".join(pts)}" fill="none" stroke="{color}" '
                                f'stroke-width="{width}"' + (f' stroke-dasharray="{dash}"' if dash else "") + "/>")

    def frame(self, x0: float, x1: float) -> None:
        self.out.append(f'<rect x="{x0}" y="{_TOP}" width="{x1 - x0}" height="{_BOTTOM - _TOP}" fill="none" '
                        f'stroke="#cccccc"/>')

    def done(self) -> bytes:
        self.out.append("</svg>")
        return "".join(self.out).encode()


def _steps_panel(svg: _Svg, r: RunResult) -> None:
    """Left: time per step of each call."""
    out, text, line, frame = svg.out, svg.text, svg.line, svg.frame
    x0, x1 = _STEPS_X
    frame(x0, x1)
    warm = [t * 1e3 for t in r.warmup_times_s]
    meas = [t * 1e3 for t in r.step_times_s]
    name = r.config.label or r.config.workload
    reference = meas or warm
    if reference:
        top = max(reference)
        top = min(top * 1.12, 3 * stats.quantile(reference, 0.95)) if top > 0 else 1.0
        n = len(warm) + len(meas)
        px = (x1 - x0) / max(n, 1)

        def y_of(v: float) -> float:
            return _BOTTOM - (_BOTTOM - _TOP) * min(v, top) / top

        wx, wy = thin([x0 + (i + 0.5) * px for i in range(len(warm))], [y_of(v) for v in warm])
        mx, my = thin([x0 + (len(warm) + i + 0.5) * px for i in range(len(meas))], [y_of(v) for v in meas])
        if len(warm) == 1:
            out.append(f'<circle cx="{wx[0]:.1f}" cy="{wy[0]:.1f}" r="2" fill="{WARMUP_COLOR}"/>')
        line(wx, wy, WARMUP_COLOR)
        line(mx, my, COMPUTE_COLOR)
        divider = x0 + len(warm) * px
        if warm:
            out.append(f'<line x1="{divider:.1f}" x2="{divider:.1f}" y1="{_TOP}" y2="{_BOTTOM}" '
                       f'stroke="{MUTED_COLOR}" stroke-dasharray="3 3"/>')
            text(divider - 3, _BOTTOM + 13, "warm-up", "end", MUTED_COLOR, 10)
        if meas:
            med = stats.median(meas)
            y = y_of(med)
            out.append(f'<line x1="{divider:.1f}" x2="{x1}" y1="{y:.1f}" y2="{y:.1f}" '
                       f'stroke="{MEDIAN_COLOR}" stroke-dasharray="4 3"/>')
            text(x1 - 4, y - 4, f"median {med:,.2f} ms", "end", MEDIAN_COLOR, 10)
            text(divider + 3, _BOTTOM + 13, "1", "start", MUTED_COLOR, 10)
            text(x1, _BOTTOM + 13, f"{len(meas)}", "end", MUTED_COLOR, 10)
        text(x0 - 4, _TOP + 4, f"{top:,.0f}" if top >= 10 else f"{top:.2g}", "end", MUTED_COLOR, 10)
        text(x0 - 4, _BOTTOM, "0", "end", MUTED_COLOR, 10)
    title = f"{name}: ms per step of each call" + (f" ({len(meas)} measured)" if meas else "")
    text(x0, _TOP - 8, title, size=12)
    text((x0 + x1) / 2, _BOTTOM + 26, "calls of the train function, in order", "middle", MUTED_COLOR, 10)


def _utilization_panel(svg: _Svg, r: RunResult) -> None:
    """Right: utilization on the run clock."""
    text, line, frame = svg.text, svg.line, svg.frame
    x0, x1 = _UTIL_X
    frame(x0, x1)
    samples = r.samples
    cores = (r.fingerprint or {}).get("cpu_count") or os.cpu_count() or 1
    n_gpus = max((len(s.gpu_util_pct) for s in samples), default=0)
    if samples:
        t0, t1 = samples[0].t_s, max(samples[-1].t_s, samples[0].t_s + 1e-3)
        xs = [x0 + (x1 - x0) * (s.t_s - t0) / (t1 - t0) for s in samples]

        def y_pct(v: Optional[float]) -> float:
            return math.nan if v is None or v != v else _BOTTOM - (_BOTTOM - _TOP) * min(max(v, 0.0), 100.0) / 100

        proc = [s.cpu_process_pct / cores if s.cpu_process_pct is not None else None for s in samples]
        other = [max(0.0, s.cpu_system_pct - p) if s.cpu_system_pct is not None and p is not None else None
                 for s, p in zip(samples, proc)]
        line(*thin(xs, [y_pct(v) for v in other]), OTHER_CPU_COLOR, "4 3")
        line(*thin(xs, [y_pct(v) for v in proc]), COMPUTE_COLOR)
        for g in range(n_gpus):
            util = [s.gpu_util_pct[g] if g < len(s.gpu_util_pct) else None for s in samples]
            line(*thin(xs, [y_pct(v) for v in util]), GPU_COLORS[g % len(GPU_COLORS)])
        text(x0, _BOTTOM + 13, f"{t0:.{0 if t1 >= 10 else 1}f} s", "start", MUTED_COLOR, 10)
        text(x1, _BOTTOM + 13, f"{t1:.{0 if t1 >= 10 else 1}f} s", "end", MUTED_COLOR, 10)
    text(x0 - 4, _TOP + 4, "100", "end", MUTED_COLOR, 10)
    text(x0 - 4, _BOTTOM, "0", "end", MUTED_COLOR, 10)
    text(x0, _TOP - 8, f"% CPU of {cores} cores" + (", GPU busy" if n_gpus else ", no GPU"), size=12)
    text((x0 + x1) / 2 - 4, _BOTTOM + 26, "this process (\u2014)", "end", COMPUTE_COLOR, 10)
    text((x0 + x1) / 2 + 4, _BOTTOM + 26, "other programs (- -)", "start", OTHER_CPU_COLOR, 10)


def thin(xs: Sequence[float], ys: Sequence[float], most: int = LIVE_POINTS) -> Tuple[List[float], List[float]]:
    """At most ``most`` points: longer series averaged in buckets of consecutive points.

    Example:
        >>> thin([1, 2, 3, 4], [10, 20, 30, 40], most=2)
        ([1.5, 3.5], [15.0, 35.0])
    """
    n = len(ys)
    if n <= most:
        return list(xs), list(ys)
    k = -(-n // most)
    bx, by = [], []
    for i in range(0, n, k):
        cx, cy = xs[i:i + k], ys[i:i + k]
        bx.append(sum(cx) / len(cx))
        by.append(sum(cy) / len(cy))
    return bx, by
