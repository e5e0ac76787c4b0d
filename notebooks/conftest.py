"""nbval settings for the chapters (pytest reads this when it collects notebooks/).

Small mode and quiet TF for the kernels (they inherit this environment); rich
reprs and stderr are never compared; nbval's hard-coded 5 s wait for output after
each cell's reply is raised for slow cells.

Each chapter's kernel starts in an empty folder of its own, as Colab opens one chapter
in ``/content`` with only the installed package: a chapter that needs a file or folder
another chapter (or the repository) made fails here, not on a reader's first run.
"""
import os
import tempfile

import nbval.plugin

os.environ.setdefault("TFWB_FAST", "1")
os.environ.setdefault("MPLBACKEND", "Agg")


class _KernelInEmptyFolder(nbval.plugin.RunningKernel):
    """nbval's kernel, started in a new empty folder instead of the notebook's own."""

    def __init__(self, kernel_name, cwd=None, *args, **kwargs):
        super().__init__(kernel_name, tempfile.mkdtemp(prefix="tfwb-chapter-"), *args, **kwargs)


nbval.plugin.RunningKernel = _KernelInEmptyFolder


def pytest_collectstart(collector):
    if collector.fspath and str(collector.fspath).endswith(".ipynb"):
        collector.skip_compare += ("text/html", "stderr", "application/javascript")


def pytest_collection_modifyitems(items):
    for item in items:
        if hasattr(item, "output_timeout"):
            item.output_timeout = 120
