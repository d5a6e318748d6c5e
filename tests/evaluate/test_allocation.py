"""Issue 40, item 2: eval.allocation=neyman. Per-problem counts fixed from a pilot of earlier runs (never the run
itself), with the floor and the budget of K uniform samples; shards that give each problem its count with the
same per-sample seeds; the stratified metrics; simulated runs and real tiny evaluations end to end, and
`evaluate compare` on the samples both drew. (The estimator's unbiasedness is design's, tested with it.)"""

from __future__ import annotations

import json

import numpy as np
import pytest

from opsd_sweep.config import load_run_config
from opsd_sweep.cycle import locate_run, run_cycle
from opsd_sweep.evaluate.compare import compare
from opsd_sweep.scoring.metrics import compute_metrics, pass_at_k
from opsd_sweep.evaluate.sampling_plan import PoolRun, allocate, plan_path, read_pool
from opsd_sweep.evaluate.shards import plan_shards
from opsd_sweep.evaluate.standalone import evaluate_standalone, locate_eval_dir
from opsd_sweep.run.keys import cycle_key
from tests.conftest import compose
from tests.evaluate.conftest import eval_run
from tests.premises import fix_outcomes


def record(correct: bool, n_tokens: int = 10) -> dict:
    return {"pred": "1" if correct else "2", "correct": correct, "formatted": True, "n_tokens": n_tokens,
            "finish_reason": "stop"}


# --- the plan's parts ----------------------------------------------------------------------------

def test_shards_give_each_problem_its_count_with_the_uniform_plans_seeds():
    ids = ["a", "b", "c"]
    counts = [1, 4, 2]
    allocated = [job for shard in plan_shards(ids, 2, 3, seed=7, counts=counts) for job in shard.jobs]
    uniform = {(job.problem, job.sample): job.seed for shard in plan_shards(ids, 4, 3, seed=7) for job in shard.jobs}
    assert sorted((job.problem, job.sample) for job in allocated) == sorted(
        (p, s) for p, n in enumerate(counts) for s in range(n))
    assert all(uniform[job.problem, job.sample] == job.seed for job in allocated)  # shared samples, shared seeds


def test_stratified_metrics_weigh_each_problem_equally_and_cut_pass_at_k_at_the_smallest_count():
    problems = [{"id": "a", "samples": [record(True), record(False)]},
                {"id": "b", "samples": [record(True), record(True), record(False), record(False, 30)]}]
    m = compute_metrics(problems)
    assert m["avg_at_n"] == pytest.approx(50.0)  # (1/2 + 2/4) / 2, not 3/6
    assert m["pass_at_k"] == {"1": pytest.approx(50.0), "2": pytest.approx(100 * (1.0 + pass_at_k(4, 2, 2)) / 2)}
    assert m["mean_tokens"] == pytest.approx((10 + (10 + 10 + 10 + 30) / 4) / 2)


def pool_run(run_id: str, correct, samples, cost_per_sample) -> PoolRun:
    samples = np.asarray(samples)
    return PoolRun(run_id, "c", int(samples.max()), ("p0", "p1", "p2", "p3"), np.asarray(correct), samples,
                   np.asarray(cost_per_sample, float) * samples, 0.0, 0.0)


def test_without_a_pilot_every_problem_gets_k_and_the_reason_says_so():
    counts, record_ = allocate([], 6, 2)
    assert counts is None and record_["kind"] == "uniform" and "no pilot yet" in record_["reason"]


def test_the_allocation_spends_the_budget_of_k_uniform_samples_and_keeps_the_floor():
    # p0 always solved, p1 never (both informative only through the prior), p2 / p3 half solved, p3 four times as
    # expensive: p2 gets the most, the sure problems the floor
    pilot = [pool_run("r1", [4, 0, 2, 2], [4, 4, 4, 4], [1, 1, 1, 4]),
             pool_run("r2", [4, 0, 3, 1], [4, 4, 4, 4], [1, 1, 1, 4])]
    counts, record_ = allocate(pilot, 6, 2)
    n = np.array([counts[f"p{i}"] for i in range(4)])
    cost = np.array([1, 1, 1, 4])
    assert n.min() >= 2 and n[2] == n.max() and n[2] > n[3]
    assert (n * cost).sum() <= 6 * cost.sum() and (n * cost).sum() > 6 * cost.sum() - cost.max()
    assert record_["kind"] == "neyman" and record_["source"] == ["r1", "r2"] and record_["floor"] == 2
    assert record_["budget"] == pytest.approx(6 * cost.sum())
    higher, _ = allocate(pilot, 6, 3)
    assert min(higher.values()) >= 3


# --- simulated runs ------------------------------------------------------------------------------

def simulated(results, seed: int, *extra: str):
    return load_run_config(compose(["executor=simulate", f"results_root={results}", "group=g", "eval.n_samples=6",
                                    "eval.allocation=neyman", f"seed={seed}", *extra]))


def test_counts_come_from_the_earlier_runs_only_before_the_runs_own_samples(tmp_path):
    first, second = simulated(tmp_path, 1), simulated(tmp_path, 2)
    run_cycle(first)
    first_eval = json.loads(locate_run(first)[1].eval_json.read_text())
    assert first_eval["allocation"]["kind"] == "uniform" and "samples_per_problem" not in first_eval
    assert {len(p["samples"]) for p in first_eval["problems"]} == {6}
    _, run_dir = locate_run(second)
    expected, _ = allocate(read_pool(second, run_dir), 6, 2)  # the pool before it ran: the first run alone
    run_cycle(second)
    plan = json.loads(plan_path(run_dir).read_text())
    evaluation = json.loads(run_dir.eval_json.read_text())
    assert plan["counts"] == expected == evaluation["samples_per_problem"]
    assert evaluation["allocation"]["source"] == [locate_run(first)[0]]  # the pilot, never the run itself
    assert {p["id"]: len(p["samples"]) for p in evaluation["problems"]} == expected
    assert min(expected.values()) >= 2 and len(set(expected.values())) > 1
    assert evaluation["n_samples"] == 6 and evaluation["metrics"] == compute_metrics(evaluation["problems"])
    assert max(map(int, evaluation["metrics"]["pass_at_k"])) == min(expected.values())


