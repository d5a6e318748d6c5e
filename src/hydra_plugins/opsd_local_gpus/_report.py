"""What a sweep tells the user: one line per job start and end with the sweep's counts, and at the
end every failure in one message."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Optional

from hydra.core.utils import JobReturn, JobStatus

from ._grid import JobFailedError, PlannedJob

log = logging.getLogger(__name__)


def outcome(ret: JobReturn) -> tuple[bool, str]:
    """(failed, short text) of a finished job. A job fails when its task raised or its process died,
    or when the task reports a failed run by returning a mapping with state 'failed'."""
    if ret.status != JobStatus.COMPLETED:
        return True, _first_line(ret._return_value)
    value = ret._return_value
    if isinstance(value, Mapping) and "state" in value:
        if value["state"] == "failed":
            return True, _first_line(value.get("error", "failed"))
        return False, str(value["state"])  # the task says why it skipped a run itself
    return False, "done"


def _first_line(value: object) -> str:
    text = str(value).strip()
    return text.splitlines()[0] if text else type(value).__name__


class Progress:
    """Counts of the sweep's jobs, printed with every start and end."""

    def __init__(self, total: int):
        self.pending, self.running, self.done, self.failed = total, 0, 0, 0
        self.failures: list[tuple[PlannedJob, str]] = []

    def counts(self) -> str:
        return f"done {self.done}, running {self.running}, failed {self.failed}, pending {self.pending}"

    def started(self, job: PlannedJob, where: str) -> None:
        self.pending -= 1
        self.running += 1
        log.info(f"start {job.label} on {where} | {self.counts()}")

    def not_started(self, job: PlannedJob, why: str) -> None:
        self.pending -= 1
        self.failed += 1
        self.failures.append((job, why))

    def requeued(self, job: PlannedJob, why: str) -> None:
        """A job that ran elsewhere goes back to this sweep's queue."""
        self.running -= 1
        self.pending += 1
        log.info(f"queue {job.label} again: {why} | {self.counts()}")

    def ended(self, job: PlannedJob, ret: JobReturn, seconds: float | None = None,
              was_running: bool = True, why: str = "") -> None:
        failed, text = outcome(ret)
        text += f" ({why})" if why else ""
        if was_running:
            self.running -= 1
        else:
            self.pending -= 1
        if failed:
            self.failed += 1
            self.failures.append((job, text))
        else:
            self.done += 1
        took = f" after {seconds:.1f}s" if seconds is not None else ""
        log.info(f"end   {job.label}: {'FAILED ' if failed else ''}{text}{took} | {self.counts()}")

    def summary(self) -> str:
        lines = [f"{len(self.failures)} job(s) of the sweep failed:"]
        lines += [f"  {job.label}: {text}" for job, text in self.failures]
        return "\n".join(lines)


def settle(jobs: list[PlannedJob], returns: list[JobReturn], progress: Progress) -> list[JobReturn]:
    """The sweep's JobReturns in job order, each failed one FAILED with the list of all failures, so
    Hydra's sweeper exits non-zero naming every failure while other sweepers can read each status."""
    if not progress.failures:
        return returns
    summary = progress.summary()
    failed_nums = {job.num for job, _ in progress.failures}
    settled = []
    for job, ret in zip(jobs, returns):
        if job.num in failed_nums:
            error = JobFailedError(summary)
            if isinstance(ret._return_value, BaseException):
                error.__cause__ = ret._return_value
            ret = JobReturn(overrides=ret.overrides, cfg=ret.cfg, hydra_cfg=ret.hydra_cfg,
                            working_dir=ret.working_dir, task_name=ret.task_name, status=JobStatus.FAILED,
                            _return_value=error)
        settled.append(ret)
    return settled
