"""The import layering of tfwb, read from the source with ``ast`` (nothing is imported).

ARCHITECTURE.md (at the repository root), its layers: pure core <- utilization <- tf <- ui,
cli; nothing below imports what is above. For every module of the package, one case checks
what its module-level imports (those that run when it is imported: not inside a function,
not under ``if TYPE_CHECKING:``) may reach:

* layers: core (``tfwb/*.py``, ``advice/``, ``expect/``, ``search/``) imports only core;
  ``utilization/`` imports core and utilization; ``tf/`` imports core, utilization and tf;
  ``ui/`` and ``cli/`` import anything below them, but not each other;
* the runner (``tfwb/tf/runner/``) imports neither ``tfwb/tf/lab/`` nor ``tfwb/tf/cluster/``;
* pure modules (everything outside ``tfwb/tf/`` and ``tfwb/ui/``) import none of
  tensorflow, keras, IPython, ipywidgets or matplotlib;
* no module is on an import circle among tfwb modules: neither at module level nor
  through function-local imports (those keep TensorFlow or widgets lazy; they must not
  hide a circle). An import of the facade itself (``from tfwb import run`` in a
  function) is left out of the circles: ``tfwb/__init__.py`` names everything lazily.

``from tfwb.a import b`` counts as importing ``tfwb.a.b`` when that is a module, else
``tfwb.a``. An import also runs the ``__init__`` of every package above what it names
(``import tfwb.a.b`` runs ``tfwb/a/__init__.py`` first), so that package counts as imported
too: a circle through a package's ``__init__`` (``tfwb.advice`` -> ``tfwb.expect.rules``, whose
package ``tfwb.expect`` imported ``tfwb.advice``) is a circle. Two parents are left out: the
facade ``tfwb/__init__.py`` (it names everything lazily), and the packages the importing
module itself sits in (they are already being imported when it runs).
"""
from __future__ import annotations

import ast
from pathlib import Path
from typing import Dict, List, Optional, Set

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "tfwb"
HEAVY = ("tensorflow", "keras", "IPython", "ipywidgets", "matplotlib")
#: Layer names by rank; a module may import its own rank or lower (ui and cli: see UNRELATED).
RANKS = {"core": 0, "utilization": 1, "tf": 2, "ui": 3, "cli": 3}
UNRELATED = {("ui", "cli"), ("cli", "ui")}

#: Cases that fail while the restructure of issue 16 is under way: module -> why.
#: The lead removes these marks once every helper's work has landed.
KNOWN: Dict[str, str] = {}


def module_name(path: Path) -> str:
    """``tfwb/tf/runner/train.py`` -> ``tfwb.tf.runner.train``; a package's ``__init__`` -> the package."""
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def package_modules() -> Dict[str, Path]:
    """Every module of the package by name (pytest's conftest.py left out: it is not the library's)."""
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))
            if p.name != "conftest.py" and "__pycache__" not in p.parts}


MODULES = package_modules()


