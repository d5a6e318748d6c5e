"""Run identity and the run directory: the contract between the orchestrator and the phases.

A run is one (config, seed). Its key is a hash of the semantic config, so the same experiment always
lands in the same directory, and a finished run is never repeated.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import subprocess
import sys
import tempfile
import uuid
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

STATES = ("pending", "training", "evaluating", "interrupted", "done", "collapsed", "failed")


# --- atomic files --------------------------------------------------------------------------------

def atomic_write_text(path: Path | str, text: str) -> None:
    """Write via a temp file in the same directory and rename over: readers never see half a file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_json(path: Path | str, data: Any) -> None:
    atomic_write_text(path, json.dumps(data, indent=2, sort_keys=False) + "\n")


def read_json(path: Path | str) -> Any:
    return json.loads(Path(path).read_text())


def read_json_or_none(path: Path | str) -> Any:
    """The JSON in `path`, or None when it is missing or does not read back (torn, corrupted, not UTF-8)."""
    try:
        return read_json(path)
    except (FileNotFoundError, UnicodeDecodeError, json.JSONDecodeError):
        return None


def utc_now() -> str:
    """ISO 8601 UTC with milliseconds (status tables and overlap checks need sub-second order)."""
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


# --- identity ------------------------------------------------------------------------------------

def run_key(semantic: dict) -> str:
    """Hex digest of the canonical JSON of the semantic config (see config.semantic_dict)."""
    canonical = json.dumps(semantic, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def run_slug(learning_rate: float, clip: float | None, loss_top_k: int | None, seed: int) -> str:
    """Readable prefix of a run dir from the most-swept knobs; the key suffix keeps it unique."""
    parts = [f"lr{learning_rate:g}", f"clip{clip:g}" if clip is not None else "noclip"]
    if loss_top_k is not None:
        parts.append(f"topk{loss_top_k}")
    parts.append(f"s{seed}")
    return "-".join(parts)


# --- the run directory ---------------------------------------------------------------------------

@dataclass(frozen=True)
class RunDir:
    """Owns every file name inside one run directory."""

    path: Path

    @property
    def config(self) -> Path:
        return self.path / "config.yaml"

    @property
    def status(self) -> Path:
        return self.path / "status.json"

    @property
    def identity(self) -> Path:
        """The identities of the inputs the run's results depend on, recorded when the run starts."""
        return self.path / "identity.json"

    def read_identity(self) -> dict | None:
        """identity.json as {key, inputs: {name: identity}, recorded_at}, or None (not recorded: a dir of a
        release before records, or one that does not read back)."""
        record = read_json_or_none(self.identity)
        return record if isinstance(record, dict) and isinstance(record.get("inputs"), dict) else None

    def write_identity(self, key: str, inputs: dict[str, str]) -> None:
        atomic_write_json(self.identity, {"key": key, "inputs": inputs, "recorded_at": utc_now()})

    @property
    def claims(self) -> Path:
        """Numbered claim files (see claim_run); the highest number is the current owner."""
        return self.path / "claims"

    @property
    def submission(self) -> Path:
        """The SLURM job last submitted for this run (written by the SLURM launcher)."""
        return self.path / "slurm_submission.json"

    @property
    def train_dir(self) -> Path:
        return self.path / "train"

    @property
    def metrics(self) -> Path:
        return self.train_dir / "metrics.jsonl"

    @property
    def eval_dir(self) -> Path:
        return self.path / "eval"

    @property
    def eval_json(self) -> Path:
        return self.eval_dir / "eval.json"

    def checkpoint_eval_dir(self, step: int) -> Path:
        """eval.checkpoints=all: the eval dir of a checkpoint before the final one (its is eval_dir)."""
        return self.eval_dir / f"checkpoint-{step}"

    @property
    def tensorboard(self) -> Path:
        """TensorBoard event files of the run (train.report_to=tensorboard)."""
        return self.path / "tensorboard"

    @property
    def logs(self) -> Path:
        return self.path / "logs"

    def log(self, phase: str) -> Path:
        return self.logs / f"{phase}.log"

    def checkpoint(self, step: int) -> Path:
        return self.train_dir / f"checkpoint-{step}"

    def checkpoints(self) -> list[tuple[int, Path]]:
        """Complete checkpoints (those with a trainer_state.json), oldest first."""
        found = []
        for path in self.train_dir.glob("checkpoint-*"):
            step = path.name.removeprefix("checkpoint-")
            if step.isdigit() and (path / "trainer_state.json").exists():
                found.append((int(step), path))
        return sorted(found)

    def read_eval(self) -> dict | None:
        """eval/eval.json when it reads back whole (an object with metrics and problems), else None."""
        data = read_json_or_none(self.eval_json)
        return data if isinstance(data, dict) and {"metrics", "problems"} <= data.keys() else None

    def latest_checkpoint(self) -> Path | None:
        found = self.checkpoints()
        return found[-1][1] if found else None

    @property
    def status_copy(self) -> Path:
        """A second copy of status.json, from which an unreadable status.json is recovered."""
        return self.path / "status.prev.json"

    def read_status(self) -> dict:
        """The status dict, or {} when the run has never been started. An unreadable status.json (torn,
        corrupted, not UTF-8, not an object) is reported by name and recovered (see _recover_status)."""
        if not self.status.exists():
            return {}
        status = read_json_or_none(self.status)
        return status if isinstance(status, dict) else self._recover_status()

    def update_status(self, **fields: Any) -> dict:
        status = self.read_status() | fields
        if self.status.exists() and not isinstance(read_json_or_none(self.status), dict):
            os.replace(self.status, self.path / "status.json.unreadable")  # kept for a post-mortem
        atomic_write_json(self.status_copy, status)
        atomic_write_json(self.status, status)
        return status

    def _recover_status(self) -> dict:
        """The status of a run whose status.json does not read back: its second copy when that reads,
        else what the run dir shows (done if eval.json reads back, else interrupted: a rerun continues
        it; attempts = phase starts in its logs). The dict says where it came from under `recovered`."""
        copy = read_json_or_none(self.status_copy)
        if isinstance(copy, dict):
            status = copy | {"recovered": f"unreadable {self.status}; recovered from {self.status_copy.name}"}
        else:
            starts = [self.log(p).read_text(errors="replace").count(f" {phase} ===") if self.log(p).exists() else 0
                      for p, phase in (("train", "train"), ("eval", "evaluate"))]
            status = {"state": "done" if self.read_eval() is not None else "interrupted", "attempts": max(starts),
                      "recovered": f"unreadable {self.status}; recovered from the run dir (phase times lost)"}
        if self.status not in _REPORTED:
            _REPORTED.add(self.status)
            print(f"[opsd_sweep] warning: {status['recovered']}", file=sys.stderr, flush=True)
        return status


_REPORTED: set[Path] = set()  # unreadable status files already reported by this process


def find_run_dir(group_dir: Path, key: str, slug: str) -> RunDir:
    """The existing directory of this key in the group, else a new <slug>-<key8> path."""
    existing = sorted(group_dir.glob(f"*-{key[:8]}"))
    return RunDir(existing[0] if existing else group_dir / f"{slug}-{key[:8]}")


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
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".claim-", suffix=".tmp")
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
