"""What an eval costs in the decision-cost world: the measured per-GPU figures against their records, the trained-
checkpoint growth of the published lengths, and a sweep's own lengths where its runs wrote them (issue 49, item 2)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from benchmarks import bench_decision_cost
from benchmarks.records import MEASURED
from opsd_sweep.testing.rundirs import draw_correct, write_run
from opsd_sweep.costs import length_model
from opsd_sweep.costs.decision_model import (World, DifficultyModel, eval_lengths, floor_cost_model,
                                             measured_cost_model, published_by_correctness)
from opsd_sweep.costs.measured import GPU_COSTS, WEIGHT_BYTES
from opsd_sweep.plan.prior import lengths_for

RECORDS = {"H200": "eval_step_model_2026-12-04_published_part.json",
           "H100": "eval_step_model_2026-12-05_h100_auto_without_adapter_share0.9.json"}


@pytest.mark.parametrize("gpu", sorted(GPU_COSTS))
def test_the_measured_costs_are_their_records_fits(gpu):
    costs, record = GPU_COSTS[gpu], json.loads((MEASURED / RECORDS[gpu]).read_text())
    assert RECORDS[gpu] in costs.eval_source
    assert costs.eval_step_s == record["fit"]["step_s"]
    assert costs.eval_s_per_million_kv_tokens == record["fit"]["s_per_million_kv_tokens"]
    # the cost model gives the record's own 360-sample projection at the published lengths (within the step
    # model's spread: the H200's record projects 2,631-2,938 s, two KV caches)
    drawn = length_model.published().draw(30, 12, 0)
    seconds = float(measured_cost_model(gpu=gpu).sample_seconds(drawn).sum())
    projected = [p["seconds"] for p in record["projections"] if p["requests"] == 360]
    assert min(projected) * 0.95 <= seconds <= max(projected) * 1.02


@pytest.mark.parametrize("gpu", sorted(GPU_COSTS))
def test_the_floor_prices_each_part_of_a_run_at_most_at_its_measured_cost(gpu):
    """The what-if row of an exact engine at every floor: below what was measured in each part, the eval step's
    fixed part at one read of the 1.7B model's weights at the GPU's copy rate, the KV part as measured."""
    measured, floor = measured_cost_model(gpu=gpu), floor_cost_model(gpu)
    assert floor.train_s < measured.train_s and floor.step_s < measured.step_s
    assert floor.kv_s_per_token == measured.kv_s_per_token
    assert floor.step_s == pytest.approx({"H100": 1.128e-3, "H200": 0.8e-3}[gpu], rel=1e-3)
    assert floor.step_s == WEIGHT_BYTES / length_model.COPY_BYTES_PER_S[gpu]
    drawn = length_model.published().draw(30, 12, 0)
    assert floor.sample_seconds(drawn).sum() < measured.sample_seconds(drawn).sum()
    assert "PROJECTED" in floor.describe()["train_source"]


def test_trained_lengths_grow_the_eval_cost_by_the_square_of_the_length_under_the_cap():
    base, trained = published_by_correctness(), published_by_correctness(trained=True)
    growth = length_model.TRAINED_GROWTH
    assert growth == pytest.approx(19_757 / 17_575)
    assert trained.correct.mean_before_cap == pytest.approx(base.correct.mean_before_cap * growth)
    assert "trained-checkpoint growth" in trained.name and base.name.startswith("published")
    cost = measured_cost_model()
    base_s, trained_s = (np.array(World(DifficultyModel(), lengths, cost).sample_seconds) for lengths in (base, trained))
    ratio = trained_s / base_s
    # uncapped, KV reads would grow by growth^2 = 1.264; the cap at 38,912 keeps the wrong (long) samples below that
    assert np.all(ratio > growth) and np.all(ratio < growth ** 2 + 0.01)


def test_a_sweeps_own_lengths_price_its_samples(tmp_path):
    rng = np.random.default_rng(3)
    for seed in (1, 2):
        write_run(tmp_path / "g", learning_rate=1e-5, seed=seed, correct=draw_correct(rng, np.zeros(30), 0.0, 4), rng=rng)
    recorded = [(s["n_tokens"], s["correct"]) for f in (tmp_path / "g").rglob("eval.json")
                for p in json.loads(f.read_text())["problems"] for s in p["samples"]]
    lengths = lengths_for("auto", str(tmp_path / "g"))
    assert lengths.name.startswith(f"the sweep's own lengths ({tmp_path / 'g'}, 240 samples)")
    assert lengths.accuracy == pytest.approx(np.mean([ok for _, ok in recorded]))
    cost = measured_cost_model()
    right, wrong = World(DifficultyModel(), lengths, cost).sample_seconds
    assert right == pytest.approx(cost.sample_seconds([n for n, ok in recorded if ok]).mean())
    assert wrong == pytest.approx(cost.sample_seconds([n for n, ok in recorded if not ok]).mean())
    # runs that wrote no samples: the published lengths, grown
    assert lengths_for("auto", str(tmp_path / "empty")).name == eval_lengths("trained").name


def test_the_decision_cost_benchmark_refuses_an_unknown_length_model(capsys):
    with pytest.raises(SystemExit) as refused:
        bench_decision_cost.main(["--lengths", "long"])
    assert refused.value.code == 2
    assert "lengths 'long': give published|trained|sweep:RESULTS" in capsys.readouterr().err
