"""Names that changed in tfwb 0.2, importable under their old names for one version.

tfwb 0.2 renamed modules whose names looked alike (``peaks`` and ``peak``, ``rules`` and
``rule``, ``steps`` and ``step``, ...). Old import paths still work until 0.3: importing
one gives the new module and a ``DeprecationWarning`` that names it. Renamed functions
and classes are kept the same way by the module that owns them (``deprecated_alias``).

Example:
    >>> import sys, warnings
    >>> _ = sys.modules.pop("tfwb.bounds", None)      # imported before? then importing it again says nothing
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     import tfwb.bounds as old
    >>> old.__name__, str(caught[0].message).split(";")[0]
    ('tfwb.bottleneck', 'tfwb.bounds is now tfwb.bottleneck')

Pure: standard library only. ``tfwb/__init__.py`` installs the finder.
"""
from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import warnings
from typing import Any, Callable, Dict, Optional

REMOVED_IN = "tfwb 0.3"

#: old module -> new module (tfwb 0.1 -> 0.2).
MODULES: Dict[str, str] = {
    "tfwb.peaks": "tfwb.datasheet",
    "tfwb.tf.runner.peak": "tfwb.tf.runner.matmul_peak",
    "tfwb.sweeps": "tfwb.search",
    "tfwb.sweeps.search": "tfwb.search.halving",
    "tfwb.sweeps.rule": "tfwb.search.loss_rule",
    "tfwb.sweeps.space": "tfwb.search.space",
    "tfwb.sweeps.rungs": "tfwb.search.rungs",
    "tfwb.sweeps.result": "tfwb.search.result",
    "tfwb.sweeps.progress": "tfwb.search.progress",
    "tfwb.tf.runner.step": "tfwb.tf.runner.train_step",
    "tfwb.ui.charts.steps": "tfwb.ui.charts.step_times",
    "tfwb.ui.charts.sweep": "tfwb.ui.charts.candidates",
    "tfwb.bounds": "tfwb.bottleneck",
    "tfwb.monitor": "tfwb.utilization",
    "tfwb.monitor.probes": "tfwb.utilization.probes",
    "tfwb.monitor.sampler": "tfwb.utilization.sampler",
    "tfwb.tf.lab.interleave": "tfwb.tf.lab.side_by_side",
    "tfwb.tf.lab.timing": "tfwb.tf.lab.stopwatch",
    "tfwb.tfconfig": "tfwb.cluster_spec",
}


def _warn(old: str, new: str) -> None:
    warnings.warn(f"{old} is now {new}; the old name goes in {REMOVED_IN}", DeprecationWarning, stacklevel=3)


class _Loader(importlib.abc.Loader):
    def __init__(self, new: str) -> None:
        self.new = new

    def create_module(self, spec: Any) -> Any:
        _warn(spec.name, self.new)
        return importlib.import_module(self.new)

    def exec_module(self, module: Any) -> None:
        sys.modules[self.new] = module   # the new module, already executed by import_module


class RenamedFinder(importlib.abc.MetaPathFinder):
    """Finds an old module name and hands back the new module, with a DeprecationWarning."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Optional[Any]:
        new = MODULES.get(fullname)
        if new is None:
            return None
        is_package = any(k.startswith(fullname + ".") for k in MODULES)
        return importlib.util.spec_from_loader(fullname, _Loader(new), is_package=is_package)


def install() -> None:
    """Put the finder first on ``sys.meta_path``, once: it answers only the old names, so it
    shadows nothing, and an editable install's finder (which maps every ``tfwb.*`` name to
    its own tree) cannot answer an old name first."""
    if not any(isinstance(f, RenamedFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, RenamedFinder())


def deprecated_alias(module: str, old: str, new: str, value: Callable[[], Any]) -> Any:
    """``value()`` after a DeprecationWarning that ``module.old`` is now ``module.new``.

    For a module's ``__getattr__``: ``if name == "knob": return deprecated_alias(__name__,
    "knob", "change", lambda: change)``.
    """
    _warn(f"{module}.{old}", f"{module}.{new}")
    return value()
