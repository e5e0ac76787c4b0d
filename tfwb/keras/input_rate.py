"""Is a ``fit`` run input-bound? The dataset timed on its own, against the step rate.

Inside ``model.fit`` the batches are fetched inside the train function's graph, so the
time a step waits for its batch cannot be told apart from the step. What can be measured
is the dataset alone: the same batches, no model, a bounded number of them. If it
delivers batches barely faster than training consumes them, the step waits for its data.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Optional

from tfwb.analysis.diagnosis import DATASET_BOUND_RATIO, DATASET_CLOSE_RATIO

#: Batches timed (after ``SKIP_BATCHES``) and the time limit for timing them.
MAX_BATCHES, MAX_SECONDS, SKIP_BATCHES = 50, 2.0, 2
#: The dataset alone must deliver this many times the step rate to leave the step alone (the
#: diagnosis reads a fit's verdict with the same thresholds).
BOUND_RATIO, CLOSE_RATIO = DATASET_BOUND_RATIO, DATASET_CLOSE_RATIO
HOW = ("measured by iterating the dataset alone (the same batches, no model) after fit: inside fit's graph "
       "the wait for a batch cannot be told apart from the step")


@dataclass(frozen=True)
class InputRate:
    """The dataset's own rate against the training step's.

    Args:
        dataset_batches_per_s: batches per second the dataset delivers on its own.
        step_batches_per_s: training steps per second at the median step (one batch each).
        batches: how many batches were timed.
    """

    dataset_batches_per_s: float
    step_batches_per_s: float
    batches: int

    @property
    def ratio(self) -> float:
        """Dataset rate over step rate (below ``BOUND_RATIO``: input-bound)."""
        return self.dataset_batches_per_s / self.step_batches_per_s

    @property
    def verdict(self) -> str:
        """``"input-bound"``, ``"close to input-bound"`` or ``"not input-bound"``."""
        if self.ratio < BOUND_RATIO:
            return "input-bound"
        return "close to input-bound" if self.ratio < CLOSE_RATIO else "not input-bound"

    def text(self) -> str:
        """One sentence: the verdict, both rates, and how it is known.

        Example:
            >>> InputRate(210.0, 180.0, 50).text().split(" (")[0]
            'close to input-bound: the dataset alone delivers 210 batches/s, the step takes 180/s'
        """
        return (f"{self.verdict}: the dataset alone delivers {self.dataset_batches_per_s:,.0f} batches/s, "
                f"the step takes {self.step_batches_per_s:,.0f}/s ({HOW}; {self.batches} batches)")

    def to_dict(self) -> dict:
        return {"dataset_batches_per_s": self.dataset_batches_per_s,
                "step_batches_per_s": self.step_batches_per_s, "batches": self.batches,
                "ratio": self.ratio, "verdict": self.verdict}


def dataset_rate(dataset: Iterable[Any], *, max_batches: int = MAX_BATCHES, max_s: float = MAX_SECONDS,
                 skip: int = SKIP_BATCHES, clock: Callable[[], float] = time.perf_counter) -> tuple:
    """``(batches per second, batches timed)`` of iterating ``dataset`` alone.

    The first ``skip`` batches (buffers filling, autotuning) are left out; then at most
    ``max_batches`` are timed, or as many as ``max_s`` seconds allow.

    Raises:
        ValueError: when the dataset ends before one batch could be timed.
    """
    it = iter(dataset)
    try:
        for _ in range(skip):
            next(it)
        start = clock()
        n = 0
        while n < max_batches:
            next(it)
            n += 1
            if clock() - start >= max_s:
                break
        elapsed = clock() - start
    except StopIteration:
        n, elapsed = locals().get("n", 0), clock() - locals().get("start", clock())
    if not n or elapsed <= 0:
        raise ValueError(f"dataset={dataset!r} ended before a batch could be timed; pass the dataset given to "
                         f"fit (it needs more than {skip} batches)")
    return n / elapsed, n


def measure(dataset: Iterable[Any], median_step_s: Optional[float], **kwargs: Any) -> InputRate:
    """The dataset's rate against ``median_step_s`` (per training step, one batch each).

    Raises:
        ValueError: without a measured step, or a dataset too short to time.
    """
    if not median_step_s:
        raise ValueError("median_step_s=None: no measured step to compare the dataset with; run fit first")
    rate, n = dataset_rate(dataset, **kwargs)
    return InputRate(rate, 1.0 / median_step_s, n)
