"""The command line, ``python -m tfwb``: options built from the knob table, one terminal
drawer, the commands (run, worker, knobs, hardware, report, sweep)."""
from tfwb.cli.commands import main

__all__ = ["main"]
