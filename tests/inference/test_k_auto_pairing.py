"""eval.n_samples=auto prices the unpaired variance; what that costs a comparison paired by seed.

Paired by seed, the difference of two arms at one seed has variance 2 s2_train (1 - rho_train) + 2 s2_eval / K (the
training-seed parts correlate by rho_train, the eval-sampling noise of two runs is taken as independent), and a
pair costs 2 (c_run + K c_sample). Its cost optimum is Cochran's with the training variance that pairing leaves,
so K auto's choice (cost_optimal_k at s2_train) is below it by sqrt(1 - rho_train). Every figure stays valid at
any K fixed before the run samples: what is lost is GPU-hours, and docs/statistics.md states how many."""

from __future__ import annotations

import math

import pytest
from scipy.optimize import minimize_scalar

from opsd_sweep.inference.design import choose_k, cost_optimal_k

# the published length model on one H200 (docs/statistics.md): ~9 GPU-min of training, ~47 of eval at K = 12;
# eval-sampling SD of avg@12 on 30 problems ~1.8 points (reference statistics)
TRAIN_H, EVAL_H, K, EVAL_VAR = 9 / 60, 47 / 60, 12, 1.8**2
BOUNDS = (2, 16)  # conf/eval: eval.auto_k.low, high


def paired_cost(k: float, train_var: float, rho_train: float) -> float:
    """Variance of one seed pair's difference times its GPU-hours: what a paired decision's cost is
    proportional to (seeds needed scale as the variance)."""
    variance = 2 * train_var * (1 - rho_train) + 2 * EVAL_VAR * K / k
    return variance * 2 * (TRAIN_H + EVAL_H * k / K)


@pytest.mark.parametrize("train_sd", [2.0, 3.0, 4.0])
@pytest.mark.parametrize("rho_train", [0.0, 0.5, 0.9])
def test_the_paired_optimum_is_cochrans_at_the_training_variance_pairing_leaves(train_sd, rho_train):
    found = minimize_scalar(lambda k: paired_cost(k, train_sd**2, rho_train), bounds=(0.1, 500), method="bounded",
                            options={"xatol": 1e-6})
    leaves = cost_optimal_k(EVAL_VAR, K, train_sd**2 * (1 - rho_train), TRAIN_H, EVAL_H)
    assert found.x == pytest.approx(leaves, rel=1e-4)
    unpaired = cost_optimal_k(EVAL_VAR, K, train_sd**2, TRAIN_H, EVAL_H)
    assert leaves == pytest.approx(unpaired / math.sqrt(1 - rho_train))  # K auto's optimum is this much lower


@pytest.mark.parametrize(("rho_train", "auto_k", "paired_k", "extra"),
                         [(0.5, 3, 4, 0.033), (0.7, 3, 6, 0.089), (0.9, 3, 10, 0.247)])
def test_what_k_auto_costs_a_paired_decision_as_docs_statistics_says(rho_train, auto_k, paired_k, extra):
    """Training-seed SD 3: the extra GPU-hours of a paired decision at K auto's K over the paired optimum's K
    (both rounded and held to the bounds as K auto does)."""
    auto = choose_k(EVAL_VAR, K, 3.0**2, TRAIN_H, EVAL_H, BOUNDS)
    paired = choose_k(EVAL_VAR, K, 3.0**2 * (1 - rho_train), TRAIN_H, EVAL_H, BOUNDS)
    assert (auto.k, paired.k) == (auto_k, paired_k)
    cost = paired_cost(auto.k, 3.0**2, rho_train) / paired_cost(paired.k, 3.0**2, rho_train) - 1
    assert cost == pytest.approx(extra, abs=0.0005)


def test_without_seed_correlation_k_auto_is_the_paired_optimum_too():
    auto = choose_k(EVAL_VAR, K, 3.0**2, TRAIN_H, EVAL_H, BOUNDS)
    best = min(range(BOUNDS[0], BOUNDS[1] + 1), key=lambda k: paired_cost(k, 3.0**2, 0.0))
    assert auto.k == best
