"""The rule a sweep judges "trains correctly" by: the naive run's loss drop, at equal examples seen.

A candidate of a sweep *trains correctly* at a rung when all of these hold
(``tolerance`` is ``tfwb.sweep``'s ``loss_tolerance``, default 0.1):

1. **Its run finished** (status ok, measured steps) and its loss is finite.
2. **Equal work.** The candidate and the naive run are compared after the same number of
   training examples, not the same number of steps: ``examples`` is what the smaller-batch
   run of the two sees in a run of the rung's length (warm-up included), rounded down to
   a whole number of calls of both (at least one of each). A batch-256 candidate at a
   rung of 20 steps (and 2 warm-up steps) is compared after 1,280 examples, its 5th step,
   with the batch-64 naive run after its 20th: each run's loss there is the mean of the last
   quarter (at least one) of its losses read at the same points (every whole number of
   calls of both runs) up to ``examples`` (``loss_at_examples``), so two runs that train
   identically read identically. The learning rate is not scaled with the
   batch: a larger batch at the same learning rate takes fewer steps over
   the same examples, and must still learn as much from them to pass.
3. **The drop.** The naive run's drop is its starting loss (its first loss) minus its
   loss at ``examples``. When it dropped (``drop > 0``), the candidate passes when its
   loss at ``examples`` is at most the naive run's plus ``tolerance × drop``: from the
   same starting loss it achieved at least ``1 − tolerance`` of the naive run's drop
   (90 % with 0.1).
4. **No drop.** When the naive run's loss did not drop over that work (``drop <= 0``, or
   it has no finite starting loss), the allowance is zero: the candidate passes only
   when its loss at ``examples`` is at most the naive run's. The verdict says so
   (``flat``), and ``SweepResult.summary`` names the rungs where this happened: such a
   rung is too short to tell training from not training.

A candidate that trains better than the naive run is never penalised.

Pure: no TensorFlow, no UI library.

Example:
    >>> from tfwb.config import RunConfig
    >>> t = [0.1] * 4
    >>> naive = RunResult(config=RunConfig(batch_size=4), step_times_s=t, losses=[2.0, 1.5, 1.0, 1.0])
    >>> ok = RunResult(config=RunConfig(batch_size=4), step_times_s=t, losses=[2.0, 1.5, 1.05, 1.08])
    >>> v = judge(ok, naive, steps=4, tolerance=0.1)
    >>> v.passed, v.examples, round(v.allowance, 2)
    (True, 16, 0.1)
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

from tfwb.records import FINAL_LOSS_SHARE, RunResult

__all__ = ["Verdict", "examples_in", "loss_at_examples", "judge", "rule_text"]


def rule_text(tolerance: float) -> str:
    """The rule in one sentence, for reports, the command's help and the chapter.

    Example:
        >>> rule_text(0.1)[:38]
        'the run finished and, after as many tr'
    """
    keep = 1 - tolerance
    return (f"the run finished and, after as many training examples as the naive run saw in a run of the "
            f"rung's length (the smaller batch's count, warm-up included), its loss lies at most "
            f"{tolerance:.0%} of the naive run's loss drop above the naive run's loss: it achieved at "
            f"least {keep:.0%} of the naive run's drop from the same starting loss; where the naive "
            "run's loss did not drop, the allowance is zero (the candidate must end at or below it)")


def examples_in(result: RunResult, steps: Optional[int] = None) -> int:
    """Training examples a run saw, warm-up included: all of it, or a run of ``steps`` measured steps.

    Counted from its recorded losses (one per call of ``batch_size × steps_per_execution``
    examples), so a run of ``steps`` is its warm-up calls plus ``steps // steps_per_call``
    calls (at most those it ran).

    Example:
        >>> from tfwb.config import RunConfig
        >>> r = RunResult(config=RunConfig(batch_size=8), warmup_losses=[3.0], losses=[2.0, 1.0, 0.5])
        >>> examples_in(r), examples_in(r, steps=1)
        (32, 16)
    """
    per_call = result.config.batch_size * max(result.steps_per_call, 1)
    calls = len(result.losses)
    if steps is not None:
        calls = min(calls, max(1, steps // max(result.steps_per_call, 1)))
    return (len(result.warmup_losses) + calls) * per_call


def _per_call(result: RunResult) -> int:
    """Examples one call of the run's step function trains on."""
    return max(1, result.config.batch_size * max(result.steps_per_call, 1))


