"""tfwb 0.1's names import for one more version, with a DeprecationWarning that names the new one."""
from __future__ import annotations

import importlib
import sys
import warnings
from pathlib import Path

import pytest

from tfwb import renamed

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("old, new", sorted(renamed.MODULES.items()))
def test_every_new_name_exists_and_no_old_file_is_left(old, new):
    as_path = ROOT / Path(*new.split("."))
    assert as_path.with_suffix(".py").exists() or (as_path / "__init__.py").exists(), new
    old_path = ROOT / Path(*old.split("."))
    assert not old_path.with_suffix(".py").exists() and not old_path.is_dir(), old


@pytest.mark.parametrize("old", ["tfwb.bounds", "tfwb.peaks", "tfwb.sweeps", "tfwb.sweeps.rule", "tfwb.tfconfig",
                                 "tfwb.monitor.sampler"])
def test_an_old_module_name_gives_the_new_module_and_a_warning(old, monkeypatch):
    for name in [n for n in sys.modules if n in renamed.MODULES]:
        monkeypatch.delitem(sys.modules, name)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        module = importlib.import_module(old)
    assert module is importlib.import_module(renamed.MODULES[old])
    said = [str(w.message).split(";")[0] for w in caught if w.category is DeprecationWarning]
    assert said[-1] == f"{old} is now {renamed.MODULES[old]}"         # (after its old parent's, if any)
    assert all(" is now tfwb." in s for s in said), said


def test_renamed_functions_and_classes_warn_and_still_work():
    from tfwb import expect, knobs
    from tfwb.hardware import DESCRIBED

    with pytest.warns(DeprecationWarning, match=r"tfwb.expect.knob is now tfwb.expect.change"):
        old_change = expect.knob
    assert old_change is expect.change and old_change(DESCRIBED["colab-t4"], prefetch=True).expected
    with pytest.warns(DeprecationWarning, match=r"tfwb.knobs.knob is now tfwb.knobs.knob_field"):
        assert knobs.knob is knobs.knob_field
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        expect.nothing
