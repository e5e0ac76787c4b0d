"""``TF_CONFIG``: TensorFlow's description of a cluster, read, checked and written for local clusters.

Every process of a TensorFlow cluster gets the same ``cluster`` (job name -> list of
``"host:port"`` addresses) and its own ``task`` (its job and index)::

    {"cluster": {"worker": ["10.0.0.1:12345", "10.0.0.2:12345"]},
     "task": {"type": "worker", "index": 0}}

``parse`` checks a TF_CONFIG before TensorFlow sees it (TensorFlow's own errors about
a bad one come late and say little); ``local`` writes the TF_CONFIGs of a cluster on
this machine, on free loopback ports it has checked; ``join_local_cluster`` is what a
local cluster's worker does to itself before TensorFlow loads (its private network, its
cores; die with its parent). Pure: no TensorFlow, so a worker with a bad TF_CONFIG or a
taken port fails before it spends seconds importing it.

**Where the servers listen.** TensorFlow's gRPC server (``GrpcServer::Init`` in
tensorflow/core/distributed_runtime/rpc/grpc_server_lib.cc) listens on
``"0.0.0.0:" + port``: it takes only the *port* from the task's address in the cluster
(or ``ServerDef.port``); no ServerDef field, ``tf.distribute.Server`` argument,
TF_CONFIG key or environment variable changes the host it binds (TF 2.16 to 2.21; the
string ``0.0.0.0:`` is in ``libtensorflow_cc.so.2``). A server is an unauthenticated
endpoint that runs whatever graph it is sent, file reads and writes included, so a
local cluster must not listen on the machine's network. ``private_network`` gives its
processes one network namespace of their own, with nothing in it but a loopback
interface: they reach each other on 127.0.0.1 and nothing outside the namespace can
reach them (``enter_private_network``, ``join_private_network``).
"""
from __future__ import annotations

import ctypes
import errno
import json
import os
import socket
import struct
import sys
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

#: The job names TensorFlow's strategies use.
JOBS = ("chief", "worker", "ps", "evaluator")
#: Prefix of the report lines a local cluster's worker writes on its stdout (``worker --report``).
REPORT = "@tfwb "
#: A worker's exit status when its own port is taken (a local cluster then retries with new ports).
EXIT_PORT_TAKEN = 3
#: What a well-formed TF_CONFIG looks like, for error messages.
EXAMPLE = ('{"cluster": {"worker": ["host1:12345", "host2:12345"]}, '
           '"task": {"type": "worker", "index": 0}}')


def _bad(why: str) -> ValueError:
    return ValueError(f"TF_CONFIG is malformed: {why}. Expected JSON like {EXAMPLE}")


def split_address(address: Any) -> Tuple[str, int]:
    """``"host:port"`` -> ``(host, port)``; ``"[::1]:port"`` for IPv6.

    Raises:
        ValueError: for anything but a non-empty host and a port in 1..65535.
    """
    if not isinstance(address, str) or ":" not in address:
        raise _bad(f"address {address!r} is not 'host:port'")
    host, _, port = address.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not host or not port.isdigit() or not 1 <= int(port) <= 65535:
        raise _bad(f"address {address!r} is not 'host:port' with a port in 1..65535")
    return host, int(port)


@dataclass(frozen=True)
class TFConfig:
    """One process's TF_CONFIG, checked.

    Attributes:
        cluster: ``{job: (address, ...)}``.
        task_type: this process's job (``"worker"``, ``"chief"``, ``"ps"``, ...).
        task_index: its index in that job.
    """

    cluster: Mapping[str, Tuple[str, ...]]
    task_type: str
    task_index: int

    @property
    def address(self) -> str:
        """This process's own ``host:port``."""
        return self.cluster[self.task_type][self.task_index]

    @property
    def num_workers(self) -> int:
        """Processes that train under ``MultiWorkerMirroredStrategy``: chief plus workers."""
        return len(self.cluster.get("chief", ())) + len(self.cluster.get("worker", ()))

    @property
    def is_chief(self) -> bool:
        """The chief: task ``chief`` if the cluster has one, else worker 0 (TensorFlow's rule)."""
        if "chief" in self.cluster:
            return self.task_type == "chief"
        return self.task_type == "worker" and self.task_index == 0

    @property
    def who(self) -> str:
        """``worker 1 of 2 (localhost:12346)``."""
        return f"{self.task_type} {self.task_index} of {len(self.cluster[self.task_type])} ({self.address})"

    def to_json(self) -> str:
        return json.dumps({"cluster": {k: list(v) for k, v in self.cluster.items()},
                           "task": {"type": self.task_type, "index": self.task_index}})


