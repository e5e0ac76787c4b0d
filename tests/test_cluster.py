"""Multi-worker training on TensorFlow's own runtime: TF_CONFIG, the local cluster, failures.

The expensive tests start real worker processes (each imports TensorFlow): the loss
equivalence of one device, two mirrored replicas and a two-worker cluster; a worker
killed mid-run; a hung worker (slow); Ctrl-C during start; and a two-worker cluster
across two network namespaces joined by a veth pair (slow; skipped where namespaces
are not allowed).
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
import uuid

import pytest

from tfwb import RunConfig, cluster_spec
from tfwb.history import append_result, load_results
from tfwb.records import RunResult

#: The largest difference allowed between per-step losses of one device and of two replicas or
#: two workers. They train on the same global batches; only the order of float32 sums differs
#: (the all-reduce adds two halves): measured differences are about 2e-7 on losses near 2.
LOSS_TOLERANCE = 1e-5


def small(**kw) -> RunConfig:
    base = dict(workload="mlp", size="small", batch_size=64, steps=6, warmup_steps=1, seed=0,
                data_source="files", sample_interval_s=0.5)
    base.update(kw)
    return RunConfig(**base)


def assert_cluster_gone(result: RunResult) -> None:
    facts = result.extras["cluster"]
    assert facts["pids"], facts
    assert not [p for p in facts["pids"] if processes.alive(p)], f"worker processes left: {facts['pids']}"
    ports = [cluster_spec.split_address(a)[1] for a in facts["addresses"]]
    assert all(cluster_spec.port_free(p) for p in ports), f"ports still taken: {ports}"


# -- TF_CONFIG (pure) -------------------------------------------------------------------------------
def test_tf_config_parsed_and_checked():
    tfc = cluster_spec.parse(json.dumps({"cluster": {"worker": ["a:1", "b:2"], "ps": ["c:3"]},
                                     "task": {"type": "worker", "index": 1}}))
    assert (tfc.address, tfc.num_workers, tfc.is_chief) == ("b:2", 2, False)
    assert cluster_spec.parse(tfc.to_json()) == tfc
    chief = cluster_spec.parse('{"cluster": {"chief": ["a:1"], "worker": ["b:2"]}, "task": {"type": "chief"}}')
    assert chief.is_chief and chief.num_workers == 2


@pytest.mark.parametrize("text, says", [
    ("", "it is empty"),
    ("{not json", "not JSON"),
    ("[1, 2]", "not an object"),
    ('{"cluster": {"worker": ["a:1"]}}', "'task' must be an object"),
    ('{"cluster": {}, "task": {"type": "worker", "index": 0}}', "'cluster' must be an object"),
    ('{"cluster": {"gpu": ["a:1"]}, "task": {"type": "gpu", "index": 0}}', "job 'gpu' is unknown"),
    ('{"cluster": {"worker": ["a"]}, "task": {"type": "worker", "index": 0}}', "'a' is not 'host:port'"),
    ('{"cluster": {"worker": ["a:0"]}, "task": {"type": "worker", "index": 0}}', "port in 1..65535"),
    ('{"cluster": {"worker": ["a:1", "a:1"]}, "task": {"type": "worker", "index": 0}}', "given twice"),
    ('{"cluster": {"worker": ["a:1"]}, "task": {"type": "worker", "index": 1}}', "task index 1 is outside"),
    ('{"cluster": {"worker": ["a:1"]}, "task": {"type": "chief", "index": 0}}', "task type 'chief' is not"),
    ('{"cluster": {"ps": ["a:1"]}, "task": {"type": "ps", "index": 0}}', "no 'worker'"),
    ('{"cluster": {"worker": ["a:1"]}, "task": {"type": "worker"}, "extra": 1}', "unknown key(s) 'extra'"),
])
def test_malformed_tf_config_is_a_clear_error(text, says):
    with pytest.raises(ValueError) as info:
        cluster_spec.parse(text)
    assert "TF_CONFIG is malformed" in str(info.value) and says in str(info.value), str(info.value)
    assert "Expected JSON like" in str(info.value)


def test_free_ports_are_distinct_and_a_listening_port_is_taken():
    ports = cluster_spec.free_ports(3)
    assert len(set(ports)) == 3 and all(cluster_spec.port_free(p) for p in ports)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        taken = s.getsockname()[1]
        assert not cluster_spec.port_free(taken)
        tfc = cluster_spec.local(2, ports=[ports[0], taken])[1]
        with pytest.raises(ValueError) as info:
            cluster_spec.check_own_port(tfc)
    assert f"port {taken} of worker 1 of 2" in str(info.value) and "already in use" in str(info.value)


def test_local_cluster_configs():
    tfcs = cluster_spec.local(3)
    assert [t.task_index for t in tfcs] == [0, 1, 2] and tfcs[0].is_chief and not tfcs[1].is_chief
    assert len({t.address for t in tfcs}) == 3 and all(t.address.startswith("localhost:") for t in tfcs)
    assert all(t.cluster == tfcs[0].cluster for t in tfcs)
    with pytest.raises(ValueError, match="workers=0 is not allowed"):
        cluster_spec.local(0)


@pytest.mark.parametrize("workers", [0, 17, -1])
def test_workers_knob_bounds(workers):
    with pytest.raises(ValueError) as info:
        RunConfig(strategy="multi_worker", workers=workers)
    assert f"workers={workers}" in str(info.value)


# -- bad requests: refused before any process starts -------------------------------------------------
tf = pytest.importorskip("tensorflow")
import tfwb.tf.cluster.parent as cluster  # noqa: E402
import tfwb.tf.cluster.network as cluster_network  # noqa: E402
import tfwb.tf.cluster.preflight as preflight  # noqa: E402
import tfwb.tf.cluster.processes as processes  # noqa: E402
import tfwb.tf.cluster.worker as worker  # noqa: E402
from tfwb.tf.run import run  # noqa: E402
from tfwb.observers import Observer  # noqa: E402
from tfwb.workloads import register_workload, unregister_workload  # noqa: E402


def children() -> list:
    import psutil

    return [p for p in psutil.Process().children(recursive=True) if p.is_running()
            and p.status() != psutil.STATUS_ZOMBIE]


@pytest.mark.tf
def test_more_workers_than_cores_fails_before_any_process_starts():
    cores = len(os.sched_getaffinity(0))
    before = children()
    r = run(small(strategy="multi_worker", workers=cores + 1))
    assert r.status == "failed" and r.replicas is None
    assert f"workers={cores + 1} is more than this machine can host" in r.error
    assert f"use workers <= {cores}" in r.error
    assert children() == before
    with pytest.raises(ValueError):
        run(small(strategy="multi_worker", workers=cores + 1), raise_errors=True)


@pytest.mark.tf
def test_placement_gives_each_worker_its_own_cores_and_gpus(monkeypatch):
    cores = sorted(os.sched_getaffinity(0))
    shares = preflight.placement(len(cores))
    assert [s["cpus"] for s in shares] == [[c] for c in cores] and all(s["gpus"] == [] for s in shares)
    monkeypatch.setattr(preflight, "visible_gpus", lambda: ["3", "5"])      # a machine with two GPUs
    assert [s["gpus"] for s in preflight.placement(2)] == [["3"], ["5"]]
    assert [s["gpus"] for s in preflight.placement(1)] == [["3", "5"]]
    ps = preflight.placement(1, parameter_server=True)                      # chief, worker, ps
    assert [s["gpus"] for s in ps] == [[], ["3", "5"], []] and ps[0]["cpus"] == cores
    tfc = cluster_spec.local(1, parameter_servers=1)[0]
    assert processes.worker_env(tfc, ps[0], True)["CUDA_VISIBLE_DEVICES"] == ""   # the chief sees no GPU
    if len(cores) >= 3:                        # more workers than GPUs: all of them on the CPU
        assert all(s["gpus"] == [] for s in preflight.placement(3))


@pytest.mark.tf
def test_one_gpu_and_two_workers_puts_every_worker_on_the_cpu_and_says_so(monkeypatch):
    monkeypatch.setattr(preflight, "visible_gpus", lambda: ["0"])          # one Colab T4
    shares = preflight.placement(2)
    assert [s["gpus"] for s in shares] == [[], []]
    tfc = cluster_spec.local(2)[1]
    env = processes.worker_env(tfc, shares[1], True)
    assert env["CUDA_VISIBLE_DEVICES"] == "" and env["TF_FORCE_GPU_ALLOW_GROWTH"] == "true"
    note = preflight.cpu_note(2, 1)
    assert "every worker runs on the CPU" in note and "1 GPU(s) for 2 workers" in note
    assert preflight.cpu_note(1, 1) is None and preflight.cpu_note(2, 0) is None
    ps = preflight.placement(2, parameter_server=True)                      # chief, 2 workers, ps
    assert all(s["gpus"] == [] for s in ps)
    monkeypatch.setattr(preflight, "visible_gpus", lambda: ["0", "1"])     # one GPU each: their own, growing
    two = preflight.placement(2)
    assert [s["gpus"] for s in two] == [["0"], ["1"]]
    assert processes.worker_env(tfc, two[1], True)["CUDA_VISIBLE_DEVICES"] == "1"


class _FakeTfConfig:
    """A stand-in for ``tf.config`` on a machine with ``gpus`` GPUs (``preflight.gpus_held(config=...)``)."""

    def __init__(self, gpus: int, growth: bool = False, limit_mib=None):
        import types

        self.gpus = [types.SimpleNamespace(name=f"/physical_device:GPU:{i}", device_type="GPU") for i in range(gpus)]
        self.growth, self.limit_mib = growth, limit_mib
        self.experimental = types.SimpleNamespace(get_memory_growth=lambda gpu: self.growth)

    def list_physical_devices(self, kind):
        return self.gpus if kind == "GPU" else []

    def get_logical_device_configuration(self, gpu):
        import types

        return None if self.limit_mib is None else [types.SimpleNamespace(memory_limit=self.limit_mib)]


def test_a_gpu_this_process_holds_is_told_from_one_it_shares(monkeypatch):
    monkeypatch.delenv("TF_FORCE_GPU_ALLOW_GROWTH", raising=False)
    assert preflight.gpus_held(_FakeTfConfig(2), started=True)                      # TF's default: all of it
    assert not preflight.gpus_held(_FakeTfConfig(2), started=False)                 # nothing held before the start
    assert not preflight.gpus_held(_FakeTfConfig(2, growth=True), started=True)     # set_memory_growth
    assert not preflight.gpus_held(_FakeTfConfig(2, limit_mib=1024), started=True)  # a memory limit
    assert not preflight.gpus_held(_FakeTfConfig(0), started=True)                  # no GPU
    monkeypatch.setenv("TF_FORCE_GPU_ALLOW_GROWTH", "true")                        # the allocator grows
    assert not preflight.gpus_held(_FakeTfConfig(2), started=True)


@pytest.mark.tf
def test_gpus_this_process_holds_put_every_worker_on_the_cpu_and_say_why(monkeypatch):
    monkeypatch.setattr(preflight, "visible_gpus", lambda: ["0", "1"])     # a GPU per worker ...
    monkeypatch.setattr(preflight, "gpus_held", lambda: True)              # ... whose memory this process holds
    shares = preflight.placement(2)
    assert [s["gpus"] for s in shares] == [[], []]
    env = processes.worker_env(cluster_spec.local(2)[0], shares[0], True)
    assert env["CUDA_VISIBLE_DEVICES"] == "" and env["TF_FORCE_GPU_ALLOW_GROWTH"] == "true"
    note = preflight.cpu_note(2, 2, held=True)
    assert "already holds the memory" in note and "TF_FORCE_GPU_ALLOW_GROWTH=true" in note
    monkeypatch.setattr(preflight, "gpus_held", lambda: False)             # growth on here: the cards are free
    assert [s["gpus"] for s in preflight.placement(2)] == [["0"], ["1"]] and preflight.cpu_note(2, 2) is None


@pytest.mark.tf
def test_more_mirrored_replicas_than_cores_is_an_error_not_a_cut():
    cores = len(os.sched_getaffinity(0))
    r = run(small(strategy="mirrored", replicas=cores + 1))
    assert r.status == "failed" and not r.step_times_s
    assert f"replicas={cores + 1} is more than this machine can host" in r.error


@pytest.mark.tf
def test_unreachable_workload_dataset_and_uneven_batch_are_refused():
    register_workload("test-cluster-lambda", model_fn=lambda cfg: None, data_fn=lambda cfg: None)
    try:
        r = run(small(workload="test-cluster-lambda", strategy="multi_worker"))
    finally:
        unregister_workload("test-cluster-lambda")
    assert r.status == "failed" and "'module:attribute' strings" in r.error
    r = run(small(strategy="multi_worker"), dataset=tf.data.Dataset.range(3))
    assert r.status == "failed" and "dataset object does not cross processes" in r.error
    r = run(small(strategy="multi_worker", batch_size=63))
    assert r.status == "failed" and "batch_size=63 must be a multiple of the 2 replicas" in r.error


@pytest.mark.tf
def test_a_workload_named_by_module_attribute_reaches_the_workers():
    import keras

    register_workload("test-cluster-ref", model_fn="tfwb.tf.workloads.mlp:model",
                      data_fn="tfwb.tf.workloads.mlp:data",
                      loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    try:
        spec = preflight.workload_spec("test-cluster-ref")
    finally:
        unregister_workload("test-cluster-ref")
    assert spec["model_fn"] == "tfwb.tf.workloads.mlp:model" and spec["loss"] is not None
    json.dumps(spec)                                  # it travels as JSON
    worker.register_spec(spec)                        # what a worker does with it
    try:
        RunConfig(workload="test-cluster-ref")
    finally:
        unregister_workload("test-cluster-ref")
    assert preflight.workload_spec("mlp") is None       # built-ins need nothing


@pytest.mark.tf
def test_inside_a_worker_multi_worker_is_a_clear_error():
    # A fresh process: TF_CONFIG set (a worker), and TensorFlow already started by the user's code.
    code = textwrap.dedent("""
        import json, os
        os.environ["TF_CONFIG"] = json.dumps({"cluster": {"worker": ["localhost:1", "localhost:2"]},
                                              "task": {"type": "worker", "index": 1}})
        import tensorflow as tf
        tf.constant(1.0) + 1
        from tfwb import RunConfig
        import tfwb.tf.cluster.parent as cluster, tfwb.tf.runner.train as train
        cfg = RunConfig(workload="mlp", size="small", strategy="multi_worker", steps=1, warmup_steps=0)
        r = cluster.run_cluster(cfg)
        print("CLUSTER", r.status, r.error)
        r = train.run_process(cfg)
        print("RUN", r.status, r.error)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    lines = dict(line.split(" ", 1) for line in out.stdout.splitlines() if line.startswith(("CLUSTER", "RUN")))
    assert lines["CLUSTER"].startswith("failed") and "already a worker of a cluster" in lines["CLUSTER"]
    assert "worker 1 of 2 (localhost:2)" in lines["CLUSTER"]
    assert lines["RUN"].startswith("failed") and "must come before any other TensorFlow work" in lines["RUN"]


