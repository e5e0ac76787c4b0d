"""The knob space a sweep searches: the default space, checking a space, its candidates.

A space is ``{knob: values}``, checked against the knob table (``tfwb.config.KNOBS``):
every knob a ``RunConfig`` field that a sweep may vary and that the baseline's workload
honours, every value one the knob allows. How a sweep treats a knob is declared on the
knob (``Knob.sweep``: the values a default sweep tries; ``Knob.fixed``: why it never
varies): ``default_space`` and ``FIXED_KNOBS`` are derived from those declarations. Every combination of the values, applied to
the baseline, is a *candidate*; a combination ``RunConfig`` refuses is skipped with the
reason. A run's identity in a history (``run_key``) is its whole configuration but the label.

Pure: no TensorFlow, no UI library.

Example:
    >>> check_space({"prefetch": [True, False, True]})
    {'prefetch': (True, False)}
    >>> [c.label for c in candidates(RunConfig(), {"prefetch": [False, True]})[0]]
    ['naive', 'prefetch']
"""
from __future__ import annotations

import itertools
import json
from dataclasses import dataclass
from typing import Any, Dict, Iterable, List, Mapping, Sequence, Tuple

from tfwb import render
from tfwb.config import KNOBS, RunConfig
from tfwb.knobs import fixed_reasons, sweep_space
from tfwb.workloads import get_workload

__all__ = ["NAIVE", "FIXED_KNOBS", "Space", "default_space", "check_space", "Candidate",
           "label_for", "candidates", "run_key"]

#: A checked space: ``{knob: tuple of values}``, in the order given.
Space = Dict[str, Tuple[Any, ...]]
#: The label of the naive (baseline) configuration.
NAIVE = "naive"
#: Knobs a sweep never varies, and why (the message a space naming one gets): each
#: knob's ``fixed`` reason (``tfwb.knobs.fixed_reasons``).
FIXED_KNOBS: Mapping[str, str] = fixed_reasons(RunConfig)


def default_space(workload: str = "images") -> Space:
    """The space a sweep searches when given none, without the knobs ``workload`` does not honour.

    Every knob declared with ``sweep=(values...)`` (``tfwb.knobs.sweep_space``): the
    speed knobs that leave the training mathematically the same (up to rounding), over
    the values worth trying on any machine.

    Args:
        workload: a registered workload's name.

    Returns:
        ``{knob: values}``, in the knob table's order.

    Raises:
        ValueError: for a workload that is not registered (naming the registered ones).

    Example:
        >>> sorted(default_space("mlp"))
        ['cache', 'jit_compile', 'mixed_precision', 'prefetch']
    """
    w = get_workload(workload)
    return {name: values for name, values in sweep_space(RunConfig).items() if w.applies(name)}


def check_space(space: Mapping[str, Iterable[Any]], workload: str = "images") -> Space:
    """The space with every knob and value checked, values deduplicated in order.

    Args:
        space: ``{knob: values}``, e.g. ``{"prefetch": [False, True]}``.
        workload: the workload the sweep trains (a knob it does not honour is refused).

    Returns:
        ``{knob: tuple of values}`` in the given order.

    Raises:
        ValueError: for an empty space, an unknown knob (listing the knobs), a knob the
            search sets itself (``FIXED_KNOBS``, saying why), a knob the workload does
            not honour, no values, or a value the knob does not allow (naming the knob,
            the value and what is allowed).

    Example:
        >>> check_space({"prefetch": [True, False, True]})
        {'prefetch': (True, False)}
    """
    if not isinstance(space, Mapping) or not space:
        raise ValueError(f"space={space!r} is not allowed; space must be a non-empty mapping of "
                         "knob -> values, e.g. {'prefetch': [False, True]}")
    w = get_workload(workload)
    out: Space = {}
    for name, values in space.items():
        if name not in KNOBS:
            raise ValueError(f"knob {name!r} is not a RunConfig field; a space may name: "
                             + ", ".join(n for n in KNOBS if n not in FIXED_KNOBS))
        if name in FIXED_KNOBS:
            raise ValueError(f"knob {name!r} cannot be swept: {FIXED_KNOBS[name]}")
        if not w.applies(name):
            raise ValueError(f"knob {name!r} does not apply to workload {workload!r} (its data does not "
                             "honour it): leave it out of the space")
        if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
            raise ValueError(f"space[{name!r}]={values!r} is not allowed; give a list of values, "
                             f"e.g. [{KNOBS[name].format(getattr(RunConfig(_check_workload=False), name))!s}, ...]")
        checked: List[Any] = []
        for value in values:
            value = KNOBS[name].check(name, value)
            if not any(value == v and type(value) is type(v) for v in checked):
                checked.append(value)
        if not checked:
            raise ValueError(f"space[{name!r}] is empty; give at least one value ({KNOBS[name].allowed()})")
        out[name] = tuple(checked)
    return out


