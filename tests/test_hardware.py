"""Tests of tfwb.hardware: cpuinfo parsing, environment and TPU checks, describe(), detect()."""
from __future__ import annotations

import dataclasses
import sys

import pytest

from tfwb import cpu_features, hardware
from nvml_fakes import fake_nvml

X86_CPUINFO = """processor\t: 0
vendor_id\t: GenuineIntel
model name\t: Intel(R) Xeon(R) CPU @ 2.20GHz
flags\t\t: fpu sse avx2 avx512f amx_tile avx2
vmx flags\t: ept

processor\t: 1
model name\t: Some Other CPU
flags\t\t: fpu
"""

ARM_CPUINFO = """processor\t: 0
BogoMIPS\t: 50.00
Features\t: fp asimd evtstrm aes
CPU implementer\t: 0x41
"""


def test_parse_cpuinfo_x86_takes_the_first_block():
    model, flags = hardware.parse_cpuinfo(X86_CPUINFO)
    assert model == "Intel(R) Xeon(R) CPU @ 2.20GHz"
    assert flags == ("amx_tile", "avx2", "avx512f", "fpu", "sse")


def test_parse_cpuinfo_arm_and_empty():
    assert hardware.parse_cpuinfo(ARM_CPUINFO) == (None, ("aes", "asimd", "evtstrm", "fp"))
    assert hardware.parse_cpuinfo("") == (None, ())


@pytest.mark.parametrize("environ, modules, expected", [
    ({}, {"google.colab": object()}, "colab"),
    ({"COLAB_RELEASE_TAG": "release-colab_2025"}, {}, "colab"),
    ({"KAGGLE_KERNEL_RUN_TYPE": "Interactive"}, {}, "kaggle"),
    ({"BINDER_SERVICE_HOST": "10.0.0.1"}, {}, "binder"),
    ({"BINDER_REQUEST": "v2/gh/org/repo/main"}, {}, "binder"),
    ({"JUPYTERHUB_SERVICE_PREFIX": "/binder/jupyter/user/org-repo-abc/"}, {}, "binder"),
    ({"JUPYTERHUB_SERVICE_PREFIX": "/user/alice/"}, {}, "local"),
    ({"BINDER_SERVICE_HOST": ""}, {}, "local"),
    ({}, {}, "local"),
])
def test_detect_environment(environ, modules, expected):
    assert hardware.detect_environment(environ, modules) == expected


