"""tfwb.interrupts: SIGINT -> a callback while armed, installed and removed the way a kernel allows."""
import signal

import pytest

from tfwb import interrupts


# -- the SIGINT bridge, with a stand-in for the kernel's event loop ----------------------------

class FakeLoop:
    """Collects callbacks the way the kernel's io_loop would run them between messages."""

    def __init__(self):
        self.soon, self.later = [], []

    def add_callback(self, fn):
        self.soon.append(fn)

    def call_later(self, delay, fn):
        self.later.append(fn)

    def run(self):
        while self.soon or self.later:
            fns, self.soon, self.later = self.soon + self.later, [], []
            for fn in fns:
                fn()


@pytest.fixture
def kernel(monkeypatch):
    loop = FakeLoop()
    monkeypatch.setattr(interrupts, "kernel_loop", lambda: loop)
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)      # what ipykernel leaves between messages
    yield loop
    signal.signal(signal.SIGINT, previous)


def test_bridge_installs_between_messages_and_restores_the_kernels_handler(kernel):
    hits = []
    bridge = interrupts.InterruptBridge(lambda: hits.append(1))
    bridge.arm()
    assert not bridge.installed                  # only from the loop, never inside a handler
    kernel.run()
    assert bridge.installed
    signal.getsignal(signal.SIGINT)(signal.SIGINT, None)
    assert hits == [1]                           # SIG_IGN before: nothing chained, nothing raised
    bridge.disarm()
    kernel.run()
    assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN


def test_bridge_waits_while_a_kernel_message_handler_holds_sigint(kernel):
    bridge = interrupts.InterruptBridge(lambda: None)
    signal.signal(signal.SIGINT, signal.default_int_handler)      # ipykernel's pre_handler_hook
    bridge.arm()
    kernel.soon.pop()()
    assert not bridge.installed and len(kernel.later) == 1         # retried, not stolen
    signal.signal(signal.SIGINT, signal.SIG_IGN)                   # post_handler_hook
    kernel.run()
    assert bridge.installed
    bridge.disarm()
    kernel.run()
    assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN


def test_a_disarmed_bridge_does_not_call_back():
    hits, chained = [], []
    previous = signal.signal(signal.SIGINT, lambda s, f: chained.append(s))
    try:
        bridge = interrupts.InterruptBridge(lambda: hits.append(1))
        bridge.arm()                                                # main thread, no kernel: at once
        handler = signal.getsignal(signal.SIGINT)
        bridge._armed = False                                       # the run ended; not uninstalled yet
        handler(signal.SIGINT, None)
        assert hits == [] and chained == [signal.SIGINT]
        bridge.disarm()
        assert signal.getsignal(signal.SIGINT) is not handler
    finally:
        signal.signal(signal.SIGINT, previous)


def test_as_a_context_manager_it_arms_and_disarms_even_on_an_error():
    from tfwb.observers import StopFlag

    flag, chained = StopFlag(), []
    previous = lambda s, f: chained.append(s)  # noqa: E731 - the handler that was there before
    before = signal.signal(signal.SIGINT, previous)
    try:
        with pytest.raises(RuntimeError):
            with interrupts.InterruptBridge(lambda: flag.set("interrupted by the user", interrupted=True)) as bridge:
                assert bridge.armed and bridge.installed
                signal.getsignal(signal.SIGINT)(signal.SIGINT, None)
                raise RuntimeError("the run failed")
        assert not bridge.armed and signal.getsignal(signal.SIGINT) is previous
        assert flag.is_set and flag.interrupted and chained == [signal.SIGINT]
    finally:
        signal.signal(signal.SIGINT, before)


def test_the_ui_module_is_gone():
    import importlib

    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("tfwb.ui.interrupt")
