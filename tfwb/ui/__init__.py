"""The notebook front end: charts (matplotlib Figure -> PNG) and the Workbench widget.

Importing ``tfwb.ui`` imports neither matplotlib nor ipywidgets; ``tfwb.ui.charts``
needs matplotlib and ``tfwb.ui.workbench`` needs ipywidgets and matplotlib. The live view inside
``model.fit`` (``tfwb.keras.Monitor``) is ``tfwb.ui.fit_view``; ``tfwb.ui.view_budget`` (plain
Python) decides how often a live view may draw and how much time it may take.
``tfwb.ui.Workbench`` loads the widget module on first use.
"""
from __future__ import annotations

import importlib
from typing import Any

__all__ = ["Workbench"]


def __getattr__(name: str) -> Any:
    if name == "Workbench":
        return importlib.import_module("tfwb.ui.workbench").Workbench
    raise AttributeError(f"module 'tfwb.ui' has no attribute {name!r}")
