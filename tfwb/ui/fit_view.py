"""What ``model.fit`` shows while ``tfwb.keras.Monitor`` measures it: a live chart in a notebook, one
progress line on a terminal.

``make_view`` picks the view: ``ChartView`` (the live chart, ``tfwb.ui.charts.live_svg``, in an
Image widget, a status line, and a button for the Workbench's full run chart after the fit) in a
kernel or when asked, ``LineView`` (a line redrawn with ``\\r``) on a terminal, none elsewhere.
Both have ``draw(result, done, total, final)`` (a chart of the partial result) and ``progress(done,
total, final)`` (the text only), and a ``first_draw_s`` for the budget (``tfwb.ui.view_budget``).
Their closing line is ``tfwb.render.monitor_line``.

Importing this module imports no widgets: ``ChartView`` imports ipywidgets when it is made,
the SVG chart (and the charts' colours) when it first draws.
"""
from __future__ import annotations

import html
import importlib
import sys
from typing import Any, Optional

from tfwb.render import monitor_line
from tfwb.records import RunResult

__all__ = ["make_view", "LineView", "ChartView", "in_kernel", "import_widgets"]


def in_kernel() -> bool:
    """Whether this process runs a Jupyter kernel (IPython with a kernel)."""
    ip = sys.modules.get("IPython")
    try:
        return ip is not None and getattr(ip.get_ipython(), "kernel", None) is not None
    except Exception:  # noqa: BLE001
        return False


def import_widgets() -> None:
    """Import what the chart view needs (a first import of ipywidgets takes 0.1-0.5 s on 2 cores)."""
    for name in ("ipywidgets", "IPython.display"):
        try:
            importlib.import_module(name)
        except ImportError:
            pass


def make_view(charts: Any, stream: Any) -> Any:
    """The view for ``charts`` (``"auto"``, True, False) on ``stream`` (default: stderr, when a terminal),
    or None."""
    if charts is False:
        return None
    if charts is True or in_kernel():
        return ChartView()
    out = stream or sys.stderr
    return LineView(out) if stream is not None or getattr(out, "isatty", lambda: False)() else None


class LineView:
    """One progress line on a terminal, redrawn with ``\\r``."""

    #: A line costs about a millisecond (building the partial result included).
    first_draw_s = 0.01

    def __init__(self, stream: Any) -> None:
        self.stream = stream

    def draw(self, r: RunResult, done: int, total: Optional[int], final: bool = False) -> None:
        m = r.median_step_s
        text = monitor_line(r) if final else (self._head(r.config.label or r.config.workload, done, total)
                                           + (f", median step {m * 1e3:.2f} ms" if m else ""))
        self._write(text, final)

    def progress(self, done: int, total: Optional[int], final: Optional[RunResult] = None) -> None:
        if final is not None:
            self._write(monitor_line(final), True)
        else:
            self._write(self._head("fit", done, total), False)

    @staticmethod
    def _head(name: str, done: int, total: Optional[int]) -> str:
        return f"{name}: " + (f"step {done}/{total}" if total else f"step {done}")

    def _write(self, text: str, final: bool) -> None:
        self.stream.write("\r" + text + ("\n" if final else ""))
        self.stream.flush()


class ChartView:
    """The live chart (``tfwb.ui.charts.live_svg``, an SVG the browser draws) in an Image widget, a status
    line, and a button that draws the Workbench's full run chart (``tfwb.ui.charts.run_chart_png``) after
    the fit, on request: a full chart takes seconds on 2 busy cores, far over the view's budget inside a fit."""

    #: An SVG of a few hundred points and its widget update: about a millisecond.
    first_draw_s = 0.01

    def __init__(self) -> None:
        import ipywidgets as W  # lazy: only a notebook needs widgets
        from IPython.display import display

        self.image = W.Image(format="svg+xml")
        self.status = W.HTML("fit: starting")
        self.full = W.Button(description="full chart", disabled=True,
                             tooltip="draw the Workbench's run chart of this fit (every step; takes a while)")
        self.full.on_click(self._draw_full)
        self.box = W.VBox([self.status, self.image, self.full])
        self.result: Optional[RunResult] = None
        display(self.box)

    def draw(self, r: RunResult, done: int, total: Optional[int], final: bool = False) -> None:
        from tfwb.ui.charts.live_svg import live_svg  # lazy: the charts' colours import matplotlib

        self.image.format = "svg+xml"
        self.image.value = live_svg(r)
        self.progress(done, total, r if final else None)

    def progress(self, done: int, total: Optional[int], final: Optional[RunResult] = None) -> None:
        if final is not None:
            self.result = final
            self.status.value = html.escape(monitor_line(final))
            self.full.disabled = False
        else:
            self.status.value = f"fit: step {done}" + (f"/{total}" if total else "")

    def _draw_full(self, _button: Any = None) -> None:
        from tfwb.ui.charts import run_chart_png

        if self.result is not None:
            png = run_chart_png(self.result)
            self.image.format = "png"
            self.image.value = png
