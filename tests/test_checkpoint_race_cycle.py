"""eval.checkpoints=race on real tiny cycles: the racing allocation, samples never drawn twice, the honest
summary of unequal sample counts, and the settings checked up front. Which checkpoints of a tiny run the race
stops is the CPU's (what a tiny run learns differs between CPU kernels), so a run whose checkpoints are built
to score 0 and 75 (a scripted model) is raced beside the real ones: its race stops some, on every CPU."""

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
from opsd_sweep.cycle import locate_run
from opsd_sweep.summary import main as summary_main
from opsd_sweep.tiny import make_problem
from tests.conftest import compose, run_sweep
from tests.scripted_model import build_scripted_model, stopping_adapter, zero_adapter

N, PROBLEMS = 4, 16
RACE = ["eval.checkpoints=race", "learning_rate=1e-2", "train.max_steps=8", "train.save_steps=2",
        f"eval.n_samples={N}", "eval.checkpoint_race.first_samples=1", "eval.checkpoint_race.samples_per_round=1",
        "eval.checkpoint_race.alpha=0.2", f"eval.max_problems={PROBLEMS}", "eval.shard_size=8"]
GRID = ["-m", "profile=tiny", *RACE, "seed=1,2", "group=race_ckpt"]  # real runs: what they stop is the CPU's
# A run whose race is built, not drawn, in a group of its own (tests/scripted_model.py): the scripted model writes
# \boxed{25}, right on the first 12 of its 16 problems; its checkpoints 2 and 6 are a LoRA under which it writes
# nothing, 4 and 8 one that changes nothing. After round 1, 2 and 6 (0 of 16) are worse than 4 (12 of 16): they stop.
SCRIPTED_SAMPLES = {2: 1, 4: N, 6: 1, 8: N}


def scripted_problems() -> list[dict]:
    """16 problems a+b*c: 12 whose answer is 25, then 4 whose answer is not."""
    rows = [make_problem(a, b, c) for a in range(1, 10) for b in range(2, 10) for c in range(2, 10)]
    right = [r for r in rows if r["answer"] == "25"][:12]
    return [{"id": f"s{i:02d}", **r} for i, r in enumerate(right + [r for r in rows if r["answer"] != "25"][:4])]


@pytest.fixture(scope="module")
def swept(tmp_path_factory, cache_dir):
    """The results root: the two real runs (race_ckpt), then the scripted run (race_ckpt_scripted; its checkpoints
    written, as a run that trained leaves them, before the sweep that evaluates it: the cycle finds its training
    done and runs the eval phase)."""
    results, built = tmp_path_factory.mktemp("results"), tmp_path_factory.mktemp("scripted")
    done = run_sweep(GRID, results, cache_dir)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    build_scripted_model(cache_dir / "tiny" / "model", built / "model", "25")
    (built / "eval.jsonl").write_text("".join(json.dumps(row) + "\n" for row in scripted_problems()))
    scripted = ["profile=tiny", *RACE, "seed=1", "group=race_ckpt_scripted", f"model.path={built / 'model'}",
                "model.name=scripted", f"eval.path={built / 'eval.jsonl'}"]
    _, run_dir = locate_run(load_run_config(compose([*scripted, f"results_root={results}", f"cache_dir={cache_dir}"])))
    for step in SCRIPTED_SAMPLES:
        adapter = stopping_adapter if SCRIPTED_SAMPLES[step] < N else zero_adapter
        adapter(built / "model", run_dir.checkpoint(step))
        (run_dir.checkpoint(step) / "trainer_state.json").write_text(json.dumps({"step": step, "world_size": 1}))
    done = run_sweep(["-m", *scripted], results, cache_dir)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert json.loads(run_dir.status.read_text())["state"] == "done"
    return results


def scripted_run(swept):
    (run_dir,) = run_dirs(swept / "race_ckpt_scripted")
    return run_dir


def evaluations(run_dir):
    """{step: eval.json} of every checkpoint of a run."""
    files = [*sorted(run_dir.glob("eval/checkpoint-*/eval.json")), run_dir / "eval/eval.json"]
    return {int(json.loads(f.read_text())["checkpoint"].rsplit("-", 1)[1]): json.loads(f.read_text()) for f in files}


def run_dirs(root):
    """The run dirs of a group, or of every group of a results root."""
    return sorted(p.parent for p in [*root.glob("*/status.json"), *root.glob("*/*/status.json")])


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
    assert stopped_early >= 2  # the scripted run's checkpoints that solve nothing left after the first round
    record = json.loads((scripted_run(swept) / "eval/checkpoint_race.json").read_text())
    assert record["samples"] == {str(step): n for step, n in SCRIPTED_SAMPLES.items()}


def test_no_sample_is_drawn_twice(swept):
    for run_dir in run_dirs(swept):
        for evaluation in evaluations(run_dir).values():  # the final one was raced, then topped up
            assert evaluation["timing"]["generated_samples"] == evaluation["n_samples"] * PROBLEMS
        assert not list(run_dir.glob("eval/**/shards"))  # nothing is kept once the race is over


def test_a_stopped_checkpoint_is_never_the_whole_evaluation(swept):
    stopped = evaluations(scripted_run(swept))[2]  # stopped after round 1
    assert stopped["n_samples"] == 1
    assert f"not eval.n_samples={N}" in evaluation_problem(stopped, None, False, N)


@pytest.mark.parametrize("group", ["race_ckpt", "race_ckpt_scripted"])  # apart: other problems, other scores
def test_summary_records_unequal_samples_and_the_first_round_scores(swept, tmp_path, group):
    summary_main([str(swept / group), "--out", str(tmp_path)])
    checkpoints = pd.read_csv(tmp_path / "checkpoints.csv")
    run_ids = pd.read_csv(tmp_path / "runs.csv").set_index("run_dir")["run_id"]
    for run_dir in run_dirs(swept / group):
        mine = checkpoints.loc[checkpoints["run_id"] == run_ids[str(run_dir)]].set_index("checkpoint_step")
        for step, evaluation in evaluations(run_dir).items():
            assert (mine.loc[step, "mode"], mine.loc[step, "samples"]) == ("race", evaluation["n_samples"])
            assert mine.loc[step, "score"] == pytest.approx(checkpoint_score(evaluation))  # what the choice reads
            assert mine.loc[step, "first_round"] == pytest.approx(100 * correct_counts(evaluation, 1).mean())
    if group == "race_ckpt_scripted":  # unequal by construction: 1 sample at steps 2 and 6, N at 4 and 8
        assert mine["samples"].to_dict() == SCRIPTED_SAMPLES
        assert mine["first_round"].to_dict() == {2: 0.0, 4: 75.0, 6: 0.0, 8: 75.0}
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
