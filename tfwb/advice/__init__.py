"""What a knob can do: one advice entry per knob, its rule, its bound and its suggestion.

- ``tfwb.advice.entries``: ``ADVICE``, the table (knob -> ``Advice``: rule, suggestion,
  order, bound), and the suggestions;
- ``tfwb.advice.rules``: what each knob is expected to do on a machine, one rule per knob;
- ``tfwb.advice.directions``: the directions a rule answers with (``FASTER``...,
  ``Expected``);
- ``tfwb.advice.expected``: ``expected_for``, which runs a knob's rule for a baseline;
- ``tfwb.advice.measured``: the knob effects measured per CPU kind and model composition, the only
  source of a CPU rule's direction for precision and XLA;
- ``tfwb.advice.bounds``: the Amdahl bound of a change on a measured run (``Bound``);
- ``tfwb.advice.machine``: which machine, and where the step runs on it;
- ``tfwb.advice.sources``: the published facts behind each rule;
- ``tfwb.advice.downstream``: what an input knob can still do after a cache (``reach``);
- ``tfwb.advice.table``: every rule on every described machine, as Markdown.

Here: the names the rest of tfwb reads (``ADVICE``, ``Advice``, ``Bound``, ``amdahl``,
``speedup_text``, ``input_wait_bound``, ``machine_of``, ``compute_dtype``). The checks of
an expectation against a measurement are ``tfwb.expect``, which reads this package; nothing
here imports ``tfwb.expect``. Pure: no TensorFlow, no UI library.
"""
from __future__ import annotations

from tfwb.advice.bounds import Bound, BoundRule, amdahl, input_wait_bound, speedup_text
from tfwb.advice.entries import ADVICE, Advice, Suggest
from tfwb.advice.machine import machine_of
from tfwb.config import COMPUTE_DTYPES, compute_dtype

__all__ = ["ADVICE", "Advice", "Suggest", "Bound", "BoundRule", "amdahl", "speedup_text", "input_wait_bound",
           "machine_of", "compute_dtype", "COMPUTE_DTYPES"]
