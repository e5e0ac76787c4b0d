"""tfwb inside ``model.fit``: ``tfwb.keras.Monitor``, a Keras callback that measures a fit as
``tfwb.run`` measures a run (step times per call, windows synced, warm-up apart, losses,
utilization samples, the fingerprint) and shows a live chart while it trains. The Monitor is an
adapter over Keras's hooks: its windows are ``tfwb.timing.PushWindows``, its result is built by
``tfwb.fit_result``, its view is ``tfwb.ui.fit_view`` within ``tfwb.ui.view_budget``;
``input_rate`` times the dataset alone.

This package imports Keras (and, in a notebook, ipywidgets and the ui charts); it sits in the
ui layer: nothing else in tfwb imports it.
"""
from __future__ import annotations

from tfwb.keras.input_rate import InputRate
from tfwb.keras.monitor import Monitor

__all__ = ["Monitor", "InputRate"]
