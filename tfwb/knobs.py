"""The knob table: every RunConfig field declared once, with what it accepts and where it shows.

Each ``RunConfig`` field carries a ``Knob`` in its dataclass metadata (``knob_field(...)``
builds that metadata). Everything else is derived from the declarations:

- validation (``Knob.check``): ``ValueError`` naming the field, the value and what is allowed;
- the command line (``Knob.parse``, ``Knob.allowed``): ``python -m tfwb run --help``;
- the Workbench controls (``Knob.group``, ``Knob.kind``, ``Knob.offered``), laid out by group;
- the README / ``--help`` knob table (``markdown_table``);
- its role (``Knob.role``, one of ``ROLES``), from which the knob lists that other modules
  keep are derived (``names``: the workload registry's source and generic pipeline knobs,
  ``tfwb.expect``'s compute and input knobs, ``tfwb.diagnosis``'s hardware knobs), and
  whether ``tfwb.diagnosis`` suggests it to an input-bound run (``source``, ``pipeline``) or not;
- how a sweep treats it (``Knob.sweep``: the values a default sweep tries; ``Knob.fixed``: why
  a sweep never varies it), read by ``sweep_space`` and ``fixed_reasons``;
- when it counts as set (``Knob.is_set``: its ``off`` value, or a ``set_when`` predicate).

Adding a knob takes three things:

1. its field on ``RunConfig`` (``tfwb.config``), declared with ``knob_field(...)``: kind, allowed
   values, group, help, role, sweep treatment;
2. the code that gives it its effect (the runner, or a workload's data);
3. at most one advice entry in ``tfwb.advice.ADVICE``, keyed by its name: its expectation rule
   (a function in ``tfwb.advice.rules``), the change ``tfwb.diagnosis`` suggests and in what
   order, and the bound on what that change can gain.

Pure: no TensorFlow, no UI library.
"""
from __future__ import annotations

import dataclasses
import math
import numbers
from dataclasses import dataclass
from typing import Any, Callable, Dict, Optional, Tuple

from tfwb.renamed import deprecated_alias

#: Knob kinds. ``spec`` is a string with its own grammar (``clip``); ``cache`` is
#: False / True (memory) / a file path prefix; ``text`` is free text.
KINDS = ("bool", "choice", "int", "float", "spec", "cache", "text")

#: Workbench groups, in display order, with the row title each gets.
GROUPS: Tuple[Tuple[str, str], ...] = (
    ("input", "input pipeline"),
    ("graph", "graph & compute"),
    ("precision", "precision"),
    ("optimizer", "optimizer"),
    ("distribution", "distribution"),
    ("run", "run"),
)
GROUP_NAMES = tuple(g for g, _ in GROUPS)

#: What a knob is, for the code that treats knobs by kind of effect:
#: ``source``: how a workload's own data is read, decoded and augmented (only a workload that
#: declares it honours it); ``pipeline``: what tfwb's tf.data pipeline does to every workload's
#: data; ``compute``: how the step itself computes (precision, graph, XLA); ``distribution``:
#: how many devices or processes share the step; ``run``: what is trained and how it is
#: measured (workload, steps, optimizer, seed, labels).
ROLES = ("source", "pipeline", "compute", "distribution", "run")

_UNDECLARED = object()
#: The class whose fields are the knobs (``RunConfig``), set by ``declare`` (see there).
_DECLARED: list = []


