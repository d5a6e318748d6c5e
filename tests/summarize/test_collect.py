"""Collecting run dirs (complete, partial, corrupt, simulated) and external CSVs into tidy tables."""

from __future__ import annotations

import dataclasses
import json
import shutil

import numpy as np
import pandas as pd
import pytest

from opsd_sweep.summarize.collect import collect, read_external
from opsd_sweep.scoring.metrics import pass_at_k
from opsd_sweep.inference import stats
from opsd_sweep.run.record import RunRecord
from opsd_sweep.run.rundir import RunDir
from opsd_sweep.testing.rundirs import base_run, draw_correct, write_run

DIFFICULTY = np.linspace(-2.5, 2.5, 10)


def _complete(group, lr, seed, k=4, **kw):
    rng = np.random.default_rng(seed)
    return write_run(group, learning_rate=lr, seed=seed, correct=draw_correct(rng, DIFFICULTY, 0.0, k), rng=rng, **kw)


def test_complete_runs_become_tidy_rows(tmp_path):
    group = tmp_path / "sweep"
    dirs = [_complete(group, lr, seed) for lr in (1e-5, 2e-5) for seed in (1, 2)]
    c = collect([str(tmp_path)])
    runs = c.runs.set_index("run_dir")
    assert len(runs) == 4 and c.skipped.empty
    assert "cfg.learning_rate" in runs and "cfg.seed" in runs and "cfg.model.name" not in runs  # only what varies
    assert c.fixed["cfg.model.name"] == "qwen3-1.7b" and "cfg.results_root" not in c.fixed
    assert sorted(set(runs["label"])) == ["lr=1e-05", "lr=2e-05"]
    row = runs.loc[str(dirs[0].path)]
    evaluation = json.loads(dirs[0].eval_json.read_text())
    correct = np.array([[s["correct"] for s in p["samples"]] for p in evaluation["problems"]])
    # pass@k columns are the evaluator's unbiased estimator over the raw samples
    for k in (1, 2, 4):
        expected = 100 * np.mean([pass_at_k(4, int(c), k) for c in correct.sum(1)])
        assert row[f"pass_at_{k}"] == pytest.approx(expected)
    assert row["avg_at_n"] == pytest.approx(100 * correct.mean())
    assert row["eval_var"] == pytest.approx(1e4 * stats.eval_sampling_variance(correct.mean(1), 4))
    assert row["n_samples"] == 4 and row["n_problems"] == 10
    # final training diagnostics: last step and the mean of the last 10% of steps (2 of 20)
    kl = [0.1 * (1 + (20 - s) / 20) for s in (19, 20)]
    assert row["train.steps"] == 20 and row["train.kl_true.last"] == pytest.approx(kl[-1])
    assert row["train.kl_true.tail"] == pytest.approx(np.mean(kl))
    assert (row["gpu_hours.train"], row["gpu_hours.evaluate"], row["gpu_hours.total"]) == (4.0, 1.0, 5.0)
    assert not row["external"] and not row["simulated"]
    assert list(c.samples.columns) == ["run_id", "problem", "problem_index", "sample", "correct", "formatted",
                                       "tokens", "finish_reason"]
    assert len(c.samples) == 4 * 10 * 4


