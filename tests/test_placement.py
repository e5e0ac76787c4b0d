"""tfwb.tf.lab.placement: where ops ran (from the graphs TF instantiated and from its log), memory growth."""
import json
import os
import subprocess
import sys
import types

import pytest

tf = pytest.importorskip("tensorflow")

from tensorflow.core.protobuf import config_pb2  # noqa: E402

from tfwb import RunConfig  # noqa: E402
from tfwb.tf.lab import placement as pl  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LOCAL = "/job:localhost/replica:0/task:0/device:"


def two_cpus():
    return len(tf.config.list_logical_devices("CPU")) >= 2


def test_short_device_names():
    assert pl.short_device(LOCAL + "CPU:0") == "CPU:0"
    assert pl.short_device(LOCAL + "GPU:3") == "GPU:3"
    assert pl.short_device("/job:worker/replica:0/task:1/device:CPU:0") == "worker 1 CPU:0"
    assert pl.short_device("/device:CPU:1") == "CPU:1"          # a logical device's own name
    assert pl.short_device("") == "?"


def test_parse_log_reads_the_eager_and_the_placer_lines_and_ignores_the_rest():
    text = "\n".join([
        "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR",
        f"I0000 00:00:1795682032.770864    6222 execute.cc:1775] Executing op MatMul in device {LOCAL}GPU:0",
        f"I0000 00:00:1795682032.818776    6222 execute.cc:1775] Executing op __inference_f_10 in device {LOCAL}CPU:0",
        f"mul/ReadVariableOp: (ReadVariableOp): {LOCAL}CPU:1",
        f"I0000 00:00:1795682032.809241 6222 placer.cc:162] Sum: (Sum): {LOCAL}CPU:0",
        "I0000 00:00:1795682021.343888 6050 port.cc:153] oneDNN custom operations are on.",
    ])
    rows = pl.parse_log(text)
    assert [(r.op, r.op_type, r.device, r.kind) for r in rows] == [
        ("MatMul", "MatMul", "GPU:0", pl.OP),
        ("__inference_f_10", "__inference_f_10", "CPU:0", pl.CALL),
        ("mul/ReadVariableOp", "ReadVariableOp", "CPU:1", pl.OP),
        ("Sum", "Sum", "CPU:0", pl.OP),
    ]


def _node(graph, name, op, device, **attrs):
    node = graph.node.add(name=name, op=op, device=device)
    for key, value in attrs.items():
        node.attr[key].s = value.encode()
    return node


def test_rows_from_metadata_keeps_one_partition_per_device_and_names_copies():
    md = config_pb2.RunMetadata()
    eager = md.function_graphs.add()              # an eager op that oneDNN rewrote: two partitions, one device
    for op in ("MatMul", "_MklMatMul"):
        g = eager.partition_graphs.add()
        _node(g, "a", "_Arg", LOCAL + "CPU:0")
        _node(g, op, "_MklMatMul", LOCAL + "CPU:0")
    fn = md.function_graphs.add()                 # a function over two devices, with a copy
    g0, g1 = fn.partition_graphs.add(), fn.partition_graphs.add()
    _node(g1, "read", "ReadVariableOp", LOCAL + "CPU:1")
    _node(g1, "read/_1", "_Send", LOCAL + "CPU:1", send_device=LOCAL + "CPU:1", recv_device=LOCAL + "CPU:0")
    _node(g0, "read/_2", "_Recv", LOCAL + "CPU:0", send_device=LOCAL + "CPU:1", recv_device=LOCAL + "CPU:0")
    _node(g0, "sum", "Sum", LOCAL + "CPU:0")
    _node(g0, "allreduce", "CollectiveReduceV2", LOCAL + "CPU:0")
    _node(g0, "out", "_Retval", LOCAL + "CPU:0")
    p = pl.Placement(rows=pl.rows_from_metadata(md))
    assert [(r.op, r.device) for r in p.rows if r.op_type == "_MklMatMul"] == [("_MklMatMul", "CPU:0")]
    assert p.copies == {"CPU:1 -> CPU:0": 1}
    assert p.devices() == {"CPU:0": 3, "CPU:1": 1}        # MatMul, Sum, the collective; ReadVariableOp
    assert [r.op for r in p.collectives] == ["allreduce"]
    assert not any(r.op_type in ("_Arg", "_Retval") for r in p.rows)
    assert "CPU:1 -> CPU:0 x1" in p.text() and "collective ops: 1" in p.text()


def test_an_eager_op_runs_on_the_default_device():
    a = tf.random.normal((16, 8))
    p = pl.placement(lambda: tf.matmul(a, a, transpose_b=True))
    default = "GPU:0" if tf.config.list_logical_devices("GPU") else "CPU:0"
    assert [r.device for r in p.rows if "MatMul" in r.op_type] == [default]
    assert p.value.shape == (16, 16)
    assert p.recorded


