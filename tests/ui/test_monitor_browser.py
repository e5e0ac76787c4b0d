"""``tfwb.keras.Monitor`` in a real JupyterLab, driven through headless Chromium (issue 20, item 4).

Opens tests/ui/monitor_smoke.ipynb (a tiny ``model.fit`` of a few seconds with the
Monitor, its redraw period shortened), runs every cell, and checks in the page that the
Monitor's chart (an ipywidgets ``Image`` in a ``VBox`` with a status line) appears while
``fit`` runs and is redrawn in place: the image's ``src`` changes during the fit, one
chart stays (no pile of outputs), and at the end the status line is the run's summary.
Screenshots: artifacts/ui/monitor-during.png and monitor-after.png.

Opt-in, with test_monitor_frontends.py (Notebook 7, ipywidgets 7): ``TFWB_UI_FRONTENDS=1
.venv/bin/python -m pytest -m ui tests/ui/test_monitor_browser.py -s`` (the fixtures, a private
JupyterLab server and Debian's Chromium, are in conftest.py). The test command leaves it out: the
headless display test in tests/test_keras_monitor.py and chapter 08 under nbval run the same code
path on every run, and this one would add about 40 s of the 20-minute budget.
"""
from __future__ import annotations

import os
import re
import time

import pytest

CHROMIUM = "/usr/bin/chromium"
pytestmark = [
    pytest.mark.ui,
    pytest.mark.skipif(not os.path.exists(CHROMIUM),
                       reason=f"no browser at {CHROMIUM} (install Debian's chromium; tests/run_all.py does)"),
    pytest.mark.skipif(os.environ.get("TFWB_UI_FRONTENDS") != "1",
                       reason="the Monitor in the browser is opt-in (TFWB_UI_FRONTENDS=1): see the module docstring"),
]

NOTEBOOK = "tests/ui/monitor_smoke.ipynb"
KERNEL_IDLE_TIMEOUT_MS = 180_000
CHART_TIMEOUT_MS = 180_000              # kernel start, TF import and the first window on a busy machine
UI_TIMEOUT_MS = 60_000



def test_the_monitor_chart_appears_and_is_redrawn_during_fit(lab, browser, artifacts_dir, lab_js):
    from playwright.sync_api import expect

    context = browser.new_context(viewport={"width": 1400, "height": 1100})
    page = context.new_page()
    t0 = time.perf_counter()
    try:
        page.goto(lab.url(f"lab/tree/{NOTEBOOK}"))
        page.wait_for_function(lab_js.READY, arg=NOTEBOOK, timeout=KERNEL_IDLE_TIMEOUT_MS)
        page.evaluate(lab_js.RUN_ALL)
        chart = page.locator(".jp-OutputArea-output .widget-vbox img.widget-image")
        status = page.locator(".jp-OutputArea-output .widget-vbox .widget-html")
        expect(chart.first).to_have_attribute("src", re.compile(r"^blob:|^data:"), timeout=CHART_TIMEOUT_MS)
        first_src = chart.first.get_attribute("src")
        expect(status.first).to_contain_text(re.compile(r"fit: step \d+/160"), timeout=UI_TIMEOUT_MS)
        t_chart = time.perf_counter() - t0
        expect(chart.first).not_to_have_attribute("src", first_src, timeout=UI_TIMEOUT_MS)   # redrawn in place
        chart.first.scroll_into_view_if_needed()
        page.screenshot(path=str(artifacts_dir / "monitor-during.png"))
        done = page.locator(".jp-OutputArea-output", has_text="fit done: ok")
        expect(done).to_be_visible(timeout=CHART_TIMEOUT_MS)
        assert chart.count() == 1, "the chart must be redrawn in place, not appended"
        expect(status.first).to_contain_text(re.compile(r"browser: median step .* ms"), timeout=UI_TIMEOUT_MS)
        box = chart.first.bounding_box()
        assert box and box["width"] > 200 and box["height"] > 100, box
        assert page.evaluate(lab_js.ERRORS) == []
        chart.first.scroll_into_view_if_needed()
        page.screenshot(path=str(artifacts_dir / "monitor-after.png"))
        print(f"\n[ui] monitor: chart after {t_chart:.1f} s, fit done after {time.perf_counter() - t0:.1f} s",
              flush=True)
    finally:
        context.close()
        lab.shutdown_kernels()
