"""Run dirs written before a change of the run key: found by their saved config and given today's key.

What enters the run key changes between versions (a new knob, the paths by identity), and each such
change gives every existing run a new key: without this module a rerun would not find its finished
runs (and train them again) and a summary would split one config into two. A saved config.yaml is read
with the fields added since it was written set to the value such runs had (run/added.py); a dir whose
config then has this run's key is this run when that is provable (`not_this_run`): its recorded
identities (identity.json) equal today's, or, written before identities were recorded, none of its
local inputs changed after the run started. Any other such dir is left as it is (stale, or a run of
inputs since changed) and this run gets a new dir.

Finding such a dir (`locate_dir`) only reads: the launcher's grid check and pre-flight call it.
Taking it over (`take_over`: renamed to today's name, config.yaml and the status's key rewritten)
happens only in the cycle, under the earlier dir's claim.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

from omegaconf import OmegaConf

from opsd_sweep.config import RunConfig, to_dict
from opsd_sweep.run.keys import input_paths
from opsd_sweep.run.claims import Claim, claim_run, current_owner, owner_alive, release_run
from opsd_sweep.run.rundir import RunDir, atomic_write_text, find_run_dir, read_json_or_none


def saved_run_config(run_dir: RunDir) -> RunConfig | None:
    """The run config a dir was written with, upgraded to today's schema; None when it does not read."""
    try:
        return run_dir.read_config()
    except Exception:  # a damaged or foreign config.yaml: not a dir this run can take over
        return None


@dataclass(frozen=True)
class Location:
    """Where a run lives: `run_dir` (<slug>-<key8>), unless a dir written under an earlier key (`earlier`)
    is provably this run: the cycle renames it to `run_dir` under its claim (take_over_earlier). `inputs`
    are today's identities of what the run reads; `notes` name the dirs of this run's slug that are not
    this run although their config says so (stale, or of inputs since changed), each with the reason."""

    key: str
    run_dir: RunDir
    inputs: dict[str, str]
    earlier: RunDir | None = None
    notes: tuple[str, ...] = ()

    @property
    def current(self) -> RunDir:
        """The dir that holds the run now (its status answers for the run)."""
        return self.earlier or self.run_dir


KeyOf = Callable[[RunConfig], str]
InputsOf = Callable[[RunConfig], dict[str, str]]


def locate_dir(group_dir: Path, run: RunConfig, slug: str, key_of: KeyOf, inputs_of: InputsOf) -> Location:
    """The existing dir of this key, else one written under an earlier key that is provably this run,
    else a new path. Reads only."""
    key, inputs = key_of(run), inputs_of(run)
    run_dir = find_run_dir(group_dir, key, slug)
    if run_dir.path.exists():
        return Location(key, run_dir, inputs)
    notes: list[str] = []
    for candidate in sorted(group_dir.glob(f"{slug}-*")):
        if candidate == run_dir.path or not (candidate / "config.yaml").is_file():
            continue
        saved = saved_run_config(RunDir(candidate))
        if saved is None or key_of(saved) != key:  # another config, or unreadable: not this run
            continue
        why_not = not_this_run(RunDir(candidate), inputs, inputs_paths(saved, inputs))
        if why_not is not None:
            notes.append(f"{candidate.name}: {why_not}; left as it is, this run gets {run_dir.path.name}")
        elif not _held_by_a_live_process(RunDir(candidate)):  # e.g. a sweep of the earlier version running it
            return Location(key, run_dir, inputs, RunDir(candidate), tuple(notes))
    return Location(key, run_dir, inputs, None, tuple(notes))


def inputs_paths(run: RunConfig, inputs: dict[str, str]) -> dict[str, str]:
    """The configured path of each named input (a standalone evaluation's checkpoint too)."""
    paths = input_paths(run) | ({"checkpoint": run.eval.checkpoint} if run.eval.checkpoint else {})
    return {name: paths[name] for name in inputs if name in paths}


