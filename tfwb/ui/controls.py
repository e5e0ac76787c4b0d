"""Knob controls built from the knob table: one widget per knob, chosen by its kind.

``tfwb.knobs`` declares every RunConfig field once (kind, allowed values, group,
help). This module turns a declaration into a control, so a knob added to
RunConfig with a ``group`` gets a Workbench control with no widget code:

=================================  ==============================================
kind                               control
=================================  ==============================================
``bool``, ``cache``                ``Checkbox`` (visibly ticked or not); a cache
                                   path given as a value is kept for "on"
``choice``; any knob with          ``Dropdown``; ``None`` shows as "default"
``offered`` values                 (optional knobs) or "none" (``spec``)
``int``, ``float``, ``spec``,      ``Text``, read with ``Knob.parse``: a typed
``text``                           value is honoured exactly, and a bad one turns
                                   the box red and names the field (ipywidgets'
                                   ``IntText`` would silently revert it)
=================================  ==============================================

Every control carries the CSS class ``tfwb-knob-<field>``, a description that starts
with the field name, and a tooltip with the knob's help and allowed values. Only
widget APIs present in both ipywidgets 7.7 and 8 are used.
"""
from __future__ import annotations

import abc
import html
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

import ipywidgets as W

from tfwb.knobs import GROUPS, Knob

#: CSS class on a control whose text is not a value the knob accepts.
INVALID_CLASS = "tfwb-invalid"
_IPYWIDGETS_MAJOR = int(W.__version__.split(".")[0])
_CHAR_PX = 8                 # rough width of one character of a description or option
_TEXT_INPUT_PX = {"int": 72, "float": 96, "spec": 150, "text": 150}


def set_tooltip(widget: W.Widget, text: str) -> None:
    """Set a widget's hover text: ``tooltip`` in ipywidgets 8, ``description_tooltip`` in 7."""
    if _IPYWIDGETS_MAJOR >= 8 or not hasattr(widget, "description_tooltip"):
        widget.tooltip = text
    else:
        widget.description_tooltip = text


def number_text(value: float) -> str:
    """A number as short text that reads back exactly: ``25``, ``0.001``, ``1e-05``."""
    if isinstance(value, int):
        return str(value)
    short = f"{value:g}"
    return short if float(short) == value else repr(value)


def tooltip_text(name: str, knob: Knob) -> str:
    """``RunConfig.<name>: <help> (<allowed>)``: the hover text of a knob's control."""
    unit = f" [{knob.unit}]" if knob.unit else ""
    return f"RunConfig.{name}{unit}: {knob.help}. Allowed: {knob.allowed()}."


class KnobControl(abc.ABC):
    """One knob's widget and the conversion between its state and a RunConfig value.

    Args:
        name (str): the RunConfig field.
        knob (Knob): its declaration.
        value: the field's starting value (already valid).

    Attributes:
        name, knob: as given.
        widget: the ipywidgets control (CSS class ``tfwb-knob-<name>``).

    Example:
        >>> from tfwb.config import KNOBS
        >>> c = build_control("steps", KNOBS["steps"], 40)
        >>> c.widget.value = "300"; c.read()
        300
    """

    def __init__(self, name: str, knob: Knob, value: Any) -> None:
        self.name, self.knob = name, knob
        self.widget = self._make(value)
        self.widget.add_class(f"tfwb-knob-{name}")
        set_tooltip(self.widget, tooltip_text(name, knob))

    @abc.abstractmethod
    def _make(self, value: Any) -> W.Widget:
        """Build the widget showing ``value``."""

    @abc.abstractmethod
    def read(self) -> Any:
        """The RunConfig value the control shows.

        Raises:
            ValueError: naming the field and what it allows, when the control holds
                text that is not an allowed value.
        """

    @abc.abstractmethod
    def show(self, value: Any) -> None:
        """Put an allowed RunConfig value on the control."""

    def reset(self, value: Any) -> None:
        """Go back to ``value`` and forget anything remembered (a cache path)."""
        self.show(value)

    @property
    def error(self) -> Optional[str]:
        """Why the control's state is not an allowed value (``None`` when it is)."""
        try:
            self.read()
        except ValueError as e:
            return str(e)
        return None

    def observe(self, callback: Callable[[Any], None]) -> None:
        """Call ``callback(change)`` whenever the user changes the control."""
        self.widget.observe(callback, names="value")


