"""What a user reads when some runs must not count (issue 38): a known-wrong evaluation, seeds stopped at
their collapse, runs the collapse rule could not judge, and the noise that the seeds advice splits.
Each test reads the summary's own outputs (summary.csv, summary.md, the advice), on hand-built run dirs."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pandas as pd
import pytest

from opsd_sweep.run.collapse import MARKER
from opsd_sweep.summarize.collect import collect
from opsd_sweep.summarize.config_stats import analyse
from opsd_sweep.summary import main, parse_args
from opsd_sweep.testing.rundirs import base_run, draw_correct, write_run

DIFFICULTY = np.random.default_rng(0).normal(0.0, 1.5, 30)


def summary_of(root, out, *flags) -> pd.DataFrame:
    main([str(root), "--out", str(out), "--anchor", "none", "--no-plots", *flags])
    return pd.read_csv(out / "summary.csv").set_index("label")


def runs_of(root, lr: float, seeds, shift: float, rng, **fields):
    return [write_run(root, learning_rate=lr, seed=seed, correct=draw_correct(rng, DIFFICULTY, shift, 12), rng=rng,
                      **fields) for seed in seeds]


def test_a_run_whose_scores_are_known_wrong_enters_no_statistic(tmp_path):
    rng = np.random.default_rng(1)
    runs_of(tmp_path / "g", 1e-5, (1, 2, 3), 0.0, rng)
    runs_of(tmp_path / "g", 2e-5, (1, 2, 3), 0.0, rng)
    before = summary_of(tmp_path, tmp_path / "before", "--baseline", "lr=1e-05")
    wrong = runs_of(tmp_path / "g", 2e-5, (4,), 0.0, rng)[0]
    evaluation = json.loads(wrong.eval_json.read_text())
    for problem in evaluation["problems"]:  # every sample right, by an evaluator version since found wrong
        for sample in problem["samples"]:
            sample["correct"] = True
    evaluation["metrics"]["avg_at_n"] = 100.0
    evaluation["evaluator"] = {"backend": "vllm", "serving": "vllm LoRARequest", "version": 0}
    wrong.eval_json.write_text(json.dumps(evaluation))
    after = summary_of(tmp_path, tmp_path / "after", "--baseline", "lr=1e-05")
    assert after.loc["lr=2e-05", "n"] == 3
    assert after.loc["lr=2e-05", "mean"] == pytest.approx(before.loc["lr=2e-05", "mean"])
    assert after.loc["lr=2e-05", "p_baseline"] == pytest.approx(before.loc["lr=2e-05", "p_baseline"])
    samples = pd.read_parquet(tmp_path / "after" / "samples.parquet")
    assert wrong.path.name[-8:] not in "".join(samples["run_id"].unique())  # nor in the per-sample table
    assert len(samples) == 6 * 30 * 12
    report = (tmp_path / "after" / "summary.md").read_text()
    assert "has since been found wrong" in report  # listed, with why, among the left-out run dirs


def collapsed_seed(root, lr: float, seed: int, step: int, stopped: bool):
    """A seed whose kl_true runs away at `step`: stopped there (train.stop_on_collapse, no eval.json), or
    trained on to the end and scored near 0."""
    correct = None if stopped else np.zeros((30, 12), dtype=bool)
    run_dir = write_run(root, learning_rate=lr, seed=seed, correct=correct, state="collapsed" if stopped else "done",
                        steps=step + 5 if stopped else 20)
    lines = [json.loads(line) for line in run_dir.metrics.read_text().splitlines()]
    for line in lines:
        line["kl_true"] = 5.0 if line["step"] >= step else 0.2
    run_dir.metrics.write_text("".join(json.dumps(line) + "\n" for line in lines))
    if stopped:
        found = {"step": step, "reason": "kl_true above the band"}
        status = json.loads(run_dir.status.read_text()) | {"collapse": found}
        run_dir.status.write_text(json.dumps(status))
        (run_dir.train_dir / MARKER).write_text(json.dumps(found))
    return run_dir


def test_seeds_stopped_at_their_collapse_never_give_a_survivors_only_verdict(tmp_path):
    rng = np.random.default_rng(2)
    runs_of(tmp_path / "g", 1e-5, (1, 2, 3, 4, 5), 0.0, rng)  # the baseline, ~50
    runs_of(tmp_path / "g", 3e-5, (1, 2), 1.5, rng)  # two survivors far above it
    for seed in (3, 4, 5):
        collapsed_seed(tmp_path / "g", 3e-5, seed, 8, stopped=True)
    withheld = summary_of(tmp_path, tmp_path / "withheld", "--baseline", "lr=1e-05")
    assert withheld.loc["lr=3e-05", "verdict"] == "withheld" and withheld.loc["lr=3e-05", "n"] == 2
    assert np.isnan(withheld.loc["lr=3e-05", "p_baseline"])
    assert "3 seed(s) stopped at their collapse have no score" in withheld.loc["lr=3e-05", "flags"]
    assert "--collapsed-score 0" in (tmp_path / "withheld" / "summary.md").read_text()
    floored = summary_of(tmp_path, tmp_path / "floored", "--baseline", "lr=1e-05", "--collapsed-score", "0")
    assert "run dirs are left out" not in (tmp_path / "floored" / "summary.md").read_text()  # they count now
    survivors = withheld.loc["lr=3e-05", "mean"]
    assert floored.loc["lr=3e-05", "n"] == 5 and floored.loc["lr=3e-05", "mean"] == pytest.approx(2 * survivors / 5)
    assert floored.loc["lr=3e-05", "verdict"] != "better"
    # the same seeds trained on through their collapse, scoring ~0, are judged the same way
    trained_on = tmp_path / "trained_on"
    runs_of(trained_on / "g", 1e-5, (1, 2, 3, 4, 5), 0.0, np.random.default_rng(2))
    rng = np.random.default_rng(2)
    runs_of(tmp_path / "unused", 1e-5, (1, 2, 3, 4, 5), 0.0, rng)
    runs_of(trained_on / "g", 3e-5, (1, 2), 1.5, rng)
    for seed in (3, 4, 5):
        collapsed_seed(trained_on / "g", 3e-5, seed, 8, stopped=False)
    on = summary_of(trained_on, tmp_path / "on", "--baseline", "lr=1e-05")
    assert on.loc["lr=3e-05", "n"] == 5 and on.loc["lr=3e-05", "verdict"] == floored.loc["lr=3e-05", "verdict"]
    assert on.loc["lr=3e-05", "mean"] == pytest.approx(floored.loc["lr=3e-05", "mean"])


def test_the_collapse_line_counts_only_runs_the_rule_could_judge(tmp_path, capsys):
    rng = np.random.default_rng(3)
    runs_of(tmp_path / "g", 1e-5, (1, 2, 3), 0.0, rng)
    for seed in (1, 2):
        collapsed_seed(tmp_path / "g", 3e-5, seed, 9, stopped=False)
    for seed in (3, 4, 5):  # failed at step 3, before the rule (2 early steps + 5 in a row) can fire
        write_run(tmp_path / "g", learning_rate=3e-5, seed=seed, correct=None, state="failed", steps=3)
    summary_of(tmp_path, tmp_path / "out")
    line = "lr=3e-05: collapsed in 2 of 2 judged seeds, at steps 9, 9; 3 not judged (3 failed before step 7"
    assert line in capsys.readouterr().out
    assert line in (tmp_path / "out" / "summary.md").read_text()


def test_the_samples_advice_splits_the_noise_of_the_runs_it_plans_with(tmp_path):
    """The base model's runs differ by eval sampling alone: were they in the eval-sampling SD while the
    run-to-run SD comes from the trained configs' pool, the advice would mix two sets of runs."""
    rng = np.random.default_rng(4)
    for lr in (1e-5, 2e-5):  # trained runs that solve most problems: little eval-sampling noise
        runs_of(tmp_path / "g", lr, (1, 2, 3, 4), 2.5 + rng.normal(0, 0.3), rng)
    untrained = dataclasses.replace(base_run().train, max_steps=0)
    runs_of(tmp_path / "g", 1e-5, (1, 2, 3, 4), 0.0, rng, train=untrained)  # near 50%: the most noise
    settings = parse_args([str(tmp_path), "--anchor", "none", "--baseline", "auto"])
    runs = collect(settings.roots).runs
    analysis = analyse(runs, settings, None)
    members = analysis.pool.members
    assert len(members) == 8 and not members["label"].str.startswith("base model").any()
    assert analysis.power["eval_sd"] == pytest.approx(np.sqrt(members["eval_var"].mean()))
    everyone = np.sqrt(analysis.usable["eval_var"].mean())
    assert everyone > 1.1 * analysis.power["eval_sd"]  # what the advice took before: the base model's noise too


