"""The local scheduler: plan the grid, then keep starting jobs as their GPUs or CPU slots free up."""

from __future__ import annotations

import logging
import os
import signal
import socket
import time
from collections.abc import Sequence
from pathlib import Path
from multiprocessing.connection import wait
from typing import TYPE_CHECKING

from hydra.core.utils import JobReturn, JobStatus

from opsd_sweep.interrupt import exit_code, signals_raise

from ._grid import JobFailedError, PlannedJob, check_gpu_capacity, prepare_sweep
from ._phase_workers import PhaseWorkers
from ._report import Progress, outcome, settle
from ._slots import Slots, discover_gpus, max_parallel_problems, reserve_ports
from ._worker import Worker, start_worker

if TYPE_CHECKING:
    from .local_launcher import LocalGpusLauncher

log = logging.getLogger(__name__)


def launch_local(launcher: LocalGpusLauncher, job_overrides: Sequence[Sequence[str]],
                 initial_job_idx: int) -> list[JobReturn]:
    hooks, jobs = prepare_sweep(launcher, job_overrides, initial_job_idx, job_id="{num}",
                                setting_problems=max_parallel_problems(launcher.max_parallel))
    gpus = discover_gpus(launcher.gpus) if any(job.gpus for job in jobs) else []
    check_gpu_capacity(jobs, len(gpus), f"the launcher (GPUs {gpus})",
                       "lower the job's GPU count (train.num_gpus and the batch sizes) or give more GPUs "
                       "with hydra.launcher.gpus=[...] or CUDA_VISIBLE_DEVICES")
    log.info(f"Launching {len(jobs)} jobs locally: GPUs {gpus or 'none'}, "
             f"{launcher.max_parallel} slot(s) for CPU-only jobs")
    progress = Progress(len(jobs))
    phase_workers = PhaseWorkers(Path(str(launcher.config.hydra.sweep.dir))) if launcher.phase_workers else None
    scheduler = _Scheduler(launcher, jobs, Slots(gpus, launcher.max_parallel), progress, hooks, phase_workers)
    try:
        with signals_raise():
            returns = scheduler.run()
    except KeyboardInterrupt as err:  # Ctrl-C or SIGTERM: one line, the shell's exit code, no traceback
        log.info(f"{err or 'interrupted by SIGINT'}: stopped {scheduler.stopped} running job(s), their runs marked "
                 f"interrupted | {progress.counts()}; run the same command again to resume")
        raise SystemExit(exit_code(err)) from None
    return settle(jobs, returns, progress)


