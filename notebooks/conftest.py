"""nbval settings for the chapters (pytest reads this when it collects notebooks/).

Small mode and quiet TF for the kernels (they inherit this environment); rich
reprs and stderr are never compared; nbval's hard-coded 5 s wait for output after
each cell's reply is raised for slow cells.
"""
import os

os.environ.setdefault("TFWB_FAST", "1")
os.environ.setdefault("MPLBACKEND", "Agg")


def pytest_collectstart(collector):
    if collector.fspath and str(collector.fspath).endswith(".ipynb"):
        collector.skip_compare += ("text/html", "stderr", "application/javascript")


def pytest_collection_modifyitems(items):
    for item in items:
        if hasattr(item, "output_timeout"):
            item.output_timeout = 120
