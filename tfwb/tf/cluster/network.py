"""The local cluster's private network: a network namespace whose only interface is loopback.

TensorFlow's gRPC servers listen on every interface (``0.0.0.0``), so a local cluster's
processes run in a namespace of their own, made by a small holder process
(``tfwb.cluster_spec.hold_private_network``). ``open_network`` starts it as
``TFWB_CLUSTER_NETWORK`` says (``tfwb.cluster_spec.NETWORK_MODES``) and ``network_note``
says in a result's notes where the servers could be reached from.
"""
from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
from typing import Optional, Tuple

import tfwb
from tfwb import cluster_spec


class PrivateNetwork:
    """The local cluster's network namespace: a holder process its workers join (``tfwb.cluster_spec``).

    ``PrivateNetwork.start()`` returns a holder whose namespace is ready, or one with
    ``pid`` None and ``why`` saying why there is none; ``close()`` ends the holder.
    """

    def __init__(self, proc: Optional[subprocess.Popen], how: str = "", why: str = "") -> None:
        self.proc, self.how, self.why = proc, how, why

    @property
    def pid(self) -> Optional[int]:
        return self.proc.pid if self.proc is not None and self.how else None

    @classmethod
    def start(cls, timeout_s: float = 20.0) -> "PrivateNetwork":
        env = dict(os.environ, TFWB_PARENT_PID=str(os.getpid()))
        package_root = os.path.dirname(os.path.dirname(os.path.abspath(tfwb.__file__)))
        env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH", "")) if p)
        try:
            proc = subprocess.Popen(
                [sys.executable, "-c", "import sys, tfwb.cluster_spec as t; sys.exit(t.hold_private_network())"],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env,
                start_new_session=True)
        except OSError as e:
            return cls(None, why=f"no holder process ({e})")
        lines: "queue.Queue" = queue.Queue()
        threading.Thread(target=lambda: lines.put(proc.stdout.readline()), daemon=True).start()
        try:
            line = lines.get(timeout=timeout_s).decode(errors="replace").strip()
        except queue.Empty:
            line = f"@tfwb-network failed: no answer within {timeout_s:g} s"
        if line.startswith(cluster_spec.NETWORK_READY):
            return cls(proc, how=line.split(":", 1)[1].strip())
        network = cls(proc, why=line.split(":", 1)[1].strip() if ":" in line else (line or "the holder ended"))
        network.close()
        return network

    def close(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            self.proc.kill()
        self.proc.wait(timeout=10)
        for pipe in (self.proc.stdin, self.proc.stdout):
            if pipe is not None:
                pipe.close()


def open_network(mode: str) -> Optional[PrivateNetwork]:
    """The cluster's private network for ``mode`` (``tfwb.cluster_spec.NETWORK_MODES``); None: every interface.

    Raises:
        ValueError: with ``mode="private"`` where this system allows no network namespace.
    """
    if mode == "open":
        return None
    network = PrivateNetwork.start()
    if network.pid is None and mode == "private":
        raise ValueError(f"{cluster_spec.NETWORK_ENV}=private, and this system allows no private network for the "
                         f"cluster ({network.why}): TensorFlow's servers would listen on every interface "
                         "(0.0.0.0). Allow unprivileged user namespaces (or run as root), or set "
                         f"{cluster_spec.NETWORK_ENV}=auto to run on every interface with a warning")
    return network


def network_note(network: Optional[PrivateNetwork], seconds: Optional[float] = None) -> Tuple[dict, str]:
    """``({"private": bool, "how" or "why"}, note)``: where the cluster's servers could be reached from.

    Example:
        >>> network_note(None)[0]
        {'private': False, 'why': 'TFWB_CLUSTER_NETWORK=open'}
    """
    if network is not None and network.pid is not None:
        return ({"private": True, "how": network.how},
                f"the cluster's gRPC servers listened in a private network ({network.how} whose only "
                "interface is loopback): its processes reached each other on 127.0.0.1 and nothing outside "
                "the cluster could reach them (TensorFlow binds its servers to 0.0.0.0)")
    why = (f"this system allows no private network namespace: {network.why}" if network is not None
           else f"{cluster_spec.NETWORK_ENV}=open")
    during = f" for {seconds:.0f} s" if seconds is not None else ""
    return ({"private": False, "why": why},
            f"the cluster's gRPC servers listened on every network interface of this machine{during} "
            f"(TensorFlow binds them to 0.0.0.0; {why}): any host that could reach this machine could have "
            "sent them TensorFlow work, file reads and writes included. Set "
            f"{cluster_spec.NETWORK_ENV}=private to refuse instead, or allow unprivileged user namespaces")
