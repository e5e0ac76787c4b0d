"""Tests of tfwb.datasheet (datasheet table, CPU formula) and tfwb.tf.runner.matmul_peak (the measured
matmul peak and its cache per machine fingerprint)."""
from __future__ import annotations

import json
import os

import pytest

from tfwb import datasheet


@pytest.mark.parametrize("name, key", [
    ("Tesla T4", "Tesla T4"), ("NVIDIA L4", "NVIDIA L4"),
    ("Tesla V100-SXM2-16GB", "Tesla V100-SXM2"), ("Tesla V100-PCIE-32GB", "Tesla V100-PCIE"),
    ("NVIDIA A100-SXM4-40GB", "NVIDIA A100"), ("NVIDIA A100 80GB PCIe", "NVIDIA A100"),
    ("NVIDIA H100 80GB HBM3", "NVIDIA H100 SXM"), ("NVIDIA H100 PCIe", "NVIDIA H100 PCIe"),
    ("NVIDIA H100 NVL", "NVIDIA H100 NVL"), ("NVIDIA H200", "NVIDIA H200"),
    ("TPU v2", "TPU v2"), ("TPU v3", "TPU v3"), ("TPU v4", "TPU v4"),
    ("TPU v5 lite", "TPU v5e"), ("TPU v5e", "TPU v5e"), ("TPU v5p", "TPU v5p"),
    ("TPU v6 lite", "TPU v6e"),
    ("NVIDIA GeForce RTX 4090", None), ("AMD EPYC", None), ("", None),
])
def test_datasheet_device_matches_reported_names(name, key):
    assert datasheet.datasheet_device(name) == key


def test_datasheet_peak_figures_and_gaps():
    assert datasheet.datasheet_peak("Tesla T4", "float32")[0] == pytest.approx(8.1e12)
    assert datasheet.datasheet_peak("NVIDIA A100-SXM4-40GB", "bfloat16")[0] == pytest.approx(312e12)
    assert datasheet.datasheet_peak("TPU v5 lite", "bfloat16")[0] == pytest.approx(197e12)
    assert datasheet.datasheet_peak("Tesla T4", "bfloat16") is None          # no BF16 on Turing
    assert datasheet.datasheet_peak("TPU v4", "float32") is None             # TPUs list bfloat16
    assert datasheet.datasheet_peak("RTX 4090", "float32") is None
    with pytest.raises(ValueError, match="dtype='int8'"):
        datasheet.datasheet_peak("Tesla T4", "int8")


def test_every_datasheet_entry_has_a_source_and_a_plausible_figure():
    for device, row in datasheet.DATASHEET.items():
        for dtype, (flops, source) in row.items():
            assert dtype in datasheet.DTYPES + ("tensorfloat32",)
            assert 1e12 < flops < 2e15, (device, dtype)
            assert "datasheet" in source or "documentation" in source
        # half precision is never slower than float32 where both are listed
        if "float32" in row and "float16" in row:
            assert row["float16"][0] > row["float32"][0]


def test_cpu_peak_is_a_labelled_formula():
    flops, label = datasheet.cpu_peak(2, 2.0, ["avx2", "fma"], "float32")
    assert flops == 2 * 2.0e9 * 32
    assert label.startswith("formula: ") and "2 cores x 2.00 GHz x 32" in label
    assert datasheet.cpu_peak(4, 2.5, ["avx512f", "fma"], "float32")[0] == 4 * 2.5e9 * 64
    assert datasheet.cpu_peak(1, 2.0, ["avx512f", "amx_bf16"], "bfloat16")[0] == 2.0e9 * 1024
    assert datasheet.cpu_peak(1, 2.0, ["avx512f", "avx512_bf16"], "bfloat16")[0] == 2.0e9 * 128
    # no native half precision: the float32 rate at best, and it says so
    flops, label = datasheet.cpu_peak(1, 2.0, ["avx2", "fma"], "float16")
    assert flops == 2.0e9 * 32 and "no native float16" in label
    assert datasheet.cpu_peak(2, None, ["fma"], "float32") is None
    assert datasheet.cpu_peak(0, 2.0, ["fma"], "float32") is None