@pytest.mark.tf
def test_a_port_taken_under_the_cluster_is_retried_then_a_clear_error(monkeypatch):
    real_local = cluster_spec.local
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        taken = s.getsockname()[1]
        tries = []

        def always_taken(n, **kw):          # as if another process grabbed worker 0's port every time
            tries.append(n)
            return real_local(n, ports=[taken, *cluster_spec.free_ports(n - 1)], **kw)

        monkeypatch.setattr(cluster_spec, "local", always_taken)
        monkeypatch.setenv(cluster_spec.NETWORK_ENV, "open")      # in a private network this port is free
        r = run(small(strategy="multi_worker"))
    assert len(tries) == cluster.PORT_ATTEMPTS
    assert r.status == "failed" and "every try to start the cluster found a chosen port taken" in r.error
    assert f"port {taken}" in r.error and "already in use" in r.error, r.error
    assert_cluster_gone(r)


# -- where the cluster listens ---------------------------------------------------------------------------------
def _hex_address(text: str) -> str:
    """``0100007F`` (/proc/net/tcp, little-endian) -> ``127.0.0.1``; 32 hex digits -> an IPv6 address."""
    raw = bytes.fromhex(text)
    if len(raw) == 4:
        return socket.inet_ntop(socket.AF_INET, raw[::-1])
    return socket.inet_ntop(socket.AF_INET6, b"".join(raw[i:i + 4][::-1] for i in range(0, 16, 4)))