def test_the_seeds_advice_prices_the_collapse_rate(tmp_path):
    rng = np.random.default_rng(5)
    runs_of(tmp_path / "g", 1e-5, (1, 2, 3, 4), 0.0, rng)
    runs_of(tmp_path / "g", 3e-5, (1, 2, 3), 0.0, rng)
    collapsed_seed(tmp_path / "g", 3e-5, 4, 9, stopped=False)  # trained on through its collapse, scores 0
    settings = parse_args([str(tmp_path), "--anchor", "none", "--baseline", "lr=1e-05"])
    analysis = analyse(collect(settings.roots).runs, settings, None)
    p = analysis.power
    usable = analysis.usable
    working = usable[usable["collapse_step"].isna() & (usable["label"] == "lr=3e-05")]["avg_at_n"].mean()
    [price] = p["collapses"]  # per config: lr=3e-05's own 1 of 4, not 1 of the 8 runs of both configs
    assert price["label"] == "lr=3e-05" and price["rate"] == pytest.approx(1 / 4)
    assert price["gap"] == pytest.approx(working - 0.0)
    assert price["sd_collapsing"] > p["sd"] and price["seeds_collapsing"] > p["seeds"]
    main([str(tmp_path), "--out", str(tmp_path / "out"), "--anchor", "none", "--baseline", "lr=1e-05", "--no-plots"])
    report = (tmp_path / "out" / "summary.md").read_text()
    assert f"needs **{price['seeds_collapsing']} seeds** for the same effect" in report


