"""eval.checkpoints=race on real tiny cycles: the racing allocation, samples never drawn twice, the honest
summary of unequal sample counts, and the settings checked up front."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from opsd_sweep.summarize.checkpoints import checkpoint_score
from opsd_sweep.config import ConfigError, load_run_config
from opsd_sweep.run.keys import semantic_dict
from opsd_sweep.evaluate.checkpoint_race import correct_counts
from opsd_sweep.evaluate.race_rule import race
from opsd_sweep.evaluate.standalone import load_eval_config
from opsd_sweep.run.identity import evaluation_problem
from opsd_sweep.run.keys import run_key
from opsd_sweep.summary import main as summary_main
from tests.conftest import compose, swept_group

N, PROBLEMS = 4, 16
# lr=1e-2 for 8 steps: seed 1 breaks after step 2 (its later checkpoints score ~0), seed 2 keeps improving
GRID = ["-m", "profile=tiny", "eval.checkpoints=race", "learning_rate=1e-2", "seed=1,2", "train.max_steps=8",
        "train.save_steps=2", f"eval.n_samples={N}", "eval.checkpoint_race.first_samples=1",
        "eval.checkpoint_race.samples_per_round=1", "eval.checkpoint_race.alpha=0.2",
        f"eval.max_problems={PROBLEMS}", "eval.shard_size=8", "group=race_ckpt"]


@pytest.fixture(scope="module")
def swept(tmp_path_factory, cache_dir):
    return swept_group(tmp_path_factory, cache_dir, GRID, "race_ckpt")


def evaluations(run_dir):
    """{step: eval.json} of every checkpoint of a run."""
    files = [*sorted(run_dir.glob("eval/checkpoint-*/eval.json")), run_dir / "eval/eval.json"]
    return {int(json.loads(f.read_text())["checkpoint"].rsplit("-", 1)[1]): json.loads(f.read_text()) for f in files}


def run_dirs(swept):
    return sorted(p.parent for p in swept.glob("*/status.json"))


def test_more_samples_go_only_to_checkpoints_still_plausibly_best(swept):
    stopped_early = 0
    for run_dir in run_dirs(swept):
        record = json.loads((run_dir / "eval/checkpoint_race.json").read_text())
        by_step = evaluations(run_dir)
        steps = sorted(by_step)
        assert steps == [2, 4, 6, 8] and record["stages"] == [1, 2, 3, 4]
        # the rule, replayed on the samples the run holds, gives the allocation it recorded
        replay = race(len(steps), record["stages"], record["alpha"],
                      lambda c, m: correct_counts(by_step[steps[c]], m))
        assert [*replay.samples[:-1], N] == [record["samples"][str(s)] for s in steps]
        for step, evaluation in by_step.items():  # each eval file says how many samples it holds
            assert evaluation["n_samples"] == record["samples"][str(step)]
            assert all(len(p["samples"]) == evaluation["n_samples"] for p in evaluation["problems"])
        assert by_step[8]["n_samples"] == N  # the run's result always has every sample
        stopped_early += sum(record["samples"][str(s)] < N for s in steps)
    assert stopped_early >= 1  # the broken run's checkpoints left the race after its first round


def test_no_sample_is_drawn_twice(swept):
    for run_dir in run_dirs(swept):
        for evaluation in evaluations(run_dir).values():  # the final one was raced, then topped up
            assert evaluation["timing"]["generated_samples"] == evaluation["n_samples"] * PROBLEMS
        assert not list(run_dir.glob("eval/**/shards"))  # nothing is kept once the race is over


def test_a_stopped_checkpoint_is_never_the_whole_evaluation(swept):
    run_dir = next(d for d in run_dirs(swept) if min(e["n_samples"] for e in evaluations(d).values()) < N)
    stopped = next(e for e in evaluations(run_dir).values() if e["n_samples"] < N)
    assert f"not eval.n_samples={N}" in evaluation_problem(stopped, None, False, N)


def test_summary_records_unequal_samples_and_the_first_round_scores(swept, tmp_path):
    summary_main([str(swept), "--out", str(tmp_path)])
    checkpoints = pd.read_csv(tmp_path / "checkpoints.csv")
    run_ids = pd.read_csv(tmp_path / "runs.csv").set_index("run_dir")["run_id"]
    for run_dir in run_dirs(swept):
        mine = checkpoints.loc[checkpoints["run_id"] == run_ids[str(run_dir)]].set_index("checkpoint_step")
        for step, evaluation in evaluations(run_dir).items():
            assert (mine.loc[step, "mode"], mine.loc[step, "samples"]) == ("race", evaluation["n_samples"])
            assert mine.loc[step, "score"] == pytest.approx(checkpoint_score(evaluation))  # what the choice reads
            assert mine.loc[step, "first_round"] == pytest.approx(100 * correct_counts(evaluation, 1).mean())
    report = (tmp_path / "summary.md").read_text()
    assert "## Checkpoints (eval.checkpoints=all or race)" in report and "first-round samples only" in report


def test_race_settings_are_checked_up_front_and_keyed_only_when_racing():
    with pytest.raises(ConfigError) as err:
        load_run_config(compose(["eval.checkpoints=race", "eval.n_samples=4", "eval.checkpoint_race.first_samples=4",
                                 "eval.checkpoint_race.samples_per_round=0", "eval.checkpoint_race.alpha=1",
                                 "eval.max_problems=1"]))
    message = str(err.value)
    assert "eval.checkpoint_race.first_samples=4 must be in [1, eval.n_samples=4)" in message
    assert "eval.checkpoint_race.samples_per_round=0 must be >= 1" in message
    assert "eval.checkpoint_race.alpha=1.0 must be in (0, 1)" in message
    assert "eval.max_problems=1 with eval.checkpoints=race" in message
    load_run_config(compose(["eval.checkpoint_race.first_samples=99"]))  # not racing: not read, not refused
    with pytest.raises(ConfigError, match="a standalone evaluation scores one checkpoint"):
        load_eval_config(compose(["eval.checkpoints=race"]))
    key = run_key(semantic_dict(load_run_config(compose([]))))
    assert run_key(semantic_dict(load_run_config(compose(["eval.checkpoint_race.alpha=0.1"])))) == key
    raced = run_key(semantic_dict(load_run_config(compose(["eval.checkpoints=race"]))))
    assert raced != key != run_key(semantic_dict(load_run_config(compose(["eval.checkpoints=all"]))))
    assert run_key(semantic_dict(load_run_config(compose(["eval.checkpoints=race",
                                                          "eval.checkpoint_race.alpha=0.1"])))) != raced
