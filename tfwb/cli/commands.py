"""Command line: run one configuration, list the knobs, describe the machine, print a history.

    python -m tfwb run --batch-size 32 --prefetch --cache memory --history runs/cli.jsonl
    python -m tfwb run --prefetch --logdir logs      # + TensorBoard scalars in logs/<workload>
    python -m tfwb knobs [--markdown]
    python -m tfwb hardware [--verbose]
    python -m tfwb report runs/cli.jsonl
    TF_CONFIG='{"cluster": ...}' python -m tfwb worker --batch-size 64   # one worker of a cluster
    python -m tfwb sweep --knob prefetch=false,true --out runs/sweep    # tfwb.cli.sweep
    python -m tfwb tune --workload mlp --max-runs 4                     # tfwb.cli.tune
    python -m tfwb compare --workload mlp --b prefetch=true             # tfwb.cli.compare: A vs B interleaved

Every knob of ``tfwb.config.KNOBS`` is an option of ``run`` (``tfwb.cli.options``:
``--field-name VALUE``, parsed by ``Knob.parse``; ``run --help`` lists every knob with
its help, default and allowed values). ``run`` calls its runner as every caller does,
``runner(cfg, observers)``; it prints the run's summary (with its MFU: ``RunResult.mfu_text``)
and one line per suggestion with the most it can gain (``suggestion_lines``). The step
counter on stderr is a ``tfwb.observers.Progress`` drawn by ``tfwb.cli.drawer.Drawer``, and Ctrl-C sets a ``tfwb.observers.StopFlag``
(through ``tfwb.interrupts.InterruptBridge``), so the run ends after its current step,
recorded as interrupted. ``--history`` appends to a ``tfwb.history.History``.

Imports: this module imports ``tfwb.cli.sweep``, ``tfwb.cli.tune`` and ``tfwb.cli.compare``, which import ``options``
and ``drawer``, never this module.

Exit status: 0 when the run succeeded (or the command did its job), 1 when the run
failed or a file could not be read, 2 for bad options (the message names the field
and what is allowed), 130 when Ctrl-C stopped the run.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import textwrap
from typing import Any, Callable, List, Optional, Sequence

from tfwb import hardware, cluster_spec
from tfwb.analysis.diagnosis import diagnose
from tfwb.analysis.rows import history_rows
from tfwb.cli import compare as compare_command
from tfwb.cli import sweep as sweep_command
from tfwb.cli import tune as tune_command
from tfwb.cli.drawer import Drawer, say, stderr_for_drawing
from tfwb.cli.options import (EXIT_INTERRUPTED, PROG, HelpFormatter, add_knob_options, allowed_text, default_text,
                              knob_changes, option, suggestion)
from tfwb.config import KNOBS, RunConfig
from tfwb.history import History
from tfwb.interrupts import InterruptBridge
from tfwb.knobs import GROUPS, markdown_table
from tfwb.observers import Observer, Progress, StopFlag
from tfwb.records import RunResult
from tfwb.render import format_table

__all__ = ["main", "build_parser", "parse_args", "knobs_text", "hardware_lines", "suggestion_lines", "Runner"]

#: ``runner(cfg, observers) -> RunResult``: ``tfwb.run``, or a fake in tests.
Runner = Callable[[RunConfig, Sequence[Observer]], RunResult]
RUN_OPTIONS = ("history", "json", "progress", "logdir")   # run's own options, beside the knobs
WORKER_OPTIONS = ("config", "result", "history", "json")  # worker's own options, beside the knobs


def fail(command: str, message: str) -> int:
    """Print ``python -m tfwb COMMAND: error: MESSAGE`` on stderr and return exit status 1."""
    say(f"{PROG} {command}: error: {message}", err=True)
    return 1


# -- the parser ----------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0],
                                     formatter_class=HelpFormatter, allow_abbrev=False)
    sub = parser.add_subparsers(dest="command", required=True, metavar="{run,worker,sweep,tune,compare,knobs,hardware,report}")

    run = sub.add_parser(
        "run", help="run one configuration and print its summary", formatter_class=HelpFormatter,
        allow_abbrev=False,
        usage=f"{PROG} run [--KNOB VALUE ...] [--history PATH] [--logdir DIR] [--json] [--progress]",
        description="Run one configuration and print its one-line summary (exit 0 when it ran, "
                    "1 when it failed, 2 for a bad option). Every knob below is a RunConfig field; "
                    "leave one out for its default. Write none for an optional knob's None.")
    run.add_argument("--history", metavar="PATH",
                     help="append the result to this JSON-lines file (its folder is created)")
    run.add_argument("--logdir", metavar="DIR",
                     help="write TensorBoard scalars (step time, input wait, loss, utilization) under "
                          "DIR/<label or workload>; open with: tensorboard --logdir DIR")
    run.add_argument("--json", action="store_true", help="print the whole result as JSON")
    run.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                     help="show the step counter on stderr (default: only when stderr is a terminal)")
    add_knob_options(run)

    worker = sub.add_parser(
        "worker", help="run one configuration as one worker of a TF_CONFIG cluster (multi_worker)",
        formatter_class=HelpFormatter, allow_abbrev=False,
        usage=f"TF_CONFIG=JSON {PROG} worker [--KNOB VALUE ...] [--config PATH] [--result PATH] "
              "[--history PATH] [--json]",
        description="Run this process's part of a multi-worker cluster: TF_CONFIG (from the environment) "
                    "says where every worker listens and which one this is; start the same command, with "
                    "the same knobs, on every machine of the cluster. The strategy is multi_worker "
                    "(parameter_server when TF_CONFIG has a ps job: the chief trains, workers and ps serve). "
                    "Exit 0 when the run succeeded, 1 when it failed, 2 for a bad option or TF_CONFIG, "
                    "3 when this worker's port is taken. tfwb.run(strategy='multi_worker') starts such "
                    "workers on this machine by itself.")
    worker.add_argument("--config", metavar="PATH",
                        help="a RunConfig as a JSON object (a file, or - for stdin); knob options override it")
    worker.add_argument("--result", metavar="PATH", help="write the whole result as JSON to this file")
    worker.add_argument("--history", metavar="PATH",
                        help="append the result to this JSON-lines file (its folder is created)")
    worker.add_argument("--json", action="store_true", help="print the whole result as JSON")
    worker.add_argument("--report", action="store_true", help=argparse.SUPPRESS)       # for the local cluster
    worker.add_argument("--workload-spec", metavar="JSON", help=argparse.SUPPRESS)     # likewise
    add_knob_options(worker)

    knobs = sub.add_parser("knobs", help="print every knob: default, allowed values, what it does",
                           allow_abbrev=False)
    knobs.add_argument("--markdown", action="store_true", help="the Markdown table the README shows")

    hw = sub.add_parser("hardware", help="describe this machine", allow_abbrev=False)
    hw.add_argument("--verbose", action="store_true", help="print everything detected, as JSON")

    rep = sub.add_parser("report", help="print the history table of a results file", allow_abbrev=False)
    rep.add_argument("path", help="a JSON-lines results file (run --history, or a Workbench's history_path)")
    parser.commands = {"run": run, "worker": worker, "knobs": knobs, "hardware": hw, "report": rep,
                       "sweep": sweep_command.add_parser(sub), "tune": tune_command.add_parser(sub),
                       "compare": compare_command.add_parser(sub)}
    return parser


def parse_args(parser: argparse.ArgumentParser, argv: Optional[List[str]]) -> argparse.Namespace:
    """``parse_args``, with a suggestion for a misspelled option (exit 2)."""
    args, extra = parser.parse_known_args(argv)
    if extra:
        message = f"unrecognized arguments: {' '.join(extra)}"
        command = parser.commands.get(args.command, parser)
        if args.command in ("run", "worker", "tune", "compare"):
            own = {"run": RUN_OPTIONS, "worker": WORKER_OPTIONS, "tune": tune_command.TUNE_OPTIONS,
                   "compare": compare_command.COMPARE_OPTIONS}[args.command]
            close = suggestion(extra[0], own)
            if close:
                message += f" (did you mean {close}?)"
            message += f"; {PROG} {args.command} --help lists every knob"
        command.error(message)
    return args


# -- commands --------------------------------------------------------------------------------
def run_status(result: RunResult) -> int:
    """A run's exit status: 0 when it succeeded, 130 when Ctrl-C stopped it, 1 when it failed."""
    if result.ok:
        return 0
    return EXIT_INTERRUPTED if result.status == "interrupted" else 1


