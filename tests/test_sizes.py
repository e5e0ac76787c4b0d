"""The house's size limits (ARCHITECTURE.md): no module over 700 lines, no function over 100.

Read from the source with ``ast`` through tools/sizes.py (nothing is imported), so a reader can
print the same figures: ``python tools/sizes.py --over``.
"""
from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("tfwb_sizes", ROOT / "tools" / "sizes.py")
sizes = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(sizes)


def test_no_module_is_over_the_limit():
    found = sizes.modules()
    assert len(found) > 100 and any(p.endswith("tfwb/tf/runner/train.py") for p, _ in found)
    assert [(p, n) for p, n in found if n > sizes.MODULE_LINES] == []


def test_no_function_is_over_the_limit():
    found = list(sizes.functions())
    assert any(name == "RunConfig.__post_init__" or name.endswith(".replace") for _, name, _ in found)
    assert [(p, name, n) for p, name, n in found if n > sizes.FUNCTION_LINES] == []
