"""The built-in ``cifar10`` workload: a small CNN on CIFAR-10, or on generated images when offline.

The data come through ``keras.datasets.cifar10``, which downloads the archive once
(about 170 MB) and keeps it extracted in Keras's cache
(``$KERAS_HOME/datasets/cifar-10-batches-py-target/cifar-10-batches-py/``, by default
under ``~/.keras``): ``data_batch_1`` .. ``data_batch_5`` and ``test_batch``, each a
pickled dict with ``b"data"`` (uint8 rows of 3072 values, channels first) and
``b"labels"``. This module reads that folder directly when it is there (no network,
no hash check of an archive that may have been deleted), and asks
``keras.datasets.cifar10.load_data()`` to download it otherwise.

Offline (no route to the CIFAR host, ``TFWB_OFFLINE=1``, or an unreadable cache) it
falls back to tfwb's generated images (``tfwb.tf.workloads.image_files.render_image``) at CIFAR's
shape, 32x32x3 in 10 classes, made in memory from the seed, and says so: a warning
when the process first loads them, and a note on every run. The speed lessons hold
on either; the accuracy is CIFAR-10's only on CIFAR-10.

The images live in memory; ``data_source="files"`` is tf.data over them (the
augmentation, a random crop and flip, runs per element, in parallel with
``parallel_map``, or per batch with ``vectorized_map``), ``"memory"`` stages
augmented batches. The pickles are read with an unpickler that only rebuilds NumPy
arrays, so a tampered cache file cannot run code.
"""
from __future__ import annotations

import os
import pickle
import socket
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import keras
import numpy as np
import tensorflow as tf

from tfwb.config import RunConfig
from tfwb.tf.workloads import image_files
from tfwb.tf.runner.pipeline import DEFAULT_TUNING, PipelineSettings, Source
from tfwb.tf.workloads import spec_for
from tfwb.tf.workloads.images import augment_fn, cnn

#: keras.datasets.cifar10's folder in Keras's cache, and the folder the archive holds.
KERAS_DIRNAME = "cifar-10-batches-py-target"
INNER_DIRNAME = "cifar-10-batches-py"
TRAIN_BATCHES = tuple(f"data_batch_{i}" for i in range(1, 6))
TEST_BATCH = "test_batch"
#: Where keras.datasets.cifar10 downloads from (probed before a download is attempted).
HOST = "www.cs.toronto.edu"
IMAGE_PX = 32
N_CLASSES = 10
PROBE_TIMEOUT_S = 3.0
#: Set to 1 to never try the network (tests, air-gapped machines).
OFFLINE_ENV = "TFWB_OFFLINE"
#: NumPy's array reconstruction: the only globals a CIFAR pickle needs.
_ALLOWED_GLOBALS = frozenset({
    ("numpy", "ndarray"), ("numpy", "dtype"),
    ("numpy.core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "_reconstruct"),
    ("numpy.core.multiarray", "scalar"), ("numpy._core.multiarray", "scalar"),
})


@dataclass(frozen=True)
class CifarSpec:
    """One size: how many training images, and the CNN's base width."""

    n_train: int
    width: int


SPECS = {
    "small": CifarSpec(n_train=1024, width=16),
    "full": CifarSpec(n_train=50000, width=32),
}


@dataclass(frozen=True)
class CifarData:
    """Training images in memory and where they came from.

    Attributes:
        x: uint8 ``(n, 32, 32, 3)``, channels last.
        y: int32 ``(n,)`` labels 0-9.
        origin: ``"cifar10"`` (the real data) or ``"generated"`` (the offline fallback).
        note: one sentence for the run's notes: what was loaded from where, or why not.
    """

    x: np.ndarray
    y: np.ndarray
    origin: str
    note: str


# -- reading Keras's cache ---------------------------------------------------------------------------
class _ArraysOnly(pickle.Unpickler):
    """Unpickles NumPy arrays and plain containers; refuses every other global."""

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in _ALLOWED_GLOBALS:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"refusing {module}.{name}: a CIFAR batch holds only arrays")


def keras_cache_dirs() -> List[Path]:
    """The ``datasets`` folders Keras uses: ``$KERAS_HOME`` (default ``~/.keras``), then ``/tmp/.keras``
    (where Keras goes when its home is not writable)."""
    home = Path(os.path.expanduser(os.environ.get("KERAS_HOME") or os.path.join("~", ".keras")))
    out = [home / "datasets"]
    tmp = Path("/tmp/.keras/datasets")
    if tmp not in out:
        out.append(tmp)
    return out


