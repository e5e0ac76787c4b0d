"""One advice entry per knob: its expectation rule, its suggestion, its order and its bound.

``ADVICE`` maps a knob to its ``Advice``; everything that treats knobs one by one reads it:

- ``tfwb.advice.expected.expected_for`` runs the entry's ``rule`` (``tfwb.advice.rules``);
- ``tfwb.diagnosis.diagnose`` offers the entries' ``suggest`` changes that the run's workload
  honours, sorted by ``order``: an input knob's (its declared ``Knob.role`` is ``source`` or
  ``pipeline``) to an input-bound run that reads through a pipeline (not
  ``data_source="memory"``), any other knob's to a run that is not input-bound, where its rule
  expects it faster on the run's machine;
- ``tfwb.diagnosis.bound`` runs the entry's ``bound`` (``tfwb.advice.bounds``: the Amdahl
  bound of the change on a measured run).

Adding a knob is its ``knob_field(...)`` on ``RunConfig``, the code that gives it its effect,
and one entry here. Pure: no TensorFlow, no UI library.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Dict, Optional, Tuple, Union

from tfwb.advice.bounds import BoundRule, precision_bound, steps_bound, xla_bound, input_wait_bound
from tfwb.advice.rules import (Rule, batch_rule, input_rule, jit_rule, precision_rule, steps_rule,
                               strategy_rule, sync_rule, tf32_rule, timing_rule)
from tfwb.hardware import Machine


#: ``suggest(knob, config, machine) -> (value, why)``, or None: nothing to suggest for this config.
Suggest = Callable[[str, Any, Machine], Optional[Tuple[Any, str]]]


@dataclass(frozen=True)
class Advice:
    """One knob's advice (an entry of ``ADVICE``, keyed by the knob).

    Attributes:
        rule: ``rule(hardware, value, baseline, limit) -> Expected`` (``tfwb.advice.rules``):
            what changing the knob should do on a machine; None: no expectation.
        suggest: ``suggest(knob, config, machine) -> (value, why)`` or None: the change to offer
            a run with this config on this machine; an empty ``why`` is the rule's. None: the
            knob is never suggested.
        order: where its suggestion goes among the others, lower first: a number, or
            ``order(config) -> number`` where that depends on the run.
        bound: ``bound(result, knob, value) -> Bound`` (``tfwb.advice.bounds``): the most the
            change can gain on a measured run; None: unknown.

    Example:
        >>> from types import SimpleNamespace
        >>> ADVICE["prefetch"].suggest("prefetch", SimpleNamespace(prefetch=False), Machine())
        (True, 'overlap input with the step')
    """

    rule: Optional[Rule] = None
    suggest: Optional[Suggest] = None
    order: Union[float, Callable[[Any], float]] = 0
    bound: Optional[BoundRule] = None

    def priority(self, config: Any) -> float:
        """Its ``order`` for this config (lower is suggested first)."""
        return self.order(config) if callable(self.order) else self.order


# -- suggestions -----------------------------------------------------------------------------
def _turn_on(why: str) -> Suggest:
    """Suggest ``knob=True`` where the config has it off."""
    return lambda knob, cfg, machine: None if getattr(cfg, knob) else (True, why)


def _files_behind_latency(cfg: Any) -> bool:
    """Files read behind a storage latency: interleave hides the latency (several reads at
    once), prefetch only overlaps the still serial reads with the step, so interleave goes first."""
    return cfg.data_source == "files" and getattr(cfg, "storage_latency_ms", None) != 0


def _interleave(knob: str, cfg: Any, machine: Machine) -> Optional[Tuple[Any, str]]:
    if cfg.interleave:
        return None
    if _files_behind_latency(cfg):
        return True, "read several shards at once: it hides storage latency, which prefetch only overlaps"
    return True, "read several shards at once (hides storage latency)"


def _parallel_map(knob: str, cfg: Any, machine: Machine) -> Optional[Tuple[Any, str]]:
    cores = machine.cpu_count
    if cfg.parallel_map or cores == 1:
        return None
    return True, f"decode and augment on {f'the {cores} CPU cores' if cores else 'several cores'}"


def _data_source(knob: str, cfg: Any, machine: Machine) -> Optional[Tuple[Any, str]]:
    if cfg.data_source != "generator":
        return None
    return "files", "read the files with tf.data instead of a Python generator"


def _policy(knob: str, cfg: Any, machine: Machine) -> Optional[Tuple[Any, str]]:
    """bfloat16 where it has matrix units (a TPU, compute capability 8.0 on), else float16."""
    if cfg.mixed_precision != "off":
        return None
    cc = machine.compute_capability
    return ("mixed_bfloat16" if machine.tpu or (cc and cc >= (8, 0)) else "mixed_float16"), ""


def _steps_per_call(knob: str, cfg: Any, machine: Machine) -> Optional[Tuple[Any, str]]:
    return (8, "") if cfg.steps_per_execution == 1 else None


#: The table: knob -> its advice. ``sync`` (value False) is timing without a device sync, the one
#: entry that is not a RunConfig field. Entries without ``suggest`` only have an expectation.
ADVICE: Dict[str, Advice] = {
    "mixed_precision": Advice(rule=precision_rule, suggest=_policy, order=10, bound=precision_bound),
    "tf32": Advice(rule=tf32_rule),
    "jit_compile": Advice(rule=jit_rule, suggest=_turn_on(""), order=20, bound=xla_bound),
    "steps_per_execution": Advice(rule=steps_rule, suggest=_steps_per_call, order=30, bound=steps_bound),
    "strategy": Advice(rule=strategy_rule),
    "data_source": Advice(rule=input_rule("data_source"), suggest=_data_source, order=10, bound=input_wait_bound),
    "prefetch": Advice(rule=input_rule("prefetch"), suggest=_turn_on("overlap input with the step"), order=20,
                       bound=input_wait_bound),
    "parallel_map": Advice(rule=input_rule("parallel_map"), suggest=_parallel_map, order=30,
                           bound=input_wait_bound),
    "interleave": Advice(rule=input_rule("interleave"), suggest=_interleave,
                         order=lambda cfg: 15 if _files_behind_latency(cfg) else 35, bound=input_wait_bound),
    "cache": Advice(rule=input_rule("cache"), suggest=_turn_on("decode once, reuse every epoch"), order=40,
                    bound=input_wait_bound),
    "vectorized_map": Advice(rule=input_rule("vectorized_map")),
    "sync": Advice(rule=sync_rule),
    "batch_size": Advice(rule=batch_rule),
    "timing": Advice(rule=timing_rule),
}