def listening_sockets(pid: int) -> list:
    """``[(address, port)]`` of the TCP sockets process ``pid`` listens on, read in its own network namespace."""
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            link = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if link.startswith("socket:["):
            inodes.add(link[8:-1])
    found = []
    for table in ("tcp", "tcp6"):
        path = f"/proc/{pid}/net/{table}"
        if table == "tcp6" and not os.path.exists(path):
            continue                                  # no IPv6 in that namespace: no IPv6 sockets either
        with open(path) as fh:
            for line in fh.readlines()[1:]:
                f = line.split()
                if f[3] == "0A" and f[9] in inodes:                   # 0A: LISTEN
                    host, port = f[1].split(":")
                    found.append((_hex_address(host), int(port, 16)))
    return found


def interfaces(pid: int) -> list:
    with open(f"/proc/{pid}/net/dev") as fh:
        return sorted(line.split(":")[0].strip() for line in fh.readlines()[2:] if ":" in line)


class SocketLister(Observer):
    """Lists every worker's listening sockets and network at the chief's second step."""

    def __init__(self):
        self.seen = None

    def on_step_end(self, run, step):
        if self.seen is None and step >= 1:
            self.seen = {pid: (listening_sockets(pid), interfaces(pid), os.readlink(f"/proc/{pid}/ns/net"))
                         for pid in run.extras["cluster"]["pids"]}


