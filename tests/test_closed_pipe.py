"""A reader that stops early (`status --json | head`, `summary ROOT | head`) ends the command with exit status 1
and nothing on stderr, as rich ends a table printed into a closed pipe. `status --json` printed a BrokenPipeError
traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from opsd_sweep.testing.rundirs import draw_correct, write_run


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("pipe")
    rng = np.random.default_rng(0)
    for lr in (5e-6, 1e-5):
        for seed in (1, 2, 3):
            write_run(root / "g", learning_rate=lr, seed=seed, correct=draw_correct(rng, np.linspace(-2, 2, 10), 0, 4),
                      rng=rng)
    return root


@pytest.mark.parametrize("command", [["opsd_sweep.status", "{root}", "--json"],
                                     ["opsd_sweep.summary", "{root}/g", "--no-plots", "--anchor", "none"]])
def test_a_reader_that_closed_the_pipe_ends_the_command_quietly(results, command):
    reader, writer = os.pipe()
    os.close(reader)  # closed before the command starts: its first write finds no reader, whatever the timing
    try:
        done = subprocess.run([sys.executable, "-m", *[part.format(root=results) for part in command]],
                              stdout=writer, stderr=subprocess.PIPE, text=True, timeout=300)
    finally:
        os.close(writer)
    assert done.stderr.count("Traceback") == 0 and "BrokenPipeError" not in done.stderr, done.stderr[-2000:]
    assert done.returncode == 1
