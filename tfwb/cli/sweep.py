"""``python -m tfwb sweep``: find the fastest configuration on this machine that still trains correctly.

    python -m tfwb sweep --workload images --knob prefetch=false,true --knob cache=off,memory --out runs/sweep

The baseline (the naive configuration every candidate changes) takes every knob as
an option, exactly as ``run`` does (``--batch-size 32``); ``--knob NAME=V1,V2,...``
(repeatable) names a knob to search and its values, spelt as the knob's option takes
them. Without ``--knob`` the sweep searches ``tfwb.search.space.default_space`` (every knob
declared with ``sweep=(values...)``). The search
is ``tfwb.sweep`` (successive halving, ``tfwb.tf.lab.sweep``), its runner called as
``runner(cfg, observers)``; its bar is ``tfwb.cli.drawer.Drawer.sweep``.

``--out DIR`` writes ``runs.jsonl`` (every run, appended as it finishes), then
``report.md``, ``rungs.png``, ``finalists.png`` and ``sweep.json``. A folder that
exists and is not empty is refused unless ``--force`` (replace the sweep's files
there) or ``--resume`` (reuse the runs in its ``runs.jsonl``). Ctrl-C stops the sweep
after the current step of its current run; every finished run stays in ``runs.jsonl``,
and ``--resume`` goes on from there.

Imports ``tfwb.cli.options`` and ``tfwb.cli.drawer``, never ``tfwb.cli.commands``; TensorFlow
loads only when the command runs.

Exit status: 0 when the sweep finished, 1 when it could not judge (the naive run
failed) or a file could not be written, 2 for a bad option (an unknown knob or
value, listing what is allowed; an output folder in the way), 130 when interrupted.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import textwrap
from typing import Any, Dict, List, Optional, Tuple

from tfwb.cli.drawer import Drawer, say, stderr_for_drawing
from tfwb.cli.options import EXIT_INTERRUPTED, PROG, HelpFormatter, add_knob_options, allowed_text, knob_changes, option
from tfwb.config import KNOBS, RunConfig
from tfwb.hardware import detect
from tfwb.knobs import sweep_space
from tfwb.search import SweepResult
from tfwb.search.halving import Runner
from tfwb.search.space import FIXED_KNOBS, check_space

#: Files the sweep writes in ``--out`` (``--force`` replaces these, and only these).
RUNS_FILE, REPORT_FILE, RUNGS_PNG, FINALISTS_PNG, SUMMARY_FILE = (
    "runs.jsonl", "report.md", "rungs.png", "finalists.png", "sweep.json")
OUT_FILES = (RUNS_FILE, REPORT_FILE, RUNGS_PNG, FINALISTS_PNG, SUMMARY_FILE)
#: sweep's own options, beside the knobs.
SWEEP_OPTIONS = ("knob", "out", "force", "resume", "min_steps", "eta", "rungs", "loss_tolerance", "progress")


# -- --knob NAME=V1,V2 ---------------------------------------------------------------------------------
def parse_knob(text: str) -> Tuple[str, Tuple[Any, ...]]:
    """``"prefetch=false,true"`` -> ``("prefetch", (False, True))``, each value parsed as the knob's option.

    The name may be spelt with dashes (``batch-size``) or underscores, with or without ``--``.

    Raises:
        ValueError: for text without ``=``, an unknown knob (listing the knobs), one the search
            sets itself, no values, or a value the knob does not allow (naming what is allowed).

    Example:
        >>> parse_knob("mixed-precision=off,mixed_bfloat16")
        ('mixed_precision', ('off', 'mixed_bfloat16'))
    """
    name, sep, values = text.partition("=")
    name = name.strip().lstrip("-").replace("-", "_")
    if not sep or not name:
        raise ValueError(f"--knob {text!r} is not allowed; write NAME=V1,V2,... (e.g. prefetch=false,true)")
    if name not in KNOBS:
        raise ValueError(f"--knob {text!r}: unknown knob {name!r}; knobs: "
                         + ", ".join(n for n in KNOBS if n not in FIXED_KNOBS))
    if name in FIXED_KNOBS:
        raise ValueError(f"--knob {text!r}: {name} cannot be swept: {FIXED_KNOBS[name]}")
    k = KNOBS[name]
    raw = [v for v in (part.strip() for part in values.split(",")) if v]
    if not raw:
        raise ValueError(f"--knob {text!r}: no values; {name} takes {allowed_text(k)}")
    parsed = []
    for v in raw:
        try:
            parsed.append(k.parse(name, v))
        except ValueError:
            raise ValueError(f"--knob {text!r}: {v!r} is not allowed; {name} takes {allowed_text(k)}") from None
    return name, tuple(parsed)


def _knob_type(text: str) -> Tuple[str, Tuple[Any, ...]]:
    try:
        return parse_knob(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def default_space_text() -> str:
    """The default space in the command line's words (for ``--help``)."""
    k = KNOBS
    return "; ".join(f"{option(n)[2:]}={','.join(k[n].format(v) for v in vs)}"
                     for n, vs in sweep_space(RunConfig).items())


