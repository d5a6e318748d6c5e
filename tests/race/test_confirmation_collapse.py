"""A confirmation seed stopped at its collapse (train.stop_on_collapse): the race's final verdict may not judge the
winner (or, under pairing=seed, the baseline) on the confirmation seeds that survived, as no round of the race
does. With no declared collapsed_score the config leaves with the reason; with one it enters at that score."""

from __future__ import annotations

import numpy as np
import pytest

from opsd_sweep.race import RaceSettings, RaceSpec, RunResult, run_race

SETTINGS = dict(min_seeds=3, max_seeds=3, seeds_per_round=1, alpha=0.05, stop_alpha=0.02, eliminate_alpha=0.05,
                anchor_alpha=0.01, target_half_width=0.0, budget_gpu_hours=None, confirm_seeds=3, first_seed=1,
                max_failures=2)
RACE = {"base": [50.0, 51.0, 49.0], "a": [60.0, 61.0, 59.0]}  # a is decided better after round 0
CONFIRM = {"base": {4: 50.0, 5: 51.0, 6: 49.0}, "a": {4: 63.0, 5: 62.0, 6: 61.0}}  # seed 4 of `stops` collapses instead


def race(collapsed_score=None, pairing="none", stops=("a",)):
    spec = RaceSpec(("base", "a"), "base", None, RaceSettings(**SETTINGS, collapsed_score=collapsed_score,
                                                              pairing=pairing))

    def execute(requests):
        out = []
        for q in requests:
            if q.phase == "race":
                out.append(RunResult(q.config, q.seed, q.phase, "done", RACE[q.config][q.seed - 1], 1.0))
            elif q.config in stops and q.seed == 4:  # stopped at its collapse
                out.append(RunResult(q.config, q.seed, q.phase, "collapsed", collapsed_score, 0.5, collapse_step=5))
            else:
                out.append(RunResult(q.config, q.seed, q.phase, "done", CONFIRM[q.config][q.seed], 1.0))
        return out

    records = []
    state, _ = run_race(spec, execute, emit=records.append)
    final = {r["config"]: r for r in records if r["type"] == "decision" and r["phase"] == "final"}
    drops = {r["config"]: r for r in records if r.get("action") == "drop"}
    return state, final, drops


def test_a_winner_whose_confirmation_seed_collapsed_is_not_crowned_on_its_surviving_seeds():
    state, final, drops = race()
    assert state.winner == "a" and state.phase == "done"
    assert "a" not in final, f"judged on its survivors: {final.get('a')}"
    reason = drops["a"]["reason"]
    assert reason.startswith("collapsed in 1 of 6 seeds") and "; 1 stopped there with no score" in reason
    assert "hydra.sweeper.collapsed_score" in state.dropped["a"]
    assert final["base"]["action"] == "baseline"


def test_with_a_declared_collapsed_score_the_collapsed_confirmation_seed_enters_at_it():
    _, final, drops = race(collapsed_score=0.0)
    assert not drops
    a = final["a"]
    assert (a["n"], a["confirm_n"]) == (6, 3)
    assert a["mean"] == pytest.approx(np.mean([60, 61, 59, 0, 62, 61]))
    assert a["confirm_mean"] == pytest.approx(np.mean([0, 62, 61]))


def test_under_pairing_seed_a_baseline_whose_confirmation_seed_collapsed_leaves_the_claims():
    state, final, drops = race(pairing="seed", stops=("base",))
    assert "base" in drops and "base" not in final
    assert final["a"]["action"] == "no baseline"  # no claim against a baseline judged on its survivors