@pytest.mark.tf
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc/<pid>/net is Linux's")
def test_a_local_cluster_listens_on_loopback_only(monkeypatch):
    """Every socket a running cluster listens on is reachable on loopback only; with one GPU, on the CPU."""
    monkeypatch.setattr(preflight, "visible_gpus", lambda: ["0"])          # one GPU, two workers
    lister = SocketLister()
    # per_step: the chief reports each step as it ends, so the lister runs while the workers are up
    # (windowed timing reports a window's steps when it closes, possibly at the end of a short run).
    r = run(small(strategy="multi_worker", workers=2, steps=8, timing="per_step"), observers=[lister])
    assert r.status == "ok", r.error
    assert any("every worker runs on the CPU" in n for n in r.notes), r.notes
    assert r.extras["cluster"]["gpus"] == [[], []]
    network = r.extras["cluster"]["network"]
    if not network["private"]:
        pytest.skip(f"this system allows no private network namespace: {network['why']}")
    assert lister.seen is not None and len(lister.seen) == 2
    ours = os.readlink("/proc/self/ns/net")
    ports = {cluster_spec.split_address(a)[1] for a in r.extras["cluster"]["addresses"]}
    for pid, (sockets, names, netns) in lister.seen.items():
        assert {p for _, p in sockets} & ports, (pid, sockets)          # its gRPC server is among them
        for address, port in sockets:
            # TensorFlow binds 0.0.0.0 / [::]: such a socket is on loopback only because its namespace
            # has no interface but lo, and that namespace is not this process's.
            on_loopback = address in ("127.0.0.1", "::1") or (names == ["lo"] and netns != ours)
            assert on_loopback, (pid, address, port, names)
    assert any("listened in a private network" in n for n in r.notes), r.notes
    assert_cluster_gone(r)


