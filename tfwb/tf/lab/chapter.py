"""A chapter's session: the setup every chapter starts with, and the line it ends with.

Every chapter of the book starts the same way: TensorFlow imported without its
start-up log lines, the CPU split into logical devices while that is still possible
(``tfwb.setup_devices``), the workloads' size chosen by measuring this machine
(``tfwb.choose_size``), the machine described as TensorFlow can use it
(``tfwb.detect_hardware``: a GPU that NVML sees but TensorFlow cannot use is said, with
the reason and the fix, in the machine's line, the chapter's first output). It ends by
saying how long it took here. ``tfwb.chapter("NN")`` does the first and returns a
``ChapterSession``; the chapter prints it, and prints ``ch.done()`` in its last cell::

    ch = tfwb.chapter("00")      # the setup cell
    print(ch)                     # the machine, and what size="auto" means here
    ...
    print(ch.done())              # "this chapter took 83 s here (small mode, ...)"

The clock starts when ``tfwb.chapter`` is called (TensorFlow itself is imported when
``tfwb.chapter`` is first looked up, just before). Nothing is printed here: the
session returns its lines, the chapter prints them.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable, List, Optional, Union

import tensorflow as tf

from tfwb import book, hardware, stats
from tfwb.tf.lab.sizing import SizeChoice, choose_size
from tfwb.tf.runner.devices import machine, setup_devices
from tfwb.utilization.probes import other_programs_cpu_pct


@dataclass
class ChapterSession:
    """What a chapter's setup found, and its clock.

    Attributes:
        chapter: the chapter (``tfwb.book.Chapter``: number, path, title).
        hw: the machine, as ``tfwb.detect_hardware()`` returns it: ``hw.gpus`` are the GPUs
            TensorFlow can use, ``hw.gpu_problem`` why a GPU NVML sees is not one of them.
        size: what ``size="auto"`` means here, and why (``tfwb.tf.lab.sizing.SizeChoice``).
        cpu_devices: the logical CPU devices TensorFlow sees (2 after the split on a
            machine without a GPU, for ``strategy="mirrored"``).
        started_s: the clock's reading when the setup began.
        clock: seconds, monotonic (default ``time.perf_counter``; tests pass a fake).
        other_cpu_pct: the share of the cores (0-100) other programs used during the setup
            (``tfwb.utilization.other_programs_cpu_pct``), ``None`` when unreadable. At
            ``tfwb.stats.BUSY_OTHER_CPU_PCT`` or more, the setup says to expect longer than the
            estimate, and that comparisons of separate runs will say "cannot tell".

    Example:
        >>> ch = tfwb.chapter("00")   # doctest: +SKIP
        >>> ch.fast, ch.size.size     # doctest: +SKIP
        (True, 'small')
    """

    chapter: book.Chapter
    hw: hardware.Machine
    size: SizeChoice
    cpu_devices: int
    started_s: float
    clock: Callable[[], float] = field(default=time.perf_counter, repr=False)
    other_cpu_pct: Optional[float] = None

    @property
    def fast(self) -> bool:
        """True when the small sizes were chosen (the chapters then run fewer steps too)."""
        return self.size.size == "small"

    @property
    def has_gpu(self) -> bool:
        """True when TensorFlow can use a GPU (NVML may see one it cannot: ``hw.gpu_problem``)."""
        return bool(self.hw.gpus)

    def lines(self) -> List[str]:
        """What the setup cell shows: the machine, the size and why, the CPU split without a GPU."""
        out = [f"{self.chapter.number} · {self.chapter.title}", hardware.describe(self.hw), str(self.size)]
        if self.size.expected:
            out.append(self.size.expected)
        busy = busy_line(self.other_cpu_pct)
        if busy:
            out.append(busy)
        if not self.has_gpu:
            out.append(f"{self.cpu_devices} logical CPU devices (no GPU: strategy='mirrored' runs its "
                       "replicas on them)")
        return out

    def __str__(self) -> str:
        return "\n".join(self.lines())

    def elapsed_s(self) -> float:
        """Seconds since the setup began."""
        return self.clock() - self.started_s

    def done(self) -> str:
        """The chapter's last line: how long it took here, in which mode, on which machine.

        Example:
            >>> print(ch.done())   # doctest: +SKIP
            this chapter took 83 s here (small mode, 2 CPU cores (AMD EPYC 9B14, AVX-512), 8 GiB RAM, no GPU, local); it took 55 s on ...: 1.51x as long here
        """
        return book.closing_line(self.elapsed_s(), self.fast, hardware.describe(self.hw),
                                 book.chapter_time(self.chapter.number), self.size.step_s)


def busy_line(other_cpu_pct: Optional[float]) -> str:
    """What a chapter's setup says when other programs are busy on this machine; ``""`` otherwise.

    Example:
        >>> busy_line(3.0)
        ''
        >>> print(busy_line(47.0))
        Other programs are using 47 % of the CPU right now: expect this chapter to take longer than any estimate above, and comparisons of two separate runs to say "cannot tell" (the interleaved comparisons still decide).
    """
    if other_cpu_pct is None or other_cpu_pct < stats.BUSY_OTHER_CPU_PCT:
        return ""
    return (f"Other programs are using {other_cpu_pct:.0f} % of the CPU right now: expect this chapter to take "
            "longer than any estimate above, and comparisons of two separate runs to say \"cannot tell\" "
            "(the interleaved comparisons still decide).")


def chapter(number: Union[str, int], *, cpu_replicas: Optional[int] = None,
            clock: Callable[[], float] = time.perf_counter) -> ChapterSession:
    """Set up a chapter: devices, size, machine; returns the session the chapter prints.

    In order: starts the clock; splits the CPU into ``cpu_replicas`` logical devices when
    there is no GPU and TensorFlow's runtime has not started (``tfwb.setup_devices``);
    sets TensorFlow's Python logger to WARNING (a strategy's set-up would fill cells with
    INFO lines); picks the workloads' size (``tfwb.choose_size``: small under
    ``TFWB_FAST=1``, else measured); describes the machine as TensorFlow can use it
    (``tfwb.detect_hardware``).

    Args:
        number: the chapter, ``"00"`` to ``"07"`` (see ``tfwb.book.CHAPTERS``).
        cpu_replicas: logical CPU devices to make (default: ``tfwb.setup_devices``'s, 2).
        clock: seconds, monotonic (default ``time.perf_counter``).

    Returns:
        A ChapterSession: ``.hw``, ``.size``, ``.fast``, ``.cpu_devices``; ``str()`` of it
        is what the setup cell prints, ``.done()`` the chapter's last line.

    Raises:
        ValueError: for a chapter number the book does not have (checked before any work),
            or a bad ``cpu_replicas``.

    Example:
        >>> ch = tfwb.chapter("00")   # doctest: +SKIP
        >>> print(ch)                 # doctest: +SKIP
        00 · Measuring training honestly
        2 CPU cores (AMD EPYC 9B14, AVX-512), 8 GiB RAM, no GPU, local
        size="auto" means 'small' here: TFWB_FAST=1 asks for the small sizes (nothing measured)
        2 logical CPU devices (no GPU: strategy='mirrored' runs its replicas on them)
    """
    started_s = clock()
    found = book.find_chapter(number)
    cpu_devices = setup_devices(cpu_replicas)       # before any other TensorFlow work
    tf.get_logger().setLevel("WARNING")
    size = choose_size(chapter=found.number)
    hw = machine()
    return ChapterSession(chapter=found, hw=hw, size=size, cpu_devices=cpu_devices,
                          started_s=started_s, clock=clock, other_cpu_pct=other_programs_cpu_pct(0.5))