def batches_folder(cache_dirs: Optional[Sequence[os.PathLike]] = None) -> Optional[Path]:
    """The extracted ``cifar-10-batches-py`` folder in Keras's cache, or ``None`` when absent.

    Args:
        cache_dirs: ``datasets`` folders to look in; default ``keras_cache_dirs()``.
    """
    for d in (keras_cache_dirs() if cache_dirs is None else [Path(c) for c in cache_dirs]):
        folder = Path(d) / KERAS_DIRNAME / INNER_DIRNAME
        if (folder / TRAIN_BATCHES[0]).is_file():
            return folder
    return None


def read_batch(path: os.PathLike) -> Tuple[np.ndarray, np.ndarray]:
    """One CIFAR-10 batch file: uint8 images ``(n, 32, 32, 3)`` and int32 labels ``(n,)``.

    Raises:
        ValueError: naming the file, when it is not a CIFAR batch (cut short, a foreign
            pickle, wrong sizes).
    """
    try:
        with open(path, "rb") as fh:
            d = _ArraysOnly(fh, encoding="bytes").load()
        d = {(k.decode("utf8") if isinstance(k, bytes) else k): v for k, v in d.items()}
        data = np.asarray(d["data"], dtype=np.uint8)
        labels = np.asarray(d["labels"], dtype=np.int32)
        x = data.reshape(data.shape[0], 3, IMAGE_PX, IMAGE_PX).transpose(0, 2, 3, 1)
    except (OSError, EOFError, pickle.UnpicklingError, KeyError, ValueError, AttributeError, TypeError) as e:
        raise ValueError(f"{os.fspath(path)} is not a CIFAR-10 batch ({type(e).__name__}: {e}); delete "
                         f"{Path(path).parent} to download it again") from None
    if len(labels) != len(x) or (len(labels) and not (0 <= labels.min() and labels.max() < N_CLASSES)):
        raise ValueError(f"{os.fspath(path)} is not a CIFAR-10 batch: {len(x)} images, {len(labels)} "
                         "labels, or labels outside 0-9")
    return np.ascontiguousarray(x), labels


def read_train(folder: os.PathLike, n: Optional[int] = None) -> Tuple[np.ndarray, np.ndarray]:
    """The first ``n`` training images (all when ``None``), reading batch files in order."""
    xs, ys, have = [], [], 0
    for name in TRAIN_BATCHES:
        path = Path(folder) / name
        if not path.is_file():
            break
        x, y = read_batch(path)
        xs.append(x)
        ys.append(y)
        have += len(y)
        if n is not None and have >= n:
            break
    if not xs:
        raise ValueError(f"no CIFAR-10 training batch in {os.fspath(folder)}")
    x, y = np.concatenate(xs), np.concatenate(ys)
    return (x, y) if n is None else (x[:n], y[:n])


# -- downloading, or not ---------------------------------------------------------------------------------
def reachable(host: str = HOST, timeout_s: float = PROBE_TIMEOUT_S) -> Tuple[bool, str]:
    """``(True, "")`` when a TCP connection to ``host:443`` opens, else ``(False, why)``."""
    if os.environ.get(OFFLINE_ENV, "") == "1":
        return False, f"{OFFLINE_ENV}=1"
    try:
        with socket.create_connection((host, 443), timeout=timeout_s):
            return True, ""
    except OSError as e:
        return False, f"{host} is not reachable: {type(e).__name__}: {e}"


def keras_download() -> Tuple[np.ndarray, np.ndarray]:
    """``keras.datasets.cifar10.load_data()``'s training part (downloads into Keras's cache)."""
    (x, y), _ = keras.datasets.cifar10.load_data()
    return np.asarray(x, dtype=np.uint8), np.asarray(y, dtype=np.int32).reshape(-1)


def generated(n: int, seed: int) -> Tuple[np.ndarray, np.ndarray]:
    """``n`` of tfwb's generated images at CIFAR's shape (32x32x3, 10 classes), in memory."""
    spec = image_files.ImageSpec(n_images=n, image_px=IMAGE_PX, n_shards=1, n_classes=N_CLASSES,
                                 default_latency_ms=0.0)
    rng = np.random.default_rng(seed)
    y = rng.permutation(np.arange(n) % N_CLASSES).astype(np.int32)
    x = np.stack([image_files.render_image(rng, int(label), spec) for label in y])
    return x, y


