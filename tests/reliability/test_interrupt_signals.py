"""Issue 16, item 9: an interrupt prints one line and no traceback, also when SIGINT and SIGTERM arrive
together (a terminal's Ctrl-C reaches every process of the sweep, then the launcher terminates its jobs)."""

from __future__ import annotations

import subprocess
import sys

CHILD = """
import os, signal, sys, time
from opsd_sweep.interrupt import Interrupted, exit_code, signals_raise
try:
    with signals_raise():
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
        os.kill(os.getpid(), signal.SIGINT)
        os.kill(os.getpid(), signal.SIGTERM)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM})  # both pending at once
        time.sleep(5)
except Interrupted as err:
    for _ in range(3):  # the clean-up: each call checks pending signals again
        time.sleep(0.01)
    print(err)
    sys.exit(exit_code(err))
"""


def test_two_signals_at_once_interrupt_once_without_a_traceback():
    done = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=60)
    assert done.returncode == 130, done.stderr
    assert done.stdout.strip() == "interrupted by SIGINT"
    assert done.stderr == "", done.stderr
