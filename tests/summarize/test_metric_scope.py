"""The summary refuses a metric whose meaning changes with the runs' K (summarize/metric_scope.py): maj_at_n over
runs of more than one K or of per-problem counts, pass_at_k with k above some run's smallest count; avg_at_n and
pass_at_k up to the smallest K stay allowed over mixed K."""

from __future__ import annotations

import dataclasses
import re

import numpy as np
import pandas as pd
import pytest

from opsd_sweep.testing.rundirs import base_run, draw_correct, write_run
from opsd_sweep.summarize.collect import collect
from opsd_sweep.summarize.config_stats import analyse
from opsd_sweep.summarize.metric_scope import check_metric_scope
from opsd_sweep.summarize.settings import load_settings
from opsd_sweep.summary import main
from tests.summarize.test_sampling_summary import sweep

DIFFICULTY = np.random.default_rng(0).normal(0.0, 1.5, 30)
AUTO = dataclasses.replace(base_run().eval, n_samples="auto")
MIXED = {5e-6: (4, 4, 16), 1e-5: (8, 8, 8)}  # K of each seed, as eval.n_samples=auto may give them


def write_ks(root, ks_by_lr: dict[float, tuple[int, ...]], auto: bool = True) -> list[str]:
    """Runs of one model (no effect of lr) at the given K; with auto every run of an lr is one config whatever
    its K (eval.n_samples=auto), else K is declared and so a config key. Returns [root]."""
    rng = np.random.default_rng(1)
    fields = {"eval": AUTO} if auto else {}
    for lr, ks in ks_by_lr.items():
        for seed, k in enumerate(ks, start=1):
            write_run(root, learning_rate=lr, seed=seed, correct=draw_correct(rng, DIFFICULTY, 0.0, k), rng=rng,
                      **fields)
    return [str(root)]


def refusal(runs: pd.DataFrame, metric: str) -> str:
    with pytest.raises(ValueError) as err:
        check_metric_scope(runs, metric)
    return str(err.value)


def test_maj_at_n_over_runs_of_different_k_in_one_config_is_refused_naming_each_k(tmp_path):
    runs = collect(write_ks(tmp_path / "g", MIXED)).runs
    message = refusal(runs, "maj_at_n")
    assert message.startswith("--metric maj_at_n: the runs used 3 different K (samples per problem: 4, 8, 16)")
    assert "lr=1e-05: K 8 (3 runs); lr=5e-06: K 4 (2 runs), 16 (1 run)" in message
    assert "depends on K" in message and "differs between runs of one config" in message
    assert "eval.n_samples=auto chose each run's K" in message
    assert "Compare on avg_at_n" in message and "pass_at_k with k <= 4" in message
    assert "summarise each K apart" in message


def test_k_as_a_declared_config_axis_is_refused_for_maj_at_n(tmp_path):
    runs = collect(write_ks(tmp_path / "g", {1e-5: (4, 4, 4), 2e-5: (11, 11, 11)}, auto=False)).runs
    message = refusal(runs, "maj_at_n")
    assert "samples per problem: 4, 11" in message and "K is a config axis" in message
    assert "K 4 (3 runs)" in message and "K 11 (3 runs)" in message
    assert "auto chose" not in message  # declared K: not chosen from the data
    assert "summarise each K apart: declare eval.n_samples=K (not auto)" in message


def test_maj_at_n_at_one_k_is_allowed_and_summarised(tmp_path):
    roots = write_ks(tmp_path / "g", {5e-6: (8, 8, 8), 1e-5: (8, 8, 8)})
    check_metric_scope(collect(roots).runs, "maj_at_n")
    main([*roots, "--out", str(tmp_path / "out"), "--no-plots", "--metric", "maj_at_n", "--baseline", "lr=5e-06"])
    assert pd.read_csv(tmp_path / "out" / "summary.csv")["n"].tolist() == [3, 3]


@pytest.mark.parametrize("metric, short, listed", [
    ("pass_at_8", 2, "lr=5e-06: K 4 (2 runs)."),
    ("pass_at_16", 5, "lr=1e-05: K 8 (3 runs); lr=5e-06: K 4 (2 runs)."),
])
def test_pass_at_k_above_a_runs_k_is_refused_naming_the_runs_left_out(tmp_path, metric, short, listed):
    runs = collect(write_ks(tmp_path / "g", MIXED)).runs
    k = int(metric.removeprefix("pass_at_"))
    message = refusal(runs, metric)
    assert message.startswith(f"--metric {metric}: {short} of the 6 runs have fewer than {k} samples")
    assert listed in message and f"pass@k needs K >= {k}" in message and "selected by their K" in message
    assert "pass_at_k with k <= 4" in message and "avg_at_n" in message


@pytest.mark.parametrize("metric", ["avg_at_n", "pass_at_1", "pass_at_4", "format_rate", "mean_tokens"])
def test_k_free_metrics_and_pass_at_k_up_to_the_smallest_k_keep_every_run(tmp_path, metric):
    runs = collect(write_ks(tmp_path / "g", MIXED)).runs
    check_metric_scope(runs, metric)
    analysis = analyse(runs, load_settings({"metric": metric, "baseline": "lr=5e-06", "plots": False}), None)
    assert analysis.table.set_index("label")["n"].to_dict() == {"lr=5e-06": 3, "lr=1e-05": 3}


