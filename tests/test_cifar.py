"""The cifar10 workload: CIFAR-10 read from Keras's cache in keras.datasets' own on-disk format (a
small copy this test writes), never the network here; offline it falls back to generated images
and says so; a tampered cache file cannot run code."""
import os
import pickle

import numpy as np
import pytest

import tfwb
from tfwb import RunConfig
from tfwb.tf.workloads import cifar
from tfwb.workloads import get_workload

PER_BATCH = 8


def pixels(i, label):
    """Image ``i`` channels-first, as CIFAR stores it: red = i, green = 10 * label, blue = 200."""
    img = np.empty((3, 32, 32), np.uint8)
    img[0], img[1], img[2] = i, 10 * label, 200
    img[0, 0, 1] = 7                       # one marked pixel: row 0, column 1 of the red plane
    return img


def make_local_copy(keras_home, per_batch=PER_BATCH):
    """``keras_home/datasets/cifar-10-batches-py-target/cifar-10-batches-py/``: 5 train batches + a test batch,
    each a pickled dict with bytes keys, as in the archive keras.datasets.cifar10 extracts. (The archive's
    pickles are Python 2's protocol 2; Python 3 writes bytes under protocol 2 through ``_codecs.encode``,
    which Keras's own reader refuses, so the copy uses protocol 3, whose bytes load the same way.)"""
    folder = keras_home / "datasets" / cifar.KERAS_DIRNAME / cifar.INNER_DIRNAME
    folder.mkdir(parents=True)
    i = 0
    for name in cifar.TRAIN_BATCHES + (cifar.TEST_BATCH,):
        labels = [(i + j) % 10 for j in range(per_batch)]
        data = np.stack([pixels(i + j, labels[j]).reshape(-1) for j in range(per_batch)])
        batch = {b"batch_label": name.encode(), b"labels": labels, b"data": data,
                 b"filenames": [f"img{i + j}.png".encode() for j in range(per_batch)]}
        with open(folder / name, "wb") as fh:
            pickle.dump(batch, fh, protocol=3)
        i += per_batch
    return folder


def no_network():
    pytest.fail("the network was asked")


def test_the_local_copy_is_read_without_network_channels_last(tmp_path):
    make_local_copy(tmp_path)
    d = cifar.load(20, cache_dirs=[tmp_path / "datasets"], probe=no_network, download=no_network)
    assert d.origin == "cifar10" and "20 CIFAR-10 training images from Keras's cache" in d.note
    assert d.x.shape == (20, 32, 32, 3) and d.x.dtype == np.uint8 and d.y.dtype == np.int32
    assert list(d.y) == [j % 10 for j in range(20)]
    assert (d.x[13, 5, 5] == [13, 10 * 3, 200]).all()                 # image 13 (label 3), channels last
    assert d.x[13, 0, 1, 0] == 7 and d.x[13, 1, 0, 0] == 13          # row/column order kept
    every = cifar.load(None, cache_dirs=[tmp_path / "datasets"], probe=no_network)
    assert len(every.y) == 5 * PER_BATCH                              # the test batch is not training data


def test_our_reader_agrees_with_keras_own_reader(tmp_path):
    load_batch = pytest.importorskip("keras.src.datasets.cifar").load_batch
    folder = make_local_copy(tmp_path)
    x, y = cifar.read_batch(folder / "data_batch_2")
    kx, ky = load_batch(str(folder / "data_batch_2"))
    assert (x == np.asarray(kx).transpose(0, 2, 3, 1)).all() and list(y) == list(ky)


def test_offline_falls_back_to_generated_images_and_says_so(tmp_path):
    d = cifar.load(30, seed=1, cache_dirs=[tmp_path], probe=lambda: (False, "no route to host"),
                   download=no_network)
    assert d.origin == "generated" and d.x.shape == (30, 32, 32, 3) and set(d.y) == set(range(10))
    assert "offline (no route to host)" in d.note and "generated 32x32 images" in d.note
    assert str(tmp_path) in d.note
    again = cifar.load(30, seed=1, cache_dirs=[tmp_path], probe=lambda: (False, "x"))
    assert (again.x == d.x).all()                                    # generated from the seed


def test_a_failed_download_falls_back_and_a_good_one_is_used(tmp_path):
    def broken():
        raise OSError("URL fetch failure on https://www.cs.toronto.edu/...: None -- timed out")

    d = cifar.load(12, cache_dirs=[tmp_path], probe=lambda: (True, ""), download=broken)
    assert d.origin == "generated" and "the download failed (OSError: URL fetch failure" in d.note
    x = np.zeros((50, 32, 32, 3), np.uint8)
    ok = cifar.load(12, cache_dirs=[tmp_path], probe=lambda: (True, ""),
                    download=lambda: (x, np.arange(50) % 10))
    assert ok.origin == "cifar10" and ok.x.shape == (12, 32, 32, 3) and "downloaded" in ok.note


def test_offline_env_skips_the_probe(monkeypatch):
    monkeypatch.setenv(cifar.OFFLINE_ENV, "1")
    assert cifar.reachable() == (False, "TFWB_OFFLINE=1")


class _Gadget:
    def __reduce__(self):
        return (os.getcwd, ())         # harmless if it ran; it must not even be looked up


def test_a_tampered_cache_file_is_refused_and_training_falls_back(tmp_path):
    folder = make_local_copy(tmp_path)
    with open(folder / "data_batch_1", "wb") as fh:
        pickle.dump({b"data": _Gadget(), b"labels": [0]}, fh, protocol=3)
    with pytest.raises(ValueError, match=r"data_batch_1 is not a CIFAR-10 batch .*refusing (posix|nt).getcwd"):
        cifar.read_batch(folder / "data_batch_1")
    d = cifar.load(8, cache_dirs=[tmp_path / "datasets"], probe=no_network)
    assert d.origin == "generated" and "could not be read" in d.note and "delete" in d.note


def test_the_workload_honours_the_augmentation_knobs_only():
    w = get_workload("cifar10")
    assert w.builtin and set(w.data_sources) == {"files", "memory"}
    assert w.applies("parallel_map") and w.applies("vectorized_map")
    assert not w.applies("interleave") and not w.applies("storage_latency_ms")


def test_a_run_trains_on_the_local_copy_and_notes_where_it_came_from(tmp_path, monkeypatch):
    make_local_copy(tmp_path)
    monkeypatch.setenv("KERAS_HOME", str(tmp_path))
    monkeypatch.setenv(cifar.OFFLINE_ENV, "1")
    r = tfwb.run(RunConfig(workload="cifar10", size="small", steps=2, warmup_steps=1, batch_size=8,
                           parallel_map=True))
    assert r.ok, r.error
    assert any(f"{5 * PER_BATCH} CIFAR-10 training images from Keras's cache" in n for n in r.notes), r.notes


def test_a_run_offline_trains_on_generated_images_with_a_message(tmp_path, monkeypatch):
    monkeypatch.setenv("KERAS_HOME", str(tmp_path / "empty"))
    monkeypatch.setenv(cifar.OFFLINE_ENV, "1")
    with pytest.warns(UserWarning, match=r"offline \(TFWB_OFFLINE=1\)"):    # said even where notes are not kept
        r = tfwb.run(RunConfig(workload="cifar10", size="small", steps=2, warmup_steps=1, batch_size=8))
    assert r.ok, r.error
    note = next(n for n in r.notes if n.startswith("cifar10:"))
    assert "offline (TFWB_OFFLINE=1)" in note and "generated 32x32 images" in note