def test_partial_empty_and_corrupt_run_dirs_are_listed_never_fatal(tmp_path):
    group = tmp_path / "sweep"
    good = _complete(group, 1e-5, 1)
    training = write_run(group, learning_rate=1e-5, seed=2, correct=None, state="training")
    no_eval = write_run(group, learning_rate=1e-5, seed=3, correct=None, state="done")
    failed = write_run(group, learning_rate=1e-5, seed=4, correct=None, state="failed")
    bad_yaml = _complete(group, 1e-5, 5)
    bad_yaml.config.write_text("learning_rate: [1e-5\nseed: ")
    torn_eval = _complete(group, 1e-5, 6)
    torn_eval.eval_json.write_text(torn_eval.eval_json.read_text()[:200])
    bad_status = _complete(group, 1e-5, 7)
    bad_status.status.write_text("{not json")
    bad_samples = _complete(group, 1e-5, 8)
    record = json.loads(bad_samples.eval_json.read_text())
    del record["problems"][0]["samples"][0]["correct"]
    bad_samples.eval_json.write_text(json.dumps(record))
    (group / "lr1e-05-clip0.05-s9-0123abcd").mkdir()
    status_only = group / "orphan"
    status_only.mkdir()
    (status_only / "status.json").write_text('{"state": "pending"}')

    c = collect([str(tmp_path)])
    reasons = dict(zip(c.skipped["path"].map(lambda p: p.rsplit("/", 1)[-1]), c.skipped["reason"]))
    # a torn status.json is recovered as the cycle recovers it (here: done, its eval.json reads back), so a
    # finished run is not lost to the summary while a rerun of its sweep skips it
    assert set(c.runs["run_dir"]) == {str(d.path) for d in (good, training, no_eval, failed, bad_status)}
    recovered = c.runs.set_index("run_dir").loc[str(bad_status.path)]
    assert recovered["state"] == "done" and recovered["counts"]
    assert "not finished" in reasons[training.path.name] and "failed" in reasons[failed.path.name]
    assert "eval/eval.json is missing" in reasons[no_eval.path.name]
    assert "config.yaml unreadable" in reasons[bad_yaml.path.name]
    assert "eval.json unreadable (JSONDecodeError" in reasons[torn_eval.path.name]
    assert "malformed" in reasons[bad_samples.path.name]
    assert reasons["lr1e-05-clip0.05-s9-0123abcd"] == "empty run dir"
    assert "no config.yaml" in reasons["orphan"]
    assert len(c.skipped) == 8 and bad_status.path.name not in reasons


def test_resumed_metrics_keep_the_latest_line_and_ignore_a_torn_one(tmp_path):
    run = _complete(tmp_path / "g", 1e-5, 1)
    lines = [{"step": s, "kl_true": 1.0, "loss": 1.0} for s in (1, 2, 3)] + [{"step": 3, "kl_true": 0.5, "loss": 2.0}]
    run.metrics.write_text("".join(json.dumps(x) + "\n" for x in lines) + '{"step": 4, "kl_')
    row = collect([str(tmp_path)]).runs.iloc[0]
    assert row["train.steps"] == 3 and row["train.kl_true.last"] == 0.5 and row["train.loss.tail"] == 2.0


def test_gpu_hours_as_one_total_is_split_by_phase_seconds(tmp_path):
    run = _complete(tmp_path / "g", 1e-5, 1)
    status = json.loads(run.status.read_text()) | {"gpu_hours": 6.0, "gpus": ["0", "1", "2", "3"],
                                                   "phase_seconds": {"train": 4500.0, "evaluate": 900.0}}
    run.status.write_text(json.dumps(status))
    row = collect([str(tmp_path)]).runs.iloc[0]
    assert (row["gpu_hours.total"], row["gpu_hours.train"], row["gpu_hours.evaluate"]) == (6.0, 5.0, 1.0)


def test_simulated_runs_are_labelled_and_kept_apart(tmp_path):
    for seed in (1, 2):
        _complete(tmp_path / "g", 1e-5, seed)
        _complete(tmp_path / "g", 1e-5, seed, simulated=True)
    runs = collect([str(tmp_path)]).runs
    labels = runs.groupby("simulated")["label"].agg(set)
    assert labels[True] == {"lr=1e-05 [simulated]"} and labels[False] == {"lr=1e-05"}


