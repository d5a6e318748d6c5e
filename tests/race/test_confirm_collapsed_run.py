"""Confirmation runs stopped at their collapse (train.stop_on_collapse), on a real tiny confirmation: the demo's
lr=0.03 breaks the tiny model within its first 10 of 20 steps. Such a run has finished, with no score: it is
not a run that "did not finish" (a rerun skips it), and the verdict may not judge the arm on the seeds that did
not collapse. Without a declared score there is no verdict and the report says how to declare one; with
--collapsed-score the collapsed runs enter at it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.test_confirm import run

pytestmark = pytest.mark.slow

SMALL = ["profile=tiny", "+sweep=demo", "eval.n_samples=2", "eval.max_problems=8"]
CONFIRM = ["--config", "lr=0.03", "--locked", "eval=tiny_locked", "--seeds", "2", "--", "train.stop_on_collapse=true"]


@pytest.fixture(scope="module")
def swept(tmp_path_factory, cache_dir) -> Path:
    """The base model (seeds 1, 2) and lr=0.03 for 20 steps (seeds 1, 2, trained on through their collapse)."""
    results = tmp_path_factory.mktemp("confirm_collapse")
    where = [f"results_root={results}", f"cache_dir={cache_dir}"]
    run("opsd_sweep.evaluate", "-m", *SMALL, "train.max_steps=0", "seed=1,2", *where, cache=cache_dir)
    run("opsd_sweep", "-m", *SMALL, "learning_rate=3e-2", "train.max_steps=20", "seed=1,2", *where, cache=cache_dir)
    return results / "tiny-demo"


def test_collapsed_confirmation_runs_withhold_the_verdict_and_are_not_called_unfinished(swept, cache_dir):
    proc = run("opsd_sweep.confirm", str(swept), *CONFIRM, cache=cache_dir, code=1)
    result = json.loads((swept / "confirm.json").read_text())
    states = [json.loads(p.read_text())["state"] for p in (swept.parent / "tiny-demo-confirm").rglob("status.json")]
    assert sorted(states) == ["collapsed", "collapsed", "done", "done"], states  # the config's 2 runs collapsed
    assert result["unfinished_runs"] == [] and "did not finish" not in proc.stdout  # finished: a rerun skips them
    assert result["collapsed_runs"] == ["config seed 3", "config seed 4"]
    assert result["verdict"] is None and result["verdict_line"].startswith("NO VERDICT on tiny-arith-locked: 2 "
                                                                           "confirmation run(s) stopped at a collapse")
    assert "--collapsed-score 0" in proc.stdout
    assert "config seed 3; config seed 4: with no declared score" in (swept / "confirm.md").read_text()

    proc = run("opsd_sweep.confirm", str(swept), "--collapsed-score", "0", *CONFIRM, cache=cache_dir)
    result = json.loads((swept / "confirm.json").read_text())
    locked = result["benchmarks"][1]
    assert locked["seeds"] == [3, 4] and locked["config_scores"] == [0.0, 0.0]
    assert result["verdict"] == "not confirmed"  # the base model solves some of the locked set
    assert "each enters both benchmarks at the declared score 0" in (swept / "confirm.md").read_text()