def test_a_config_yaml_rewritten_in_place_is_typed_again_not_served_from_the_cache(tmp_path):
    import os

    from opsd_sweep.run.record import RunRecord

    run_dir = runs_of(tmp_path / "g", 1e-5, (1,), 0.0, np.random.default_rng(6))[0]
    assert RunRecord.read(run_dir).typed_config().learning_rate == 1e-5
    text = run_dir.config.read_text()
    run_dir.config.write_text(text.replace("learning_rate: 1.0e-05", "learning_rate: 3.0e-05", 1))
    stat = run_dir.config.stat()
    os.utime(run_dir.config, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))  # a later write, surely
    assert RunRecord.read(run_dir).typed_config().learning_rate == 3e-5


def test_a_baseline_judged_on_its_survivors_judges_no_config(tmp_path):
    """A baseline seed stopped at its collapse leaves the baseline's mean to its survivors: every verdict against
    it is withheld (the configs' own runs are fine), until the stopped seed has a score."""
    rng = np.random.default_rng(6)
    runs_of(tmp_path / "g", 1e-5, (1, 2, 3, 4), 1.0, rng)  # the baseline's survivors, far above the others
    collapsed_seed(tmp_path / "g", 1e-5, 5, 8, stopped=True)
    runs_of(tmp_path / "g", 2e-5, (1, 2, 3, 4, 5), 0.0, rng)
    runs_of(tmp_path / "g", 3e-5, (1, 2, 3, 4, 5), -0.5, rng)
    withheld = summary_of(tmp_path, tmp_path / "withheld", "--baseline", "lr=1e-05")
    for label in ("lr=2e-05", "lr=3e-05"):
        assert withheld.loc[label, "verdict"] == "withheld" and np.isnan(withheld.loc[label, "p_baseline"])
        assert "the baseline's mean is of its seeds that did not collapse" in withheld.loc[label, "flags"]
    assert withheld.loc["lr=1e-05", "n"] == 4
    floored = summary_of(tmp_path, tmp_path / "floored", "--baseline", "lr=1e-05", "--collapsed-score", "0")
    assert floored.loc["lr=1e-05", "n"] == 5
    assert set(floored.loc[["lr=2e-05", "lr=3e-05"], "verdict"]) <= {"better", "worse", "inconclusive"}


