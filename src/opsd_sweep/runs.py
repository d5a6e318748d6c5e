"""Run identity and the run directory: the contract between the orchestrator and the phases.

A run is one (config, seed). Its key is a hash of the semantic config, so the same experiment always
lands in the same directory, and a finished run is never repeated.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import socket
import tempfile
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

STATES = ("pending", "training", "evaluating", "done", "failed")


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


def utc_now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


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
    def claim(self) -> Path:
        return self.path / "claim.lock"

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

    def latest_checkpoint(self) -> Path | None:
        found = self.checkpoints()
        return found[-1][1] if found else None

    def read_status(self) -> dict:
        """The status dict, or {} when the run has never been started (or status.json is unreadable)."""
        try:
            return read_json(self.status)
        except (FileNotFoundError, json.JSONDecodeError):
            return {}

    def update_status(self, **fields: Any) -> dict:
        status = self.read_status() | fields
        atomic_write_json(self.status, status)
        return status


def find_run_dir(group_dir: Path, key: str, slug: str) -> RunDir:
    """The existing directory of this key in the group, else a new <slug>-<key8> path."""
    existing = sorted(group_dir.glob(f"*-{key[:8]}"))
    return RunDir(existing[0] if existing else group_dir / f"{slug}-{key[:8]}")


# --- claims --------------------------------------------------------------------------------------

class RunClaimedError(RuntimeError):
    """Another live process holds this run."""


def owner_info() -> dict:
    return {"host": socket.gethostname(), "pid": os.getpid(), "job_id": os.environ.get("SLURM_JOB_ID"),
            "claimed_at": utc_now()}


def _owner_alive(owner: dict) -> bool:
    """Whether a claim's owner still runs. On another host we cannot tell: assume alive."""
    if owner.get("host") != socket.gethostname():
        return True
    try:
        os.kill(int(owner["pid"]), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def claim_run(run_dir: RunDir) -> dict:
    """Atomically claim the run (O_EXCL lock file); take over a stale claim; raise if live."""
    run_dir.path.mkdir(parents=True, exist_ok=True)
    for _ in range(2):
        try:
            fd = os.open(run_dir.claim, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except OSError as err:
            if err.errno != errno.EEXIST:
                raise
            try:
                owner = read_json(run_dir.claim)
            except (FileNotFoundError, json.JSONDecodeError):
                continue  # released or half-written right now: try again
            if _owner_alive(owner):
                raise RunClaimedError(f"{run_dir.path} is being run by {owner}") from None
            run_dir.claim.unlink(missing_ok=True)  # stale: its owner is gone
            continue
        owner = owner_info()
        with os.fdopen(fd, "w") as handle:
            json.dump(owner, handle)
        return owner
    raise RunClaimedError(f"{run_dir.path}: could not claim (contended)")


def release_run(run_dir: RunDir) -> None:
    run_dir.claim.unlink(missing_ok=True)
