"""Issue 41, item 3: runs.csv has each run's share of rollouts and eval samples cut at their length caps, and the
summary warns, naming the knob, when most of a config's were cut."""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pandas as pd
import pytest

from opsd_sweep.scoring.metrics import compute_metrics
from opsd_sweep.run.rundir import atomic_write_json
from opsd_sweep.summarize.caps import console_line, summary_section
from opsd_sweep.summarize.collect import collect, eval_cap_frac, rollout_cap_frac
from opsd_sweep.testing.rundirs import base_run, write_run

THINKING = "student_thinking=True rollout_max_tokens=1024"
SHORT_CAP = "student_thinking=False rollout_max_tokens=512"
ROOMY = "student_thinking=False rollout_max_tokens=2048"


def capped_run(group, seed: int, *, thinking: bool, cap: int, rollout_cap: list[float], eval_cut: int):
    """A finished run whose metrics.jsonl logs `rollout_cap` (one value per step) and whose eval.json has
    `eval_cut` of each problem's 5 samples stopped for length."""
    base = base_run()
    run_dir = write_run(group, learning_rate=5e-6, seed=seed, correct=np.ones((4, 5), dtype=bool),
                        train=dataclasses.replace(base.train, student_thinking=thinking),
                        rollout=dataclasses.replace(base.rollout, max_new_tokens=cap),
                        eval=dataclasses.replace(base.eval, n_samples=5))  # all its samples: it counts
    run_dir.metrics.write_text("".join(json.dumps({"step": s + 1, "kl_true": 0.1, "rollout_len": 300.0,
                                                   "rollout_cap_frac": frac}) + "\n"
                                       for s, frac in enumerate(rollout_cap)))
    evaluation = json.loads(run_dir.eval_json.read_text())
    for problem in evaluation["problems"]:
        for j, sample in enumerate(problem["samples"]):
            sample["finish_reason"] = "length" if j < eval_cut else "stop"
    evaluation["metrics"] = compute_metrics(evaluation["problems"])
    atomic_write_json(run_dir.eval_json, evaluation)
    return run_dir


@pytest.fixture
def sweep(tmp_path):
    group = tmp_path / "sweep"
    capped_run(group, 1, thinking=True, cap=1024, rollout_cap=[0.9, 1.0, 0.8, 0.9], eval_cut=4)
    capped_run(group, 2, thinking=True, cap=1024, rollout_cap=[0.7, 0.7, 0.7, 0.7], eval_cut=3)
    capped_run(group, 1, thinking=False, cap=512, rollout_cap=[0.5, 0.6, 0.7, 0.6], eval_cut=0)
    capped_run(group, 1, thinking=False, cap=2048, rollout_cap=[0.1, 0.2, 0.3, 0.2], eval_cut=1)
    return collect([str(tmp_path)]).runs


def test_runs_csv_has_each_runs_rollout_and_eval_cap_fractions(sweep, tmp_path):
    assert sweep["counts"].all()
    sweep.to_csv(tmp_path / "runs.csv", index=False)
    runs = pd.read_csv(tmp_path / "runs.csv").sort_values(["label", "cfg.seed"]).set_index(["label", "cfg.seed"])
    assert runs["rollout_cap_frac"].to_dict() == pytest.approx({
        (ROOMY, 1): 0.2, (SHORT_CAP, 1): 0.6, (THINKING, 1): 0.9, (THINKING, 2): 0.7})
    assert runs["eval_cap_frac"].to_dict() == pytest.approx({
        (ROOMY, 1): 0.2, (SHORT_CAP, 1): 0.0, (THINKING, 1): 0.8, (THINKING, 2): 0.6})
    # each beside the cap and the thinking switch it was measured against
    assert runs.loc[(THINKING, 1), ["rollout_max_new_tokens", "student_thinking", "eval_max_new_tokens",
                                    "eval_thinking"]].tolist() == [1024, True, 38912, True]


