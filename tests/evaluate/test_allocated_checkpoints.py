"""eval.checkpoints=all with eval.allocation=neyman on real tiny cycles: every checkpoint of an allocated run is
scored as its eval.json scores it (the stratified score: each problem weighs the same whatever its count), in the
summary's checkpoints.csv and Checkpoints section as in runs.csv."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from opsd_sweep.summary import main as summary_main
from tests.conftest import run_sweep
from tests.premises import fix_outcomes

GRID = ["-m", "profile=tiny", "eval.checkpoints=all", "eval.allocation=neyman", "eval.n_samples=3",
        "eval.max_problems=6", "learning_rate=1e-2", "train.max_steps=4", "train.save_steps=2", "group=alloc_ckpt"]
# Seed 1 (no pilot yet: K of every problem) is the pilot of seed 2's allocation. What a tiny run scores is the
# CPU's (a 2-core CI VM's pilot scored 0 everywhere, which allocates 3 of every problem), so the pilot's final
# outcomes are fixed before seed 2 plans: solved in 0, 3, 1, 2, 0, 1 of 3, which allocates 2 or 4 per problem.
PILOT_SOLVED = [0, 3, 1, 2, 0, 1]


@pytest.fixture(scope="module")
def swept(tmp_path_factory, cache_dir):
    results = tmp_path_factory.mktemp("results")
    for seed in (1, 2):
        done = run_sweep([*GRID, f"seed={seed}"], results, cache_dir)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        if seed == 1:
            (pilot,) = (results / "alloc_ckpt").glob("*/eval/eval.json")
            fix_outcomes(pilot, PILOT_SOLVED)
    return results / "alloc_ckpt"


def test_an_allocated_runs_checkpoints_are_scored_like_its_eval_json(swept, tmp_path):
    evaluations = {path: json.loads(path.read_text()) for path in swept.glob("*/eval/**/eval.json")}
    allocated = [e for e in evaluations.values() if len({len(p["samples"]) for p in e["problems"]}) > 1]
    assert len(allocated) == 2  # seed 2's two checkpoints drew unequal counts per problem
    for evaluation in allocated:  # the pilot's 0 of 3 and 3 of 3 problems got the floor, its others more
        counts = [len(p["samples"]) for p in evaluation["problems"]]
        assert counts == [2 if solved in (0, 3) else 4 for solved in PILOT_SOLVED], counts
    summary_main([str(swept), "--out", str(tmp_path)])
    checkpoints = pd.read_csv(tmp_path / "checkpoints.csv")
    scored = {(row.run_id, row.checkpoint_step): row.score for row in checkpoints.itertuples()}
    runs = pd.read_csv(tmp_path / "runs.csv").set_index("run_id")
    for run_id, run in runs.iterrows():
        run_dir = swept / run["run_dir"].rsplit("/", 1)[-1]
        for path in run_dir.glob("eval/**/eval.json"):
            evaluation = evaluations[path]
            step = int(evaluation["checkpoint"].rsplit("-", 1)[-1])
            assert scored[run_id, step] == pytest.approx(evaluation["metrics"]["avg_at_n"]), path
        final = checkpoints.loc[(checkpoints["run_id"] == run_id) & (checkpoints["checkpoint_step"] == 4), "score"]
        assert final.item() == pytest.approx(run["avg_at_n"])
