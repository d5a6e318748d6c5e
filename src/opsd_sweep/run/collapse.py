"""Collapse detection: a run collapsed at the first step from which its training diagnostics stay outside
the band of its own early steps (train.collapse in conf/recipe/paper.yaml).

`find_collapse` is the rule, a pure function of the metrics.jsonl lines: the trainer calls it after every
step (train.stop_on_collapse stops the run there) and the summary and race report call it on finished runs'
metrics.jsonl, so both always agree. A step is out of band when any signal fires:
  kl_true            above kl_ratio x the largest of the early steps (the student runs away from the teacher;
                     OPSD's KL falls as it learns, so only a rise counts)
  rollout_len        more than length_band (a share) away from the early steps' mean, up or down
  rollout_cap_frac   above the early steps' mean + cap_rise (more completions cut at max_new_tokens)
and a run collapses at the first of `patience` consecutive out-of-band steps (one noisy step is no collapse).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from omegaconf import OmegaConf

from opsd_sweep.config import CollapseConfig
from opsd_sweep.run.rundir import RunDir, atomic_write_json, read_json_or_none

MARKER = "collapsed.json"  # in train/: written by the trainer when train.stop_on_collapse stopped the run


@dataclass(frozen=True)
class Collapse:
    step: int    # the first out-of-band step
    reason: str  # the signals that fired there, with their values and bands

    def to_dict(self) -> dict:
        return {"step": self.step, "reason": self.reason}


def out_of_band(step: dict, early: list[dict], rule: CollapseConfig) -> list[str]:
    """The signals of one metrics line that leave the band of the early steps, each said with its numbers."""
    fired = []

    def values(key: str) -> list[float]:
        return [float(e[key]) for e in early if isinstance(e.get(key), (int, float))]

    kl = values("kl_true")
    if kl and isinstance(step.get("kl_true"), (int, float)) and step["kl_true"] > rule.kl_ratio * max(kl):
        fired.append(f"kl_true {step['kl_true']:.3g} > {rule.kl_ratio:g} x early max {max(kl):.3g}")
    length = values("rollout_len")
    if length and isinstance(step.get("rollout_len"), (int, float)):
        mean = float(np.mean(length))
        if abs(step["rollout_len"] - mean) > rule.length_band * mean:
            fired.append(f"rollout_len {step['rollout_len']:.3g} outside early mean {mean:.3g} ± {rule.length_band:.0%}")
    cap = values("rollout_cap_frac")
    if cap and isinstance(step.get("rollout_cap_frac"), (int, float)):
        limit = float(np.mean(cap)) + rule.cap_rise
        if step["rollout_cap_frac"] > limit:
            fired.append(f"rollout_cap_frac {step['rollout_cap_frac']:.2f} > early mean + {rule.cap_rise:g} = {limit:.2f}")
    return fired


def find_collapse(steps: list[dict], rule: CollapseConfig) -> Collapse | None:
    """The collapse of a run from its metrics lines in step order (None while it has not collapsed)."""
    early, later = steps[:rule.early_steps], steps[rule.early_steps:]
    if len(early) < rule.early_steps:
        return None
    streak: list[tuple[dict, list[str]]] = []
    for step in later:
        fired = out_of_band(step, early, rule)
        streak = streak + [(step, fired)] if fired else []
        if len(streak) >= rule.patience:
            first, signals = streak[0]
            return Collapse(int(first["step"]), "; ".join(signals))
    return None


def rule_of(config: dict) -> CollapseConfig:
    """The rule a saved run config names (a config of an earlier version: upgraded by run.added.upgrade_saved_config)."""
    return OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(CollapseConfig), config["train"]["collapse"]))


def collapse_count(judged: int, steps: list[int], not_judged: Sequence[str] = ()) -> str:
    """A config's collapses in the words of the summary and the race, over the seeds the rule could judge
    (`not_judged`: why each other seed could not be, e.g. 'failed before step 7'): 'collapsed in 2 of 2
    judged seeds, at steps 7, 9; 3 not judged (failed before step 7)' or 'no collapse in 5 seeds'."""
    seeds = f"{judged} judged seed{'s' * (judged != 1)}" if not_judged else f"{judged} seed{'s' * (judged != 1)}"
    if not steps:
        text = f"no collapse in {seeds}"
    else:
        text = (f"collapsed in {len(steps)} of {seeds}, at step{'s' * (len(steps) > 1)} "
                f"{', '.join(str(s) for s in sorted(steps))}")
    if not_judged:
        reasons = ", ".join(f"{n} {why}" if n > 1 else why for why, n in Counter(not_judged).items())
        text += f"; {len(not_judged)} not judged ({reasons})"
    return text


def write_marker(run_dir: RunDir, collapse: Collapse) -> None:
    atomic_write_json(run_dir.train_dir / MARKER, collapse.to_dict())


def read_marker(run_dir: RunDir) -> dict | None:
    """The collapse the trainer stopped the run at, or None (it trained to the end, or has not stopped)."""
    return read_json_or_none(run_dir.train_dir / MARKER)


def clear_marker(run_dir: RunDir) -> None:
    (run_dir.train_dir / MARKER).unlink(missing_ok=True)
