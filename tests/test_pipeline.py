"""Tests of chapter 01's additions: knobs that mean what they say, PipelineSettings, sharding, the
AUTOTUNE trace reader, the TF guide benchmark, and bad input (clear errors, earlier results kept)."""
from __future__ import annotations

import gc
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("tensorflow")
import tfwb.tf.runner.train  # noqa: E402,F401  (splits the CPU before TF starts, as test_data does)
import tensorflow as tf  # noqa: E402

import tfwb  # noqa: E402
from tfwb.config import RunConfig  # noqa: E402
from tfwb.history import load_results  # noqa: E402
from tfwb.tf.lab import autotune, guide  # noqa: E402
from tfwb.tf.workloads import image_files as images
import tfwb.tf.runner.pipeline as tfdata  # noqa: E402
from tfwb.tf.lab import sharding  # noqa: E402
from tfwb.workloads import get_workload  # noqa: E402

pytestmark = pytest.mark.tf

ROOT = Path(__file__).resolve().parents[1]
SMALL = images.SPECS["small"]
ASYNC_OPS = ("Prefetch", "MapAndBatch", "ParallelMapV2", "ParallelBatch", "ParallelInterleaveV4")


@pytest.fixture
def data_dir(tmp_path, monkeypatch):
    root = tmp_path / "tfwb-data"
    monkeypatch.setenv("TFWB_DATA_DIR", str(root))
    return root


def cfg(**changes) -> RunConfig:
    base = dict(size="small", batch_size=16, storage_latency_ms=0, steps=3, warmup_steps=1,
                sample_interval_s=0.05)
    base.update(changes)
    return RunConfig(**base)


def build(config: RunConfig, tuning=None):
    ds, _ = tfdata.build_dataset(config, get_workload("images"), tuning)
    return ds


def kinds(trace: autotune.PipelineTrace) -> set:
    return {s.kind for s in trace.stages}


# -- knobs that are off are off ---------------------------------------------------------------
def test_knobs_off_turn_off_every_asynchronous_rewrite(data_dir):
    opt = build(cfg()).options().experimental_optimization
    assert opt.inject_prefetch is False
    assert opt.map_and_batch_fusion is False
    assert opt.parallel_batch is False
    assert opt.map_parallelization is False


def test_prefetch_on_leaves_tf_data_its_prefetching_rewrites(data_dir):
    opt = build(cfg(prefetch=True)).options().experimental_optimization
    assert opt.inject_prefetch is None and opt.map_and_batch_fusion is None
    assert opt.map_parallelization is False, "parallel_map is still off"


def test_tfdata_defaults_keep_every_rewrite(data_dir):
    opt = build(cfg(), tfdata.PipelineSettings(tfdata_defaults=True)).options().experimental_optimization
    assert opt.inject_prefetch is None and opt.map_parallelization is None
    assert opt.map_and_batch_fusion is None and opt.parallel_batch is None


def test_knobs_off_pipeline_runs_as_written(data_dir):
    trace = autotune.trace_pipeline(build(cfg()), batches=6)
    assert "BatchV2" in kinds(trace) and "Map" in kinds(trace)
    assert not kinds(trace) & set(ASYNC_OPS), trace.structure()


def test_tfdata_defaults_fuse_and_parallelize_and_the_trace_says_so(data_dir):
    trace = autotune.trace_pipeline(build(cfg(), tfdata.PipelineSettings(tfdata_defaults=True)), batches=6)
    structure = trace.structure()
    assert structure.splitlines()[0].startswith("MapAndBatch") and "fused by tf.data" in structure
    assert "ParallelMapV2   <- parallelized by tf.data (map_parallelization)" in structure
    decode = trace.stage("ParallelMapV2")
    assert decode.settings.get("autotune") == "true" and decode.tuned.get("parallelism")


def test_all_knobs_on_trace_shows_prefetch_buffer_and_threadpool(data_dir):
    config = cfg(prefetch=True, parallel_map=True, interleave=True)
    trace = autotune.trace_pipeline(build(config), batches=8, step_s=0.005)
    assert {"Prefetch", "ParallelInterleaveV4", "ParallelMapV2"} <= kinds(trace)
    assert trace.stage("Prefetch").tuned.get("buffer_limit")
    assert trace.root.get("threadpool_size") == str(tfdata.io_threads(config))
    assert "budgets: cpu_budget=" in trace.describe()