@dataclass(frozen=True)
class Candidate:
    """One configuration of the space.

    Attributes:
        index: its position in the space's product order (0-based).
        config: the RunConfig (its ``label`` says what it changes).
        changes: ``{knob: value}`` where it differs from the baseline (``{}``: the naive one).
    """

    index: int
    config: RunConfig
    changes: Mapping[str, Any]

    @property
    def label(self) -> str:
        """What it changes from the baseline (``"prefetch, cache"``), or ``"naive"``."""
        return self.config.label

    @property
    def is_naive(self) -> bool:
        """True for the baseline itself (it changes nothing)."""
        return not self.changes


def label_for(config: RunConfig, baseline: RunConfig) -> str:
    """What ``config`` changes from ``baseline``, short (``"prefetch, cache"``), or ``"naive"``.

    Example:
        >>> label_for(RunConfig(prefetch=True), RunConfig())
        'prefetch'
    """
    items = render.short_changes(config, baseline)
    return ", ".join(items) if items else NAIVE


def candidates(baseline: RunConfig, space: Mapping[str, Sequence[Any]]
               ) -> Tuple[List[Candidate], List[Tuple[Dict[str, Any], str]]]:
    """Every configuration of ``space`` applied to ``baseline``, and the combinations refused.

    Combinations ``RunConfig`` refuses (e.g. ``jit_compile=True`` with ``execution="eager"``)
    are skipped with the reason; duplicates (a combination equal to another) appear once.

    Args:
        baseline: the configuration every candidate changes.
        space: ``{knob: values}`` (checked with ``check_space``).

    Returns:
        ``(candidates, skipped)``; ``skipped`` holds ``(changes, reason)`` pairs.

    Example:
        >>> cands, skipped = candidates(RunConfig(execution="eager"), {"jit_compile": [False, True]})
        >>> [c.label for c in cands], len(skipped)
        (['naive'], 1)
    """
    names = list(space)
    out: List[Candidate] = []
    skipped: List[Tuple[Dict[str, Any], str]] = []
    seen = set()
    for combo in itertools.product(*(space[n] for n in names)):
        change = dict(zip(names, combo))
        try:
            cfg = baseline.replace(**change)
        except ValueError as e:
            skipped.append((change, str(e)))
            continue
        key = run_key(cfg)
        if key in seen:
            continue
        seen.add(key)
        diff = dict(cfg.diff(baseline))
        cfg = cfg.replace(label=label_for(cfg, baseline))
        out.append(Candidate(len(out), cfg, diff))
    return out, skipped


def run_key(cfg: RunConfig) -> str:
    """The identity of a run in a history: its whole configuration but the label.

    Example:
        >>> run_key(RunConfig(label="a")) == run_key(RunConfig(label="b"))
        True
    """
    data = cfg.to_dict()
    data.pop("label", None)
    return json.dumps(data, sort_keys=True, default=str)
