"""The SLURM side of a sweep: submit what must run as one job array, follow every job to its end."""

from __future__ import annotations

import logging
import subprocess
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from hydra.core.singleton import Singleton
from hydra.core.utils import JobReturn, JobStatus
from hydra_plugins.hydra_submitit_launcher.config import BaseQueueConf
from omegaconf import OmegaConf

from opsd_sweep.interrupt import exit_code, signals_raise

from ._grid import PlannedJob, check_gpu_capacity, prepare_sweep
from ._report import Progress, settle

if TYPE_CHECKING:
    from .slurm_launcher import OpsdSlurmLauncher

log = logging.getLogger(__name__)

# squeue states of a job that is still the controller's to run (it may start again, e.g. after a requeue).
QUEUED_STATES = ("PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED",
                 "RESIZING", "SUSPENDED", "SIGNALING", "STAGE_OUT")


def still_queued(job_id: str) -> bool:
    """Whether squeue still lists the job as live. Right after a requeue, sacct (which submitit reads)
    can report the ended incarnation as FAILED while the job waits in the queue to run again."""
    try:
        proc = subprocess.run(["squeue", "-h", "-j", job_id, "-o", "%T"], capture_output=True, text=True,
                              timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False  # cannot ask: trust sacct
    return proc.returncode == 0 and any(state in QUEUED_STATES for state in proc.stdout.split())


def launch_slurm(launcher: OpsdSlurmLauncher, job_overrides: Sequence[Sequence[str]],
                 initial_job_idx: int) -> list[JobReturn]:
    # job.id becomes the SLURM job id inside the job (submitit launcher's __call__)
    hooks, jobs = prepare_sweep(launcher, job_overrides, initial_job_idx, job_id="pending-{num}")
    node_gpus = launcher.params.get("gpus_per_node") or 0
    check_gpu_capacity(jobs, node_gpus, "a node (hydra.launcher.gpus_per_node)",
                       "lower train.num_gpus (and the batch sizes) or pick a bigger preset (slurm_8gpu)")
    log.info(f"SLURM sweep of {len(jobs)} jobs, output under {launcher.config.hydra.sweep.dir}")
    progress = Progress(len(jobs))
    returns = _Follower(launcher, hooks, progress).run(jobs)
    return settle(jobs, [returns[job.num] for job in jobs], progress)


def make_executor(launcher: OpsdSlurmLauncher) -> Any:
    """A submitit SLURM executor with the launcher's parameters (submitit's own names, slurm_ prefixed)."""
    import submitit

    params = dict(launcher.params)
    executor = submitit.AutoExecutor(folder=params.pop("submitit_folder"), cluster="slurm",
                                     slurm_max_num_timeout=params.pop("max_num_timeout"))
    shared = set(OmegaConf.structured(BaseQueueConf).keys())
    executor.update_parameters(**{k if k in shared else f"slurm_{k}": v for k, v in params.items()})
    return executor


class _Follower:
    """Skips settled runs, waits for runs held elsewhere, submits the rest, and reports each end."""

    def __init__(self, launcher: OpsdSlurmLauncher, hooks, progress: Progress) -> None:
        self.launcher, self.hooks, self.progress = launcher, hooks, progress
        self.executor = make_executor(launcher)
        self.returns: dict[int, JobReturn] = {}
        self.waiting: dict[int, PlannedJob] = {}
        self.submitted: dict[int, tuple[PlannedJob, Any]] = {}
        self.started_at: dict[int, float] = {}  # when each submitted job was first seen running

    def run(self, jobs: list[PlannedJob]) -> dict[int, JobReturn]:
        to_submit = []
        for job in jobs:
            action, detail, run = self.hooks.probe_job(job.task_config()) if self.hooks else ("submit", "", {})
            if action in ("done", "failed"):
                # answered as the task answers a settled run: a race reads the run back from run_dir
                ret = job.job_return(JobStatus.COMPLETED, run | {"state": "skipped", "reason": action, "detail": detail})
                self.returns[job.num] = ret
                self.progress.ended(job, ret, was_running=False)
            elif action == "wait":
                self.waiting[job.num] = job
                self.progress.started(job, f"another process, attached ({detail})")
            else:
                to_submit.append(job)
        self._submit(to_submit)
        try:
            with signals_raise():
                while self.waiting or self.submitted:
                    time.sleep(self.launcher.poll_s)
                    self._check_waiting()
                    self._check_submitted()
        except KeyboardInterrupt as err:  # Ctrl-C or SIGTERM of the waiting sweep: the jobs are SLURM's
            log.info(f"detached: {len(self.submitted)} SLURM job(s) keep running; "
                     "run the same command again to re-attach")
            raise SystemExit(exit_code(err)) from None
        return self.returns

    def _submit(self, jobs: list[PlannedJob]) -> None:
        if not jobs:
            return
        args = [(job.overrides, "hydra.sweep.dir", job.num, f"job_id_for_{job.num}", Singleton.get_state())
                for job in jobs]
        slurm_jobs = self.executor.map_array(self.launcher, *zip(*args))
        for job, slurm_job in zip(jobs, slurm_jobs):
            self.submitted[job.num] = (job, slurm_job)
            if self.hooks:
                self.hooks.record_submitted_job(job.task_config(), slurm_job.job_id)
        log.info(f"submitted {len(jobs)} job(s): " + ", ".join(f"#{j.num} -> {s.job_id}" for j, s in
                                                             zip(jobs, slurm_jobs)))

    def _check_waiting(self) -> None:
        for num, job in list(self.waiting.items()):
            action, detail, run = self.hooks.probe_job(job.task_config())
            if action == "wait":
                continue
            del self.waiting[num]
            if action == "submit":  # its holder ended without finishing it: run it here
                self.progress.requeued(job, detail)
                self._submit([job])
                continue
            value = run | ({"state": "done"} if action == "done" else {"state": "failed", "error": detail})
            self.returns[num] = ret = job.job_return(JobStatus.COMPLETED, value)
            self.progress.ended(job, ret)

    def _check_submitted(self) -> None:
        if self.submitted:
            # One sacct call for all jobs per poll: submitit alone would look ever more rarely (up to
            # every 10 minutes), so a killed job would be noticed late.
            type(next(iter(self.submitted.values()))[1]).watcher.update()
        for num, (job, slurm_job) in list(self.submitted.items()):
            done = slurm_job.done() and not still_queued(slurm_job.job_id)
            if num not in self.started_at and (done or slurm_job.state == "RUNNING"):
                self.started_at[num] = time.monotonic()
                self.progress.started(job, f"SLURM job {slurm_job.job_id}")
            if done:
                del self.submitted[num]
                self.returns[num] = ret = self._result(job, slurm_job)
                self.progress.ended(job, ret, time.monotonic() - self.started_at[num])

    def _result(self, job: PlannedJob, slurm_job: Any) -> JobReturn:
        try:
            return slurm_job.results()[0]
        except Exception:  # the job died (cancelled, killed, node failure, too many time-outs)
            log_path = str(slurm_job.paths.stderr)
            message = f"SLURM job {slurm_job.job_id} ended {slurm_job.state}; see {log_path}"
            error = {"message": message, "log": log_path}
            if self.hooks:
                try:
                    self.hooks.record_lost_job(job.task_config(), error, {"job_id": slurm_job.job_id})
                except Exception as hook_err:  # recording is best effort; the failure is reported either way
                    log.warning(f"could not record {job.label} as failed: {hook_err}")
            return job.job_return(JobStatus.FAILED, RuntimeError(message))
