"""Shared test setup: small mode, a private data folder, nbval timeouts, thread-leak guard."""
import os
import threading

import pytest

# The notebook kernels nbval starts inherit this environment.
os.environ.setdefault("TFWB_FAST", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("MPLBACKEND", "Agg")
os.environ.setdefault("TFWB_DATA_DIR", os.path.join(os.path.dirname(__file__), "..", ".pytest_cache", "tfwb-data"))


def pytest_collectstart(collector):
    # nbval: never compare rich reprs or stderr (TF and Keras log there).
    if collector.fspath and str(collector.fspath).endswith(".ipynb"):
        collector.skip_compare += ("text/html", "stderr", "application/javascript")


def pytest_collection_modifyitems(items):
    for item in items:
        if hasattr(item, "output_timeout"):   # nbval's hard-coded 5 s after each reply
            item.output_timeout = 120


@pytest.fixture(autouse=True)
def no_leaked_sampler_threads():
    """Every test: the sampler thread never outlives the code that started it."""
    yield
    leaked = [t for t in threading.enumerate() if t.name == "tfwb-sampler" and t.is_alive()]
    assert not leaked, f"leaked sampler threads: {leaked}"
