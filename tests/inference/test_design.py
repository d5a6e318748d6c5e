"""inference.design against scipy/statsmodels, exact expectations or brute force."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import optimize, stats

from opsd_sweep.inference.design import (choose_k, cost_optimal_k, neyman_allocation, paired_difference,
                                         seed_correlation, seeds_needed_paired, shrunk_rates, stratified_score)


def variance(rates: np.ndarray, n: np.ndarray) -> float:
    """Variance of the mean over problems of per-problem means (fractions^2)."""
    return float((rates * (1 - rates) / n).sum() / rates.size ** 2)


def problems(seed: int, size: int = 12) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.uniform(0.02, 0.98, size), rng.uniform(2.0, 12.0, size)


# --- neyman_allocation ---------------------------------------------------------------------------

@pytest.mark.parametrize("seed,k,floor", [(0, 4, 2), (1, 12, 2), (2, 6, 1), (3, 3, 2)])
def test_allocation_spends_the_budget_and_keeps_the_floor(seed, k, floor):
    rates, cost = problems(seed)
    budget = k * cost.sum()
    n = neyman_allocation(rates, cost, budget, floor)
    assert n.dtype.kind == "i" and n.min() >= floor
    spent = float((n * cost).sum())
    assert spent <= budget + 1e-9
    assert budget - spent < cost.max()  # no whole sample of the dearest problem left unspent


@pytest.mark.parametrize("seed,k", [(0, 4), (1, 12), (4, 8)])
def test_allocation_is_near_the_continuous_optimum_and_no_neighbour_beats_it(seed, k):
    rates, cost = problems(seed)
    budget, floor = k * cost.sum(), 2
    n = neyman_allocation(rates, cost, budget, floor)
    # the continuous optimum (scipy) is a lower bound on any allocation of the same cost
    scale = 1e4  # variances of ~1e-3: scaled so that SLSQP's tolerance means something
    solved = optimize.minimize(lambda x: scale * variance(rates, x), np.full(rates.size, float(k)), method="SLSQP",
                               bounds=[(floor, None)] * rates.size, tol=1e-12,
                               constraints=[{"type": "eq", "fun": lambda x: x @ cost / budget - 1}])
    assert solved.success
    best = solved.fun / scale
    assert variance(rates, n) >= best * (1 - 1e-6)
    assert variance(rates, n) <= best * 1.03
    # no integer neighbour within the budget (one sample moved, or one added) is better by more than rounding
    spent = n @ cost
    for i, j in itertools.permutations(range(rates.size), 2):
        moved = n.copy()
        moved[i] -= 1
        moved[j] += 1
        if moved[i] >= floor and moved @ cost <= budget + 1e-9:
            assert variance(rates, moved) >= variance(rates, n) * (1 - 0.01)
    for j in range(rates.size):
        if spent + cost[j] <= budget + 1e-9:
            pytest.fail(f"a whole sample of problem {j} still fits in the budget")


def test_allocation_without_costs_differences_is_neyman():
    """Equal costs and a large budget: n_i proportional to sqrt(p_i (1 - p_i))."""
    rates = np.array([0.5, 0.1, 0.9, 0.3])
    n = neyman_allocation(rates, np.ones(4), 1000.0, floor=1)
    share = np.sqrt(rates * (1 - rates))
    np.testing.assert_allclose(n / n.sum(), share / share.sum(), atol=2e-3)


def test_allocation_rejects_bad_input():
    with pytest.raises(ValueError, match="same 1-D shape"):
        neyman_allocation(np.ones(3) / 2, np.ones(2), 10.0)
    with pytest.raises(ValueError, match="cost > 0"):
        neyman_allocation(np.ones(2) / 2, np.array([1.0, 0.0]), 10.0)


def test_shrunk_rates_stay_inside_0_1():
    rates = shrunk_rates(np.array([0, 12, 6]), np.array([12, 12, 12]))
    assert np.all((rates > 0) & (rates < 1))
    assert rates[2] == pytest.approx(0.5)


# --- stratified_score ----------------------------------------------------------------------------

def test_stratified_score_and_its_variance_are_unbiased_exactly():
    """Exact expectations over every binomial outcome: E[score] = mean p, E[eval_var] = Var(score)."""
    p = np.array([0.0, 1.0, 0.15, 0.5, 0.8])
    n = np.array([2, 3, 7, 4, 5])
    expected_score = expected_var = 0.0
    for i in range(p.size):
        c = np.arange(n[i] + 1)
        pmf = stats.binom.pmf(c, n[i], p[i])
        phat = c / n[i]
        expected_score += (pmf * phat).sum() / p.size
        expected_var += (pmf * phat * (1 - phat) / (n[i] - 1)).sum() / p.size ** 2
    assert expected_score == pytest.approx(p.mean(), abs=1e-12)
    assert expected_var == pytest.approx(variance(p, n), abs=1e-12)
    # and the function computes those per-outcome quantities
    scored = stratified_score(np.array([0, 3, 2, 1, 4]), n)
    assert scored.score == pytest.approx(np.mean([0, 1, 2 / 7, 1 / 4, 4 / 5]))
    phat = np.array([0, 1, 2 / 7, 1 / 4, 4 / 5])
    assert scored.eval_var == pytest.approx((phat * (1 - phat) / (n - 1)).sum() / 25)


def test_stratified_score_weights_problems_equally_and_checks_input():
    assert stratified_score(np.array([1, 10]), np.array([2, 10])).score == pytest.approx(0.75)
    assert math.isnan(stratified_score(np.array([1, 1]), np.array([1, 2])).eval_var)
    with pytest.raises(ValueError, match="0 <= correct <= samples"):
        stratified_score(np.array([3]), np.array([2]))


# --- K -------------------------------------------------------------------------------------------

def test_cost_optimal_k_minimises_cost_times_variance():
    """Brute force over a fine grid: (train_var + eval_var_1 / K) (train_h + eval_h_1 K) is least at the optimum."""
    eval_var, k, train_var, train_h, eval_h = 3.0, 12, 6.0, 0.15, 0.76
    optimum = cost_optimal_k(eval_var, k, train_var, train_h, eval_h)
    grid = np.linspace(0.5, 30, 200_000)
    objective = (train_var + eval_var * k / grid) * (train_h + eval_h / k * grid)
    assert optimum == pytest.approx(grid[objective.argmin()], rel=1e-3)
    assert cost_optimal_k(eval_var, k, 0.0, train_h, eval_h) is None


def test_choose_k_holds_the_bounds_and_says_why():
    inside = choose_k(3.0, 12, 6.0, 0.15, 0.76, (2, 12))
    assert inside.k == round(inside.optimum) and "held" not in inside.reason
    low = choose_k(3.0, 12, 6.0, 0.15, 0.76, (6, 12))
    assert low.k == 6 and "held to the bounds [6, 12]" in low.reason
    high = choose_k(30.0, 12, 0.5, 1.0, 0.1, (2, 12))
    assert high.optimum > 12 and high.k == 12
    none = choose_k(3.0, 12, -1.0, 0.15, 0.76, (2, 16))
    assert none.k == 16 and none.optimum is None
    with pytest.raises(ValueError, match="bounds"):
        choose_k(3.0, 12, 6.0, 0.15, 0.76, (5, 4))


# --- paired seeds --------------------------------------------------------------------------------

def test_paired_difference_matches_scipy():
    rng = np.random.default_rng(7)
    a, b = rng.normal(55, 3, 9), rng.normal(53, 3, 9)
    cmp = paired_difference(a, b, 0.95)
    ref = stats.ttest_rel(a, b)
    assert cmp.delta == pytest.approx((a - b).mean())
    assert cmp.p == pytest.approx(ref.pvalue, rel=1e-9)
    half = stats.t.ppf(0.975, 8) * (a - b).std(ddof=1) / 3
    assert (cmp.low, cmp.high) == pytest.approx(((a - b).mean() - half, (a - b).mean() + half))


def test_seed_correlation_interval_covers_at_its_level():
    rng = np.random.default_rng(11)
    rho, n, reps = 0.5, 20, 3000
    cov = [[1, rho], [rho, 1]]
    hits = 0
    for _ in range(reps):
        x = rng.multivariate_normal([0, 0], cov, n)
        c = seed_correlation(x[:, 0], x[:, 1])
        hits += c.low <= rho <= c.high
    assert 0.93 <= hits / reps <= 0.97
    assert math.isnan(seed_correlation(np.arange(3.0), np.arange(3.0) ** 2).low)


@pytest.mark.parametrize("rho", [0.0, 0.5])
def test_seeds_needed_paired_reaches_its_power_in_simulation(rho):
    delta, sd, alpha, target = 3.0, 3.0, 0.05, 0.8
    paired, unpaired = seeds_needed_paired(delta, sd, rho, alpha, target)
    rng = np.random.default_rng(int(rho * 10))
    cov = sd ** 2 * np.array([[1, rho], [rho, 1]])

    def power(n: int, reps: int = 4000) -> float:
        x = rng.multivariate_normal([delta, 0], cov, (reps, n))
        return float(np.mean(stats.ttest_rel(x[..., 0], x[..., 1], axis=1).pvalue <= alpha))

    se = math.sqrt(target * (1 - target) / 4000)
    assert power(paired) >= target - 3 * se
    assert power(paired - 1) < target + 3 * se
    if rho == 0.5:
        assert paired < unpaired