def parse(text: Optional[str]) -> TFConfig:
    """Check a TF_CONFIG string and return it as a ``TFConfig``.

    Raises:
        ValueError: ``TF_CONFIG is malformed: ...`` saying what is wrong (not JSON,
            no cluster, an unknown job, an address that is not ``host:port``, the same
            address twice, a task outside the cluster), with an example.

    Example:
        >>> parse('{"cluster": {"worker": ["a:1", "b:2"]}, "task": {"type": "worker", "index": 1}}').address
        'b:2'
    """
    if not isinstance(text, str) or not text.strip():
        raise _bad("it is empty")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise _bad(f"not JSON ({e.msg} at character {e.pos})") from None
    if not isinstance(data, dict):
        raise _bad(f"a JSON {type(data).__name__}, not an object")
    unknown = sorted(set(data) - {"cluster", "task", "environment", "rpc_layer"})
    if unknown:
        raise _bad(f"unknown key(s) {', '.join(map(repr, unknown))}; allowed: cluster, task, "
                   "environment, rpc_layer")
    cluster = data.get("cluster")
    if not isinstance(cluster, dict) or not cluster:
        raise _bad("'cluster' must be an object of job name -> list of 'host:port' addresses")
    jobs: Dict[str, Tuple[str, ...]] = {}
    seen: Dict[str, str] = {}
    for job, addresses in cluster.items():
        if job not in JOBS:
            raise _bad(f"job {job!r} is unknown; jobs: {', '.join(JOBS)}")
        if not isinstance(addresses, list) or not addresses:
            raise _bad(f"cluster[{job!r}] must be a non-empty list of 'host:port' addresses")
        for i, address in enumerate(addresses):
            split_address(address)
            if address in seen:
                raise _bad(f"address {address!r} is given twice ({seen[address]} and {job}[{i}])")
            seen[address] = f"{job}[{i}]"
        jobs[job] = tuple(addresses)
    if not ({"chief", "worker"} & set(jobs)):
        raise _bad("the cluster has no 'worker' (or 'chief') job")
    task = data.get("task")
    if not isinstance(task, dict):
        raise _bad("'task' must be an object {\"type\": job, \"index\": n} naming this process")
    task_type, index = task.get("type"), task.get("index", 0)
    if task_type not in jobs:
        raise _bad(f"task type {task_type!r} is not a job of the cluster ({', '.join(jobs)})")
    if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < len(jobs[task_type]):
        raise _bad(f"task index {index!r} is outside cluster[{task_type!r}] "
                   f"(indices 0..{len(jobs[task_type]) - 1})")
    return TFConfig(jobs, task_type, index)


def from_environ(environ: Optional[Mapping[str, str]] = None) -> TFConfig:
    """The checked ``TF_CONFIG`` of this process (``environ`` default ``os.environ``).

    Raises:
        ValueError: when it is missing or malformed.
    """
    env = os.environ if environ is None else environ
    if "TF_CONFIG" not in env:
        raise ValueError("TF_CONFIG is not set: a worker needs it to find its cluster, e.g. "
                         f"TF_CONFIG='{EXAMPLE}'")
    return parse(env["TF_CONFIG"])


def port_free(port: int, host: str = "") -> bool:
    """True when a server could listen on ``port`` now (nothing listens there).

    Binds as gRPC does (``SO_REUSEADDR``), so connections of a server that just
    ended (``TIME_WAIT``) do not count as taken; a listening socket does.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
            s.listen(1)
        except OSError:
            return False
    return True


def check_own_port(tfc: TFConfig) -> None:
    """Raise ``ValueError`` when this process's own port is already taken on this machine.

    TensorFlow binds its server on every interface (``0.0.0.0``), so that is what is
    checked, in this process's network namespace (a local cluster's worker checks after
    it joined the cluster's private network, where only the cluster listens).
    """
    _, port = split_address(tfc.address)
    if not port_free(port):
        raise ValueError(f"port {port} of {tfc.who} is already in use on this machine (another "
                         "process listens there): free it, or give this task another port in "
                         "TF_CONFIG on every process of the cluster")


def free_ports(n: int, host: str = "127.0.0.1") -> List[int]:
    """``n`` distinct ports nothing listens on now, chosen by the OS and checked.

    A port can still be taken between this call and the server's start; a local
    cluster's worker checks its own port first and the cluster retries with new ones.
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"n={n!r} is not allowed; n must be an integer >= 1")
    ports: List[int] = []
    while len(ports) < n:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind((host, 0))
            port = s.getsockname()[1]
        if port not in ports and port_free(port):
            ports.append(port)
    return ports


