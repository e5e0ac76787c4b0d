"""``python -m tfwb compare``: two configurations interleaved, and the verdict.

    python -m tfwb compare --workload mlp --b prefetch=true
    python -m tfwb compare --workload images --cache memory --b prefetch=true --b parallel-map=true --rounds 10

The knob options set configuration A exactly as ``run`` takes them (``--workload module:function``
included); each ``--b NAME=VALUE`` (repeatable) changes one knob of A to make configuration B,
the value spelt as that knob's option takes it. The two then take turns in short warm blocks in
one process (``tfwb.compare_interleaved``: whatever slows the machine slows both), and the
verdict of B against A is printed (``stats.RoundsComparison.text``: the ratio, its confidence
interval, the rounds it won), or with ``--json`` the whole comparison. This is what decides a
pair that two separate runs call "cannot tell" (the machine was busy, a run drifted); the
Workbench's Decide button does the same.

Imports ``tfwb.cli.options`` and ``tfwb.cli.drawer``, never ``tfwb.cli.commands``; TensorFlow
loads only when the command runs.

Exit status: 0 when the comparison ended (whatever its verdict), 1 when it failed (a configuration
this machine cannot build, a failed run), 2 for a bad option (naming it and what is allowed),
130 when Ctrl-C stopped it (nothing is decided then).
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import textwrap
from typing import Any, Dict, List, Optional, Tuple

from tfwb.cli.drawer import say
from tfwb.cli.options import EXIT_INTERRUPTED, PROG, HelpFormatter, add_knob_options, allowed_text, knob_changes
from tfwb.config import KNOBS, RunConfig, fast_mode
from tfwb.search.tune_loop import FAST_ROUNDS, Comparer

__all__ = ["add_parser", "cmd_compare", "parse_change", "COMPARE_OPTIONS"]

#: compare's own options, beside the knobs.
COMPARE_OPTIONS = ("b", "rounds", "steps_per_round", "json", "progress")


def parse_change(text: str) -> Tuple[str, Any]:
    """``"prefetch=true"`` -> ``("prefetch", True)``: one knob of B, its value parsed as the knob's option.

    The name may be spelt with dashes or underscores, with or without ``--``.

    Raises:
        ValueError: for text without ``=``, an unknown knob (listing the knobs), or a value the knob
            does not allow (naming what is allowed).

    Example:
        >>> parse_change("steps-per-execution=8"), parse_change("--cache=memory")
        (('steps_per_execution', 8), ('cache', True))
    """
    name, sep, value = text.partition("=")
    name = name.strip().lstrip("-").replace("-", "_")
    if not sep or not name:
        raise ValueError(f"--b {text!r} is not allowed; write NAME=VALUE (e.g. --b prefetch=true)")
    if name not in KNOBS:
        raise ValueError(f"--b {text!r}: unknown knob {name!r}; knobs: " + ", ".join(KNOBS))
    k = KNOBS[name]
    try:
        return name, k.parse(name, value.strip())
    except ValueError:
        raise ValueError(f"--b {text!r}: {value.strip()!r} is not allowed; {name} takes {allowed_text(k)}") from None


def _change_type(text: str) -> Tuple[str, Any]:
    try:
        return parse_change(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def add_parser(sub: Any) -> argparse.ArgumentParser:
    """Add the ``compare`` command to ``python -m tfwb``'s subparsers and return its parser."""
    p = sub.add_parser(
        "compare", help="run two configurations interleaved and print the verdict (decides a 'cannot tell')",
        formatter_class=HelpFormatter, allow_abbrev=False,
        usage=f"{PROG} compare [--KNOB VALUE ...] --b NAME=VALUE [--b NAME=VALUE ...] [--rounds N] [--json]",
        description=textwrap.fill("Configuration A is the knobs below, as for run; B is A with each --b change. Both are "
                    "built once in this process and take turns in short warm blocks (alternating which goes "
                    "first), so whatever slows the machine slows both; the sign test over the rounds decides "
                    "(tfwb.compare_interleaved). Prints B's verdict against A, e.g. '3.78x faster (97 % CI "
                    "3.56-4.67x; faster in 10 of 10 rounds)'. Use it where two separate runs say 'cannot tell'. "
                    "Exit 0 when the comparison ended, 1 when it failed, 2 for a bad option, 130 when interrupted.", 100))
    own = p.add_argument_group("the comparison")
    own.add_argument("--b", action="append", type=_change_type, default=[], metavar="NAME=VALUE", dest="b",
                     help="a knob of configuration B and its value, spelt as that knob's option below takes it "
                          "(repeat for more knobs), e.g. --b prefetch=true --b cache=memory; at least one")
    own.add_argument("--rounds", type=int, default=None, metavar="N",
                     help=f"alternating rounds, >= 6 to decide (default: {FAST_ROUNDS} under TFWB_FAST=1, else 30)")
    own.add_argument("--steps-per-round", type=int, default=None, metavar="N",
                     help="measured steps per turn, >= 1 (default 3)")
    own.add_argument("--json", action="store_true", help="print the whole comparison as JSON")
    own.add_argument("--progress", action="store_true", help="print each round's end on stderr")
    add_knob_options(p)
    return p


