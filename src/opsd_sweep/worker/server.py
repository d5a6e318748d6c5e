"""The phase worker process: `python -m opsd_sweep.worker FD` serves phases on the listening Unix socket
FD (bound by the launcher, so a cycle can connect before this process is up).

One connection is one phase: the cycle sends {phase, run_dir, env, log} as a JSON line; the worker runs
the phase in-process under exactly that environment, with its stdout and stderr appended to the log as
a phase process's would be, and answers {"returncode": N}. A phase that needs the GPU for an engine of
its own gets BESIDE: the cycle runs it in a process of its own while the worker waits, its kept objects
asleep, for the next cycle. A phase that fails ends the worker after the answer (a crash can leave a half-built model or a broken CUDA context behind); the launcher starts a
new one for the next cycle. A cycle process that goes away mid-phase (killed, interrupted) closes the
connection, and the worker exits at once, so nothing keeps writing into a run dir nobody owns.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import socket
import sys
import threading
import traceback
from collections.abc import Iterator

from opsd_sweep.worker import warm
from opsd_sweep.worker.client import BESIDE, FRESH_PROCESS

# what `python -m opsd_sweep.train RUN_DIR` / `python -m opsd_sweep.evaluate RUN_DIR` run
PHASES = {"train": ("opsd_sweep.train.trainer", "run_phase"),
          "evaluate": ("opsd_sweep.evaluate.evaluator", "main")}
CLIENT_GONE = 3  # the worker's exit code when its cycle went away mid-phase


def serve(listener: socket.socket) -> int:
    warm.enable()
    threads = None
    while True:
        conn, _ = listener.accept()
        with conn:
            request = json.loads(conn.makefile("rb").readline() or b"null")
            if request is None:  # a connection that sent nothing (its cycle died before asking)
                continue
            watch = _ClientWatch(conn)
            import torch  # not before the first phase: a worker whose jobs never ask (skipped runs) stays light

            threads = threads or torch.get_num_threads()  # what a new phase process gets (OMP_NUM_THREADS or the cores)
            torch.set_num_threads(threads)
            code = _run_request(request)
            warm.release_memory()
            watch.finished()
            conn.sendall(json.dumps({"returncode": code}).encode() + b"\n")
        if code not in (0, BESIDE):
            return code


def _run_request(request: dict) -> int:
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(request["env"])
    try:
        with _output_to(request["log"]):
            return run_phase(request["phase"], request["run_dir"])
    finally:
        os.environ.clear()
        os.environ.update(saved)


def run_phase(phase: str, run_dir: str) -> int:
    """Run one phase in this process; its exit status as the phase process would have ended."""
    module, name = PHASES[phase]
    try:
        getattr(importlib.import_module(module), name)(run_dir)
    except warm.NeedsFreshProcess as err:
        print(f"[phase worker] {err}: the phase runs in a process of its own", flush=True)
        return FRESH_PROCESS
    except warm.RunsBeside as err:
        print(f"[phase worker] {err}: the phase runs in a process of its own; this worker stays for the next "
              "cycle", flush=True)
        return BESIDE
    except SystemExit as err:  # sys.exit("message") prints the message and means 1, as in a process
        if err.code is None or isinstance(err.code, int):
            return err.code or 0
        print(err.code, file=sys.stderr)
        return 1
    except BaseException:  # the traceback goes to the phase log, as an uncaught one would
        traceback.print_exc()
        return 1
    return 0


@contextlib.contextmanager
def _output_to(log: str) -> Iterator[None]:
    """Descriptors 1 and 2 onto the phase log (appended), so C libraries' output lands there too."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    try:
        yield
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        for target, fd in zip((1, 2), saved):
            os.dup2(fd, target)
            os.close(fd)


class _ClientWatch:
    """Ends the worker when the cycle closes the connection before the phase is over."""

    def __init__(self, conn: socket.socket):
        self.conn, self.lock, self.done = conn, threading.Lock(), False
        threading.Thread(target=self._watch, name="client-watch", daemon=True).start()

    def _watch(self) -> None:
        with contextlib.suppress(OSError):  # a reset connection means the same as a closed one
            self.conn.recv(1)  # the cycle sends nothing more: this returns when it closes or dies
        with self.lock:
            if not self.done:
                os._exit(CLIENT_GONE)

    def finished(self) -> None:
        with self.lock:
            self.done = True
