"""Ctrl-C and SIGTERM as one exception, so that a cycle marks its run interrupted and a sweep stops its
jobs, prints one line and exits 130 (SIGINT) or 143 (SIGTERM) instead of dying mid-write or with a
traceback."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator


class Interrupted(KeyboardInterrupt):
    """SIGINT or SIGTERM arrived. A KeyboardInterrupt, so code that stops on Ctrl-C stops on both."""

    def __init__(self, signum: int):
        super().__init__(f"interrupted by {signal.Signals(signum).name}")
        self.signum = signum

    def __reduce__(self):  # pickled with its signal (a SLURM job's result, a worker's answer)
        return Interrupted, (self.signum,)

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


def exit_code(err: KeyboardInterrupt) -> int:
    """The shell's exit code for an interrupt: 128 + the signal (a bare KeyboardInterrupt is SIGINT)."""
    return err.exit_code if isinstance(err, Interrupted) else 128 + signal.SIGINT


def _raise(signum: int, frame: object) -> None:
    # The first signal interrupts; repeats (Ctrl-C pressed twice, the launcher's terminate after the
    # terminal's SIGINT) must not cut short the status writes of the clean-up.
    for name in (signal.SIGINT, signal.SIGTERM):
        signal.signal(name, _ignore_repeat)
    raise Interrupted(signum)


def _ignore_repeat(signum: int, frame: object) -> None:
    """A Python handler, not SIG_IGN: a second signal already received when the first one's handler
    runs would otherwise meet SIG_IGN and print CPython's 'Signal 15 ignored due to race condition'
    traceback."""


@contextlib.contextmanager
def signals_raise() -> Iterator[None]:
    """Within the block, SIGINT and SIGTERM raise Interrupted; outside, the handlers are as before.

    Only signals that nobody else handles are taken: inside a SLURM job submitit ignores SIGTERM on
    purpose (it precedes a requeue), and that stays so. No-op outside the main thread."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    defaults = {signal.SIGINT: signal.default_int_handler, signal.SIGTERM: signal.SIG_DFL}
    taken = {name: signal.getsignal(name) for name, default in defaults.items()
             if signal.getsignal(name) in (default, _raise, _ignore_repeat)}
    for name in taken:
        signal.signal(name, _raise)
    try:
        yield
    finally:
        for name, previous in taken.items():
            signal.signal(name, previous)
