"""The one SIGINT bridge: a kernel interrupt or Ctrl-C becomes a stop request.

Owns ``InterruptBridge`` (SIGINT -> ``on_interrupt()`` while armed), ``kernel_loop``, and
``INTERRUPTED``, the one stop reason of a user's interrupt (the runners' lifecycle, the
Workbench, the sweep and the tune all import it from here).
The Workbench and the sweep both arm one around a run, with a
``tfwb.observers.StopFlag``: ``InterruptBridge(lambda: flag.set("interrupted by the
user", interrupted=True))``, so the run ends after its current step with status
``"interrupted"``.

Why this exists. A kernel interrupt (Kernel -> Interrupt, or the interrupt button)
is a SIGINT sent to the kernel process. Python runs signal handlers on the main
thread only, and ipykernel installs ``default_int_handler`` (which raises
``KeyboardInterrupt``) only while the main thread handles a message; between
messages SIGINT is ignored (``kernelapp.init_signal``). So an interrupt stops
work that runs *inside a main-thread message handler*, such as a cell. A widget
click is a ``comm_msg``, and with ipykernel 7 and JupyterLab 4.6 comm messages go
to a kernel *subshell* thread (JupyterLab's default ``commsOverSubshells:
perCommTarget``): a Run click handled there never sees the interrupt, and the run
goes on to its last step. (Verified in JupyterLab 4.6.6 / ipykernel 7.4.0: the first
click on a fresh Button ran on ``MainThread`` and was interrupted; later clicks ran
on ``subshell-<id>`` with SIGINT ignored and ran to the end.)

So the Workbench trains a clicked run on its own thread, and while that run is
active an ``InterruptBridge`` holds a SIGINT handler on the main thread that asks
the run to stop (the run ends after the current step). The handler is installed
and removed from the main thread's event loop (the kernel's ``io_loop``), between
message handlers, never in the middle of one: ipykernel saves and restores the
handler around each handler, so a cell run meanwhile still gets its own
``KeyboardInterrupt``. Outside a kernel it is installed directly when armed from
the main thread. The previous handler is chained (called after the stop request)
when it is a Python callable, and restored afterwards.

Pure standard library; IPython is imported only to find the kernel.
"""
from __future__ import annotations

import signal
import threading
from typing import Any, Callable, Optional

__all__ = ["InterruptBridge", "kernel_loop", "INTERRUPTED"]

#: The stop reason of a user's interrupt (Ctrl-C, a kernel interrupt): the one definition.
INTERRUPTED = "interrupted by the user"
#: How long to wait before retrying to (un)install while a kernel message handler runs.
RETRY_S = 0.05


def kernel_loop() -> Any:
    """The running ipykernel's main-thread event loop (tornado ``IOLoop``), or ``None``.

    Returns:
        The kernel's ``io_loop``; ``None`` outside a kernel or without IPython.

    Example:
        >>> kernel_loop() is None          # plain Python, no kernel
        True
    """
    try:
        from IPython import get_ipython  # lazy: this module is pure stdlib outside a kernel
    except ImportError:
        return None
    kernel = getattr(get_ipython(), "kernel", None)
    return getattr(kernel, "io_loop", None)


class InterruptBridge:
    """While armed, SIGINT calls ``on_interrupt()`` (then the previous handler).

    Also a context manager: ``with InterruptBridge(...):`` arms on entry and disarms on
    exit (an exception included).

    Args:
        on_interrupt: called on the main thread, from the signal handler; keep it
            tiny and thread-safe (``StopFlag.set``, a ``threading.Event``).
        inline: for work that runs on the arming thread itself (``tfwb.sweep`` in a cell,
            a command): ``arm()`` on the main thread installs at once, kernel or not
            (ipykernel puts its own handler back after the cell anyway), and only a second
            SIGINT goes on to the previous handler (``KeyboardInterrupt``). So the first
            one stops the run at its next step boundary instead of raising wherever it
            lands (a ``KeyboardInterrupt`` raised in a garbage-collection callback is
            printed and lost); a second one still gets out of a step that hangs.

    Example:
        >>> from tfwb.observers import StopFlag
        >>> flag = StopFlag()
        >>> with InterruptBridge(lambda: flag.set("interrupted by the user", interrupted=True)) as bridge:
        ...     bridge.installed           # main thread, no kernel: installed at once
        True
        >>> bridge.installed
        False
    """

    def __init__(self, on_interrupt: Callable[[], None], *, inline: bool = False) -> None:
        self._on_interrupt = on_interrupt
        self._inline = inline
        self._interrupts = 0                  # SIGINTs since arm() (inline: the second one raises)
        self._armed = False
        self._previous: Any = None
        self._handler = self._handle          # one object, so getsignal() can be compared with `is`
        self._lock = threading.Lock()

    @property
    def armed(self) -> bool:
        """True between ``arm()`` and ``disarm()``."""
        return self._armed

    def __enter__(self) -> "InterruptBridge":
        self.arm()
        return self

    def __exit__(self, *exc: Optional[object]) -> None:
        self.disarm()

    @property
    def installed(self) -> bool:
        """True while the SIGINT handler is this bridge's."""
        return signal.getsignal(signal.SIGINT) is self._handler

    def arm(self) -> bool:
        """Start turning SIGINT into ``on_interrupt()``.

        Returns:
            False where that cannot be done (not in a kernel and not on the main thread).
        """
        self._armed = True
        self._interrupts = 0
        if self._inline and threading.current_thread() is threading.main_thread():
            self._install(now=True)
            return True
        return self._on_main_thread(self._install)

    def disarm(self) -> None:
        """Stop; the previous handler comes back (from the main thread, as soon as it is free)."""
        self._armed = False
        if self._inline and threading.current_thread() is threading.main_thread():
            self._uninstall(now=True)
            return
        self._on_main_thread(self._uninstall)

    # -- main thread only ---------------------------------------------------
    def _handle(self, signum: int, frame: Any) -> None:
        if self._armed:
            self._on_interrupt()
            self._interrupts += 1
            if self._inline and self._interrupts == 1:
                return                         # the run stops at its next step; a second SIGINT raises
        previous = self._previous
        if callable(previous) and previous is not self._handler:
            previous(signum, frame)

    def _install(self, now: bool = False) -> None:
        with self._lock:
            if not self._armed or self.installed:
                return
            current = signal.getsignal(signal.SIGINT)
            if current is signal.default_int_handler and not now and self._retry(self._install):
                return                         # a kernel message handler is running; after it
            self._previous = current
            signal.signal(signal.SIGINT, self._handler)

    def _uninstall(self, now: bool = False) -> None:
        with self._lock:
            if self._armed:
                return                         # armed again meanwhile
            current = signal.getsignal(signal.SIGINT)
            if current is signal.default_int_handler and not now and self._retry(self._uninstall):
                return                         # the handler running will restore ours; then
            if current is self._handler:
                signal.signal(signal.SIGINT, self._previous if self._previous is not None
                              else signal.default_int_handler)
            self._previous = None

    # -- scheduling ------------------------------------------------------------
    @staticmethod
    def _retry(fn: Callable[[], None]) -> bool:
        """In a kernel, run ``fn`` again shortly (returns True); outside one, False."""
        loop = kernel_loop()
        if loop is None:
            return False
        loop.call_later(RETRY_S, fn)
        return True

    @staticmethod
    def _on_main_thread(fn: Callable[[], None]) -> bool:
        loop = kernel_loop()
        if loop is not None:
            loop.add_callback(fn)             # thread-safe; runs between message handlers
            return True
        if threading.current_thread() is threading.main_thread():
            fn()
            return True
        return False

