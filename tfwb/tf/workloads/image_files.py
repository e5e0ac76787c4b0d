"""The built-in ``images`` data set: labelled images generated offline, stored as PNG files.

Generation is deterministic (a seed and a size give the same bytes) and happens
once per machine; the files live under ``TFWB_DATA_DIR`` (default
``~/.cache/tfwb``), one folder per shard, with a ``manifest.json`` written last
so a half-written set is never used. The folder name carries the layout (image
size, count, shards), so changing a spec never reuses files of another layout. Labels are learnable: each class has its own
colour and stripe orientation, under noise and a random position. No TensorFlow
here: generation uses NumPy and Pillow.
"""
from __future__ import annotations

import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import List, Tuple

import numpy as np

FORMAT_VERSION = 1


@dataclass(frozen=True)
class ImageSpec:
    """Size of one version of the data set.

    ``default_latency_ms`` is the per-file read delay used when a RunConfig leaves
    ``storage_latency_ms`` as None: it models network storage (a bucket), where
    every object read waits for a round trip before the first byte arrives. It is
    chosen so that, on 2 CPU cores, the naive pipeline (a Python generator, one
    file after another) spends most of each step waiting for input, while
    ``interleave`` (``n_shards`` reads in flight) still outpaces the model's step.
    ``benchmarks/pipeline.py`` measures both at the full size.
    """

    n_images: int
    image_px: int
    n_shards: int
    n_classes: int
    default_latency_ms: float


SPECS = {
    "small": ImageSpec(n_images=256, image_px=32, n_shards=16, n_classes=10, default_latency_ms=3.0),
    "full": ImageSpec(n_images=2048, image_px=64, n_shards=16, n_classes=10, default_latency_ms=25.0),
}


@dataclass(frozen=True)
class ImageFiles:
    """What is on disk: paths per shard, labels per shard, and the spec."""

    root: Path
    spec: ImageSpec
    shard_paths: Tuple[Tuple[str, ...], ...]
    shard_labels: Tuple[Tuple[int, ...], ...]

    @property
    def paths(self) -> List[str]:
        return [p for shard in self.shard_paths for p in shard]

    @property
    def labels(self) -> List[int]:
        return [y for shard in self.shard_labels for y in shard]


def data_root() -> Path:
    """Where generated data lives: ``$TFWB_DATA_DIR`` or ``~/.cache/tfwb``."""
    return Path(os.environ.get("TFWB_DATA_DIR") or Path.home() / ".cache" / "tfwb")


def _class_colours(n_classes: int) -> np.ndarray:
    hues = np.arange(n_classes) / n_classes
    # A simple HSV->RGB at full saturation and value.
    k = (np.array([5, 3, 1])[None, :] + hues[:, None] * 6) % 6
    rgb = 1 - np.clip(np.minimum(k, 4 - k), 0, 1)
    return (60 + 180 * rgb).astype(np.float32)


def render_image(rng: np.random.Generator, label: int, spec: ImageSpec) -> np.ndarray:
    """One ``(px, px, 3)`` uint8 image of class ``label``: a coloured striped square on noise."""
    px = spec.image_px
    img = rng.normal(110, 35, size=(px, px, 3)).astype(np.float32)
    side = int(rng.integers(px // 3, px // 2 + 1))
    y0, x0 = (int(v) for v in rng.integers(0, px - side, size=2))
    yy, xx = np.mgrid[0:side, 0:side]
    angle = np.pi * (label % 5) / 5
    stripes = (np.sin((xx * np.cos(angle) + yy * np.sin(angle)) * 1.2) > 0)[..., None]
    colour = _class_colours(spec.n_classes)[label]
    patch = np.where(stripes, colour, colour * 0.4) + rng.normal(0, 12, size=(side, side, 3))
    img[y0:y0 + side, x0:x0 + side] = patch
    return np.clip(img, 0, 255).astype(np.uint8)


def dataset_dir(size: str, seed: int) -> Path:
    """The folder of one generated set: named by size, layout, seed and format."""
    spec = SPECS[size]
    layout = f"{spec.n_images}x{spec.image_px}px-{spec.n_shards}shards"
    return data_root() / f"images-{size}-{layout}-seed{seed}-v{FORMAT_VERSION}"


def ensure_images(size: str, seed: int = 0) -> ImageFiles:
    """The image files for ``size`` and ``seed``, generated on first use.

    Raises:
        ValueError: if ``size`` is unknown.
        OSError: if the data directory cannot be written (message names it and
            says to set ``TFWB_DATA_DIR``).
    """
    if size not in SPECS:
        raise ValueError(f"size={size!r} is not allowed; one of {sorted(SPECS)}")
    spec = SPECS[size]
    root = dataset_dir(size, seed)
    manifest = root / "manifest.json"
    if not manifest.exists():
        if root.exists():   # a folder without its manifest: partly deleted; start over
            shutil.rmtree(root, ignore_errors=True)
        _generate(root, spec, seed)
    data = json.loads(manifest.read_text())
    shard_paths = tuple(tuple(str(root / p) for p in shard) for shard in data["shards"])
    shard_labels = tuple(tuple(int(y) for y in shard) for shard in data["labels"])
    return ImageFiles(root=root, spec=spec, shard_paths=shard_paths, shard_labels=shard_labels)


def check_files(files: ImageFiles) -> None:
    """Raise ``FileNotFoundError`` with advice if any image file vanished from disk.

    A whole folder that vanished is regenerated by ``ensure_images`` (its manifest
    is gone too); this catches a set that lost some files, which would otherwise
    fail mid-run.
    """
    missing = [p for p in files.paths if not os.path.exists(p)]
    if missing:
        raise FileNotFoundError(
            f"{len(missing)} of the {len(files.paths)} image files under {files.root} disappeared "
            f"(first missing: {missing[0]}); delete {files.root} (or set TFWB_DATA_DIR to a folder "
            "that stays) and run again to regenerate them")


def _generate(root: Path, spec: ImageSpec, seed: int) -> None:
    from PIL import Image

    try:
        root.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=root.name + ".tmp-", dir=root.parent))
    except OSError as e:
        raise OSError(f"cannot write generated images under {root.parent} ({e}); "
                      "set TFWB_DATA_DIR to a writable folder") from None
    rng = np.random.default_rng(seed)
    labels = rng.permutation(np.arange(spec.n_images) % spec.n_classes)
    per_shard = spec.n_images // spec.n_shards
    shards, shard_labels = [], []
    for s in range(spec.n_shards):
        (tmp / f"shard-{s:02d}").mkdir()
        names, ys = [], []
        for j in range(per_shard):
            i = s * per_shard + j
            label = int(labels[i])
            name = f"shard-{s:02d}/{i:05d}.png"
            Image.fromarray(render_image(rng, label, spec)).save(tmp / name, compress_level=1)
            names.append(name)
            ys.append(label)
        shards.append(names)
        shard_labels.append(ys)
    (tmp / "manifest.json").write_text(json.dumps({
        "format": FORMAT_VERSION, "seed": seed, "spec": spec.__dict__,
        "shards": shards, "labels": shard_labels}))
    try:
        tmp.rename(root)
    except OSError:  # another process finished first: keep theirs
        shutil.rmtree(tmp, ignore_errors=True)