def test_a_training_step_without_a_strategy_runs_where_expect_default_device_says():
    """The articles' claim that a step outside a strategy scope defaults to the CPU, checked."""
    from tfwb import expect, hardware

    model = tf.keras.Sequential([tf.keras.Input((5,)), tf.keras.layers.Dense(10, activation="relu"),
                                 tf.keras.layers.Dense(1)])
    optimizer = tf.keras.optimizers.Adam()
    optimizer.build(model.trainable_variables)

    @tf.function
    def step(x, y):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(model(x) - y))
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    placed = pl.placement(step, tf.ones((8, 5)), tf.ones((8, 1)))
    check = expect.default_device(hardware.detect()).check(placed.main_device())
    assert check.agreed, str(check)
    assert placed.copies == {}


def test_default_device_expectation_follows_the_hardware():
    from tfwb import expect

    assert expect.default_device({"gpus": [{"name": "T4"}]}).value == "GPU:0"
    assert expect.default_device({"gpus": [], "tpu": True}).value == "CPU:0"
    assert "strategy='tpu'" in expect.default_device({"gpus": [], "tpu": True}).why
    assert expect.default_device({"gpus": []}).check("GPU:0").agreed is False


def test_main_device_is_the_busiest_and_repr_stays_short():
    rows = (pl.Placed("a", "Mul", "CPU:1"), pl.Placed("b", "Mul", "CPU:0"), pl.Placed("c", "Add", "CPU:1"),
            pl.Placed("c/_1", "_Recv", "CPU:0", pl.COPY, "CPU:1 -> CPU:0"))
    p = pl.Placement(rows=rows)
    assert p.main_device() == "CPU:1"
    assert pl.Placement(rows=()).main_device() is None
    assert repr(p).startswith("Placement(ops per device: CPU:0 1, CPU:1 2;") and "Mul" not in repr(p)


@pytest.mark.skipif(not two_cpus(), reason="needs the CPU split into 2 logical devices (tests/conftest.py)")
def test_a_variable_on_another_device_is_copied_to_the_op_that_reads_it():
    with tf.device("/CPU:1"):
        weights = tf.Variable(tf.ones((8, 4)))
    fn = tf.function(lambda x: tf.reduce_sum(tf.matmul(x, weights)))
    p = pl.placement(fn, tf.ones((2, 8)))
    assert [r.device for r in p.rows if r.op_type == "ReadVariableOp"] == ["CPU:1"]
    assert [r.device for r in p.rows if "MatMul" in r.op_type] == ["CPU:0"]
    assert p.copies == {"CPU:1 -> CPU:0": 1}
    assert float(p.value) == pytest.approx(2 * 8 * 4)


def test_a_function_placed_before_records_nothing_the_second_time_and_says_why():
    fn = tf.function(lambda x: x * 3.0 + 1.0)
    first = pl.placement(fn, tf.ones(3))
    again = pl.placement(fn, tf.ones(3))
    assert first.recorded and first.devices()
    assert not again.recorded and again.devices() == {}
    assert "no new graph was instantiated" in again.text()


def _flag():
    from tensorflow.python.eager import context

    return context.context().log_device_placement


def test_the_logging_flag_is_restored_also_when_fn_raises():
    def boom():
        tf.ones(2) + 1.0
        raise KeyError("from fn")

    with pytest.raises(KeyError, match="from fn"):
        pl.placement(boom)
    assert _flag() is False
    tf.debugging.set_log_device_placement(True)
    try:
        pl.placement(lambda: tf.ones(2) * 2.0)
        assert _flag() is True
    finally:
        tf.debugging.set_log_device_placement(False)


def test_not_callable_is_refused_before_any_work():
    with pytest.raises(ValueError, match=r"fn=3 is not allowed; fn must be a callable"):
        pl.placement(3)


def test_html_table_escapes_and_counts():
    p = pl.Placement(rows=(pl.Placed("<x>", "Mul", "CPU:0"), pl.Placed("y", "Mul", "CPU:0")))
    html = p._repr_html_()
    assert '<table class="tfwb-placement"' in html and "Mul x2" in html and "<x>" not in html
    assert "ops per device: CPU:0 2" in html


@pytest.mark.skipif(not two_cpus(), reason="needs the CPU split into 2 logical devices (tests/conftest.py)")
def test_the_mirrored_step_runs_on_both_devices_with_one_all_reduce_each():
    from tfwb.tf.runner.train import prepared

    cfg = RunConfig(workload="mlp", size="small", data_source="memory", strategy="mirrored", batch_size=32)
    with prepared(cfg) as p:
        placed = pl.placement(p.advance)          # the first step: its graph is instantiated now
    devices = placed.devices()
    assert set(devices) == {"CPU:0", "CPU:1"}
    assert min(devices.values()) > 0.8 * max(devices.values())      # the same step on each replica
    assert sorted(r.device for r in placed.collectives) == ["CPU:0", "CPU:1"]
    assert placed.copies                                         # the loss and step counter cross devices


