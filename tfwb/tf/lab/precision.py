"""Mixed precision, measured: the dtype policy, gradient underflow, and the largest batch.

Owns three things chapter 03 measures and a user can run on their own workload:

- ``policy(name)``: set Keras's global dtype policy for a block and restore the
  previous one afterwards (on errors too), as ``tfwb.run`` does around a run.
- ``underflow(cfg)`` / ``underflow_during(cfg, checkpoints)``: why loss scaling
  exists, counted on real steps of a workload. The model is built under float32
  (and trained, since gradients shrink as the loss falls); for one batch its
  float32 gradients are the reference. The same weights in a ``mixed_float16`` twin
  then give the gradients of the same step computed in float16, once per loss scale
  (1 = no scaling); an element that is nonzero in float32 and exactly zero in
  float16 was lost to underflow, an element that is inf or NaN overflowed. This is
  the backward pass a ``LossScaleOptimizer`` sees: the loss times the scale,
  gradients divided by it in float32 afterwards.
- ``float16_first_ops()``: the process's first float16 operations, with what TensorFlow's
  C++ code logs at them held back and returned (on a CPU without float16 support, oneDNN's
  one-off "supports DT_HALF only on platforms with AVX-512" line), so a chapter prints it
  where it explains it instead of showing it as a stray red line.
- ``largest_batch(cfg)`` / ``largest_batches(cfg)``: the largest batch that trains
  without running out of device memory, searched by doubling and then bisecting on
  a GPU (where TensorFlow raises ``ResourceExhaustedError``); on a CPU it returns no
  figure and says why. The search itself (``search_largest``) is pure and takes any
  ``fits(batch)``; ``batch_ratio`` and ``batches_text`` read the results.

Global state: ``policy`` and ``underflow`` restore the dtype policy they found;
``underflow`` seeds Keras with ``cfg.seed`` (as ``tfwb.run`` does).
"""
from __future__ import annotations

import contextlib
import gc
import math
import re
from dataclasses import dataclass
from typing import Any, Callable, Iterator, List, Optional, Sequence, Tuple

import keras
import numpy as np
import tensorflow as tf

from tfwb.config import MIXED_PRECISION, RunConfig
from tfwb.workloads import get_workload
from tfwb.tf.runner.train_step import per_example_loss
from tfwb.tf.runner.train import prepared
from tfwb.tf.run import run
from tfwb.tf.runner.quiet import TF_LOG_LINE, native_stderr_captured

__all__ = ["policy", "policy_name", "float16_first_ops", "tf_log_messages", "ScaleCount", "Underflow", "underflow", "underflow_during", "count_lost",
           "BatchSearch", "search_largest", "largest_batch", "largest_batches", "batches_text",
           "batch_ratio", "is_out_of_memory",
           "DEFAULT_LOSS_SCALE", "FLOAT16_SMALLEST"]

#: Keras 3 ``LossScaleOptimizer``'s ``initial_scale`` (2**15).
DEFAULT_LOSS_SCALE = 2.0 ** 15
#: float16's smallest positive (subnormal) value, 2**-24: anything smaller rounds to zero.
FLOAT16_SMALLEST = 2.0 ** -24


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


# -- the dtype policy ------------------------------------------------------------------------------
def policy_name(mixed_precision: str) -> str:
    """The Keras policy name for a ``RunConfig.mixed_precision`` value (``"off"`` is ``"float32"``).

    Raises:
        ValueError: for a value that is not one of ``tfwb.config.MIXED_PRECISION``.

    Example:
        >>> policy_name("off"), policy_name("mixed_bfloat16")
        ('float32', 'mixed_bfloat16')
    """
    if mixed_precision not in MIXED_PRECISION:
        raise ValueError(f"mixed_precision={mixed_precision!r} is not allowed; one of {MIXED_PRECISION}")
    return "float32" if mixed_precision == "off" else mixed_precision


