"""Rounds of eval.checkpoints=race on the tiny model: a round draws only the samples it lacks, an
evaluation of fewer samples is never taken for the whole one, and samples an evaluator known to be wrong
drew are never kept."""

from __future__ import annotations

import json

from opsd_sweep.evaluate.evaluator import evaluate
from opsd_sweep.run.identity import ON_ROLLOUT_ENGINE, evaluation_problem
from tests.evaluate.conftest import eval_run

RACE = ("eval.checkpoints=race", "eval.n_samples=3", "eval.checkpoint_race.first_samples=1",
        "eval.checkpoint_race.samples_per_round=1")


def shard_files(eval_dir):
    return {p.name: (p.stat().st_mtime_ns, p.read_bytes()) for p in (eval_dir / "shards").glob("shard-*.json")}


def test_each_round_draws_only_new_samples_and_keeps_the_earlier_ones(tiny_world, tmp_path):
    run = eval_run(tiny_world, tmp_path, *RACE)
    eval_dir = tmp_path / "eval"
    first = evaluate(run, None, eval_dir, samples=1)
    after_first = shard_files(eval_dir)
    assert first["n_samples"] == 1 and first["timing"]["generated_samples"] == 8 and len(after_first) == 2

    second = evaluate(run, None, eval_dir, samples=2)
    after_second = shard_files(eval_dir)
    assert {name: after_second[name] for name in after_first} == after_first  # not rewritten, not redrawn
    assert len(after_second) == 4 and second["timing"]["generated_samples"] == 16
    assert [p["samples"][:1] for p in second["problems"]] == [p["samples"] for p in first["problems"]]

    whole = evaluate(run, None, eval_dir)  # the rest of eval.n_samples
    assert whole["n_samples"] == 3 and whole["timing"]["generated_samples"] == 24
    assert not (eval_dir / "shards").exists()  # the plan is whole: nothing is left to draw
    assert evaluate(run, None, eval_dir, samples=1) == whole  # enough samples already: nothing to do


def test_an_evaluation_of_fewer_samples_is_not_the_whole_one(tiny_world, tmp_path):
    run = eval_run(tiny_world, tmp_path, *RACE)
    partial = evaluate(run, None, tmp_path / "eval", samples=2)
    assert "2 samples per problem, not eval.n_samples=3" in evaluation_problem(partial, None, False, 3)
    assert evaluation_problem(partial, None, False, 2) is None
    assert evaluate(run, None, tmp_path / "eval")["n_samples"] == 3  # not returned as up to date


def test_samples_an_evaluator_known_wrong_drew_under_todays_plan_are_drawn_again(tiny_world, tmp_path, capsys):
    """eval.merge_lora=true once ran on the trainer's rollout engine, which served its base weights: eval.json and
    shards under the very plan of a right evaluation. Found wrong, both go, and every sample is drawn again."""
    run = eval_run(tiny_world, tmp_path, *RACE)
    eval_dir = tmp_path / "eval"
    first = evaluate(run, None, eval_dir, samples=1)  # a round: its shards stay for the next one
    assert len(shard_files(eval_dir)) == 2
    scored_base = first | {"evaluator": {"backend": "vllm", "serving": "vllm merge_lora", "version": 1},
                           "timing": first["timing"] | {"engine": ON_ROLLOUT_ENGINE}}
    (eval_dir / "eval.json").write_text(json.dumps(scored_base))
    again = evaluate(run, None, eval_dir, samples=2)
    assert again["timing"]["generated_samples"] == 16  # 8 problems x 2 samples, none of round one's kept
    assert "which served the base weights, not the merged checkpoint" in capsys.readouterr().out
    assert evaluation_problem(again, None, False, 2) is None
