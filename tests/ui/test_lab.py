"""The Workbench in a real JupyterLab, driven through headless Chromium.

For chapter 00 and one more notebook (chapter 01 once it exists, else the
committed smoke notebook beside this file): open it in Lab, run every cell,
wait until the kernel is idle and every code cell has run, and check that no cell
ended in an error (with any ``tfwb-runs/`` history beside the notebook moved
aside meanwhile, so the Workbench starts empty as for a new reader). Then on
the Workbench: flip the prefetch toggle and click Run
(the run chart's image changes, the history gains a row), and pick the ``tpu``
strategy on a machine without one (the status turns red and names the TPU, and
no earlier history row disappears).

Screenshots of each step go to artifacts/ui/<notebook>-<step>.png. Nothing is
written back to the notebooks: autosave is off, and the test fails if the page asks to
save.
Run it in its own pytest process (``pytest -m ui tests/ui -s`` shows timings).
"""
from __future__ import annotations

import contextlib
import os
import re
import shutil
import time
import urllib.parse
from pathlib import Path

import pytest

CHROMIUM = "/usr/bin/chromium"
ROOT = Path(__file__).resolve().parents[2]

pytestmark = [
    pytest.mark.ui,
    pytest.mark.skipif(not os.path.exists(CHROMIUM),
                       reason=f"no browser at {CHROMIUM} (install Debian's chromium; tests/run_all.py does)"),
]

CHAPTER_00 = "notebooks/00_measuring.ipynb"
CHAPTER_01 = "notebooks/01_input_pipeline.ipynb"
SMOKE = "tests/ui/workbench_smoke.ipynb"

KERNEL_IDLE_TIMEOUT_MS = 180_000       # kernel start on a busy 2-core machine
RUN_ALL_TIMEOUT_MS = 900_000           # a whole chapter in small mode, TF import included
RUN_TIMEOUT_MS = 300_000               # one Workbench run (data generation on first use)
UI_TIMEOUT_MS = 30_000                 # a widget reacting to a click or a kernel message
RED = "rgb(204, 0, 0)"                 # tfwb.ui.workbench.RED, as the browser reports it


def second_notebook() -> str:
    return CHAPTER_01 if (ROOT / CHAPTER_01).exists() else SMOKE


NOTEBOOKS = [CHAPTER_00, second_notebook()]
TIMINGS: dict = {}

# `window.jupyterapp` is exposed by --expose-app-in-browser. The functions below read
# the notebook model, which is exact where the DOM is only a rendering of it.
JS_CURRENT_READY = """(path) => {
  const app = window.jupyterapp;
  const w = app && app.shell.currentWidget;
  if (!w || !w.context || w.context.path !== path || !w.sessionContext) return false;
  const k = w.sessionContext.session && w.sessionContext.session.kernel;
  return !!k && w.sessionContext.kernelDisplayStatus === 'idle' && w.content.widgets.length > 0;
}"""

JS_RUN_ALL = """() => {
  const app = window.jupyterapp;
  app.commands.execute('notebook:clear-all-cell-outputs');   // stored counts would look finished
  app.commands.execute('notebook:run-all-cells');            // not awaited: the test polls instead
  return true;
}"""

JS_RUN_STATE = """(path) => {
  const w = window.jupyterapp.shell.currentWidget;
  if (!w || w.context.path !== path) return null;
  const code = w.content.widgets.filter(c => c.model.type === 'code'
                                         && c.model.sharedModel.getSource().trim() !== '');
  const errors = [];
  code.forEach((c, i) => c.model.outputs.toJSON().forEach(o => {
    if (o.output_type === 'error') errors.push(`code cell ${i + 1}: ${o.ename}: ${o.evalue}`);
  }));
  const pending = code.filter(c => c.model.executionCount === null).length;
  return {status: w.sessionContext.kernelDisplayStatus, pending, errors,
          done: errors.length > 0 || (pending === 0 && w.sessionContext.kernelDisplayStatus === 'idle')};
}"""
JS_RUN_FINISHED = f"(path) => {{ const s = ({JS_RUN_STATE})(path); return s && s.done ? s : false; }}"