@contextlib.contextmanager
def policy(mixed_precision: str) -> Iterator[str]:
    """Set Keras's global dtype policy for the block; the previous one is restored on exit.

    Build the model inside the block: a layer takes the global policy when it is
    created, so a model built inside keeps its dtypes after the block ends.

    Args:
        mixed_precision (str): ``"off"``, ``"mixed_float16"`` or ``"mixed_bfloat16"``.

    Yields:
        The Keras policy name that is set (``"float32"`` for ``"off"``).

    Raises:
        ValueError: for another value (before anything changes).

    Example:
        >>> with policy("mixed_float16"):                 # doctest: +SKIP
        ...     model = build_model()
    """
    name = policy_name(mixed_precision)
    previous = keras.mixed_precision.global_policy()
    keras.mixed_precision.set_global_policy(name)
    try:
        yield name
    finally:
        keras.mixed_precision.set_global_policy(previous)


# -- what TensorFlow logs at the first float16 op ------------------------------------------------------
def tf_log_messages(text: str) -> Tuple[str, ...]:
    """The messages of TensorFlow's C++ log lines in ``text`` (prefix and source location dropped).

    Example:
        >>> tf_log_messages("E0000 00:00:1.5  25 util.cc:131] oneDNN supports DT_HALF only ...\\nother")
        ('oneDNN supports DT_HALF only ...',)
    """
    found = (TF_LOG_LINE.match(line.strip()) for line in text.splitlines())
    return tuple(m.group("message").strip() for m in found if m)


def float16_first_ops() -> Tuple[str, ...]:
    """Run a float16 matmul and softmax with TensorFlow's native stderr held back; return what it logged.

    TensorFlow logs some things once per process, at the first op that meets them: on a
    CPU whose oneDNN cannot run float16 (no AVX-512 FP16, AMX-FP16 or AVX-NE-CONVERT), the
    line "oneDNN supports DT_HALF only on platforms with AVX-512. Falling back to the
    default Eigen-based implementation". Call this before any other float16 work to get
    that line as a value instead of a stray line on stderr. Text that is not a TF log
    line is written back to stderr.

    Returns:
        The messages TensorFlow logged (empty: it logged nothing, because this machine
        runs float16 natively, or because an earlier float16 op already logged it).

    Example:
        >>> float16_first_ops()          # doctest: +SKIP
        ('oneDNN supports DT_HALF only on platforms with AVX-512. Falling back to ...',)
    """
    with native_stderr_captured() as held:
        a = tf.constant([[1.0, 2.0], [3.0, 4.0]], tf.float16)
        _ = tf.nn.softmax(tf.matmul(a, a)).numpy()
    held.replay(drop=lambda line: bool(TF_LOG_LINE.match(line.strip())))
    return tf_log_messages(held.text)


# -- underflow ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ScaleCount:
    """What one loss scale did to the float16 gradients of the step.

    Attributes:
        loss_scale (float): the factor the loss was multiplied by (1.0: no scaling).
        lost (int): elements nonzero in float32 and exactly zero in float16 (underflow).
        non_finite (int): elements that came out inf or NaN (overflow: a
            ``LossScaleOptimizer`` would skip this step and halve its scale).
    """

    loss_scale: float
    lost: int
    non_finite: int

    @property
    def label(self) -> str:
        """``"none"`` for 1.0, else the scale as a power of two where it is one (``"2^15"``)."""
        if self.loss_scale == 1.0:
            return "none"
        exponent = math.log2(self.loss_scale)
        return f"2^{exponent:.0f}" if exponent.is_integer() else f"{self.loss_scale:g}"


