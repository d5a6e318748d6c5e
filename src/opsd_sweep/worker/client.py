"""The cycle's side of a phase worker: the launcher names it in the environment (ADDRESS, PID); a phase
is sent there and its exit status read back. An interrupt kills the worker and waits until it is gone,
as the cycle does with a phase process, before the run is marked interrupted."""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import socket
from collections.abc import Iterator

ADDRESS, PID = "OPSD_PHASE_WORKER", "OPSD_PHASE_WORKER_PID"
FRESH_PROCESS = 75  # the worker's answer for a phase it cannot run warm (warm.NeedsFreshProcess); it then exits
BESIDE = 76  # the answer for a phase to run in a process of its own beside the worker (warm.RunsBeside); it stays


class WorkerDied(RuntimeError):
    """The worker ended before answering: killed, crashed, or gone before the phase was sent."""


def assigned_worker() -> tuple[str, int] | None:
    """(socket path, pid) of the phase worker the launcher gave this job, or None (per-phase processes)."""
    address = os.environ.get(ADDRESS)
    return (address, int(os.environ[PID])) if address else None


def run_phase(worker: tuple[str, int], phase: str, run_dir: str, env: dict[str, str], log: str) -> int:
    """The phase's exit status, run by `worker`; raise WorkerDied if it ended without one. A worker ends
    after a phase that did not succeed (BESIDE aside: it stays for the next cycle): then this returns once
    it is gone, so that its GPU memory is free (for FRESH_PROCESS: the phase's own process) and the
    launcher never hands it to the next cycle."""
    address, pid = worker
    request = json.dumps({"phase": phase, "run_dir": run_dir, "env": env, "log": log}).encode() + b"\n"
    with _pidfd(pid) as handle, socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        try:
            sock.connect(address)
            sock.sendall(request)
            reply = sock.makefile("rb").readline()
        except OSError:
            reply = b""
        except KeyboardInterrupt:  # Ctrl-C / SIGTERM of the cycle: stop the phase now, as a phase process
            _kill_and_wait(pid, handle)
            raise
        if not reply:
            raise WorkerDied(f"phase worker {pid} died (killed or crashed) before the phase ended")
        returncode = int(json.loads(reply)["returncode"])
        if returncode not in (0, BESIDE) and handle is not None:
            select.select([handle], [], [], 60)
    return returncode


@contextlib.contextmanager
def _pidfd(pid: int) -> Iterator[int | None]:
    """A handle that turns readable when the worker exits (Linux pidfd; None elsewhere or if it is gone)."""
    try:
        fd = os.pidfd_open(pid)
    except (AttributeError, OSError):
        yield None
        return
    try:
        yield fd
    finally:
        os.close(fd)


def _kill_and_wait(pid: int, handle: int | None) -> None:
    if handle is None:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
        return
    with contextlib.suppress(OSError):
        signal.pidfd_send_signal(handle, signal.SIGKILL)
    select.select([handle], [], [], 30)