class ToggleControl(KnobControl):
    """``bool`` and ``cache`` knobs: a Checkbox, visibly ticked when on.

    A ``cache`` knob given a path (``cache="/tmp/c"``, in the baseline or through
    ``Workbench.run``) keeps it: ticking the box then means a cache in files at that
    path, and the tooltip says so.
    """

    def _make(self, value: Any) -> W.Widget:
        self.path: Optional[str] = value if isinstance(value, str) else None
        return W.Checkbox(value=bool(value), description=self.name, indent=False,
                          layout=W.Layout(width="auto", margin="2px 14px 2px 4px"))

    def read(self) -> Any:
        on = bool(self.widget.value)
        if self.knob.kind == "cache":
            return (self.path or True) if on else False
        return on

    def show(self, value: Any) -> None:
        if self.knob.kind == "cache" and isinstance(value, str):
            self.path = value
            set_tooltip(self.widget, tooltip_text(self.name, self.knob) + f" On: files at {value}.")
        self.widget.value = bool(value)

    def reset(self, value: Any) -> None:
        if self.knob.kind == "cache":
            self.path = None
            set_tooltip(self.widget, tooltip_text(self.name, self.knob))
        self.show(value)


class ChoiceControl(KnobControl):
    """``choice`` knobs, and any knob with ``offered`` values: a Dropdown.

    The dropdown's values are the texts it shows (ipywidgets 8 reads a ``None``
    value as "nothing selected"); a value set that is not offered yet (through
    ``Workbench.run``) becomes an option.
    """

    def _make(self, value: Any) -> W.Widget:
        offered = self.knob.values() if self.knob.kind == "choice" else self.knob.offered
        self.choices: List[Any] = list(offered)
        if value not in self.choices:
            self.choices.append(value)
        longest = max(len(self.label(c)) for c in self.choices)
        return W.Dropdown(options=self._options(), value=self.label(value), description=self.name,
                          style={"description_width": "initial"},
                          layout=W.Layout(width=f"{(len(self.name) + longest) * _CHAR_PX + 56}px"))

    def label(self, value: Any) -> str:
        """The text shown for ``value``."""
        if value is None:
            return "default" if self.knob.optional else "none"
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            text = number_text(value)
            return f"{text} {self.knob.unit}" if self.knob.unit else text
        return str(value)

    def _options(self) -> list:
        return [(self.label(c), self.label(c)) for c in self.choices]

    def read(self) -> Any:
        shown = self.widget.value
        for c in self.choices:
            if self.label(c) == shown:
                return c
        raise ValueError(f"{self.name}={shown!r} is not allowed; {self.name} must be {self.knob.allowed()}")

    def show(self, value: Any) -> None:
        if value not in self.choices:
            self.choices.append(value)
            self.widget.options = self._options()
        self.widget.value = self.label(value)