def _slug(path: str) -> str:
    return Path(path).stem


def _record_writes(page, attempts: list) -> None:
    """Note every request that would write a notebook through the contents API (the test must not save).

    Passive on purpose: routing every request through Python stalls JupyterLab's start-up.
    """
    def seen(request):
        path = urllib.parse.urlsplit(request.url).path
        if "/api/contents" not in path or request.method in ("GET", "HEAD"):
            return
        if request.method == "POST" and path.endswith("/checkpoints"):
            return                 # Lab's first-open checkpoint: a gitignored copy, not a save
        attempts.append(f"{request.method} {request.url}")

    page.on("request", seen)


@contextlib.contextmanager
def _fresh_run_history(notebook: str, stash_dir: Path):
    """Run the notebook as a new reader would: no earlier Workbench history beside it.

    A chapter's Workbench resumes ``tfwb-runs/`` next to the notebook (gitignored).
    The folder is moved aside for the test and put back afterwards, so the test
    neither sees nor keeps runs from other sessions.
    """
    runs = (ROOT / notebook).parent / "tfwb-runs"
    stash = stash_dir / "tfwb-runs"
    had = runs.exists()
    if had:
        shutil.move(str(runs), str(stash))
    try:
        yield
    finally:
        shutil.rmtree(runs, ignore_errors=True)
        if had:
            shutil.move(str(stash), str(runs))


def _element_shot(page, element, path: Path) -> None:
    """Screenshot one element whole: grow the viewport to its height first (Lab clips to its panel)."""
    size = page.viewport_size
    box = element.bounding_box()
    if box and box["height"] + 200 > size["height"]:
        page.set_viewport_size({"width": size["width"], "height": int(box["height"]) + 200})
    try:
        element.scroll_into_view_if_needed()
        element.screenshot(path=str(path))
    finally:
        page.set_viewport_size(size)


def _rows(history) -> list:
    """The history table's rows as (index cell, row class) pairs: what must survive a failed run."""
    rows = history.locator("tbody tr")
    return [(rows.nth(i).locator("td").first.inner_text().strip(), rows.nth(i).get_attribute("class"))
            for i in range(rows.count())]


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=[_slug(p) for p in NOTEBOOKS])
def test_run_all_then_drive_the_workbench(lab, browser, artifacts_dir, notebook, tmp_path):
    with _fresh_run_history(notebook, tmp_path):
        _run_all_then_drive_the_workbench(lab, browser, artifacts_dir, notebook)


