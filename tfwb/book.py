"""The book's structure, as a reader's chapter uses it: chapters, their measured times, the last line.

``tfwb.chapter()`` (a chapter's setup cell) reads the chapter and its recorded time from here
(``CHAPTER_TIMES``, measured by ``benchmarks/chapter_times.py``); the runner reads ``TPU_PAIR``.
Writing the book (the badge and Colab install cell every chapter starts with, the repository
slug they are built from, stripping outputs before a commit) is an author's job:
``tools/notebooks.py``, outside the installed package.

Pure: no TensorFlow.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Optional, Tuple, Union




@dataclass(frozen=True)
class Chapter:
    number: str
    path: str
    title: str


CHAPTERS: Tuple[Chapter, ...] = (
    Chapter("00", "notebooks/00_measuring.ipynb", "Measuring training honestly"),
    Chapter("01", "notebooks/01_input_pipeline.ipynb", "The input pipeline"),
    Chapter("02", "notebooks/02_graphs.ipynb", "Graphs: tf.function, retracing, XLA"),
    Chapter("03", "notebooks/03_mixed_precision.ipynb", "Mixed precision"),
    Chapter("04", "notebooks/04_optimizers_and_clipping.ipynb", "Optimizers, learning rate, gradient clipping, weight decay"),
    Chapter("05", "notebooks/05_devices_and_strategies.ipynb", "Devices and distribution strategies"),
    Chapter("06", "notebooks/06_profiling_and_tensorboard.ipynb", "Profiling and TensorBoard"),
    Chapter("07", "notebooks/07_capstone.ipynb", "Capstone: every knob on one workload"),
    Chapter("08", "notebooks/08_your_own_model.ipynb", "Your own model"),
)


#: No chapter may take longer than this at the size ``size="auto"`` picks (issue 18: 10 minutes).
CHAPTER_BUDGET_S = 600.0


@dataclass(frozen=True)
class ChapterTime:
    """How long a chapter took from its first cell to its last, measured on a named machine.

    Attributes:
        full_s: seconds at full size (``jupyter nbconvert --execute``, nothing else running).
        small_s: seconds in small mode (``TFWB_FAST=1``), same machine.
        step_s: that machine's full-size ``images`` step (``tfwb.choose_size``'s probe) in the
            full-size run: what the reader's own step is scaled against.
        machine: ``tfwb.hardware.describe`` of that machine.
    """

    full_s: float
    small_s: float
    step_s: float
    machine: str

    def full_here_s(self, step_s: float) -> float:
        """The full-size time scaled to a machine whose full-size ``images`` step takes ``step_s``.

        An estimate: the chapter's time is taken as proportional to the step (its fixed costs,
        TensorFlow's start and tracing, do not scale, so a much faster machine reads a little
        low and a much slower one a little high).

        Example:
            >>> ChapterTime(300.0, 60.0, 0.2, "m").full_here_s(0.4)
            600.0
        """
        return self.full_s * step_s / self.step_s


#: Each chapter's measured time (``benchmarks/chapter_times.py``; results/chapter_times.md), measured
#: 2026-11-26 one chapter at a time on the 2-core build machine with nothing else running (its full-size
#: step read 0.30-0.34 s in those runs). Chapter 03's float16 runs are emulated on that CPU (2.5 s a
#: full-size step against float32's 1.3 s), which is most of its 392 s.
_BUILD = "a 2-core AMD EPYC (AVX-512) build machine"
CHAPTER_TIMES: Mapping[str, Optional[ChapterTime]] = {
    "00": ChapterTime(403.0, 55.0, 0.32, _BUILD),
    "01": ChapterTime(557.0, 114.0, 0.32, _BUILD),
    "02": ChapterTime(70.0, 38.0, 0.34, _BUILD),
    "03": ChapterTime(392.0, 39.0, 0.32, _BUILD),
    "04": ChapterTime(189.0, 48.0, 0.31, _BUILD),
    "05": ChapterTime(37.0, 21.0, 0.31, _BUILD),
    "06": ChapterTime(140.0, 26.0, 0.30, _BUILD),
    "07": ChapterTime(78.0, 40.0, 0.31, _BUILD),
    "08": ChapterTime(237.0, 54.0, 0.31, _BUILD),
}


def chapter_time(number: Union[str, int]) -> Optional[ChapterTime]:
    """The recorded time of chapter ``number`` (None when it was never measured)."""
    return CHAPTER_TIMES.get(find_chapter(number).number)


def find_chapter(number: Union[str, int]) -> Chapter:
    """The chapter numbered ``number`` (``"00"``, ``"07"``; an int or ``"7"`` works too).

    Raises:
        ValueError: naming the number and the chapters there are.

    Example:
        >>> find_chapter("02").title
        'Graphs: tf.function, retracing, XLA'
        >>> find_chapter(7).path
        'notebooks/07_capstone.ipynb'
    """
    key = f"{number:02d}" if isinstance(number, int) and not isinstance(number, bool) else str(number).zfill(2)
    for chapter in CHAPTERS:
        if chapter.number == key:
            return chapter
    raise ValueError(f"chapter={number!r} is not allowed; chapter must be one of "
                     f"{', '.join(c.number for c in CHAPTERS)}")


def closing_line(elapsed_s: float, fast: bool, machine: str, recorded: Optional[ChapterTime] = None,
                 step_s: Optional[float] = None) -> str:
    """The line a chapter ends with: how long it took, in which mode, on which machine, and against what.

    The chapter's recorded time (``CHAPTER_TIMES``) was measured on one machine; this line says how
    this machine compared with it, from the two measurements, so no estimate printed at the start
    stands uncorrected. At full size with this machine's step known (``step_s``), the comparison is
    with the recorded time scaled by the two machines' steps (what the setup estimated).

    Args:
        elapsed_s: seconds since the chapter's setup cell started.
        fast: True in small mode (``TFWB_FAST=1`` or ``size="auto"`` picked small).
        machine: ``tfwb.hardware.describe(hw)``.
        recorded: the chapter's recorded time, if any.
        step_s: this machine's full-size ``images`` step, when the setup measured it.

    Example:
        >>> closing_line(83.4, True, "2 CPU cores, 8 GiB RAM, no GPU, local")
        'this chapter took 83 s here (small mode, 2 CPU cores, 8 GiB RAM, no GPU, local)'
        >>> print(closing_line(86.0, True, "M", ChapterTime(300.0, 40.0, 0.3, "the build machine")))
        this chapter took 86 s here (small mode, M); it took 40 s on the build machine: 2.15x as long here
    """
    line = f"this chapter took {elapsed_s:.0f} s here ({'small mode' if fast else 'full size'}, {machine})"
    if recorded is None:
        return line
    if fast:
        then, what = recorded.small_s, f"it took {recorded.small_s:.0f} s on {recorded.machine}"
    elif step_s is not None:
        then = recorded.full_here_s(step_s)
        what = f"the estimate from {recorded.machine}, scaled by this machine's step, was {then:.0f} s"
    else:
        then, what = recorded.full_s, f"it took {recorded.full_s:.0f} s on {recorded.machine}"
    if then <= 0:
        return line
    ratio = elapsed_s / then
    how = "about as long here" if 0.9 <= ratio <= 1.1 else f"{ratio:.2f}x as long here"
    return f"{line}; {what}: {how}"


#: The TensorFlow that drives a TPU, and the libtpu its release pairs with. PyPI's ``tensorflow``
#: has no TPU support and ``tensorflow-tpu`` stops at 2.20.0. The pair is TensorFlow's own: the
#: ``tensorflow_tpu-2.20.0`` wheel's metadata (read with ``pip download``) requires
#: ``libtpu~=0.0.14``, the libtpu its release was built against (tensorflow/tools/pip_package/
#: setup.py.tpl's ``LATEST_RELEASE_LIBTPU_VERSION``; earlier snapshots of that file pin it exactly,
#: ``libtpu==0.0.13``). ``~=`` also admits Colab's libtpu 0.0.21.1, built for JAX, with which
#: TensorFlow finds no TPU ("No TPU platform found": googlecolab/colabtools issues 5174, 5419),
#: so the cell installs exactly the pair. Both are on PyPI (checked with pip for Python 3.13).
TPU_PAIR = {"tensorflow-tpu": "2.20.0", "libtpu": "0.0.14"}
