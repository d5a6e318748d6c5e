"""A phase that needs the GPU for an engine of its own (the evaluation's vLLM engine) runs in a process of its
own beside the phase worker, which stays: the next cycle trains on what the worker kept instead of a new
worker building and compiling it all again (145 s of an H100 cycle). A phase that needs a fresh worker
still ends this one."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from opsd_sweep.worker import client

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def worker(tmp_path):
    address = str(tmp_path / "worker.sock")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(address)
    listener.listen()
    proc = subprocess.Popen([sys.executable, "-m", "tests.worker.phase_harness", str(listener.fileno())],
                            pass_fds=(listener.fileno(),), cwd=ROOT)
    listener.close()
    yield address, proc
    proc.kill()
    proc.wait()


def send(worker, phase: str, run_dir: Path) -> int:
    address, proc = worker
    return client.run_phase((address, proc.pid), phase, str(run_dir), dict(os.environ), str(run_dir / f"{phase}.log"))


def test_an_evaluation_on_an_engine_of_its_own_leaves_the_worker_and_what_it_keeps(worker, tmp_path):
    (tmp_path / "needs").write_text("beside")
    assert send(worker, "train", tmp_path) == 0
    assert send(worker, "evaluate", tmp_path) == client.BESIDE
    assert "this worker stays for the next cycle" in (tmp_path / "evaluate.log").read_text()
    assert send(worker, "train", tmp_path) == 0  # the same worker answers: a gone one raises WorkerDied
    assert (tmp_path / "trained").read_text().split() == ["built", "kept"]


def test_a_phase_that_needs_a_fresh_worker_still_ends_this_one(worker, tmp_path):
    (tmp_path / "needs").write_text("fresh")
    assert send(worker, "evaluate", tmp_path) == client.FRESH_PROCESS
    assert worker[1].wait(timeout=120) == client.FRESH_PROCESS