def layer(name: str) -> str:
    parts = name.split(".")
    if parts[1:2] == ["keras"]:          # tfwb.keras (the fit callback): Keras and the ui charts; ui's rank
        return "ui"
    if len(parts) > 1 and parts[1] in ("utilization", "tf", "ui", "cli"):
        return parts[1]
    if parts[1:] == ["__main__"]:
        return "cli"
    return "core"


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or \
        (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _module_level_imports(tree: ast.Module) -> List[ast.stmt]:
    """Import statements that run at import: not in a function, not under ``if TYPE_CHECKING``."""
    found: List[ast.stmt] = []

    def walk(body: List[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                found.append(node)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            elif isinstance(node, ast.If):
                if not _is_type_checking(node.test):
                    walk(node.body)
                walk(node.orelse)
            elif isinstance(node, ast.ClassDef):
                walk(node.body)
            else:
                for field in ("body", "orelse", "finalbody", "handlers"):
                    for child in getattr(node, field, []) or []:
                        walk([child] if isinstance(child, ast.stmt) else child.body)
    walk(tree.body)
    return found


def _resolve(name: str, node: ast.ImportFrom) -> Optional[str]:
    """The absolute module an ``ImportFrom`` in module ``name`` names (relative ones resolved)."""
    if not node.level:
        return node.module
    is_package = MODULES.get(name, Path()).name == "__init__.py"
    base = name.split(".")
    base = base if is_package else base[:-1]
    base = base[:len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def parent_packages(name: str, target: str) -> Set[str]:
    """The packages whose ``__init__`` importing ``target`` runs, as seen from module ``name``: every
    package above ``target`` but the facade ``tfwb`` and the packages ``name`` itself sits in."""
    parts = target.split(".")
    above = {".".join(parts[:i]) for i in range(2, len(parts))}
    return {p for p in above if p in MODULES and p != name and not name.startswith(p + ".")}


def imports_of(name: str, *, everywhere: bool = False) -> Dict[str, Set[str]]:
    """``{"tfwb": {tfwb modules imported}, "heavy": {tensorflow, keras, ... named}}`` at module level
    (``everywhere``: function-local imports too)."""
    tree = ast.parse(MODULES[name].read_text(encoding="utf-8"), filename=str(MODULES[name]))
    statements = [n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))] if everywhere \
        else _module_level_imports(tree)
    tfwb_mods: Set[str] = set()
    heavy: Set[str] = set()

    def note(target: str) -> None:
        top = target.split(".")[0]
        if top in HEAVY:
            heavy.add(top)
        elif top == "tfwb":
            while target not in MODULES and "." in target:     # an attribute of a module: the module
                target = target.rsplit(".", 1)[0]
            if target in MODULES and target != name:
                tfwb_mods.add(target)
            tfwb_mods.update(parent_packages(name, target))

    for node in statements:
        if isinstance(node, ast.Import):
            for alias in node.names:
                note(alias.name)
        else:
            base = _resolve(name, node)
            if not base:
                continue
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                note(sub if sub in MODULES else base)
    return {"tfwb": tfwb_mods, "heavy": heavy}


GRAPH = {name: imports_of(name)["tfwb"] for name in MODULES}
#: Function-local imports too; the facade ``tfwb`` as a target left out (see the module docstring).
GRAPH_ALL = {name: imports_of(name, everywhere=True)["tfwb"] - {"tfwb"} for name in MODULES}


def cycle_through(start: str, graph: Optional[Dict[str, Set[str]]] = None) -> Optional[List[str]]:
    """A shortest import circle from ``start`` back to itself in ``graph`` (default: module level), or None."""
    graph = GRAPH if graph is None else graph
    paths = {start: [start]}
    frontier = [start]
    while frontier:
        nxt = []
        for mod in frontier:
            for dep in sorted(graph.get(mod, ())):
                if dep == start:
                    return paths[mod] + [start]
                if dep not in paths:
                    paths[dep] = paths[mod] + [dep]
                    nxt.append(dep)
        frontier = nxt
    return None


def violations(name: str) -> List[str]:
    """Every way ``name``'s module-level imports break the layering (empty: none)."""
    found = []
    imports = imports_of(name)
    mine = layer(name)
    for dep in sorted(imports["tfwb"]):
        theirs = layer(dep)
        if RANKS[theirs] > RANKS[mine] or (mine, theirs) in UNRELATED:
            found.append(f"{name} ({mine}) imports {dep} ({theirs}): {mine} may not import {theirs}")
        if name.startswith("tfwb.tf.runner") and dep.startswith(("tfwb.tf.lab", "tfwb.tf.cluster")):
            found.append(f"{name} (the runner) imports {dep}: the runner imports neither tf/lab nor tf/cluster")
    if mine not in ("tf", "ui") and imports["heavy"]:
        found.append(f"{name} is pure but imports {sorted(imports['heavy'])} at module level")
    circle = cycle_through(name)
    if circle:
        found.append("import circle: " + " -> ".join(circle))
    else:
        circle = cycle_through(name, GRAPH_ALL)
        if circle:
            found.append("import circle through a function-local import: " + " -> ".join(circle))
    return found


def _case(name: str):
    marks = [pytest.mark.xfail(reason=KNOWN[name], strict=False)] if name in KNOWN else []
    return pytest.param(name, id=name, marks=marks)


@pytest.mark.parametrize("name", [_case(n) for n in MODULES])
def test_module_imports_follow_the_layering(name):
    assert violations(name) == []


# -- the checker itself ------------------------------------------------------------------------------
def test_the_checker_sees_every_module_and_the_layers():
    assert {"tfwb", "tfwb.config", "tfwb.tf.runner.train", "tfwb.ui.workbench", "tfwb.cli.commands",
            "tfwb.utilization.sampler", "tfwb.tf.lab.profiler"} <= set(MODULES)
    assert "tfwb.conftest" not in MODULES
    assert [layer(n) for n in ("tfwb.config", "tfwb.search.halving", "tfwb.utilization.sampler", "tfwb.tf.runner.train",
                               "tfwb.ui.workbench", "tfwb.cli.commands", "tfwb.__main__")] == \
        ["core", "core", "utilization", "tf", "ui", "cli", "cli"]


def test_the_checker_reads_only_imports_that_run_at_import(tmp_path, monkeypatch):
    source = (
        "from __future__ import annotations\n"
        "from typing import TYPE_CHECKING\n"
        "import matplotlib.figure\n"
        "from tfwb.ui import workbench\n"
        "from . import config\n"
        "try:\n    import keras\nexcept ImportError:\n    keras = None\n"
        "if TYPE_CHECKING:\n    import tensorflow\n"
        "def lazy():\n    import IPython\n    from tfwb.tf.runner import train\n"
        "class Holder:\n    from tfwb.tf.lab import graphs\n"
    )
    fake = tmp_path / "tfwb" / "fake_core.py"
    fake.parent.mkdir()
    fake.write_text(source)
    monkeypatch.setitem(MODULES, "tfwb.fake_core", fake)
    monkeypatch.setitem(GRAPH, "tfwb.fake_core", set())
    monkeypatch.setitem(GRAPH_ALL, "tfwb.fake_core", set())
    got = imports_of("tfwb.fake_core")
    packages = {"tfwb.ui", "tfwb.tf", "tfwb.tf.lab"}                # the __init__ files those imports run
    assert got == {"tfwb": {"tfwb.ui.workbench", "tfwb.config", "tfwb.tf.lab.graphs"} | packages,
                   "heavy": {"matplotlib", "keras"}}
    assert imports_of("tfwb.fake_core", everywhere=True)["tfwb"] == got["tfwb"] | {"tfwb.tf.runner.train",
                                                                                    "tfwb.tf.runner"}
    found = violations("tfwb.fake_core")
    assert any("imports tfwb.ui.workbench (ui)" in v for v in found)
    assert any("imports tfwb.tf.lab.graphs (tf)" in v for v in found)
    assert any("is pure but imports ['keras', 'matplotlib']" in v for v in found)


def test_the_checker_finds_a_circle_at_import_and_through_a_function(monkeypatch):
    monkeypatch.setitem(GRAPH, "tfwb.config", GRAPH["tfwb.config"] | {"tfwb.stats"})
    monkeypatch.setitem(GRAPH, "tfwb.stats", GRAPH["tfwb.stats"] | {"tfwb.config"})
    assert cycle_through("tfwb.config") == ["tfwb.config", "tfwb.stats", "tfwb.config"]
    monkeypatch.setitem(GRAPH_ALL, "tfwb.knobs", GRAPH_ALL["tfwb.knobs"] | {"tfwb.render"})
    monkeypatch.setitem(GRAPH_ALL, "tfwb.render", GRAPH_ALL["tfwb.render"] | {"tfwb.knobs"})
    assert cycle_through("tfwb.knobs") is None
    assert any(v.startswith("import circle through a function-local import: tfwb.knobs -> tfwb.render")
               for v in violations("tfwb.knobs"))


def test_the_checker_counts_a_packages_init_and_finds_a_circle_through_it(tmp_path, monkeypatch):
    """The circle of issue 33: ``advice`` imported ``tfwb.expect.rules``, whose package's ``__init__``
    imported ``advice``; without the ``__init__`` counted the checker saw no circle."""
    sources = {
        "tfwb.old_advice": ("tfwb/old_advice.py", "from tfwb.old_expect.rules import Rule\n"),
        "tfwb.old_expect": ("tfwb/old_expect/__init__.py", "from tfwb import old_advice as _advice\n"
                                                           "from tfwb.old_expect.rules import Rule\n"),
        "tfwb.old_expect.rules": ("tfwb/old_expect/rules.py", "from tfwb.old_expect.checks import Expected\n"),
        "tfwb.old_expect.checks": ("tfwb/old_expect/checks.py", "from tfwb import stats\n"),
    }
    for name, (path, text) in sources.items():
        fake = tmp_path / path
        fake.parent.mkdir(parents=True, exist_ok=True)
        fake.write_text(text)
        monkeypatch.setitem(MODULES, name, fake)
    for name in sources:
        monkeypatch.setitem(GRAPH, name, imports_of(name)["tfwb"])
        monkeypatch.setitem(GRAPH_ALL, name, imports_of(name, everywhere=True)["tfwb"] - {"tfwb"})
    assert imports_of("tfwb.old_advice")["tfwb"] == {"tfwb.old_expect.rules", "tfwb.old_expect"}
    # inside the package, its own __init__ is not a step (it is already running)
    assert imports_of("tfwb.old_expect.rules")["tfwb"] == {"tfwb.old_expect.checks"}
    assert cycle_through("tfwb.old_advice") == ["tfwb.old_advice", "tfwb.old_expect", "tfwb.old_advice"]
    assert any(v.startswith("import circle: tfwb.old_advice -> tfwb.old_expect -> tfwb.old_advice")
               for v in violations("tfwb.old_advice"))
    # the facade is never a step: every module would otherwise sit on a circle through it
    assert "tfwb" not in imports_of("tfwb.old_expect.checks")["tfwb"]


def test_tfwb_run_loads_the_cluster_runner_only_for_a_cluster_strategy():
    tree = ast.parse(MODULES["tfwb.tf.run"].read_text(encoding="utf-8"))
    at_import = [a.name if isinstance(s, ast.Import) else s.module
                 for s in _module_level_imports(tree) for a in s.names]
    assert "tfwb.tf.runner.train" in at_import                    # the checker reads this module's imports
    assert not [m for m in at_import if m and m.startswith("tfwb.tf.cluster")]
