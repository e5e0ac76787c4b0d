"""Shared test setup: small mode, a private data folder, thread-leak guard.

(nbval's settings for the chapters live in notebooks/conftest.py.)
"""
import os
import threading

import pytest

# Kernels and subprocesses the tests start inherit this environment.
os.environ.setdefault("TFWB_FAST", "1")
os.environ.setdefault("MPLBACKEND", "Agg")
os.environ.setdefault("TFWB_DATA_DIR", os.path.join(os.path.dirname(__file__), "..", ".pytest_cache", "tfwb-data"))


def pytest_sessionstart(session):
    """Split the CPU into 2 logical devices before any test starts TF's runtime.

    The explicit setup every chapter does in its first cell (``tfwb.setup_devices()``),
    done once for the whole test process so ``strategy="mirrored"`` tests get 2 replicas.
    Skipped where TensorFlow is not installed (the pure tests run without it).
    """
    try:
        import tfwb.tf  # noqa: F401  (TensorFlow, imported without its start-up log lines)
    except ImportError:
        return
    import tfwb

    tfwb.setup_devices()


@pytest.fixture(autouse=True)
def no_leaked_sampler_threads():
    """Every test: the sampler thread never outlives the code that started it."""
    yield
    leaked = [t for t in threading.enumerate() if t.name == "tfwb-sampler" and t.is_alive()]
    assert not leaked, f"leaked sampler threads: {leaked}"