def local(n_workers: int, host: str = "localhost", ports: Optional[Sequence[int]] = None,
          parameter_servers: int = 0) -> List[TFConfig]:
    """The TF_CONFIGs of a cluster on this machine, one per process.

    Args:
        n_workers: worker processes (>= 1).
        host: the address every process is reached at (loopback by default).
        ports: one per process; default: free ports (``free_ports``).
        parameter_servers: 0 for ``MultiWorkerMirroredStrategy`` (``n_workers`` workers,
            worker 0 the chief); >= 1 for ``ParameterServerStrategy``: a ``chief`` (the
            coordinator), ``n_workers`` workers and this many ``ps`` tasks, in that order.
    """
    if isinstance(n_workers, bool) or not isinstance(n_workers, int) or n_workers < 1:
        raise ValueError(f"workers={n_workers!r} is not allowed; workers must be an integer >= 1")
    jobs = [("worker", n_workers)] if not parameter_servers else [
        ("chief", 1), ("worker", n_workers), ("ps", parameter_servers)]
    total = sum(n for _, n in jobs)
    ports = list(ports) if ports is not None else free_ports(total)
    if len(ports) != total:
        raise ValueError(f"ports={ports!r}: need one port per process ({total})")
    cluster: Dict[str, Tuple[str, ...]] = {}
    it = iter(ports)
    for job, n in jobs:
        cluster[job] = tuple(f"{host}:{next(it)}" for _ in range(n))
    return [TFConfig(cluster, job, i) for job, n in jobs for i in range(n)]


# -- a private network for a local cluster (Linux namespaces) -----------------------------------------
#: Environment variable: the pid of the process whose network namespace a local cluster's processes join.
NETNS_ENV = "TFWB_NETNS_PID"
#: Environment variable: how a local cluster's network is chosen (``NETWORK_MODES``).
NETWORK_ENV = "TFWB_CLUSTER_NETWORK"
#: ``auto``: a private network where this machine allows one, else every interface (said in the run's
#: notes); ``private``: a private network or no cluster at all; ``open``: every interface, on purpose.
NETWORK_MODES = ("auto", "private", "open")
_CLONE_NEWUSER, _CLONE_NEWNET = 0x10000000, 0x40000000
_SIOCGIFFLAGS, _SIOCSIFFLAGS, _IFF_UP = 0x8913, 0x8914, 0x1
_IFREQ = "16sH22x"                     # struct ifreq: the name, then ifr_flags, padded to 40 bytes
#: The line a network holder writes once its namespace is ready.
NETWORK_READY = "@tfwb-network ready"


def network_mode(environ: Optional[Mapping[str, str]] = None) -> str:
    """``TFWB_CLUSTER_NETWORK`` (default ``"auto"``), checked.

    Raises:
        ValueError: for a value outside ``NETWORK_MODES``.

    Example:
        >>> network_mode({}), network_mode({"TFWB_CLUSTER_NETWORK": "private"})
        ('auto', 'private')
    """
    env = os.environ if environ is None else environ
    mode = env.get(NETWORK_ENV, "auto").strip().lower() or "auto"
    if mode not in NETWORK_MODES:
        raise ValueError(f"{NETWORK_ENV}={mode!r} is not allowed; one of {', '.join(NETWORK_MODES)}")
    return mode


def _libc_call(name: str, *args: Any) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if getattr(libc, name)(*args) != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"{name}: {os.strerror(code)}")


def _write(path: str, text: str) -> None:
    with open(path, "w") as fh:
        fh.write(text)


def _loopback_up() -> None:
    import fcntl   # here: Unix only, and cluster_spec is imported on every platform

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        _, flags = struct.unpack(_IFREQ, fcntl.ioctl(s, _SIOCGIFFLAGS, struct.pack(_IFREQ, b"lo", 0)))
        fcntl.ioctl(s, _SIOCSIFFLAGS, struct.pack(_IFREQ, b"lo", flags | _IFF_UP))


