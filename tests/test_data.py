"""Tests of tfwb.tf.workloads.image_files, tfwb.tf.runner.pipeline and the built-in workloads: generated image files,
knob-driven pipelines, the mlp workload, a cache that caches."""
from __future__ import annotations

import collections
import gc
import json
import os
import shutil
import sys

import pytest

pytest.importorskip("tensorflow")
# Import the runner first: it splits the CPU into logical devices, which TF allows only
# before its runtime starts (test_train's mirrored run needs it in this process).
import tfwb.tf.runner.train  # noqa: E402,F401
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import tfwb  # noqa: E402
from tfwb.config import RunConfig  # noqa: E402
import tfwb.tf.runner.pipeline as tfdata  # noqa: E402
from tfwb.tf.workloads.images import storage_latency_s  # noqa: E402
from tfwb.tf.workloads import image_files as images  # noqa: E402
from tfwb.tf.runner import pipeline
from tfwb.workloads import get_workload, register_workload, unregister_workload  # noqa: E402

pytestmark = pytest.mark.tf

SMALL = images.SPECS["small"]
USER = "test-data-user-workload"


@pytest.fixture
def data_dir(tmp_path, monkeypatch):
    root = tmp_path / "tfwb-data"
    monkeypatch.setenv("TFWB_DATA_DIR", str(root))
    return root


@pytest.fixture
def user_workload():
    def register(data_fn):
        register_workload(USER, model_fn=lambda cfg: None, data_fn=data_fn)
        return get_workload(USER)

    yield register
    unregister_workload(USER)


def cfg(**changes) -> RunConfig:
    base = dict(size="small", batch_size=16, storage_latency_ms=0, sample_interval_s=0.05,
                steps=3, warmup_steps=1)
    base.update(changes)
    return RunConfig(**base)


def first_batch(config: RunConfig, workload=None):
    ds, notes = tfdata.build_dataset(config, workload or get_workload(config.workload))
    x, y = next(iter(ds))
    return ds, notes, x, y


def file_bytes(files: images.ImageFiles) -> list:
    return [open(p, "rb").read() for p in files.paths]


# -- generated files ---------------------------------------------------------------------
def test_data_root_is_read_at_call_time(data_dir, monkeypatch):
    assert images.data_root() == data_dir
    monkeypatch.setenv("TFWB_DATA_DIR", str(data_dir / "elsewhere"))
    assert images.data_root() == data_dir / "elsewhere"


