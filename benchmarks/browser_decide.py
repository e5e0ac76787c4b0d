"""The Workbench where it is read (issue 34's goal): JupyterLab + headless Chromium, the widget on screen,
chapter 00's Workbench (images read from files, small mode), driven by clicks.

1. Which changes are 1.5x or more on this machine: each candidate (``--knobs``: cache, prefetch,
   parallel_map, interleave, and all four together) against chapter 00's baseline, interleaved in the
   kernel (``tfwb.compare_interleaved``, ``--rounds`` rounds) before anything is clicked. A candidate
   counts when its interval's low end is at least ``--min-ratio`` faster.
2. Separate runs, each started by a click on Run (the knobs set between runs from the kernel): for each
   counted change, ``--pairs`` runs with it off and on, alternating (off, on, off, on, ...): every run
   after the first is a comparison of a change of 1.5x or more with the run before it (faster when the
   change was turned on, slower when it was turned off). Then A/A: ``--aa`` + 1 runs of the baseline,
   and as many of the fastest change, each the same configuration as the run before it.
3. What the Workbench says of each run against the run before it: the status line's "vs the previous
   run" verdict, read in the page (decided right: the verdict names the right direction; an A/A
   verdict of faster or slower is a false one).
4. "Cannot tell": where the Workbench offers a button to decide (``.tfwb-decide``), it is clicked once
   and the status line read again when the Workbench is idle; a commit without one reports
   "not offered".
5. The browser's CPU during each run's measured steps: Chromium's processes (this process's
   descendants) sampled with psutil every 0.1 s (``tests/ui/browser_cpu.py``), between the wall times
   the kernel records at the end of warm-up and at the last measured step; as a share of all cores.
   Nothing polls the page while a run runs: the script waits on a file the kernel writes.

It runs against any commit: ``--root`` is the checkout whose tfwb the kernels import (its notebooks
are not touched; the benchmark's notebook is written to a temporary folder that JupyterLab serves).
So the "before" figure is ``--root`` at the old main, with this script from the new one.

Output: ``<out>.json`` and ``<out>.md`` (default ``benchmarks/results/browser_decide_<cpu kind>``).

    python benchmarks/browser_decide.py [--root PATH] [--pairs 5] [--aa 5] [--rounds 6] [--out PATH]
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests" / "ui"))
from browser_cpu import WINDOW_CODE, CpuTrace, read_windows, wait_for_windows  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic"]
TOKEN = "tfwb-browser-decide"
CANDIDATES: Dict[str, Dict[str, Any]] = {
    "cache": {"cache": True}, "prefetch": {"prefetch": True}, "parallel_map": {"parallel_map": True},
    "interleave": {"interleave": True},
    "all": {"cache": True, "prefetch": True, "parallel_map": True, "interleave": True},
}
#: Chapter 00's Workbench (cells 297dd2ff, b5885497 and fa1d73c9), history in the temporary folder.
SETUP = """import tfwb
from tfwb import RunConfig
ch = tfwb.chapter("00")
base = RunConfig(batch_size=32, steps=20 if ch.fast else 40, warmup_steps=3)
wb = tfwb.Workbench(baseline=base, history_path="tfwb-runs/browser_decide.jsonl")
wb"""
JS_READY = """(path) => {
  const w = window.jupyterapp && window.jupyterapp.shell.currentWidget;
  if (!w || !w.context || w.context.path !== path || !w.sessionContext) return false;
  const k = w.sessionContext.session && w.sessionContext.session.kernel;
  return !!k && w.sessionContext.kernelDisplayStatus === 'idle' && w.content.widgets.length > 0;
}"""
JS_RUN_ALL = "() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); return true; }"
JS_EXECUTE = """(code) => {
  window.jupyterapp.shell.currentWidget.sessionContext.session.kernel.requestExecute({code, silent: false});
  return true;
}"""
RUN_TIMEOUT_S = 600
DECIDE_TIMEOUT_S = 600
STARTED_WITHIN_S = 30          # a decide click that neither disables Run nor changes the status by then did nothing


def cpu_kind() -> str:
    """``amx``, ``avx512``, ``avx2`` or the machine's architecture (``aarch64``), from /proc/cpuinfo."""
    try:
        flags = set(re.search(r"^flags\s*:(.*)$", Path("/proc/cpuinfo").read_text(), re.M).group(1).split())
    except (OSError, AttributeError):
        return platform.machine() or "cpu"
    return next((k for k, f in (("amx", "amx_tile"), ("avx512", "avx512f"), ("avx2", "avx2")) if f in flags),
                platform.machine() or "cpu")