def test_a_config_whose_rollouts_mostly_hit_the_cap_is_warned_about_naming_the_knob(sweep):
    thinking = (f"most rollouts of {THINKING} (80%) hit rollout.max_new_tokens=1024: the student learns from cut-off "
                "completions; raise rollout.max_new_tokens or turn off student thinking (train.student_thinking)")
    # student thinking is already off: only the cap is named
    short = (f"most rollouts of {SHORT_CAP} (60%) hit rollout.max_new_tokens=512: the student learns from cut-off "
             "completions; raise rollout.max_new_tokens")
    evals = (f"most eval samples of {THINKING} (70%) hit eval.max_new_tokens=38912: a cut-off sample seldom holds its "
             "final answer, so the score measures the cap as much as the model; raise eval.max_new_tokens (and "
             "eval.max_model_len on vllm) or turn off eval thinking (eval.thinking)")
    assert console_line(sweep) == f"length caps: {short}; {thinking}; {evals}"
    section = summary_section(sweep)
    assert section[0] == "## Length caps"
    assert f"- {ROOMY}: rollouts 20% cut at rollout.max_new_tokens=2048 (train.student_thinking: off; 1 run); eval " \
           "samples 20% cut at eval.max_new_tokens=38912 (eval.thinking: on; 1 run)" in section
    assert f"- {THINKING}: rollouts 80% cut at rollout.max_new_tokens=1024 (train.student_thinking: on; 2 runs); " \
           "eval samples 70% cut at eval.max_new_tokens=38912 (eval.thinking: on; 2 runs)" in section
    assert [line for line in section if "Warning" in line] == [f"- **Warning**: {x}" for x in (short, thinking, evals)]
    assert not any(ROOMY in line for line in section if "Warning" in line)


def test_no_warning_when_no_config_mostly_hits_a_cap_and_no_section_without_measures(sweep):
    roomy = sweep[sweep["label"] == ROOMY]
    assert console_line(roomy) is None
    assert summary_section(roomy)[0] == "## Length caps" and not any("Warning" in x for x in summary_section(roomy))
    external = pd.DataFrame({"run_id": ["x"], "label": ["paper [external]"], "external": [True], "avg_at_n": [50.0]})
    assert summary_section(external) == [] and console_line(external) is None
    assert summary_section(pd.concat([external, roomy])) == summary_section(roomy)


def test_the_cap_fractions_of_one_run():
    assert rollout_cap_frac([{"step": 1, "rollout_cap_frac": 0.25}, {"step": 2, "rollout_cap_frac": 0.75}]) == 0.5
    assert math.isnan(rollout_cap_frac([{"step": 1, "kl_true": 0.1}]))  # a simulated run logs none
    # finish_reason decides; a sample written without one is cut when its tokens reach the cap
    samples = [{"finish_reason": "length", "n_tokens": 10}, {"finish_reason": "stop", "n_tokens": 100},
               {"n_tokens": 100}, {"n_tokens": 99}]
    assert eval_cap_frac({"problems": [{"samples": samples}]}, 100) == 0.5
    assert math.isnan(eval_cap_frac({"problems": [{"samples": [{"n_tokens": 100}]}]}, None))  # no cap to compare
    assert math.isnan(eval_cap_frac({"problems": []}, 100))


def test_the_summary_prints_and_writes_the_warning(tmp_path, capsys):
    from opsd_sweep.summary import main

    capped_run(tmp_path / "sweep", 1, thinking=True, cap=1024, rollout_cap=[0.9, 1.0, 0.8, 0.9], eval_cut=0)
    capped_run(tmp_path / "sweep", 2, thinking=True, cap=1024, rollout_cap=[0.9, 0.9, 0.9, 0.9], eval_cut=0)
    main([str(tmp_path), "--out", str(tmp_path / "out"), "--anchor", "none", "--baseline", "none", "--no-plots"])
    warning = "hit rollout.max_new_tokens=1024: the student learns from cut-off completions"
    assert warning in capsys.readouterr().out
    assert "## Length caps" in (tmp_path / "out" / "summary.md").read_text()
