"""Issue 41, item 3: the thinking settings and the length caps decide what a run computes (in a thinking-enabled
reproduction nearly every rollout hit the 1,024-token cap and OPSD lost points), so each enters the run key,
and each names itself readably in a summary label when it differs between configs."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from opsd_sweep.config import load_run_config
from opsd_sweep.run.keys import NON_SEMANTIC_SUBFIELDS, cycle_key, eval_key
from opsd_sweep.selector import select_config
from opsd_sweep.summarize.collect import collect
from tests.conftest import compose
from opsd_sweep.testing.rundirs import base_run, draw_correct, write_run

SIM = ["executor=simulate", "group=thinking"]
# (override of the default, the config field it sets)
SETTINGS = [("train.student_thinking=true", "train.student_thinking"),
            ("train.teacher_thinking=false", "train.teacher_thinking"),
            ("rollout.max_new_tokens=2048", "rollout.max_new_tokens"),
            ("eval.thinking=false", "eval.thinking"),
            ("eval.max_new_tokens=16384", "eval.max_new_tokens")]
EVAL_SETTINGS = [s for s in SETTINGS if s[1].startswith("eval.")]


def config(*overrides: str):
    return load_run_config(compose([*SIM, *overrides]))


@pytest.mark.parametrize("override,field", SETTINGS)
def test_each_thinking_setting_and_cap_changes_the_run_key(override, field):
    section, name = field.split(".")
    assert name not in NON_SEMANTIC_SUBFIELDS.get(section, ())
    default, changed = config(), config(override)
    assert getattr(getattr(default, section), name) != getattr(getattr(changed, section), name)  # a real change
    assert cycle_key(changed) != cycle_key(default)


@pytest.mark.parametrize("override,field", EVAL_SETTINGS)
def test_the_eval_settings_change_a_standalone_evaluations_key_too(override, field):
    assert eval_key(config(override)) != eval_key(config())


def write(group, seed: int, train=None, rollout=None, evaluate=None):
    base = base_run()
    rng = np.random.default_rng(seed)
    fields = {"train": dataclasses.replace(base.train, **(train or {})),
              "rollout": dataclasses.replace(base.rollout, **(rollout or {})),
              "eval": dataclasses.replace(base.eval, **({"n_samples": 2} | (evaluate or {})))}  # K of its eval.json
    return write_run(group, learning_rate=5e-6, seed=seed, correct=draw_correct(rng, np.zeros(4), 0.0, 2), rng=rng,
                     **fields)


@pytest.mark.parametrize("changed,column,label", [
    ({"train": {"student_thinking": True}}, "cfg.train.student_thinking", "student_thinking=True"),
    ({"train": {"teacher_thinking": False}}, "cfg.train.teacher_thinking", "teacher_thinking=False"),
    ({"rollout": {"max_new_tokens": 2048}}, "cfg.rollout.max_new_tokens", "rollout_max_tokens=2048"),
    ({"evaluate": {"thinking": False}}, "cfg.eval.thinking", "eval_thinking=False"),
    ({"evaluate": {"max_new_tokens": 16384}}, "cfg.eval.max_new_tokens", "eval_max_tokens=16384"),
])
def test_a_setting_that_differs_between_configs_is_in_their_labels_by_a_readable_name(tmp_path, changed, column,
                                                                                       label):
    for seed in (1, 2):
        write(tmp_path / "sweep", seed)
        write(tmp_path / "sweep", seed, **changed)
    runs = collect([str(tmp_path)]).runs
    assert column in runs  # a varying semantic column: in runs.csv and the label
    assert label in set(runs["label"]) and len(set(runs["label"])) == 2
    configs = {row["label"]: {column.removeprefix("cfg."): row[column]} for _, row in runs.iterrows()}
    short, value = label.split("=")
    assert select_config(f"{short}={value.lower()}", configs, "--baseline") == label  # the selector takes it back


def test_both_caps_varying_each_keep_their_own_name(tmp_path):
    write(tmp_path / "sweep", 1)
    write(tmp_path / "sweep", 1, rollout={"max_new_tokens": 2048}, train={"student_thinking": True},
          evaluate={"max_new_tokens": 16384, "thinking": False})
    assert set(collect([str(tmp_path)]).runs["label"]) == {
        "student_thinking=False rollout_max_tokens=1024 eval_max_tokens=38912 eval_thinking=True",
        "student_thinking=True rollout_max_tokens=2048 eval_max_tokens=16384 eval_thinking=False"}