def test_a_comparison_with_no_spread_stays_in_the_holm_family(tmp_path):
    """Runs that all score alike give no test; leaving the family would loosen every other config's Holm
    adjustment. Such a comparison enters at p = 1 and says why."""
    def constant(lr, score, seeds=(1, 2, 3)):
        correct = np.zeros((30, 12), dtype=bool)
        correct[:, : round(12 * score)] = True  # every run the same score on every problem
        for seed in seeds:
            write_run(tmp_path / "g", learning_rate=lr, seed=seed, correct=correct.copy())
    constant(1e-5, 0.5)
    constant(2e-5, 0.5)  # the same as the baseline on every run
    rng = np.random.default_rng(7)
    runs_of(tmp_path / "g", 3e-5, (1, 2, 3), 0.0, rng)
    summary = summary_of(tmp_path, tmp_path / "out", "--baseline", "lr=1e-05")
    flat = summary.loc["lr=2e-05"]
    assert flat["p_baseline"] == 1 and flat["verdict"] == "inconclusive"
    assert "no spread: its runs and the baseline's scored alike" in flat["flags"]
    p = summary.loc["lr=3e-05", "p_baseline"]
    assert summary.loc["lr=3e-05", "p_baseline_holm"] == pytest.approx(min(1.0, 2 * p))  # a family of two


def test_pool_sd_leaves_a_config_with_a_scored_collapse_its_own_spread(tmp_path):
    """The pooled SD leaves collapsed runs out; a config whose mean holds a collapse at 0 is judged on its own
    SD, not on the working configs' narrow one."""
    rng = np.random.default_rng(8)
    runs_of(tmp_path / "g", 1e-5, (1, 2, 3, 4, 5, 6), 0.0, rng)
    runs_of(tmp_path / "g", 3e-5, (1, 2, 3, 4, 5, 6), 0.0, rng)
    runs_of(tmp_path / "g", 2e-5, (2, 3, 4, 5, 6), 0.2, rng)
    collapsed_seed(tmp_path / "g", 2e-5, 1, 8, stopped=True)
    summary = summary_of(tmp_path, tmp_path / "out", "--baseline", "lr=1e-05", "--collapsed-score", "0",
                         "--pool-sd")
    runs = pd.read_csv(tmp_path / "out" / "runs.csv")
    collapsing = runs.loc[runs["label"] == "lr=2e-05", "avg_at_n"].fillna(0.0).to_numpy()
    row = summary.loc["lr=2e-05"]
    assert row["n"] == 6 and row["sd_source"] == "sample"
    assert row["sd_used"] == pytest.approx(collapsing.std(ddof=1)) and row["sd_df"] == 5
    assert "its own SD, not the pooled one" in row["flags"]
    assert row["verdict"] == "inconclusive"
    assert summary.loc["lr=3e-05", "sd_source"] == "pooled"
