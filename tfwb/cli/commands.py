"""Command line: run one configuration, list the knobs, describe the machine, print a history.

    python -m tfwb run --batch-size 32 --prefetch --cache memory --history runs/cli.jsonl
    python -m tfwb run --prefetch --logdir logs      # + TensorBoard scalars in logs/<workload>
    python -m tfwb knobs [--markdown]
    python -m tfwb hardware [--verbose]
    python -m tfwb report runs/cli.jsonl
    TF_CONFIG='{"cluster": ...}' python -m tfwb worker --batch-size 64   # one worker of a cluster

Every knob of ``tfwb.config.KNOBS`` is an option of ``run``, derived from its
declaration (no option is written by hand): ``--field-name VALUE``, parsed by
``Knob.parse``; bool knobs are flags (``--prefetch``, ``--no-prefetch``,
``--prefetch=false``); ``cache`` takes ``off``, ``memory`` or ``file:PREFIX``;
optional knobs take ``none``. ``run --help`` lists every knob with its help, default
and allowed values.

Exit status: 0 when the run succeeded (or the command did its job), 1 when the run
failed or a file could not be read, 2 for bad options (the message names the field
and what is allowed).
"""
from __future__ import annotations

import argparse
import difflib
import json
import os
import sys
import textwrap
from typing import Any, Callable, List, Optional, TextIO

from tfwb.config import KNOBS, RunConfig
from tfwb.knobs import GROUPS, Knob

PROG = "python -m tfwb"
Runner = Callable[..., Any]                      # runner(cfg, progress=cb) -> RunResult
RUN_OPTIONS = ("history", "json", "progress", "logdir")   # run's own options, beside the knobs
WORKER_OPTIONS = ("config", "result", "history", "json")  # worker's own options, beside the knobs


# -- console text ----------------------------------------------------------------------
def say(text: str = "", *, err: bool = False) -> None:
    """All console text goes through here: stdout for results, stderr for the rest."""
    print(text, file=sys.stderr if err else sys.stdout, flush=err)


def fail(command: str, message: str) -> int:
    """Print ``python -m tfwb COMMAND: error: MESSAGE`` on stderr and return exit status 1."""
    say(f"{PROG} {command}: error: {message}", err=True)
    return 1


# -- knobs as options --------------------------------------------------------------------
def option(name: str) -> str:
    """The option for a knob: ``batch_size`` -> ``--batch-size``."""
    return "--" + name.replace("_", "-")


def allowed_text(k: Knob) -> str:
    """What a knob accepts, in the command line's own words."""
    if k.kind == "bool":
        return "true or false"
    if k.kind == "cache":
        return "off, memory, or file:PREFIX (a disk cache at PREFIX)"
    if k.kind == "choice":
        text = "one of " + ", ".join(k.format(c) for c in k.values())
        return text + (", none" if k.optional else "")
    text = k.allowed()
    return text.replace(", or None", ", or none").replace("None or ", "none or ")


def default_text(k: Knob, default: Any) -> str:
    """A default as the command line writes it, with its unit (``64 examples``, ``''``)."""
    text = k.format(default) or "''"
    return text + (f" {k.unit}" if k.unit and default is not None else "")


def metavar(k: Knob) -> str:
    base = {"bool": "BOOL", "int": "N", "float": "X", "spec": "SPEC", "text": "TEXT",
            "cache": "off|memory|file:PREFIX"}.get(k.kind)
    if k.kind == "choice":
        base = "{" + ",".join(k.format(c) for c in k.values()) + "}"
    return base + ("|none" if k.optional and k.kind != "spec" else "")


def knob_type(name: str, k: Knob) -> Callable[[str], Any]:
    """An argparse ``type=``: ``Knob.parse``, its ``ValueError`` an argparse error (exit 2)."""
    def parse(text: str) -> Any:
        try:
            return k.parse(name, text)
        except ValueError as e:
            raise argparse.ArgumentTypeError(str(e)) from None
    parse.__name__ = name          # argparse names the type in some messages
    return parse