def test_without_a_namespace_private_refuses_and_auto_says_so(monkeypatch):
    blocked = cluster_network.PrivateNetwork(None, why="unshare: Operation not permitted")
    monkeypatch.setattr(cluster_network.PrivateNetwork, "start", classmethod(lambda cls, timeout_s=20.0: blocked))
    with pytest.raises(ValueError) as info:
        cluster_network.open_network("private")
    assert "TFWB_CLUSTER_NETWORK=private" in str(info.value) and "Operation not permitted" in str(info.value)
    monkeypatch.setenv(cluster_spec.NETWORK_ENV, "private")
    r = run(small(strategy="multi_worker"))
    assert r.status == "failed" and "every interface (0.0.0.0)" in r.error and r.replicas is None
    facts, note = cluster_network.network_note(cluster_network.open_network("auto"), 12.0)
    assert facts == {"private": False, "why": "this system allows no private network namespace: "
                                               "unshare: Operation not permitted"}
    assert "listened on every network interface of this machine for 12 s" in note
    assert cluster_network.open_network("open") is None
    monkeypatch.setenv(cluster_spec.NETWORK_ENV, "loopback")
    with pytest.raises(ValueError, match="TFWB_CLUSTER_NETWORK='loopback' is not allowed; one of auto"):
        cluster_spec.network_mode()


