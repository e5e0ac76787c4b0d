"""Names that moved in tfwb 0.3 import for one more version, with a DeprecationWarning, and no import hook."""
from __future__ import annotations

import importlib
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from tfwb import renamed

ROOT = Path(__file__).resolve().parents[1]
OLD = sorted(renamed.MOVED)


def _stub(old: str) -> Path:
    return renamed.STUBS.joinpath(*old.split(".")[1:]).with_suffix(".py")


@pytest.mark.parametrize("old", OLD)
def test_every_moved_name_has_a_stub_a_new_module_and_no_old_file(old):
    new = renamed.MOVED[old]
    as_path = ROOT / Path(*new.split("."))
    assert as_path.with_suffix(".py").exists() or (as_path / "__init__.py").exists(), new
    old_path = ROOT / Path(*old.split("."))
    assert not old_path.with_suffix(".py").exists() and not (old_path / "__init__.py").exists(), old
    assert f"serve(__name__)" in _stub(old).read_text(encoding="utf-8")


def test_every_stub_is_a_moved_name():
    stubs = {"tfwb." + ".".join(p.relative_to(renamed.STUBS).with_suffix("").parts)
             for p in renamed.STUBS.rglob("*.py") if "__pycache__" not in p.parts}
    assert stubs == set(renamed.MOVED)


@pytest.mark.parametrize("old", OLD)
def test_an_old_module_name_gives_the_new_module_and_a_warning(old, monkeypatch):
    monkeypatch.delitem(sys.modules, old, raising=False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        module = importlib.import_module(old)
    new = importlib.import_module(renamed.MOVED[old])
    said = [str(w.message).split(";")[0] for w in caught if w.category is DeprecationWarning]
    assert any(s.startswith(f"{old} is now {renamed.MOVED[old]}") for s in said), said
    if old in renamed.SPLIT:                  # its names went to several modules: it holds them all
        seen = set()
        for name in (renamed.MOVED[old],) + renamed.SPLIT[old]:       # the first named wins a shared name
            part = importlib.import_module(name)
            public = set(getattr(part, "__all__", None) or [n for n in vars(part) if not n.startswith("_")])
            assert all(getattr(module, n) is getattr(part, n) for n in public - seen if hasattr(part, n)), name
            seen |= public
        return
    assert module is new
    assert module.__spec__.name == renamed.MOVED[old]          # its own spec: reload works on it
    assert importlib.reload(module) is module


def test_import_tfwb_leaves_the_import_system_alone():
    code = ("import sys; before = list(sys.meta_path), list(sys.path_hooks); import tfwb; "
            "print(before == (list(sys.meta_path), list(sys.path_hooks)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert out.stdout.strip() == "True"


def test_a_name_that_never_existed_still_fails_to_import():
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("tfwb.no_such_module")
    with pytest.raises(KeyError):
        renamed.serve("tfwb.no_such_module")


def test_tfwb_0_1_names_are_gone_as_promised():
    for old in ("tfwb.bounds", "tfwb.sweeps", "tfwb.tfconfig"):
        with pytest.raises(ModuleNotFoundError):
            importlib.import_module(old)
    from tfwb import knobs
    with pytest.raises(AttributeError, match="no attribute 'knob'"):
        knobs.knob


def test_names_that_left_a_module_are_served_there_with_a_warning():
    from tfwb import bottleneck, expect

    with pytest.warns(DeprecationWarning, match=r"tfwb.expect.bound_of is now tfwb.bottleneck.limit_of"):
        assert expect.bound_of is bottleneck.limit_of
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        expect.nothing


def test_a_split_module_serves_its_renamed_names_under_the_old_ones(monkeypatch):
    monkeypatch.delitem(sys.modules, "tfwb.tuning", raising=False)
    with pytest.warns(DeprecationWarning, match="tfwb.tuning is now tfwb.search.tune_loop"):
        old = importlib.import_module("tfwb.tuning")
    from tfwb.search import tune_changes, tune_loop, tune_result

    assert old.Candidate is tune_changes.Change and old.Trial is tune_result.TuneTrial
    assert old.candidates is tune_changes.rank_changes and old.tune is tune_loop.tune
