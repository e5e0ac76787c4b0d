"""The one place tfwb asks TensorFlow about its devices and changes them: which GPUs it
can use (``machine``), logical CPU replicas, and device sync.

``machine()`` is ``tfwb.detect_hardware()``: ``tfwb.hardware.detect()`` (NVML's view)
with TensorFlow's GPUs as ``gpus``, matched to NVML's by PCI bus id, and a plain
sentence when NVML sees a GPU TensorFlow cannot use (``Machine.gpu_problem``). It reads
``tf.config.list_physical_devices`` and ``get_device_details`` (both documented to work
before the runtime starts: no logical device is made, no GPU memory is taken) and, for
each GPU, its PCI bus id from the CUDA driver (``cuDeviceGetPCIBusId``, which needs only
the ``cuInit`` that listing the GPUs already did: no context, no memory).

``mirrored`` on a machine without a GPU needs several logical CPU devices, and
TensorFlow accepts that split only before its runtime starts (the first op, the first
``list_logical_devices`` call, ...). ``setup_devices()`` makes the split; chapters call
it in their first cell, and ``tfwb.run`` calls it before it touches the runtime, so a
process that runs nothing else first gets the split without asking. Nothing happens
at import time. The split is for the whole process (TF cannot undo it); the default
strategy keeps using ``/CPU:0``, which shares the same cores and threads.
"""
from __future__ import annotations

import os
import threading
from typing import Callable, Dict, List, Optional

import tensorflow as tf

from tfwb import hardware
from tfwb.hardware import Gpu, Machine

DEFAULT_CPU_REPLICAS = 2
_state = {"cpu_replicas": None, "too_late": False}


def setup_devices(cpu_replicas: Optional[int] = None) -> int:
    """Split the CPU into ``cpu_replicas`` logical devices when there is no GPU, if still possible.

    Args:
        cpu_replicas: logical CPU devices to create (default 2, or ``TFWB_CPU_REPLICAS``);
            1 leaves the CPU whole.

    Returns:
        The number of logical CPU devices now visible.

    Raises:
        ValueError: for ``cpu_replicas`` < 1.

    Never raises because the runtime already started: then the split is impossible,
    nothing changes, and ``strategy="mirrored"`` will say so before any work.

    Example:
        >>> import tfwb; tfwb.setup_devices()   # first cell of a notebook  # doctest: +SKIP
        2
    """
    n = cpu_replicas if cpu_replicas is not None else int(
        os.environ.get("TFWB_CPU_REPLICAS", DEFAULT_CPU_REPLICAS))
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"cpu_replicas={n!r} is not allowed; cpu_replicas must be an integer >= 1")
    cpus = tf.config.list_physical_devices("CPU")
    if n > 1 and cpus and not tf.config.list_physical_devices("GPU"):
        try:
            tf.config.set_logical_device_configuration(
                cpus[0], [tf.config.LogicalDeviceConfiguration() for _ in range(n)])
            _state["cpu_replicas"] = n
        except RuntimeError:
            _state["too_late"] = True      # runtime already initialized: keep what is there
    return len(tf.config.list_logical_devices("CPU"))


def too_few_cpu_devices_message(want: int, have: int) -> str:
    """What ``mirrored`` says when the CPU was not split in time, and how to fix it."""
    return (f"strategy='mirrored' with replicas={want} needs {want} logical CPU devices, but this "
            f"process has {have}: TensorFlow's runtime started before tfwb could split the CPU. "
            f"Fix: restart the kernel and run `tfwb.setup_devices({want})` in the first cell, before "
            "any TensorFlow work (the chapters' setup cell does this); from the command line it "
            f"happens by itself. Or use replicas={have}"
            + (" (one device: no mirroring)" if have == 1 else ""))


def accelerators_present() -> bool:
    """True when TF sees a GPU or TPU (devices that run asynchronously and need a sync)."""
    return bool(tf.config.list_logical_devices("GPU") or tf.config.list_logical_devices("TPU"))


def _sync_all() -> None:
    tf.test.experimental.sync_devices()


def _no_sync() -> None:
    pass


def device_sync() -> Callable[[], None]:
    """The sync that closes a timed step: ``sync_devices`` where there is a GPU or TPU.

    On a CPU-only machine a ``tf.function`` call returns when all its ops (variable
    updates included) have run, so the loss read already waits for the step and
    a sync adds only its own cost.
    """
    return _sync_all if accelerators_present() else _no_sync


# -- what TensorFlow can use ------------------------------------------------------------------
_machine_lock = threading.Lock()
_machine: Dict[str, Machine] = {}


def tensorflow_gpus() -> List[Gpu]:
    """The GPUs TensorFlow can use, as ``Gpu`` records (index: TensorFlow's GPU number).

    Reads ``tf.config.list_physical_devices("GPU")`` and ``get_device_details`` (name,
    compute capability) without starting the runtime, and each GPU's PCI bus id from the
    CUDA driver (None where it cannot be read). ``[]`` with the CPU build, without CUDA
    libraries, or with every GPU hidden.

    Example:
        >>> tensorflow_gpus()          # this repository's CPU build  # doctest: +SKIP
        []
    """
    gpus = []
    for device in tf.config.list_physical_devices("GPU"):
        index = int(device.name.rsplit(":", 1)[-1])
        try:
            details = tf.config.experimental.get_device_details(device)
        except Exception:  # noqa: BLE001 - details are optional; the device is listed anyway
            details = {}
        cc = details.get("compute_capability")
        gpus.append(Gpu(index=index, name=details.get("device_name"),
                        compute_capability=tuple(int(x) for x in cc) if cc else None))
    if gpus:
        buses = hardware.cuda_pci_bus_ids([g.index for g in gpus])
        gpus = [Gpu(g.index, g.name, g.memory_total_mib, g.compute_capability,
                    pci_bus_id=buses.get(g.index)) for g in gpus]
    return gpus


def machine(refresh: bool = False) -> Machine:
    """This machine as TensorFlow can use it: ``tfwb.detect_hardware()``. Cached.

    ``tfwb.hardware.detect()`` (NVML's view, kept in ``nvml_gpus`` for sampling) with
    ``gpus`` replaced by TensorFlow's GPUs (``tensorflow_gpus``, matched to NVML's by PCI
    bus id: ``Gpu.nvml_index`` says which NVML GPU to sample) and ``gpu_problem`` set when
    NVML sees a GPU TensorFlow cannot use: the CPU build of TensorFlow, CUDA libraries
    missing, or ``CUDA_VISIBLE_DEVICES`` hiding it. Expectations read ``gpus``, so they
    are stated for the device the step runs on; ``hardware.describe`` says the problem.

    Args:
        refresh (bool, default False): look again (NVML and TensorFlow) instead of the cache.

    Returns:
        A ``tfwb.hardware.Machine`` with ``gpus_from == "tensorflow"``.

    Example:
        >>> hw = machine()
        >>> hw.gpus_from
        'tensorflow'
    """
    with _machine_lock:
        if refresh or "tf" not in _machine:
            _machine["tf"] = hardware.with_tensorflow_view(
                hardware.detect(refresh=refresh), tensorflow_gpus(),
                built_with_cuda=bool(tf.test.is_built_with_cuda()))
        return _machine["tf"]