class _Scheduler:
    def __init__(self, launcher: LocalGpusLauncher, jobs: list[PlannedJob], slots: Slots, progress: Progress,
                 hooks, phase_workers: PhaseWorkers | None) -> None:
        self.launcher, self.jobs, self.slots, self.progress, self.hooks = launcher, jobs, slots, progress, hooks
        self.phase_workers = phase_workers
        self.cpu_threads = max(1, len(os.sched_getaffinity(0)) // launcher.max_parallel)
        self.stopped = 0  # jobs still running when the sweep was interrupted

    def run(self) -> list[JobReturn]:
        pending, running, returns = list(self.jobs), {}, {}
        held: dict[int, PlannedJob] = {}  # jobs whose run another live sweep holds: waited for, then rerun
        stopped_by = None  # the failed job that made fail_fast stop the sweep
        try:
            while pending or running or held:
                self._release_held(held, pending)
                if stopped_by is None:
                    for job in list(pending):  # first come first served; smaller jobs fill the gaps
                        gpus = self.slots.take(job.gpus)
                        if gpus is not None:
                            pending.remove(job)
                            running[job.num] = self._start(job, gpus, running)
                if not running and not held:
                    break
                for worker in self._wait(running, timeout=self.launcher.poll_s if held else None):
                    del running[worker.job.num]
                    ret = self._finish(worker)
                    kind, text = outcome(ret)
                    if kind == "held" and self.hooks is not None:
                        held[worker.job.num] = worker.job
                        self.progress.waiting(worker.job, text)
                        continue
                    returns[worker.job.num] = ret
                    self.progress.ended(worker.job, ret, time.monotonic() - worker.started)
                    if self.launcher.fail_fast and stopped_by is None and kind == "failed":
                        stopped_by = worker.job
                        log.info(f"fail_fast: {worker.job.label} failed; no further jobs start")
        finally:
            self.stopped = len(running)
            for worker in running.values():  # interrupted (Ctrl-C, SIGTERM): stop what still runs
                worker.process.terminate()
                worker.process.join(10)
            if self.phase_workers is not None:  # after the jobs: each has stopped its phase and marked its run
                self.phase_workers.stop_all()
        for job in pending:
            why = f"not started: fail_fast stopped the sweep after {stopped_by.label} failed"
            self.progress.not_started(job, why)
            returns[job.num] = job.job_return(JobStatus.FAILED, JobFailedError(why))
        return [returns[job.num] for job in self.jobs]

    def _release_held(self, held: dict[int, PlannedJob], pending: list[PlannedJob]) -> None:
        """Queue again each held job whose holder let go (its run settled, or its holder died)."""
        for num, job in list(held.items()):
            action, detail, _ = self.hooks.probe_job(job.task_config())
            if action != "wait":
                del held[num]
                pending.append(job)
                self.progress.unheld(job, detail)

    def _start(self, job: PlannedJob, gpus: list[str], running: dict[int, Worker]) -> Worker:
        ports = reserve_ports({p for w in running.values() for p in w.ports}, 2)
        # Distinct ports per concurrent job: accelerate's main process and vLLM's base port.
        env = {"CUDA_VISIBLE_DEVICES": ",".join(gpus), "OPSD_MAIN_PORT": str(ports[0]),
               "MASTER_PORT": str(ports[0]), "VLLM_PORT": str(ports[1])}
        if not gpus and "OMP_NUM_THREADS" not in os.environ:
            env["OMP_NUM_THREADS"] = str(self.cpu_threads)  # concurrent CPU jobs share the cores
        phase_worker = self.phase_workers.take(gpus, env) if self.phase_workers is not None else None
        if phase_worker is not None:
            env |= phase_worker.env()
        worker = start_worker(job, gpus, ports, env, self.launcher.hydra_context, self.launcher.task_function)
        worker.phase_worker = phase_worker
        self.progress.started(job, f"GPUs {','.join(gpus)}" if gpus else "CPU")
        return worker

    @staticmethod
    def _wait(running: dict[int, Worker], timeout: float | None) -> list[Worker]:
        """Block until at least one worker has exited (or `timeout` seconds passed: then maybe none);
        collect returns sent meanwhile."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            by_handle = {w.process.sentinel: w for w in running.values()}
            by_handle |= {w.conn: w for w in running.values() if w.awaiting_return}
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not by_handle:
                time.sleep(left or 0.0)
                return []
            ready = wait(list(by_handle), timeout=left)
            for handle in ready:
                by_handle[handle].receive()  # read as it arrives: a large return must not block its sender
            exited = [w for w in running.values() if w.process.sentinel in ready]
            if exited or (deadline is not None and time.monotonic() >= deadline):
                return exited

    def _finish(self, worker: Worker) -> JobReturn:
        worker.process.join()
        worker.receive()
        self.slots.give(worker.gpus)
        if worker.phase_worker is not None:
            self.phase_workers.give(worker.phase_worker)
        return worker.ret if worker.ret is not None else self._lost(worker)

    def _lost(self, worker: Worker) -> JobReturn:
        code = worker.process.exitcode
        how = f"was killed by {signal.Signals(-code).name}" if code is not None and code < 0 else f"exited {code}"
        message = f"job process {worker.process.pid} {how} before returning"
        if self.hooks is not None:
            try:
                self.hooks.record_lost_job(worker.job.task_config(), {"message": message, "log": None},
                                           {"host": socket.gethostname(), "pid": worker.process.pid})
            except Exception as err:  # recording is best effort; the failure is reported either way
                log.warning(f"could not record {worker.job.label} as failed: {err}")
        return worker.job.job_return(JobStatus.FAILED, RuntimeError(message))