@dataclass(frozen=True)
class Underflow:
    """Gradient elements one float16 step loses, with and without loss scaling.

    Attributes:
        workload (str), size (str), batch_size (int): what was measured.
        train_steps (int): float32 training steps before the measured one.
        loss (float): the step's loss in float32.
        total (int): gradient elements (every trainable variable, dense).
        nonzero_float32 (int): of those, nonzero in the float32 reference.
        below_float16 (int): nonzero float32 elements smaller in magnitude than
            float16's smallest positive value (2**-24): zero if merely cast to float16.
        counts (tuple of ScaleCount): one per loss scale, in the order asked.
    """

    workload: str
    size: str
    batch_size: int
    train_steps: int
    loss: float
    total: int
    nonzero_float32: int
    below_float16: int
    counts: Tuple[ScaleCount, ...]

    def at(self, loss_scale: float) -> ScaleCount:
        """The count for ``loss_scale`` (1.0: no scaling).

        Raises:
            ValueError: when that scale was not measured (naming those that were).
        """
        for c in self.counts:
            if c.loss_scale == loss_scale:
                return c
        raise ValueError(f"loss_scale={loss_scale!r} was not measured; measured: "
                         + ", ".join(f"{c.loss_scale:g}" for c in self.counts))

    def lost_pct(self, loss_scale: float) -> float:
        """Lost elements at ``loss_scale`` as a percentage of the nonzero float32 ones."""
        return 100.0 * self.at(loss_scale).lost / max(self.nonzero_float32, 1)

    def lost_vs_unscaled_pct(self, loss_scale: float) -> Optional[float]:
        """Lost elements at ``loss_scale`` as a percentage of those lost without scaling.

        Small is good: the scale keeps what float16 alone flushes to zero. None when
        nothing was lost without scaling (nothing to keep).

        Raises:
            ValueError: when 1.0 or ``loss_scale`` was not measured.

        Example:
            >>> u = Underflow("t", "small", 8, 0, 1.0, 10, 10, 0,
            ...               (ScaleCount(1.0, 4, 0), ScaleCount(8.0, 1, 0)))
            >>> u.lost_vs_unscaled_pct(8.0)
            25.0
        """
        unscaled = self.at(1.0).lost
        return 100.0 * self.at(loss_scale).lost / unscaled if unscaled else None

    def rows(self) -> List[Tuple[str, str, str, str]]:
        """Table rows: loss scale, lost elements, their share of the nonzero ones, overflowed."""
        return [(c.label, f"{c.lost:,}", f"{self.lost_pct(c.loss_scale):.3f} %", f"{c.non_finite:,}")
                for c in self.counts]

    def text(self) -> str:
        """One line per loss scale under a header naming the step.

        Example:
            >>> u = Underflow("text", "small", 64, 0, 2.5, 10, 8, 1, (ScaleCount(1.0, 2, 0),))
            >>> print(u.text())  # doctest: +NORMALIZE_WHITESPACE
            text (small), batch 64, after 0 float32 steps (loss 2.5): 8 of 10 gradient elements
            nonzero in float32, 1 below float16's smallest value
              loss scale none: 2 lost to zero in float16 (25.000 %), 0 overflowed
        """
        head = (f"{self.workload} ({self.size}), batch {self.batch_size}, after {self.train_steps} float32 "
                f"steps (loss {self.loss:.3g}): {self.nonzero_float32:,} of {self.total:,} gradient elements "
                f"nonzero in float32, {self.below_float16:,} below float16's smallest value")
        lines = [f"  loss scale {label}: {lost} lost to zero in float16 ({pct}), {over} overflowed"
                 for label, lost, pct, over in self.rows()]
        return "\n".join([head] + lines)


def count_lost(reference: Sequence[np.ndarray], candidate: Sequence[np.ndarray]) -> Tuple[int, int]:
    """``(lost, non_finite)``: elements nonzero in ``reference`` but zero in ``candidate``, and
    elements of ``candidate`` that are inf or NaN. Pure NumPy.

    Args:
        reference, candidate: arrays of the same shapes, pairwise.

    Raises:
        ValueError: when the lists or shapes differ.

    Example:
        >>> count_lost([np.array([1e-9, 0.5, 0.0])], [np.array([0.0, 0.5, 0.0])])
        (1, 0)
    """
    if len(reference) != len(candidate):
        raise ValueError(f"reference has {len(reference)} arrays, candidate {len(candidate)}: "
                         "they must pair up")
    lost = non_finite = 0
    for r, c in zip(reference, candidate):
        r, c = np.asarray(r), np.asarray(c)
        if r.shape != c.shape:
            raise ValueError(f"shapes differ: reference {r.shape}, candidate {c.shape}")
        lost += int(np.count_nonzero((r != 0) & (c == 0)))
        non_finite += int(np.count_nonzero(~np.isfinite(c)))
    return lost, non_finite


