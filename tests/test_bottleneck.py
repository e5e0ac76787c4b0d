"""Tests of tfwb.bottleneck: the TF profiler's input-wait thresholds and the limit of a measured run.

Pure: results are built by hand; no TensorFlow.
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tfwb import bottleneck, diagnosis, expect
from tfwb.bottleneck import (COMPUTE, HIGH_INPUT_FRACTION, INPUT, INPUT_HIGH, INPUT_MODERATE, MODERATE_INPUT_FRACTION,
                         NOT_INPUT, OVERHEAD, check_limit, input_verdict, limit_of)
from tfwb.config import RunConfig
from tfwb.records import RunResult, Sample

PACKAGE = Path(bottleneck.__file__).resolve().parent


def run(step_s=0.1, wait_s=0.0, gpu_util=None, n=8, status="ok"):
    samples = tuple(Sample(t_s=i * 0.1, gpu_util_pct=(gpu_util,)) for i in range(n)) if gpu_util is not None else ()
    return RunResult(config=RunConfig(), status=status, step_times_s=(step_s,) * n,
                     input_wait_s=(wait_s,) * n, samples=samples)


def test_thresholds_are_the_profilers():
    assert (MODERATE_INPUT_FRACTION, HIGH_INPUT_FRACTION) == (0.05, 0.20)


@pytest.mark.parametrize("fraction, verdict", [
    (0.0, NOT_INPUT), (0.0499, NOT_INPUT), (0.05, INPUT_MODERATE), (0.1999, INPUT_MODERATE),
    (0.20, INPUT_HIGH), (1.0, INPUT_HIGH),
])
def test_input_verdict_edges(fraction, verdict):
    assert input_verdict(fraction) == verdict


@pytest.mark.parametrize("result, limit", [
    (run(wait_s=0.02), INPUT),                      # exactly 20 % of the step
    (run(wait_s=0.019), COMPUTE),
    (run(gpu_util=49.0), OVERHEAD),
    (run(gpu_util=50.0), COMPUTE),                  # the overhead line is strict
    (run(wait_s=0.05, gpu_util=10.0), INPUT),       # waiting on input explains an idle GPU
    (run(status="failed"), None),
    (None, None),
])
def test_limit_of(result, limit):
    assert limit_of(result) == limit


def test_check_limit_names_field_value_and_allowed():
    assert check_limit(None) is None and check_limit(OVERHEAD) == OVERHEAD
    with pytest.raises(ValueError, match=r"limit='memory' is not allowed; one of \('input', 'compute', 'overhead'\)"):
        check_limit("memory")


def test_the_02_names_of_the_limit_still_work_with_a_deprecation_warning():
    with pytest.warns(DeprecationWarning, match="bound_of is now tfwb.bottleneck.limit_of"):
        assert bottleneck.bound_of(run(wait_s=0.02)) == INPUT
    with pytest.warns(DeprecationWarning, match="check_bound is now tfwb.bottleneck.check_limit"):
        assert bottleneck.check_bound(OVERHEAD) == OVERHEAD
    assert bottleneck.BOUNDS is bottleneck.LIMITS


def test_expect_and_diagnosis_share_these_names():
    assert expect.limit_of is limit_of and expect.INPUT is INPUT
    assert diagnosis.input_verdict is input_verdict and diagnosis.HIGH_INPUT_FRACTION is HIGH_INPUT_FRACTION


def _tfwb_imports(path: Path) -> set:
    """Every tfwb module ``path`` imports, at module level or inside a function."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("tfwb"):
            out.add(node.module)
            out.update(f"{node.module}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.startswith("tfwb"))
    return out


@pytest.mark.parametrize("path", ["bottleneck.py", "diagnosis.py", "expect/__init__.py", "expect/checks.py",
                                  "advice/rules.py"])
def test_bounds_sits_below_expect_and_diagnosis_and_expect_never_imports_diagnosis(path):
    imported = _tfwb_imports(PACKAGE / path)
    if path == "bottleneck.py":
        assert imported == set()
    else:
        assert not any(m.startswith("tfwb.diagnosis") for m in imported), imported


@pytest.mark.parametrize("path", ["bottleneck.py", "diagnosis.py", "expect/__init__.py", "expect/checks.py",
                                  "advice/rules.py", "knobs.py", "config.py", "workloads.py"])
def test_no_function_local_imports(path):
    tree = ast.parse((PACKAGE / path).read_text(encoding="utf-8"))
    local = [node.lineno for fn in ast.walk(tree) if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef))
             for node in ast.walk(fn) if isinstance(node, (ast.Import, ast.ImportFrom))]
    assert local == [], f"{path}: function-local imports at lines {local}"


# -- the iterator's own floor (data_source="memory") -------------------------------------------------
def test_input_fraction_counts_only_the_wait_above_the_iterators_floor():
    assert bottleneck.input_fraction([1.0, 1.0], [0.3, 0.1]) == pytest.approx(0.2)
    assert bottleneck.input_fraction([1.0, 1.0], [0.3, 0.1], floor_s=0.1) == pytest.approx(0.1)
    assert bottleneck.input_fraction([1.0], [0.05], floor_s=0.1) == 0.0
    assert bottleneck.input_fraction([], []) is None and bottleneck.input_fraction([1.0], []) is None


def test_a_fast_gpu_step_on_staged_batches_does_not_read_input_bound():
    """0.5 ms steps whose 60 us next() is all floor: 12 % raw wait, nothing above the floor."""
    gpu = tuple(Sample(t_s=i * 0.1, gpu_util_pct=(95.0,)) for i in range(8))
    raw = RunResult(config=RunConfig(data_source="memory"), step_times_s=(0.5e-3,) * 8,
                    input_wait_s=(60e-6,) * 8, samples=gpu)
    assert raw.input_wait_fraction == pytest.approx(0.12)
    assert diagnosis.diagnose(raw).verdict == INPUT_MODERATE        # what the floor is for
    floored = RunResult(config=RunConfig(data_source="memory"), step_times_s=(0.5e-3,) * 8,
                        input_wait_s=(60e-6,) * 8, samples=gpu, input_floor_s=58e-6)
    assert floored.input_wait_fraction == pytest.approx(0.004)
    assert limit_of(floored) == COMPUTE
    assert diagnosis.diagnose(floored).verdict == NOT_INPUT
    assert RunResult.from_json(floored.to_json()).input_floor_s == 58e-6