def test_detect_tpu(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    assert hardware.detect_tpu({}, str(empty)) is False
    assert hardware.detect_tpu({"TPU_NAME": "local"}, str(empty)) is True
    assert hardware.detect_tpu({"COLAB_TPU_ADDR": "10.0.0.2:8470"}, str(empty)) is True

    accel = tmp_path / "accel"
    accel.mkdir()
    (accel / "accel0").touch()
    assert hardware.detect_tpu({}, str(accel)) is True

    vfio = tmp_path / "vfio"
    (vfio / "vfio").mkdir(parents=True)
    assert hardware.detect_tpu({}, str(vfio)) is False, "the vfio control node alone is no TPU"
    (vfio / "vfio" / "0").touch()
    assert hardware.detect_tpu({}, str(vfio)) is True
    assert hardware.detect_tpu({}, str(vfio), has_gpu=True) is False, "GPU passthrough VM"


@pytest.mark.parametrize("model, short", [
    ("Intel(R) Xeon(R) CPU @ 2.20GHz", "Intel Xeon"),
    ("AMD EPYC 7B12 64-Core Processor", "AMD EPYC 7B12"),
    ("Intel(R) Core(TM) i7-10750H CPU @ 2.60GHz", "Intel Core i7-10750H"),
    (None, None),
])
def test_short_cpu_model(model, short):
    assert hardware.short_cpu_model(model) == short


BASE = {"cpu_count": 2, "cpu_model": "Intel(R) Xeon(R) CPU @ 2.20GHz", "cpu_flags": ("avx512f",),
        "memory_total_mib": 24576.0, "gpus": [], "tpu": False, "environment": "local"}


def test_describe_cpu_only():
    assert hardware.describe(BASE) == "2 CPU cores (Intel Xeon, AVX-512), 24 GiB RAM, no GPU, local"


def test_describe_gpus_tpu_and_unknowns():
    h100 = {"name": "NVIDIA H100 80GB HBM3", "memory_total_mib": 81559.0}
    two = dict(BASE, gpus=[h100, h100], environment="colab")
    assert hardware.describe(two) == ("2 CPU cores (Intel Xeon, AVX-512), 24 GiB RAM, "
                                      "2× NVIDIA H100 80GB HBM3 (80 GiB), colab")
    one_core = dict(BASE, cpu_count=1, cpu_model=None, cpu_flags=("avx2", "amx_tile"),
                    memory_total_mib=None, tpu=True)
    assert hardware.describe(one_core) == "1 CPU core (AVX2, AMX), ? GiB RAM, no GPU, TPU, local"
    mixed = dict(BASE, cpu_flags=(), gpus=[{"name": "B", "memory_total_mib": None},
                                             {"name": "A", "memory_total_mib": None}])
    assert hardware.describe(mixed) == "2 CPU cores (Intel Xeon), 24 GiB RAM, B + A, local"


def test_described_machines_are_machine_records():
    assert set(hardware.DESCRIBED) == {"binder-2core-avx2", "cpu-2core-avx512-bf16", "cpu-2core-avx512-amx",
                                       "colab-t4", "a100", "h100", "l4", "tpu-vm", "tpu-v5e", "arm-graviton3",
                                       "apple-m2"}
    for name, hw in hardware.DESCRIBED.items():
        assert isinstance(hw, hardware.Machine), name
        assert list(hw.cpu_flags) == sorted(set(hw.cpu_flags)), name
        for gpu in hw.gpus:
            assert isinstance(gpu, hardware.Gpu) and len(gpu.compute_capability) == 2, name
        assert hw.environment in ("colab", "kaggle", "binder", "local")
        assert hardware.Machine.of(hw.to_dict()) == hw          # JSON round trip (fingerprints)


def test_machine_of_takes_a_partial_mapping_and_refuses_other_values():
    m = hardware.Machine.of({"gpus": [{"index": 0, "name": "Tesla T4", "compute_capability": [7, 5]}]})
    assert m.gpus[0].compute_capability == (7, 5) and m.compute_capability == (7, 5) and m.cpu_count is None
    assert hardware.Machine.of({}) == hardware.Machine() == hardware.Machine.of(None)
    assert m.replace(gpus=()).gpus == ()
    with pytest.raises(ValueError, match="hardware=42 is not allowed"):
        hardware.Machine.of(42)


@pytest.mark.parametrize("name, line", [
    ("binder-2core-avx2", "2 CPU cores (AMD EPYC 7B12, AVX2), 8 GiB RAM, no GPU, binder"),
    ("cpu-2core-avx512-amx", "2 CPU cores (Intel Xeon Platinum 8481C, AVX-512, BF16, FP16, AMX), 8 GiB RAM, "
                             "no GPU, local"),
    ("colab-t4", "2 CPU cores (Intel Xeon, AVX-512), 13 GiB RAM, Tesla T4 (15 GiB), colab"),
    ("h100", "16 CPU cores (Intel Xeon Platinum 8480+, AVX-512, BF16, FP16, AMX), 128 GiB RAM, "
             "NVIDIA H100 80GB HBM3 (80 GiB), local"),
    ("tpu-vm", "96 CPU cores (Intel Xeon, AVX-512), 334 GiB RAM, no GPU, TPU, colab"),
    ("l4", "8 CPU cores (Intel Xeon, AVX-512), 32 GiB RAM, NVIDIA L4 (22 GiB), local"),
    ("tpu-v5e", "24 CPU cores (AMD EPYC 7B13, AVX2), 48 GiB RAM, no GPU, TPU, local"),
    ("arm-graviton3", "2 CPU cores (AWS Graviton3 (Arm Neoverse V1), SVE, BF16, FP16), 4 GiB RAM, no GPU, local"),
    ("apple-m2", "8 CPU cores (Apple M2, NEON, BF16, FP16), 16 GiB RAM, no GPU, local"),
])
def test_describe_the_described_machines(name, line):
    assert hardware.describe(hardware.DESCRIBED[name]) == line


def test_detect_on_this_machine_has_every_key_and_no_tensorflow():
    hw = hardware.detect(refresh=True)
    assert isinstance(hw, hardware.Machine)
    assert hw.cpu_count >= 1 and isinstance(hw.cpu_flags, tuple)
    assert hw.memory_total_mib > 100
    assert hardware.describe(hw).endswith(hw.environment)


def test_detect_is_cached_returns_copies_and_refreshes(monkeypatch):
    calls = []
    monkeypatch.setattr(hardware.nvml, "gpu_info", lambda nvml=None: calls.append(1) or [])
    first = hardware.detect(refresh=True)
    with pytest.raises(dataclasses.FrozenInstanceError):
        first.gpus = ("mutated",)                            # immutable: the cache cannot be changed
    second = hardware.detect()
    assert len(calls) == 1 and second.gpus == () and second is first
    hardware.detect(refresh=True)
    assert len(calls) == 2
    monkeypatch.undo()
    hardware.detect(refresh=True)


def test_detect_without_proc_cpuinfo_sysctl_archspec_psutil_or_nvml(monkeypatch):
    monkeypatch.delenv("TFWB_TEST_CPU", raising=False)         # the host's reading, not a stand-in's
    real_read = cpu_features._read_text
    monkeypatch.setattr(cpu_features, "_read_text", lambda path: real_read("/nonexistent/cpuinfo"))
    monkeypatch.setattr(cpu_features, "_sysctl", lambda: "")
    for name in ("psutil", "pynvml", "archspec", "archspec.cpu"):
        monkeypatch.setitem(sys.modules, name, None)
    hw = hardware.detect(refresh=True)
    assert hw.cpu_flags == () and hw.memory_total_mib is None and hw.gpus == ()
    assert hw.cpu_microarchitecture is None
    assert hw.cpu_model is None or isinstance(hw.cpu_model, str)
    monkeypatch.undo()
    hardware.detect(refresh=True)  # leave a real answer in the cache for other tests


def test_a_described_cpu_stands_in_for_the_hosts_and_a_wrong_name_says_the_allowed_ones(monkeypatch):
    host = hardware.detect(refresh=True)
    monkeypatch.setenv("TFWB_TEST_CPU", "cpu-2core-avx512-amx")
    amx = hardware.detect(refresh=True)
    assert amx.cpu_flags == hardware.DESCRIBED["cpu-2core-avx512-amx"].cpu_flags and "amx_tile" in amx.cpu_flags
    assert amx.cpu_model == "Intel(R) Xeon(R) Platinum 8481C CPU @ 2.70GHz"
    assert amx.cpu_microarchitecture == "sapphirerapids"                   # the stand-in wins over archspec
    assert (amx.cpu_count, amx.memory_total_mib, amx.gpus) == (host.cpu_count, host.memory_total_mib, host.gpus)
    monkeypatch.setenv("TFWB_TEST_CPU", "sapphire")
    with pytest.raises(ValueError, match=r"TFWB_TEST_CPU='sapphire' is not a described machine; one of "
                                         r"binder-2core-avx2, .*apple-m2"):
        hardware.detect(refresh=True)
    monkeypatch.undo()
    assert hardware.detect(refresh=True) == host


def test_detect_lists_gpus_from_nvml(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", fake_nvml("one GPU failing"))
    hw = hardware.detect(refresh=True)
    assert [(g.index, g.compute_capability) for g in hw.gpus] == [(0, (9, 0)), (1, None)]
    assert [g.pci_bus_id for g in hw.nvml_gpus] == ["0000:01:00.0", "0000:02:00.0"]
    assert hw.tpu is False and hw.gpus_from == "nvml" and hw.gpu_problem is None
    assert "2× NVIDIA H100 80GB HBM3 (80 GiB) (seen by NVML; TensorFlow not asked)" in hardware.describe(hw)
    monkeypatch.undo()
    hardware.detect(refresh=True)


# -- the described machines added for issue 17 ----------------------------------------------------
def test_the_l4_and_the_tpu_v5e_are_described():
    l4, v5e = hardware.DESCRIBED["l4"], hardware.DESCRIBED["tpu-v5e"]
    assert l4.compute_capability == (8, 9) and l4.gpus[0].memory_total_mib / 1024 == pytest.approx(22.5, abs=0.1)
    assert v5e.tpu and not v5e.gpus and "avx512f" not in v5e.cpu_flags


def test_a_v5e_is_found_by_its_vfio_groups_without_accel(tmp_path):
    dev = tmp_path / "dev"                        # a v5e VM's /dev: vfio/vfio and vfio/<group>, no accel*
    (dev / "vfio").mkdir(parents=True)
    (dev / "vfio" / "vfio").touch()
    (dev / "vfio" / "0").touch()
    assert not list(dev.glob("accel*"))
    assert hardware.detect_tpu({}, str(dev)) is True


# -- what TensorFlow can use -----------------------------------------------------------------------
T4 = hardware.Gpu(0, "Tesla T4", 15360.0, (7, 5), pci_bus_id="0000:00:04.0")


def nvml_machine(*gpus):
    return hardware.Machine(cpu_count=2, gpus=gpus, gpus_from="nvml")


def test_pci_bus_ids_from_nvml_and_cuda_meet_in_one_spelling():
    assert hardware.normalize_pci_bus_id("00000000:00:04.0") == hardware.normalize_pci_bus_id("0000:00:04.0")
    assert hardware.normalize_pci_bus_id(b"0000:3B:00.0\x00") == "0000:3b:00.0"
    assert hardware.normalize_pci_bus_id(None) is None and hardware.normalize_pci_bus_id("GPU-1234") is None


def test_tensorflow_gpus_are_matched_to_nvml_by_bus_id_not_by_index():
    a = hardware.Gpu(0, "NVIDIA A100", 40960.0, (8, 0), pci_bus_id="0000:07:00.0")
    b = hardware.Gpu(1, "NVIDIA A100", 40960.0, (8, 0), pci_bus_id="0000:0f:00.0")
    # CUDA_VISIBLE_DEVICES=1: TensorFlow's GPU 0 is NVML's GPU 1
    tf_gpu = hardware.Gpu(0, "NVIDIA A100", compute_capability=(8, 0), pci_bus_id="0000:0f:00.0")
    m = hardware.with_tensorflow_view(nvml_machine(a, b), [tf_gpu], built_with_cuda=True,
                                      environ={"CUDA_VISIBLE_DEVICES": "1"}, system="Linux")
    assert [(g.index, g.nvml_index, g.memory_total_mib) for g in m.gpus] == [(0, 1, 40960.0)]
    assert len(m.nvml_gpus) == 2 and m.gpus_from == "tensorflow"
    assert m.gpu_problem.startswith("NVIDIA A100 (NVML index 0) seen by NVML but not usable by TensorFlow: "
                                    "CUDA_VISIBLE_DEVICES='1' hides it")


@pytest.mark.parametrize("built, environ, system, reason, fix", [
    (False, {}, "Linux", "a CPU-only build (tf.test.is_built_with_cuda() is False)",
     'fix: pip uninstall -y tensorflow-cpu && pip install "tensorflow[and-cuda]" (the README\'s GPU command)'),
    (False, {}, "Windows", "a CPU-only build", "run it under WSL2"),
    (True, {"CUDA_VISIBLE_DEVICES": ""}, "Linux", "CUDA_VISIBLE_DEVICES='' hides it",
     "fix: unset it or list the GPU in it"),
    (True, {"CUDA_VISIBLE_DEVICES": "-1"}, "Linux", "CUDA_VISIBLE_DEVICES='-1' hides it", "fix: unset it"),
    (True, {}, "Linux", "could not load the CUDA libraries", 'fix: pip install "tensorflow[and-cuda]"'),
])
def test_a_gpu_tensorflow_cannot_use_is_said_with_the_reason_and_the_fix(built, environ, system, reason, fix):
    m = hardware.with_tensorflow_view(nvml_machine(T4), [], built_with_cuda=built, environ=environ, system=system)
    assert m.gpus == () and m.nvml_gpus == (T4,)
    assert m.gpu_problem.startswith("Tesla T4 seen by NVML but not usable by TensorFlow: ")
    assert reason in m.gpu_problem and fix in m.gpu_problem
    line = hardware.describe(m)
    assert line.startswith("2 CPU cores, ? GiB RAM, no GPU usable by TensorFlow, local. Tesla T4 seen by NVML")
    assert line.endswith(m.gpu_problem)


def test_no_problem_when_tensorflow_uses_every_gpu_or_nvml_sees_none():
    tf_t4 = hardware.Gpu(0, "Tesla T4", compute_capability=(7, 5), pci_bus_id="0000:00:04.0")
    m = hardware.with_tensorflow_view(nvml_machine(T4), [tf_t4], built_with_cuda=True, environ={}, system="Linux")
    assert m.gpu_problem is None and m.gpus[0].nvml_index == 0 and m.gpus[0].memory_total_mib == 15360.0
    assert hardware.describe(m).endswith("Tesla T4 (15 GiB), local")
    no_nvml = hardware.with_tensorflow_view(nvml_machine(), [tf_t4], built_with_cuda=True, environ={})
    assert no_nvml.gpus == (tf_t4,) and no_nvml.gpu_problem is None     # no pynvml: TensorFlow's word stands
    cpu_only = hardware.with_tensorflow_view(nvml_machine(), [], built_with_cuda=False, environ={})
    assert cpu_only.gpu_problem is None and hardware.describe(cpu_only).endswith("no GPU, local")


def test_without_bus_ids_gpus_pair_by_name():
    nv = [hardware.Gpu(0, "A"), hardware.Gpu(1, "B")]
    assert [g.nvml_index for g in hardware.match_gpus(nv, [hardware.Gpu(0, "B")])] == [1]


def test_the_machine_record_round_trips_its_views():
    m = hardware.with_tensorflow_view(nvml_machine(T4), [], built_with_cuda=False, environ={}, system="Linux")
    d = m.to_dict()
    assert d["gpus"] == [] and d["nvml_gpus"][0]["pci_bus_id"] == "0000:00:04.0"
    assert hardware.Machine.of(d) == m
    with pytest.raises(ValueError, match="gpus_from='pci' is not allowed"):
        hardware.Machine(gpus_from="pci")


def test_a_machine_of_mixed_gpus_names_each_model_with_its_own_count():
    from tfwb.hardware import Gpu, _gpu_label

    t4 = Gpu(index=0, name="Tesla T4", memory_total_mib=15360)
    a100 = Gpu(index=1, name="NVIDIA A100-SXM4-40GB", memory_total_mib=40960)
    assert _gpu_label((t4, a100)) == "Tesla T4 + NVIDIA A100-SXM4-40GB"            # not "2× ..."
    assert _gpu_label((t4, a100, a100)) == "Tesla T4 + 2× NVIDIA A100-SXM4-40GB"
    assert _gpu_label((a100, a100)) == "2× NVIDIA A100-SXM4-40GB (40 GiB)"


# -- the CPU read by archspec and by the OS's own lists (tfwb.cpu_features) ----------------------
APPLE_SYSCTL = """machdep.cpu.brand_string: Apple M2
hw.optional.floatingpoint: 1
hw.optional.AdvSIMD: 1
hw.optional.arm.FEAT_FP16: 1
hw.optional.arm.FEAT_DotProd: 1
hw.optional.arm.FEAT_FHM: 1
hw.optional.arm.FEAT_BF16: 1
hw.optional.arm.FEAT_I8MM: 1
hw.optional.arm.FEAT_SME: 0
hw.optional.arm.FEAT_AES: 1
"""

INTEL_MAC_SYSCTL = """machdep.cpu.brand_string: Intel(R) Core(TM) i7-1068NG7 CPU @ 2.30GHz
machdep.cpu.features: FPU VME SSE3 FMA SSE4.1 SSE4.2 POPCNT AVX1.0 F16C
machdep.cpu.leaf7_features: AVX2 BMI2 AVX512F AVX512BW AVX512VL AVX512VNNI
hw.optional.avx512f: 1
hw.optional.avx512bf16: 0
hw.optional.avx2_0: 1
"""


def test_sysctl_of_apple_silicon_reads_as_linux_flags_that_the_rules_know():
    model, flags = cpu_features.parse_sysctl(APPLE_SYSCTL)
    assert model == "Apple M2"
    assert flags == ("asimd", "asimddp", "asimdfhm", "asimdhp", "bf16", "fp", "fphp", "i8mm")   # AES: not known
    assert set(flags) == set(hardware.DESCRIBED["apple-m2"].cpu_flags)        # the stand-in's flags, as read
    assert cpu_features.parse_sysctl("") == (None, ())


def test_sysctl_of_an_intel_mac_reads_as_linux_flags():
    model, flags = cpu_features.parse_sysctl(INTEL_MAC_SYSCTL)
    assert model.startswith("Intel(R) Core(TM) i7-1068NG7")
    assert {"avx", "avx2", "fma", "f16c", "sse4_2", "avx512f", "avx512bw", "avx512_vnni"} <= set(flags)
    assert "avx512_bf16" not in flags and "avx1.0" not in flags and flags == tuple(sorted(set(flags)))
    assert hardware.describe({"cpu_model": model, "cpu_flags": flags}).startswith("CPU (Intel Core i7-1068NG7, "
                                                                                  "AVX-512)")


def test_read_cpu_joins_the_oss_list_with_archspecs_name_and_features():
    sapphire = ("sapphirerapids", ("amx_bf16", "amx_tile", "avx512_bf16", "avx512f"))
    linux = cpu_features.read_cpu(system="Linux", read_text=lambda path: X86_CPUINFO, archspec=lambda: sapphire)
    assert linux.microarchitecture == "sapphirerapids" and linux.sources == ("/proc/cpuinfo", "archspec")
    assert linux.model == "Intel(R) Xeon(R) CPU @ 2.20GHz"
    assert linux.flags == ("amx_bf16", "amx_tile", "avx2", "avx512_bf16", "avx512f", "fpu", "sse")
    # macOS on Apple silicon: sysctl's model; archspec's m2 features where sysctl lists none
    m2 = ("m2", ("asimd", "bf16", "fphp", "i8mm"))
    mac = cpu_features.read_cpu(system="Darwin", read_text=lambda path: 1 / 0, archspec=lambda: m2,
                                sysctl=lambda: "machdep.cpu.brand_string: Apple M2\n")
    assert (mac.model, mac.microarchitecture, mac.flags) == ("Apple M2", "m2", m2[1])
    # archspec missing or failing: the OS's list alone, no name
    alone = cpu_features.read_cpu(system="Linux", read_text=lambda path: ARM_CPUINFO, archspec=lambda: (None, ()))
    assert alone == cpu_features.CpuReading(None, None, ("aes", "asimd", "evtstrm", "fp"), ("/proc/cpuinfo",))


def test_archspec_host_names_this_machine_or_says_nothing_without_archspec(monkeypatch):
    name, features = cpu_features.archspec_host()
    archspec = pytest.importorskip("archspec.cpu")
    assert name == archspec.host().name and set(features) == {f.lower() for f in archspec.host().features}
    monkeypatch.setitem(sys.modules, "archspec", None)
    monkeypatch.setitem(sys.modules, "archspec.cpu", None)
    assert cpu_features.archspec_host() == (None, ())


def test_the_names_that_moved_to_cpu_features_import_from_hardware_too():
    assert hardware.parse_cpuinfo is cpu_features.parse_cpuinfo
    assert hardware.short_cpu_model is cpu_features.short_cpu_model
    assert hardware.parse_sysctl is cpu_features.parse_sysctl


def test_a_machine_records_its_microarchitecture_and_an_older_record_without_it_loads():
    amx = hardware.DESCRIBED["cpu-2core-avx512-amx"]
    assert amx.cpu_microarchitecture == "sapphirerapids"
    assert hardware.Machine.of(amx.to_dict()) == amx
    old = {k: v for k, v in amx.to_dict().items() if k != "cpu_microarchitecture"}
    assert hardware.Machine.of(old).cpu_microarchitecture is None
    m = hardware.with_cpu_of({"cpu_count": 4, "cpu_microarchitecture": "zen2"}, "arm-graviton3")
    assert (m.cpu_count, m.cpu_microarchitecture) == (4, "neoverse_v1")


EMERALD_RAPIDS_FLAGS = (  # /proc/cpuinfo of a 16-core VM of an H200 host (cpu family 6, model 207)
    "fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat pse36 clflush mmx fxsr sse sse2 ss "
    "ht syscall nx pdpe1gb rdtscp lm constant_tsc rep_good nopl xtopology nonstop_tsc cpuid "
    "tsc_known_freq pni pclmulqdq ssse3 fma cx16 pcid sse4_1 sse4_2 x2apic movbe popcnt "
    "tsc_deadline_timer aes xsave avx f16c rdrand hypervisor lahf_lm abm 3dnowprefetch cpuid_fault ssbd "
    "ibrs ibpb stibp ibrs_enhanced fsgsbase tsc_adjust bmi1 avx2 smep bmi2 erms invpcid avx512f avx512dq "
    "rdseed adx smap avx512ifma clflushopt clwb avx512cd sha_ni avx512bw avx512vl xsaveopt xsavec xgetbv1 "
    "xsaves avx_vnni avx512_bf16 wbnoinvd arat avx512vbmi umip pku ospke avx512_vbmi2 gfni vaes "
    "vpclmulqdq avx512_vnni avx512_bitalg avx512_vpopcntdq rdpid bus_lock_detect cldemote movdiri "
    "movdir64b fsrm md_clear serialize tsxldtrk ibt amx_bf16 avx512_fp16 amx_tile amx_int8 flush_l1d "
    "arch_capabilities")


def test_a_fingerprint_keeps_the_flags_the_rules_read_and_not_the_others():
    amx = hardware.DESCRIBED["cpu-2core-avx512-amx"]
    kept = cpu_features.recorded_flags(amx.cpu_flags + ("fpu", "vme", "pse", "hypervisor"))
    assert "fpu" not in kept and "vme" not in kept and "sse4_2" in kept      # tfwb.datasheet reads sse2
    assert {"amx_bf16", "amx_tile", "avx512_bf16", "avx512_fp16", "avx512f", "avx2", "fma", "f16c"} <= set(kept)
    arm = cpu_features.recorded_flags(hardware.DESCRIBED["arm-graviton3"].cpu_flags)
    assert {"asimd", "bf16", "fphp", "i8mm", "sve", "svebf16"} <= set(arm) and "fp" not in arm
    _, real = hardware.parse_cpuinfo("model name\t: Intel(R) Xeon(R) Processor\nflags\t: " + EMERALD_RAPIDS_FLAGS)
    kept = cpu_features.recorded_flags(real)
    assert len(real) == 118 and len(kept) == 25 and "smep" in real and "smep" not in kept     # smep is not SME
    assert {"amx_bf16", "amx_tile", "avx512_bf16", "avx512_fp16", "sse2"} <= set(kept)
    assert cpu_features.notable_flags(kept) == ["AVX-512", "BF16", "FP16", "AMX"]