def test_interleave_gets_a_thread_per_read_in_flight(data_dir):
    assert tfdata.io_threads(cfg()) is None
    assert tfdata.io_threads(cfg(interleave=True)) >= tfdata.INTERLEAVE_CYCLE
    assert tfdata.io_threads(cfg(interleave=True), tfdata.PipelineSettings(io_threads=0)) is None
    assert tfdata.io_threads(cfg(), tfdata.PipelineSettings(io_threads=3)) == 3
    threads = build(cfg(interleave=True)).options().threading.private_threadpool_size
    assert threads == tfdata.io_threads(cfg(interleave=True))


def test_the_guides_naive_pipeline_gets_an_injected_prefetch():
    trace = autotune.trace_pipeline(guide.PIPELINES["naive"]().repeat(), batches=3)
    assert trace.stages[1].kind == "Prefetch"
    assert trace.stages[1].rewrite == "injected by tf.data (inject_prefetch)"


# -- PipelineSettings -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("field, value", [
    ("map_parallel_calls", 0), ("map_parallel_calls", -1), ("map_parallel_calls", True),
    ("interleave_parallel_calls", 1.5), ("prefetch_buffer", 0), ("io_threads", -1),
    ("shard", (2, 2)), ("shard", (0, 0)), ("shard", [2, 0]), ("shard", (2,)),
])
def test_tuning_refuses_bad_values_naming_the_field(field, value):
    with pytest.raises(ValueError, match=field):
        tfdata.PipelineSettings(**{field: value})


def test_explicit_parallelism_and_buffer_are_used(data_dir):
    config = cfg(prefetch=True, parallel_map=True, interleave=True)
    tuning = tfdata.PipelineSettings(map_parallel_calls=2, interleave_parallel_calls=3, prefetch_buffer=5)
    trace = autotune.trace_pipeline(build(config, tuning), batches=6)
    assert trace.stage("Prefetch").tuned["buffer_limit"] == (5,)
    assert trace.stage("ParallelInterleaveV4").tuned["parallelism"] == (3,)
    assert trace.stage("ParallelMapV2").tuned["parallelism"] == (2,)


# -- sharding -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("by_files", [True, False])
def test_two_shards_are_disjoint_and_cover_the_data(data_dir, by_files):
    files = images.ensure_images("small", 0)
    per_worker = SMALL.n_images // 2 // 16
    seen = []
    for index in (0, 1):
        ds = build(cfg(), tfdata.PipelineSettings(shard=(2, index), shard_files=by_files))
        seen.append([int(v) for _, y in ds.take(per_worker) for v in y.numpy()])
    assert len(seen[0]) == len(seen[1]) == SMALL.n_images // 2
    assert sorted(seen[0] + seen[1]) == sorted(files.labels)
    if by_files:   # worker 0 reads shard folders 0, 2, 4, ... in order
        assert seen[0][:16] == list(files.shard_labels[0])


def test_generator_source_shards_too(data_dir):
    files = images.ensure_images("small", 0)
    ds = build(cfg(data_source="generator"), tfdata.PipelineSettings(shard=(2, 1)))
    _, y = next(iter(ds))
    assert y.numpy().tolist() == files.labels[1::2][:16]


def test_auto_shard_file_policy_cannot_shard_this_pipeline_and_auto_falls_back_to_data(data_dir):
    element, error = sharding.try_auto_shard(build(cfg()), 2, 0, "FILE")
    assert element is None and error == "NotFoundError: Found an unshardable source dataset"
    auto, err_auto = sharding.try_auto_shard(build(cfg()), 2, 0, "AUTO")
    data, err_data = sharding.try_auto_shard(build(cfg()), 2, 0, "DATA")
    assert err_auto is None and err_data is None
    assert auto[1].numpy().tolist() == data[1].numpy().tolist()
    with pytest.raises(ValueError, match="policy='SOME'"):
        sharding.auto_shard(build(cfg()), 2, 0, "SOME")


# -- the files, the cache and their errors -----------------------------------------------------------------
def test_data_folder_is_named_by_its_layout(data_dir):
    name = images.dataset_dir("small", 0).name
    assert f"{SMALL.n_images}x{SMALL.image_px}px-{SMALL.n_shards}shards" in name and "seed0" in name


def test_default_latencies_model_slow_storage():
    for spec in images.SPECS.values():
        assert spec.default_latency_ms > 0
    assert images.SPECS["full"].default_latency_ms >= images.SPECS["small"].default_latency_ms


@pytest.mark.parametrize("prefix", ["/proc/tfwb-cache/images", "/proc/images"])
def test_unwritable_cache_folder_is_refused_even_for_root(data_dir, prefix):
    with pytest.raises(ValueError) as info:
        build(cfg(cache=prefix))
    msg = str(info.value)
    assert f"cache={prefix!r}" in msg and "cache=True" in msg and "writable" in msg