def test_a_worker_that_cannot_join_the_private_network_does_not_start():
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    with pytest.raises(OSError, match=f"could not join the cluster's private network \\(process {gone.pid}\\)"):
        cluster_spec.join_local_cluster({cluster_spec.NETNS_ENV: str(gone.pid)})


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="network namespaces are Linux's")
def test_the_network_holder_gives_a_namespace_with_loopback_only():
    network = cluster_network.PrivateNetwork.start()
    if network.pid is None:
        pytest.skip(f"no private network here: {network.why}")
    try:
        assert interfaces(network.pid) == ["lo"]
        assert os.readlink(f"/proc/{network.pid}/ns/net") != os.readlink("/proc/self/ns/net")
        code = ("import socket, tfwb.cluster_spec as t, sys; t.join_private_network(int(sys.argv[1])); "
                "s = socket.socket(); s.bind(('0.0.0.0', 0)); s.listen(1); "
                "socket.create_connection(('127.0.0.1', s.getsockname()[1])).close(); "
                "print(open('/proc/self/net/dev').read().count(':'))")
        out = subprocess.run([sys.executable, "-c", code, str(network.pid)], capture_output=True, text=True,
                             timeout=60, env={**os.environ, "PYTHONPATH": os.getcwd()})
        assert out.returncode == 0, out.stderr
        assert out.stdout.strip() == "1"                 # one interface: lo; and loopback works in it
    finally:
        network.close()
    assert network.proc.poll() is not None


# -- correctness: the same losses on one device, two replicas and two workers ----------------------------
@pytest.mark.tf
def test_mirrored_and_multi_worker_match_one_device_step_for_step():
    one = run(small(strategy="default"))
    two = run(small(strategy="mirrored", replicas=2))
    cl = run(small(strategy="multi_worker", workers=2))
    for r in (one, two, cl):
        assert r.status == "ok", r.error
    assert (one.replicas, two.replicas, cl.replicas) == (1, 2, 2)
    assert (one.per_replica_batch, two.per_replica_batch, cl.per_replica_batch) == (64, 32, 32)
    ref = one.warmup_losses + one.losses
    for r in (two, cl):
        got = r.warmup_losses + r.losses
        assert len(got) == len(ref) == 7
        largest = max(abs(a - b) for a, b in zip(got, ref))
        assert largest <= LOSS_TOLERANCE, (r.config.strategy, largest, got, ref)
    facts = cl.extras["cluster"]
    assert facts["losses_identical"] is True and facts["largest_loss_difference"] == 0.0
    assert len(facts["worker_step_times_s"]) == 2 and all(len(t) == 6 for t in facts["worker_step_times_s"])
    assert facts["start_s"] > 0 and cl.setup_s == facts["start_s"]
    assert cl.extras["distribution"]["auto_shard_policy"] == "DATA"
    assert any("auto-shard policy DATA" in n for n in cl.notes)
    assert any("global batch 64 = 2 replica(s) x 32" in n for n in two.notes + cl.notes)
    assert cl.config == small(strategy="multi_worker", workers=2)
    assert RunResult.from_json(cl.to_json()) == cl
    assert_cluster_gone(cl)