def test_runs_that_do_not_count_and_external_runs_are_not_checked(tmp_path):
    roots = write_ks(tmp_path / "g", {5e-6: (8, 8), 1e-5: (8, 8)})
    write_run(tmp_path / "g", learning_rate=1e-5, seed=3, correct=draw_correct(
        np.random.default_rng(2), DIFFICULTY, 0.0, 4), state="failed", eval=AUTO)  # K 4, but does not count
    csv = tmp_path / "other_tool.csv"
    pd.DataFrame({"config": ["other tool"] * 2, "run_id": ["a", "b"], "maj_at_n": [60.0, 61.0],
                  "pass_at_16": [80.0, 82.0]}).to_csv(csv, index=False)
    runs = collect(roots, [str(csv)]).runs
    assert {4, 8} <= set(runs["n_samples"].dropna()) and runs["external"].any()
    check_metric_scope(runs, "maj_at_n")
    check_metric_scope(runs, "pass_at_8")


@pytest.fixture(scope="module")
def allocated(tmp_path_factory):
    """A simulated sweep under eval.n_samples=auto eval.allocation=neyman: its later runs draw per-problem counts."""
    results = tmp_path_factory.mktemp("results")
    sweep(results, "neyman", range(1, 6), "eval.n_samples=auto", "eval.auto_k.min_runs=3",
          "simulate.train_gpu_hours=0.15", "eval.allocation=neyman")
    return collect([str(results / "neyman")]).runs


def test_pass_at_k_above_an_allocated_runs_smallest_count_is_refused(allocated):
    neyman = allocated[allocated["samples_min"] < allocated["n_samples"]]
    assert not neyman.empty, "a run after the pilot should draw per-problem counts"
    run = neyman.iloc[0]
    k = int(run["n_samples"])  # within its K, above its smallest count
    message = refusal(allocated, f"pass_at_{k}")
    assert f"(smallest count {int(run['samples_min'])})" in message and f"pass@k needs K >= {k}" in message
    check_metric_scope(allocated, f"pass_at_{int(allocated['samples_min'].min())}")


def test_maj_at_n_over_allocated_runs_is_refused(allocated):
    message = refusal(allocated, "maj_at_n")
    assert "eval.allocation=neyman" in message and "smallest count" in message and "avg_at_n" in message


@pytest.fixture(scope="module")
def auto_k(tmp_path_factory):
    results = tmp_path_factory.mktemp("results")
    sweep(results, "auto", range(1, 7), "eval.n_samples=auto", "eval.auto_k.min_runs=3",
          "simulate.train_gpu_hours=0.15")
    return results / "auto"


@pytest.mark.parametrize("metric", ["maj_at_n", "pass_at_16"])
def test_the_cli_refuses_before_any_statistics_and_names_the_k(auto_k, tmp_path, metric):
    ks = sorted({int(k) for k in collect([str(auto_k)]).runs["n_samples"]})
    assert len(ks) > 1, "eval.n_samples=auto should give the sweep's later runs another K"
    out = tmp_path / "out"
    with pytest.raises(SystemExit) as err:
        main([str(auto_k), "--out", str(out), "--no-plots", "--metric", metric, "--baseline", "none",
              "--assumed-sd", "3"])
    message = str(err.value)
    assert message.startswith(f"--metric {metric}:") and "runs.csv is written to" in message
    if metric == "maj_at_n":
        assert f"(samples per problem: {', '.join(map(str, ks))})" in message
    else:  # each K below 16, with its count of runs
        assert all(re.search(rf"(K|,) {k} \(\d+ runs?\)", message) for k in ks if k < 16)
    assert (out / "runs.csv").exists() and not (out / "summary.csv").exists()


def test_the_cli_summarises_mixed_k_on_avg_at_n(auto_k, tmp_path):
    main([str(auto_k), "--out", str(tmp_path / "out"), "--no-plots", "--baseline", "none", "--assumed-sd", "3"])
    assert pd.read_csv(tmp_path / "out" / "summary.csv")["n"].tolist() == [6]


def test_runs_scored_on_other_problems_in_one_folder_are_refused_naming_each_set_and_where(tmp_path, capsys):
    """A score over 20 problems is not a score over 30: runs of other problem sets (another eval.max_problems, or
    a suite's tuning + locked sets beside the tuning set) are not one metric. In folders of their own each set is
    summarised apart (tests/summarize/test_problem_sets_apart.py); side by side in one folder they are refused."""
    rng = np.random.default_rng(3)
    for seed in (1, 2, 3):
        write_run(tmp_path / "g", learning_rate=1e-5, seed=seed, correct=draw_correct(rng, DIFFICULTY, 0.0, 8),
                  rng=rng)
        write_run(tmp_path / "g", learning_rate=2e-5, seed=seed,
                  correct=draw_correct(rng, DIFFICULTY[:20], 0.0, 8), rng=rng)
    with pytest.raises(SystemExit) as err:
        main([str(tmp_path), "--out", str(tmp_path / "out"), "--anchor", "none", "--no-plots"])
    message = str(err.value)
    assert "--metric avg_at_n: the runs scored 2 different sets of problems" in message
    assert re.search(r"\(30\): 3 run\(s\) in \S*g;", message) and re.search(r"\(20\): 3 run\(s\) in \S*g\.", message)
    assert "Summarise each set apart" in message and "(here two sets share a folder)" in message
    assert not (tmp_path / "out").exists()  # refused before anything is written