def test_disk_cache_files_go_with_their_dataset(data_dir, tmp_path):
    folder = tmp_path / "cache"
    folder.mkdir()
    ds = build(cfg(cache=str(folder / "run")))
    for _ in ds.take(SMALL.n_images // 16 + 1):
        pass
    assert any(name.endswith(".index") for name in os.listdir(folder))
    del ds
    gc.collect()
    assert os.listdir(folder) == []


def test_negative_latency_is_refused_at_every_level(data_dir):
    with pytest.raises(ValueError, match="storage_latency_ms=-1"):
        cfg(storage_latency_ms=-1)
    sneaky = cfg()
    object.__setattr__(sneaky, "storage_latency_ms", -1.0)      # built around the validation
    with pytest.raises(ValueError, match="storage_latency_ms=-1.0 is not allowed"):
        tfdata.build_dataset(sneaky, get_workload("images"))


def test_negative_shuffle_buffer_is_refused_naming_the_field():
    with pytest.raises(ValueError, match="shuffle_buffer=-1 is not allowed; shuffle_buffer must be"):
        cfg(shuffle_buffer=-1)


def test_unwritable_cache_fails_the_run_and_keeps_earlier_results(data_dir, tmp_path):
    history = tmp_path / "runs.jsonl"
    wb = tfwb.Workbench(baseline=cfg(), history_path=history, hardware={})
    good = wb.run()
    snapshot = good.to_json()
    bad = wb.run(cache="/proc/tfwb-cache/images")
    assert good.ok and not bad.ok and bad.status == "failed"
    assert "cache='/proc/tfwb-cache/images'" in bad.error and "cache=True" in bad.error
    assert wb.results[0] is good and good.to_json() == snapshot
    saved = load_results(history)
    assert [r.status for r in saved] == ["ok", "failed"] and saved[0].to_json() == snapshot


def test_workbench_refuses_bad_values_before_running(data_dir, tmp_path):
    wb = tfwb.Workbench(baseline=cfg(), history_path=tmp_path / "runs.jsonl", hardware={})
    for bad in ({"storage_latency_ms": -5}, {"shuffle_buffer": -1}):
        with pytest.raises(ValueError, match=next(iter(bad))):
            wb.run(**bad)
    assert wb.results == [] and not (tmp_path / "runs.jsonl").exists()


def test_files_removed_during_a_run_fail_it_with_advice(data_dir):
    files = images.ensure_images("small", 0)
    ds = build(cfg())
    os.remove(files.paths[-1])
    with pytest.raises(tf.errors.NotFoundError):
        for _ in ds.take(SMALL.n_images // 16 + 1):
            pass


# -- autotune helpers ----------------------------------------------------------------------------------------
def test_scan_reports_each_value_and_refuses_unknown_settings(data_dir):
    rows = autotune.scan(cfg(parallel_map=True), "map_parallel_calls", [1, None], batches=3, warmup=1)
    assert [r["label"] for r in rows] == ["1", "AUTOTUNE"]
    assert all(r["examples_per_s"] > 0 for r in rows)
    with pytest.raises(ValueError, match="setting='threads'"):
        autotune.scan(cfg(), "threads", [1])


def test_train_on_times_any_dataset_like_run(data_dir):
    config = cfg()
    result = autotune.train_on(config, build(config, tfdata.PipelineSettings(tfdata_defaults=True)),
                               label="tf.data defaults")
    assert result.ok and len(result.step_times_s) == 3 and len(result.input_wait_s) == 3
    assert result.config.label == "tf.data defaults"
    assert any("built outside RunConfig" in n for n in result.notes)
    assert tfwb.RunResult.from_json(result.to_json()).config.label == "tf.data defaults"


def test_parse_of_a_trace_without_tf_data_events_is_empty(tmp_path):
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    path = tmp_path / "empty.xplane.pb"
    path.write_bytes(xplane_pb2.XSpace().SerializeToString())
    trace = autotune.parse_xspace(str(path))
    assert trace.stages == () and trace.structure() == "(no tf.data events in the trace)"


# -- the TF guide's benchmark ---------------------------------------------------------------------------------------
def test_published_ratios_and_source():
    assert guide.PUBLISHED == {"prefetch": 1.03, "parallel interleave": 1.26, "parallel map": 1.35,
                               "cache (5 epochs)": 3.2, "vectorized map": 4.8}
    assert "Better performance with the tf.data API" in guide.SOURCE
    assert set(guide.PIPELINES) == {n for p in guide.PAIRS for n in (p.baseline, p.improved)}


def test_guide_vectorized_pair_runs_and_reports():
    pair = next(p for p in guide.PAIRS if p.name == "vectorized map")
    result = guide.run(repeats=1, warmup=0, pairs=[pair], rewrites_off=())
    assert result.ratio(pair) > 0            # one repeat: a ratio, not a speed claim (benchmarks/ has those)
    assert result.ratio(pair, "off") is None
    table = guide.format_rows(result.rows())
    assert "vectorized map" in table and "4.80x" in table and "not run" in table
    html_table = guide.html_rows(result.rows())
    assert "<td" in html_table and "4.80x" in html_table and "not run" in html_table
    [line] = result.check_lines()
    assert line.startswith("Expected: vectorized map, rewrites default (faster). Measured: ")


@pytest.mark.parametrize("kwargs, match", [
    ({"repeats": 0}, "repeats=0"), ({"warmup": -1}, "warmup=-1"), ({"rewrites_off": ("nope",)}, "nope"),
])
def test_guide_run_refuses_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        guide.run(**kwargs)


# -- the benchmark script -------------------------------------------------------------------------------------------
def test_pipeline_benchmark_writes_json_and_markdown(data_dir, tmp_path):
    spec = importlib.util.spec_from_file_location("pipeline_bench", ROOT / "benchmarks" / "pipeline.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    out = tmp_path / "pipeline"
    result = bench.main(["--size", "small", "--rounds", "1", "--steps", "4", "--naive-steps", "3",
                         "--out", str(out)])
    saved = json.loads((tmp_path / "pipeline.json").read_text())
    assert saved["best_vs_naive"] == result["best_vs_naive"] > 0    # a ratio; how large is the benchmark's, not a test's
    assert set(saved["median_step_ms"]) == {"naive", "best", "ceiling"}
    text = (tmp_path / "pipeline.md").read_text()
    assert "best vs naive" in text and "Command:" in text and "Machine:" in text


# -- a cache that caches: no partial-cache warning anywhere -----------------------------------------------------
CACHE_RUNS = r'''
import os, sys, tempfile
import keras, tensorflow as tf
import tfwb
from tfwb import RunConfig

def my_model(cfg):                 # the README's "Bring your own model" example
    return keras.Sequential([keras.Input((20,)), keras.layers.Dense(64, activation="relu"),
                             keras.layers.Dense(3, dtype="float32")])

def my_data(cfg):
    x = tf.random.normal((4096, 20)); y = tf.cast(tf.reduce_sum(x[:, :3], 1) > 0, tf.int32)
    return tf.data.Dataset.from_tensor_slices((x, y))

tfwb.register_workload("mine", model_fn=my_model, data_fn=my_data,
                       loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
folder = tempfile.mkdtemp()
short = dict(steps=3, warmup_steps=1)   # a cache is filled before the first step: a few steps show its notes
runs = [RunConfig(workload="mine", prefetch=True, cache=True, mixed_precision="mixed_bfloat16", **short),
        RunConfig(workload="mine", prefetch=True, cache=os.path.join(folder, "mine"), **short)]
for workload in ("images", "mlp"):
    for cache in (True, os.path.join(folder, workload)):
        runs.append(RunConfig(workload=workload, size="small", batch_size=16, steps=3, warmup_steps=1,
                              storage_latency_ms=0 if workload == "images" else None, cache=cache))
for c in runs:
    r = tfwb.run(c)
    assert r.ok, r.error
    print("NOTE", c.workload, [n for n in r.notes if n.startswith("cache")], flush=True)
print("CONTROL", flush=True)
sys.stderr.write("CONTROL\n"); sys.stderr.flush()
for _ in tf.data.Dataset.range(10).cache().take(2):   # the mistake itself: TF must warn here
    pass
'''


def test_short_cached_runs_never_warn_about_a_partial_cache(data_dir, tmp_path):
    script = tmp_path / "cache_runs.py"
    script.write_text(CACHE_RUNS)
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="0", TFWB_DATA_DIR=str(data_dir))
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300,
                         env=env, cwd=str(ROOT))
    assert out.returncode == 0, out.stderr[-3000:]
    notes = [line for line in out.stdout.splitlines() if line.startswith("NOTE")]
    assert len(notes) == 6 and all("filled with one epoch" in n for n in notes), notes
    before, _, after = out.stderr.partition("CONTROL\n")
    warning = "did not fully read the dataset being cached"
    assert warning not in before, before[-3000:]
    assert warning in after, "TF's logging is live in this process, so its absence above means something"