# -- the parser -----------------------------------------------------------------------------------------
def add_parser(sub: Any) -> argparse.ArgumentParser:
    """Add the ``sweep`` command to ``python -m tfwb``'s subparsers and return its parser."""
    p = sub.add_parser(
        "sweep", help="search the knobs for the fastest configuration that still trains correctly",
        formatter_class=HelpFormatter, allow_abbrev=False,
        usage=f"{PROG} sweep [--KNOB VALUE ...] [--knob NAME=V1,V2,... ...] [--out DIR [--force | --resume]]",
        description=textwrap.fill("Successive halving over the knobs: every candidate runs a few steps, the fastest "
                    "1/eta of those that train correctly (status ok; after as many training examples as the naive "
                    "run saw, a loss at most --loss-tolerance times the naive run's loss drop above the naive "
                    "run's loss, so at least 90 % of its drop with 0.1; no allowance where the naive run's loss "
                    "did not drop) run eta times longer, and so on; the finalists are compared "
                    "against each other and the naive run, noise-aware. The knob options below set the "
                    "naive baseline every candidate changes, as for run. Exit 0 when the sweep finished, "
                    "1 when the naive run failed or a file could not be written, 2 for a bad option, "
                    "130 when interrupted (finished runs stay in DIR/runs.jsonl: --resume goes on).", 100),
        epilog=textwrap.fill("Without --knob the sweep searches: " + default_space_text()
                             + " (knobs the workload does not honour are left out).", 100))
    own = p.add_argument_group("the search")
    own.add_argument("--knob", action="append", type=_knob_type, default=[], metavar="NAME=V1,V2,...",
                     help="a knob to search and its values, spelt as that knob's option below takes them "
                          "(repeat for more knobs), e.g. --knob prefetch=false,true "
                          "--knob mixed-precision=off,mixed_bfloat16")
    own.add_argument("--out", metavar="DIR", help="write runs.jsonl, report.md, rungs.png, finalists.png "
                     "and sweep.json here (created; refused when it holds other files, see --force/--resume)")
    own.add_argument("--force", action="store_true",
                     help="write into a non-empty --out, replacing the sweep's files there")
    own.add_argument("--resume", action="store_true",
                     help="reuse the runs in --out's runs.jsonl and go on (after Ctrl-C)")
    own.add_argument("--min-steps", type=int, default=10, metavar="N", help="measured steps at the first "
                     "rung (default 10)")
    own.add_argument("--eta", type=int, default=3, metavar="N", help="steps grow by N per rung and 1/N of "
                     "the candidates go on (default 3)")
    own.add_argument("--rungs", type=int, default=3, metavar="N", help="rungs (default 3)")
    own.add_argument("--loss-tolerance", type=float, default=0.10, metavar="X",
                     help="how far above the naive run's loss a candidate's may be after as many training "
                          "examples, as a share of the naive run's loss drop over them (default 0.1: the "
                          "candidate achieves at least 90 %% of that drop; none where the naive run's loss "
                          "did not drop)")
    own.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                     help="show the progress bar on stderr (default: only when stderr is a terminal)")
    add_knob_options(p)
    return p


# -- the command ------------------------------------------------------------------------------------------
def _out_folder(parser: argparse.ArgumentParser, args: argparse.Namespace) -> Optional[str]:
    """Check ``--out`` before any work (exit 2 when it is in the way); create it."""
    if args.force and args.resume:
        parser.error("--force and --resume pull apart: --force replaces the sweep's files, --resume "
                     "reuses its runs; pick one")
    if args.out is None:
        if args.force or args.resume:
            parser.error(f"--{'force' if args.force else 'resume'} needs --out DIR")
        return None
    out = args.out
    if os.path.exists(out) and not os.path.isdir(out):
        parser.error(f"--out {out!r} is a file, not a folder; pick a folder")
    if os.path.isdir(out):
        inside = sorted(os.listdir(out))
        if inside and not (args.force or args.resume):
            shown = ", ".join(inside[:4]) + (", ..." if len(inside) > 4 else "")
            parser.error(f"--out {out!r} exists and is not empty ({len(inside)} entries: {shown}); "
                         "pass --force to replace the sweep's files there, --resume to go on with the "
                         "runs in its runs.jsonl, or pick another folder")
        if args.force:
            for name in OUT_FILES:
                path = os.path.join(out, name)
                if os.path.isfile(path):
                    os.remove(path)
    try:
        os.makedirs(out, exist_ok=True)
    except OSError as e:
        parser.error(f"--out {out!r} cannot be created: {e.strerror or e}")
    return out