def cmd_run(parser: argparse.ArgumentParser, args: argparse.Namespace, runner: Optional[Runner]) -> int:
    try:
        cfg = RunConfig(**knob_changes(args))        # only the options given
    except ValueError as e:
        parser.error(str(e))
    observers: List[Observer] = []
    if args.logdir is not None:                   # checked before any work: a bad folder exits 2
        from tfwb.tf.lab.tensorboard import Scalars, check_logdir   # lazy: imports TensorFlow

        try:
            observers.append(Scalars(check_logdir(args.logdir, "--logdir")))
        except (ValueError, RuntimeError) as e:
            parser.error(str(e))
    if runner is None:
        from tfwb import run as runner               # lazy: TensorFlow loads here, not for --help
    show = sys.stderr.isatty() if args.progress is None else args.progress
    stop = StopFlag()                             # Ctrl-C: the run ends after its step, "interrupted"
    with stderr_for_drawing() as err:
        drawer = Drawer(err) if show else None
        if drawer is not None:
            observers.append(Progress(drawer.steps(cfg.label or cfg.workload,      # warm-up in whole calls
                                                   cfg.calls[0] * cfg.steps_per_execution)))
        observers.append(stop)
        try:
            with InterruptBridge(lambda: stop.set("interrupted by the user (Ctrl-C)", interrupted=True),
                                 inline=True):
                result = runner(cfg, observers)
        finally:
            if drawer is not None:
                drawer.close()
    if args.history:
        try:
            History(args.history).append(result)
        except OSError as e:
            say(f"{PROG} run: error: the result was not saved to {args.history}: {e}", err=True)
            say(result.to_json() if args.json else result.summary())
            return 1
    say(result.to_json() if args.json else result.summary())
    if not args.json:
        for line in suggestion_lines(result):
            say(line)
    for note in result.notes:
        say(f"note: {note}", err=True)
    return run_status(result)


