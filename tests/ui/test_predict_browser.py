"""The Workbench's prediction of its next run, in a real JupyterLab (issue 36, item 6).

Opens tests/ui/predict_smoke.ipynb (a Workbench on a runner without TensorFlow: 50 ms steps with
prefetch, 100 ms without; one run made in the kernel), runs it, and does what a reader does: ticks
prefetch, says "faster" in the Workbench's prediction box (``.tfwb-next-prediction``) and locks in
(the book's expectation appears), clicks Run, and reads the prediction and its score in the history
table's "your prediction" column, beside the verdict. No TensorFlow is imported: the kernel starts
in seconds. Screenshot: artifacts/ui/predict-scored.png.
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
]

NOTEBOOK = "tests/ui/predict_smoke.ipynb"
KERNEL_IDLE_TIMEOUT_MS = 180_000
UI_TIMEOUT_MS = 60_000


def test_the_reader_predicts_runs_and_sees_the_score_in_the_history(lab, browser, artifacts_dir, lab_js):
    from playwright.sync_api import expect

    context = browser.new_context(viewport={"width": 1400, "height": 1300})
    page = context.new_page()
    t0 = time.perf_counter()
    try:
        page.goto(lab.url(f"lab/tree/{NOTEBOOK}"))
        page.wait_for_function(lab_js.READY, arg=NOTEBOOK, timeout=KERNEL_IDLE_TIMEOUT_MS)
        page.evaluate(lab_js.RUN_ALL)
        wb = page.locator(".tfwb-workbench").last
        expect(wb).to_be_visible(timeout=KERNEL_IDLE_TIMEOUT_MS)
        history = wb.locator(".tfwb-history").first
        expect(history.locator("tbody tr")).to_have_count(1, timeout=UI_TIMEOUT_MS)
        wb.scroll_into_view_if_needed()

        toggle = wb.locator(".tfwb-knob-prefetch input[type=checkbox]").first
        toggle.click()
        expect(toggle).to_be_checked(timeout=UI_TIMEOUT_MS)
        box = wb.locator(".tfwb-next-prediction")
        box.locator(".tfwb-prediction-direction button", has_text=re.compile(r"^\s*faster\s*$")).click()
        box.locator(".tfwb-prediction-why input").fill("the next batch is read while the step runs")
        box.locator(".tfwb-prediction-lock").click()
        status = box.locator(".tfwb-prediction-status")
        expect(status).to_contain_text("Your prediction: faster", timeout=UI_TIMEOUT_MS)
        expect(status).to_contain_text("prefetch=True", timeout=UI_TIMEOUT_MS)     # the book's expectation

        wb.locator(".tfwb-run").click()
        expect(history.locator("tbody tr")).to_have_count(2, timeout=UI_TIMEOUT_MS)
        expect(history.locator("thead")).to_contain_text("your prediction", timeout=UI_TIMEOUT_MS)
        scored = history.locator("tbody tr").last
        expect(scored).to_contain_text(re.compile(r"faster, 1\.5-3x \(80 %\): right; 2\.\d\dx faster lies in the range"),
                                       timeout=UI_TIMEOUT_MS)
        expect(box.locator(".tfwb-next-prediction-last")).to_contain_text("Run 2", timeout=UI_TIMEOUT_MS)
        expect(box.locator(".tfwb-prediction-lock")).to_be_enabled()           # a fresh box for the next run
        assert page.evaluate(lab_js.ERRORS) == []
        expect(wb.locator(".tfwb-run")).to_have_text(re.compile(r"^\s*Run\s*$"), timeout=UI_TIMEOUT_MS)
        history.scroll_into_view_if_needed()
        page.screenshot(path=str(artifacts_dir / "predict-scored.png"))
        print(f"\n[ui] predict: scored in the history after {time.perf_counter() - t0:.1f} s", flush=True)
    finally:
        context.close()
        lab.shutdown_kernels()