def test_parse_cpu_ghz_prefers_the_maximum_then_the_model_name():
    assert datasheet.parse_cpu_ghz("cpu MHz\t: 1200.0\n", "3500000\n") == 3.5
    assert datasheet.parse_cpu_ghz("model name\t: Xeon CPU @ 2.20GHz\ncpu MHz\t: 1200.0\n") == 2.2
    assert datasheet.parse_cpu_ghz("cpu MHz\t: 2445.4\n") == pytest.approx(2.445, abs=1e-3)
    assert datasheet.parse_cpu_ghz("", "") is None


def test_the_formula_names_the_clock_it_took_and_only_cpufreq_is_the_maximum():
    # issue 35: a VM's formula took the model name's base clock, and quiet figures passed 100 % of it
    assert datasheet.parse_cpu_clock("cpu MHz\t: 1200.0\n", "3500000\n")[1] == datasheet.CLOCK_SOURCES["max"]
    ghz, source = datasheet.parse_cpu_clock("model name\t: Xeon CPU @ 2.10GHz\ncpu MHz\t: 2100.0\n")
    assert (ghz, source) == (2.1, datasheet.CLOCK_SOURCES["base"]) and "turbo" in source
    assert datasheet.parse_cpu_clock("cpu MHz\t: 2445.4\n")[1] == datasheet.CLOCK_SOURCES["current"]
    assert datasheet.parse_cpu_clock("", "not a number") == (None, "")
    _, label = datasheet.cpu_peak(2, ghz, ["avx512f", "fma"], "float32", clock=source)
    assert label.endswith("; the clock is " + source)
    assert "the clock is" not in datasheet.cpu_peak(2, ghz, ["avx512f", "fma"], "float32")[1]


def test_peaks_module_is_pure():
    import subprocess
    import sys
    code = "import sys, tfwb.datasheet; print('tensorflow' in sys.modules or 'keras' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# --- the measured peak (TensorFlow) ---------------------------------------------------------

@pytest.fixture
def peak_module(tmp_path, monkeypatch):
    monkeypatch.setenv("TFWB_CACHE_DIR", str(tmp_path / "cache"))
    from tfwb.tf.runner import matmul_peak
    monkeypatch.setattr(matmul_peak, "start_load_probe", lambda: (lambda: 0.0))   # a quiet machine
    return matmul_peak


def scripted(peak_module, monkeypatch, figures, final_figures=1, formula=None):
    """Each measurement gives the next ``(GFLOP/s, other programs' share of the cores)``; returns the
    list of the GFLOP/s measured so far (no matmul runs, no real load is needed). A quiet figure is
    final after ``final_figures``, and suspect under 40 % of ``formula`` (None: no formula)."""
    monkeypatch.setattr(peak_module, "FINAL_FIGURES", final_figures)
    monkeypatch.setattr(peak_module, "_formula", lambda kind, dtype: formula)
    left, done, share = list(figures), [], [None]

    def measure(label, tf_device, kind, dtype, budget_s):
        gflops, share[0] = left.pop(0)
        done.append(gflops)
        return peak_module.Peak(device=label, dtype=dtype, flops_per_s=gflops * 1e9, seconds=0.01, n=64,
                                measured_at=f"measurement {len(done)}")

    monkeypatch.setattr(peak_module, "_measure", measure)
    monkeypatch.setattr(peak_module, "start_load_probe", lambda: (lambda: share[0]))
    return done


def gflops(peak):
    return round(peak.flops_per_s / 1e9, 6)


def test_measure_peak_measures_then_reads_the_cache(peak_module, monkeypatch):
    p = peak_module.measure_peak("float32", budget_s=0.3)
    assert p.device.startswith("CPU (") and p.dtype == "float32" and not p.cached
    assert p.flops_per_s > 1e8 and p.n >= peak_module.MIN_N and p.reason == ""
    assert p.seconds < 3
    monkeypatch.setattr(peak_module, "FINAL_FIGURES", 1)            # one quiet figure final: read back
    monkeypatch.setattr(peak_module, "_formula", lambda kind, dtype: None)   # never suspect on a shared machine
    again = peak_module.measure_peak("float32", budget_s=0.3)
    assert again.cached and again.flops_per_s == p.flops_per_s and again.seconds == p.seconds
    with open(peak_module.cache_path()) as f:
        data = json.load(f)
    (entry,) = data["machines"].values()
    assert entry["fingerprint"]["tensorflow"] and f"{p.device}|float32" in entry["peaks"]