class BoolKnobAction(argparse.Action):
    """``--flag`` (true), ``--flag=BOOL`` / ``--flag BOOL``, and ``--no-flag`` (false)."""

    def __init__(self, option_strings, dest, **kw):
        flag = option_strings[0]
        super().__init__([flag, "--no-" + flag[2:]], dest, nargs="?", const=None, **kw)

    def __call__(self, parser, namespace, values, option_string=None):
        if option_string and option_string.startswith("--no-"):
            if values is not None:
                parser.error(f"{option_string} takes no value; write {self.option_strings[0]}=true "
                             f"or {self.option_strings[0]}=false instead")
            values = False
        setattr(namespace, self.dest, True if values is None else values)


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Shows a bool knob as ``--flag [BOOL], --no-flag``."""

    def _format_action_invocation(self, action):
        if isinstance(action, BoolKnobAction):
            return f"{action.option_strings[0]} [BOOL], {action.option_strings[1]}"
        return super()._format_action_invocation(action)


def knob_help(name: str, k: Knob, default: Any) -> str:
    text = f"{k.help}. Default: {default_text(k, default)}. Allowed: {allowed_text(k)}."
    if k.kind == "bool":
        text += f" {option(name)} alone means true."
    return text.replace("%", "%%")


def add_knob_options(parser: argparse.ArgumentParser) -> None:
    """One option per knob of ``KNOBS``, in argument groups by Workbench row."""
    defaults = RunConfig(_check_workload=False)
    titles = dict(GROUPS)
    sections = {g: parser.add_argument_group(f"{title} knobs") for g, title in GROUPS}
    sections[None] = parser.add_argument_group("other knobs")
    for name, k in KNOBS.items():
        section = sections[k.group if k.group in titles else None]
        default = getattr(defaults, name)
        kw = dict(dest=name, default=argparse.SUPPRESS, type=knob_type(name, k), help=knob_help(name, k, default),
                  metavar="BOOL" if k.kind == "bool" else metavar(k))
        if k.kind == "bool":
            section.add_argument(option(name), action=BoolKnobAction, **kw)
        else:
            section.add_argument(option(name), **kw)


# -- progress on the terminal ------------------------------------------------------------
class Progress:
    """``progress(steps_done, steps_total)`` for ``tfwb.run``, drawn on a stream.

    On a terminal it rewrites one line (``\\r``); on anything else (``--progress`` into a
    pipe or a log) it writes a plain line at every tenth of the run, so a log holds no
    carriage returns.

    Args:
        stream: where to write (stderr).
        name: shown before the counter.
        warmup_steps: the first steps, labelled as warm-up.
        tty (bool | None, default None): draw in place; ``None`` asks ``stream.isatty()``.
    """

    def __init__(self, stream: TextIO, name: str, warmup_steps: int, tty: Optional[bool] = None) -> None:
        self.stream, self.name, self.warmup_steps = stream, name, warmup_steps
        self.tty = stream.isatty() if tty is None else tty
        self._width = 0
        self._tenth = -1
        self._open = False

    def text(self, done: int, total: int) -> str:
        phase = " (warm-up)" if done <= self.warmup_steps and done < total else ""
        return f"{self.name}: step {done}/{total}{phase}"

    def __call__(self, done: int, total: int) -> None:
        text = self.text(done, total)
        if self.tty:
            self.stream.write("\r" + text.ljust(self._width))
            self._width = len(text)
            self._open = True
        else:
            tenth = (10 * done) // max(total, 1)
            if tenth == self._tenth:
                return
            self._tenth = tenth
            self.stream.write(text + "\n")
        self.stream.flush()

    def close(self) -> None:
        """End the line drawn in place (after the last step, or a failure mid-run)."""
        if self._open:
            self.stream.write("\n")
            self.stream.flush()
            self._open = False


# -- the parser ----------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0],
                                     formatter_class=HelpFormatter, allow_abbrev=False)
    sub = parser.add_subparsers(dest="command", required=True, metavar="{run,worker,sweep,knobs,hardware,report}")

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
    parser.commands = {"run": run, "worker": worker, "knobs": knobs, "hardware": hw, "report": rep}
    from tfwb.cli.sweep import add_parser as add_sweep_parser    # python -m tfwb sweep (tfwb/cli/sweep.py)

    parser.commands["sweep"] = add_sweep_parser(sub)
    return parser


def parse_args(parser: argparse.ArgumentParser, argv: Optional[List[str]]) -> argparse.Namespace:
    """``parse_args``, with a suggestion for a misspelled option (exit 2)."""
    args, extra = parser.parse_known_args(argv)
    if extra:
        message = f"unrecognized arguments: {' '.join(extra)}"
        command = parser.commands.get(args.command, parser)
        if args.command in ("run", "worker"):
            own = RUN_OPTIONS if args.command == "run" else WORKER_OPTIONS
            known = [option(n) for n in KNOBS] + ["--no-" + option(n)[2:] for n, k in KNOBS.items()
                                                  if k.kind == "bool"] + [option(n) for n in own]
            first = extra[0].split("=")[0]
            close = difflib.get_close_matches(first, known, n=1)
            if close:
                message += f" (did you mean {close[0]}?)"
            message += f"; {PROG} {args.command} --help lists every knob"
        command.error(message)
    return args


# -- commands --------------------------------------------------------------------------------
def cmd_run(parser: argparse.ArgumentParser, args: argparse.Namespace, runner: Optional[Runner]) -> int:
    changes = {k: v for k, v in vars(args).items() if k in KNOBS}     # only the options given
    try:
        cfg = RunConfig(**changes)
    except ValueError as e:
        parser.error(str(e))
    from tfwb.records import append_result

    if runner is None:
        from tfwb.tf.runner.train import run as runner      # TensorFlow loads here, not for --help
    observers = {}
    if args.logdir is not None:                   # checked before any work: a bad folder exits 2
        from tfwb.tf.lab.tensorboard import Scalars, check_logdir

        try:
            observers["observers"] = (Scalars(check_logdir(args.logdir, "--logdir")),)
        except (ValueError, RuntimeError) as e:
            parser.error(str(e))
    show = sys.stderr.isatty() if args.progress is None else args.progress
    progress = Progress(sys.stderr, cfg.label or cfg.workload, cfg.warmup_steps) if show else None
    try:
        result = runner(cfg, progress=progress, **observers)
    finally:
        if progress is not None:
            progress.close()
    if args.history:
        try:
            append_result(args.history, result)
        except OSError as e:
            say(f"{PROG} run: error: the result was not saved to {args.history}: {e}", err=True)
            say(result.to_json() if args.json else result.summary())
            return 1
    say(result.to_json() if args.json else result.summary())
    for note in result.notes:
        say(f"note: {note}", err=True)
    return 0 if result.ok else 1


def worker_error(args: argparse.Namespace, message: str, status: int) -> int:
    """``worker``'s error: on stderr, and as a report line for a local cluster; returns ``status``."""
    say(f"{PROG} worker: error: {message}", err=True)
    if args.report:
        from tfwb.tfconfig import REPORT

        say(REPORT + json.dumps({"event": "error", "message": message}))
    return status