@pytest.mark.tf
@pytest.mark.slow
def test_parameter_server_trains_keras_3_on_a_local_chief_workers_and_ps():
    r = run(small(strategy="parameter_server", workers=2, steps=8))
    assert r.status == "ok", r.error
    assert len(r.losses) == 8 and all(0 < v < 10 for v in r.losses)
    assert r.replicas == 1 and r.extras["distribution"]["workers"] == 2
    facts = r.extras["cluster"]
    assert facts["tasks"] == ["the chief", "worker 0", "worker 1", "ps 0"]
    assert facts["exit_codes"][0] == 0                 # the chief ended by itself; the servers were stopped
    assert any("one step in flight at a time" in n for n in r.notes)
    assert_cluster_gone(r)


# -- failures: a crash, a hang, an interrupt ---------------------------------------------------------------
class Saboteur(Observer):
    """Runs in the parent on the chief's reported steps: at ``step`` sends ``sig`` to worker 1."""

    def __init__(self, sig: int, step: int = 3) -> None:
        self.sig, self.step, self.sent_at = sig, step, None

    def on_step_end(self, run, step):
        if step == self.step and self.sent_at is None:
            pid = run.extras["cluster"]["pids"][1]
            self.sent_at = time.perf_counter()
            os.kill(pid, self.sig)


@pytest.mark.tf
def test_a_worker_killed_mid_run_fails_the_run_at_once_and_leaves_nothing(tmp_path):
    history = tmp_path / "runs.jsonl"
    earlier = RunResult(config=small(), step_times_s=[0.01], losses=[1.0], examples_per_step=64)
    append_result(history, earlier)
    saboteur = Saboteur(signal.SIGKILL)
    r = run(small(strategy="multi_worker", steps=2000), observers=[saboteur])
    seen_after_s = time.perf_counter() - saboteur.sent_at
    append_result(history, r)
    assert r.status == "failed", r.error
    assert "worker 1 (pid" in r.error and "was killed by SIGKILL after" in r.error, r.error
    assert "Every worker process was stopped" in r.error
    # Seen by the crash watch, not the hang timeout (60 s): a bounded time, whatever the machine.
    assert seen_after_s < cluster.STEP_TIMEOUT_S, seen_after_s
    assert len(r.warmup_losses) + len(r.losses) >= 4           # the chief's steps before the kill are kept
    assert_cluster_gone(r)
    assert [x.status for x in load_results(history)] == ["ok", "failed"]   # earlier history intact


@pytest.mark.tf
@pytest.mark.slow
def test_a_hung_worker_fails_the_run_after_the_step_timeout():
    r = cluster.run_cluster(small(strategy="multi_worker", steps=2000), [Saboteur(signal.SIGSTOP)],
                            step_timeout_s=5)
    assert r.status == "failed", r.error
    assert "reported no step for step_timeout_s=5 s" in r.error
    assert "worker 1 (pid" in r.error and "is stopped" in r.error, r.error
    assert_cluster_gone(r)


class StopAt(Observer):
    """A user's Stop at call ``step``: the same request the Workbench's Stop button makes."""

    def __init__(self, step: int) -> None:
        self.step = step

    def on_step_end(self, run, step):
        if step == self.step:
            run.request_stop("stopped by the user (Stop button)", interrupted=True)


@pytest.mark.tf
def test_a_users_stop_ends_every_worker_and_the_run_is_interrupted_with_its_steps():
    r = cluster.run_cluster(small(strategy="multi_worker", steps=2000, warmup_steps=1), [StopAt(3)])
    assert r.status == "interrupted", r.error
    assert r.stop_reason == "stopped by the user (Stop button)"
    assert r.error == "stopped by the user (Stop button) after 4 of 2001 steps"
    assert len(r.warmup_times_s) == 1 and len(r.step_times_s) == 3 == len(r.losses)
    assert any("every worker process was stopped" in n for n in r.notes), r.notes
    assert_cluster_gone(r)