def enter_private_network() -> str:
    """Move this process into a new network namespace whose only interface is loopback (up).

    As root with ``CAP_SYS_ADMIN`` a network namespace alone; otherwise a user namespace
    too (unprivileged, where the kernel allows it), this user's ids mapped to themselves.
    Call it in a process with one thread (Linux refuses a user namespace to others).

    Returns:
        How: ``"a network namespace"`` or ``"a user and network namespace"``.

    Raises:
        OSError: where the system refuses both (not Linux, a container's seccomp
            profile, ``kernel.unprivileged_userns_clone=0``, AppArmor's
            ``apparmor_restrict_unprivileged_userns``); the message says which step failed.
    """
    if not sys.platform.startswith("linux"):
        raise OSError(errno.ENOSYS, f"a private network needs Linux namespaces; this is {sys.platform}")
    uid, gid = os.geteuid(), os.getegid()
    try:
        _libc_call("unshare", _CLONE_NEWNET)
        how = "a network namespace"
    except OSError as first:
        try:
            _libc_call("unshare", _CLONE_NEWUSER | _CLONE_NEWNET)
            _write("/proc/self/setgroups", "deny")
            _write("/proc/self/uid_map", f"{uid} {uid} 1")
            _write("/proc/self/gid_map", f"{gid} {gid} 1")
        except OSError as second:
            raise OSError(second.errno, f"no network namespace ({first.strerror}) and no user namespace "
                                        f"either ({second.strerror})") from None
        how = "a user and network namespace"
    try:
        _loopback_up()
    except OSError as e:
        raise OSError(e.errno, f"the private network's loopback interface could not be brought up "
                               f"({e.strerror})") from None
    return how


def join_private_network(pid: int) -> None:
    """Join the network namespace of process ``pid`` (and its user namespace, when it has its own).

    Call it in a process with one thread, before TensorFlow starts.

    Raises:
        OSError: when the process is gone or the system refuses.
    """
    if os.readlink(f"/proc/{pid}/ns/user") != os.readlink("/proc/self/ns/user"):
        fd = os.open(f"/proc/{pid}/ns/user", os.O_RDONLY)
        try:
            _libc_call("setns", fd, _CLONE_NEWUSER)
        finally:
            os.close(fd)
    fd = os.open(f"/proc/{pid}/ns/net", os.O_RDONLY)
    try:
        _libc_call("setns", fd, _CLONE_NEWNET)
    finally:
        os.close(fd)


def hold_private_network() -> int:
    """A network holder's whole life: make the private network, say so, keep it until stdin closes.

    A local cluster starts one (``python -c 'import tfwb.cluster_spec as t; t.hold_private_network()'``)
    before its workers, which join its namespace (``TFWB_NETNS_PID``). It writes
    ``NETWORK_READY`` and how, or ``@tfwb-network failed: <why>``, as one line on stdout.

    Returns:
        The exit status: 0 after stdin closed, 1 when no private network could be made.
    """
    _die_with_parent(os.environ)
    try:
        how = enter_private_network()
    except OSError as e:
        sys.stdout.write(f"@tfwb-network failed: {e.strerror or e}\n")
        sys.stdout.flush()
        return 1
    sys.stdout.write(f"{NETWORK_READY}: {how}\n")
    sys.stdout.flush()
    sys.stdin.read()                        # until the cluster closes it (or this process is killed)
    return 0


def _die_with_parent(env: Mapping[str, str]) -> None:
    parent = env.get("TFWB_PARENT_PID", "")
    if parent.isdigit() and sys.platform.startswith("linux"):
        import signal

        try:
            ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL))   # 1: PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            return
        if os.getppid() != int(parent):        # the parent ended before the request took effect
            os._exit(1)


def join_local_cluster(environ: Optional[Mapping[str, str]] = None) -> None:
    """What a worker started by a local cluster does to itself first, before TensorFlow loads.

    ``TFWB_NETNS_PID``: join the cluster's private network (``join_private_network``),
    where its servers can be reached on loopback only.
    ``TFWB_WORKER_CPUS`` (core ids): pin this process to its share of the cores, like a
    host of its own (TensorFlow sizes its thread pools from the affinity).
    ``TFWB_PARENT_PID``: ask Linux to kill this process when the process that started
    it ends (``PR_SET_PDEATHSIG``), and exit at once if that already happened, so a
    kernel that dies leaves no workers behind. The last two are skipped where the OS lacks
    them; a worker you start yourself has none of these variables.

    Raises:
        OSError: when the cluster's private network cannot be joined (the worker must
            not start its server on the machine's network instead).
    """
    env = os.environ if environ is None else environ
    holder = env.get(NETNS_ENV, "")
    if holder.isdigit():
        try:
            join_private_network(int(holder))
        except OSError as e:
            raise OSError(e.errno, f"this worker could not join the cluster's private network (process "
                                   f"{holder}): {e.strerror or e}") from None
    cpus = env.get("TFWB_WORKER_CPUS", "")
    if cpus and hasattr(os, "sched_setaffinity"):
        try:
            os.sched_setaffinity(0, {int(c) for c in cpus.split(",")})
        except (OSError, ValueError):
            pass
    _die_with_parent(env)
