"""The consoles the commands print to."""

from __future__ import annotations

import sys

from rich.console import Console


def stdout() -> Console:
    # Piped output (CI logs, saved reports) gets wide lines: at 80 columns rich cuts table
    # headers and robot types short.
    return Console() if sys.stdout.isatty() else Console(width=150)