def test_the_run_key_holds_the_allocation_and_its_floor(tmp_path):
    neyman = simulated(tmp_path, 1)
    uniform = simulated(tmp_path, 1, "eval.allocation=uniform")
    assert len({cycle_key(neyman), cycle_key(uniform), cycle_key(simulated(tmp_path, 1, "eval.allocation_floor=3"))}) == 3
    # the floor is no part of a uniform run: earlier runs keep their keys
    assert cycle_key(simulated(tmp_path, 1, "eval.allocation=uniform", "eval.allocation_floor=3")) == cycle_key(uniform)


# --- real tiny evaluations -----------------------------------------------------------------------

def test_tiny_evaluations_allocate_from_the_groups_earlier_one_and_compare_on_common_samples(tmp_path, tiny_world):
    results = tmp_path / "results"
    neyman = ["group=alloc", "eval.allocation=neyman", "eval.n_samples=3", "eval.max_problems=4"]
    pilot = eval_run(tiny_world, results, *neyman, "seed=1")
    evaluate_standalone(pilot)
    # what the tiny model solves is the CPU's (a pilot that solves all or none allocates 3 of every problem), so
    # the pilot's outcomes are fixed: solved in 0, 1, 2 and 3 of 3 samples, which allocates 2, 4, 4 and 2
    fix_outcomes(locate_eval_dir(pilot)[1].eval_json, [0, 1, 2, 3])
    run = eval_run(tiny_world, results, *neyman, "seed=2")
    allocated = evaluate_standalone(run)
    counts = allocated["samples_per_problem"]
    assert allocated["allocation"]["source"] == [locate_eval_dir(pilot)[0]]
    assert [len(p["samples"]) for p in allocated["problems"]] == [counts[p["id"]] for p in allocated["problems"]]
    assert [counts[p["id"]] for p in allocated["problems"]] == [2, 4, 4, 2]  # the floor for the sure ones
    assert allocated["metrics"] == compute_metrics(allocated["problems"])
    lines = (locate_eval_dir(run)[1].eval_dir / "completions.jsonl").read_text().splitlines()
    assert len(lines) == sum(counts.values())
    # a rerun finds it finished and draws nothing
    assert evaluate_standalone(run)["created_at"] == allocated["created_at"]
    uniform = eval_run(tiny_world, results, "group=uniform", "eval.n_samples=3", "eval.max_problems=4", "seed=2")
    evaluate_standalone(uniform)
    compared = compare(locate_eval_dir(uniform)[1].path, locate_eval_dir(run)[1].path)
    assert compared["common_samples_per_problem"] == {i: min(3, n) for i, n in counts.items()}
    assert compared["samples"] == sum(min(3, n) for n in counts.values())
    assert "the samples both drew" in compared["line"]


# --- runs the race launches ----------------------------------------------------------------------

def test_a_race_of_simulated_runs_plans_each_runs_samples(tmp_path, cache_dir):
    from tests.conftest import run_sweep

    proc = run_sweep(["-m", "hydra/sweeper=race", "executor=simulate", "group=race", "simulate.train_gpu_hours=0.15",
                      "eval.n_samples=auto", "eval.allocation=neyman", "eval.auto_k.min_runs=3",
                      "learning_rate=2e-6,5e-6", "hydra.sweeper.baseline='learning_rate=5e-6'",
                      "hydra.sweeper.max_seeds=4", "hydra.sweeper.confirm_seeds=0"], tmp_path, cache_dir, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    evals = [json.loads(path.read_text()) for path in (tmp_path / "race").glob("*/eval/eval.json")]
    assert len(evals) >= 6
    assert all("k_choice" in e and "allocation" in e for e in evals)
    assert any(e["allocation"]["kind"] == "neyman" for e in evals)
    assert any(e["k_choice"]["pool_runs"] >= 3 and not e["k_choice"]["reason"].startswith("eval.auto_k.first")
               for e in evals)


def test_an_eval_json_of_another_allocation_is_evaluated_again_not_reused(tmp_path, tiny_world):
    """The evaluator's cache must NOT serve a plan with other per-problem counts: a uniform eval.json in the eval
    dir is not the allocated evaluation, nor is one of another allocation, even with the same K and seed."""
    from opsd_sweep.evaluate.evaluator import evaluate
    from opsd_sweep.evaluate.sampling_plan import SamplingPlan

    run = eval_run(tiny_world, tmp_path / "results", "group=cache", "eval.n_samples=3", "eval.max_problems=3")
    eval_dir = tmp_path / "eval"
    uniform = evaluate(run, None, eval_dir)
    ids = [p["id"] for p in uniform["problems"]]
    for counts in ([2, 3, 4], [4, 3, 2]):
        plan = SamplingPlan(3, dict(zip(ids, counts)), allocation={"kind": "neyman"})
        allocated = evaluate(run, None, eval_dir, sampling=plan)
        assert [len(p["samples"]) for p in allocated["problems"]] == counts
        assert allocated["fingerprint"] != uniform["fingerprint"]
    # the same plan again is up to date: nothing is drawn twice
    assert evaluate(run, None, eval_dir, sampling=plan)["created_at"] == allocated["created_at"]
