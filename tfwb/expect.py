"""Say what an experiment should show before it runs, and afterwards whether it did.

Every measured claim in the book goes through this module, so that "agreed / did NOT
agree" is decided by tested code, never by a conditional written in a notebook cell:

- ``ab(claim, expected)``: an A/B expectation; ``.check(baseline, candidate)`` compares
  two runs (``tfwb.stats.compare``: medians, spreads, run-to-run noise).
- ``at_least`` / ``at_most`` / ``equal``: a threshold (or exact) expectation on one
  measured value; ``.check(value)``.
- ``knob(hardware, baseline, **change)``: the A/B expectation for turning a knob, with
  the direction taken from ``expected_for`` -- a function of the hardware description
  (``tfwb.hardware.detect()``), never a guess written for one machine.

Each ``.check`` returns a ``Check`` whose ``str`` is one sentence:
``Expected: <claim> (<expected>). Measured: <what>. Result: agreed.``

Pure: no TensorFlow. ``tfwb.hardware.DESCRIBED`` holds described machines (a 2-core
AVX2 CPU, AVX-512 CPUs, a Colab T4, an A100, an H100, a TPU VM) and ``table()`` prints
what every knob is expected to do on each.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Dict, Mapping, Optional, Sequence, Tuple, Union

from tfwb import stats

#: Directions an A/B expectation may take (the candidate relative to the baseline).
FASTER, SLOWER, SAME = stats.FASTER, stats.SLOWER, stats.NO_DIFFERENCE
NOT_SLOWER, NOT_FASTER = "not slower", "not faster"
DIRECTIONS = (FASTER, SLOWER, SAME, NOT_SLOWER, NOT_FASTER)

#: What limits a run, as ``bound_of`` reads it from a measured baseline.
INPUT, COMPUTE, OVERHEAD = "input", "compute", "overhead"
BOUNDS = (INPUT, COMPUTE, OVERHEAD)
#: A GPU busy (NVML duty cycle) less than this share of the time, with no input wait
#: to explain it, idles between small kernels: the step is launch/Python-overhead-bound.
OVERHEAD_GPU_BUSY_PCT = 50.0
#: prefetch is expected to be measurably faster only when the part it can hide (the
#: shorter of input wait and compute) is at least this share of the step.
PREFETCH_MIN_HIDDEN = 0.10

AGREED, DISAGREED, CANNOT_TELL = "agreed", "did NOT agree", "cannot tell"


# -- results ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Check:
    """An expectation and the measurement that tests it.

    Attributes:
        claim (str): the sentence being tested.
        expected (str): what was expected, e.g. ``"faster"`` or ``"at least 5x"``.
        comparison (stats.Comparison | stats.RoundsComparison | None): for A/B checks.
        agreed (bool | None): whether the measurement agreed; ``None`` when it cannot
            tell (a run failed, too few steps, no expectation to test).
        measured (str): what was measured, in words (``""``: nothing).
        note (str): why the result is what it is when that is not obvious.
        value (float | None): the measured value of a threshold check.
    """

    claim: str
    expected: str
    comparison: Any = None
    agreed: Optional[bool] = None
    measured: str = ""
    note: str = ""
    value: Optional[float] = None

    @property
    def result(self) -> str:
        """``"agreed"``, ``"did NOT agree"`` or why it cannot tell."""
        if self.agreed is True:
            return AGREED
        if self.agreed is False:
            return DISAGREED
        verdict = getattr(self.comparison, "verdict", None)
        if verdict in (stats.TOO_FEW, getattr(stats, "TOO_FEW_ROUNDS", stats.TOO_FEW)):
            return verdict
        return CANNOT_TELL

    def __str__(self) -> str:
        measured = self.measured or "nothing to compare"
        result = self.result
        if self.note:
            result += f" ({self.note})"
        return f"Expected: {self.claim} ({self.expected}). Measured: {measured}. Result: {result}."


@dataclass(frozen=True)
class Expected:
    """The expected direction of a change on one machine, and why.

    Attributes:
        direction (str | None): one of ``DIRECTIONS``; ``None`` where the book has no
            fixed expectation on this hardware (``why`` says what it depends on).
        why (str): the reason, one clause, on this hardware.
        than (str): what the change is compared with, e.g. ``"float32"``.
    """

    direction: Optional[str]
    why: str
    than: str = "the baseline"

    def __post_init__(self) -> None:
        if self.direction is not None and self.direction not in DIRECTIONS:
            raise ValueError(f"direction={self.direction!r} is not allowed; one of {DIRECTIONS} or None")

    def text(self) -> str:
        """e.g. ``"slower than float32: no native float16 arithmetic ..."``."""
        if self.direction is None:
            return f"no fixed expectation: {self.why}"
        joint = "from" if self.direction == SAME else "than"
        return f"{self.direction} {joint} {self.than}: {self.why}"

    __str__ = text


# -- the three kinds of expectation ----------------------------------------------------------
def _times(x: Any) -> Optional[Sequence[float]]:
    """Per-step seconds of a RunResult (None if it failed), a CallTimes, or a sequence."""
    if hasattr(x, "step_times_s"):
        return x.step_times_s if getattr(x, "ok", True) and x.step_times_s else None
    if hasattr(x, "times_s"):
        return x.times_s or None
    return x


def _input_share(x: Any) -> Optional[float]:
    frac = getattr(x, "input_wait_fraction", None)
    return frac if isinstance(frac, (int, float)) else None


def _agrees(expected: str, verdict: str) -> Optional[bool]:
    if verdict not in (FASTER, SLOWER, SAME):
        return None                       # too few steps / rounds to tell
    if expected == NOT_SLOWER:
        return verdict != SLOWER
    if expected == NOT_FASTER:
        return verdict != FASTER
    return verdict == expected


@dataclass(frozen=True)
class AB:
    """An A/B expectation: the candidate is ``expected`` relative to the baseline.

    Build with ``ab()`` or ``knob()``. ``str(e)`` states the expectation (print it
    before the runs); ``e.check(...)`` tests it.

    Attributes:
        claim (str): what is being tested.
        expected (str | None): one of ``DIRECTIONS``; ``None``: nothing to test here.
        why (str): the reason, shown before the runs.
        compute (bool): a compute lesson (precision, XLA...): a disagreement while either
            run waited on input is reported as "cannot tell", since the pipeline hides it.
    """

    claim: str
    expected: Optional[str]
    why: str = ""
    compute: bool = False

    def __post_init__(self) -> None:
        if self.expected is not None and self.expected not in DIRECTIONS:
            raise ValueError(f"expected={self.expected!r} is not allowed; one of {DIRECTIONS}")

    def __str__(self) -> str:
        head = f"Expecting: {self.claim}: " + (self.expected or "no fixed direction")
        return head + (f" ({self.why})." if self.why else ".")

    def check(self, baseline: Any, candidate: Any = None, *,
              noise: Optional[stats.NoiseBand] = None) -> Check:
        """Test the expectation.

        Args:
            baseline, candidate: RunResults, ``CallTimes`` or sequences of per-step
                seconds; or, alone, a finished comparison (``stats.Comparison``,
                ``stats.RoundsComparison`` from ``compare_interleaved``).
            noise (stats.NoiseBand | None, default None): the run-to-run band for
                ``stats.compare`` (its default when None).

        Returns:
            A ``Check``; ``agreed`` is None when a run failed or there were too few steps.
        """
        expected = self.expected or "no fixed direction"
        if candidate is None and hasattr(baseline, "verdict"):
            cmp, runs = baseline, ()
        else:
            b, c = _times(baseline), _times(candidate)
            if not b or not c:
                return Check(self.claim, expected, None, None, "nothing to compare (a run failed)")
            cmp = stats.compare(b, c) if noise is None else stats.compare(b, c, noise=noise)
            runs = (baseline, candidate)
        if self.expected is None:
            return Check(self.claim, expected, cmp, None, cmp.text(),
                         "no fixed expectation on this hardware")
        agreed = _agrees(self.expected, cmp.verdict)
        note = ""
        shares = [s for s in map(_input_share, runs) if s is not None]
        if agreed is False and self.compute and shares and max(shares) >= _moderate_input():
            agreed = None
            note = (f"the runs waited on input up to {max(shares):.0%} of the time, which hides a "
                    "change in compute: measure it with data_source='memory'")
        return Check(self.claim, expected, cmp, agreed, cmp.text(), note)


def _moderate_input() -> float:
    from tfwb.diagnosis import MODERATE_INPUT_FRACTION

    return MODERATE_INPUT_FRACTION


def ab(claim: str, expected: Union[str, Expected, None], *, compute: bool = False) -> AB:
    """An A/B expectation.

    Args:
        claim (str): what is tested, e.g. ``"prefetch hides the input wait"``.
        expected (str | Expected | None): a direction from ``DIRECTIONS`` (the candidate
            relative to the baseline), or an ``Expected`` from ``expected_for`` (its
            reason is kept), or None for "no fixed expectation".
        compute (bool, default False): the claim is about compute (see ``AB.compute``).

    Raises:
        ValueError: for an unknown direction.

    Example:
        >>> e = ab("caching helps", "faster")
        >>> print(e.check([2.0] * 9, [1.0] * 9))
        Expected: caching helps (faster). Measured: 2.00x faster. Result: agreed.
    """
    if isinstance(expected, Expected):
        return AB(claim, expected.direction, expected.why, compute)
    return AB(claim, expected, "", compute)


def check(claim: str, baseline: Any, candidate: Any, expected: str) -> Check:
    """``ab(claim, expected).check(baseline, candidate)`` in one call (``tfwb.check``).

    Example:
        >>> print(check("caching helps", [2.0] * 9, [1.0] * 9, "faster"))
        Expected: caching helps (faster). Measured: 2.00x faster. Result: agreed.
    """
    return ab(claim, expected).check(baseline, candidate)


def _number(value: float) -> str:
    if value != value or math.isinf(value):
        return str(value)
    size = abs(value)
    if size >= 100 or float(value).is_integer():
        return f"{value:,.0f}"
    if size >= 10:
        return f"{value:.1f}"
    if size >= 0.01:
        return f"{value:.2f}"
    return f"{value:.2g}"


def _with_unit(value: float, unit: str) -> str:
    text = _number(value)
    if not unit:
        return text
    return text + unit if unit in ("x", "%") else f"{text} {unit}"


@dataclass(frozen=True)
class Threshold:
    """A measured value is expected at least / at most a limit. Build with ``at_least``/``at_most``."""

    claim: str
    limit: float
    at_least: bool
    unit: str = ""
    why: str = ""

    @property
    def expected(self) -> str:
        return ("at least " if self.at_least else "at most ") + _with_unit(self.limit, self.unit)

    def __str__(self) -> str:
        return f"Expecting: {self.claim}: {self.expected}" + (f" ({self.why})." if self.why else ".")

    def check(self, value: Optional[float]) -> Check:
        """Test ``value`` (in the limit's unit); ``None`` or NaN: cannot tell."""
        if value is None or value != value:
            return Check(self.claim, self.expected, None, None, "nothing measured")
        value = float(value)
        agreed = value >= self.limit if self.at_least else value <= self.limit
        return Check(self.claim, self.expected, None, agreed, _with_unit(value, self.unit), value=value)


def at_least(claim: str, limit: float, unit: str = "", *, why: str = "") -> Threshold:
    """Expect a measured value of at least ``limit``.

    Args:
        claim (str): what is tested, e.g. ``"the first call costs more than later ones"``.
        limit (float): the smallest value that agrees (inclusive).
        unit (str, default ""): shown after numbers; ``"x"`` and ``"%"`` attach without a space.
        why (str, default ""): the reason, shown by ``str()``.

    Example:
        >>> print(at_least("the first call traces", 5, "x").check(38.2))
        Expected: the first call traces (at least 5x). Measured: 38.2x. Result: agreed.
    """
    return Threshold(claim, float(limit), True, unit, why)


def at_most(claim: str, limit: float, unit: str = "", *, why: str = "") -> Threshold:
    """Expect a measured value of at most ``limit`` (inclusive). See ``at_least``.

    Example:
        >>> print(at_most("the input wait", 5, "%").check(12.5))
        Expected: the input wait (at most 5%). Measured: 12.5%. Result: did NOT agree.
    """
    return Threshold(claim, float(limit), False, unit, why)


@dataclass(frozen=True)
class Equal:
    """A measured value (a verdict, a count) is expected to equal ``value``. Build with ``equal``."""

    claim: str
    value: Any
    why: str = ""

    def __str__(self) -> str:
        return f"Expecting: {self.claim}: {self.value}" + (f" ({self.why})." if self.why else ".")

    def check(self, measured: Any) -> Check:
        return Check(self.claim, str(self.value), None, measured == self.value, str(measured))


def equal(claim: str, value: Any, *, why: str = "") -> Equal:
    """Expect a measured value to equal ``value`` exactly (counts, verdicts, orders).

    Example:
        >>> print(equal("take(4).cache() reads each file once", 4).check(4))
        Expected: take(4).cache() reads each file once (4). Measured: 4. Result: agreed.
    """
    return Equal(claim, value, why)


@dataclass(frozen=True)
class Unjudged:
    """A measured value with no fixed expectation on this hardware: printed, never judged.

    Build with ``unjudged``; ``precision_memory`` returns one where the hardware gives
    nothing to expect (a CPU's process memory).
    """

    claim: str
    why: str
    unit: str = ""

    @property
    def expected(self) -> str:
        return "no fixed expectation"

    def __str__(self) -> str:
        return f"Expecting: {self.claim}: no fixed expectation ({self.why})."

    def check(self, value: Optional[float] = None) -> Check:
        """Report ``value`` (``None``: nothing measured); the result is always "cannot tell"."""
        if value is None or value != value:
            return Check(self.claim, self.expected, None, None, "nothing measured", self.why)
        return Check(self.claim, self.expected, None, None, _with_unit(float(value), self.unit), self.why,
                     value=float(value))


def unjudged(claim: str, why: str, unit: str = "") -> Unjudged:
    """A value to measure and print with no fixed expectation here, and why.

    Example:
        >>> print(unjudged("peak RSS ratio", "RSS counts the whole process", "x").check(1.02))
        ... # doctest: +NORMALIZE_WHITESPACE
        Expected: peak RSS ratio (no fixed expectation). Measured: 1.02x.
        Result: cannot tell (RSS counts the whole process).
    """
    return Unjudged(claim, why, unit)


def default_device(hw: Mapping[str, Any]) -> Equal:
    """Where a step with no strategy and no ``tf.device`` runs most of its ops, on this hardware.

    TensorFlow places an op on ``GPU:0`` whenever it sees a GPU and the op has a GPU
    kernel, with or without a distribution strategy; otherwise on ``CPU:0`` (a TPU VM's
    TPU takes ``strategy="tpu"``). Check it against
    ``tfwb.tf.lab.placement.placement(step).main_device()``.

    Example:
        >>> print(default_device({"gpus": [{"name": "Tesla T4"}]}))   # doctest: +NORMALIZE_WHITESPACE
        Expecting: the device that runs most of a step's ops, with no strategy and no tf.device: GPU:0
        (TF picks GPU:0 for every op with a GPU kernel whenever it sees a GPU; no strategy needed).
    """
    claim = "the device that runs most of a step's ops, with no strategy and no tf.device"
    if hw.get("gpus"):
        return equal(claim, "GPU:0", why="TF picks GPU:0 for every op with a GPU kernel whenever it sees a "
                     "GPU; no strategy needed")
    why = "no GPU here" + ("; the TPU runs a step only under strategy='tpu'" if hw.get("tpu") else "")
    return equal(claim, "CPU:0", why=why)


# -- what a knob is expected to do, as a function of the hardware ----------------------------
#: Model-side knobs whose effect is the step's compute (measure with data in memory).
COMPUTE_KNOBS = ("mixed_precision", "jit_compile", "steps_per_execution")
#: Input-pipeline knobs (their effect depends on whether the run waits on input).
INPUT_KNOBS = ("prefetch", "parallel_map", "interleave", "cache", "vectorized_map", "data_source")
#: Every change ``expected_for`` knows; ``sync`` (value False) is timing without a device sync.
KNOWN = COMPUTE_KNOBS + ("strategy",) + INPUT_KNOBS + ("sync",)


def _flags(hw: Mapping[str, Any]) -> frozenset:
    return frozenset(str(f).lower() for f in (hw.get("cpu_flags") or ()))


def best_compute_capability(hw: Mapping[str, Any]) -> Optional[Tuple[int, int]]:
    """The highest compute capability among the GPUs, or None (no GPU, or none known).

    Example:
        >>> best_compute_capability({"gpus": [{"compute_capability": [7, 5]}, {"compute_capability": None}]})
        (7, 5)
    """
    ccs = [tuple(int(x) for x in g["compute_capability"]) for g in (hw.get("gpus") or ())
           if g.get("compute_capability")]
    return max(ccs) if ccs else None


def target(hw: Mapping[str, Any], strategy: Optional[str] = None) -> str:
    """Where the model's step runs: ``"tpu"``, ``"gpu"``, ``"cpu"``, or ``"none"``.

    ``strategy=None`` means the strategy a reader would pick here: ``"tpu"`` on a TPU
    machine, else the default. On a TPU VM without ``strategy="tpu"`` the step runs on
    the host CPU; ``strategy="tpu"`` with no TPU is ``"none"`` (the run fails).

    Example:
        >>> target({"gpus": [], "tpu": True}), target({"gpus": [], "tpu": True}, "default")
        ('tpu', 'cpu')
    """
    if strategy is None:
        strategy = "tpu" if hw.get("tpu") else "default"
    if strategy == "tpu":
        return "tpu" if hw.get("tpu") else "none"
    return "gpu" if hw.get("gpus") else "cpu"


def where(hw: Mapping[str, Any], strategy: Optional[str] = None) -> str:
    """A few words for the device the step runs on, e.g. ``"Tesla T4 (compute capability 7.5)"``.

    Example:
        >>> where({"gpus": [], "cpu_flags": ("avx2",), "cpu_count": 2})
        'this CPU (2 cores, AVX2)'
    """
    kind = target(hw, strategy)
    if kind == "tpu":
        return "a TPU"
    if kind == "none":
        return "this machine (no TPU)"
    if kind == "gpu":
        gpus = hw.get("gpus") or []
        name = gpus[0].get("name") or "GPU"
        cc = best_compute_capability(hw)
        count = f"{len(gpus)}x " if len(gpus) > 1 else ""
        return f"{count}{name}" + (f" (compute capability {cc[0]}.{cc[1]})" if cc else "")
    flags = _flags(hw)
    feats = ["AVX-512" if "avx512f" in flags else "AVX2" if "avx2" in flags else None,
             "BF16" if flags & {"avx512_bf16", "amx_bf16"} else None,
             "FP16" if flags & {"avx512_fp16", "amx_fp16"} else None,
             "AMX" if "amx_tile" in flags else None]
    cores = hw.get("cpu_count")
    details = ([f"{cores} core{'' if cores == 1 else 's'}"] if cores else []) + [f for f in feats if f]
    host = "this TPU VM's host CPU" if hw.get("tpu") else "this CPU"
    return host + (f" ({', '.join(details)})" if details else "")


def bound_of(result: Any) -> Optional[str]:
    """What limited a measured run: ``"input"``, ``"overhead"``, ``"compute"`` or None.

    ``"input"``: input wait >= 20 % of step time (the TF profiler's "highly input-bound").
    ``"overhead"``: no such wait, but the GPUs were busy (NVML) less than
    ``OVERHEAD_GPU_BUSY_PCT`` of the time: they idle between small kernels.
    ``"compute"``: otherwise. None for a failed run, a run with no steps, or None.

    Example:
        >>> from tfwb.config import RunConfig
        >>> from tfwb.records import RunResult
        >>> bound_of(RunResult(config=RunConfig(), step_times_s=(1.0,) * 5, input_wait_s=(0.5,) * 5))
        'input'
    """
    from tfwb.diagnosis import HIGH_INPUT_FRACTION

    if result is None or not getattr(result, "ok", False):
        return None
    frac = result.input_wait_fraction
    if frac is not None and frac >= HIGH_INPUT_FRACTION:
        return INPUT
    util = [u for u in result.utilization().get("gpu_util_pct") or () if u is not None]
    if util and max(util) < OVERHEAD_GPU_BUSY_PCT:
        return OVERHEAD
    return COMPUTE


def _config(baseline: Any) -> Any:
    return getattr(baseline, "config", baseline)


def _hidden_by_prefetch(baseline: Any) -> Optional[float]:
    """Share of the baseline step prefetch could hide: min(wait, compute) / step."""
    if not getattr(baseline, "ok", False) or not baseline.input_wait_s:
        return None
    wait, compute, step = baseline.median_wait_s, baseline.median_compute_s, baseline.median_step_s
    if not step:
        return None
    return min(wait, compute) / step


def _downgrade(e: Expected, bound: Optional[str]) -> Expected:
    """A compute change on a run that waits on input: the pipeline hides most of it."""
    if bound != INPUT or e.direction not in (FASTER, SLOWER):
        return e
    softer = NOT_SLOWER if e.direction == FASTER else NOT_FASTER
    return Expected(softer, e.why + "; but the run waits on input, which hides a change in the step",
                    e.than)


def _precision(hw: Mapping[str, Any], value: str, kind: str, bound: Optional[str]) -> Expected:
    than = "float32"
    if value == "off":
        raise ValueError("mixed_precision='off' is the float32 baseline; compare a policy against it")
    if value not in ("mixed_float16", "mixed_bfloat16"):
        raise ValueError(f"mixed_precision={value!r} is not allowed; 'mixed_float16' or 'mixed_bfloat16'")
    half = value == "mixed_float16"
    flags = _flags(hw)
    if kind == "none":
        return Expected(None, "no TPU here: the run fails before any work; pick strategy='default'", than)
    if kind == "tpu":
        if half:
            return Expected(None, "TPUs have no float16 arithmetic (their matrix units compute in "
                            "bfloat16): tfwb refuses this policy with strategy='tpu' before any work; "
                            "use mixed_bfloat16 on a TPU", than)
        return Expected(NOT_SLOWER, "the TPU's matrix units compute in bfloat16 (float32 matmuls already "
                        "run bfloat16 passes); halving activations saves memory traffic, more so on "
                        "large models", than)
    if kind == "gpu":
        cc = best_compute_capability(hw)
        if cc is None:
            return Expected(None, "the GPU's compute capability is unknown, so whether it has "
                            "Tensor Cores for this type is too", than)
        need = (7, 0) if half else (8, 0)
        if cc < need:
            if half:
                why = (f"compute capability {cc[0]}.{cc[1]} has no Tensor Cores (they start at 7.0): "
                       "float16 math is no faster and the casts cost time")
            else:
                why = (f"compute capability {cc[0]}.{cc[1]} has no bfloat16 Tensor Cores (they start "
                       "at 8.0): not recommended here, use mixed_float16 on this GPU")
            return Expected(NOT_FASTER, why, than)
        if bound == OVERHEAD:
            return Expected(NOT_FASTER, "the GPU idles between small kernels, so faster math cannot "
                            "show, and the policy adds cast kernels", than)
        tc = "float16" if half else "bfloat16"
        why = (f"{tc} Tensor Cores (compute capability {cc[0]}.{cc[1]}) run matmuls and convolutions "
               "several times faster than float32 and halve activation memory, on a step busy with them")
        if cc >= (8, 0):
            why += " (float32 matmuls already use TF32 Tensor Cores here, so the gain is smaller than on a T4)"
        return _downgrade(Expected(FASTER, why, than), bound)
    # CPU: x86 flags name the instructions; Arm lists "fphp" (float16) and "bf16".
    arm = "asimd" in flags
    if half:
        # TF's oneDNN runs float16 only with AVX-512 FP16 or AMX-FP16 (on AVX-512 BW), or with
        # AVX-NE-CONVERT (IsDataTypeSupportedByOneDNNOnThisCPU in tensorflow/core/util/util.cc).
        if (flags & {"avx512_fp16", "amx_fp16"} or "avx_ne_convert" in flags
                or (arm and "fphp" in flags)):
            return Expected(None, "this CPU has float16 arithmetic that TF's CPU kernels can use, but "
                            "whether it outweighs the casts on a small model was not measured for "
                            "the book", than)
        if "avx512f" in flags:
            why = ("oneDNN runs no float16 on this CPU (that takes AVX-512 FP16, AMX-FP16 or "
                   "AVX-NE-CONVERT, which it lacks): TF falls back to generic Eigen kernels, often "
                   "many times slower, and the policy's casts cost time on top")
        elif flags and not arm:
            why = ("without AVX-512, oneDNN runs no float16 at all: TF falls back to generic Eigen "
                   "kernels, often many times slower")
        else:
            why = ("no float16 arithmetic is listed for this CPU: TF's CPU kernels are fastest in "
                   "float32, and the policy adds casts")
        return _downgrade(Expected(SLOWER, why, than), bound)
    if "amx_bf16" in flags:
        return Expected(NOT_SLOWER, "AMX runs bfloat16 matmuls natively through oneDNN: about float32 "
                        "speed on a small model, faster on large matmuls", than)
    if "avx512_bf16" in flags:
        return Expected(NOT_SLOWER, "AVX-512 BF16 gives oneDNN native bfloat16 dot products: about "
                        "float32 speed", than)
    if arm and "bf16" in flags:
        return Expected(None, "this Arm CPU has bfloat16 instructions that TF's oneDNN/ACL kernels can "
                        "use; not measured for the book", than)
    if flags and not arm:
        why = ("this CPU has no bfloat16 instructions (no AVX-512 BF16 or AMX): every bfloat16 op "
               "converts in software")
    else:
        why = ("no bfloat16 instructions are listed for this CPU: every bfloat16 op converts in "
               "software")
    return _downgrade(Expected(SLOWER, why, than), bound)


def _jit(kind: str, bound: Optional[str]) -> Expected:
    than = "jit_compile=False"
    if kind == "none":
        return Expected(None, "no TPU here: the run fails before any work; pick strategy='default'", than)
    if kind == "tpu":
        return Expected(SAME, "on a TPU every step is compiled by XLA anyway", than)
    if kind == "gpu":
        if bound == OVERHEAD:
            return Expected(FASTER, "the GPU idles between many small kernels; XLA fuses them into "
                            "a few launches (after a first step that compiles)", than)
        return Expected(NOT_SLOWER, "large matmuls and convolutions run in the same cuBLAS/cuDNN "
                        "kernels either way; XLA fuses the small ops around them (the first step "
                        "compiles)", than)
    return Expected(NOT_FASTER, "XLA's CPU code generation rarely beats the oneDNN kernels TF's own CPU "
                    "path uses: often slower on small models; the first step compiles", than)


def _steps_per_call(kind: str, bound: Optional[str]) -> Expected:
    than = "one step per call"
    if kind == "none":
        return Expected(None, "no TPU here: the run fails before any work; pick strategy='default'", than)
    if kind == "tpu" or (kind == "gpu" and bound == OVERHEAD):
        return Expected(FASTER, "several steps per call save a host round trip per step, which a "
                        + ("TPU pays on every call" if kind == "tpu" else "GPU idling between kernels shows"),
                        than)
    return Expected(NOT_SLOWER, "it saves a Python call and a loss read per step: much where steps are "
                    "short (a millisecond or so), little where the step's compute dominates", than)


def _strategy(hw: Mapping[str, Any], value: str) -> Expected:
    than = "one device (strategy='default')"
    gpus = len(hw.get("gpus") or ())
    if value == "default":
        raise ValueError("strategy='default' is the baseline; compare another strategy against it")
    if value == "tpu":
        if not hw.get("tpu"):
            return Expected(None, "no TPU here: the run fails before any work; pick 'default'", than)
        return Expected(None, "without strategy='tpu' the step runs on the TPU VM's host CPU; the TPU "
                        "wins on compute-bound models, while a small model with one step per call "
                        "pays a host round trip per step (raise steps_per_execution)", than)
    if value == "mirrored":
        if gpus >= 2:
            return Expected(None, f"{gpus} GPUs each take a share of the batch: faster when each share "
                            "keeps its GPU busy, slower on small models where the gradient all-reduce "
                            "dominates; compare examples per second", than)
        if gpus == 1:
            return Expected(NOT_FASTER, "one GPU is one replica: the same work plus the strategy's "
                            "overhead", than)
        return Expected(SLOWER, "the replicas are logical devices on the same CPU cores: no extra "
                        "compute, plus an all-reduce every step", than)
    if value == "multi_worker":
        if gpus:
            return Expected(None, "depends on the workers' GPUs and the network between them", than)
        return Expected(SLOWER, "the workers are processes sharing this machine's CPU cores (each gets "
                        "its own share of them: none brings new compute), and every step adds an all-reduce "
                        "between the processes over loopback (gRPC)", than)
    if value == "parameter_server":
        return Expected(SLOWER, "a chief schedules each step on a worker process and the variables live "
                        "on a ps process: every step crosses processes over gRPC (tfwb waits for each "
                        "step's loss, one round trip per step); it pays off for many workers and large "
                        "sparse models, not on one machine", than)
    raise ValueError(f"strategy={value!r} is not allowed; one of 'mirrored', 'multi_worker', "
                     "'parameter_server', 'tpu'")


def _input(hw: Mapping[str, Any], knob: str, value: Any, baseline: Any, bound: Optional[str]) -> Expected:
    cfg = _config(baseline)
    than = f"{knob}=False" if knob != "data_source" else (
        f"data_source={getattr(cfg, 'data_source', None) or 'generator'!r}")
    if knob == "data_source" and value not in ("files", "memory"):
        raise ValueError(f"data_source={value!r} is the naive baseline; expect 'files' or 'memory' against it")
    if knob != "data_source" and not value:
        raise ValueError(f"{knob}={value!r} is the baseline; turn the knob on to compare")
    if knob == "parallel_map":
        if getattr(cfg, "data_source", None) == "generator":
            return Expected(NOT_SLOWER, "a Python generator holds the GIL, so parallel calls run one "
                            "at a time", than)
        if (hw.get("cpu_count") or 2) < 2:
            return Expected(NOT_SLOWER, "one CPU core: nothing to run in parallel", than)
    if knob == "prefetch":
        hidden = _hidden_by_prefetch(baseline)
        if hidden is not None:
            if hidden >= PREFETCH_MIN_HIDDEN:
                return Expected(FASTER, f"prefetch overlaps input with the step, hiding up to {hidden:.0%} "
                                "of it here (the shorter of input wait and compute)", than)
            return Expected(NOT_SLOWER, f"prefetch can hide only the shorter of input wait and compute: "
                            f"{hidden:.0%} of the step here, too little to tell from noise", than)
    if bound == INPUT:
        how = "prefetch overlaps that wait with the step" if knob == "prefetch" else "this knob speeds the pipeline up"
        return Expected(FASTER, f"the run waits on input, and {how}", than)
    if bound in (COMPUTE, OVERHEAD):
        return Expected(NOT_SLOWER, "the step hardly waits on input: little to gain, nothing to lose", than)
    return Expected(NOT_SLOWER, "faster when the run waits on input, about the same when it does not", than)


def _sync(kind: str, value: Any) -> Expected:
    than = "timing with a device sync"
    if value:
        raise ValueError("sync=True is the honest baseline; expect sync=False against it")
    if kind in ("gpu", "tpu"):
        return Expected(FASTER, "the accelerator runs asynchronously: without a sync the clock stops "
                        "when the work is queued, not when it is done, and under-reports", than)
    return Expected(NOT_SLOWER, "TF's CPU kernels finish before the call returns, so skipping the sync "
                    "saves only the sync's own small cost", than)


def expected_for(hardware: Mapping[str, Any], knob: str, value: Any = True, baseline: Any = None, *,
                 bound: Optional[str] = None) -> Expected:
    """What changing one knob should do on this hardware, relative to the baseline.

    Args:
        hardware (mapping): ``tfwb.hardware.detect()`` output or a described machine
            (``tfwb.hardware.DESCRIBED``): keys ``gpus`` (``compute_capability``),
            ``cpu_flags``, ``cpu_count``, ``tpu``.
        knob (str): a RunConfig field in ``KNOWN`` (or ``"sync"`` for timing without a
            device sync).
        value (default True): the knob's new value (``"mixed_float16"``, ``True``...).
        baseline (RunResult | RunConfig | None, default None): the run (or config) the
            change is made to: its ``strategy`` decides where the step runs, and a
            measured run tells whether it waits on input or idles a GPU (``bound_of``).
        bound (str | None, default None): ``"input"``, ``"compute"`` or ``"overhead"``,
            overriding what ``baseline`` says; None: from ``baseline``, else unknown
            (model knobs then assume a compute-bound step).

    Returns:
        An ``Expected``: ``direction`` (or None where it depends on the model more than
        on the machine), ``why`` and ``than``.

    Raises:
        ValueError: an unknown knob or bound, or a value that is the baseline itself.

    Example:
        >>> from tfwb.hardware import DESCRIBED
        >>> expected_for(DESCRIBED["colab-t4"], "mixed_precision", "mixed_float16").direction
        'faster'
        >>> expected_for(DESCRIBED["binder-2core-avx2"], "mixed_precision", "mixed_float16").direction
        'slower'
    """
    if knob not in KNOWN:
        raise ValueError(f"knob={knob!r} has no hardware expectation; one of {KNOWN}")
    if bound is not None and bound not in BOUNDS:
        raise ValueError(f"bound={bound!r} is not allowed; one of {BOUNDS} or None")
    if bound is None:
        bound = bound_of(baseline) if hasattr(baseline, "step_times_s") else None
        if bound is None and getattr(_config(baseline), "data_source", None) == "memory":
            bound = COMPUTE if knob not in INPUT_KNOBS else None
    kind = target(hardware, getattr(_config(baseline), "strategy", None))
    if knob == "mixed_precision":
        return _precision(hardware, value, kind, bound)
    if knob == "jit_compile":
        if not value:
            raise ValueError("jit_compile=False is the baseline; turn it on to compare")
        return _downgrade(_jit(kind, bound), bound)
    if knob == "steps_per_execution":
        if value == 1:
            raise ValueError("steps_per_execution=1 is the baseline; compare a larger value")
        return _steps_per_call(kind, bound)
    if knob == "strategy":
        return _strategy(hardware, value)
    if knob == "sync":
        return _sync(kind, value)
    return _input(hardware, knob, value, baseline, bound)


def _combine(parts: Sequence[Expected]) -> Expected:
    """One expectation for several knobs turned at once, or ValueError if they pull apart."""
    if len(parts) == 1:
        return parts[0]
    directions = {p.direction for p in parts}
    why = "; ".join(dict.fromkeys(p.why for p in parts))      # a reason two knobs share, once
    than = "the baseline"
    if len(directions) == 1:
        return Expected(parts[0].direction, why, than)
    if None not in directions and directions <= {FASTER, NOT_SLOWER}:
        return Expected(FASTER, why, than)
    if None not in directions and directions <= {SLOWER, NOT_FASTER}:
        return Expected(SLOWER, why, than)
    if None not in directions and directions <= {NOT_SLOWER, NOT_FASTER, SAME}:
        return Expected(SAME if directions == {SAME} else None, why, than)
    raise ValueError("these changes pull in different directions on this hardware "
                     f"({', '.join(sorted(str(d) for d in directions))}): check them one at a time")


def knob(hardware: Mapping[str, Any], baseline: Any = None, **change: Any) -> AB:
    """The A/B expectation for changing knobs on this hardware (``expected_for``, as an ``AB``).

    Args:
        hardware (mapping): ``tfwb.hardware.detect()`` output or a described machine.
        baseline (RunResult | RunConfig | None, default None): what the change is made
            to; a measured RunResult lets the expectation use what limited it.
        **change: the knobs and their new values, e.g. ``mixed_precision="mixed_float16"``.
            Several knobs at once must agree in direction (input knobs usually do).

    Raises:
        ValueError: no change, an unknown knob, or changes that pull apart here.

    Example:
        >>> from tfwb.hardware import DESCRIBED
        >>> e = knob(DESCRIBED["binder-2core-avx2"], mixed_precision="mixed_float16")
        >>> e.expected, e.claim
        ('slower', "mixed_precision='mixed_float16' on this CPU (2 cores, AVX2)")
        >>> print(e.check([1.0] * 9, [1.6] * 9))   # doctest: +NORMALIZE_WHITESPACE
        Expected: mixed_precision='mixed_float16' on this CPU (2 cores, AVX2) (slower).
        Measured: 1.60x slower. Result: agreed.
    """
    if not change:
        raise ValueError("name at least one knob to change, e.g. knob(hw, mixed_precision='mixed_float16')")
    parts = [expected_for(hardware, k, v, baseline) for k, v in change.items()]
    e = _combine(parts)
    strategy = change.get("strategy", getattr(_config(baseline), "strategy", None))
    label = ", ".join(f"{k}={v!r}" for k, v in change.items())
    return AB(f"{label} on {where(hardware, strategy)}", e.direction, e.why,
              compute=any(k in COMPUTE_KNOBS for k in change))


#: What ``precision_memory`` compares: the run's peak memory, or the largest batch that trains.
MEMORY_MEASURES = ("peak", "batch")


def precision_memory(hardware: Mapping[str, Any], value: str, baseline: Any = None, *,
                     measure: str = "peak") -> Union[Threshold, Unjudged]:
    """What a precision policy should do to memory on this hardware, as a ratio to float32.

    Args:
        hardware (mapping): ``tfwb.hardware.detect()`` output or a described machine.
        value (str): ``"mixed_float16"`` or ``"mixed_bfloat16"``.
        baseline (RunResult | RunConfig | None, default None): its ``strategy`` decides
            where the step runs (``target``).
        measure (str, default "peak"): ``"peak"``: the run's peak memory
            (``run.extras["memory"]``: TensorFlow's allocator on a GPU or TPU, the
            process's RSS on a CPU), the policy's over float32's; ``"batch"``: the largest
            batch that trains (``tfwb.tf.lab.precision.largest_batch``), the policy's over
            float32's.

    Returns:
        A ``Threshold`` on a GPU (peak at most 1x, batch at least 1x) or TPU (peak), else
        an ``Unjudged`` that says why nothing is expected; either has ``.check(ratio)``.

    Raises:
        ValueError: for a value that is not a mixed policy, or an unknown measure.

    Example:
        >>> from tfwb.hardware import DESCRIBED
        >>> print(precision_memory(DESCRIBED["colab-t4"], "mixed_float16").expected)
        at most 1x
        >>> precision_memory(DESCRIBED["binder-2core-avx2"], "mixed_float16").expected
        'no fixed expectation'
    """
    if value not in ("mixed_float16", "mixed_bfloat16"):
        raise ValueError(f"mixed_precision={value!r} is not allowed here; 'mixed_float16' or "
                         "'mixed_bfloat16' (float32, 'off', is what it is compared with)")
    if measure not in MEMORY_MEASURES:
        raise ValueError(f"measure={measure!r} is not allowed; one of {MEMORY_MEASURES}")
    strategy = getattr(_config(baseline), "strategy", None)
    kind = target(hardware, strategy)
    peak = measure == "peak"
    what = "peak memory" if peak else "largest batch"
    claim = f"{value}'s {what} over float32's, on {where(hardware, strategy)}"
    if kind == "none" or (kind == "tpu" and value == "mixed_float16"):
        return Unjudged(claim, "the run fails before any work here", "x")
    if kind == "cpu":
        why = ("on a CPU tfwb reads the whole process's peak RSS: TensorFlow's runtime, the data and what "
               "earlier runs left behind dominate it, so a policy's smaller activations need not show"
               if peak else
               "a CPU has no device memory to run out of (a batch too large swaps or gets the process "
               "killed), so tfwb searches batches on a GPU only")
        return Unjudged(claim, why, "x")
    if not peak and kind == "tpu":
        return Unjudged(claim, "tfwb searches batches on a GPU only", "x")
    if peak:
        return at_most(claim, 1.0, "x", why="activations are stored in 16 bits while weights and optimizer "
                       "state stay float32: the saving grows with batch and model size, and is small when "
                       "weights and optimizer state dominate")
    return at_least(claim, 1.0, "x", why="16-bit activations leave room for more examples: up to about twice "
                    "as many where activations dominate the memory")


# -- the table of described machines ----------------------------------------------------------
#: The changes ``table()`` shows: (label, knob, value, bound).
TABLE_CHANGES: Tuple[Tuple[str, str, Any, Optional[str]], ...] = (
    ("mixed_precision='mixed_float16'", "mixed_precision", "mixed_float16", None),
    ("mixed_precision='mixed_bfloat16'", "mixed_precision", "mixed_bfloat16", None),
    ("jit_compile=True", "jit_compile", True, None),
    ("jit_compile=True, GPU idling (overhead-bound)", "jit_compile", True, OVERHEAD),
    ("steps_per_execution=8", "steps_per_execution", 8, None),
    ("strategy='mirrored'", "strategy", "mirrored", None),
    ("strategy='tpu'", "strategy", "tpu", None),
    ("prefetch=True, input-bound run", "prefetch", True, INPUT),
    ("prefetch=True, compute-bound run", "prefetch", True, COMPUTE),
    ("parallel_map=True, input-bound run", "parallel_map", True, INPUT),
    ("timing without a device sync", "sync", False, None),
)


def table(machines: Optional[Mapping[str, Mapping[str, Any]]] = None,
          changes: Sequence[Tuple[str, str, Any, Optional[str]]] = TABLE_CHANGES) -> str:
    """Markdown: the expected direction of each change on each machine, then the reasons.

    Args:
        machines (mapping | None, default None): name -> hardware description;
            None is ``tfwb.hardware.DESCRIBED``.
        changes (sequence, default ``TABLE_CHANGES``): ``(label, knob, value, bound)``.

    Example:
        >>> print(table().splitlines()[0])
        # What each knob is expected to do, per machine
    """
    from tfwb import hardware as hw_module

    machines = hw_module.DESCRIBED if machines is None else machines
    names = list(machines)
    cells: Dict[Tuple[str, str], Expected] = {
        (label, name): expected_for(machines[name], k, v, bound=b)
        for label, k, v, b in changes for name in names}
    lines = [
        "# What each knob is expected to do, per machine",
        "",
        "Generated by `python benchmarks/expectations.py` from `tfwb.expect.table()` over",
        "`tfwb.hardware.DESCRIBED`. Each cell is the candidate relative to the baseline",
        "(float32, no XLA, one step per call, one device, the knob off, a synced timing);",
        "`-` means no fixed expectation on that machine (the reason says what it depends on).",
        "A chapter prints the same sentence for the reader's own machine",
        "(`tfwb.expect.knob(hw, baseline, ...)`), then checks it against the measurement.",
        "",
        "| change | " + " | ".join(names) + " |",
        "| --- | " + " | ".join("---" for _ in names) + " |",
    ]
    for label, *_ in changes:
        lines.append(f"| {label} | " + " | ".join(cells[label, n].direction or "-" for n in names) + " |")
    for name in names:
        hw = machines[name]
        lines += ["", f"## {name}: {hw_module.describe(hw)}", ""]
        for label, *_ in changes:
            lines.append(f"- {label}: {cells[label, name].text()}.")
    return "\n".join(lines) + "\n"
