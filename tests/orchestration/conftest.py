"""Helpers of the orchestration tests: shrunk tiny cycles, sweeps in the background, run-dir reading."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import REPO

# Tiny cycles cut to the bone: a few steps, 2 problems x 1 sample, short completions.
TINY = ["profile=tiny", "train.save_steps=1", "eval.max_problems=2", "eval.n_samples=1",
        "eval.max_new_tokens=12", "rollout.max_new_tokens=12"]

BUILD_TINY = """
import sys
from tests.conftest import compose
from opsd_sweep.config import load_run_config
from opsd_sweep.tiny import ensure_tiny_assets
ensure_tiny_assets(load_run_config(compose(["profile=tiny", "cache_dir=" + sys.argv[1]])).tiny)
"""


@pytest.fixture(scope="session")
def tiny_cache(cache_dir) -> Path:
    """The session's cache with the tiny world built (once, before any sweep races to build it)."""
    subprocess.run([sys.executable, "-c", BUILD_TINY, str(cache_dir)], cwd=REPO, check=True, timeout=900)
    return cache_dir


def sweep_env(results: Path, cache: Path) -> dict:
    return dict(os.environ, OPSD_RESULTS=str(results), OPSD_CACHE=str(cache))


def start_sweep(args: list[str], results: Path, cache: Path, log: Path) -> subprocess.Popen:
    """`python -m opsd_sweep ARGS` in the background, in its own session (so it can be killed whole)."""
    with open(log, "w") as handle:  # the child keeps its own copy of the descriptor
        return subprocess.Popen([sys.executable, "-m", "opsd_sweep", *args], cwd=REPO,
                                env=sweep_env(results, cache), stdout=handle, stderr=subprocess.STDOUT, text=True,
                                start_new_session=True)


def kill_sweep(proc: subprocess.Popen) -> None:
    """kill -9 of the whole sweep: launcher, job processes and phase processes."""
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(30)


def run_dirs(results: Path) -> dict[int, Path]:
    """Run dirs of the tiny group by seed (their names end in -s<seed>-<key8>)."""
    found = {}
    for path in (results / "tiny").glob("*-s*-*"):
        found[int(path.name.rsplit("-", 2)[1].removeprefix("s"))] = path
    return found


def status(run_dir: Path) -> dict:
    try:
        return json.loads((run_dir / "status.json").read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return {}


def phase_starts(run_dir: Path, phase: str) -> int:
    """How many times a phase was started in this run dir (each start writes a header to its log)."""
    log = run_dir / "logs" / ("train.log" if phase == "train" else "eval.log")
    return log.read_text().count(f" {phase} ===") if log.exists() else 0


def steps_logged(run_dir: Path) -> list[int]:
    path = run_dir / "train" / "metrics.jsonl"
    return [json.loads(line)["step"] for line in path.read_text().splitlines()] if path.exists() else []


def has_checkpoint(run_dir: Path, step: int) -> bool:
    return (run_dir / "train" / f"checkpoint-{step}" / "trainer_state.json").exists()


def wait_until(predicate: Callable[[], bool], timeout: float, what: str, interval: float = 0.1) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)