def _gradients(model: keras.Model, loss_fn: Callable, x: Any, y: Any, global_batch: int,
               loss_scale: float, training: bool) -> Tuple[List[np.ndarray], float]:
    """Dense float32 gradients of ``loss * loss_scale``, divided by ``loss_scale``; and the loss."""
    with tf.GradientTape() as tape:
        logits = model(x, training=training)
        per_example = tf.cast(loss_fn(y, logits), tf.float32)
        if per_example.shape.rank == 0:
            loss = per_example
        else:
            loss = tf.nn.compute_average_loss(per_example, global_batch_size=global_batch)
        if model.losses:
            loss += tf.add_n([tf.cast(v, tf.float32) for v in model.losses])
        scaled = loss * loss_scale
    grads = tape.gradient(scaled, model.trainable_variables)
    out = []
    for g, v in zip(grads, model.trainable_variables):
        if g is None:
            out.append(np.zeros(v.shape, np.float32))
        else:
            out.append((tf.cast(tf.convert_to_tensor(g), tf.float32) / loss_scale).numpy())
    return out, float(loss)


def underflow(cfg: RunConfig, *, loss_scales: Sequence[float] = (1.0, DEFAULT_LOSS_SCALE),
              train_steps: int = 0, training: bool = True) -> Underflow:
    """Count the gradient elements float16 loses on one real step of ``cfg.workload``.

    ``underflow_during(cfg, (train_steps,), ...)[0]``: see there.

    Example:
        >>> u = underflow(RunConfig(workload="text", data_source="memory"), train_steps=100)  # doctest: +SKIP
        >>> u.at(1.0).lost > u.at(2**15).lost                                               # doctest: +SKIP
        True
    """
    if not _is_int(train_steps) or train_steps < 0:
        raise ValueError(f"train_steps={train_steps!r} is not allowed; train_steps must be an int >= 0")
    return underflow_during(cfg, (train_steps,), loss_scales=loss_scales, training=training)[0]


def underflow_during(cfg: RunConfig, checkpoints: Sequence[int], *,
                     loss_scales: Sequence[float] = (1.0, DEFAULT_LOSS_SCALE),
                     training: bool = True) -> Tuple[Underflow, ...]:
    """Count the gradient elements float16 loses on real steps of ``cfg.workload``, as it trains.

    Builds the workload's model, data and optimizer as ``tfwb.run`` would, under
    float32 on the default strategy (``cfg``'s precision, strategy and step knobs are
    not used), and a twin of the model under ``mixed_float16``. At each checkpoint
    (float32 steps trained so far) it takes the next batch, computes its float32
    gradients, copies the weights into the twin and computes the same step's
    gradients in float16 once per loss scale.

    Args:
        cfg (RunConfig): workload, size, batch size, data source, optimizer, learning
            rate, seed.
        checkpoints (sequence of int): float32 steps trained before each measured step,
            ascending (``(0, 100)``: at initialization and after 100 steps). Gradients
            shrink as the loss falls, so underflow grows with training.
        loss_scales (sequence of float, default ``(1.0, 2**15)``): the scales to try;
            1.0 is no scaling, 2**15 is Keras's ``LossScaleOptimizer`` default.
        training (bool, default True): passed to the model; a model with dropout draws
            different masks in the two passes, so pass False to compare like with like.

    Returns:
        One ``Underflow`` per checkpoint.

    Raises:
        ValueError: for no loss scales or a scale that is not a finite number > 0; for
            no checkpoints, a negative one, or checkpoints not strictly ascending;
            before any work.
    """
    scales = tuple(float(s) for s in loss_scales)
    if not scales or not all(math.isfinite(s) and s > 0 for s in scales):
        raise ValueError(f"loss_scales={tuple(loss_scales)!r} is not allowed; give one or more finite "
                         "numbers > 0 (1.0 is no scaling)")
    steps = tuple(checkpoints)
    if (not steps or not all(_is_int(n) and n >= 0 for n in steps)
            or any(b <= a for a, b in zip(steps, steps[1:]))):
        raise ValueError(f"checkpoints={steps!r} is not allowed; give one or more ints >= 0, strictly "
                         "ascending (float32 steps trained before each measured step)")

    base = cfg.replace(mixed_precision="off", strategy="default", steps_per_execution=1,
                       jit_compile=False, grad_norms=False, execution="graph")
    workload = get_workload(cfg.workload)
    loss_fn = per_example_loss(workload.loss)
    out: List[Underflow] = []
    with policy("off"), prepared(base) as p:
        with policy("mixed_float16"):
            half = workload.model_fn(base.replace(mixed_precision="mixed_float16"))
        done = 0
        for n in steps:
            while done < n:
                p.advance()
                done += 1
            x, y = p.fetch()
            reference, loss = _gradients(p.model, loss_fn, x, y, base.batch_size, 1.0, training)
            half.set_weights(p.model.get_weights())
            counts = []
            for scale in scales:
                grads, _ = _gradients(half, loss_fn, x, y, base.batch_size, scale, training)
                counts.append(ScaleCount(scale, *count_lost(reference, grads)))
            flat = np.concatenate([np.abs(r).ravel() for r in reference]) if reference else np.zeros(0)
            nonzero = flat[flat != 0]
            out.append(Underflow(workload=cfg.workload, size=cfg.resolved_size, batch_size=cfg.batch_size,
                                 train_steps=n, loss=loss, total=int(flat.size),
                                 nonzero_float32=int(nonzero.size),
                                 below_float16=int(np.count_nonzero(nonzero < FLOAT16_SMALLEST)),
                                 counts=tuple(counts)))
    return tuple(out)


