"""Claims: which process runs a run now, and whether its owner is still alive (same host: its pid and
start time; elsewhere: its SLURM job)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import uuid
from dataclasses import dataclass
from pathlib import Path

from opsd_sweep.run.rundir import RunDir, atomic_write_json, new_file, read_json, read_json_or_none, utc_now

# --- owners: who runs a run, and are they still alive -------------------------------------------

# SLURM states in which a job may still write to its run (COMPLETING: its processes are being killed).
SLURM_LIVE_STATES = ("PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "REQUEUED", "REQUEUE_HOLD",
                     "REQUEUE_FED", "RESIZING", "SUSPENDED", "SIGNALING", "STAGE_OUT")


def slurm_job_id() -> str | None:
    """This process's SLURM job as squeue shows it (array tasks as ARRAY_TASK), or None outside SLURM."""
    array, task = os.environ.get("SLURM_ARRAY_JOB_ID"), os.environ.get("SLURM_ARRAY_TASK_ID")
    if array and task:
        return f"{array}_{task}"
    return os.environ.get("SLURM_JOB_ID")


def _process_stat(pid: int) -> list[str] | None:
    """Fields 3.. of /proc/<pid>/stat (state first), or None if there is no such process."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()  # comm (field 2) may contain spaces and parentheses


def _process_start(pid: int) -> str | None:
    """Start time of a process in clock ticks since boot (tells a live owner from a reused pid)."""
    fields = _process_stat(pid)
    return fields[19] if fields else None  # field 22 of proc(5)


def owner_info() -> dict:
    pid = os.getpid()
    return {"host": socket.gethostname(), "pid": pid, "pid_start": _process_start(pid),
            "job_id": slurm_job_id(), "nonce": uuid.uuid4().hex, "claimed_at": utc_now()}


def pid_alive(pid: int, start: str | None) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # exists, owned by another user
    fields = _process_stat(pid)
    if fields is None:
        return True  # no /proc to ask: the pid exists
    # A killed owner whose parent died too stays a zombie until PID 1 reaps it, and in containers
    # PID 1 often never does: a zombie (Z) or dying (X) process runs nothing.
    if fields[0] in ("Z", "X"):
        return False
    return start is None or fields[19] == start


def slurm_job_state(job_id: str) -> str | None:
    """The job's SLURM state (squeue, then sacct once the controller forgot it); None if SLURM can't tell."""
    commands = (["squeue", "-h", "-j", job_id, "-o", "%T"], ["sacct", "-n", "-X", "-P", "-j", job_id, "-o", "State"])
    for command in commands:
        try:
            proc = subprocess.run(command, capture_output=True, text=True, timeout=30, check=False)
        except (OSError, subprocess.TimeoutExpired):
            continue
        states = proc.stdout.split()
        if proc.returncode == 0 and states:
            return states[0].split()[0]  # sacct says e.g. "CANCELLED by 0"
    return None


def owner_alive(owner: dict) -> bool:
    """Whether a claim's owner may still be running the run.

    Same host: its pid (with the same start time) must exist. Elsewhere: its SLURM job must be live;
    a claim left by an earlier incarnation of this very SLURM job (requeue) is stale. Another host
    without a SLURM job cannot be checked from here: it counts as alive.
    """
    if owner.get("host") == socket.gethostname():
        return pid_alive(int(owner["pid"]), owner.get("pid_start"))
    job = owner.get("job_id")
    if not job:
        return True
    if job == slurm_job_id():
        return False
    state = slurm_job_state(job)
    return state is None or state in SLURM_LIVE_STATES


# --- claims --------------------------------------------------------------------------------------
#
# A claim is a numbered file under <run>/claims/ holding its owner; the highest number is the current
# owner. A file is created complete (written to a temp name, then hard-linked: link fails if the name
# exists), so exactly one process creates each number. Numbers only grow: releasing a claim rewrites its
# file as released (it stays the highest), so the next claimer takes N + 1 and no number is ever used
# twice. Taking over a stale or released claim N means creating N + 1; two processes that both judged N
# stale race for the same name and one loses. A claimer that sees a higher number after creating its
# own has lost and withdraws. A claim file is removed only after reading back the nonce of the owner
# it was judged to belong to, so a stalled process never removes someone else's live claim.

class RunClaimedError(RuntimeError):
    """Another live process holds this run."""

    def __init__(self, run_dir: RunDir, owner: dict | None):
        where = f"{owner.get('host')} pid {owner.get('pid')}" if owner else "a concurrent claimer"
        job = f" (SLURM job {owner['job_id']})" if owner and owner.get("job_id") else ""
        super().__init__(f"is being run by {where}{job}")
        self.run_dir, self.owner = run_dir, owner


@dataclass(frozen=True)
class Claim:
    path: Path
    owner: dict


def _claim_numbers(run_dir: RunDir) -> list[int]:
    try:
        return sorted(int(p.name) for p in run_dir.claims.iterdir() if p.name.isdigit())
    except FileNotFoundError:
        return []


def _claim_path(run_dir: RunDir, number: int) -> Path:
    return run_dir.claims / f"{number:08d}"


def _holder(run_dir: RunDir) -> tuple[list[int], dict | None]:
    """(claim numbers, the record in the highest claim file), read consistently (retried when a file
    goes away while we look); the record is None when there are no claims."""
    while True:
        numbers = _claim_numbers(run_dir)
        if not numbers:
            return numbers, None
        try:
            return numbers, read_json(_claim_path(run_dir, numbers[-1]))
        except FileNotFoundError:
            continue  # superseded and removed while we looked
        except (UnicodeDecodeError, json.JSONDecodeError):
            return numbers, {"released_at": "unreadable claim file"}  # not a live owner: take it over


def current_owner(run_dir: RunDir) -> dict | None:
    """The owner recorded in the highest claim file (alive or not), or None when nobody claims the run."""
    holder = _holder(run_dir)[1]
    return None if holder is None or holder.get("released_at") else holder


def _create_exclusive(path: Path, data: dict) -> bool:
    """Create `path` with its full content in one step; False if the name exists."""
    fd, tmp = new_file(path.parent, prefix=".claim-", suffix=".tmp")  # the mode open() gives: readable by others
    try:
        with os.fdopen(fd, "w") as handle:
            json.dump(data, handle)
        os.link(tmp, path)
        return True
    except FileExistsError:
        return False
    finally:
        os.unlink(tmp)


def _remove_if_nonce(path: Path, nonce: str | None) -> None:
    """Remove a claim file only if it still holds `nonce`: move it aside under a name of our own, read
    it there, and put it back if it turns out to be another owner's."""
    aside = path.with_name(f".{path.name}.{uuid.uuid4().hex}.check")
    try:
        os.rename(path, aside)
    except FileNotFoundError:
        return  # already removed
    if (read_json_or_none(aside) or {}).get("nonce") == nonce:
        aside.unlink()
    else:
        os.link(aside, path)  # not ours after all; its name is free again (numbers are never reused)
        aside.unlink()


