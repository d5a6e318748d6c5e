"""Smoke runs of the decision-cost benchmark and its validity simulation, and checks of the world they price."""

from __future__ import annotations

import json

import numpy as np
import pytest

from benchmarks import bench_decision_cost, decision_validity
from opsd_sweep.costs.decision_designs import Planner, SamplePolicy, race
from opsd_sweep.costs.decision_model import Sweep, default_world, eval_lengths
from benchmarks.bench_race import GRIDS, settings_of
from opsd_sweep.inference.equivalence_plan import published_noise, samples_needed

REQUIRED = {"gpu_hours", "runs", "samples", "power", "fw_false_better"}


@pytest.fixture(scope="module")
def quick_record(tmp_path_factory):
    out = tmp_path_factory.mktemp("decision") / "decision_cost.json"
    bench_decision_cost.main(["--quick", "--out", str(out)])
    return json.loads(out.read_text())


def test_quick_run_writes_the_issue_schema(quick_record):
    assert set(quick_record["designs"]) == set(bench_decision_cost.DESIGN_NAMES)
    for name, row in quick_record["designs"].items():
        assert REQUIRED <= set(row), name
        assert row["gpu_hours"] > 0 and row["runs"] >= 18 and row["samples"] > 0
        assert 0 <= row["power"] <= 1 and 0 <= row["fw_false_better"] <= 1
    for key in ("cost_model", "length_model", "difficulty_model"):
        assert key in quick_record
    assert quick_record["verdict"]["target_ratio"] == 0.5


def test_quick_run_orders_the_designs_sanely(quick_record):
    d = quick_record["designs"]
    assert d["fixed_k12"]["gpu_hours"] > d["race_k12"]["gpu_hours"]  # racing stops seeding the losers
    per_run = {n: d[n]["samples"] / d[n]["runs"] for n in d}
    assert per_run["race_k12"] == pytest.approx(360, rel=0.01)  # 30 problems x 12 (means of rounded means)
    assert per_run["race_kauto"] < per_run["race_k12"]  # K auto chose fewer samples a run
    assert d["race_kauto"]["mean_k"] < 12


def test_quick_run_prices_fp8_after_a_compare_at_pm3_with_the_compare_included(quick_record):
    row = quick_record["what_if"][bench_decision_cost.FP8_AFTER_COMPARE]
    check = row["compare"]
    assert check["samples_per_problem"] == samples_needed(published_noise(), 3.0)  # the compare's own planner
    assert 40 <= check["samples_per_problem"] <= 120  # issue 49: ~41 at published noise (docs/evaluate.md says why more)
    world = default_world(lengths=eval_lengths("trained"))  # the benchmark's default length model
    assert check["length_model"] == world.lengths.name
    right, wrong = world.sample_seconds
    bf16_h = check["samples_per_problem"] * 30 * (0.5422 * right + 0.4578 * wrong) / 3600
    assert check["gpu_hours_per_arm"]["bf16"] == pytest.approx(bf16_h, abs=0.01)
    assert check["gpu_hours_per_arm"]["fp8"] < 0.7 * check["gpu_hours_per_arm"]["bf16"]
    assert row["gpu_hours"] == pytest.approx(row["decision_gpu_hours"] + check["gpu_hours"], abs=0.01)
    assert row["cost_model"]["eval_s_per_million_kv_tokens"] == pytest.approx(
        quick_record["cost_model"]["eval_s_per_million_kv_tokens"] / 2)  # the decision runs at FP8 KV cost


def test_the_world_matches_its_sources():
    world = default_world()
    eval_check = bench_decision_cost.check_published_eval()
    assert 40 <= eval_check["gpu_minutes"] <= 50  # the projected 45-50 GPU-minutes of a 360-sample eval
    lengths = world.lengths.describe()
    assert lengths["overall_mean"] == pytest.approx(19_000, rel=0.01)
    assert lengths["overall_share_at_cap"] == pytest.approx(0.05, abs=0.002)
    assert lengths["wrong"]["mean"] > lengths["correct"]["mean"]
    right, wrong = world.sample_seconds
    assert wrong > 2 * right  # the KV part grows with the square of the length
    difficulty = world.difficulty.describe()
    assert 0.74 <= difficulty["pass_at_12"] <= 0.80
    rates = np.array(difficulty["solve_rates"])
    assert (rates == 0).sum() >= 6 and (rates == 1).sum() >= 4
    assert world.train_sd ** 2 + world.difficulty.eval_var(world.base_score, 12) == pytest.approx(9.0)


def test_sweeps_share_their_draws_across_designs():
    """Common random numbers: a run's first 4 samples are the first 4 of its 12, whatever the seed correlation."""
    world = default_world()
    a, b = Sweep(world, GRIDS["six"], 5, rho=0.0), Sweep(world, GRIDS["six"], 5, rho=0.5)
    assert np.array_equal(a.correct(2, 3, np.full(30, 12)), a.correct(2, 3, np.full(30, 12)))
    twelve, four = a.correct(2, 3, np.full(30, 12)), a.correct(2, 3, np.full(30, 4))
    assert np.all(four <= twelve)
    shared = b.true_scores - b.grid[:, None]  # with rho 0.5 configs move together by seed
    assert np.corrcoef(shared[0], shared[1])[0, 1] > 0.2


def test_k_auto_and_allocation_plan_from_the_pool():
    world = default_world()
    planner = Planner(SamplePolicy(k=None, allocate=True), Sweep(world, GRIDS["six"], 9))
    first = planner.plan()
    assert first.uniform and first.k == 4
    for config in range(6):
        for seed in (1, 2, 3):
            planner.run(config, seed, first)
    later = planner.plan()
    assert not later.uniform and 2 <= later.k <= 12
    assert later.samples.min() >= 2
    # the never-solved problems (the dearest: wrong answers are long) get fewer samples than the informative ones
    assert later.samples[-6:].mean() < later.samples[4:24].mean()


def test_a_race_on_an_all_equal_grid_spends_more_than_on_a_clear_one():
    world, settings = default_world(), settings_of(bench_decision_cost.RACE_DEFAULTS, 24)
    clear = race(Sweep(world, (0.0, 12.0, 0.0, 0.0, -8.0, -10.0), 1), SamplePolicy(k=12), settings)
    equal = race(Sweep(world, GRIDS["six-equal"], 1), SamplePolicy(k=12), settings)
    assert clear.claims == {1}
    assert equal.runs > clear.runs


def test_validity_quick_run_writes_its_table(tmp_path):
    out = tmp_path / "validity.json"
    record = decision_validity.main(["--quick", "--out", str(out)])
    assert json.loads(out.read_text())["estimators"].keys() == decision_validity.ESTIMATORS.keys()
    for row in record["estimators"].values():
        assert 0 <= row["coverage"] <= 1 and 0 <= row["fw_false_better"] <= 1 and "bias" in row


def test_an_h100_decision_is_priced_from_the_h100s_own_eval_record():
    """--gpu H100: the eval check reads the record the H100's costs name (merged weights on an engine of its own),
    whose step model projects 3,366.9 s."""
    h100 = bench_decision_cost.check_published_eval("H100")
    assert h100["step_model_projection_minutes"] == [56.1]
    assert h100["gpu_minutes"] == pytest.approx(56.1, rel=0.02)
    assert h100["gpu_minutes"] > bench_decision_cost.check_published_eval("H200")["gpu_minutes"]
