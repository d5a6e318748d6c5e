"""Shared fixtures: offline env, the real conf/ composed with Hydra's compose API, the tiny world."""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

# A suite started in the background of a non-interactive shell (`make test &`, nohup) inherits SIGINT
# ignored, and so would every sweep it starts, which then rightly leaves the signal alone (interrupt.py):
# the Ctrl-C tests need what a terminal gives. A Python handler here is reset to the default in children.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session", autouse=True)
def own_compile_cache(tmp_path_factory):
    """torch.compile's kernels cached for this test run only: a graph cached in /tmp by a run under another
    ATEN_CPU_CAPABILITY aborted the compiled-decoder test under AVX-512 ('Fatal Python error: Aborted'), and
    xdist's scheduler then hung on the lost worker. Phase processes the tests start inherit it."""
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(tmp_path_factory.getbasetemp() / "inductor")


@pytest.fixture(autouse=True)
def one_thread():
    """Tiny models on a shared 2-core machine: one intra-op thread is ~10x faster than two that spin."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def cache_dir(tmp_path_factory) -> Path:
    """One tiny-world cache per test run (built once, reused by every test). The xdist workers share it, in
    the run's temp dir above their own: its builders serialise on a lock (opsd_sweep.tiny)."""
    if "PYTEST_XDIST_WORKER" not in os.environ:
        return tmp_path_factory.mktemp("opsd_cache")
    shared = tmp_path_factory.getbasetemp().parent / "opsd_cache"
    shared.mkdir(exist_ok=True)
    return shared


@pytest.fixture(autouse=True)
def slurm_node(request, tmp_path_factory):
    """The SLURM tests share one node of 2 CPUs and count on having it to themselves: under xdist they take
    turns on a lock in the run's temp dir, whichever worker runs them."""
    if request.node.get_closest_marker("slurm") is None or "PYTEST_XDIST_WORKER" not in os.environ:
        yield
        return
    with open(tmp_path_factory.getbasetemp().parent / "slurm.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        yield


def compose(overrides: list[str] | None = None):
    """The real conf/ composed as `python -m opsd_sweep` would, without running anything."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir

    from opsd_sweep import CONF_DIR

    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return hydra_compose(config_name="config", overrides=overrides or [], return_hydra_config=False)


def run_sweep(args: list[str], results: Path, cache: Path, timeout: int = 600, env_extra: dict | None = None):
    """`python -m opsd_sweep ARGS` in a subprocess with results/cache under the test's folders."""
    env = dict(os.environ, OPSD_RESULTS=str(results), OPSD_CACHE=str(cache), **(env_extra or {}))
    return subprocess.run([sys.executable, "-m", "opsd_sweep", *args], check=False, cwd=REPO, env=env, text=True,
                          capture_output=True, timeout=timeout)


def swept_group(tmp_path_factory, cache: Path, grid: list[str], group: str) -> Path:
    """A module's one sweep (`group=<group>` in the grid), which must succeed: its group dir."""
    results = tmp_path_factory.mktemp("results")
    done = run_sweep(grid, results, cache)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return results / group
