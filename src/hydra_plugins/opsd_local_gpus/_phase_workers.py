"""Warm phase workers (opsd_sweep.worker) for the local launcher: one per GPU set of a 1-GPU job and
one per running CPU-only job, started when a job first needs one, handed from job to job, stopped when
the sweep ends or is interrupted. A job learns its worker from the environment (ADDRESS, PID).
Their sockets live in one temp dir per launcher, removed when the launcher ends, even killed (REAPER).

The launcher binds each worker's listening socket before starting it, so a job can connect at once. A
worker that died (killed, or ended after a failed phase) is replaced at the next job on its GPUs; an
idle worker is stopped before a job on another set of its GPUs starts (its engine would hold them).
"""

from __future__ import annotations

import ctypes
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from opsd_sweep.worker.client import ADDRESS, PID

log = logging.getLogger(__name__)


@dataclass
class PhaseWorker:
    gpus: tuple[str, ...]
    process: subprocess.Popen
    address: str

    def env(self) -> dict[str, str]:
        return {ADDRESS: self.address, PID: str(self.process.pid)}

    def alive(self) -> bool:
        return self.process.poll() is None

    def stop(self) -> None:
        if self.alive():
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
        self.process.wait()


# Removes the socket dir (argv[1]) once its stdin, a pipe the launcher holds open, ends: when the launcher exits
# by any road, a SIGKILL of its whole process group included (this process has a session of its own).
REAPER = "import shutil, sys; sys.stdin.buffer.read(); shutil.rmtree(sys.argv[1], ignore_errors=True)"


class PhaseWorkers:
    def __init__(self, log_dir: Path):
        self.log_dir = log_dir
        self.socket_dir = Path(tempfile.mkdtemp(prefix="opsd-workers-"))  # short: a socket path has ~100 bytes
        self.idle: list[PhaseWorker] = []
        self.busy: list[PhaseWorker] = []
        self.started = 0
        # stop_all removes the dir; the reaper removes it when stop_all never runs (the launcher killed)
        read_end, self._reaper_pipe = os.pipe()  # not inherited by exec'd children: only the launcher holds it
        try:
            self._reaper = subprocess.Popen([sys.executable, "-S", "-c", REAPER, str(self.socket_dir)],
                                            stdin=read_end, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                            start_new_session=True)
        finally:
            os.close(read_end)

    def take(self, gpus: list[str], env: dict[str, str]) -> PhaseWorker | None:
        """A worker for a job on `gpus` (one GPU, or none: a CPU job) started with the job's `env`; None for a
        multi-GPU job (its phases run as processes of their own, through accelerate)."""
        key = tuple(gpus)
        for worker in [w for w in self.idle if set(w.gpus) & set(key) and w.gpus != key]:
            self.idle.remove(worker)
            worker.stop()
        if len(key) > 1:
            return None
        worker = next((w for w in self.idle if w.gpus == key), None)
        if worker is not None:
            self.idle.remove(worker)
            if not worker.alive():
                log.info(f"phase worker {worker.process.pid} ({self._where(key)}) ended with code "
                         f"{worker.process.returncode}; starting a new one")
                worker = None
        worker = worker or self._start(key, env)
        self.busy.append(worker)
        return worker

    def give(self, worker: PhaseWorker) -> None:
        """The job on `worker` ended: it serves the next job on its GPUs (when still alive)."""
        self.busy.remove(worker)
        if worker.alive():
            self.idle.append(worker)

    def stop_all(self) -> None:
        for worker in self.idle + self.busy:
            worker.stop()
        self.idle, self.busy = [], []
        shutil.rmtree(self.socket_dir, ignore_errors=True)
        if self._reaper_pipe is not None:
            os.close(self._reaper_pipe)  # the reaper finds the dir gone and ends
            self._reaper_pipe = None
            try:
                self._reaper.wait(5)  # a job process the launcher could not stop still holds the pipe: not ours
            except subprocess.TimeoutExpired:
                pass

    def _start(self, key: tuple[str, ...], env: dict[str, str]) -> PhaseWorker:
        self.started += 1
        address = str(self.socket_dir / f"{self.started}.sock")
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(address)
        listener.listen(4)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        # its own output (not the phases': those go to each run's logs) and its own session: a terminal's
        # Ctrl-C reaches the jobs, which stop their phases; the worker goes when the launcher stops it
        with open(self.log_dir / f"phase_worker_{self.started}.log", "a") as handle:
            process = subprocess.Popen([sys.executable, "-m", "opsd_sweep.worker", str(listener.fileno())],
                                       pass_fds=(listener.fileno(),), env={**os.environ, **env, "PYTHONUNBUFFERED": "1"},
                                       stdin=subprocess.DEVNULL, stdout=handle, stderr=subprocess.STDOUT,
                                       start_new_session=True, preexec_fn=_die_with_launcher)
        listener.close()  # the worker holds it now: when the worker dies, connecting fails at once
        log.info(f"phase worker {process.pid} started ({self._where(key)})")
        return PhaseWorker(key, process, address)

    @staticmethod
    def _where(key: tuple[str, ...]) -> str:
        return f"GPU {key[0]}" if key else "CPU"


def _die_with_launcher() -> None:
    if sys.platform == "linux":  # a killed sweep leaves no worker behind (PR_SET_PDEATHSIG)
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)
