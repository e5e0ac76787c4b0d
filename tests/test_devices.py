"""tfwb.tf.runner.devices.machine: the machine as TensorFlow can use it (issue 17, item 1).

With this repository's CPU build of TensorFlow and a stand-in NVML that sees a Tesla T4,
``machine()`` must say the GPU is not usable, why and how to fix it, and every
expectation must be stated for the CPU the step runs on.
"""
from __future__ import annotations

import sys

import pytest

from tfwb import expect, hardware
from tfwb.config import RunConfig
from nvml_fakes import fake_nvml

pytestmark = pytest.mark.tf


@pytest.fixture
def standin(monkeypatch):
    """Put a stand-in pynvml in place; afterwards, look at the real machine again."""
    from tfwb.tf.runner import devices

    def use(scenario):
        monkeypatch.setitem(sys.modules, "pynvml", fake_nvml(scenario))
        return devices.machine(refresh=True)

    yield use
    monkeypatch.undo()
    devices.machine(refresh=True)


def test_a_t4_that_the_cpu_build_cannot_use_is_said_with_reason_and_fix(standin):
    import tensorflow as tf

    assert not tf.test.is_built_with_cuda()          # this repository installs tensorflow-cpu
    hw = standin("one Tesla T4")
    assert hw.gpus == () and [g.name for g in hw.nvml_gpus] == ["Tesla T4"] and hw.gpus_from == "tensorflow"
    assert hw.gpu_problem.startswith("Tesla T4 seen by NVML but not usable by TensorFlow: this TensorFlow is "
                                     "a CPU-only build")
    assert hardware.GPU_INSTALL_COMMAND in hw.gpu_problem
    assert hw.gpu_problem in hardware.describe(hw)
    # expectations are about the CPU the step runs on, not the T4. The host's CPU kind must not
    # decide this test (on an AMX Xeon float16's rule differs): the stand-in machine gets a
    # described AVX2 CPU, whose float16 rule says "slower".
    hw = hardware.with_cpu_of(hw, "binder-2core-avx2")
    assert expect.target(hw) == "cpu"
    e = expect.change(hw, RunConfig(data_source="memory"), mixed_precision="mixed_float16")
    assert e.expected == expect.SLOWER and "Tesla T4 is not usable by TensorFlow here" in e.claim
    assert "CPU:0" in str(expect.default_device(hw))
    assert expect.change(hw, sync=False).expected == expect.NOT_SLOWER


def test_a_mig_slice_whose_utilization_nvml_refuses_is_still_described(standin):
    hw = standin("A100 MIG slice")
    assert [g.name for g in hw.nvml_gpus] == ["NVIDIA A100-SXM4-40GB"] and hw.gpu_problem
    from tfwb.nvml import NvmlProbe

    probe = NvmlProbe()
    assert probe.read()["gpu_util_pct"] == (None,)    # refused: None, not an exception
    probe.close()


def test_detect_hardware_is_tensorflows_view_and_cached():
    import tfwb
    from tfwb.tf.runner import devices

    assert tfwb.detect_hardware is devices.machine
    assert devices.machine() is devices.machine() and devices.machine().gpus_from == "tensorflow"


def test_tensorflow_gpus_on_the_cpu_build_is_empty_and_starts_no_runtime():
    import tensorflow as tf

    from tfwb.tf.runner import devices

    assert devices.tensorflow_gpus() == []
    assert hardware.cuda_pci_bus_ids([0]) == {}          # no CUDA driver here: nothing, no error
    assert tf.config.list_physical_devices("GPU") == []