def _check(parser: argparse.ArgumentParser, args: argparse.Namespace) -> Tuple[RunConfig, RunConfig]:
    """A and B from the options; a bad option exits 2 naming it."""
    if not args.b:
        parser.error("configuration B needs at least one --b NAME=VALUE (e.g. --b prefetch=true)")
    for name, value in (("rounds", args.rounds), ("steps_per_round", args.steps_per_round)):
        if value is not None and value < 1:
            parser.error(f"{name}={value!r} is not allowed; {name} must be >= 1")
    changes: Dict[str, Any] = dict(args.b)
    try:
        a = RunConfig(**knob_changes(args))
        b = a.replace(**changes)
    except ValueError as e:
        parser.error(str(e))
    if not b.diff(a):
        parser.error(f"--b {' '.join(f'{n}={v}' for n, v in args.b)} leaves configuration A as it is; "
                     "change at least one knob")
    return a, b


def cmd_compare(parser: argparse.ArgumentParser, args: argparse.Namespace,
                compare: Optional[Comparer] = None) -> int:
    """Run ``python -m tfwb compare`` (``args`` from ``add_parser``'s parser).

    Args:
        parser, args: the command's parser and its parsed arguments.
        compare: ``compare(a, b, rounds=, steps_per_round=, progress=) -> stats.RoundsComparison``
            (default ``tfwb.compare_interleaved``; tests pass a fake one).

    Returns:
        The exit status.
    """
    a, b = _check(parser, args)
    rounds = args.rounds if args.rounds is not None else (FAST_ROUNDS if fast_mode() else None)
    if compare is None:
        from tfwb.tf.lab.side_by_side import compare_interleaved as compare   # TensorFlow loads now

    def progress(done: int, total: int) -> None:
        if args.progress:
            say(f"round {done} / {total}", err=True)

    changed = ", ".join(f"{n}={v!r}" for n, v in b.diff(a).items())
    try:
        result = compare(a, b, rounds=rounds, steps_per_round=args.steps_per_round, progress=progress)
    except ValueError as e:
        parser.error(str(e))
    except RuntimeError as e:
        say(f"{PROG} compare: error: {e}", err=True)
        return 1
    except KeyboardInterrupt:
        say(f"{PROG} compare: interrupted; nothing was decided", err=True)
        return EXIT_INTERRUPTED
    if args.json:
        data = dataclasses.asdict(result)
        data.update(a=a.to_dict(), b=b.to_dict(), text=result.text())
        say(json.dumps(data, indent=1, default=str))
        return 0
    lines: List[str] = [f"B ({changed}) against A, interleaved: {result.text()}",
                        f"measured: {result.method}"]
    for line in lines:
        say(line)
    return 0