def test_generation_writes_manifest_and_every_file(data_dir):
    files = images.ensure_images("small", seed=0)
    assert files.root.parent == data_dir
    manifest = json.loads((files.root / "manifest.json").read_text())
    assert manifest["format"] == images.FORMAT_VERSION and manifest["seed"] == 0
    assert len(files.shard_paths) == SMALL.n_shards
    assert all(len(s) == SMALL.n_images // SMALL.n_shards for s in files.shard_paths)
    assert len(files.paths) == len(files.labels) == SMALL.n_images
    assert all(os.path.isfile(p) for p in files.paths)
    assert [p for p in os.listdir(data_dir)] == [files.root.name], "no temporary folder left behind"


def test_generated_images_decode_to_the_spec(data_dir):
    from PIL import Image

    files = images.ensure_images("small", seed=0)
    with Image.open(files.paths[0]) as im:
        assert im.size == (SMALL.image_px, SMALL.image_px) and im.mode == "RGB"


def test_labels_are_balanced_and_cover_every_class(data_dir):
    labels = images.ensure_images("small", seed=0).labels
    counts = collections.Counter(labels)
    assert sorted(counts) == list(range(SMALL.n_classes))
    assert max(counts.values()) - min(counts.values()) <= 1
    assert labels != sorted(labels), "labels are shuffled across shards"


def test_same_seed_same_bytes_other_seed_other_bytes(tmp_path, monkeypatch):
    monkeypatch.setenv("TFWB_DATA_DIR", str(tmp_path / "a"))
    a = images.ensure_images("small", seed=0)
    a_bytes = file_bytes(a)
    monkeypatch.setenv("TFWB_DATA_DIR", str(tmp_path / "b"))
    b = images.ensure_images("small", seed=0)
    assert a.root != b.root
    assert file_bytes(b) == a_bytes
    assert b.labels == a.labels
    c = images.ensure_images("small", seed=1)
    assert c.root != b.root
    c_bytes = file_bytes(c)
    assert c_bytes[0] != a_bytes[0]
    assert sum(x != y for x, y in zip(c_bytes, a_bytes)) == len(a_bytes)


def test_second_call_reuses_files(data_dir):
    files = images.ensure_images("small", seed=0)
    manifest = files.root / "manifest.json"
    first_mtime = os.stat(manifest).st_mtime_ns
    again = images.ensure_images("small", seed=0)
    assert again == files
    assert os.stat(manifest).st_mtime_ns == first_mtime


def test_unknown_size_raises(data_dir):
    with pytest.raises(ValueError, match="size='medium'"):
        images.ensure_images("medium")


# -- pipelines: shapes for every source ------------------------------------------------------
@pytest.mark.parametrize("source", ["files", "generator", "memory"])
def test_each_source_yields_float_images_and_int_labels(data_dir, source):
    ds, _, x, y = first_batch(cfg(data_source=source))
    assert x.shape == (16, SMALL.image_px, SMALL.image_px, 3) and x.dtype == tf.float32
    assert y.shape == (16,) and y.dtype.is_integer
    assert ds.element_spec[0].shape == (16, 32, 32, 3)
    assert 0.0 <= float(tf.reduce_min(x)) and float(tf.reduce_max(x)) <= 255.0
    assert set(y.numpy().tolist()) <= set(range(SMALL.n_classes))


@pytest.mark.parametrize("knobs", [
    {"parallel_map": True}, {"interleave": True}, {"vectorized_map": True}, {"shuffle_buffer": 64},
    {"cache": True, "prefetch": True}, {"storage_latency_ms": 1.0, "deterministic": False},
])
def test_pipeline_knobs_keep_batch_shape(data_dir, knobs):
    _, _, x, y = first_batch(cfg(**knobs))
    assert x.shape == (16, 32, 32, 3) and x.dtype == tf.float32 and y.shape == (16,)


@pytest.mark.parametrize("source", ["files", "generator"])
def test_sequential_sources_keep_file_order(data_dir, source):
    files = images.ensure_images("small", seed=0)
    _, _, _, y = first_batch(cfg(data_source=source))
    assert y.numpy().tolist() == files.labels[:16]


def test_interleave_reads_shards_round_robin(data_dir):
    files = images.ensure_images("small", seed=0)
    _, _, _, y = first_batch(cfg(interleave=True))
    n = SMALL.n_shards
    expected = [files.shard_labels[i % n][i // n] for i in range(16)]
    assert y.numpy().tolist() == expected


def test_pipeline_repeats_past_one_epoch(data_dir):
    ds, _ = tfdata.build_dataset(cfg(), get_workload("images"))
    batches = SMALL.n_images // 16
    assert sum(1 for _ in ds.take(batches + 3)) == batches + 3


# -- prefetch really off -----------------------------------------------------------------------
@pytest.mark.parametrize("source", ["files", "generator"])
def test_prefetch_false_turns_off_injected_prefetch(data_dir, source):
    ds, _ = tfdata.build_dataset(cfg(data_source=source, prefetch=False), get_workload("images"))
    assert ds.options().experimental_optimization.inject_prefetch is False


def test_prefetch_true_leaves_injection_on(data_dir):
    ds, _ = tfdata.build_dataset(cfg(prefetch=True), get_workload("images"))
    assert ds.options().experimental_optimization.inject_prefetch is not False


@pytest.mark.parametrize("deterministic", [True, False])
def test_deterministic_option_follows_the_knob(data_dir, deterministic):
    ds, _ = tfdata.build_dataset(cfg(deterministic=deterministic), get_workload("images"))
    assert ds.options().deterministic is deterministic


# -- notes and latency ---------------------------------------------------------------------------
def test_memory_and_generator_notes(data_dir):
    _, notes = tfdata.build_dataset(cfg(data_source="memory"), get_workload("images"))
    assert any("data_source='memory'" in n for n in notes)
    _, notes = tfdata.build_dataset(cfg(data_source="generator", interleave=True), get_workload("images"))
    assert any(n.startswith("interleave does not apply") for n in notes)
    _, notes = tfdata.build_dataset(cfg(), get_workload("images"))
    assert notes == ()


def test_storage_latency(data_dir):
    assert storage_latency_s(cfg(storage_latency_ms=None)) == SMALL.default_latency_ms / 1e3
    assert storage_latency_s(cfg(storage_latency_ms=0)) == 0
    assert storage_latency_s(cfg(storage_latency_ms=25)) == 0.025
    assert storage_latency_s(cfg(size="full", storage_latency_ms=None)) == (
        images.SPECS["full"].default_latency_ms / 1e3)


# -- cache -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("where", ["missing-folder", "under-a-file"])
def test_cache_in_unwritable_place_names_cache(data_dir, tmp_path, where):
    if where == "missing-folder":
        prefix = tmp_path / "no" / "such" / "folder" / "cache"
    else:
        (tmp_path / "a-file").write_text("x")
        prefix = tmp_path / "a-file" / "cache"
    with pytest.raises(ValueError) as info:
        tfdata.build_dataset(cfg(cache=str(prefix)), get_workload("images"))
    msg = str(info.value)
    assert f"cache={str(prefix)!r}" in msg
    assert "cache=True" in msg, "the message says what to pick instead"


def test_cache_path_prefix_writes_cache_files(data_dir, tmp_path):
    folder = tmp_path / "cache"
    folder.mkdir()
    prefix = folder / "run"
    ds, _ = tfdata.build_dataset(cfg(cache=str(prefix)), get_workload("images"))
    batches = SMALL.n_images // 16
    for _ in ds.take(batches + 2):     # one full epoch completes the cache
        pass
    written = [name for name in os.listdir(folder) if name.startswith("run-")]
    assert any(name.endswith(".index") for name in written), written
    assert any(".data-" in name for name in written), written


# -- data that vanished ------------------------------------------------------------------------------
def test_deleted_data_folder_is_regenerated(data_dir):
    files = images.ensure_images("small", seed=0)
    shutil.rmtree(files.root)
    _, _, x, _ = first_batch(cfg())
    assert x.shape == (16, 32, 32, 3)
    assert (files.root / "manifest.json").exists()
    assert all(os.path.isfile(p) for p in files.paths)


@pytest.mark.parametrize("which", [0, -1])
def test_deleted_image_files_raise_with_advice(data_dir, which):
    files = images.ensure_images("small", seed=0)
    os.remove(files.paths[which])
    with pytest.raises(FileNotFoundError) as info:
        tfdata.build_dataset(cfg(), get_workload("images"))
    msg = str(info.value)
    assert str(files.root) in msg
    assert "delete" in msg and "TFWB_DATA_DIR" in msg and "regenerate" in msg


def test_folder_without_manifest_is_regenerated_or_explained(data_dir):
    files = images.ensure_images("small", seed=0)
    os.remove(files.root / "manifest.json")
    try:
        again = images.ensure_images("small", seed=0)
    except FileNotFoundError as e:
        assert "delete" in str(e) or "TFWB_DATA_DIR" in str(e), str(e)
    else:
        assert all(os.path.isfile(p) for p in again.paths)


# -- user workloads ---------------------------------------------------------------------------------
def toy_data(cfg_):
    x = np.arange(40 * 4, dtype="float32").reshape(40, 4)
    y = (np.arange(40) % 3).astype("int32")
    return tf.data.Dataset.from_tensor_slices((x, y))


@pytest.mark.parametrize("source", ["files", "memory"])
def test_user_workload_is_batched_and_repeated(user_workload, source):
    w = user_workload(toy_data)
    ds, notes = tfdata.build_dataset(cfg(workload=USER, data_source=source, batch_size=8), w)
    batches = list(ds.take(7))                       # 40 examples: 5 batches, then repeat
    assert all(x.shape == (8, 4) and y.shape == (8,) for x, y in batches)
    if source == "files":
        assert batches[0][1].numpy().tolist() == [0, 1, 2, 0, 1, 2, 0, 1]
        assert ds.options().experimental_optimization.inject_prefetch is False


def test_user_workload_notes_knobs_that_do_not_apply(user_workload):
    w = user_workload(toy_data)
    _, notes = tfdata.build_dataset(cfg(workload=USER, parallel_map=True, interleave=True), w)
    assert any(n.startswith("parallel_map does not apply") for n in notes)
    assert any(n.startswith("interleave does not apply") for n in notes)


def test_user_workload_with_generator_source_raises(user_workload):
    w = user_workload(toy_data)
    with pytest.raises(ValueError, match="data_source='generator'") as info:
        tfdata.build_dataset(cfg(workload=USER, data_source="generator"), w)
    assert USER in str(info.value)


@pytest.mark.parametrize("returned", [[(1.0, 0)], None, np.zeros((4, 2))])
def test_user_data_fn_must_return_a_dataset(user_workload, returned):
    w = user_workload(lambda cfg_: returned)
    with pytest.raises(ValueError) as info:
        tfdata.build_dataset(cfg(workload=USER), w)
    msg = str(info.value)
    assert "data_fn" in msg and USER in msg and "tf.data.Dataset" in msg
    assert type(returned).__name__ in msg


# -- the mlp workload -------------------------------------------------------------------------------
def test_mlp_rows_are_seeded_and_labelled_by_the_teacher():
    from tfwb.tf.workloads import mlp

    spec = mlp.SPECS["small"]
    x, y = mlp.rows("small", seed=0)
    assert x.shape == (spec.n_rows, spec.n_features) and x.dtype == np.float32
    assert y.shape == (spec.n_rows,) and set(np.unique(y)) <= set(range(spec.n_classes))
    assert len(np.unique(y)) >= spec.n_classes // 2, "labels use many classes"
    again, _ = mlp.rows("small", seed=0)
    other, _ = mlp.rows("small", seed=1)
    assert np.array_equal(x, again) and not np.array_equal(x, other)
    with pytest.raises(ValueError, match="size='medium'"):
        mlp.rows("medium")


def test_mlp_model_is_deep_narrow_with_float32_logits_under_mixed_precision():
    import keras
    from tfwb.tf.workloads import mlp

    before = keras.mixed_precision.global_policy()
    keras.mixed_precision.set_global_policy("mixed_bfloat16")
    try:
        for size, spec in mlp.SPECS.items():
            model = mlp.model(cfg(workload="mlp", size=size))
            dense = [layer for layer in model.layers if isinstance(layer, keras.layers.Dense)]
            assert len(dense) == spec.n_layers + 1
            assert {layer.units for layer in dense[:-1]} == {spec.width} and 32 <= spec.width <= 64
            assert 8 <= spec.n_layers <= 16
            assert dense[0].compute_dtype == "bfloat16" and model.output.dtype == "float32"
    finally:
        keras.mixed_precision.set_global_policy(before)


def test_mlp_pipeline_batches_rows_and_notes_knobs_without_effect():
    _, notes, x, y = first_batch(cfg(workload="mlp", interleave=True, parallel_map=True, storage_latency_ms=5.0))
    assert x.shape == (16, 16) and x.dtype == tf.float32 and y.dtype == tf.int32
    assert [n.split(" ")[0] for n in notes] == ["storage_latency_ms", "parallel_map", "interleave"]   # the knob table's order
    assert all("does not apply to workload 'mlp'" in n for n in notes)
    _, notes, x, _ = first_batch(cfg(workload="mlp", data_source="memory"))
    assert x.shape == (16, 16) and any("data_source='memory'" in n for n in notes)


def test_mlp_refuses_the_generator_source_before_any_work():
    with pytest.raises(ValueError) as info:          # RunConfig refuses it: nothing can run
        cfg(workload="mlp", data_source="generator")
    assert "data_source='generator' does not apply to workload 'mlp'" in str(info.value)
    built_around = cfg(workload="mlp", steps=2, warmup_steps=0)
    object.__setattr__(built_around, "data_source", "generator")   # a config built around the check
    with pytest.raises(ValueError, match="does not apply to workload 'mlp'"):
        tfdata.build_dataset(built_around)


def test_mlp_trains_and_its_loss_falls():
    result = tfwb.run(cfg(workload="mlp", batch_size=64, steps=40, warmup_steps=5))
    assert result.ok, result.error
    first, last = np.mean(result.warmup_losses), np.mean(result.losses[-5:])
    assert last < first - 0.05, (first, last)


def test_a_workload_module_written_now_trains_through_a_lazy_registration(tmp_path, monkeypatch):
    (tmp_path / "tfwb_test_tiny_workload.py").write_text(
        "import keras, numpy as np, tensorflow as tf\n"
        "def model(cfg):\n"
        "    return keras.Sequential([keras.Input((4,)), keras.layers.Dense(3, dtype='float32')])\n"
        "def data(cfg):\n"
        "    x = np.random.default_rng(0).standard_normal((64, 4)).astype('float32')\n"
        "    return tf.data.Dataset.from_tensor_slices((x, (x[:, 0] > 0).astype('int32')))\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    register_workload(USER, model_fn="tfwb_test_tiny_workload:model", data_fn="tfwb_test_tiny_workload:data")
    try:
        result = tfwb.run(cfg(workload=USER, steps=3, warmup_steps=1))
    finally:
        unregister_workload(USER)
        sys.modules.pop("tfwb_test_tiny_workload", None)
    assert result.ok and len(result.step_times_s) == 3, result.error


# -- a cache that caches ----------------------------------------------------------------------------
ROWS = 96


@pytest.fixture
def counted(user_workload):
    """A user workload of ROWS rows whose every element produced from the source is counted."""
    reads = []

    def note(i):
        reads.append(int(i))
        return i

    def data_fn(cfg_):
        x = np.random.default_rng(0).standard_normal((ROWS, 4)).astype("float32")
        ds = tf.data.Dataset.from_tensor_slices((x, (x[:, 0] > 0).astype("int32"), np.arange(ROWS)))

        def count(x, y, i):
            done = tf.py_function(note, [i], tf.int64)
            with tf.control_dependencies([done]):
                return tf.identity(x), y

        return ds.map(count)

    register_workload(USER, model_fn=lambda cfg_: tf.keras.Sequential(
        [tf.keras.Input((4,)), tf.keras.layers.Dense(2, dtype="float32")]), data_fn=data_fn)
    return reads


@pytest.mark.parametrize("steps", [2, 20])       # 48 and 336 examples: shorter and longer than an epoch
def test_memory_cache_is_filled_once_before_the_run(counted, steps):
    result = tfwb.run(cfg(workload=USER, steps=steps, warmup_steps=1, cache=True, prefetch=True))
    assert result.ok, result.error
    assert sorted(counted) == list(range(ROWS)), "one epoch read from the source, every later element from the cache"
    [note] = [n for n in result.notes if n.startswith("cache=True")]
    assert f"filled with one epoch ({ROWS} elements" in note and "before the first step" in note


@pytest.mark.parametrize("steps", [2, 20])
def test_file_cache_is_filled_once_and_removed_with_its_dataset(counted, tmp_path, steps):
    folder = tmp_path / "cache"
    folder.mkdir()
    result = tfwb.run(cfg(workload=USER, steps=steps, warmup_steps=1, cache=str(folder / "run")))
    assert result.ok, result.error
    assert sorted(counted) == list(range(ROWS))
    [note] = [n for n in result.notes if n.startswith("cache='")]
    assert f"filled with one epoch ({ROWS} elements" in note and str(folder / "run") in note
    gc.collect()
    assert os.listdir(folder) == []


def test_cache_fill_returns_count_and_a_complete_file_cache(tmp_path):
    prefix = str(tmp_path / "fill")
    n, seconds = pipeline.fill_cache(tf.data.Dataset.range(10).cache(prefix), tf.data.Options(), prefix)
    assert n == 10 and seconds >= 0
    n, _ = pipeline.fill_cache(tf.data.Dataset.range(7).cache(), tf.data.Options())
    assert n == 7
    assert os.path.exists(prefix + ".index") and not [p for p in os.listdir(tmp_path) if "lockfile" in p]


def test_images_cache_notes_say_what_was_cached(data_dir):
    _, notes = tfdata.build_dataset(cfg(cache=True), get_workload("images"))
    assert len(notes) == 1 and f"({SMALL.n_images} elements" in notes[0]
    mib = SMALL.n_images * SMALL.image_px ** 2 * 3 / 2**20
    assert f"{mib:.1f} MiB" in notes[0]


def test_cache_of_data_that_never_ends_is_refused(user_workload):
    w = user_workload(lambda cfg_: toy_data(cfg_).repeat())
    with pytest.raises(ValueError) as info:
        tfdata.build_dataset(cfg(workload=USER, cache=True), w)
    assert "cache=True" in str(info.value) and "never ends" in str(info.value)
    ds, _ = tfdata.build_dataset(cfg(workload=USER), w)          # without a cache it is fine
    assert next(iter(ds))[0].shape == (16, 4)


def test_memory_source_ignores_the_cache(user_workload):
    w = user_workload(toy_data)
    ds, notes = tfdata.build_dataset(cfg(workload=USER, data_source="memory", cache=True, batch_size=8), w)
    assert not any(n.startswith("cache") for n in notes)
    assert len(list(ds.take(10))) == 10


# -- the stderr helper ---------------------------------------------------------------------------------
def test_native_stderr_is_held_back_and_replayed_on_failure(capfd):
    from tfwb.tf.runner.quiet import native_stderr_captured

    with native_stderr_captured() as held:
        os.write(2, b"native noise\nkeep me\n")
    assert capfd.readouterr().err == ""
    assert held.text == "native noise\nkeep me\n"
    held.replay(drop=lambda line: "noise" in line)
    assert capfd.readouterr().err == "keep me\n"
    with pytest.raises(RuntimeError):
        with native_stderr_captured():
            os.write(2, b"why it failed\n")
            raise RuntimeError("boom")
    assert "why it failed" in capfd.readouterr().err
