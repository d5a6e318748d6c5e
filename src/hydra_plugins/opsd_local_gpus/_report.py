"""What a sweep tells the user: one line per job start and end with the sweep's counts, and at the
end every failure in one message."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Optional

from hydra.core.utils import JobReturn, JobStatus

from ._grid import JobFailedError, PlannedJob

log = logging.getLogger(__name__)


# Kinds of a job's end. Only 'done' leaves the sweep successful: a run that failed, failed before and
# was not retried, or that another live sweep still runs is not a finished run of this grid.
UNFINISHED = ("failed", "skipped-failed", "held")


def outcome(ret: JobReturn) -> tuple[str, str]:
    """(kind, short text) of a finished job. kind is 'failed' when its task raised or its process died,
    or when the task reports a failed run (a mapping with state 'failed'); 'skipped-failed' and 'held'
    when it skipped a run that failed before (reason 'failed') or that another live process runs
    (reason 'claimed'); else 'done'."""
    if ret.status != JobStatus.COMPLETED:
        return "failed", _first_line(ret._return_value)
    value = ret._return_value
    if isinstance(value, Mapping) and "state" in value:
        if value["state"] == "failed":
            return "failed", _first_line(value.get("error", "failed"))
        text = f"{value['state']} ({value['detail']})" if value.get("detail") else str(value["state"])
        kind = {"failed": "skipped-failed", "claimed": "held"}.get(value.get("reason"), "done")
        return (kind if value["state"] == "skipped" else "done"), text
    return "done", "done"


def _first_line(value: object) -> str:
    text = str(value).strip()
    return text.splitlines()[0] if text else type(value).__name__


class Progress:
    """Counts of the sweep's jobs, printed with every start and end."""

    def __init__(self, total: int):
        self.pending, self.running, self.done, self.held = total, 0, 0, 0
        self.ended_as = {kind: 0 for kind in UNFINISHED}
        self.failures: list[tuple[PlannedJob, str]] = []  # every job that ended unfinished, with why

    def counts(self) -> str:
        extra = "".join(f", {kind} {self.ended_as[kind]}" for kind in ("skipped-failed", "held") if self.ended_as[kind])
        waiting = f", waiting for {self.held} held by another sweep" if self.held else ""
        return (f"done {self.done}, running {self.running}, failed {self.ended_as['failed']}, "
                f"pending {self.pending}{extra}{waiting}")

    def started(self, job: PlannedJob, where: str) -> None:
        self.pending -= 1
        self.running += 1
        log.info(f"start {job.label} on {where} | {self.counts()}")

    def not_started(self, job: PlannedJob, why: str) -> None:
        self.pending -= 1
        self.ended_as["failed"] += 1
        self.failures.append((job, why))

    def requeued(self, job: PlannedJob, why: str) -> None:
        """A job that ran elsewhere goes back to this sweep's queue."""
        self.running -= 1
        self._queue_again(job, why)

    def waiting(self, job: PlannedJob, why: str) -> None:
        """A job whose run another live sweep holds: this sweep waits for it to settle."""
        self.running -= 1
        self.held += 1
        log.info(f"wait  {job.label}: {why}; waiting for it to end | {self.counts()}")

    def unheld(self, job: PlannedJob, why: str) -> None:
        """A held job whose holder let go: it goes back to this sweep's queue."""
        self.held -= 1
        self._queue_again(job, why)

    def _queue_again(self, job: PlannedJob, why: str) -> None:
        self.pending += 1
        log.info(f"queue {job.label} again: {why} | {self.counts()}")

    def ended(self, job: PlannedJob, ret: JobReturn, seconds: float | None = None, was_running: bool = True) -> None:
        kind, text = outcome(ret)
        if was_running:
            self.running -= 1
        else:
            self.pending -= 1
        if kind in UNFINISHED:
            self.ended_as[kind] += 1
            self.failures.append((job, f"{kind}: {text}" if kind != "failed" else text))
        else:
            self.done += 1
        took = f" after {seconds:.1f}s" if seconds is not None else ""
        log.info(f"end   {job.label}: {'FAILED ' if kind == 'failed' else ''}{text}{took} | {self.counts()}")

    def summary(self) -> str:
        lines = [f"{len(self.failures)} job(s) of the sweep failed or are unfinished:"]
        lines += [f"  {job.label}: {text}" for job, text in self.failures]
        if self.ended_as["skipped-failed"]:
            lines.append("  (skipped-failed runs failed before: rerun_failed=true retries them)")
        return "\n".join(lines)


def settle(jobs: list[PlannedJob], returns: list[JobReturn], progress: Progress) -> list[JobReturn]:
    """The sweep's JobReturns in job order, each failed or unfinished one FAILED with the list of all of
    them, so Hydra's sweeper exits non-zero naming each, while other sweepers can read each status (and
    the job's own answer, JobFailedError.answer)."""
    if not progress.failures:
        return returns
    summary = progress.summary()
    failed_nums = {job.num for job, _ in progress.failures}
    settled = []
    for job, ret in zip(jobs, returns):
        if job.num in failed_nums:
            error = JobFailedError(summary, answer=ret._return_value)
            if isinstance(ret._return_value, BaseException):
                error.__cause__ = ret._return_value
            ret = JobReturn(overrides=ret.overrides, cfg=ret.cfg, hydra_cfg=ret.hydra_cfg,
                            working_dir=ret.working_dir, task_name=ret.task_name, status=JobStatus.FAILED,
                            _return_value=error)
        settled.append(ret)
    return settled
