"""The tiny world (built once per test session, shared with the rest of the suite) and eval configs on it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from opsd_sweep.config import RunConfig, load_run_config
from opsd_sweep.tiny import ensure_tiny_assets
from tests.conftest import REPO, compose


@pytest.fixture(scope="session")
def tiny_world(cache_dir) -> Path:
    ensure_tiny_assets(load_run_config(compose(["profile=tiny", f"cache_dir={cache_dir}"])).tiny)
    return cache_dir


def eval_overrides(cache: Path, results: Path, *extra: str) -> list[str]:
    """profile=tiny, shrunk to seconds: 8 problems x 2 samples unless `extra` says otherwise."""
    return ["profile=tiny", f"cache_dir={cache}", f"results_root={results}", "eval.max_problems=8",
            "eval.n_samples=2", "eval.shard_size=4", *extra]


def eval_run(cache: Path, results: Path, *extra: str) -> RunConfig:
    return load_run_config(compose(eval_overrides(cache, results, *extra)))


def evaluate_cli(args: list[str], **popen) -> subprocess.Popen:
    """`python -m opsd_sweep.evaluate ARGS` in a subprocess (stdout and stderr merged)."""
    return subprocess.Popen([sys.executable, "-m", "opsd_sweep.evaluate", *args], cwd=REPO, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            env=dict(os.environ, PYTHONUNBUFFERED="1"), **popen)

