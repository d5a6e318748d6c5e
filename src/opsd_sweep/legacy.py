"""Run dirs written before a change of the run key: found by their saved config and given today's key.

What enters the run key changes between versions (a new knob, the paths by identity), and each such
change gives every existing run a new key: without this module a rerun would not find its finished
runs (and train them again) and a summary would split one config into two. A saved config.yaml is read
with the fields added since it was written set to the value such runs had (ADDED_FIELDS); a dir whose
config then has this run's key is this run.

Finding such a dir (`find_earlier_dir`) only reads: the launcher's grid check and pre-flight call it.
Taking it over (`take_over`: renamed to today's name, config.yaml and the status's key rewritten)
happens only in the cycle, under the earlier dir's claim.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from omegaconf import OmegaConf

from opsd_sweep.config import RunConfig, from_dict, to_dict
from opsd_sweep.runs import (Claim, RunDir, atomic_write_text, claim_run, current_owner, find_run_dir, owner_alive,
                             read_json_or_none, release_run)

# Fields added to the schema after runs existed -> the value every run written before them had. A new
# config field must be listed here (tests/reliability/test_earlier_run_dirs.py loads a config.yaml written
# by release 8c295b5 and fails without it).
ADDED_FIELDS = {
    "train.teacher": "fixed", "train.ema_decay": 0.999, "train.report_to": "none",
    "train.wandb_project": "opsd_sweep", "eval.checkpoints": "final", "eval.average_last": 3,
    "eval.suite": None, "eval.max_num_seqs": 256,
}


def upgrade_saved_config(saved: dict) -> dict:
    """A saved config.yaml (as a dict) with every field added since it was written set to its old value."""
    upgraded = copy.deepcopy(saved)
    for dotted, value in ADDED_FIELDS.items():
        section, name = dotted.split(".")
        if isinstance(upgraded.get(section), dict):
            upgraded[section].setdefault(name, value)
    return upgraded


def saved_run_config(run_dir: RunDir) -> RunConfig | None:
    """The run config a dir was written with, upgraded to today's schema; None when it does not read."""
    try:
        saved = OmegaConf.to_container(OmegaConf.load(run_dir.config))
        return from_dict(upgrade_saved_config(saved))
    except Exception:  # a damaged or foreign config.yaml: not a dir this run can take over
        return None


@dataclass(frozen=True)
class Location:
    """Where a run lives: `run_dir` (<slug>-<key8>), unless a dir written under an earlier key (`earlier`)
    is this run: the cycle renames it to `run_dir` under its claim (take_over_earlier)."""

    key: str
    run_dir: RunDir
    earlier: RunDir | None = None

    @property
    def current(self) -> RunDir:
        """The dir that holds the run now (its status answers for the run)."""
        return self.earlier or self.run_dir


def locate_dir(group_dir: Path, key: str, slug: str, key_of: Callable[[RunConfig], str]) -> Location:
    """The existing dir of this key, else one written under an earlier key, else a new path. Reads only."""
    run_dir = find_run_dir(group_dir, key, slug)
    if run_dir.path.exists():
        return Location(key, run_dir)
    return Location(key, run_dir, find_earlier_dir(group_dir, key, slug, key_of))


def find_earlier_dir(group_dir: Path, key: str, slug: str, key_of: Callable[[RunConfig], str]) -> RunDir | None:
    """The dir of this run written under an earlier key (same slug, other key suffix), or None. Reads only."""
    target = group_dir / f"{slug}-{key[:8]}"
    for candidate in sorted(group_dir.glob(f"{slug}-*")):
        if candidate == target or not (candidate / "config.yaml").is_file():
            continue
        saved = saved_run_config(RunDir(candidate))
        if saved is None or key_of(saved) != key:
            continue
        if _held_by_a_live_process(RunDir(candidate)):  # e.g. a sweep of the earlier version still running it
            continue
        return RunDir(candidate)
    return None


def take_over_earlier(where: Location) -> RunDir:
    """The dir the run lives in, a dir of an earlier key taken over first (the cycle only: it writes)."""
    return take_over(where.earlier, where.run_dir, where.key) if where.earlier else where.run_dir


def take_over(earlier: RunDir, target: RunDir, key: str) -> RunDir:
    """Rename `earlier` to `target` under its claim (raises RunClaimedError when a live process holds it),
    with config.yaml upgraded and the status's key set to `key`; its results are kept. Returns the dir
    the run now lives in: `target`, or `earlier` when another sweep took it over first."""
    claim = claim_run(earlier)
    try:
        saved = saved_run_config(earlier)
        if saved is None or target.path.exists():  # taken over by another sweep meanwhile
            return target if target.path.exists() else earlier
        status = read_json_or_none(earlier.status)
        earlier.path.rename(target.path)
        claim = Claim(target.claims / claim.path.name, claim.owner)  # the claim moved with its dir
        atomic_write_text(target.config, OmegaConf.to_yaml(OmegaConf.create(to_dict(saved))))
        if isinstance(status, dict):
            target.update_status(key=key, earlier_key=status.get("key"))
        print(f"[opsd_sweep] {earlier.path.name} was written before a change of the run key: it is this run, "
              f"now {target.path.name} (results kept)", flush=True)
        return target
    finally:
        release_run(claim)


def _held_by_a_live_process(run_dir: RunDir) -> bool:
    owner = current_owner(run_dir)
    return owner is not None and owner_alive(owner)