def _run_python(code, tmp_path, **env):
    out = subprocess.run([sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": ROOT, **env},
                         capture_output=True, text=True, timeout=180, cwd=str(tmp_path))
    assert out.returncode == 0, out.stderr[-2000:]
    return out


def test_tensorflows_own_log_is_captured_where_logging_came_first_and_never_switches_off(tmp_path):
    """Switched on before the runtime starts, TF's placer prints each node to stdout, for good."""
    code = (
        "import ctypes, json, tensorflow as tf\n"
        "tf.debugging.set_log_device_placement(True)   # before anything starts the runtime\n"
        "from tfwb.tf.lab.placement import placement\n"
        "a = tf.ones((2, 2))\n"
        "print('@before', flush=True)\n"
        "p = placement(lambda: tf.matmul(a, a) * 3.0)\n"
        "print('@rows', json.dumps([[r.op_type, r.device, r.kind] for r in p.log_rows]), flush=True)\n"
        "tf.debugging.set_log_device_placement(False)\n"
        "tf.function(lambda x: x - 1.0)(a)\n"
        "ctypes.CDLL(None).fflush(None)\n"
        "print('@end', flush=True)\n"
    )
    out = _run_python(code, tmp_path).stdout
    during, rest = out.split("@before", 1)[1].split("@rows", 1)
    rows_line, after_off = rest.split("\n", 1)
    rows = json.loads(rows_line)
    assert ["_MklMatMul", "CPU:0", pl.OP] in rows or ["MatMul", "CPU:0", pl.OP] in rows
    assert ["Mul", "CPU:0", pl.OP] in rows
    assert "(Mul): " not in during                          # held back, not written to stdout
    assert "(Sub): " in after_off.split("@end")[0]          # switched off, it still prints


def test_switched_on_after_the_runtime_started_tensorflow_logs_nothing(tmp_path):
    """Why placement() reads the graphs: at any log level, a late set_log_device_placement is silent."""
    code = (
        "import ctypes, tensorflow as tf\n"
        "a = tf.ones((2, 2))                            # the runtime starts here\n"
        "tf.debugging.set_log_device_placement(True)\n"
        "tf.matmul(a, a)\n"
        "tf.function(lambda x: x * 2.0)(a)\n"
        "ctypes.CDLL(None).fflush(None)\n"
        "print('@end', flush=True)\n"
    )
    out = _run_python(code, tmp_path, TF_CPP_MIN_LOG_LEVEL="0")
    assert "@end" in out.stdout
    assert "Executing op" not in out.stderr and "): /job:" not in out.stderr
    assert "): /job:" not in out.stdout


class _FakeConfig:
    """A stand-in for ``tf.config`` (``try_memory_growth(config=...)``)."""

    def __init__(self, gpus, error=None):
        self._gpus, self._error, self.growth = gpus, error, {}
        self.experimental = types.SimpleNamespace(set_memory_growth=self._set,
                                                  get_memory_growth=lambda gpu: self.growth.get(gpu.name))

    def list_physical_devices(self, kind):
        return list(self._gpus) if kind == "GPU" else []

    def _set(self, gpu, enable):
        if self._error:
            raise RuntimeError(self._error)
        self.growth[gpu.name] = enable


GPU0 = types.SimpleNamespace(name="/physical_device:GPU:0")


def test_memory_growth_without_a_gpu_explains_instead_of_failing():
    attempt = pl.try_memory_growth(config=_FakeConfig([]))
    assert attempt.gpus == () and not attempt.too_late
    assert "no GPU here" in attempt.text()


def test_memory_growth_too_late_shows_tensorflows_own_error_and_what_it_means():
    message = "Physical devices cannot be modified after being initialized"
    attempt = pl.try_memory_growth(config=_FakeConfig([GPU0], error=message))
    assert attempt.too_late
    assert attempt.outcomes == (f"RuntimeError: {message}",)
    assert "too late" in attempt.meaning and "Nothing moved to the CPU" in attempt.meaning
    assert attempt.text().startswith("/physical_device:GPU:0: RuntimeError: " + message)


def test_memory_growth_in_time_is_set_on_every_gpu():
    gpu1 = types.SimpleNamespace(name="/physical_device:GPU:1")
    config = _FakeConfig([GPU0, gpu1])
    attempt = pl.try_memory_growth(config=config)
    assert attempt.outcomes == ("on", "on") and not attempt.too_late
    assert config.growth == {GPU0.name: True, gpu1.name: True}


def test_memory_growth_refuses_a_non_bool():
    with pytest.raises(ValueError, match=r"enable='yes' is not allowed; enable must be True or False"):
        pl.try_memory_growth("yes", config=_FakeConfig([]))