def classify(text: Optional[str]) -> str:
    """``cannot tell``, ``faster``, ``slower``, ``same`` (no difference) or ``unread`` for a verdict's words."""
    if not text:
        return "unread"
    low = text.lower()
    if "cannot tell" in low:
        return "cannot tell"
    if "no significant difference" in low or "no difference" in low:
        return "same"
    return "faster" if "faster" in low else "slower" if "slower" in low else "same"


def previous_verdict(status: str) -> Optional[str]:
    """The words after "vs the previous run (#N):" in a status line's text (None: not there)."""
    m = re.search(r"vs the previous run \(#\d+\):\s*(.+?)(?:\s+\u2014\s+|\n|$)", status)
    return m.group(1).strip() if m else None


class Lab:
    """A private JupyterLab on a free port, serving ``folder``, whose kernels import ``root``'s tfwb."""

    def __init__(self, folder: Path, root: Path) -> None:
        import socket

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        settings = folder.parent / "settings"
        for plugin, values in {"docmanager-extension/plugin": {"autosave": False},
                               "apputils-extension/notification": {"fetchNews": "false",
                                                                   "checkForUpdates": False}}.items():
            path = settings / "@jupyterlab" / f"{plugin}.jupyterlab-settings"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(values))
        env = {**os.environ, "TFWB_FAST": "1", "TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONPATH": str(root),
               "JUPYTERLAB_SETTINGS_DIR": str(settings), "JUPYTERLAB_WORKSPACES_DIR": str(folder.parent / "ws"),
               "JUPYTER_RUNTIME_DIR": str(folder.parent / "runtime")}
        env.pop("MPLBACKEND", None)
        self.log = open(folder.parent / "lab.log", "w")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "jupyterlab", "--no-browser", "--expose-app-in-browser",
             "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={self.port}", "--ServerApp.port_retries=0",
             f"--IdentityProvider.token={TOKEN}", f"--ServerApp.root_dir={folder}", "--ServerApp.allow_root=True",
             "--LabApp.news_url=None", "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"],
            env=env, cwd=folder, stdout=self.log, stderr=subprocess.STDOUT)
        self._wait()

    def _wait(self) -> None:
        import urllib.request

        deadline = time.monotonic() + 120
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{self.port}/api/status?token={TOKEN}", timeout=5)
                return
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"JupyterLab did not start; see {self.log.name}")
                time.sleep(0.25)

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}/{path}?token={TOKEN}"

    def close(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()


class Bench:
    """The page, its Workbench and the kernel, with the browser's CPU traced throughout."""

    def __init__(self, page: Any, folder: Path, trace: CpuTrace) -> None:
        self.page, self.folder, self.trace = page, folder, trace
        self.wb = page.locator(".tfwb-workbench").last
        self.windows_path = folder / "windows.json"
        self.after_decide_status: Optional[str] = None
        self._n = 0

    def kernel(self, code: str, timeout_s: float = 60) -> Any:
        """Run ``code`` in the kernel (it sets ``_out``) and return ``_out``, read from a file it writes."""
        self._n += 1
        path = self.folder / f"out{self._n}.json"
        wrapped = ("import json as _j, traceback as _tb\ntry:\n" + "\n".join("    " + line for line in code.splitlines())
                   + f"\nexcept Exception:\n    _out = {{'error': _tb.format_exc()}}\n"
                   f"_j.dump(_out, open({str(path)!r} + '.tmp', 'w'))\nimport os as _os\n"
                   f"_os.replace({str(path)!r} + '.tmp', {str(path)!r})\n")
        self.page.evaluate(JS_EXECUTE, wrapped)
        deadline = time.monotonic() + timeout_s
        while not path.exists():
            if time.monotonic() > deadline:
                raise TimeoutError(f"the kernel did not answer within {timeout_s:.0f} s: {code[:80]!r}")
            time.sleep(0.2)
        out = json.loads(path.read_text())
        if isinstance(out, dict) and "error" in out:
            raise RuntimeError(f"kernel code failed: {out['error']}")
        return out

    def set_knobs(self, changes: Dict[str, Any]) -> None:
        """Every candidate knob off, then ``changes`` on (the Workbench's inputs show them)."""
        knobs = {k: v for c in CANDIDATES.values() for k, v in c.items()}
        off = {k: False for k in knobs}
        self.kernel(f"wb.controller.set_changes({{**{off!r}, **{changes!r}}})\n_out = True")

    def click_run(self) -> Dict[str, Any]:
        """Click Run and wait (on the kernel's file, not the page) for the run to end; what the page says."""
        from playwright.sync_api import expect

        run = self.wb.locator(".tfwb-run")
        expect(run).to_be_enabled(timeout=60_000)
        before = len(read_windows(self.windows_path))
        run.click()
        window = wait_for_windows(self.windows_path, before + 1, RUN_TIMEOUT_S)[-1]
        expect(run).to_be_enabled(timeout=RUN_TIMEOUT_S * 1000)
        time.sleep(0.5)                                  # the status line's last message drawn
        status = self.wb.locator(".tfwb-status").inner_text()
        cpu = None
        if window.get("start") and window.get("end") and window["end"] > window["start"]:
            self.trace.sample()
            cpu = self.trace.share(window["start"], window["end"])
        verdict = previous_verdict(status)
        return {"status": status, "verdict": verdict, "class": classify(verdict), "run_status": window["status"],
                "measured_s": (window["end"] - window["start"]) if cpu is not None else None,
                "browser_cpu_share": cpu}

    def decide(self) -> Optional[str]:
        """Click the Workbench's decide button once, if it offers one; the verdict after (None: not offered).

        Looked at every 2 s (a decision is a comparison of several rounds): it has ended when Run, disabled
        meanwhile, is enabled again; or, where Run stays enabled, when the status line has changed and its
        verdict is no longer "cannot tell" or the button is gone or disabled. A click that changes nothing
        within ``STARTED_WITHIN_S`` did nothing (main at 87c424c offered the button on an A/A pair and its
        click left the status as it was for 10 minutes)."""
        button = self.wb.locator(".tfwb-decide")
        if button.count() == 0 or not button.last.is_visible() or not button.last.is_enabled():
            return None
        status = self.wb.locator(".tfwb-status")
        before = status.inner_text()
        button.last.click()
        run = self.wb.locator(".tfwb-run")
        clicked = time.monotonic()
        deadline, started = clicked + DECIDE_TIMEOUT_S, False
        while time.monotonic() < deadline:
            time.sleep(2.0)
            now = status.inner_text()
            if not run.is_enabled():
                started = True                            # a decision runs with Run disabled
                continue
            if started:
                break                                     # ... and Run is enabled again: it ended
            if now == before:
                if time.monotonic() - clicked > STARTED_WITHIN_S:
                    break                                 # the click started nothing and changed nothing
                continue
            verdict = previous_verdict(now)
            if verdict is None or "cannot tell" not in verdict.lower():
                break
            if button.count() == 0 or not button.last.is_enabled():
                break
        self.after_decide_status = status.inner_text()     # kept in the report: the lead can read it
        return previous_verdict(self.after_decide_status) or "unread"


def pick_changes(bench: Bench, names: List[str], rounds: int, min_ratio: float) -> Dict[str, Any]:
    """Each candidate against the baseline, interleaved in the kernel: speedup, its interval, the text."""
    out = {}
    for name in names:
        changes = CANDIDATES[name]
        c = bench.kernel(f"_c = tfwb.compare_interleaved(base, base.replace(**{changes!r}), rounds={rounds})\n"
                         "_out = {'speedup': _c.speedup, 'low': _c.low, 'high': _c.high, 'text': _c.text()}",
                         timeout_s=1800)
        c["counted"] = c["low"] >= min_ratio
        out[name] = c
        print(f"[decide] {name}: {c['text']}{' (counted)' if c['counted'] else ''}", flush=True)
    return out


def expected(before: Optional[Dict[str, Any]], now: Dict[str, Any], counted: List[Dict[str, Any]]) -> Optional[str]:
    """What a run of ``now``'s changes should say against a run of ``before``'s: ``same`` for the same
    knobs, ``faster`` / ``slower`` for a counted change turned on / off against the baseline, else None.

    Example:
        >>> expected({}, {"cache": True}, [{"cache": True}]), expected({"cache": True}, {}, [{"cache": True}])
        ('faster', 'slower')
    """
    if before is None:
        return None
    if before == now:
        return "same"
    if not before and now in counted:
        return "faster"
    if not now and before in counted:
        return "slower"
    return None


def separate_runs(bench: Bench, picked: Dict[str, Any], pairs: int, aa: int) -> List[Dict[str, Any]]:
    """The clicked runs: off/on alternating per counted change, then A/A runs; one record per run."""
    runs: List[Dict[str, Any]] = []
    counted = [n for n, c in picked.items() if c["counted"]]
    counted_changes = [CANDIDATES[n] for n in counted]

    def run(kind: str, name: str, on: bool) -> None:
        changes = CANDIDATES[name] if on else {}           # "baseline": every candidate off
        bench.set_knobs(changes)
        row = bench.click_run()
        row.update(kind=kind, change=name, on=on, changes=changes,
                   expected=expected(runs[-1]["changes"] if runs else None, changes, counted_changes))
        if row["class"] == "cannot tell":
            decided = bench.decide()
            row["after_decide"] = decided
            row["status_after_decide"] = bench.after_decide_status if decided else None
            row["after_decide_class"] = classify(decided) if decided is not None else None
        runs.append(row)
        cpu = "-" if row["browser_cpu_share"] is None else "%.2f %%" % (100 * row["browser_cpu_share"])
        print(f"[run {len(runs)}] {kind} {name} {'on' if on else 'off'}: {row['verdict']!r} ({row['class']}; "
              f"expected {row['expected']}); after decide {row.get('after_decide')!r}; browser {cpu}", flush=True)

    for name in counted:
        for _ in range(pairs):
            run("change", name, False)
            run("change", name, True)
    fastest = max(counted, key=lambda n: picked[n]["speedup"]) if counted else None
    for name, on in (("baseline", False), (fastest, True)):
        if name is None:
            continue
        for _ in range(aa + 1):
            run("aa", name, on)
    return runs


def summary(runs: List[Dict[str, Any]]) -> Dict[str, Any]:
    """The goal's figures from the runs."""
    changes = [r for r in runs if r["expected"] in ("faster", "slower")]
    aa = [r for r in runs if r["expected"] == "same"]
    cannot = [r for r in runs if r["expected"] and r["class"] == "cannot tell"]
    offered = [r for r in cannot if r.get("after_decide") is not None]
    decided = [r for r in offered if r.get("after_decide_class") not in ("cannot tell", "unread")]
    shares = [r["browser_cpu_share"] for r in runs if r["browser_cpu_share"] is not None]
    weighted = [(r["browser_cpu_share"], r["measured_s"]) for r in runs if r["browser_cpu_share"] is not None]
    total_s = sum(s for _, s in weighted)
    return {
        "changes_compared": len(changes),
        "changes_decided_right": sum(r["class"] == r["expected"] for r in changes),
        "changes_wrong_direction": sum(r["class"] in ("faster", "slower") and r["class"] != r["expected"]
                                       for r in changes),
        "changes_cannot_tell": sum(r["class"] == "cannot tell" for r in changes),
        "aa_compared": len(aa),
        "aa_false": sum(r["class"] in ("faster", "slower") for r in aa),
        "cannot_tell": len(cannot),
        "decide": ("not offered" if cannot and not offered else
                   f"{len(decided)} of {len(cannot)} decided by one click" if cannot else "no cannot tell"),
        "browser_cpu_pct_of_cores_mean": 100 * sum(s * d for s, d in weighted) / total_s if total_s else None,
        "browser_cpu_pct_of_cores_max": 100 * max(shares) if shares else None,
    }


def markdown(report: Dict[str, Any]) -> str:
    s = report["summary"]

    def pct(a: int, b: int) -> str:
        return f"{a} of {b} ({100 * a / b:.0f} %)" if b else "none"

    lines = [f"# The Workbench in a real browser: {report['cpu_kind']}, {report['cores']} cores", "",
             f"Command: `{report['command']}`  ", f"tfwb from: `{report['root']}` at commit `{report['commit']}`  ",
             f"Load average before / after: {report['load_before']} / {report['load_after']}  ",
             f"Note: {report['note'] or '-'}", "", "## The goal's figures", "",
             "| figure | measured | goal |", "|---|---|---|",
             f"| separate-run comparisons of a change of {report['min_ratio']}x or more decided right | "
             f"{pct(s['changes_decided_right'], s['changes_compared'])} (wrong direction "
             f"{s['changes_wrong_direction']}, cannot tell {s['changes_cannot_tell']}) | >= 90 % |",
             f"| A/A false faster/slower | {pct(s['aa_false'], s['aa_compared'])} | <= 5 % |",
             f"| cannot tells decided by one click | {s['decide']} | all |",
             "| browser CPU during a run's measured steps, % of all cores (mean over time; max run) | "
             + (f"{s['browser_cpu_pct_of_cores_mean']:.2f} %; {s['browser_cpu_pct_of_cores_max']:.2f} %"
                if s["browser_cpu_pct_of_cores_mean"] is not None else "-") + " | <= 2 % |",
             "", "## Which changes are 1.5x or more here (interleaved, in the kernel)", "",
             "| change | interleaved verdict | counted |", "|---|---|---|"]
    lines += [f"| {n} | {c['text']} | {'yes' if c['counted'] else 'no'} |" for n, c in report["picked"].items()]
    lines += ["", "## Every clicked run", "", "| # | kind | change | knobs | expected | verdict vs previous | "
              "after one click on decide | browser CPU % of cores |", "|---|---|---|---|---|---|---|---|"]
    for i, r in enumerate(report["runs"], 1):
        cpu = "-" if r["browser_cpu_share"] is None else f"{100 * r['browser_cpu_share']:.2f}"
        lines.append(f"| {i} | {r['kind']} | {r['change']} | {'on' if r['on'] else 'off'} | {r['expected'] or '-'} | "
                     f"{(r['verdict'] or '-').replace('|', '/')} | {r.get('after_decide') or '-'} | {cpu} |")
    return "\n".join(lines) + "\n"


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", default=str(HERE.parent), help="the checkout whose tfwb the kernels import")
    ap.add_argument("--knobs", default=",".join(CANDIDATES), help=f"candidates among {','.join(CANDIDATES)}")
    ap.add_argument("--rounds", type=int, default=6, help="interleaved rounds per candidate")
    ap.add_argument("--min-ratio", type=float, default=1.5)
    ap.add_argument("--pairs", type=int, default=5, help="off/on pairs of separate runs per counted change")
    ap.add_argument("--aa", type=int, default=5, help="A/A comparisons per configuration (baseline, fastest)")
    ap.add_argument("--note", default="", help="said in the report (e.g. the machine's state)")
    ap.add_argument("--out", default=str(HERE / "results" / f"browser_decide_{cpu_kind()}"))
    args = ap.parse_args(argv)
    names = [n for n in args.knobs.split(",") if n]
    bad = [n for n in names if n not in CANDIDATES]
    if bad:
        ap.error(f"--knobs {','.join(bad)}: not allowed; choose among {','.join(CANDIDATES)}")
    root = Path(args.root).resolve()
    load_before = os.getloadavg()
    report = run_benchmark(root, names, args)
    report.update(cpu_kind=cpu_kind(), cores=os.cpu_count(), root=str(root), min_ratio=args.min_ratio,
                  command="python benchmarks/browser_decide.py " + " ".join(sys.argv[1:] if argv is None else argv),
                  commit=subprocess.run(["git", "-C", str(root), "rev-parse", "--short", "HEAD"],
                                        capture_output=True, text=True).stdout.strip(),
                  load_before=" ".join(f"{x:.2f}" for x in load_before),
                  load_after=" ".join(f"{x:.2f}" for x in os.getloadavg()), note=args.note)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(report, indent=1) + "\n")
    out.with_suffix(".md").write_text(markdown(report))
    print(markdown(report))
    return 0


