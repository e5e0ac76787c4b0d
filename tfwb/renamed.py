"""Names that moved in tfwb 0.3, importable under their old names for one version, with no import hook.

tfwb 0.3 gave each question one room (``ARCHITECTURE.md``): the pair comparison, the noise band, the
diagnosis and the history rows moved into ``tfwb.analysis``, the tune beside the sweep into
``tfwb.search``, the knob rules into ``tfwb.advice``, and so on (``MOVED``). Until tfwb 0.4 an old
module name still imports: it gives the new module and a ``DeprecationWarning`` that names it.

How, without touching ``sys.meta_path``: each old name has a three-line stub under ``tfwb/_moved/``
(``tfwb/_moved/pairs.py`` for ``tfwb.pairs``, ``tfwb/_moved/expect/rules.py`` for
``tfwb.expect.rules``), and a package that lost a module puts its folder there on its own
``__path__`` (``extend_path``). Python's ordinary path search finds the stub only when no real
module has the name; the stub calls ``serve``, which warns, imports the new module and files it in
``sys.modules`` under the old name too. The new module keeps its own ``__spec__``, so
``importlib.reload`` of it works as usual. Renamed functions and classes are kept the same way by
the module that owns them (``deprecated_alias``).

tfwb 0.1's names (``tfwb.bounds``, ``tfwb.sweeps``, ``tfwb.expect.knob``, ...) were served until
0.3, as promised, and are gone: the README's "Names changed" tables list them all.

Example:
    >>> import importlib, sys, warnings
    >>> old = sorted(MOVED)[0]
    >>> _ = sys.modules.pop(old, None)      # imported before? then importing it again says nothing
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     module = importlib.import_module(old)
    >>> module.__name__ == MOVED[old], str(caught[-1].message).startswith(f"{old} is now {MOVED[old]}")
    (True, True)

Pure: standard library only.
"""
from __future__ import annotations

import importlib
import sys
import warnings
from pathlib import Path
from types import ModuleType
from typing import Any, Callable, Dict, List, Tuple

REMOVED_IN = "tfwb 0.4"

#: Where the stubs of the old names live: the folder mirrors the package (``expect/rules.py``).
STUBS = Path(__file__).resolve().parent / "_moved"

#: old module -> new module (tfwb 0.2 -> 0.3). Each has a stub in ``STUBS`` (a test checks both ways).
MOVED: Dict[str, str] = {
    "tfwb.expect.rules": "tfwb.advice.rules",
    "tfwb.pairs": "tfwb.analysis.pairs",
    "tfwb.diagnosis": "tfwb.analysis.diagnosis",
    "tfwb.report": "tfwb.render",
    "tfwb.tuning": "tfwb.search.tune_loop",
}

#: old module -> the other modules its names went to; the old name then gives a module of its own
#: that holds the public names of all of them (``tfwb.report``: the words went to ``tfwb.render``,
#: the rows and the pair decision to ``tfwb.analysis``).
SPLIT: Dict[str, Tuple[str, ...]] = {
    "tfwb.report": ("tfwb.analysis.rows", "tfwb.analysis.pairs", "tfwb.analysis.noise"),
    "tfwb.pairs": ("tfwb.analysis.noise",),
    "tfwb.tuning": ("tfwb.search.tune_changes", "tfwb.search.tune_result", "tfwb.search.tune_events"),
}

#: old module -> {old name: new name} for names renamed as they moved (served under both names).
RENAMED_IN: Dict[str, Dict[str, str]] = {
    "tfwb.tuning": {"Candidate": "Change", "Trial": "TuneTrial", "candidates": "rank_changes"},
}


def _warn(old: str, new: str, stacklevel: int = 3) -> None:
    warnings.warn(f"{old} is now {new}; the old name goes in {REMOVED_IN}", DeprecationWarning,
                  stacklevel=stacklevel)


def extend_path(package: str, path: List[str]) -> None:
    """Put ``package``'s stub folder (if it has one) last on its ``__path__``: old names import, new ones win.

    Called once by each package ``__init__`` that lost a module: ``extend_path(__name__, __path__)``.
    """
    folder = STUBS.joinpath(*package.split(".")[1:])
    if folder.is_dir() and str(folder) not in path:
        path.append(str(folder))


def serve(old: str) -> ModuleType:
    """The module that ``old`` names now, after a ``DeprecationWarning``; ``sys.modules[old]`` is it.

    A stub's whole body is ``serve(__name__)``: the import system then hands out what
    ``sys.modules`` holds under the old name, the new module itself (for a module whose names went
    to several, ``SPLIT``: a module of its own holding all their public names).

    Raises:
        KeyError: ``old`` is not in ``MOVED``.
    """
    new = MOVED[old]
    _warn(old, new + "".join(f" and {m}" for m in SPLIT.get(old, ())), stacklevel=4)
    module = importlib.import_module(new)
    if old in SPLIT:                        # a module of its own, holding the public names of each
        module = ModuleType(old, module.__doc__)
        for name in reversed((new,) + SPLIT[old]):          # the first named wins a name two hold
            source = importlib.import_module(name)
            public = getattr(source, "__all__", None) or [n for n in vars(source) if not n.startswith("_")]
            module.__dict__.update({n: getattr(source, n) for n in public if hasattr(source, n)})
        module.__dict__.update({was: getattr(module, now) for was, now in RENAMED_IN.get(old, {}).items()})
    sys.modules[old] = module
    return module


def forward(module: str, moved: Dict[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` for names that left it, each with a ``DeprecationWarning`` naming its place.

    Args:
        module: the module's ``__name__``.
        moved: old name -> ``"new.module"`` (same name there) or ``"new.module:new_name"``.

    Example:
        >>> import warnings
        >>> __getattr__ = forward("tfwb.old_place", {"median": "tfwb.stats", "mid": "tfwb.stats:median"})
        >>> with warnings.catch_warnings(record=True) as caught:
        ...     warnings.simplefilter("always")
        ...     f = __getattr__("mid")
        >>> f([1, 2, 3]), str(caught[0].message).split(";")[0]
        (2.0, 'tfwb.old_place.mid is now tfwb.stats.median')
    """
    def __getattr__(name: str) -> Any:
        if name not in moved:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        where, _, new_name = moved[name].partition(":")
        _warn(f"{module}.{name}", f"{where}.{new_name or name}")
        return getattr(importlib.import_module(where), new_name or name)
    return __getattr__


def deprecated_alias(module: str, old: str, new: str, value: Callable[[], Any]) -> Any:
    """``value()`` after a DeprecationWarning that ``module.old`` is now ``module.new``.

    For a module's ``__getattr__``: ``if name == "bound_of": return deprecated_alias(__name__,
    "bound_of", "limit_of", lambda: limit_of)``.
    """
    _warn(f"{module}.{old}", f"{module}.{new}")
    return value()
