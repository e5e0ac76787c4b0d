"""One advice entry per knob: its expectation rule, its suggestion, its order and its bound.

``ADVICE`` maps a knob to its ``Advice``; everything that treats knobs one by one reads it:

- ``tfwb.advice.expected.expected_for`` runs the entry's ``rule`` (``tfwb.advice.rules``);
- ``tfwb.analysis.diagnosis.diagnose`` offers the entries' ``suggest`` changes that the run's workload
  honours, sorted by ``order``: an input knob's (its declared ``Knob.role`` is ``source`` or
  ``pipeline``) to an input-bound run that reads through a pipeline (not
  ``data_source="memory"``), any other knob's to a run that is not input-bound, where its rule
  expects it faster on the run's machine;
- ``tfwb.analysis.diagnosis.bound`` runs the entry's ``bound`` (``tfwb.advice.bounds``: the Amdahl
  bound of the change on a measured run);
- ``tfwb.search.tune_changes`` reads the entry's ``tune`` (``TuneAdvice``): whether the tune
  tries the knob, the values it tries, when a change is not worth a trial on a run, its place
  among changes of equal bound, and how its comparison settles.

Adding a knob is its ``knob_field(...)`` on ``RunConfig``, the code that gives it its effect,
and one entry here. Pure: no TensorFlow, no UI library.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Dict, Optional, Sequence, Tuple, Union

from tfwb.advice.bounds import BoundRule, input_wait_bound, precision_bound, steps_bound, xla_bound
from tfwb.advice.rules import (Rule, batch_rule, input_rule, jit_rule, precision_rule, steps_rule,
                               strategy_rule, sync_rule, tf32_rule, timing_rule)
from tfwb.hardware import Machine


#: ``suggest(knob, config, machine) -> (value, why)``, or None: nothing to suggest for this config.
Suggest = Callable[[str, Any, Machine], Optional[Tuple[Any, str]]]
#: ``values(knob, config, machine) -> the values the tune tries`` (none: nothing to try on this config).
TuneValues = Callable[[str, Any, Machine], Sequence[Any]]
#: ``f(examples, epoch)``: what a run reading ``examples`` training examples, of ``epoch`` in one epoch, decides.
EpochRule = Callable[[int, int], Any]


@dataclass(frozen=True)
class TuneAdvice:
    """What the tune (``tfwb.search.tune_changes``, ``tfwb.search.tune_loop``) does with one knob.

    Attributes:
        values: the values it tries on a config (None: the suggestion's value, when there is one).
        tie: its place among changes of equal bound, lower first (before the entry's ``order``): a
            number, or ``tie(examples, epoch) -> number`` where the run's length decides it (called only
            when the epoch is known).
        skip: ``skip(examples, epoch) -> reason``: why a change is of no use to a run of this length
            (``""``: it is); called only when the epoch is known.
        note: ``note(examples, epoch) -> text``: why it ranks where it does beyond its bound, when its
            ``tie`` put it first (``""``: nothing to say).
        quiet: tried even where the run hardly waits, when its bound is not strict and within the noise.
        settle_steps: steps left out before each measured turn of its interleaved comparison.
        listed: its place when the tune's closing text names the knobs a best configuration already
            sets (lower first).

    Example:
        >>> ADVICE["cache"].tune.skip(1_000, 4_096)[:40]
        'the run reads 1,000 examples, less than '
    """

    values: Optional[TuneValues] = None
    tie: Union[float, EpochRule] = 2
    skip: Optional[EpochRule] = None
    note: Optional[EpochRule] = None
    quiet: bool = False
    settle_steps: int = 1
    listed: int = 0

    @property
    def needs_epoch(self) -> bool:
        """True when the run's length decides something (the epoch is worth computing)."""
        return callable(self.tie) or self.skip is not None or self.note is not None

    def tie_rank(self, examples: int, epoch: Optional[int]) -> float:
        """Its ``tie`` for a run reading ``examples`` (``epoch``: examples in one epoch, None: unknown)."""
        if callable(self.tie):
            return self.tie(examples, epoch) if epoch else 2
        return self.tie


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
    #: What the tune does with the knob (None: the tune never tries it).
    tune: Optional[TuneAdvice] = None

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


#: CPU flags of bfloat16 hardware (AMX, AVX-512 BF16; Arm's bf16): a CPU with them is offered bfloat16.
BF16_CPU_FLAGS = frozenset({"amx_bf16", "avx512_bf16", "bf16"})


def _policy(knob: str, cfg: Any, machine: Machine) -> Optional[Tuple[Any, str]]:
    """bfloat16 where it has matrix units (a TPU, compute capability 8.0 on) or, with no GPU, a CPU
    with bfloat16 hardware (AMX, AVX-512 BF16); else float16. The rule then decides whether it shows."""
    if cfg.mixed_precision != "off":
        return None
    cc = machine.compute_capability
    bf16_cpu = not machine.gpus and bool(BF16_CPU_FLAGS & set(machine.cpu_flags))
    return ("mixed_bfloat16" if machine.tpu or (cc and cc >= (8, 0)) or bf16_cpu else "mixed_float16"), ""


def _steps_per_call(knob: str, cfg: Any, machine: Machine) -> Optional[Tuple[Any, str]]:
    return (8, "") if cfg.steps_per_execution == 1 else None


# -- the tune ------------------------------------------------------------------------------------
#: Steps left out before each measured turn of an input knob's comparison: a prefetch buffer that
#: filled during the other configuration's turn is drained first (``tfwb.tf.lab.side_by_side``).
INPUT_SETTLE_STEPS = 4
#: The policies the tune tries from float32: both, each bounded by its own dtype peak (the
#: machine's rule then says which one it cannot honour: bfloat16 needs hardware that has it).
POLICIES = ("mixed_bfloat16", "mixed_float16")


def _policies(knob: str, cfg: Any, machine: Machine) -> Tuple[Any, ...]:
    return POLICIES if cfg.mixed_precision == "off" else ()


def _reuses(examples: int, epoch: int) -> bool:
    """The run reads its data at least twice."""
    return examples >= 2 * epoch


def _cache_tie(examples: int, epoch: int) -> float:
    """Of the input knobs (all bounded by ``1 / (1 - wait)``) only a cache removes work (the decoding of
    every epoch after the first), where the others overlap it, so it goes first on a run that reads its
    data at least twice; on a CPU it also frees the cores the pipeline took from the step."""
    return 0 if _reuses(examples, epoch) else 2


def _cache_note(examples: int, epoch: int) -> str:
    if not _reuses(examples, epoch):
        return ""
    return (f"it goes before the input knobs of equal bound: this run reads its data "
            f"{examples / epoch:.0f} times, and a cache removes the decoding of every epoch after the "
            "first, which the others only overlap with the step")


def _cache_skip(examples: int, epoch: int) -> str:
    if examples >= epoch:
        return ""
    return (f"the run reads {examples:,} examples, less than one epoch ({epoch:,}): every element is read "
            "once, so a cache cannot be reused, and filling it costs a whole epoch")


#: An input knob's tune: its suggestion, its comparison settled first.
_INPUT_TUNE = TuneAdvice(settle_steps=INPUT_SETTLE_STEPS)


#: The table: knob -> its advice. ``sync`` (value False) is timing without a device sync, the one
#: entry that is not a RunConfig field. Entries without ``suggest`` only have an expectation.
ADVICE: Dict[str, Advice] = {
    "mixed_precision": Advice(rule=precision_rule, suggest=_policy, order=10, bound=precision_bound,
                              tune=TuneAdvice(values=_policies, listed=2)),
    "tf32": Advice(rule=tf32_rule),
    "jit_compile": Advice(rule=jit_rule, suggest=_turn_on(""), order=20, bound=xla_bound, tune=TuneAdvice(listed=1)),
    # steps per call before XLA on equal bounds (both 1 / (wait + MFU)): it compiles nothing
    "steps_per_execution": Advice(rule=steps_rule, suggest=_steps_per_call, order=30, bound=steps_bound,
                                  tune=TuneAdvice(tie=1)),
    "strategy": Advice(rule=strategy_rule),
    # the generator source is left to try where the run hardly waits: its bound on a CPU is not strict
    "data_source": Advice(rule=input_rule("data_source"), suggest=_data_source, order=10, bound=input_wait_bound,
                          tune=TuneAdvice(quiet=True, settle_steps=INPUT_SETTLE_STEPS)),
    "prefetch": Advice(rule=input_rule("prefetch"), suggest=_turn_on("overlap input with the step"), order=20,
                       bound=input_wait_bound, tune=_INPUT_TUNE),
    "parallel_map": Advice(rule=input_rule("parallel_map"), suggest=_parallel_map, order=30,
                           bound=input_wait_bound, tune=_INPUT_TUNE),
    "interleave": Advice(rule=input_rule("interleave"), suggest=_interleave,
                         order=lambda cfg: 15 if _files_behind_latency(cfg) else 35, bound=input_wait_bound,
                         tune=_INPUT_TUNE),
    # a cache: skipped on a run shorter than one epoch; first of equal bounds on one that reads its data twice
    "cache": Advice(rule=input_rule("cache"), suggest=_turn_on("decode once, reuse every epoch"), order=40,
                    bound=input_wait_bound, tune=TuneAdvice(tie=_cache_tie, skip=_cache_skip, note=_cache_note,
                                                            settle_steps=INPUT_SETTLE_STEPS)),
    "vectorized_map": Advice(rule=input_rule("vectorized_map")),
    "sync": Advice(rule=sync_rule),
    "batch_size": Advice(rule=batch_rule),
    "timing": Advice(rule=timing_rule),
}