def load(n: Optional[int] = None, seed: int = 0, *, cache_dirs: Optional[Sequence[os.PathLike]] = None,
         download: Optional[Callable[[], Tuple[np.ndarray, np.ndarray]]] = None,
         probe: Callable[[], Tuple[bool, str]] = reachable) -> CifarData:
    """CIFAR-10's first ``n`` training images: from Keras's cache, downloaded, or generated offline.

    Args:
        n: images to keep (all 50,000 when ``None``).
        seed: seeds the generated images of the fallback.
        cache_dirs: Keras ``datasets`` folders to look in (default ``keras_cache_dirs()``).
        download: fetches ``(x, y)`` when the cache has no copy; default
            ``keras.datasets.cifar10.load_data`` (which caches what it downloads).
        probe: ``() -> (reachable, why not)``, asked before downloading, so an offline
            machine falls back at once instead of waiting on a timeout.

    Returns:
        A ``CifarData``; ``origin`` says which, ``note`` says it in a sentence.
    """
    problem = ""
    folder = batches_folder(cache_dirs)
    if folder is not None:
        try:
            x, y = read_train(folder, n)
            return CifarData(x, y, "cifar10", f"cifar10: {len(y)} CIFAR-10 training images from Keras's "
                                              f"cache ({folder})")
        except ValueError as e:
            problem = f"the copy in Keras's cache could not be read ({e})"
    else:
        ok, why = probe()
        where = ", ".join(str(d) for d in (keras_cache_dirs() if cache_dirs is None else cache_dirs))
        if ok:
            try:
                x, y = (download or keras_download)()
                x, y = (x, y) if n is None else (x[:n], y[:n])
                return CifarData(x, y, "cifar10", f"cifar10: {len(y)} CIFAR-10 training images, downloaded "
                                                  "by keras.datasets.cifar10 into Keras's cache")
            except Exception as e:  # noqa: BLE001 - any failure to fetch means: train on the fallback
                problem = (f"CIFAR-10 is not in Keras's cache ({where}) and the download failed "
                           f"({type(e).__name__}: {e})")
        else:
            problem = f"CIFAR-10 is not in Keras's cache ({where}) and this machine is offline ({why})"
    count = 50000 if n is None else n
    x, y = generated(count, seed)
    note = (f"cifar10: {problem}; training on {count} generated {IMAGE_PX}x{IMAGE_PX} images of {N_CLASSES} "
            "classes instead (the same shapes: the speed lessons hold, the accuracy is not CIFAR-10's)")
    return CifarData(x, y, "generated", note)


_LOADED: Dict[tuple, CifarData] = {}


def data_for(cfg: RunConfig) -> CifarData:
    """The images for ``cfg``'s size, loaded once per process (and per Keras cache folder)."""
    spec = spec_for(SPECS, cfg.resolved_size)
    key = (spec.n_train, cfg.seed, tuple(str(d) for d in keras_cache_dirs()), os.environ.get(OFFLINE_ENV, ""))
    if key not in _LOADED:
        d = load(spec.n_train, cfg.seed)
        if d.origin != "cifar10":       # also where a run's notes are not kept (data_source="memory")
            warnings.warn(d.note, stacklevel=2)
        _LOADED[key] = d
    return _LOADED[key]


# -- the workload ------------------------------------------------------------------------------------------
def source(cfg: RunConfig, tuning: PipelineSettings = DEFAULT_TUNING) -> Source:
    """The training images as unbatched elements, with the crop-and-flip augmentation and the origin note."""
    d = data_for(cfg)
    ds = tf.data.Dataset.from_tensor_slices((d.x, d.y))
    if tuning.shard is not None:
        ds = ds.shard(*tuning.shard)
    return Source(ds, augment=augment_fn(IMAGE_PX), key=f"cifar10-{d.origin}-{cfg.resolved_size}-{cfg.seed}",
                  notes=(d.note,))


def data(cfg: RunConfig) -> tf.data.Dataset:
    """Unbatched ``(image, label)`` elements (not augmented)."""
    return source(cfg).dataset


def model(cfg: RunConfig) -> keras.Model:
    """A small CNN for 32x32x3 images (three blocks of two 3x3 convolutions), float32 logits.

    Called after the dtype policy is set and inside the strategy scope.
    """
    width = spec_for(SPECS, cfg.resolved_size).width
    return cnn(IMAGE_PX, width, N_CLASSES, f"cifar10_cnn_{cfg.resolved_size}")
