"""Doctest collection for the package (``pytest --doctest-modules tfwb``; tests/run_all.py runs it).

Every module's ``>>>`` examples run, except where what they need is not installed:
``tfwb/tf/`` is left out without TensorFlow and ``tfwb/ui/`` without ipywidgets or
matplotlib (importing those modules would fail before any example ran). Examples that
really train or draw on a device carry ``# doctest: +SKIP`` in their module.

This file is pytest's, not the library's: nothing in tfwb imports it.
"""
from __future__ import annotations

import importlib.util
from dataclasses import replace
from pathlib import Path

import pytest

from tfwb.config import RunConfig
from tfwb.records import RunResult, Sample

HERE = Path(__file__).resolve().parent

#: Sub-packages and what each needs installed before its modules can be imported.
NEEDS = {
    HERE / "tf": ("tensorflow", "keras"),
    HERE / "ui": ("ipywidgets", "matplotlib"),
}


def missing(packages: tuple) -> list:
    """The packages of ``packages`` that cannot be imported here (looked up, not imported).

    Example:
        >>> missing(("json", "no_such_package_tfwb"))
        ['no_such_package_tfwb']
    """
    return [p for p in packages if importlib.util.find_spec(p) is None]


def pytest_ignore_collect(collection_path: Path, config) -> bool | None:
    """Skip ``tfwb/_moved``, and ``tfwb/tf`` or ``tfwb/ui`` when what they import is not installed."""
    path = Path(collection_path).resolve()
    if path == HERE / "_moved" or HERE / "_moved" in path.parents:
        return True           # the stubs of moved names (tfwb.renamed): importing one warns and swaps itself
    for folder, packages in NEEDS.items():
        if (path == folder or folder in path.parents) and missing(packages):
            return True
    return None


def example_result() -> RunResult:
    """A finished ten-step run (no TensorFlow): what ``result`` means in the examples.

    Example:
        >>> r = example_result()
        >>> r.ok, len(r.step_times_s), r.config.batch_size
        (True, 10, 64)
    """
    times = tuple(0.1 + 0.002 * ((i % 5) - 2) for i in range(10))
    starts = tuple(0.5 + 0.12 * i for i in range(10))
    samples = tuple(Sample(t_s=0.2 * i, cpu_process_pct=150.0, cpu_system_pct=60.0, rss_mib=900.0)
                    for i in range(10))
    return RunResult(config=RunConfig(steps=10, warmup_steps=2), step_times_s=times, input_wait_s=(0.03,) * 10,
                     warmup_times_s=(1.5, 0.12), warmup_start_s=(0.0, 0.3), step_start_s=starts,
                     losses=tuple(2.0 - 0.1 * i for i in range(10)), samples=samples, examples_per_step=64,
                     fingerprint={"cpu_count": 2, "gpus": []})


@pytest.fixture(autouse=True)
def _example_names(doctest_namespace):
    """``result`` (one finished run) and ``results`` (it and a faster, prefetching one) for examples."""
    result = example_result()
    faster = replace(result, config=result.config.replace(prefetch=True),
                     step_times_s=tuple(t / 2 for t in result.step_times_s))
    doctest_namespace.update(result=result, results=[result, faster])