@pytest.mark.tf
def test_ctrl_c_while_the_cluster_starts_stops_every_worker():
    main = threading.get_ident()
    assert main == threading.main_thread().ident
    timer = threading.Timer(1.5, lambda: os.kill(os.getpid(), signal.SIGINT))
    timer.start()
    try:
        r = run(small(strategy="multi_worker"))
    finally:
        timer.cancel()
    assert r.status == "interrupted" and r.stop_reason == "interrupted by the user"
    assert r.error.startswith("interrupted by the user after 0 of ")
    assert any("every worker process was stopped" in n for n in r.notes), r.notes
    assert_cluster_gone(r)


# -- a second host for real: two network namespaces joined by a veth pair ---------------------------------------
def _ip(*args, check=True):
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=check, timeout=30)


@pytest.fixture
def two_hosts():
    """Two network namespaces, ``10.213.x.1`` and ``10.213.x.2`` on a veth pair, nothing else (no loopback route
    between them). Removed afterwards."""
    if os.geteuid() != 0 or not shutil.which("ip"):
        pytest.skip("two network namespaces need root and iproute2's ip: not allowed here")
    tag = uuid.uuid4().hex[:6]
    a, b = f"tfwb-a-{tag}", f"tfwb-b-{tag}"
    net = 10 + int(tag[:2], 16) % 200
    hosts = (f"10.213.{net}.1", f"10.213.{net}.2")
    probe = _ip("netns", "add", a, check=False)
    if probe.returncode != 0:
        pytest.skip(f"ip netns is not allowed here: {probe.stderr.strip()}")
    try:
        _ip("netns", "add", b)
        _ip("link", "add", f"va{tag}", "type", "veth", "peer", "name", f"vb{tag}")
        for ns, dev, host in ((a, f"va{tag}", hosts[0]), (b, f"vb{tag}", hosts[1])):
            _ip("link", "set", dev, "netns", ns)
            _ip("-n", ns, "addr", "add", f"{host}/24", "dev", dev)
            _ip("-n", ns, "link", "set", dev, "up")
            _ip("-n", ns, "link", "set", "lo", "up")
        yield (a, b), hosts
    finally:
        _ip("netns", "del", a, check=False)
        _ip("netns", "del", b, check=False)


@pytest.mark.tf
@pytest.mark.slow
def test_two_workers_across_two_network_namespaces(two_hosts, tmp_path):
    (ns_a, ns_b), hosts = two_hosts
    cluster_spec = {"worker": [f"{hosts[0]}:23456", f"{hosts[1]}:23456"]}
    knobs = ["--workload", "mlp", "--size", "small", "--batch-size", "64", "--steps", "4", "--warmup-steps", "1"]
    procs = []
    for i, ns in enumerate((ns_a, ns_b)):
        env = {**os.environ, "TF_CONFIG": json.dumps({"cluster": cluster_spec, "task": {"type": "worker", "index": i}})}
        procs.append(subprocess.Popen(["ip", "netns", "exec", ns, sys.executable, "-m", "tfwb", "worker", *knobs,
                                       "--result", str(tmp_path / f"w{i}.json")],
                                      env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    try:
        outs = [p.communicate(timeout=240) for p in procs]
    finally:
        for p in procs:
            p.kill()
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, err[-2000:]
    results = [RunResult.from_json((tmp_path / f"w{i}.json").read_text()) for i in range(2)]
    assert all(r.ok and r.replicas == 2 for r in results)
    assert results[0].losses == results[1].losses and len(results[0].losses) == 4
    devices = ["/job:worker/replica:0/task:0/device:CPU:0", "/job:worker/replica:0/task:1/device:CPU:0"]
    assert [sorted(r.fingerprint["logical_devices"]) for r in results] == [devices, devices]
    # Each namespace has only its own address: the cluster can only have formed over the veth pair.
    assert hosts[1] not in _ip("-n", ns_a, "-o", "addr").stdout