def not_this_run(run_dir: RunDir, inputs: dict[str, str], paths: dict[str, str]) -> str | None:
    """Why a dir whose saved config has this run's key may hold another experiment, or None when it is
    provably this run: its recorded identities equal today's, or (written before records existed) every
    local input predates the run's start, so the files it read are the ones whose identities are today's."""
    record = run_dir.read_identity()
    if record is not None:
        changed = [name for name in inputs if record["inputs"].get(name) != inputs[name]]
        return f"its recorded identity of {', '.join(changed)} differs from today's" if changed else None
    started = _parse_time(run_dir.read_status().get("started_at"))
    if started is None:
        return "stale: written before identities were recorded, and no start time to prove its inputs unchanged"
    for name, path in paths.items():
        if not inputs[name].startswith(("file:", "dir:")):
            continue  # a hub id or a tiny-world path is its own identity
        modified = _last_modified(Path(path))
        if modified is None or modified >= started:
            when = "is gone" if modified is None else f"was modified at {modified.isoformat(timespec='seconds')}"
            return (f"stale: written before identities were recorded, and {name} ({path}) {when}, after the run "
                    f"started at {started.isoformat(timespec='seconds')}: it may not be what the run read")
    return None


def _parse_time(value: object) -> datetime | None:
    try:
        return datetime.fromisoformat(str(value)) if value else None
    except ValueError:
        return None


def _last_modified(path: Path) -> datetime | None:
    """The newest mtime of a file or of any file under a directory; None when it does not exist."""
    if path.is_file():
        stamps = [path.stat().st_mtime]
    elif path.is_dir():
        stamps = [p.stat().st_mtime for p in path.rglob("*") if p.is_file()] or [path.stat().st_mtime]
    else:
        return None
    return datetime.fromtimestamp(max(stamps), timezone.utc)


def standing(run_dir: RunDir, saved: RunConfig | None, key_of: KeyOf, inputs_of: InputsOf) -> str | None:
    """Why a dir (its config `saved`, typed) is not where a rerun of its own config would find its run, or
    None when it is: 'stale: ...' (left as it is), a run of inputs since changed, or a dir of an earlier key
    that the next rerun takes over. Reads only (python -m opsd_sweep.status shows it)."""
    if saved is None or key_of(saved)[:8] == run_dir.path.name[-8:]:
        return None
    inputs = inputs_of(saved)
    why_not = not_this_run(run_dir, inputs, inputs_paths(saved, inputs))
    return why_not or "written under an earlier run key: the next rerun of its sweep takes it over"


def inputs_when_unchanged(run_dir: RunDir, saved: RunConfig, key_of: KeyOf, inputs_of: InputsOf
                          ) -> dict[str, str] | None:
    """The identities a dir written before records (its config `saved`) depends on: today's when provably
    unchanged (its key holds them, or no local input changed after it started); None when unknown. Reads
    only (run.record.RunRecord.inputs)."""
    inputs = inputs_of(saved)
    if key_of(saved)[:8] == run_dir.path.name[-8:]:
        return inputs
    return inputs if not_this_run(run_dir, inputs, inputs_paths(saved, inputs)) is None else None


def take_over_earlier(where: Location) -> RunDir:
    """The dir the run lives in, a dir of an earlier key taken over first (the cycle only: it writes)."""
    for note in where.notes:
        print(f"[opsd_sweep] {note}", flush=True)
    return take_over(where) if where.earlier else where.run_dir


def take_over(where: Location) -> RunDir:
    """Rename the earlier dir to the run's dir under its claim (raises RunClaimedError when a live process
    holds it), with config.yaml upgraded, the status's key set and today's identities recorded; its
    results are kept. Returns the dir the run lives in now (the earlier one when it was taken over by
    another sweep meanwhile)."""
    earlier, target = where.earlier, where.run_dir
    claim = claim_run(earlier)
    try:
        saved = saved_run_config(earlier)
        if saved is None or target.path.exists():  # taken over by another sweep meanwhile
            return target if target.path.exists() else earlier
        status = read_json_or_none(earlier.status)
        earlier.path.rename(target.path)
        claim = Claim(target.claims / claim.path.name, claim.owner)  # the claim moved with its dir
        atomic_write_text(target.config, OmegaConf.to_yaml(OmegaConf.create(to_dict(saved))))
        target.write_identity(where.key, where.inputs)
        if isinstance(status, dict):
            target.update_status(key=where.key, earlier_key=status.get("key"))
        print(f"[opsd_sweep] {earlier.path.name} was written before a change of the run key: it is this run, "
              f"now {target.path.name} (results kept)", flush=True)
        return target
    finally:
        release_run(claim)


def _held_by_a_live_process(run_dir: RunDir) -> bool:
    owner = current_owner(run_dir)
    return owner is not None and owner_alive(owner)
