"""``size="auto"``: pick the workloads' size by measuring this machine, and say why.

The same full-size ``images`` step took 0.18 s on one 2-core build machine (AVX-512) and
1.1 s on another (AVX2): a chapter that runs in minutes on one would take far longer on
the other. ``choose_size()`` times a few full-size ``images`` steps with data in memory
(a few seconds), picks ``"full"`` when a step fits the budget and ``"small"`` otherwise,
and makes ``size="auto"`` mean that for the rest of the process. Under ``TFWB_FAST=1`` it
measures nothing and picks small.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from tfwb.config import RunConfig, fast_mode, set_auto_size
from tfwb.tf.run import run

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

    def __str__(self) -> str:
        return f'size="auto" means {self.size!r} here: {self.reason}'


def choose_size(budget_s: float = DEFAULT_BUDGET_S, *, steps: int = 3) -> SizeChoice:
    """Measure a full-size step and make ``size="auto"`` mean small or full for this process.

    Args:
        budget_s: a full-size ``images`` step longer than this picks small (> 0).
        steps: measured steps (after one warm-up step).

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
    if fast_mode():
        set_auto_size("small")
        return SizeChoice("small", None, budget_s, "TFWB_FAST=1 asks for the small sizes (nothing measured)")

    probe = run(RunConfig(size="full", data_source="memory", steps=steps, warmup_steps=1,
                          label="size probe"))
    if not probe.ok:
        set_auto_size("small")
        return SizeChoice("small", None, budget_s,
                          f"the full-size probe did not run ({probe.error}); small is the safe choice")
    step_s = probe.median_step_s
    size = "full" if step_s <= budget_s else "small"
    set_auto_size(size)
    verdict = "within" if size == "full" else "over"
    return SizeChoice(size, step_s, budget_s,
                      f"a full-size images step takes {step_s:.2f} s on this machine, {verdict} the "
                      f"{budget_s:.2f} s budget" + ("" if size == "full" else
                                                    "; set size='full' on a knob to override"))