@dataclass(frozen=True)
class Knob:
    """One knob's declaration.

    Args:
        kind: one of ``KINDS``.
        help: one line saying what the knob does (shown in ``--help``, tooltips, the README).
        group: the Workbench row it appears in (one of ``GROUP_NAMES``), or ``None``
            for fields that get no control (set them with ``wb.run(field=...)``).
        choices: the allowed values of a ``choice`` knob (a callable returning them for
            choices known only at run time, such as registered workloads).
        minimum, maximum: bounds of an ``int`` / ``float`` knob (inclusive unless
            ``exclusive_minimum``).
        exclusive_minimum: ``minimum`` itself is not allowed (``learning_rate > 0``).
        optional: ``None`` is allowed too; ``none_means`` says what it means.
        none_means: what ``None`` stands for, e.g. "the workload's default".
        unit: shown after numbers ("ms", "s", "steps", "examples").
        chapter: the chapter that teaches it (``None``: every chapter).
        offered: values a Workbench dropdown offers for a ``spec`` / optional number knob.
        log_scale: a float knob spanning decades (a log slider in the Workbench).
        validate: extra check ``validate(value) -> None`` raising ``ValueError`` (``spec`` knobs).
        role: what the knob is (one of ``ROLES``; default ``"run"``).
        sweep: the values a sweep tries when given no space, in order (``()``: a default
            sweep leaves the knob as the baseline has it; a space may still name it).
        fixed: why a sweep never varies this knob (``""``: it may be swept). A knob has
            ``sweep`` values or a ``fixed`` reason, not both.
        off: the value at which the knob does nothing (``is_set`` is ``value != off``);
            undeclared: ``False`` for bool and cache knobs, ``None`` for optional and spec knobs.
        set_when: ``set_when(value) -> bool``, when "set" needs more than one off value.

    Raises:
        ValueError: for an unknown kind, group or role, or both ``sweep`` and ``fixed``.

    Example:
        >>> k = Knob("bool", "prefetch last", role="pipeline", sweep=(False, True))
        >>> k.role, k.is_set(True), k.is_set(False)
        ('pipeline', True, False)
    """

    kind: str
    help: str
    group: Optional[str] = None
    choices: Any = ()
    minimum: Optional[float] = None
    maximum: Optional[float] = None
    exclusive_minimum: bool = False
    optional: bool = False
    none_means: str = ""
    unit: str = ""
    chapter: Optional[int] = None
    offered: Tuple[Any, ...] = ()
    log_scale: bool = False
    validate: Optional[Callable[[Any], None]] = None
    role: str = "run"
    sweep: Tuple[Any, ...] = ()
    fixed: str = ""
    off: Any = _UNDECLARED
    set_when: Optional[Callable[[Any], bool]] = None

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"kind={self.kind!r} is not allowed; kind must be one of {KINDS}")
        if self.group is not None and self.group not in GROUP_NAMES:
            raise ValueError(f"group={self.group!r} is not allowed; group must be None or one of {GROUP_NAMES}")
        if self.role not in ROLES:
            raise ValueError(f"role={self.role!r} is not allowed; role must be one of {ROLES}")
        if self.sweep and self.fixed:
            raise ValueError(f"sweep={self.sweep!r} and fixed={self.fixed!r} are not allowed together; "
                             "a knob is swept over its values or fixed for a reason")

    # -- when it counts as set ------------------------------------------------------
    def is_set(self, value: Any) -> bool:
        """Whether ``value`` turns this knob on (changes what a run does).

        Raises:
            ValueError: for a knob with neither an ``off`` value nor ``set_when`` (a batch
                size, a step count: "set" means nothing for it).

        Example:
            >>> Knob("float", "latency", optional=True).is_set(0.0)
            True
        """
        if self.set_when is not None:
            return bool(self.set_when(value))
        off = self.off
        if off is _UNDECLARED:
            if self.kind in ("bool", "cache"):
                off = False
            elif self.optional or self.kind == "spec":
                off = None
            else:
                raise ValueError(f"a {self.kind} knob without off or set_when has no 'set' state; "
                                 "declare off=... or set_when=...")
        return not (value is off or (value == off and type(value) is type(off)))

    # -- what is allowed --------------------------------------------------------
    def values(self) -> Tuple[Any, ...]:
        """The allowed values of a ``choice`` knob (resolved now)."""
        return tuple(self.choices() if callable(self.choices) else self.choices)

    def allowed(self) -> str:
        """What the knob accepts, in words (used in every error message and in ``--help``)."""
        if self.kind == "bool":
            text = "True or False"
        elif self.kind == "choice":
            text = "one of " + ", ".join(repr(c) for c in self.values())
        elif self.kind in ("int", "float"):
            what = "an integer" if self.kind == "int" else "a finite number"
            bounds = []
            if self.minimum is not None:
                bounds.append(f"{'>' if self.exclusive_minimum else '>='} {self.minimum:g}")
            if self.maximum is not None:
                bounds.append(f"<= {self.maximum:g}")
            text = what + (" " + " and ".join(bounds) if bounds else "")
        elif self.kind == "cache":
            text = "False, True (in memory) or a file path prefix (on disk)"
        elif self.kind == "spec":
            text = self.none_means or "a spec string"
            return text
        else:
            text = "a string"
        if self.optional:
            text += f", or None ({self.none_means})" if self.none_means else ", or None"
        return text

    def check(self, name: str, value: Any) -> Any:
        """Return ``value`` (NumPy scalars made plain) or raise ``ValueError`` naming field and value.

        Raises:
            ValueError: ``"<name>=<value> is not allowed; <name> must be <allowed>"``.
        """
        value = _plain(value)
        if value is None and (self.optional or self.kind == "spec"):
            if self.validate is not None:
                self.validate(value)
            return value
        ok = True
        if self.kind == "bool":
            ok = isinstance(value, bool)
        elif self.kind == "choice":
            ok = value in self.values() and not isinstance(value, bool)
        elif self.kind in ("int", "float"):
            if self.kind == "int":
                ok = isinstance(value, int) and not isinstance(value, bool)
            else:
                ok = (isinstance(value, (int, float)) and not isinstance(value, bool)
                      and math.isfinite(value))
            if ok and self.minimum is not None:
                ok = value > self.minimum if self.exclusive_minimum else value >= self.minimum
            if ok and self.maximum is not None:
                ok = value <= self.maximum
        elif self.kind == "cache":
            ok = isinstance(value, bool) or (isinstance(value, str) and bool(value.strip()))
        elif self.kind == "text":
            ok = isinstance(value, str)
        elif self.kind == "spec" and self.validate is None:
            ok = isinstance(value, str)
        if not ok:
            raise ValueError(f"{name}={value!r} is not allowed; {name} must be {self.allowed()}")
        if self.validate is not None:
            self.validate(value)
        return value

    # -- text in, value out (command line, typed Workbench values) -----------------
    def parse(self, name: str, text: str) -> Any:
        """Turn command-line text into a value this knob accepts, or raise ``ValueError``.

        ``none`` gives ``None`` where that is allowed; bools take true/false/yes/no/on/off/1/0;
        ``cache`` takes ``off``, ``memory`` or ``file:PREFIX`` (never a bare word, so
        ``--cache yes`` cannot silently become a file called "yes").
        """
        raw = text.strip()
        low = raw.lower()
        if low in ("none", "null") and (self.optional or self.kind == "spec"):
            return self.check(name, None)
        if self.kind == "bool":
            table = {"true": True, "yes": True, "on": True, "1": True,
                     "false": False, "no": False, "off": False, "0": False}
            if low not in table:
                raise ValueError(f"{name}={text!r} is not allowed; {name} must be true or false")
            return table[low]
        if self.kind == "cache":
            if low in ("off", "false", "no", "none"):
                return False
            if low in ("memory", "true", "on", "yes"):
                return True
            if raw.startswith("file:") and raw[5:].strip():
                return self.check(name, raw[5:])
            raise ValueError(f"{name}={text!r} is not allowed; {name} must be off, memory, "
                             "or file:PREFIX (a disk cache at PREFIX)")
        if self.kind in ("int", "float"):
            try:
                value: Any = int(raw) if self.kind == "int" else float(raw)
            except ValueError:
                raise ValueError(f"{name}={text!r} is not allowed; {name} must be {self.allowed()}") from None
            return self.check(name, value)
        if self.kind == "choice":
            for c in self.values():
                if str(c) == raw:
                    return c
            raise ValueError(f"{name}={text!r} is not allowed; {name} must be {self.allowed()}")
        return self.check(name, raw)

    def format(self, value: Any) -> str:
        """A value as the command line writes it (the inverse of ``parse``)."""
        if value is None:
            return "none"
        if self.kind == "cache":
            return "memory" if value is True else "off" if value is False else f"file:{value}"
        if self.kind == "bool":
            return "true" if value else "false"
        if isinstance(value, float):
            return f"{value:g}"
        return str(value)