def write_outputs(result: SweepResult, out: str, hardware: Optional[Dict[str, Any]] = None) -> List[str]:
    """Write the report, the charts and the summary into ``out``; return the paths written."""
    from tfwb.ui.charts.candidates import finalists_png, rungs_png   # lazy: matplotlib only when writing charts

    written = []
    for name, png in ((RUNGS_PNG, rungs_png(result)), (FINALISTS_PNG, finalists_png(result))):
        path = os.path.join(out, name)
        with open(path, "wb") as fh:
            fh.write(png)
        written.append(path)
    charts = (("Every candidate by rung", RUNGS_PNG), ("The last rung", FINALISTS_PNG))
    path = os.path.join(out, REPORT_FILE)
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(result.markdown(hardware, charts=charts))
    written.append(path)
    path = os.path.join(out, SUMMARY_FILE)
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(result.to_dict(), fh, indent=1, default=str)
        fh.write("\n")
    written.append(path)
    return written


def cmd_sweep(parser: argparse.ArgumentParser, args: argparse.Namespace,
              runner: Optional[Runner] = None) -> int:
    """Run ``python -m tfwb sweep`` (``args`` from ``add_parser``'s parser)."""
    try:
        baseline = RunConfig(**knob_changes(args))
    except ValueError as e:
        parser.error(str(e))
    space: Optional[Dict[str, Tuple[Any, ...]]] = None
    if args.knob:
        seen: Dict[str, Tuple[Any, ...]] = {}
        for name, values in args.knob:
            if name in seen:
                parser.error(f"--knob {name} is given twice; list all its values once: "
                             f"--knob {name}=V1,V2,...")
            seen[name] = values
        space = seen
    try:
        if space is not None:
            space = check_space(space, baseline.workload)
        for name, value in (("min_steps", args.min_steps), ("eta", args.eta), ("rungs", args.rungs)):
            low = 2 if name == "eta" else 1
            if value < low:
                raise ValueError(f"--{name.replace('_', '-')} {value} is not allowed; it must be >= {low}")
        if not args.loss_tolerance >= 0:
            raise ValueError(f"--loss-tolerance {args.loss_tolerance} is not allowed; it must be >= 0")
    except ValueError as e:
        parser.error(str(e))
    out = _out_folder(parser, args)
    history = os.path.join(out, RUNS_FILE) if out else None
    show = sys.stderr.isatty() if args.progress is None else args.progress
    from tfwb.tf.lab.sweep import sweep         # TensorFlow loads now, not for --help

    with stderr_for_drawing() as err:
        drawer = Drawer(err) if show else None
        try:
            result = sweep(baseline, space, min_steps=args.min_steps, eta=args.eta, rungs=args.rungs,
                           loss_tolerance=args.loss_tolerance, runner=runner, history=history,
                           resume=args.resume, progress=drawer.sweep() if drawer is not None else None)
        except ValueError as e:
            parser.error(str(e))
        except OSError as e:
            say(f"{PROG} sweep: error: {e}", err=True)
            return 1
        finally:
            if drawer is not None:
                drawer.close()
    if result.interrupted:
        where = f"; every finished run is in {history}: add --resume to go on" if history else ""
        say(f"{PROG} sweep: interrupted after {result.runs} runs{where}", err=True)
        return EXIT_INTERRUPTED
    hardware = detect()
    say(result.summary())
    say(f"Trains correctly: {result.loss_rule()}.")
    why = result.explain(hardware)
    if why:
        say("Why the winner wins:")
        for line in why:
            say(f"- {line}")
    if out:
        try:
            written = write_outputs(result, out, hardware)
        except OSError as e:
            say(f"{PROG} sweep: error: the report was not written to {out}: {e}", err=True)
            return 1
        say("wrote " + ", ".join(written) + f" (and every run in {history})")
    else:
        say(result.table_text())
    return 1 if result.error else 0
