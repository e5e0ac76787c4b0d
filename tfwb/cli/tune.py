"""``python -m tfwb tune``: diagnose a run, try the most promising change, keep it if faster; repeat.

    python -m tfwb tune --workload mlp --data-source memory --max-runs 4 --history runs/tune.jsonl

The start takes every knob as an option, exactly as ``run`` does (``--workload module:function``
included). The loop is ``tfwb.tune`` (``tfwb.search.tune_loop``, with ``tfwb.run`` handed in
by ``tfwb.tf.lab.tune``); its events (``tfwb.search.tune_events``) are rendered here: each
trial's line is printed as it finishes (the change, its bound, the measured interleaved
speedup, kept or reverted, and why), then the best configuration against the start, the
headroom left, and why no further knob can take it. ``--json`` prints the whole outcome as
JSON instead of the closing text.
Ctrl-C stops the tune after the current step; the finished trials are printed and kept.

Imports ``tfwb.cli.options`` and ``tfwb.cli.drawer``, never ``tfwb.cli.commands``; TensorFlow
loads only when the command runs.

Exit status: 0 when the tune finished, 1 when the baseline failed or the history could not
be written, 2 for a bad option (naming it and what is allowed), 130 when interrupted.
"""
from __future__ import annotations

import argparse
import json
from typing import Any, Callable, Optional

from tfwb.cli.drawer import say
from tfwb.cli.options import EXIT_INTERRUPTED, PROG, HelpFormatter, add_knob_options, knob_changes
from tfwb.config import RunConfig
from tfwb.search.tune_events import LOGGED, TrialDone, TuneEvent
from tfwb.search.tune_loop import Comparer, Runner

#: tune's own options, beside the knobs.
TUNE_OPTIONS = ("max_runs", "history", "json", "rounds")


def add_parser(sub: Any) -> argparse.ArgumentParser:
    """Add the ``tune`` command to ``python -m tfwb``'s subparsers and return its parser."""
    p = sub.add_parser(
        "tune", help="diagnose, try the most promising knob, keep it if faster and still training; repeat",
        formatter_class=HelpFormatter, allow_abbrev=False,
        usage=f"{PROG} tune [--KNOB VALUE ...] [--max-runs N] [--history PATH] [--json]",
        description="Run the start (the knobs below, as for run), rank the changes by the most each can gain "
                    "(input knobs by the input wait, compute knobs by 1/MFU and the dtype peaks), try the best, "
                    "keep it only when an interleaved comparison calls it faster and it still trains (the "
                    "sweep's loss rule), and repeat until no bound exceeds the noise or --max-runs trials. "
                    "Exit 0 when it finished, 1 when the start failed, 2 for a bad option, 130 when "
                    "interrupted (finished trials are printed).")
    own = p.add_argument_group("the tune")
    own.add_argument("--max-runs", type=int, default=4, metavar="N",
                     help="the most trials (changes compared; a run for each one called faster), >= 1 (default 4)")
    own.add_argument("--rounds", type=int, default=None, metavar="N",
                     help="interleaved rounds per trial, >= 6 (default: 10 under TFWB_FAST=1, else 30)")
    own.add_argument("--history", metavar="PATH",
                     help="append every run to this JSON-lines file (nothing in it is rewritten)")
    own.add_argument("--json", action="store_true", help="print the outcome as JSON after the trials")
    add_knob_options(p)
    return p


def cmd_tune(parser: argparse.ArgumentParser, args: argparse.Namespace, runner: Optional[Runner] = None,
             compare: Optional[Comparer] = None, progress: Optional[Callable[[str], None]] = None) -> int:
    """Run ``python -m tfwb tune`` (``args`` from ``add_parser``'s parser).

    Args:
        parser, args: the command's parser and its parsed arguments.
        runner, compare: ``tfwb.tune``'s (default ``tfwb.run`` and ``tfwb.compare_interleaved``).
        progress: where the lines that are not trials go (default stderr).

    Returns:
        The exit status.
    """
    try:
        start = RunConfig(**knob_changes(args))
    except ValueError as e:
        parser.error(str(e))

    def show(event: TuneEvent) -> None:
        if isinstance(event, TrialDone):
            say(event.text())
        elif isinstance(event, LOGGED):
            (progress or (lambda text: say(text, err=True)))(event.text())

    from tfwb.tf.lab.tune import tune          # TensorFlow loads now, not for --help

    try:
        result = tune(start, max_runs=args.max_runs, rounds=args.rounds, history_path=args.history,
                      progress=show, runner=runner, compare=compare)
    except ValueError as e:
        parser.error(str(e))
    except (RuntimeError, OSError) as e:
        say(f"{PROG} tune: error: {e}", err=True)
        return 1
    except KeyboardInterrupt:
        say(f"{PROG} tune: interrupted during the start's run; nothing was tuned", err=True)
        return EXIT_INTERRUPTED
    if args.json:
        say(json.dumps(result.to_dict(), indent=1, default=str))
    else:
        for line in result.closing_text().splitlines():
            say(line)
    return EXIT_INTERRUPTED if result.interrupted else 0