def knob_field(default: Any, kind: str, help: str, **kw: Any) -> Any:  # noqa: A002 - mirrors argparse
    """A dataclass field with a ``Knob`` in its metadata (use inside ``RunConfig``)."""
    return dataclasses.field(default=default, metadata={"knob": Knob(kind, help, **kw)})


def _plain(value: Any) -> Any:
    """NumPy scalars (from sweeps) as plain Python numbers; bools stay bools."""
    if isinstance(value, bool) or not isinstance(value, numbers.Number):
        return value
    if isinstance(value, numbers.Integral) and not isinstance(value, int):
        return int(value)
    if isinstance(value, numbers.Real) and not isinstance(value, (int, float)):
        return float(value)
    return value


def table(cls: Any) -> Dict[str, Knob]:
    """``{field name: Knob}`` for every public field of a dataclass declared with ``knob``."""
    return {f.name: f.metadata["knob"] for f in dataclasses.fields(cls)
            if not f.name.startswith("_") and "knob" in f.metadata}


def declare(cls: Any) -> None:
    """Make ``cls`` (``RunConfig``, once ``tfwb.config`` defines it) the class whose knobs
    ``names``, ``sweep_space`` and ``fixed_reasons`` read when given no class.

    This lets the modules below ``tfwb.config`` (the workload registry, which
    ``tfwb.config`` itself imports) read the declared roles without importing it back.
    """
    _DECLARED[:] = [cls]