def cmd_worker(args: argparse.Namespace) -> int:
    """One worker of a TF_CONFIG cluster: checks TF_CONFIG and its own port before TensorFlow loads."""
    from tfwb import tfconfig
    from tfwb.records import append_result

    try:
        tfc = tfconfig.from_environ()
    except ValueError as e:
        return worker_error(args, str(e), 2)
    try:
        tfconfig.check_own_port(tfc)
    except ValueError as e:
        return worker_error(args, str(e), tfconfig.EXIT_PORT_TAKEN)
    tfconfig.join_local_cluster()       # a local cluster's worker: its cores, and die with the parent
    data: dict = {}
    try:
        if args.config:
            text = sys.stdin.read() if args.config == "-" else open(args.config).read()
            data = json.loads(text)
            if not isinstance(data, dict):
                raise ValueError(f"--config {args.config}: a JSON object of RunConfig fields is needed")
        changes = {k: v for k, v in vars(args).items() if k in KNOBS}
        merged = {**data, **changes}
        merged.setdefault("strategy", "parameter_server" if "ps" in tfc.cluster else "multi_worker")
        from tfwb.tf.cluster.worker import register_spec, worker_main   # TensorFlow loads here

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
        append_result(args.history, result)
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
        from tfwb.knobs import markdown_table

        say(markdown_table(RunConfig))
    else:
        say(knobs_text())
    return 0


def hardware_lines(hw: dict) -> List[str]:
    """A few lines about the machine (``hardware`` without ``--verbose``)."""
    from tfwb.hardware import describe

    lines = [f"machine:  {describe(hw)}"]
    for g in hw.get("gpus") or []:
        cc = g.get("compute_capability")
        mem = g.get("memory_total_mib")
        parts = [g.get("name") or "unknown GPU"]
        if mem:
            parts.append(f"{mem / 1024:.0f} GiB")
        if cc:
            parts.append("compute capability " + ".".join(str(c) for c in cc))
        lines.append(f"gpu {g.get('index', '?')}:    {', '.join(parts)}")
    lines.append(f"python:   {hw.get('python', '?')} on {hw.get('platform', '?')}")
    return lines


def cmd_hardware(args: argparse.Namespace) -> int:
    from tfwb import hardware

    hw = hardware.detect()
    if args.verbose:
        say(json.dumps(hw, indent=2, default=str))
    else:
        say("\n".join(hardware_lines(hw)))
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from tfwb import report
    from tfwb.records import load_results

    path = args.path
    if not os.path.exists(path):
        return fail("report", f"no such file: {path}")
    if os.path.isdir(path):
        return fail("report", f"{path} is a folder, not a results file")
    try:
        results = load_results(path)
    except ValueError as e:          # names the file and line
        return fail("report", f"{e}")
    except OSError as e:
        return fail("report", f"cannot read {path}: {e.strerror or e}")
    say(report.format_table(report.history_rows(results)))
    return 0


def main(argv: Optional[List[str]] = None, *, runner: Optional[Runner] = None) -> int:
    """Parse ``argv`` (default ``sys.argv[1:]``), run the command, return its exit status.

    Args:
        argv: the arguments after ``python -m tfwb``.
        runner: ``runner(cfg, progress=cb) -> RunResult`` for ``run`` (with ``--logdir`` also
            ``observers=(Scalars,)``); ``None`` is ``tfwb.run`` (tests pass a fake one, as to
            the Workbench).

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
            from tfwb.cli.sweep import cmd_sweep

            return cmd_sweep(parser.commands["sweep"], args, runner)
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

