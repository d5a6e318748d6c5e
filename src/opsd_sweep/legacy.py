"""Run dirs written before a change of the run key: found by their saved config and given today's key.

What enters the run key changes between versions (a new knob, the paths by identity), and each such
change gives every existing run a new key: without this module a rerun would not find its finished
runs (and train them again) and a summary would split one config into two. A saved config.yaml is read
with the fields added since it was written set to the value such runs had (ADDED_FIELDS); a dir whose
config then has this run's key is this run: it is renamed to today's name and keeps its results.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Callable

from omegaconf import OmegaConf

from opsd_sweep import CONF_DIR
from opsd_sweep.config import RunConfig, from_dict, to_dict
from opsd_sweep.runs import RunDir, atomic_write_text, current_owner, find_run_dir, owner_alive, read_json_or_none

# Fields added to the schema after runs existed -> the value every run written before them had. A new
# config field must be listed here (tests/reliability/test_earlier_run_dirs.py loads a config.yaml written
# by release 8c295b5 and fails without it).
ADDED_FIELDS = {
    "train.teacher": "fixed", "train.ema_decay": 0.999, "train.report_to": "none",
    "train.wandb_project": "opsd_sweep", "eval.checkpoints": "final", "eval.average_last": 3,
    "eval.suite": None, "eval.max_num_seqs": 256, "train.strategy": "ddp", "train.stop_on_collapse": False,
    # earlier runs had no collapse rule; the summary judges them by today's default
    "train.collapse": OmegaConf.to_container(OmegaConf.load(CONF_DIR / "recipe/paper.yaml").train.collapse),
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


def find_or_adopt(group_dir: Path, key: str, slug: str, key_of: Callable[[RunConfig], str]) -> RunDir:
    """The existing dir of this key, else one written under an earlier key (renamed), else a new path."""
    run_dir = find_run_dir(group_dir, key, slug)
    if run_dir.path.exists():
        return run_dir
    return adopt_earlier_dir(group_dir, key, slug, key_of) or run_dir


def adopt_earlier_dir(group_dir: Path, key: str, slug: str, key_of: Callable[[RunConfig], str]) -> RunDir | None:
    """The dir of this run written under an earlier key (same slug, other key suffix), renamed to
    <slug>-<key8> with its status's key updated; None when there is none."""
    target = group_dir / f"{slug}-{key[:8]}"
    for candidate in sorted(group_dir.glob(f"{slug}-*")):
        if candidate == target or not (candidate / "config.yaml").is_file():
            continue
        saved = saved_run_config(RunDir(candidate))
        if saved is None or key_of(saved) != key:
            continue
        if _held_by_a_live_process(RunDir(candidate)):  # e.g. a sweep of the earlier version still running it
            continue
        status = read_json_or_none(RunDir(candidate).status)
        try:
            candidate.rename(target)  # atomic: of two sweeps adopting at once, one renames
        except OSError:
            return RunDir(target) if target.exists() else None
        adopted = RunDir(target)
        atomic_write_text(adopted.config, OmegaConf.to_yaml(OmegaConf.create(to_dict(saved))))
        if isinstance(status, dict):
            adopted.update_status(key=key, earlier_key=status.get("key"))
        print(f"[opsd_sweep] {candidate.name} was written before a change of the run key: it is this run, "
              f"now {target.name} (results kept)", flush=True)
        return adopted
    return None



def _held_by_a_live_process(run_dir: RunDir) -> bool:
    owner = current_owner(run_dir)
    return owner is not None and owner_alive(owner)