def loss_at_examples(result: RunResult, examples: int, every: int = 0) -> Optional[float]:
    """A run's loss after ``examples`` training examples (warm-up included).

    The run's per-call losses are read where a call ends on a multiple of ``every``
    examples (default: at every call), up to the last such call that ends at or before
    ``examples`` (at least one); the loss is the mean of the last quarter (at least one)
    of those readings. Two runs read with the same ``every`` (a multiple of both runs'
    examples per call) are read at the same points, so identical training reads identical.

    Returns:
        The mean; NaN when one of the losses in it is not finite; ``None`` when the run
        recorded no loss where it was read.

    Example:
        >>> from tfwb.config import RunConfig
        >>> r = RunResult(config=RunConfig(batch_size=2), losses=[4.0, 3.0, 2.0, 1.0])
        >>> loss_at_examples(r, 4), loss_at_examples(r, 5), loss_at_examples(r, 100)
        (3.0, 3.0, 1.0)
        >>> loss_at_examples(r, 8, every=4)      # read after calls 2 and 4 only: the mean of the last one
        1.0
    """
    losses = list(result.all_losses)
    per_call = _per_call(result)
    every = max(every, per_call)
    if every % per_call:
        raise ValueError(f"every={every} is not allowed; it must be a multiple of the run's {per_call} "
                         "examples per call")
    stride = every // per_call
    readings = losses[stride - 1::stride]
    if not readings:
        return None
    n = min(len(readings), max(1, examples // every))
    tail = readings[:n][-max(1, math.ceil(n * FINAL_LOSS_SHARE)):]
    if not all(math.isfinite(v) for v in tail):
        return math.nan
    return sum(tail) / len(tail)


@dataclass(frozen=True)
class Verdict:
    """One candidate's run at one rung, judged against the naive run.

    Attributes:
        passed: True when it trains correctly.
        reason: why not, in words (``""`` when it passed, unless ``flat``: then it says the
            allowance was zero and why).
        examples: the training examples both were compared after.
        loss: the candidate's loss there (``None``: no loss; NaN: not finite).
        reference: the naive run's loss there.
        start: the naive run's starting loss.
        drop: ``start - reference`` (``None`` without a starting loss).
        allowance: how far above ``reference`` the candidate's loss could lie.
        flat: True when the naive run's loss did not drop (the allowance was zero).
    """

    passed: bool
    reason: str
    examples: int = 0
    loss: Optional[float] = None
    reference: Optional[float] = None
    start: Optional[float] = None
    drop: Optional[float] = None
    allowance: float = 0.0
    flat: bool = False


def judge(candidate: RunResult, naive: RunResult, steps: int, tolerance: float) -> Verdict:
    """Does ``candidate`` (a run of ``steps`` measured steps) train correctly against ``naive``?

    See the module docstring for the rule. ``naive`` may be longer than ``steps`` (a
    sweep's naive run is as long as its last rung): it is read as a run of ``steps``.

    Args:
        candidate: the candidate's run at the rung.
        naive: the naive run (the reference).
        steps: the rung's measured steps.
        tolerance: the share of the naive run's drop the candidate may fall short by (>= 0).

    Returns:
        A ``Verdict``.

    Example:
        >>> from tfwb.config import RunConfig
        >>> t = [0.1] * 4
        >>> naive = RunResult(config=RunConfig(batch_size=4), step_times_s=t, losses=[2.3, 2.3, 2.3, 2.3])
        >>> worse = RunResult(config=RunConfig(batch_size=4), step_times_s=t, losses=[2.3, 2.3, 2.3, 2.31])
        >>> v = judge(worse, naive, steps=4, tolerance=0.1)
        >>> v.passed, v.flat
        (False, True)
    """
    if not candidate.ok:
        return Verdict(False, f"{candidate.status}: {candidate.error or 'no measured steps'}")
    whole = math.lcm(_per_call(candidate), _per_call(naive))      # both runs end a call there
    examples = min(examples_in(candidate, steps), examples_in(naive, steps))
    examples = max(whole, examples // whole * whole)
    loss = loss_at_examples(candidate, examples, whole)
    if loss is None or not math.isfinite(loss):
        return Verdict(False, "the loss was not finite", examples, loss)
    reference = loss_at_examples(naive, examples, whole)
    if reference is None or not math.isfinite(reference):
        return Verdict(True, "", examples, loss, reference)       # nothing to judge by: the naive run has no loss
    start = naive.start_loss
    drop = None if start is None else start - reference
    flat = drop is None or drop <= 0
    allowance = 0.0 if flat else tolerance * drop
    where = f"after {examples:,} examples"
    if flat:
        why = ("no starting loss" if drop is None else
               f"it went from {start:.3g} to {reference:.3g}")
        note = f"the naive run's loss did not drop {where} ({why}), so the allowance is zero"
        if loss > reference:
            return Verdict(False, f"loss {loss:.3g} vs the naive run's {reference:.3g} {where}: above it, and "
                           f"{note}", examples, loss, reference, start, drop, 0.0, True)
        return Verdict(True, note, examples, loss, reference, start, drop, 0.0, True)
    if loss > reference + allowance:
        got = (start - loss) / drop
        return Verdict(False, (f"loss {loss:.3g} vs the naive run's {reference:.3g} {where}: +{loss - reference:.3g} "
                               f"> {tolerance:.0%} of its drop {drop:.3g} (from {start:.3g}); it achieved "
                               f"{got:.0%} of that drop"), examples, loss, reference, start, drop, allowance)
    return Verdict(True, "", examples, loss, reference, start, drop, allowance)
