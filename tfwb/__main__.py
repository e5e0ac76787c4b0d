"""Command line: run one configuration, or print the history of a results file.

    python -m tfwb run --batch-size 32 --prefetch --parallel-map --history runs.jsonl
    python -m tfwb report runs.jsonl
    python -m tfwb hardware

Every RunConfig field is an option (``--field-name VALUE``; booleans are flags with
a ``--no-`` form). Exit status: 0 when the run succeeded, 1 when it failed, 2 for
bad options (with the RunConfig message naming the field and what is allowed).
"""
from __future__ import annotations

import argparse
import json
import sys
from typing import List, Optional

from .config import RunConfig, field_names


def _parse_value(text: str):
    """'none' -> None, 'true'/'false' -> bool, numbers -> int/float, else the string."""
    low = text.lower()
    if low in ("none", "null"):
        return None
    if low in ("true", "false"):
        return low == "true"
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    return text


def _run_parser(sub) -> None:
    p = sub.add_parser("run", help="run one configuration and print its summary")
    defaults = RunConfig(_check_workload=False)
    for name in field_names():
        flag = "--" + name.replace("_", "-")
        default = getattr(defaults, name)
        if isinstance(default, bool) and name != "cache":
            p.add_argument(flag, dest=name, action=argparse.BooleanOptionalAction, default=None)
        else:
            p.add_argument(flag, dest=name, type=_parse_value, default=None, metavar="VALUE",
                           help=f"default: {default!r}")
    p.add_argument("--history", help="append the result to this JSON-lines file")
    p.add_argument("--json", action="store_true", help="print the whole result as JSON")


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tfwb", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    _run_parser(sub)
    rep = sub.add_parser("report", help="print the history table of a results file")
    rep.add_argument("path")
    sub.add_parser("hardware", help="describe this machine")
    args = parser.parse_args(argv)

    if args.command == "hardware":
        from . import hardware

        hw = hardware.detect()
        print(hardware.describe(hw))
        print(json.dumps(hw, indent=2, default=str))
        return 0
    if args.command == "report":
        from . import report
        from .records import load_results

        print(report.format_table(report.history_rows(load_results(args.path))))
        return 0
    changes = {k: v for k, v in vars(args).items() if k in field_names() and v is not None}
    try:
        cfg = RunConfig(**changes)
    except ValueError as e:
        parser.error(str(e))
    from .records import append_result
    from .tf.train import run

    result = run(cfg)
    if args.history:
        append_result(args.history, result)
    print(result.to_json() if args.json else result.summary())
    for note in result.notes:
        print("note:", note, file=sys.stderr)
    return 0 if result.ok else 1


if __name__ == "__main__":
    sys.exit(main())
