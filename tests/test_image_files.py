"""The generated image files (tfwb/tf/workloads/image_files.py) when part of them vanishes between runs.

Chapter 01's scenario, as a test: a run succeeds, one shard folder is deleted, the next run
fails with a message that says what is missing and what to do, the earlier result stays as
it was, and a folder that vanished as a whole is simply generated again (the data is
deterministic).
"""
from __future__ import annotations

import os
import shutil

import pytest

from tfwb.config import RunConfig

pytestmark = pytest.mark.tf

QUICK = RunConfig(size="small", storage_latency_ms=0, batch_size=16, steps=5, warmup_steps=1,
                  sample_interval_s=0.05)


@pytest.fixture
def data_dir(tmp_path, monkeypatch):
    root = tmp_path / "tfwb-data"                       # a scratch data folder: the book's own stays intact
    monkeypatch.setenv("TFWB_DATA_DIR", str(root))
    return root


def test_a_shard_folder_deleted_between_runs_fails_the_next_run_with_advice(data_dir):
    import tfwb
    from tfwb.tf.workloads import image_files

    ok_run = tfwb.run(QUICK)
    assert ok_run.ok, ok_run.error
    snapshot = ok_run.to_json()
    files = image_files.ensure_images("small", QUICK.seed)
    shard = files.shard_paths[3]
    shutil.rmtree(os.path.dirname(shard[0]))            # part of the data vanishes between runs

    broken = tfwb.run(QUICK)
    assert broken.status == "failed" and not broken.step_times_s
    assert broken.error == (
        f"FileNotFoundError: {len(shard)} of the {len(files.paths)} image files under {files.root} "
        f"disappeared (first missing: {shard[0]}); delete {files.root} (or set TFWB_DATA_DIR to a "
        "folder that stays) and run again to regenerate them")
    assert ok_run.to_json() == snapshot and len(ok_run.step_times_s) == QUICK.steps   # the first run untouched

    shutil.rmtree(files.root)                           # the whole folder vanishes: generated again
    again = tfwb.run(QUICK)
    assert again.ok, again.error
    assert image_files.ensure_images("small", QUICK.seed).labels == files.labels
