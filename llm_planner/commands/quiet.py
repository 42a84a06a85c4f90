"""Library chatter off the terminal: vLLM's and torch's warnings, model-loading progress bars,
ROS 2 node logs and Python warnings go to a log file; the command's own progress bars, tables,
messages and errors stay on the terminal. `--verbose` leaves everything where it was.

Libraries write both from Python (sys.stderr, logging, warnings) and from C/C++ (file
descriptor 2), so both are pointed at the log; the command's consoles get a copy of the
terminal's descriptor made before that.
"""

from __future__ import annotations

import logging
import os
import sys
import traceback
from pathlib import Path

from rich.console import Console


def route_library_output(log_path: Path, consoles: list[Console]) -> Path:
    """From now on, libraries write to `log_path`; `consoles` (and errors) to the terminal."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("VLLM_CONFIGURE_LOGGING", "0")  # vLLM's loggers then reach the root logger
    log = open(log_path, "a", buffering=1)  # noqa: SIM115 -- open for the rest of the process
    terminal = os.fdopen(os.dup(2), "w", buffering=1)
    sys.stderr.flush()
    os.dup2(log.fileno(), 2)
    sys.stderr = log
    for console in consoles:
        console.file = terminal
    logging.captureWarnings(True)
    handler = logging.StreamHandler(log)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.getLogger().addHandler(handler)
    previous_hook = sys.excepthook

    def show_crash(kind, value, tb) -> None:  # a crash is shown, not only logged
        terminal.write("".join(traceback.format_exception(kind, value, tb)))
        previous_hook(kind, value, tb)

    sys.excepthook = show_crash
    return log_path
