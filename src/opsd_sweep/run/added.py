"""Config fields added or renamed after runs existed: the one table a new or renamed field goes into.

Each ADDED entry says the value every run written before the field had (a saved config.yaml of an earlier
release is read with it: upgrade_saved_config), and when the field stays out of the run key
(so that finished runs keep their key: semantic_dict). Each RENAMED entry moves a saved section to
its new name, and names the new place to a user who writes the old one (renamed_key_problem).
tests/reliability/test_earlier_run_dirs.py loads a config.yaml written by release 8c295b5 and fails when a
field is added without an entry here.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, Callable

from omegaconf import OmegaConf

from opsd_sweep import CONF_DIR
from opsd_sweep.config import RENAMED


@dataclass(frozen=True)
class Added:
    old: Any  # the value of every run written before the field existed
    # section dict -> True where the field is left out of the run key; None: the key holds it (or, for a
    # field of NON_SEMANTIC_SUBFIELDS, never does)
    omitted_when: Callable[[dict], bool] | None = None


ADDED = {
    "train.teacher": Added("fixed", lambda train: train["teacher"] == "fixed"),
    "train.ema_decay": Added(0.999, lambda train: train["teacher"] != "ema"),  # counts with the EMA teacher only
    "train.report_to": Added("none"),
    "train.wandb_project": Added("opsd_sweep"),
    "eval.checkpoints": Added("final", lambda e: e["checkpoints"] == "final"),
    "eval.average_last": Added(3),
    "eval.suite": Added(None),
    "eval.max_num_seqs": Added(256),
    "eval.kv_cache_dtype": Added("auto", lambda e: e["kv_cache_dtype"] == "auto"),  # in the key when not auto
    "rollout.kv_cache_dtype": Added("auto", lambda r: r["kv_cache_dtype"] == "auto"),
    # a merged adapter is served in bf16-rounded weights: its scores are not the exact adapter's, so a run
    # with eval.merge_lora=true is another experiment; it was outside the key before, and false stays out
    "eval.merge_lora": Added(False, lambda e: not e["merge_lora"]),
    # earlier runs served the adapter as a LoRARequest on the rollout engine; a checked merge scores the same model
    "eval.merge_check": Added(False),
    "eval.merge_tolerance": Added(0.02),
    "eval.engine": Added("rollout"),
    "train.strategy": Added("ddp"),
    "train.stop_on_collapse": Added(False),
    "train.profile_step": Added(None),
    # earlier runs had no collapse rule: the summary judges them by today's default
    "eval.checkpoint_race": Added(OmegaConf.to_container(OmegaConf.load(CONF_DIR / "eval/aime24.yaml").checkpoint_race),
                                  lambda e: e["checkpoints"] != "race"),
    "train.fp32_matmul": Added("ieee"),  # earlier runs did their fp32 (LoRA) matmuls in full fp32
    # the sampling plan (evaluate/sampling_plan.py): out of the key at what every earlier run did
    "eval.auto_k": Added(OmegaConf.to_container(OmegaConf.load(CONF_DIR / "eval/aime24.yaml").auto_k),
                         lambda e: e["n_samples"] != "auto"),
    "eval.allocation": Added("uniform", lambda e: e["allocation"] == "uniform"),
    "eval.allocation_floor": Added(2, lambda e: e["allocation"] == "uniform"),
    "simulate.train_gpu_hours": Added(None, lambda s: s["train_gpu_hours"] is None),
    "train.collapse": Added(OmegaConf.to_container(OmegaConf.load(CONF_DIR / "recipe/paper.yaml").train.collapse)),
}


def upgrade_saved_config(saved: dict) -> dict:
    """A saved config.yaml (as a dict) with its renamed sections under today's names and every field added
    since it was written set to its old value."""
    upgraded = copy.deepcopy(saved)
    for old, renamed in RENAMED.items():
        if old in upgraded and renamed.new not in upgraded:
            upgraded[renamed.new] = upgraded.pop(old)
    for dotted, added in ADDED.items():
        section, name = dotted.split(".")
        if isinstance(upgraded.get(section), dict):
            upgraded[section].setdefault(name, copy.deepcopy(added.old))
    return upgraded
