"""The rich console the command-line tables print to."""

from __future__ import annotations

import sys

from rich.console import Console

PIPE_WIDTH = 200  # rich assumes 80 columns off a terminal, wrapping every run name of a table in two


def table_console() -> Console:
    """A terminal's own width; a wide one for a log file or a pipe (`status | less`, `summary > log`)."""
    return Console(width=None if sys.stdout.isatty() else PIPE_WIDTH)