def declared() -> Any:
    """The class ``declare`` registered (``RunConfig``).

    Raises:
        RuntimeError: when no class was declared yet (``tfwb.config`` not imported).
    """
    if not _DECLARED:
        raise RuntimeError("no knob class declared yet: import tfwb.config first")
    return _DECLARED[0]


def names(*roles: str, cls: Any = None) -> Tuple[str, ...]:
    """The knob names with one of ``roles``, in declaration order.

    Args:
        *roles: one or more of ``ROLES``.
        cls: the dataclass whose fields are the knobs; ``None``: the declared one (``RunConfig``).

    Raises:
        ValueError: for no role or a role not in ``ROLES``.

    Example:
        >>> import tfwb.config
        >>> names("distribution")
        ('strategy', 'replicas', 'workers')
    """
    unknown = [r for r in roles if r not in ROLES]
    if unknown or not roles:
        raise ValueError(f"roles={roles!r} is not allowed; name one or more of {ROLES}")
    return tuple(n for n, k in table(cls or declared()).items() if k.role in roles)


def sweep_space(cls: Any = None) -> Dict[str, Tuple[Any, ...]]:
    """``{knob: values}`` a sweep tries when given no space, in declaration (display) order.

    Args:
        cls: the dataclass whose fields are the knobs; ``None``: the declared one (``RunConfig``).

    Example:
        >>> import tfwb.config
        >>> sweep_space()["prefetch"]
        (False, True)
    """
    return {n: tuple(k.sweep) for n, k in table(cls or declared()).items() if k.sweep}


def fixed_reasons(cls: Any = None) -> Dict[str, str]:
    """``{knob: why}`` for every knob a sweep never varies, in declaration order.

    Args:
        cls: the dataclass whose fields are the knobs; ``None``: the declared one (``RunConfig``).

    Example:
        >>> import tfwb.config
        >>> fixed_reasons()["steps"]
        "the search sets each rung's steps (min_steps, eta)"
    """
    return {n: k.fixed for n, k in table(cls or declared()).items() if k.fixed}


def markdown_table(cls: Any) -> str:
    """The knob table as Markdown: field, default, allowed values, group, chapter, what it does.

    The README's knob table is this output (a test keeps them equal); regenerate it
    with ``python -m tfwb knobs --markdown``.
    """
    defaults = cls(_check_workload=False) if "_check_workload" in {
        f.name for f in dataclasses.fields(cls)} else cls()
    lines = ["| knob | default | allowed | Workbench | chapter | what it does |",
             "|---|---|---|---|---|---|"]
    for name, k in table(cls).items():
        default = getattr(defaults, name)
        unit = f" {k.unit}" if k.unit and default is not None else ""
        chapter = "—" if k.chapter is None else f"{k.chapter:02d}"
        lines.append(f"| `{name}` | `{default!r}`{unit} | {k.allowed()} | {k.group or '—'} | "
                     f"{chapter} | {k.help} |")
    return "\n".join(lines)


def __getattr__(name: str) -> Any:
    """The tfwb 0.1 name ``knob`` (now ``knob_field``), with a DeprecationWarning (until 0.3)."""
    if name == "knob":
        return deprecated_alias(__name__, "knob", "knob_field", lambda: knob_field)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