def test_a_quick_figure_is_cached_apart_and_never_stands_in_for_a_full_one(peak_module, monkeypatch):
    measured = []
    real = peak_module._measure
    monkeypatch.setattr(peak_module, "_measure", lambda *a: measured.append(a[-1]) or real(*a))
    quick = peak_module.measure_peak("float32", budget_s=0.1, quick=True)
    again = peak_module.measure_peak("float32", budget_s=0.1, quick=True)          # another process: reused
    assert not quick.cached and again.cached and measured == [0.1]
    full = peak_module.measure_peak("float32", budget_s=0.2)                        # a full figure: measured
    assert not full.cached and measured == [0.1, 0.2]
    assert peak_module.measure_peak("float32", budget_s=0.1, quick=True).flops_per_s == full.flops_per_s


def test_a_changed_fingerprint_is_measured_again(peak_module, monkeypatch):
    first = peak_module.measure_peak("float32", budget_s=0.2)
    real = peak_module.machine_fingerprint()
    monkeypatch.setattr(peak_module, "machine_fingerprint", lambda: dict(real, tensorflow="9.9"))
    second = peak_module.measure_peak("float32", budget_s=0.2)
    assert not first.cached and not second.cached


def test_half_precision_is_measured_on_the_cpu_too(peak_module):
    p = peak_module.measure_peak("bfloat16", budget_s=0.3, cache=False)
    assert p.flops_per_s is not None and p.flops_per_s > 0
    assert not os.path.exists(peak_module.cache_path())     # cache=False writes nothing


