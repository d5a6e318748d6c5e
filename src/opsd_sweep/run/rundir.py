"""The run directory: the one owner of the file names in it, and atomic reads and writes of its files.

A run is one (config, seed) in <results_root>/<group>/<slug>-<key8>/ (run/keys.py says what the key
holds). Its files: config.yaml, status.json (+ status.prev.json), identity.json, claims/, train/
(metrics.jsonl, checkpoint-<step>/), eval/ (eval.json), logs/, tensorboard/.
"""

from __future__ import annotations

import glob
import json
import os
import re
import sys
import uuid
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import yaml
from omegaconf._utils import get_yaml_loader

from opsd_sweep.config import RunConfig, from_dict
from opsd_sweep.run.added import upgrade_saved_config


class _ConfigLoader(yaml.CSafeLoader):
    """libyaml's parser with OmegaConf's scalar rules (1e-05 is a float, no timestamps): a saved config.yaml
    reads as OmegaConf reads it, ~20x faster (hand-written: OmegaConf exposes only its pure-Python loader)."""


_ConfigLoader.yaml_implicit_resolvers = get_yaml_loader().yaml_implicit_resolvers

STATES = ("pending", "training", "evaluating", "interrupted", "done", "collapsed", "failed")


# --- atomic files --------------------------------------------------------------------------------

def new_file(directory: Path | str, prefix: str, suffix: str) -> tuple[int, str]:
    """(descriptor open for writing, path) of a new file in `directory` with a random name, created with the mode
    open() gives a new file (0o666 less the umask: 0644 under umask 022), not mkstemp's 0600, so a colleague
    can read the run files (status.json, eval.json, claims) that a temp file becomes by rename."""
    for _ in range(100):
        path = os.path.join(directory, f"{prefix}{uuid.uuid4().hex[:12]}{suffix}")
        try:
            return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o666), path
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temp file name {prefix}*{suffix} in {directory}")


def umask_mode() -> int:
    """The mode open() gives a new file in this process: 0o666 less the umask (Linux: read from /proc, so the
    umask is never changed to read it, even for a moment another thread could create a file in)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return 0o666 & ~int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return 0o666 & ~mask


def give_umask_mode(directory: Path) -> None:
    """Give every file directly in `directory` the mode open() would (umask_mode): for files a library wrote
    0600 through its own temp file (safetensors' adapter_model.safetensors)."""
    mode = umask_mode()
    for path in directory.iterdir():
        if path.is_file() and not path.is_symlink():
            os.chmod(path, mode)


def atomic_write_text(path: Path | str, text: str) -> None:
    """Write via a temp file in the same directory and rename over: readers never see half a file. The file
    gets the mode open() would give it (new_file)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = new_file(path.parent, prefix=f".{path.name}.", suffix=".tmp")
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

    def read_config_dict(self) -> dict:
        """config.yaml as written, with the fields added since at the value such runs had (run/added.py);
        raises when it does not read (missing, not YAML, not a mapping)."""
        saved = yaml.load(self.config.read_text(), Loader=_ConfigLoader)
        if not isinstance(saved, dict) or not saved:
            raise ValueError("config.yaml is empty or not a mapping")
        return upgrade_saved_config(saved)

    def read_config(self) -> RunConfig:
        """The run's config in today's schema (see read_config_dict)."""
        return from_dict(self.read_config_dict())

    def training_steps(self) -> list[dict]:
        """The lines of train/metrics.jsonl in step order; a step logged twice (a resumed run re-logs it)
        keeps its latest line, and a torn line (one being written, or cut by a kill) is skipped."""
        if not self.metrics.exists():
            return []
        by_step: dict[int, dict] = {}
        for line in self.metrics.read_text().splitlines():
            try:
                record = json.loads(line)
                by_step[int(record["step"])] = record
            except (ValueError, KeyError, TypeError):
                continue
        return [by_step[s] for s in sorted(by_step)]

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


def gpu_hours(status: dict) -> dict[str, float]:
    """`gpu_hours.total` and `gpu_hours.<phase>` of a status.json ({} when it records none).

    status.json holds either {phase: hours} or one total with per-phase wall seconds and the GPU list;
    per-phase hours are then seconds x GPUs / 3600.
    """
    hours = status.get("gpu_hours")
    if isinstance(hours, dict):
        per_phase = {phase: float(h) for phase, h in hours.items()}
        return {f"gpu_hours.{p}": h for p, h in per_phase.items()} | {"gpu_hours.total": sum(per_phase.values())}
    if not isinstance(hours, (int, float)):
        return {}
    out = {"gpu_hours.total": float(hours)}
    gpus, seconds = status.get("gpus") or [], status.get("phase_seconds") or {}
    if gpus and isinstance(seconds, dict):
        out |= {f"gpu_hours.{phase}": float(s) * len(gpus) / 3600 for phase, s in seconds.items()}
    return out


RUN_DIR_NAME = re.compile(r"-[0-9a-f]{8}$")  # <slug>-<key8>: names a run dir even when it is empty


def find_run_dirs(roots: list[str | Path]) -> list[RunDir]:
    """Every run dir under the given roots (globs allowed), outside Hydra's and hidden folders: a dir with
    config.yaml, status.json, eval/eval.json or a SLURM submission, or an empty dir named <slug>-<key8>."""
    found: set[Path] = set()
    for root in roots:
        for base in glob.glob(str(Path(root).expanduser())):
            base = Path(base)
            candidates = [base, *(p for p in base.rglob("*") if p.is_dir())] if base.is_dir() else []
            for path in candidates:
                if ".hydra" in path.parts or any(part.startswith(".") for part in path.relative_to(base).parts):
                    continue
                if _looks_like_run_dir(RunDir(path)):
                    found.add(path)
    return [RunDir(p) for p in sorted(found)]


def _looks_like_run_dir(run_dir: RunDir) -> bool:
    files = (run_dir.config, run_dir.status, run_dir.eval_json, run_dir.submission)
    return any(f.exists() for f in files) or (RUN_DIR_NAME.search(run_dir.path.name) is not None
                                             and not any(run_dir.path.iterdir()))


def find_run_dir(group_dir: Path, key: str, slug: str) -> RunDir:
    """The existing directory of this key in the group, else a new <slug>-<key8> path."""
    existing = sorted(group_dir.glob(f"*-{key[:8]}"))
    return RunDir(existing[0] if existing else group_dir / f"{slug}-{key[:8]}")


