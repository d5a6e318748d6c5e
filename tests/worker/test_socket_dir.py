"""The phase workers' socket dir (opsd-workers-* in the temp dir) goes when its launcher ends (issue 48): by
stop_all when the sweep ends, and by the reaper when the launcher is killed before it can clean up, as
tests/orchestration's kill_sweep does (SIGKILL of the sweep's process group) and the OOM killer would."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from hydra_plugins.opsd_local_gpus._phase_workers import PhaseWorkers

REPO = Path(__file__).resolve().parents[2]

LAUNCHER = """
import socket, sys, time
from pathlib import Path
from hydra_plugins.opsd_local_gpus._phase_workers import PhaseWorkers
workers = PhaseWorkers(Path(sys.argv[1]))
listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
listener.bind(str(workers.socket_dir / "1.sock"))  # as _start binds a worker's socket
print(workers.socket_dir, flush=True)
time.sleep(600)
"""


def wait_gone(path: Path, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while path.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    return not path.exists()


def test_a_launcher_killed_with_its_process_group_leaves_no_socket_dir(tmp_path):
    temp = tmp_path / "tmp"
    temp.mkdir()
    launcher = subprocess.Popen([sys.executable, "-c", LAUNCHER, str(tmp_path / "logs")], cwd=REPO, text=True,
                                stdout=subprocess.PIPE, env={**os.environ, "TMPDIR": str(temp)},
                                start_new_session=True)
    try:
        socket_dir = Path(launcher.stdout.readline().strip())
        assert socket_dir.parent == temp and (socket_dir / "1.sock").exists()
    finally:
        os.killpg(launcher.pid, signal.SIGKILL)  # kill -9 of the sweep: no finally, no atexit runs
        launcher.wait(30)
    assert wait_gone(socket_dir, 10), sorted(os.listdir(socket_dir))
    assert os.listdir(temp) == []


def test_stop_all_removes_the_socket_dir_and_its_reaper(tmp_path):
    workers = PhaseWorkers(tmp_path / "logs")
    assert workers.socket_dir.is_dir()
    reaper = workers._reaper
    workers.stop_all()
    assert not workers.socket_dir.exists()
    assert reaper.returncode == 0  # ended and reaped: no process outlives the sweep