def test_an_unwritable_cache_is_no_error(peak_module, tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("TFWB_CACHE_DIR", str(blocker / "sub"))
    p = peak_module.measure_peak("float32", budget_s=0.2)
    assert p.flops_per_s is not None and not p.cached


def test_cache_path_respects_xdg_and_the_override(peak_module, monkeypatch):
    monkeypatch.delenv("TFWB_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", "/x/cache")
    assert peak_module.cache_path() == "/x/cache/tfwb/peaks.json"
    monkeypatch.setenv("TFWB_CACHE_DIR", "/y")
    assert peak_module.cache_path() == "/y/peaks.json"


def test_a_missing_device_says_why_and_bad_arguments_are_refused(peak_module):
    p = peak_module.measure_peak("float32", "GPU:7", budget_s=0.2)
    assert p.flops_per_s is None and "no GPU 7" in p.reason
    with pytest.raises(ValueError, match="dtype='int8'"):
        peak_module.measure_peak("int8")
    with pytest.raises(ValueError, match="device='NPU'"):
        peak_module.measure_peak("float32", "NPU")
    with pytest.raises(ValueError, match="budget_s=0"):
        peak_module.measure_peak("float32", budget_s=0)


def test_the_cache_keeps_the_highest_quiet_figure_and_its_spread(peak_module, monkeypatch):
    done = scripted(peak_module, monkeypatch, [(30, 0.0), (34, 0.02), (29, 0.05)])
    monkeypatch.setattr(peak_module, "_formula", lambda kind, dtype: None)     # scripted figures: no formula
    first = peak_module.measure_peak("float32", budget_s=0.1)
    assert gflops(first) == 30 and not first.loaded and not first.cached and first.spread == (30e9, 30e9, 1)
    monkeypatch.setattr(peak_module, "FINAL_FIGURES", 1)
    assert peak_module.measure_peak("float32", budget_s=0.1).cached and done == [30]   # quiet: final
    higher = peak_module.measure_peak("float32", budget_s=0.1, refresh=True)          # measured again
    assert gflops(higher) == 34 and not higher.cached
    lower = peak_module.measure_peak("float32", budget_s=0.1, refresh=True)
    assert gflops(lower) == 34 and lower.cached and lower.measured_at == "measurement 2"   # the maximum stays
    assert lower.spread == (29e9, 34e9, 3) and len(lower.figures) == 3
    read = peak_module.measure_peak("float32", budget_s=0.1)
    assert read.cached and gflops(read) == 34 and read.spread == (29e9, 34e9, 3) and done == [30, 34, 29]
    assert gflops(peak_module.cached_peak("float32")) == 34


def test_a_loaded_figure_is_marked_measured_again_and_a_quiet_one_replaces_it(peak_module, monkeypatch):
    share = peak_module.BUSY_SHARE
    done = scripted(peak_module, monkeypatch, [(13.2, 0.5), (11, share), (12, share / 2), (99, 0.0)])
    busy = peak_module.measure_peak("float32", budget_s=0.1)
    assert busy.loaded and busy.others_cpu == 0.5 and gflops(busy) == 13.2
    again = peak_module.measure_peak("float32", budget_s=0.1)          # not final: measured again
    assert done == [13.2, 11] and again.loaded and gflops(again) == 13.2   # still loaded: the higher stays
    assert again.spread == (11e9, 13.2e9, 2)
    quiet = peak_module.measure_peak("float32", budget_s=0.1)          # quiet at last: it wins, lower or not
    assert done == [13.2, 11, 12] and not quiet.loaded and gflops(quiet) == 12 and not quiet.cached
    assert quiet.spread == (12e9, 12e9, 1) and len(quiet.figures) == 3
    final = peak_module.measure_peak("float32", budget_s=0.1)          # quiet: final, not measured again
    assert final.cached and gflops(final) == 12 and done == [13.2, 11, 12]


def test_a_loaded_figure_never_replaces_a_quiet_one(peak_module, monkeypatch):
    scripted(peak_module, monkeypatch, [(20, 0.0), (40, 0.6)])
    peak_module.measure_peak("float32", budget_s=0.1)
    kept = peak_module.measure_peak("float32", budget_s=0.1, refresh=True)
    assert gflops(kept) == 20 and not kept.loaded and kept.cached
    assert kept.figures == ((20e9, False), (40e9, True)) and kept.spread == (20e9, 20e9, 1)
    with open(peak_module.cache_path()) as f:
        (entry,) = json.load(f)["machines"].values()
    (stored,) = entry["peaks"].values()
    assert stored["flops_per_s"] == 20e9 and stored["loaded"] is False


def test_a_quick_figure_never_replaces_a_full_one_even_a_loaded_one(peak_module, monkeypatch):
    done = scripted(peak_module, monkeypatch, [(15, 0.5), (25, 0.0), (30, 0.0)])
    full = peak_module.measure_peak("float32", budget_s=0.1)                   # full, under load
    quick = peak_module.measure_peak("float32", budget_s=0.1, quick=True)      # not final: a quick one now
    assert full.loaded and not quick.loaded and quick.quick and gflops(quick) == 25
    assert gflops(peak_module.measure_peak("float32", budget_s=0.1, quick=True)) == 25 and done == [15, 25]
    assert gflops(peak_module.cached_peak("float32")) == 15                   # the full slot: still the full one
    again = peak_module.measure_peak("float32", budget_s=0.1)                 # a full read measures again
    assert done == [15, 25, 30] and gflops(again) == 30 and not again.quick
    assert gflops(peak_module.measure_peak("float32", budget_s=0.1, quick=True)) == 30


def test_the_kept_figures_are_bounded_and_keep_the_peak(peak_module, monkeypatch):
    n = peak_module.MAX_FIGURES + 4
    scripted(peak_module, monkeypatch, [(50, 0.0)] + [(40 - i, 0.0) for i in range(n - 1)])
    for _ in range(n):
        p = peak_module.measure_peak("float32", budget_s=0.1, refresh=True)
    assert gflops(p) == 50 and len(p.figures) == peak_module.MAX_FIGURES
    assert p.figures[0] == (50e9, False) and p.figures[-1] == ((40 - (n - 2)) * 1e9, False)
    assert p.spread == ((40 - (n - 2)) * 1e9, 50e9, peak_module.MAX_FIGURES)


def test_the_load_probe_counts_other_programs_not_this_one(monkeypatch):
    import collections

    import psutil
    from tfwb.tf.runner import matmul_peak

    Times = collections.namedtuple("Times", "user system idle iowait")
    cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else [0]
    # two readings, 1 s apart on each of this process's cores: all of them busy (no idle time);
    # this process took 60 % of their time, so other programs took the other 40 %
    readings = iter([0.0, 1.0])
    own = iter([0.0, 0.6 * len(cores)])
    monkeypatch.setattr(psutil, "cpu_times", lambda percpu=False: (
        [Times(t, 0.0, 0.0, 0.0) for t in [next(readings)] * (max(cores) + 1)]))
    monkeypatch.setattr(psutil, "Process", lambda: type("P", (), {"cpu_times": lambda self: Times(next(own), 0.0, 0, 0)})())
    stop = matmul_peak.start_load_probe()
    assert stop() == pytest.approx(0.4)
    monkeypatch.undo()
    share = matmul_peak.start_load_probe()()        # the real reading: a share, or None with no tick between
    assert share is None or 0.0 <= share <= 1.0


def test_a_run_takes_a_better_figure_from_the_cache_and_measures_a_loaded_one_again(peak_module, monkeypatch):
    from tfwb.tf.runner import step_limits as limits

    done = scripted(peak_module, monkeypatch, [(10, 0.5), (20, 0.0), (25, 0.0)])
    monkeypatch.setattr(limits, "_PEAKS", {})
    busy = limits._peak("float32", "CPU", False)
    assert busy.loaded and limits._peak("float32", "CPU", False) is busy and done == [10]   # not yet again
    monkeypatch.setattr(limits, "RETRY_LOADED_S", 0.0)
    quiet = limits._peak("float32", "CPU", False)                   # measured again: quiet now
    assert done == [10, 20] and not quiet.loaded and gflops(quiet) == 20
    peak_module.measure_peak("float32", "CPU", budget_s=0.1, refresh=True)   # e.g. a chapter's own measurement
    assert gflops(limits._peak("float32", "CPU", False)) == 25 and done == [10, 20, 25]


def test_in_small_mode_a_process_measures_a_loaded_peak_once(peak_module, monkeypatch):
    """TFWB_FAST (the test command, small chapters on a busy machine): once per process, never per run."""
    from tfwb.tf.runner import step_limits as limits

    done = scripted(peak_module, monkeypatch, [(10, 0.5), (20, 0.0)])
    monkeypatch.setattr(limits, "_PEAKS", {})
    monkeypatch.setattr(limits, "RETRY_LOADED_S", 0.0)
    first = limits._peak("float32", "CPU", True)
    assert first.loaded and limits._peak("float32", "CPU", True) is first and done == [10]


def test_a_cpu_peak_is_final_after_several_quiet_figures_or_more_when_far_below_the_formula(peak_module,
                                                                                         monkeypatch):
    """Issue 35: one quiet 400 GFLOP/s bfloat16 figure stood in every chapter where quiet repeats read
    695-1,024: one short measurement is not final, and one far below the formula is suspect."""
    done = scripted(peak_module, monkeypatch, [(40, 0.0), (70, 0.0), (60, 0.0), (99, 0.0)], final_figures=3)
    reads = [gflops(peak_module.measure_peak("float32", budget_s=0.1)) for _ in range(4)]
    assert done == [40, 70, 60] and reads == [40, 70, 70, 70]            # the highest of three, then final
    assert peak_module.measure_peak("float32", budget_s=0.1).spread == (40e9, 70e9, 3)
    more = scripted(peak_module, monkeypatch, [(50 + i, 0.0) for i in range(peak_module.MAX_FIGURES)],
                    final_figures=3, formula=1000e9)                      # 70 is under 40 % of 1000: suspect
    for _ in range(peak_module.MAX_FIGURES + 2):
        peak_module.measure_peak("float32", budget_s=0.1)
    assert len(more) == peak_module.MAX_FIGURES - 3                       # measured until the entry is full
