"""Checkpoint summaries: final, last-k, and a best step chosen on the other runs (leave one run out), on
hand-built tables with exact answers and on simulated runs whose every step has the same true score."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from opsd_sweep.summarize.calibration import CheckpointModel
from opsd_sweep.summarize.checkpoints import (checkpoint_score, collect_checkpoints, markdown_section, step_of,
                                             summarise_checkpoints)


def rows(run_id: str, by_step: dict[int, float], k: int = 2, label: str = "lr=1e-05") -> list[dict]:
    return [{"run_id": run_id, "label": label, "checkpoint_step": step, "mode": "all", "average_last": k,
             "samples": 4, "score": score, "first_round": score} for step, score in by_step.items()]


def test_each_run_is_scored_at_the_step_the_other_runs_choose():
    # Run r1 peaks at step 20 by its own luck; the others pick step 30 for it. Leaving r2 out, r1 and r3
    # pick 20 (53 > 51.5); leaving r3 out, r1 and r2 pick 20 (52 > 51).
    table = pd.DataFrame(rows("r1", {10: 40, 20: 60, 30: 50}) + rows("r2", {10: 42, 20: 44, 30: 52})
                         + rows("r3", {10: 41, 20: 46, 30: 53}))
    [row] = summarise_checkpoints(table, level=0.95).to_dict("records")
    assert (row["runs"], row["steps"], row["final_step"]) == (3, 3, 30)
    assert row["final"] == pytest.approx(155 / 3)
    assert row["last_k"] == pytest.approx((55 + 48 + 49.5) / 3)
    assert row["fold_steps"] == "30, 20, 20"
    assert row["best_cross"] == pytest.approx((50 + 44 + 46) / 3)
    assert (row["best_step_naive"], row["best_naive"]) == (30, pytest.approx(155 / 3))
    assert row["selection_gap"] == pytest.approx(155 / 3 - 140 / 3)
    assert row["best_low"] < row["best_cross"] < row["best_high"]  # a t-interval over the three runs' scores


def test_one_run_gets_no_best_score_and_the_report_says_why():
    table = pd.DataFrame(rows("r1", {10: 40, 20: 60}) + rows("r2", {10: 50, 20: 55}, label="lr=2e-05")
                         + rows("r3", {10: 52, 20: 51}, label="lr=2e-05"))
    summary = summarise_checkpoints(table, level=0.95).set_index("label")
    assert np.isnan(summary.loc["lr=1e-05", "best_cross"]) and summary.loc["lr=2e-05", "fold_steps"] == "10, 20"
    report = markdown_section(summary.reset_index(), 0.95)
    [lonely] = [line for line in report.splitlines() if line.startswith("| lr=1e-05")]
    assert "needs >= 2 runs" in lonely and "60.00 (step 20)" in lonely


def test_the_best_score_is_unbiased_and_covers_under_step_to_step_training_noise():
    # 3 runs x 10 checkpoints, same true score at every step, run x step noise 2.8 points: choosing on even
    # samples and scoring on odd ones of the same runs was +1.9 points too high and covered 92%.
    model = CheckpointModel(runs=3, steps=10, n_problems=30, n_samples=16, run_sd=2.0, step_sd=2.8)
    even, odd, truth = model.draw(300, np.random.default_rng(5))
    scores = 100 * (even + odd).mean(-1) / model.n_samples
    estimates, covered = [], []
    for replicate, score in enumerate(scores):
        table = pd.DataFrame([row for r in range(model.runs) for s in range(model.steps)
                              for row in rows(f"r{r}", {10 * (s + 1): score[r, s]}, k=1, label="c")])
        [row] = summarise_checkpoints(table, 0.95).to_dict("records")
        estimates.append(row["best_cross"] - truth[replicate])
        covered.append(row["best_low"] <= truth[replicate] <= row["best_high"])
    assert abs(np.mean(estimates)) < 0.5  # SE of the mean ~0.15 over 300 replicates
    assert 0.91 <= np.mean(covered) <= 0.99  # SE 1.3%: the benchmark's 4000 replicates pin it to 93-97%


def test_runs_without_checkpoint_evals_or_a_run_dir_give_no_rows(tmp_path):
    (tmp_path / "eval").mkdir()
    runs = pd.DataFrame({"run_id": ["mine", "external"], "label": ["a", "b"], "state": ["done", "done"], "counts": [True, True],
                         "run_dir": [str(tmp_path), None]})
    assert collect_checkpoints(runs).empty


def test_scores_come_from_the_raw_samples():
    evaluation = {"checkpoint": "/r/train/checkpoint-25", "problems": [
        {"samples": [{"correct": c} for c in row]} for row in ([True, False, True, True], [False, False, True, False])]}
    assert step_of(evaluation) == 25 and step_of({"checkpoint": None}) is None
    assert checkpoint_score(evaluation) == 50.0


def test_checkpoint_intervals_stay_within_the_score_range():
    table = pd.DataFrame(rows("r1", {10: 96, 20: 99}, k=1) + rows("r2", {10: 100, 20: 100}, k=1))
    [row] = summarise_checkpoints(table, level=0.95).to_dict("records")
    assert row["final_high"] == 100.0 and row["last_k_high"] == 100.0 and row["best_high"] == 100.0
    assert 0.0 <= row["final_low"] and 0.0 <= row["best_low"]


def test_a_raced_config_is_chosen_on_all_samples_and_scored_on_the_first_round():
    # The race's extra samples say step 20 (score); the first round alone would say step 10. Each run is
    # scored at the step the others choose on `score`, with its `first_round` value there.
    table = pd.DataFrame([{"run_id": run, "label": "c", "checkpoint_step": step, "mode": "race", "average_last": 1,
                           "samples": samples, "score": score, "first_round": first}
                          for run, step, samples, score, first in [
                              ("r1", 10, 3, 40, 60), ("r1", 20, 12, 55, 50), ("r2", 10, 3, 42, 61),
                              ("r2", 20, 12, 56, 52), ("r3", 10, 3, 41, 62), ("r3", 20, 12, 57, 54)]])
    [row] = summarise_checkpoints(table, level=0.95).to_dict("records")
    assert row["fold_steps"] == "20, 20, 20" and row["best_cross"] == pytest.approx(52)
    assert row["final"] == pytest.approx(56) and row["samples"] == "10: 3, 20: 12"
    assert "first-round samples only" in markdown_section(pd.DataFrame([row]), 0.95)