def test_untrained_runs_are_the_base_model_whatever_their_training_knobs(tmp_path):
    untrained = dataclasses.replace(base_run().train, max_steps=0)
    for lr in (1e-5, 2e-5):  # evaluations of the base model under two (irrelevant) learning rates
        _complete(tmp_path / "g", lr, 1, train=untrained)
        _complete(tmp_path / "g", lr, 2)
    runs = collect([str(tmp_path)]).runs
    assert sorted(runs["label"].unique()) == ["base model", "lr=1e-05 max_steps=100", "lr=2e-05 max_steps=100"]
    assert (runs.loc[runs["label"] == "base model", "cfg.train.max_steps"] == 0).all()


def test_globs_and_overlapping_roots_read_each_run_once(tmp_path):
    _complete(tmp_path / "a", 1e-5, 1)
    _complete(tmp_path / "b", 2e-5, 1)
    runs = collect([str(tmp_path / "*"), str(tmp_path)]).runs
    assert len(runs) == 2


def test_dirs_of_one_key_in_one_folder_keep_their_own_ids_and_the_last_finished_counts(tmp_path):
    run = _complete(tmp_path / "g", 1e-5, 1)
    # copied by hand under names that sort first: the original scans last and finished last
    copies = [RunDir(run.path.with_name(f"{name}-{run.path.name}")) for name in ("a-copy", "b-copy")]
    for copy in copies:
        shutil.copytree(run.path, copy.path)
    for each, ended_at in zip([run, *copies], ["2026-01-03", "2026-01-02", "2026-01-01"]):
        each.status.write_text(json.dumps(json.loads(each.status.read_text()) | {"ended_at": ended_at}))
    c = collect([str(tmp_path)])
    assert list(c.runs["run_dir"]) == [str(run.path)]
    listed = sorted(zip(c.skipped["path"], c.skipped["state"]))
    assert listed == [(str(copy.path), "repeated") for copy in copies]
    assert c.samples["run_id"].unique().tolist() == c.runs["run_id"].tolist() and len(c.samples) == 10 * 4


def test_external_csv_joins_the_run_dirs(tmp_path):
    _complete(tmp_path / "g", 1e-5, 1)
    _complete(tmp_path / "g", 1e-5, 2)
    csv = tmp_path / "published.csv"
    pd.DataFrame({"config": ["paper", "paper"], "run_id": [1, 2], "seed": [1, 2],
                  "avg_at_n": [54.0, 55.5]}).to_csv(csv, index=False)
    c = collect([str(tmp_path / "g")], external=[str(csv)])
    external = c.runs[c.runs["external"]]
    assert list(external["label"]) == ["paper [external]"] * 2 and list(external["run_id"]) == ["1", "2"]
    assert list(external["cfg.seed"]) == [1, 2] and set(external["state"]) == {"done"}
    assert set(c.runs.loc[~c.runs["external"], "label"]) == {"lr=1e-05"}
    bad = tmp_path / "bad.csv"
    pd.DataFrame({"name": ["x"], "avg_at_n": [1.0]}).to_csv(bad, index=False)
    with pytest.raises(ValueError, match=r"missing column\(s\) \['config', 'run_id'\]"):
        read_external(str(bad))


def test_maj_at_n_is_voted_again_from_an_older_evals_answers(tmp_path):
    """An eval.json written before the vote counted correct answers of different forms as one answer carries the
    old maj@n (0: '3' twice beat four correct answers voting apart); the summary reads today's vote (100)."""
    run = _complete(tmp_path / "sweep", 1e-5, 1)
    evaluation = json.loads(run.eval_json.read_text())
    forms = [("0.5", True), ("\\frac{1}{2}", True), ("1/2", True), ("\\dfrac{1}{2}", True), ("3", False), ("3", False)]
    for problem in evaluation["problems"]:
        problem["samples"] = [dict(problem["samples"][0], pred=pred, correct=ok) for pred, ok in forms]
    evaluation["metrics"]["maj_at_n"] = 0.0  # what the old vote wrote
    run.eval_json.write_text(json.dumps(evaluation))
    assert collect([str(tmp_path)]).runs["maj_at_n"].tolist() == [100.0]
    assert RunRecord.read(run.path).score("maj_at_n") == 100.0  # what the race reads
