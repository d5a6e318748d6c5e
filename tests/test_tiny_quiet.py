"""Every profile=tiny command trains the tiny world's tokenizer (the vocab_size check, tiny.setting_problems, runs
with the other value checks): it must do so without the `tokenizers` trainer's progress bars, which drew 12 lines
in a terminal and left 3 blank lines in a log (issue 48)."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

TINY_CHECKS = """
from opsd_sweep.config import load_run_config
from opsd_sweep.tiny import setting_problems
from tests.conftest import compose
assert setting_problems(load_run_config(compose(["profile=tiny"])).tiny) == []
"""

BARS = """
from tokenizers import Tokenizer, models, trainers
Tokenizer(models.BPE()).train_from_iterator(["1+2*3=7"] * 50, trainers.BpeTrainer(vocab_size=300))
"""


def in_a_terminal(code: str) -> bytes:
    """What `python -c code` writes to a terminal (stdout and stderr on one pseudo-terminal)."""
    leader, follower = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=REPO, stdin=subprocess.DEVNULL, stdout=follower,
                            stderr=follower, env={**os.environ, "TOKENIZERS_PARALLELISM": "false"})
    os.close(follower)
    out = b""
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        out += chunk
    os.close(leader)
    assert proc.wait(120) == 0, out.decode(errors="replace")[-2000:]
    return out


def test_the_tiny_value_checks_train_the_tokenizer_without_progress_bars():
    assert b"Pre-processing sequences" in in_a_terminal(BARS)  # the premise: the trainer's default draws them
    assert in_a_terminal(TINY_CHECKS) == b""
