"""``python -m tfwb``: the command line (``tfwb.cli``)."""
from tfwb.cli import main

raise SystemExit(main())