def suggestion_lines(result: RunResult) -> List[str]:
    """One line per suggestion of the run's diagnosis: the change, why, and the most it can gain.

    Example:
        >>> line = suggestion_lines(result)[0]      # a run that waits 30 % of each step for input
        >>> line.split(": ")[0], line.split("; ")[1]
        ('try interleave=True', 'interleave: removing the input wait (30 % of the step) gains at most 1.4x')
    """
    d = diagnose(result)
    return [f"try {knob}={value!r}: {why}; {b.text}" for (knob, value, why), b in zip(d.suggestions, d.bounds)]


def worker_error(args: argparse.Namespace, message: str, status: int) -> int:
    """``worker``'s error: on stderr, and as a report line for a local cluster; returns ``status``."""
    say(f"{PROG} worker: error: {message}", err=True)
    if args.report:
        say(cluster_spec.REPORT + json.dumps({"event": "error", "message": message}))
    return status


def cmd_worker(args: argparse.Namespace) -> int:
    """One worker of a TF_CONFIG cluster: checks TF_CONFIG and its own port before TensorFlow loads."""
    try:
        tfc = cluster_spec.from_environ()
    except ValueError as e:
        return worker_error(args, str(e), 2)
    try:
        cluster_spec.join_local_cluster()   # a local cluster's worker: its private network, its cores, die with the parent
    except OSError as e:
        return worker_error(args, str(e), 1)
    try:
        cluster_spec.check_own_port(tfc)    # in the network its server will listen in
    except ValueError as e:
        return worker_error(args, str(e), cluster_spec.EXIT_PORT_TAKEN)
    data: dict = {}
    try:
        if args.config:
            text = sys.stdin.read() if args.config == "-" else open(args.config).read()
            data = json.loads(text)
            if not isinstance(data, dict):
                raise ValueError(f"--config {args.config}: a JSON object of RunConfig fields is needed")
        merged = {**data, **knob_changes(args)}
        merged.setdefault("strategy", "parameter_server" if "ps" in tfc.cluster else "multi_worker")
        from tfwb.tf.cluster.worker import register_spec, worker_main   # lazy: TensorFlow loads here

        register_spec(json.loads(args.workload_spec) if args.workload_spec else None)
        cfg = RunConfig.from_dict(merged)
        if cfg.strategy not in ("multi_worker", "parameter_server"):
            raise ValueError(f"strategy={cfg.strategy!r} is not allowed for a worker; a worker runs "
                             "strategy='multi_worker' or 'parameter_server'")
    except OSError as e:
        return worker_error(args, f"--config {args.config}: {e.strerror or e}", 2)
    except ValueError as e:           # bad JSON (a ValueError too), a bad knob, a workload that will not load
        return worker_error(args, str(e), 2)
    try:
        result = worker_main(cfg, report=args.report)
    except ValueError as e:
        return worker_error(args, str(e), 2)
    except Exception as e:  # noqa: BLE001 - TensorFlow could not join the cluster (its server, its peers)
        return worker_error(args, f"{type(e).__name__}: {e}", 1)
    if args.result:
        with open(args.result, "w") as fh:
            fh.write(result.to_json() + "\n")
    if args.history:
        History(args.history).append(result)
    if not args.report:
        say(result.to_json() if args.json else result.summary())
        for note in result.notes:
            say(f"note: {note}", err=True)
    # Everything is written: end without TensorFlow's teardown (seconds of deleting a
    # distributed iterator; tfwb.tf.runner.strategies keeps them for that reason).
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0 if result.ok else 1)


