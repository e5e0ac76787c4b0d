"""Command-line options built from the knob table: one option per ``RunConfig`` field.

Every knob of ``tfwb.config.KNOBS`` becomes ``--field-name VALUE``, parsed by
``Knob.parse`` (no option is written by hand); bool knobs are flags (``--prefetch``,
``--no-prefetch``, ``--prefetch=false``); ``cache`` takes ``off``, ``memory`` or
``file:PREFIX``; optional knobs take ``none``. The help text of each says what the
knob does, its default and what it allows. ``run``, ``worker`` and ``sweep`` all add
their knobs with ``add_knob_options``.

Pure: argparse and the knob table only.

Example:
    >>> import argparse
    >>> parser = argparse.ArgumentParser(formatter_class=HelpFormatter)
    >>> add_knob_options(parser)
    >>> knob_changes(parser.parse_args(["--batch-size", "32", "--no-prefetch"]))
    {'batch_size': 32, 'prefetch': False}
"""
from __future__ import annotations

import argparse
import difflib
from typing import Any, Callable, Dict, Iterable, Optional

from tfwb.config import KNOBS, RunConfig
from tfwb.knobs import GROUPS, Knob
from tfwb.workloads import resolve_factory

__all__ = ["PROG", "EXIT_INTERRUPTED", "option", "allowed_text", "default_text", "metavar", "knob_type",
           "knob_help", "BoolKnobAction", "HelpFormatter", "add_knob_options", "knob_changes", "known_options",
           "suggestion"]

#: How the command line names itself in usage and error lines.
PROG = "python -m tfwb"
#: Exit status of a command that Ctrl-C stopped (128 + SIGINT, as shells report it).
EXIT_INTERRUPTED = 130


def option(name: str) -> str:
    """The option for a knob: ``batch_size`` -> ``--batch-size``.

    Example:
        >>> option("steps_per_execution")
        '--steps-per-execution'
    """
    return "--" + name.replace("_", "-")


def allowed_text(k: Knob) -> str:
    """What a knob accepts, in the command line's own words.

    Example:
        >>> allowed_text(KNOBS["prefetch"])
        'true or false'
    """
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
    """A default as the command line writes it, with its unit (``64 examples``, ``''``).

    Example:
        >>> default_text(KNOBS["batch_size"], 64)
        '64 examples'
    """
    text = k.format(default) or "''"
    return text + (f" {k.unit}" if k.unit and default is not None else "")


def metavar(k: Knob) -> str:
    """The placeholder ``--help`` shows for a knob's value (``N``, ``{off,mixed_float16,...}``)."""
    base = {"bool": "BOOL", "int": "N", "float": "X", "spec": "SPEC", "text": "TEXT",
            "cache": "off|memory|file:PREFIX"}.get(k.kind)
    if k.kind == "choice":
        base = "{" + ",".join(k.format(c) for c in k.values()) + "}"
    return base + ("|none" if k.optional and k.kind != "spec" else "")


def knob_type(name: str, k: Knob) -> Callable[[str], Any]:
    """An argparse ``type=``: ``Knob.parse``, its ``ValueError`` an argparse error (exit 2).

    ``--workload module:function`` is resolved first (``tfwb.workloads.resolve_factory``): the
    function registers the reader's own workload, whose name the knob then takes.
    """
    def parse(text: str) -> Any:
        try:
            if name == "workload":       # "module:function" registers the reader's own workload first
                text = resolve_factory(text)
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
    """A knob's ``--help`` line: what it does, its default, what it allows."""
    text = f"{k.help}. Default: {default_text(k, default)}. Allowed: {allowed_text(k)}."
    if k.kind == "bool":
        text += f" {option(name)} alone means true."
    return text.replace("%", "%%")


def add_knob_options(parser: argparse.ArgumentParser) -> None:
    """One option per knob of ``KNOBS``, in argument groups by Workbench row.

    An option left out stays out of the namespace (``argparse.SUPPRESS``), so
    ``knob_changes`` holds only what the user gave.
    """
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


def knob_changes(args: argparse.Namespace) -> Dict[str, Any]:
    """The knobs the user gave (``{field: value}``), for ``RunConfig(**changes)``."""
    return {k: v for k, v in vars(args).items() if k in KNOBS}


def known_options(own: Iterable[str]) -> list:
    """Every option a knob command takes: the knobs, ``--no-`` for bool knobs, and its ``own`` options."""
    return ([option(n) for n in KNOBS] + ["--no-" + option(n)[2:] for n, k in KNOBS.items() if k.kind == "bool"]
            + [option(n) for n in own])


def suggestion(word: str, own: Iterable[str]) -> Optional[str]:
    """The option closest to a misspelt ``word`` (``--wokers`` -> ``--workers``), or ``None``.

    Example:
        >>> suggestion("--bach-size", ())
        '--batch-size'
    """
    close = difflib.get_close_matches(word.split("=")[0], known_options(own), n=1)
    return close[0] if close else None
