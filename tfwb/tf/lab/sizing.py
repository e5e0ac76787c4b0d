"""``size="auto"``: pick the workloads' size by measuring this machine, and say why.

The same full-size ``images`` step took 0.18 s on one 2-core build machine (AVX-512) and
1.1 s on another (AVX2): a chapter that runs in minutes on one would take far longer on
the other. ``choose_size()`` times a few full-size ``images`` steps with data in memory
(a few seconds), picks ``"full"`` when a step fits the budget and ``"small"`` otherwise,
and makes ``size="auto"`` mean that for the rest of the process. Under ``TFWB_FAST=1`` it
measures nothing and picks small.

Given a chapter whose time was measured (``tfwb.book.CHAPTER_TIMES``), the rule is the
chapter's: full when the chapter's full-size time, scaled from the machine it was measured
on by the ratio of the two machines' full-size steps, fits ``tfwb.book.CHAPTER_BUDGET_S``
(10 minutes); and the choice says how long the chapter should take here.
``TFWB_SIZE=small`` or ``TFWB_SIZE=full`` decides instead (the step is still measured).
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Optional

from tfwb import book
from tfwb.config import RunConfig, fast_mode, set_auto_size
from tfwb.tf.run import run

#: Set to ``small`` or ``full`` to decide the size yourself (the step is still measured and reported).
SIZE_ENV = "TFWB_SIZE"

#: A full-size ``images`` step slower than this makes ``size="auto"`` pick small.
DEFAULT_BUDGET_S = 0.4


@dataclass(frozen=True)
class SizeChoice:
    """What ``size="auto"`` means here, and the measurement behind it.

    Attributes:
        size: ``"small"`` or ``"full"``.
        step_s: the median full-size ``images`` step measured here (``None`` when
            nothing was measured: ``TFWB_FAST=1``, or the run failed).
        budget_s: the step time above which small is chosen.
        reason: one sentence saying why.
    """

    size: str
    step_s: Optional[float]
    budget_s: float
    reason: str

    def estimate_s(self, full_size_steps: int) -> Optional[float]:
        """Seconds that ``full_size_steps`` full-size ``images`` steps would take here (None unmeasured)."""
        return None if self.step_s is None else self.step_s * full_size_steps

    #: the chapter's expected run time here, one sentence ("" when no chapter time is recorded)
    expected: str = ""

    def __str__(self) -> str:
        return f'size="auto" means {self.size!r} here: {self.reason}'


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.1f} min" if seconds >= 60 else f"{seconds:.0f} s"


def _expected(t: Optional[book.ChapterTime], size: str, step_s: Optional[float]) -> str:
    """One sentence: how long the chapter should take here, and what the figure rests on."""
    if t is None:
        return ""
    if size == "small":
        return (f"expected run time: about {_minutes(t.small_s)} in small mode on {t.machine}, not scaled to "
                "this machine (small mode times no step before it starts); the last cell says how this "
                "machine compared")
    here = t.full_here_s(step_s) if step_s is not None else t.full_s
    return (f"expected run time: about {_minutes(here)} at full size (it took {_minutes(t.full_s)} on "
            f"{t.machine}, whose full-size step took {t.step_s:.2f} s; scaled by this machine's step)")


def choose_size(budget_s: float = DEFAULT_BUDGET_S, *, steps: int = 3,
                chapter: Optional[str] = None) -> SizeChoice:
    """Measure a full-size step and make ``size="auto"`` mean small or full for this process.

    Args:
        budget_s: a full-size ``images`` step longer than this picks small (> 0); the rule
            when no time is recorded for ``chapter``.
        steps: measured steps (after one warm-up step).
        chapter: a chapter number; when its time is recorded (``tfwb.book.CHAPTER_TIMES``),
            full is picked when the chapter's full-size time scaled to this machine fits
            ``tfwb.book.CHAPTER_BUDGET_S``, and ``SizeChoice.expected`` says how long it should take.

    Returns:
        A SizeChoice; ``str()`` of it is the sentence a chapter prints.

    Raises:
        ValueError: for ``budget_s <= 0`` or ``steps < 1``.

    Example:
        >>> print(tfwb.choose_size())   # doctest: +SKIP
        size="auto" means 'full' here: a full-size images step takes 0.18 s (budget 0.40 s)
    """
    if not budget_s > 0:
        raise ValueError(f"budget_s={budget_s!r} is not allowed; budget_s must be > 0")
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
        raise ValueError(f"steps={steps!r} is not allowed; steps must be an integer >= 1")
    timed = book.chapter_time(chapter) if chapter is not None else None
    if fast_mode():
        set_auto_size("small")
        return SizeChoice("small", None, budget_s, "TFWB_FAST=1 asks for the small sizes (nothing measured)",
                          _expected(timed, "small", None))

    probe = run(RunConfig(size="full", data_source="memory", steps=steps, warmup_steps=1,
                          label="size probe"))
    if not probe.ok:
        set_auto_size("small")
        return SizeChoice("small", None, budget_s,
                          f"the full-size probe did not run ({probe.error}); small is the safe choice",
                          _expected(timed, "small", None))
    step_s = probe.median_step_s
    forced = os.environ.get(SIZE_ENV, "")
    if forced:
        if forced not in ("small", "full"):
            raise ValueError(f"{SIZE_ENV}={forced!r} is not allowed; {SIZE_ENV} must be 'small', 'full' or unset")
        set_auto_size(forced)
        here = f", so this chapter would take about {_minutes(timed.full_here_s(step_s))} at full size" \
            if timed is not None else ""
        return SizeChoice(forced, step_s, budget_s,
                          f"{SIZE_ENV}={forced} asks for it (a full-size images step takes {step_s:.2f} s on "
                          f"this machine{here})", _expected(timed, forced, step_s))
    if timed is not None:
        here = timed.full_here_s(step_s)
        size = "full" if here <= book.CHAPTER_BUDGET_S else "small"
        set_auto_size(size)
        verdict = "within" if size == "full" else "over"
        return SizeChoice(size, step_s, budget_s,
                          f"a full-size images step takes {step_s:.2f} s on this machine, so this chapter "
                          f"would take about {_minutes(here)} at full size, {verdict} the "
                          f"{_minutes(book.CHAPTER_BUDGET_S)} budget" +
                          ("" if size == "full" else "; set size='full' on a knob to override"),
                          _expected(timed, size, step_s))
    size = "full" if step_s <= budget_s else "small"
    set_auto_size(size)
    verdict = "within" if size == "full" else "over"
    return SizeChoice(size, step_s, budget_s,
                      f"a full-size images step takes {step_s:.2f} s on this machine, {verdict} the "
                      f"{budget_s:.2f} s budget" + ("" if size == "full" else
                                                    "; set size='full' on a knob to override"))