# -- the largest batch ------------------------------------------------------------------------------
_OOM_TEXT = re.compile(r"out of memory|\bOOM\b|failed to allocate|ALLOC_FAILED|"
                       r"Dst tensor is not initialized", re.IGNORECASE)


def is_out_of_memory(error: BaseException) -> bool:
    """Whether ``error`` means the device ran out of memory.

    ``tf.errors.ResourceExhaustedError`` always; near the limit a GPU also reports it as
    an ``InternalError`` or ``UnknownError`` whose message says so: cuBLAS's
    ``CUBLAS_STATUS_ALLOC_FAILED`` and cuDNN's ``CUDNN_STATUS_ALLOC_FAILED`` (their
    workspace did not fit), "Failed to allocate", "OOM when allocating", "Dst tensor is
    not initialized" (a copy whose destination could not be allocated). The largest-batch
    search takes each of them as "too large"; any other error is raised.

    Example:
        >>> is_out_of_memory(RuntimeError("OOM when allocating tensor")), is_out_of_memory(ValueError("x"))
        (True, False)
    """
    if isinstance(error, tf.errors.ResourceExhaustedError):
        return True
    return bool(_OOM_TEXT.search(str(error)))


@dataclass(frozen=True)
class BatchSearch:
    """The largest batch that trained, or why there is none.

    Attributes:
        batch_size (int | None): the largest batch that fitted; None when nothing was
            searched (``reason`` says why) or not even the smallest batch fitted.
        reason (str): how the answer was reached, or why there is none.
        tried (tuple of (int, bool)): every batch tried, in order, and whether it fitted.
        policy (str): the ``mixed_precision`` value searched.
    """

    batch_size: Optional[int]
    reason: str
    tried: Tuple[Tuple[int, bool], ...] = ()
    policy: str = "off"

    @property
    def measured(self) -> bool:
        """True when a search ran (``tried`` is not empty)."""
        return bool(self.tried)

    def text(self) -> str:
        """e.g. ``"mixed_float16: largest batch 1,536 (tried 64 ok, 128 ok, ...)"``."""
        if self.batch_size is None:
            return f"{self.policy}: no figure: {self.reason}"
        tried = ", ".join(f"{b} {'ok' if ok else 'too large'}" for b, ok in self.tried)
        return f"{self.policy}: largest batch {self.batch_size:,} ({self.reason}; tried {tried})"