def run_benchmark(root: Path, names: List[str], args: Any) -> Dict[str, Any]:
    """Lab, Chromium, the notebook run, the picks, the clicked runs; the report's figures."""
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory(prefix="browser_decide_") as tmp:
        folder = Path(tmp) / "lab"
        folder.mkdir()
        nb = {"cells": [{"cell_type": "code", "execution_count": None, "id": "setup", "metadata": {},
                         "outputs": [], "source": SETUP}],
              "metadata": {"kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"}},
              "nbformat": 4, "nbformat_minor": 5}
        (folder / "bench.ipynb").write_text(json.dumps(nb))
        lab = Lab(folder, root)
        try:
            with sync_playwright() as p, CpuTrace(0.1) as trace:
                browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
                page = browser.new_context(viewport={"width": 1400, "height": 1000}).new_page()
                page.goto(lab.url("lab/tree/bench.ipynb"))
                page.wait_for_function(JS_READY, arg="bench.ipynb", timeout=180_000)
                page.evaluate(JS_RUN_ALL)
                page.locator(".tfwb-workbench .tfwb-run").last.wait_for(timeout=300_000)
                bench = Bench(page, folder, trace)
                bench.kernel(WINDOW_CODE.format(wb="wb", path=str(bench.windows_path)) + "\n_out = True")
                bench.wb.scroll_into_view_if_needed()
                picked = pick_changes(bench, names, args.rounds, args.min_ratio)
                bench.wb.scroll_into_view_if_needed()
                runs = separate_runs(bench, picked, args.pairs, args.aa)
                browser.close()
        finally:
            lab.close()
    return {"picked": picked, "runs": runs, "summary": summary(runs)}


if __name__ == "__main__":
    sys.exit(main())