def claim_run(run_dir: RunDir, attempts: int = 8) -> Claim:
    """Claim the run for this process, taking over a stale claim; raise RunClaimedError if it is live."""
    run_dir.claims.mkdir(parents=True, exist_ok=True)
    owner = owner_info()
    for _ in range(attempts):
        numbers, holder = _holder(run_dir)
        if holder is not None and not holder.get("released_at") and owner_alive(holder):
            raise RunClaimedError(run_dir, holder)
        mine = numbers[-1] + 1 if numbers else 1
        path = _claim_path(run_dir, mine)
        if not _create_exclusive(path, owner):
            continue  # another claimer took this number first: look again
        if _claim_numbers(run_dir)[-1] != mine:
            _remove_if_nonce(path, owner["nonce"])  # someone went higher while we created ours: theirs stands
            continue
        if numbers:  # the claim we judged dead or released (older ones were removed when it took over)
            _remove_if_nonce(_claim_path(run_dir, numbers[-1]), holder.get("nonce"))
        return Claim(path, owner)
    raise RunClaimedError(run_dir, None)


def release_run(claim: Claim) -> None:
    """Mark our claim released, unless a takeover already replaced it. The file stays (numbers only grow)."""
    current = read_json_or_none(claim.path)
    if current is not None and current.get("nonce") == claim.owner["nonce"]:
        atomic_write_json(claim.path, claim.owner | {"released_at": utc_now()})