def _down_to(value: int, multiple: int) -> int:
    return max(multiple, value // multiple * multiple)


def _check_bounds(start: Any, limit: Any, multiple: Any, tolerance: Any) -> None:
    if not _is_int(multiple) or multiple < 1:
        raise ValueError(f"multiple={multiple!r} is not allowed; multiple must be an int >= 1")
    if not _is_int(limit) or limit < multiple:
        raise ValueError(f"limit={limit!r} is not allowed; limit must be an int >= multiple ({multiple})")
    if not _is_int(start) or start < 1:
        raise ValueError(f"start={start!r} is not allowed; start must be an int >= 1")
    if not isinstance(tolerance, (int, float)) or isinstance(tolerance, bool) or not 0 <= tolerance < 1:
        raise ValueError(f"tolerance={tolerance!r} is not allowed; tolerance must be a number in [0, 1)")


def search_largest(fits: Callable[[int], bool], *, start: int, limit: int, multiple: int = 8,
                   tolerance: float = 0.125) -> Tuple[Optional[int], Tuple[Tuple[int, bool], ...], str]:
    """The largest batch (a multiple of ``multiple``, at most ``limit``) for which ``fits`` is True.

    Doubles from ``start`` until a batch does not fit (or halves until one does), then
    bisects between the largest that fitted and the smallest that did not, until they
    are within ``max(multiple, tolerance * largest)``. Assumes that a batch fits when
    any larger one does.

    Args:
        fits (callable): ``fits(batch) -> bool``.
        start (int): the first batch to try (rounded down to a multiple, at least one).
        limit (int): the largest batch to try.
        multiple (int, default 8): every batch tried is a multiple of this (Tensor Cores
            want multiples of 8).
        tolerance (float, default 0.125): stop bisecting within this share of the answer;
            0 bisects down to ``multiple``.

    Returns:
        ``(largest or None, tried, reason)``; ``tried`` lists ``(batch, fitted)`` in order.

    Raises:
        ValueError: for ``multiple < 1``, ``limit < multiple``, ``start < 1`` or a tolerance
            outside [0, 1), before calling ``fits``.

    Example:
        >>> search_largest(lambda b: b <= 300, start=64, limit=4096)[0]
        288
    """
    _check_bounds(start, limit, multiple, tolerance)
    tried: List[Tuple[int, bool]] = []

    def probe(batch: int) -> bool:
        ok = bool(fits(batch))
        tried.append((batch, ok))
        return ok

    limit = _down_to(limit, multiple)
    first = min(_down_to(start, multiple), limit)
    lo: Optional[int] = None
    hi: Optional[int] = None
    if probe(first):
        lo = first
        while hi is None and lo < limit:
            nxt = min(lo * 2, limit)
            if probe(nxt):
                lo = nxt
            else:
                hi = nxt
        if hi is None:
            return lo, tuple(tried), f"every batch tried up to the limit of {limit:,} fitted"
    else:
        hi = first
        while lo is None and hi > multiple:
            nxt = _down_to(hi // 2, multiple)
            if probe(nxt):
                lo = nxt
            else:
                hi = nxt
        if lo is None:
            return None, tuple(tried), f"not even a batch of {multiple} fitted"
    while hi - lo > max(multiple, tolerance * lo):
        mid = _down_to((lo + hi) // 2, multiple)
        if mid <= lo:
            break
        if probe(mid):
            lo = mid
        else:
            hi = mid
    return lo, tuple(tried), f"{lo:,} fitted, {hi:,} ran out of memory"


CPU_REASON = ("no GPU here. A CPU has no device memory of its own to run out of: TensorFlow allocates "
              "from the machine's RAM, and a batch too large makes the process swap or the system "
              "kill the kernel, instead of raising ResourceExhaustedError; so tfwb does not search "
              "on a CPU. On a GPU it doubles the batch until TensorFlow's allocator runs out of "
              "memory, then bisects")
TPU_REASON = ("strategy='tpu': tfwb searches on a GPU only; on a TPU compare the allocator's peak "
              "memory per policy instead")


def _detected_device(cfg: RunConfig) -> str:
    if cfg.strategy == "tpu":
        return "tpu"
    return "gpu" if tf.config.list_physical_devices("GPU") else "cpu"


def _fits_by_running(cfg: RunConfig, steps: int) -> Callable[[int], bool]:
    """``fits(batch)``: a short ``tfwb.run`` at that batch; out of memory is False, other errors raise."""
    def fits(batch: int) -> bool:
        try:
            run(cfg.replace(batch_size=batch, steps=steps, warmup_steps=1,
                            label=f"largest-batch search: {batch}"), raise_errors=True)
        except Exception as e:  # noqa: BLE001 - only running out of memory answers "no"
            if is_out_of_memory(e):
                return False
            raise
        finally:
            gc.collect()                       # free the model and batches before the next try
        return True

    return fits


def largest_batch(cfg: RunConfig, *, fits: Optional[Callable[[int], bool]] = None,
                  device: Optional[str] = None, start: Optional[int] = None, limit: int = 16384,
                  multiple: int = 8, tolerance: float = 0.125, steps: int = 2) -> BatchSearch:
    """The largest batch ``cfg`` trains with before the device runs out of memory.

    On a GPU each try is a short ``tfwb.run`` (one warm-up and ``steps`` measured
    steps) at that batch: running out of memory means too large, any other error is
    raised. On a CPU (or a TPU) nothing runs: the result has no figure and says why.

    Args:
        cfg (RunConfig): the configuration (its ``mixed_precision`` is the policy searched).
        fits (callable | None, default None): ``fits(batch) -> bool`` instead of real runs
            (tests, or a cheaper check of your own).
        device (str | None, default None): ``"gpu"``, ``"cpu"`` or ``"tpu"``; None detects it
            (a GPU visible to TensorFlow, or ``strategy='tpu'``). The search runs on ``"gpu"`` only.
        start (int | None, default None): the first batch tried; None is ``cfg.batch_size``.
        limit (int, default 16384): the largest batch tried.
        multiple (int, default 8), tolerance (float, default 0.125): see ``search_largest``.
        steps (int, default 2): measured steps of each try.

    Returns:
        A ``BatchSearch``.

    Raises:
        ValueError: for a device other than gpu/cpu/tpu or bad search bounds, before any work.

    Example:
        >>> largest_batch(RunConfig(workload="text"), device="cpu").batch_size is None
        True
    """
    if device is not None and device not in ("gpu", "cpu", "tpu"):
        raise ValueError(f"device={device!r} is not allowed; one of 'gpu', 'cpu', 'tpu' or None (detect)")
    first = cfg.batch_size if start is None else start
    _check_bounds(first, limit, multiple, tolerance)
    if not _is_int(steps) or steps < 1:
        raise ValueError(f"steps={steps!r} is not allowed; steps must be an int >= 1")
    kind = device or _detected_device(cfg)
    if kind != "gpu":
        return BatchSearch(None, CPU_REASON if kind == "cpu" else TPU_REASON, (), cfg.mixed_precision)
    check = fits if fits is not None else _fits_by_running(cfg, steps)
    best, tried, reason = search_largest(check, start=first, limit=limit, multiple=multiple,
                                         tolerance=tolerance)
    return BatchSearch(best, reason, tried, cfg.mixed_precision)


def largest_batches(cfg: RunConfig, policies: Sequence[str] = MIXED_PRECISION,
                    **kwargs: Any) -> Tuple[BatchSearch, ...]:
    """``largest_batch`` for ``cfg`` under each policy, in order.

    Args:
        cfg (RunConfig): the configuration; its ``mixed_precision`` is replaced by each policy.
        policies (sequence of str, default every ``mixed_precision`` value).
        **kwargs: passed to ``largest_batch`` (``fits``, ``device``, ``limit``...).

    Raises:
        ValueError: for an unknown policy, before any search.

    Example:
        >>> [s.policy for s in largest_batches(RunConfig(workload="text"), device="cpu")]
        ['off', 'mixed_float16', 'mixed_bfloat16']
    """
    names = tuple(policies)
    for name in names:
        policy_name(name)
    return tuple(largest_batch(cfg.replace(mixed_precision=name), **kwargs) for name in names)


def batches_text(searches: Sequence[BatchSearch]) -> str:
    """One line per search; searches that share the same reason for no figure share one line.

    Example:
        >>> print(batches_text(largest_batches(RunConfig(workload="text"), device="tpu")))
        ... # doctest: +ELLIPSIS
        off, mixed_float16, mixed_bfloat16: no figure: strategy='tpu': tfwb searches on a GPU only...
    """
    lines: List[str] = []
    unmeasured: dict = {}
    for s in searches:
        if s.batch_size is None and not s.measured:
            unmeasured.setdefault(s.reason, []).append(s.policy)
        else:
            lines.append(s.text())
    lines += [f"{', '.join(names)}: no figure: {reason}" for reason, names in unmeasured.items()]
    return "\n".join(lines)


def batch_ratio(searches: Sequence[BatchSearch], policy: str, baseline: str = "off") -> Optional[float]:
    """``policy``'s largest batch over ``baseline``'s, or None where either has no figure.

    Example:
        >>> s = (BatchSearch(512, "", ((512, True),), "off"),
        ...      BatchSearch(960, "", ((960, True),), "mixed_float16"))
        >>> batch_ratio(s, "mixed_float16")
        1.875
    """
    found = {s.policy: s.batch_size for s in searches}
    mine, base = found.get(policy), found.get(baseline)
    return mine / base if mine and base else None