class TextControl(KnobControl):
    """``int``, ``float``, ``spec`` and ``text`` knobs without offered values: a Text box.

    The text is read with ``Knob.parse``, so a typed value is honoured exactly
    (``3e-4`` is ``0.0003``) and a value the knob does not accept turns the box red
    (CSS class ``tfwb-invalid``) instead of silently reverting. For an optional
    knob an empty box means ``None`` (the placeholder says what that means).
    """

    def _make(self, value: Any) -> W.Widget:
        placeholder = "default" if self.knob.optional else ""     # the tooltip says what it means
        input_px = _TEXT_INPUT_PX.get(self.knob.kind, 96)
        widget = W.Text(value=self.format(value), description=self.name, placeholder=placeholder,
                        continuous_update=True, style={"description_width": "initial"},
                        layout=W.Layout(width=f"{len(self.name) * _CHAR_PX + 16 + input_px}px"))
        widget.observe(self._mark, names="value")
        return widget

    @staticmethod
    def format(value: Any) -> str:
        """A value as text that reads back as exactly the same value."""
        if value is None:
            return ""
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return number_text(value)
        return str(value)

    def read(self) -> Any:
        text = self.widget.value
        if not text.strip() and self.knob.optional:
            return None
        if self.knob.kind == "text":
            return self.knob.check(self.name, text)
        return self.knob.parse(self.name, text)

    def show(self, value: Any) -> None:
        self.widget.value = self.format(value)
        self._mark()

    def _mark(self, _change: Any = None) -> None:
        if self.error is None:
            self.widget.remove_class(INVALID_CLASS)
        else:
            self.widget.add_class(INVALID_CLASS)


def build_control(name: str, knob: Knob, value: Any) -> KnobControl:
    """The control for one knob, chosen by its kind (see the module docstring).

    Args:
        name: the RunConfig field.
        knob: its declaration (``tfwb.config.KNOBS[name]``).
        value: the starting value.

    Returns:
        A ``ToggleControl``, ``ChoiceControl`` or ``TextControl``.

    Raises:
        ValueError: for a kind this module does not know.
    """
    if knob.kind in ("bool", "cache"):
        return ToggleControl(name, knob, value)
    if knob.kind == "choice" or knob.offered:
        return ChoiceControl(name, knob, value)
    if knob.kind in ("int", "float", "spec", "text"):
        return TextControl(name, knob, value)
    raise ValueError(f"no control for kind={knob.kind!r} (knob {name})")


def grouped(knobs: Mapping[str, Knob]) -> List[Tuple[str, str, Tuple[str, ...]]]:
    """``[(group, title, fields)]`` in ``tfwb.knobs.GROUPS`` order, for groups with a knob.

    Fields keep their declaration order; knobs without a group are left out.
    """
    out = []
    for group, title in GROUPS:
        fields = tuple(n for n, k in knobs.items() if k.group == group)
        if fields:
            out.append((group, title, fields))
    return out


def knob_rows(controls: Mapping[str, KnobControl], knobs: Mapping[str, Knob], *,
              title_px: int = 136) -> List[W.Widget]:
    """One titled row per group: an HBox (CSS class ``tfwb-group-<group>``) holding the
    title and a wrapping HBox of the group's controls (wrapped lines stay right of the title)."""
    rows = []
    for group, title, fields in grouped(knobs):
        label = W.HTML(f"<b style='white-space:nowrap'>{html.escape(title)}</b>",
                       layout=W.Layout(width=f"{title_px}px", min_width=f"{title_px}px"))
        body = W.HBox([controls[f].widget for f in fields if f in controls],
                      layout=W.Layout(flex_flow="row wrap", align_items="center", flex="1 1 auto"))
        row = W.HBox([label, body], layout=W.Layout(align_items="flex-start"))
        row.add_class(f"tfwb-group-{group}")
        rows.append(row)
    return rows


def build_controls(knobs: Mapping[str, Knob], values: Mapping[str, Any]) -> Dict[str, KnobControl]:
    """A control for every knob that has a group, in declaration order."""
    return {name: build_control(name, k, values[name]) for name, k in knobs.items() if k.group is not None}


def walk(widget: W.Widget) -> Sequence[W.Widget]:
    """``widget`` and every widget below it (through ``children``), depth first."""
    out, stack = [], [widget]
    while stack:
        w = stack.pop()
        out.append(w)
        stack.extend(reversed(tuple(getattr(w, "children", ()) or ())))
    return out
