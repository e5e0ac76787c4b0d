"""The published facts behind each knob's rule: ``SOURCES`` and ``source(knob, kind)``.

Each rule of ``tfwb.advice.rules`` rests on a guide, a datasheet or TensorFlow's source; the
table of expectations (``tfwb.advice.table``) prints the facts beside each cell.

Pure: data and one lookup.
"""
from __future__ import annotations

from typing import Dict, Optional, Tuple


#: The published facts behind each rule, by (knob, where the step runs); ``(knob, None)``
#: covers every place. ``source(knob, kind)`` reads it; the table (``tfwb.advice.table``) prints it
#: beside each cell.
SOURCES: Dict[Tuple[str, Optional[str]], str] = {
    ("mixed_precision", "gpu"): (
        "NVIDIA CUDA C++ Programming Guide, warp matrix functions: float16 Tensor Cores from compute "
        "capability 7.0, bfloat16 and TF32 from 8.0; NVIDIA T4/A100/H100/L4 datasheets: dense FP16 and "
        "BF16 Tensor Core rates are twice TF32's (A100 312 vs 156 TFLOPS), a T4's FP16 8x its FP32 "
        "(65 vs 8.1); TensorFlow mixed-precision guide: compute capability 7.0+ gains most, small "
        "models gain little"),
    ("mixed_precision", "cpu"): (
        "TensorFlow mixed-precision guide: mixed precision runs on CPUs, usually much slower; "
        "TensorFlow source tensorflow/core/util/util.cc (IsDataTypeSupportedByOneDNNOnThisCPU): oneDNN "
        "runs bfloat16 with AVX-512 BF16 or AMX, float16 with AVX-512 FP16, AMX-FP16 or AVX-NE-CONVERT; "
        "a direction only where measured per CPU kind and model (tfwb.advice.measured: "
        "benchmarks/results/knob_effects_avx2.md, knob_effects_amx.md)"),
    ("jit_compile", "cpu"): (
        "TensorFlow XLA guide: fusion cuts kernel launches and memory traffic; the first call compiles; "
        "on a CPU a direction only where measured per CPU kind and model (tfwb.advice.measured: "
        "benchmarks/results/knob_effects_avx2.md, knob_effects_amx.md)"),
    ("mixed_precision", "tpu"): (
        "TensorFlow mixed-precision guide: use mixed_bfloat16 on TPUs (float16 is not supported there); "
        "Cloud TPU docs, 'The bfloat16 numerical format': the matrix units multiply in bfloat16"),
    ("tf32", None): (
        "NVIDIA, 'TensorFloat-32 in the A100 GPU': TF32 Tensor Cores from Ampere (compute capability "
        "8.0) on, an NVIDIA-only format; tf.config.experimental.enable_tensor_float_32_execution: "
        "on by default since TensorFlow 2.4"),
    ("jit_compile", None): (
        "TensorFlow XLA guide: fusion cuts kernel launches and memory traffic; every TPU program is "
        "compiled by XLA; the first call compiles"),
    ("steps_per_execution", None): (
        "Keras Model.compile docs: steps_per_execution runs several batches per tf.function call, "
        "cutting Python overhead, most on TPUs and small models"),
    ("strategy", None): (
        "TensorFlow distributed training guide (MirroredStrategy, MultiWorkerMirroredStrategy, "
        "ParameterServerStrategy, TPUStrategy): replicas split the batch and all-reduce gradients"),
    ("sync", None): (
        "CUDA C++ Programming Guide, asynchronous concurrent execution: a kernel launch returns before "
        "the kernel finishes; tf.test.experimental.sync_devices waits for queued device work"),
    ("batch_size", None): "none needed: a different batch is a different amount of work per step",
    ("timing", None): (
        "CUDA C++ Programming Guide, asynchronous concurrent execution: the host queues work and returns; "
        "Keras Model.fit does not read the loss each step unless a batch callback asks for it"),
}
for _k in ("prefetch", "parallel_map", "interleave", "cache", "vectorized_map", "data_source"):
    SOURCES[_k, None] = ("TensorFlow guide 'Better performance with the tf.data API' (prefetch overlaps "
                         "input with the step; parallel map, interleave and cache speed the pipeline); TF "
                         "profiler: input wait >= 20 % of the step is highly input-bound")


def source(knob: str, kind: Optional[str] = None) -> str:
    """The published facts behind ``knob``'s rule where the step runs (``target``'s answer).

    Raises:
        ValueError: a knob without a rule.

    Example:
        >>> source("tf32", "gpu").split(":")[0]
        "NVIDIA, 'TensorFloat-32 in the A100 GPU'"
    """
    if (knob, kind) in SOURCES:
        return SOURCES[knob, kind]
    if (knob, None) in SOURCES:
        return SOURCES[knob, None]
    if knob == "mixed_precision":
        return SOURCES[knob, "cpu"] if kind != "tpu" else SOURCES[knob, "tpu"]
    raise ValueError(f"knob={knob!r} has no rule; one of {tuple(dict.fromkeys(k for k, _ in SOURCES))}")
