"""Checkpoint summaries on hand-built tables with exact answers: final, last-k, and a best step chosen on
one half of the samples and scored on the other."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from opsd_sweep.analysis.checkpoints import checkpoint_scores, collect_checkpoints, step_of, summarise_checkpoints


def rows(run_id: str, by_step: dict[int, tuple[float, float]], k: int = 2) -> list[dict]:
    """(half_a, half_b) per step; the full score is their mean (equal halves)."""
    return [{"run_id": run_id, "label": "lr=1e-05", "checkpoint_step": step, "average_last": k,
             "score": (a + b) / 2, "half_a": a, "half_b": b} for step, (a, b) in by_step.items()]


def test_best_step_is_chosen_on_half_a_and_scored_on_half_b():
    # Step 20 looks best on half a (a lucky half), step 30 is best in truth; the naive maximum over full
    # scores is step 20 too, and its gap to the held-out score is the selection effect.
    table = pd.DataFrame(rows("r1", {10: (40, 40), 20: (70, 44), 30: (50, 52)})
                         + rows("r2", {10: (42, 42), 20: (66, 46), 30: (52, 50)}))
    [row] = summarise_checkpoints(table, level=0.95).to_dict("records")
    assert (row["runs"], row["steps"], row["final_step"]) == (2, 3, 30)
    assert row["final"] == pytest.approx(51.0)
    assert row["last_k"] == pytest.approx(((57 + 51) / 2 + (56 + 51) / 2) / 2)
    assert (row["best_step"], row["best_held_out"]) == (20, pytest.approx(45.0))
    assert (row["best_step_naive"], row["best_naive"]) == (20, pytest.approx(56.5))
    assert row["selection_gap"] == pytest.approx(11.5)
    assert row["best_low"] < 45.0 < row["best_high"]  # a t-interval over the two runs (44, 46)


def test_runs_without_checkpoint_evals_or_a_run_dir_give_no_rows(tmp_path):
    (tmp_path / "eval").mkdir()
    runs = pd.DataFrame({"run_id": ["mine", "external"], "label": ["a", "b"], "state": ["done", "done"],
                         "run_dir": [str(tmp_path), None]})
    assert collect_checkpoints(runs).empty


def test_scores_and_halves_come_from_the_raw_samples():
    evaluation = {"checkpoint": "/r/train/checkpoint-25", "problems": [
        {"samples": [{"correct": c} for c in row]} for row in ([True, False, True, True], [False, False, True, False])]}
    assert step_of(evaluation) == 25 and step_of({"checkpoint": None}) is None
    got = checkpoint_scores(evaluation)
    assert got == {"score": 50.0, "half_a": 75.0, "half_b": 25.0}
    assert np.isnan(checkpoint_scores({"problems": [{"samples": [{"correct": True}]}]})["half_b"])
