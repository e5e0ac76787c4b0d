"""Shared test setup: small mode, a private data folder, thread-leak guard, the shared fakes.

The shared test fakes (fake runner, result builders, tiny workloads) are ``tests/fakes.py``:
this folder goes on ``sys.path`` so every test module can ``from fakes import ...`` under
``--import-mode=importlib`` too. (nbval's settings for the chapters live in
notebooks/conftest.py.)
"""
import os
import sys
import threading

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

# Kernels and subprocesses the tests start inherit this environment.
os.environ.setdefault("TFWB_FAST", "1")
os.environ.setdefault("MPLBACKEND", "Agg")
os.environ.setdefault("TFWB_DATA_DIR", os.path.join(HERE, "..", ".pytest_cache", "tfwb-data"))


def pytest_configure(config):
    """``TFWB_TEST_CPU=<name>``: a described machine's CPU stands in for the host's all session.

    ``tfwb.hardware.detect()`` reads the variable itself (so processes the tests start believe
    it too): here a wrong name stops the run before any test, naming the allowed ones.
    tests/cpu_kinds.py runs the CPU-dependent test files under every kind.
    """
    from tfwb import hardware

    name = os.environ.get(hardware.TEST_CPU_ENV)
    if name:
        try:
            hardware.with_cpu_of({}, name)
        except ValueError as e:
            raise pytest.UsageError(str(e)) from None


def pytest_report_header(config):
    from tfwb import hardware

    name = os.environ.get(hardware.TEST_CPU_ENV)
    if name:
        return (f"{hardware.TEST_CPU_ENV}={name}: tfwb believes the CPU is {hardware.DESCRIBED[name].cpu_model} "
                f"({' '.join(hardware.DESCRIBED[name].cpu_flags)}); TensorFlow runs on the real one")
    return None


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


@pytest.fixture(autouse=True)
def no_leaked_auto_size():
    """``size="auto"`` is resolved once per process (``tfwb.choose_size()``, ``tfwb.chapter()``):
    a test that chooses a size must not decide it for the tests after it in the same worker."""
    from tfwb import config

    yield
    config.set_auto_size(None)
