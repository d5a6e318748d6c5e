"""How to spend a sweep's GPU time on samples and seeds: small pure functions, no I/O.

- Samples per problem (K): two-stage sampling's cost optimum (`cost_optimal_k`, `choose_k`).
- Samples per problem that differ by problem: a cost-aware Neyman allocation from a pilot
  (`neyman_allocation`) and the estimator that keeps the same estimand, the mean over problems of
  per-problem solve rates (`stratified_score`).
- Paired seeds: differences by seed, the seed correlation and what pairing saves in seeds
  (`paired_difference`, `seed_correlation`, `seeds_needed_paired`).

Scores are fractions in [0, 1] unless a docstring says percent.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from statsmodels.stats.power import NormalIndPower, TTestIndPower, TTestPower

from opsd_sweep.inference import stats


# --- samples per problem -------------------------------------------------------------------------

def cost_optimal_k(eval_var: float, k: int, train_var: float, train_h: float, eval_h: float) -> float | None:
    """Samples per problem that make a config's mean most precise per GPU-hour, or None when no training-seed
    variance is left (then more samples beat more seeds). Two-stage sampling's optimum (Cochran, Sampling
    Techniques, 10.6): sqrt(c_run / c_sample x var_sample / var_run), with the per-sample variance
    eval_var x k and eval hours taken as proportional to samples; no statistics library offers it."""
    if train_var <= 0:
        return None
    return math.sqrt(train_h / (eval_h / k) * (eval_var * k) / train_var)


@dataclass(frozen=True)
class KChoice:
    """The K a run uses, and why (printed by the sweep and recorded in the run's eval.json)."""

    k: int
    reason: str
    optimum: float | None = None  # the unrounded cost optimum, when there was one


def choose_k(eval_var: float, k: int, train_var: float, train_h: float, eval_h: float,
             bounds: tuple[int, int]) -> KChoice:
    """The cost-optimal K rounded and held inside `bounds` (low, high), with the reason in words.

    eval_var: a run score's eval-sampling variance at `k` samples per problem; train_var: the
    training-seed variance (both in the same squared unit); train_h, eval_h: a run's GPU-hours per phase
    at `k`. No training-seed variance left means samples are as good as seeds and cheaper: K = high.
    """
    low, high = bounds
    if not 1 <= low <= high:
        raise ValueError(f"choose_k: bounds {bounds}; need 1 <= low <= high")
    optimum = cost_optimal_k(eval_var, k, train_var, train_h, eval_h)
    if optimum is None:
        return KChoice(high, f"no training-seed variance measured beyond eval sampling: K = {high}, the upper bound")
    chosen = min(high, max(low, round(optimum)))
    where = "" if chosen == round(optimum) else f", held to the bounds [{low}, {high}]"
    return KChoice(chosen, f"cost-optimal K {optimum:.2f} (train {train_h * 60:.1f} GPU-min a run, "
                           f"eval {eval_h * 60 / k:.2f} GPU-min a sample of every problem, "
                           f"eval-sampling share {eval_var / (eval_var + train_var):.0%} at K = {k}){where}",
                   optimum)


# --- samples that differ by problem --------------------------------------------------------------

def shrunk_rates(correct: np.ndarray, samples: np.ndarray) -> np.ndarray:
    """Pilot solve rates pulled off 0 and 1 ((c + 1/2) / (n + 1), Jeffreys' prior mean): 0 of 4 in a pilot
    does not make a problem unsolvable, and a rate of exactly 0 or 1 would give it no samples at all."""
    return (np.asarray(correct, float) + 0.5) / (np.asarray(samples, float) + 1.0)


# No library allocates strata under a cost model with a per-stratum floor and integer counts: Neyman's
# optimum with costs (Cochran 5.5: n_i proportional to S_i / sqrt(c_i)) plus largest-remainder rounding.
def neyman_allocation(rates: np.ndarray, cost: np.ndarray, budget: float, floor: int = 2) -> np.ndarray:
    """Samples per problem minimising the variance of the mean over problems for a GPU-cost budget.

    Args:
        rates: shape (P,), each problem's pilot solve rate, in (0, 1) (see `shrunk_rates`).
        cost: shape (P,), GPU-seconds (any unit) of one sample of each problem, > 0.
        budget: total cost to spend, in the unit of `cost` (e.g. K x cost.sum() spends what K samples of every
            problem cost).
        floor: the fewest samples any problem gets (2 keeps each problem's own variance estimable).
    Returns:
        shape (P,) ints >= floor; their cost is within one sample of `budget` (never below floor x cost.sum()).
    """
    rates, cost = np.asarray(rates, float), np.asarray(cost, float)
    if rates.shape != cost.shape or rates.ndim != 1:
        raise ValueError(f"neyman_allocation: rates {rates.shape} and cost {cost.shape} must be the same 1-D shape")
    if np.any(cost <= 0):
        raise ValueError("neyman_allocation: every sample must cost > 0")
    weight = np.sqrt(rates * (1 - rates) / cost)
    n = np.full(rates.size, float(floor))
    free = np.ones(rates.size, bool)
    while True:  # problems whose share falls under the floor keep the floor; the rest share what is left
        left = budget - (n[~free] * cost[~free]).sum()
        share = weight[free] / (weight[free] * cost[free]).sum() * max(left, 0.0) if weight[free].sum() > 0 \
            else np.full(free.sum(), max(left, 0.0) / cost[free].sum())
        under = share < floor
        if not under.any():
            n[free] = share
            break
        idx = np.flatnonzero(free)[under]
        n[idx], free[idx] = floor, False
        if not free.any():
            break
    whole = np.floor(n).astype(int)
    remainder = budget - (whole * cost).sum()
    for i in np.argsort(-(n - whole)):  # largest remainders first, while a whole sample still fits
        if cost[i] <= remainder + 1e-9:
            whole[i] += 1
            remainder -= cost[i]
    return np.maximum(whole, floor)


@dataclass(frozen=True)
class StratifiedScore:
    """A run's score under per-problem sample counts: the mean over problems of per-problem solve rates."""

    score: float  # fraction in [0, 1]
    eval_var: float  # its eval-sampling variance (fraction^2); nan when a problem has one sample


def stratified_score(correct: np.ndarray, samples: np.ndarray) -> StratifiedScore:
    """The mean over problems of c_i / n_i, each problem weighted equally whatever its n_i (so its expectation is
    avg@n's, the mean solve rate), and its variance (1/P^2) sum_i p_i (1 - p_i) / (n_i - 1), unbiased per problem.

    Args:
        correct: shape (P,), correct samples of each problem; samples: shape (P,), samples drawn (>= 1).
    """
    correct, samples = np.asarray(correct, float), np.asarray(samples, float)
    if np.any(samples < 1) or np.any(correct > samples) or np.any(correct < 0):
        raise ValueError("stratified_score: need 0 <= correct <= samples and samples >= 1 for every problem")
    p = correct / samples
    var = np.nan if np.any(samples < 2) else float((p * (1 - p) / (samples - 1)).sum() / p.size**2)
    return StratifiedScore(float(p.mean()), var)


# --- paired seeds --------------------------------------------------------------------------------

@dataclass(frozen=True)
class SeedCorrelation:
    """Pearson correlation of two configs' scores over the seeds both ran, with a Fisher-z interval."""

    r: float
    low: float
    high: float
    n: int


def seed_correlation(a: np.ndarray, b: np.ndarray, level: float = 0.95) -> SeedCorrelation:
    """Correlation of a[s] and b[s] over common seeds s (aligned arrays); nan bounds below 4 seeds."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    n = a.size
    if n < 3 or a.std() == 0 or b.std() == 0:
        return SeedCorrelation(math.nan, math.nan, math.nan, n)
    r = float(np.corrcoef(a, b)[0, 1])
    if n < 4:
        return SeedCorrelation(r, math.nan, math.nan, n)
    z, half = math.atanh(max(-0.999999, min(0.999999, r))), stats.t_ppf(0.5 + level / 2, math.inf) / math.sqrt(n - 3)
    return SeedCorrelation(r, math.tanh(z - half), math.tanh(z + half), n)


def paired_difference(a: np.ndarray, b: np.ndarray, level: float) -> stats.Comparison:
    """mean(a - b) over common seeds with its t-interval (n - 1 df) and two-sided p (arrays aligned by seed)."""
    d = np.asarray(a, float) - np.asarray(b, float)
    if d.size < 2:
        return stats.difference(float(d.mean()) if d.size else math.nan, [], level)
    return stats.difference(float(d.mean()), [(float(d.var(ddof=1)) / d.size, d.size - 1)], level)


def seeds_needed_paired(delta: float, sd: float, rho: float, alpha: float, power_: float, *,
                        known: bool = False, max_seeds: int = 10_000) -> tuple[int | None, int | None]:
    """(seeds per config paired, seeds per config unpaired) to find `delta` at this power: the paired test works on
    differences of SD sd sqrt(2 (1 - rho)) with n - 1 df; the unpaired one on two arms of SD sd."""
    def smallest(power_at) -> int | None:
        for n in range(2, max_seeds + 1):
            if power_at(n) >= power_:
                return n
        return None

    sd_diff = sd * math.sqrt(max(2 * (1 - rho), 1e-12))
    paired_engine = NormalIndPower() if known else TTestPower()
    unpaired_engine = NormalIndPower() if known else TTestIndPower()
    if known:  # a one-sample z test is a two-sample one with the second arm infinitely large
        paired = smallest(lambda n: float(paired_engine.power(delta / sd_diff, n, alpha, ratio=0)))
    else:
        paired = smallest(lambda n: float(paired_engine.power(delta / sd_diff, n, alpha)))
    unpaired = smallest(lambda n: float(unpaired_engine.power(delta / sd, n, alpha, ratio=1.0)))
    return paired, unpaired


def min_detectable_effect_paired(sd: float, rho: float, n: int, alpha: float, power_: float) -> float:
    """Smallest true difference the paired t over n seeds (n - 1 df) detects at this power: the one-sample t's
    detectable effect size on differences of SD sd sqrt(2 (1 - rho)) (as `seeds_needed_paired` plans)."""
    if n < 2:
        raise ValueError(f"min_detectable_effect_paired: n={n}; a paired t needs >= 2 seeds")
    effect = TTestPower().solve_power(effect_size=None, nobs=n, alpha=alpha, power=power_, alternative="two-sided")
    return float(np.squeeze(effect)) * sd * math.sqrt(max(2 * (1 - rho), 1e-12))