def knobs_text() -> str:
    """Every knob in plain text: ``name = default  [row, chapter]``, help, allowed values."""
    defaults = RunConfig(_check_workload=False)
    blocks = []
    for name, k in KNOBS.items():
        default = getattr(defaults, name)
        where = [f"Workbench row: {dict(GROUPS)[k.group]}" if k.group else "no Workbench control"]
        if k.chapter is not None:
            where.append(f"chapter {k.chapter:02d}")
        lines = [f"{option(name)}  (default {default_text(k, default)}; {', '.join(where)})"]
        lines += textwrap.wrap(k.help, 84, initial_indent="    ", subsequent_indent="    ")
        lines += textwrap.wrap(f"allowed: {allowed_text(k)}", 84, initial_indent="    ",
                               subsequent_indent="      ")
        blocks.append("\n".join(lines))
    return "\n".join(blocks)


def cmd_knobs(args: argparse.Namespace) -> int:
    if args.markdown:
        say(markdown_table(RunConfig))
    else:
        say(knobs_text())
    return 0


def hardware_lines(hw: hardware.MachineLike) -> List[str]:
    """A few lines about the machine (``hardware`` without ``--verbose``)."""
    hw = hardware.Machine.of(hw)
    lines = [f"machine:  {hardware.describe(hw)}"]
    for g in hw.gpus:
        cc = g.compute_capability
        mem = g.memory_total_mib
        parts = [g.name or "unknown GPU"]
        if mem:
            parts.append(f"{mem / 1024:.0f} GiB")
        if cc:
            parts.append("compute capability " + ".".join(str(c) for c in cc))
        lines.append(f"gpu {g.index}:    {', '.join(parts)}")
    lines.append(f"python:   {hw.python or '?'} on {hw.platform or '?'}")
    return lines


def cmd_hardware(args: argparse.Namespace) -> int:
    hw = hardware.detect()
    if args.verbose:
        say(json.dumps(hw.to_dict(), indent=2))
    else:
        say("\n".join(hardware_lines(hw)))
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    """The history table of a results file; a line that is not a complete run is named and skipped.

    Exit 1 when the file is missing, unreadable, or holds lines but not one complete run.
    """
    path = args.path
    if not os.path.exists(path):
        return fail("report", f"no such file: {path}")
    if os.path.isdir(path):
        return fail("report", f"{path} is a folder, not a results file")
    history = History(path)
    try:
        results = history.load()
    except OSError as e:
        return fail("report", f"cannot read {path}: {e.strerror or e}")
    for line, why in history.skipped:
        say(f"{PROG} report: {path}, line {line} skipped: {why}", err=True)
    if history.skipped and not results:
        return fail("report", f"{path} holds no complete run ({len(history.skipped)} line(s) skipped): "
                              "is it a results file (run --history, a Workbench's history_path)?")
    say(format_table(history_rows(results)))
    return 0


def main(argv: Optional[List[str]] = None, *, runner: Optional[Runner] = None,
         compare: Optional[Callable[..., Any]] = None) -> int:
    """Parse ``argv`` (default ``sys.argv[1:]``), run the command, return its exit status.

    Args:
        argv: the arguments after ``python -m tfwb``.
        runner: ``runner(cfg, observers) -> RunResult`` for ``run``, ``sweep`` and ``tune`` (the
            observers: the step counter, the stop flag Ctrl-C sets, with ``--logdir`` the
            TensorBoard scalars); ``None`` is ``tfwb.run`` (tests pass a fake one, as to the
            Workbench).
        compare: ``compare``'s interleaved comparison (``None``: ``tfwb.compare_interleaved``; tests pass
            a fake one).

    Example:
        >>> main(["knobs", "--markdown"])  # doctest: +SKIP

    Raises:
        SystemExit: with status 2 for bad options (and 0 for ``--help``).
    """
    parser = build_parser()
    args = parse_args(parser, argv)
    try:
        if args.command == "run":
            return cmd_run(parser, args, runner)
        if args.command == "worker":
            return cmd_worker(args)
        if args.command == "sweep":
            return sweep_command.cmd_sweep(parser.commands["sweep"], args, runner)
        if args.command == "tune":
            return tune_command.cmd_tune(parser.commands["tune"], args, runner)
        if args.command == "compare":
            return compare_command.cmd_compare(parser.commands["compare"], args, compare)
        if args.command == "knobs":
            return cmd_knobs(args)
        if args.command == "hardware":
            return cmd_hardware(args)
        return cmd_report(args)
    except BrokenPipeError:
        # The reader went away (`... | head`): stop quietly, as Python's docs advise.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 1