def _run_all_then_drive_the_workbench(lab, browser, artifacts_dir, notebook):
    from playwright.sync_api import expect

    slug = _slug(notebook)

    def shot(step: str, element=None) -> None:
        path = artifacts_dir / f"{slug}-{step}.png"
        if element is None:
            page.screenshot(path=str(path))
        else:
            _element_shot(page, element, path)

    times = TIMINGS.setdefault(slug, {})
    t_start = time.perf_counter()
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    writes: list = []
    _record_writes(page, writes)
    try:
        # 1. open the notebook and wait for its kernel
        page.goto(lab.url(f"lab/tree/{notebook}"))
        page.wait_for_function(JS_CURRENT_READY, arg=notebook, timeout=KERNEL_IDLE_TIMEOUT_MS)
        times["open + kernel idle"] = time.perf_counter() - t_start
        shot("1-opened")

        # 2. run every cell; wait until the kernel is idle and every code cell has a count
        t = time.perf_counter()
        page.evaluate(JS_RUN_ALL)
        state = page.wait_for_function(JS_RUN_FINISHED, arg=notebook, timeout=RUN_ALL_TIMEOUT_MS,
                                       polling=500).json_value()
        times["run all cells"] = time.perf_counter() - t
        shot("2-ran-all")
        assert not state["errors"], f"{notebook}: cells ended in errors: {state['errors']}"
        assert state["pending"] == 0, f"{notebook}: {state['pending']} code cells never ran"
        assert page.locator('.jp-RenderedText[data-mime-type="application/vnd.jupyter.error"]').count() == 0
        assert page.locator(".jp-OutputArea-output .jp-RenderedText", has_text="Traceback (most recent call last)"
                            ).count() == 0, f"{notebook}: a traceback is shown"

        # 3. the Workbench: flip prefetch, click Run; the chart's image and the history change
        wb = page.locator(".tfwb-workbench").last
        expect(wb).to_be_visible(timeout=UI_TIMEOUT_MS)
        wb.scroll_into_view_if_needed()
        run = wb.locator(".tfwb-run")
        chart = wb.locator("img.tfwb-run-chart, .tfwb-run-chart img").first
        history = wb.locator(".tfwb-history").first
        expect(run).to_be_enabled(timeout=UI_TIMEOUT_MS)
        src_before = chart.get_attribute("src")          # None when no run has drawn it yet
        rows_before = _rows(history)
        shot("3-workbench", wb)

        toggle = wb.locator(".tfwb-knob-prefetch").first
        was_on = "mod-active" in (toggle.get_attribute("class") or "")
        toggle.click()
        if was_on:
            expect(toggle).not_to_have_class(re.compile(r"\bmod-active\b"), timeout=UI_TIMEOUT_MS)
        else:
            expect(toggle).to_have_class(re.compile(r"\bmod-active\b"), timeout=UI_TIMEOUT_MS)
        t = time.perf_counter()
        run.click()
        if src_before:
            expect(chart).not_to_have_attribute("src", src_before, timeout=RUN_TIMEOUT_MS)
        else:
            expect(chart).to_have_attribute("src", re.compile(r"\S"), timeout=RUN_TIMEOUT_MS)
        expect(chart).to_be_visible(timeout=UI_TIMEOUT_MS)
        expect(history.locator("tbody tr")).to_have_count(len(rows_before) + 1, timeout=UI_TIMEOUT_MS)
        expect(run).to_be_enabled(timeout=UI_TIMEOUT_MS)
        expect(run).to_have_text(re.compile(r"^\s*Run\s*$"), timeout=UI_TIMEOUT_MS)
        times["click Run (prefetch flipped)"] = time.perf_counter() - t
        assert "tfwb-row-ok" in (history.locator("tbody tr").last.get_attribute("class") or "")
        rows_after_run = _rows(history)
        assert rows_after_run[:len(rows_before)] == rows_before
        shot("4-after-run", wb)
        if notebook == CHAPTER_00:
            page.mouse.move(0, 0)                    # no hover highlight in the README picture
            shot("workbench", wb)                    # copied by hand to tests/ui/workbench.png (the README shows it)

        # 4. an invalid action: the tpu strategy with no TPU. Red text, earlier rows kept.
        wb.locator(".tfwb-knob-strategy select").select_option("tpu")
        expect(wb.locator(".tfwb-status")).to_contain_text(re.compile("tpu", re.I),  # the preview names it
                                                           timeout=UI_TIMEOUT_MS)
        t = time.perf_counter()
        run.click()
        failure = wb.locator(".tfwb-status b", has_text=re.compile(r"failed.*TPU", re.S))
        expect(failure).to_be_visible(timeout=RUN_TIMEOUT_MS)
        expect(failure).to_have_css("color", RED)
        expect(run).to_be_enabled(timeout=UI_TIMEOUT_MS)
        times["click Run (tpu, fails)"] = time.perf_counter() - t
        rows_after_fail = _rows(history)
        assert len(rows_after_fail) >= len(rows_after_run)
        assert rows_after_fail[:len(rows_after_run)] == rows_after_run, "a failed run removed earlier rows"
        shot("5-tpu-error", wb)
        shot("6-page-end")
        assert not writes, f"the test tried to write through the contents API: {writes}"
    finally:
        times["total"] = time.perf_counter() - t_start
        context.close()
        lab.shutdown_kernels()                   # one TF kernel at a time on a small machine
        print(f"\n[ui] {notebook}: " + ", ".join(f"{k} {v:.1f} s" for k, v in times.items()), flush=True)


def teardown_module(module):
    total = sum(t.get("total", 0.0) for t in TIMINGS.values())
    print(f"\n[ui] browser test total over {len(TIMINGS)} notebook(s): {total:.1f} s", flush=True)
