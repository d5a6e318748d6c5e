"""The rich console the command-line tables print to."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable

from rich.console import Console

PIPE_WIDTH = 200  # rich assumes 80 columns off a terminal, wrapping every run name of a table in two


def table_console() -> Console:
    """A terminal's own width; a wide one for a log file or a pipe (`status | less`, `summary > log`)."""
    return Console(width=None if sys.stdout.isatty() else PIPE_WIDTH)


def quiet_on_closed_pipe(main: Callable[[], int | None]) -> int | None:
    """Run a command's main; a reader that stops early (`status --json | head`) ends it with exit status 1 and no
    traceback, as rich's console ends a table printed into a closed pipe."""
    try:
        return main()
    except BrokenPipeError:
        # the interpreter flushes stdout again at exit, into the same closed pipe: point it at /dev/null first
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
