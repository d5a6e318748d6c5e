"""One job in its own process: forked from the launcher, given its GPUs and ports through the
environment, it runs the Hydra job and sends the JobReturn back through a pipe."""

from __future__ import annotations

import ctypes
import multiprocessing
import os
import signal
import sys
import time
from dataclasses import dataclass, field
from typing import Any
from multiprocessing.connection import Connection

from hydra.core.utils import JobReturn, run_job, setup_globals
from hydra.types import HydraContext, TaskFunction

from opsd_sweep.interrupt import exit_code

from ._grid import PlannedJob


@dataclass
class Worker:
    job: PlannedJob
    process: multiprocessing.process.BaseProcess
    conn: Connection
    gpus: list[str]
    ports: list[int]
    started: float = field(default_factory=time.monotonic)
    ret: JobReturn | None = None
    conn_closed: bool = False
    phase_worker: Any = None  # the warm phase worker (_phase_workers.PhaseWorker) this job's phases run in

    @property
    def awaiting_return(self) -> bool:
        return self.ret is None and not self.conn_closed

    def receive(self) -> None:
        """Read the JobReturn if the worker sent it (it may have died first)."""
        try:
            if self.awaiting_return and self.conn.poll():
                self.ret = self.conn.recv()
        except (EOFError, OSError):
            self.conn_closed = True


def start_worker(job: PlannedJob, gpus: list[str], ports: list[int], env: dict[str, str],
                 hydra_context: HydraContext, task_function: TaskFunction) -> Worker:
    # fork: the worker inherits the composed config, the task function and Hydra's singletons as they are
    ctx = multiprocessing.get_context("fork")
    receiver, sender = ctx.Pipe(duplex=False)
    process = ctx.Process(target=_work, name=f"hydra-job-{job.num}",
                          args=(job, env, hydra_context, task_function, sender, os.getpid()))
    process.start()
    sender.close()
    return Worker(job, process, receiver, gpus, ports)


def _work(job: PlannedJob, env: dict[str, str], hydra_context: HydraContext, task_function: TaskFunction,
          sender: Connection, launcher_pid: int) -> None:
    if sys.platform == "linux":  # die with the launcher: a killed sweep leaves no job running on
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        if os.getppid() != launcher_pid:
            os._exit(1)
    os.environ.update(env)
    setup_globals()
    try:
        ret = run_job(hydra_context=hydra_context, task_function=task_function, config=job.config,
                      job_dir_key="hydra.sweep.dir", job_subdir_key="hydra.sweep.subdir")
    except KeyboardInterrupt as err:  # Ctrl-C or SIGTERM: the task recorded its run; the launcher reports
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(exit_code(err))
    try:
        sender.send(ret)
    except Exception as err:  # an unpicklable return value or exception: send its text instead
        ret._return_value = RuntimeError(f"{ret._return_value!r} (could not be sent back: {err})")
        sender.send(ret)
