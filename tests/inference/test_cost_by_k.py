"""The decision's cost at another K: eval-sampling variance scales as 1/K, the training-seed part stays."""

from __future__ import annotations

import math

import pytest

from opsd_sweep.inference import stats
from opsd_sweep.inference.cost_by_k import decision_cost_by_k, run_gpu_hours_at_k, sd_at_k


def test_sd_at_k_keeps_the_seed_part_and_scales_the_eval_part():
    assert sd_at_k(4.0, 2.0, 12, 12) == pytest.approx(4.0)
    assert sd_at_k(4.0, 2.0, 12, 48) == pytest.approx(math.sqrt(12 + 4 * 12 / 48))
    assert sd_at_k(4.0, 2.0, 12, 10**9) == pytest.approx(math.sqrt(12), rel=1e-6)
    assert sd_at_k(1.0, 2.0, 12, 12) == pytest.approx(2.0)  # eval part above the run SD: no seed part left


def test_decision_cost_by_k_is_seeds_needed_times_a_run_at_that_k():
    plan = stats.PowerReference()
    rows = decision_cost_by_k([3, 12, 64], k=12, sd=4.6, eval_sd=2.0, train_h=0.15, eval_h=0.75, target_effect=3,
                              alpha=0.05, power=0.8, plan=plan, known=False)
    for row in rows:
        seeds = stats.seeds_needed(3, sd_at_k(4.6, 2.0, 12, row["k"]), 0.05, 0.8, plan)
        assert row["seeds"] == seeds
        assert row["gpu_h"] == pytest.approx(seeds * (0.15 + 0.75 * row["k"] / 12))
    assert run_gpu_hours_at_k(0.15, 0.75, 12, 3) == pytest.approx(0.15 + 0.75 / 4)
    assert [r["seeds"] for r in rows] == sorted((r["seeds"] for r in rows), reverse=True)  # more K, fewer seeds
