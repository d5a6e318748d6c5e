"""Eval suites: eval=math_suite is AIME24 + AIME25 + HMMT25 as their own configs define them; a suite
on the tiny model is one evaluation whose eval.json keeps each benchmark, whose pooled score is avg@n
over all problems, and which the summary tests with --metric pooled, paired over the union."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from opsd_sweep.config import load_run_config
from opsd_sweep.evaluate.evaluator import summary_line
from opsd_sweep.evaluate.standalone import evaluate_standalone
from opsd_sweep.summary import main as summary_main
from tests.conftest import compose
from tests.evaluate.conftest import eval_run

DATASET_FIELDS = ("name", "path", "split", "problem_field", "answer_field", "id_field")


def test_math_suite_is_the_three_benchmarks_as_configured_alone():
    suite = load_run_config(compose(["eval=math_suite"])).eval
    assert suite.name == "math_suite" and list(suite.suite) == ["aime24", "aime25", "hmmt25"]
    for name, member in suite.suite.items():
        alone = load_run_config(compose([f"eval={name}"])).eval
        assert alone.suite is None
        assert [getattr(member, f) for f in DATASET_FIELDS] == [getattr(alone, f) for f in DATASET_FIELDS]
    assert (suite.n_samples, suite.temperature, suite.max_new_tokens) == (12, 1.0, 38912)


@pytest.fixture(scope="module")
def suite_runs(tiny_world, tmp_path_factory):
    """The tiny eval set split into two benchmarks; 2 temperatures x 2 seeds, each one suite evaluation."""
    root = tmp_path_factory.mktemp("suite")
    rows = [json.loads(line) for line in (tiny_world / "tiny" / "eval.jsonl").read_text().splitlines()]
    member = "{{name: {0}, path: {1}, split: train, problem_field: problem, answer_field: answer, id_field: null}}"
    for name, part in (("left", rows[:6]), ("right", rows[6:10])):
        (root / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in part))
    suite = f"eval.suite={{left: {member.format('left', root / 'left.jsonl')}, " \
            f"right: {member.format('right', root / 'right.jsonl')}}}"
    results = root / "results"
    evaluations = {}
    for temperature in (0.7, 1.0):
        for seed in (1, 2):
            run = eval_run(tiny_world, results, suite, "eval.name=tiny_suite", f"eval.temperature={temperature}",
                           f"seed={seed}", "group=suite", "eval.max_problems=null")
            evaluations[temperature, seed] = evaluate_standalone(run)
    return results / "suite", evaluations


def test_eval_json_keeps_each_benchmark_and_pools_over_all_problems(suite_runs):
    _, evaluations = suite_runs
    for result in evaluations.values():
        problems = result["problems"]
        assert [p["benchmark"] for p in problems] == ["left"] * 6 + ["right"] * 4
        assert [p["id"] for p in problems[:2]] == ["left/0", "left/1"] and problems[6]["id"] == "right/0"
        correct = {name: np.array([[s["correct"] for s in p["samples"]] for p in problems if p["benchmark"] == name])
                   for name in ("left", "right")}
        for name, matrix in correct.items():
            assert result["benchmarks"][name]["avg_at_n"] == pytest.approx(100 * matrix.mean())
        union = np.concatenate(list(correct.values()))
        assert result["metrics"]["pooled"] == result["metrics"]["avg_at_n"] == pytest.approx(100 * union.mean())
        assert result["n_problems"] == 10
        # the console line names every benchmark its pooled score is over, then each one's own
        line = summary_line(result)
        assert line.startswith(f"left + right (pooled, 10 problems): avg@{result['n_samples']} "
                               f"{result['metrics']['avg_at_n']:.2f}")
        assert line.endswith(f"; left avg@{result['n_samples']} {result['benchmarks']['left']['avg_at_n']:.2f}; "
                             f"right avg@{result['n_samples']} {result['benchmarks']['right']['avg_at_n']:.2f}")


def test_summary_tests_the_pooled_score_over_the_union(suite_runs, tmp_path):
    group, _ = suite_runs
    summary_main([str(group), "--metric", "pooled", "--baseline", "temperature=1.0", "--out", str(tmp_path),
                  "--no-plots"])
    runs = pd.read_csv(tmp_path / "runs.csv")
    assert len(runs) == 4
    weighted = (6 * runs["left.avg_at_n"] + 4 * runs["right.avg_at_n"]) / 10
    assert np.allclose(runs["pooled"], weighted)
    samples = pd.read_parquet(tmp_path / "samples.parquet")
    assert samples.groupby("run_id")["problem"].nunique().tolist() == [10] * 4
    table = pd.read_csv(tmp_path / "summary.csv").set_index("label")
    other = table.loc[table["verdict"] != "baseline"]
    assert len(other) == 1 and other["vs_baseline"].iloc[0] == "run scores"
