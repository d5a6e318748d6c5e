"""Statistics of noisy train-then-evaluate runs: small pure functions, formulas in reference/statistics.md.

Conventions (restated in each docstring):
- The unit of replication is the training run. `scores` is a 1-D array, shape (R,), one score per run
  of one config (e.g. avg@K in percent points).
- Per-problem data is a 2-D array, shape (R, n_problems): entry (r, i) is the mean correctness of run
  r on problem i over its K samples (a fraction in [0, 1], or percent: results keep the input's unit,
  except `eval_sampling_variance`, which needs fractions).
- Randomness only through an explicit `np.random.Generator` argument.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np
from scipy import special


@dataclass(frozen=True)
class Interval:
    """A point estimate with its standard error, degrees of freedom and a two-sided interval."""

    estimate: float
    se: float
    df: float
    low: float
    high: float
    level: float


@dataclass(frozen=True)
class Comparison:
    """A difference (arm minus reference) with its interval, t statistic and two-sided p-value."""

    delta: float
    se: float
    df: float
    low: float
    high: float
    t: float
    p: float
    level: float


@dataclass(frozen=True)
class VarianceSplit:
    """Run-to-run variance of one config split into eval sampling and training seed (score units^2)."""

    run_var: float  # sample variance of the run scores
    eval_var: float  # mean within-run eval-sampling variance of a run score
    train_var: float  # max(0, run_var - eval_var): the training-seed part
    eval_share: float  # eval_var / run_var, capped at 1 (nan when run_var is 0 or unknown)


# --- helpers -------------------------------------------------------------------------------------

# scipy.special's Student-t functions are what scipy.stats.t.ppf / .sf evaluate, without ~130 us of
# argument handling per call (the racing benchmark makes ~10^7 calls); df = inf is the normal limit.
def t_ppf(q: float, df: float) -> float:
    """Quantile q of Student's t with df degrees of freedom."""
    return float(special.ndtri(q) if math.isinf(df) else special.stdtrit(df, q))


def t_sf(x: float, df: float) -> float:
    """P(T > x) for Student's t with df degrees of freedom."""
    return float(special.ndtr(-x) if math.isinf(df) else special.stdtr(df, -x))


def _t_quantile(level: float, df: float) -> float:
    """Two-sided critical value; df = inf gives the normal quantile."""
    return t_ppf(0.5 + level / 2, df)


def satterthwaite_df(components: Sequence[tuple[float, float]]) -> float:
    """Welch-Satterthwaite df of a sum of variance components [(variance, df), ...].

    A component with df = inf is treated as known (contributes no uncertainty to the variance).
    Returns inf when every component is known, nan when the total variance is 0.
    """
    total = sum(v for v, _ in components)
    if total <= 0:
        return math.nan
    denom = sum(v * v / d for v, d in components if not math.isinf(d) and v > 0)
    return math.inf if denom == 0 else total * total / denom


def _compare(delta: float, components: Sequence[tuple[float, float]], level: float) -> Comparison:
    """Difference with SE^2 = sum of components, Satterthwaite df, t-interval and two-sided p."""
    var = sum(v for v, _ in components)
    se = math.sqrt(var) if var > 0 else math.nan
    df = satterthwaite_df(components)
    if not se > 0 or not df > 0:
        return Comparison(delta, se, df, math.nan, math.nan, math.nan, math.nan, level)
    t = delta / se
    half = _t_quantile(level, df) * se
    p = 2 * t_sf(abs(t), df)
    return Comparison(delta, se, df, delta - half, delta + half, t, p, level)


# --- one config ----------------------------------------------------------------------------------

def t_interval(scores: np.ndarray, level: float = 0.95, *, sd: float | None = None,
               df: float | None = None) -> Interval:
    """Mean of per-run scores with a t-interval.

    Args:
        scores: shape (R,), one score per training run of one config.
        level: two-sided coverage, e.g. 0.95.
        sd: run-to-run SD to use instead of the sample SD (a pooled SD across configs, or an assumed
            SD when R = 1); same unit as scores.
        df: degrees of freedom of `sd` (pooled: sum of R_c - 1; an assumed, known SD: inf).
            Ignored when sd is None (then df = R - 1).
    Returns:
        Interval in the unit of scores; low/high are nan when R = 1 and no sd is given.
    """
    scores = np.asarray(scores, dtype=float)
    n = scores.size
    mean = float(scores.mean()) if n else math.nan
    if sd is None:
        sd, df = (float(scores.std(ddof=1)), n - 1) if n > 1 else (math.nan, 0)
    elif df is None:
        raise ValueError("t_interval: pass df together with sd (pooled: sum of R_c - 1; assumed: inf)")
    se = sd / math.sqrt(n) if n else math.nan
    if not (df > 0 and se == se):
        return Interval(mean, se, df, math.nan, math.nan, level)
    half = _t_quantile(level, df) * se
    return Interval(mean, se, df, mean - half, mean + half, level)


def pooled_sd(groups: Sequence[np.ndarray]) -> tuple[float, int]:
    """Run-to-run SD pooled across configs, assuming equal variance in every config.

    Args:
        groups: one array of per-run scores, shape (R_c,), per config; configs with R_c < 2 add nothing.
    Returns:
        (sd, df) with sd = sqrt(sum (R_c - 1) s_c^2 / sum (R_c - 1)) and df = sum (R_c - 1);
        (nan, 0) when no config has two runs.
    """
    ss, df = 0.0, 0
    for group in groups:
        group = np.asarray(group, dtype=float)
        if group.size >= 2:
            ss += float(((group - group.mean()) ** 2).sum())
            df += group.size - 1
    return (math.sqrt(ss / df), df) if df else (math.nan, 0)


def eval_sampling_variance(p: np.ndarray, k: int) -> np.ndarray | float:
    """Within-run eval-sampling variance of a run's avg@K, from one run's per-problem pass rates.

    V_eval = (1/n^2) sum_i p_i (1 - p_i) / (K - 1)  (unbiased for the binomial sampling of K samples).

    Args:
        p: shape (..., n_problems): fraction correct per problem (in [0, 1]) of each run.
        k: samples per problem, K >= 2.
    Returns:
        shape (...): variance of the run score in fraction^2 (multiply by 1e4 for percent points^2).
    """
    if k < 2:
        raise ValueError(f"eval_sampling_variance: K={k}; need at least 2 samples per problem")
    p = np.asarray(p, dtype=float)
    if np.any((p < 0) | (p > 1)):
        raise ValueError("eval_sampling_variance: p must be fractions in [0, 1], not percent")
    n = p.shape[-1]
    result = (p * (1 - p)).sum(axis=-1) / (k - 1) / n**2
    return float(result) if np.ndim(result) == 0 else result


def variance_decomposition(scores: np.ndarray, eval_var: np.ndarray) -> VarianceSplit:
    """Split the run-to-run variance of one config into eval-sampling and training-seed parts.

    Args:
        scores: shape (R,), per-run scores.
        eval_var: shape (R,), each run's eval-sampling variance (`eval_sampling_variance`, in the
            squared unit of scores).
    Returns:
        VarianceSplit; run_var and train_var are nan when R < 2.
    """
    scores = np.asarray(scores, dtype=float)
    eval_mean = float(np.mean(eval_var)) if np.size(eval_var) else math.nan
    run_var = float(scores.var(ddof=1)) if scores.size > 1 else math.nan
    train_var = max(0.0, run_var - eval_mean) if run_var == run_var else math.nan
    share = min(1.0, eval_mean / run_var) if run_var and run_var == run_var else math.nan
    return VarianceSplit(run_var, eval_mean, train_var, share)


# --- comparisons ---------------------------------------------------------------------------------

def welch_difference(mean: float, var_of_mean: float, df: float, ref_mean: float, ref_var_of_mean: float,
                     ref_df: float, level: float = 0.95) -> Comparison:
    """Welch comparison of two independent means from summaries.

    Args:
        mean, var_of_mean, df: the arm's mean, the variance of that mean (s^2 / R) and the df of s^2.
        ref_mean, ref_var_of_mean, ref_df: the same for the reference (df = inf: known exactly).
    Returns:
        Comparison of mean - ref_mean, df by Welch-Satterthwaite.
    """
    return _compare(mean - ref_mean, [(var_of_mean, df), (ref_var_of_mean, ref_df)], level)


def welch_vs_anchor(scores: np.ndarray, anchor_mean: float, anchor_sd: float, anchor_n: int,
                    level: float = 0.95, *, sd: float | None = None, df: float | None = None) -> Comparison:
    """Config versus a published anchor (mean m0, SD s0 over n0 runs): Welch t-test.

    t = (xbar - m0) / sqrt(s^2/R + s0^2/n0), df by Welch-Satterthwaite. Caveat for reports: the
    anchor was measured on another cluster and eval stack; a shift of 1 point there inflates false
    "better" verdicts, so prefer an in-sweep baseline.

    Args:
        scores: shape (R,), per-run scores of the config (same unit as the anchor).
        sd, df: a pooled or assumed run-to-run SD and its df, used instead of the sample SD
            (required when R = 1).
    """
    scores = np.asarray(scores, dtype=float)
    if sd is None:
        sd, df = (float(scores.std(ddof=1)), scores.size - 1) if scores.size > 1 else (math.nan, 0)
    elif df is None:
        raise ValueError("welch_vs_anchor: pass df together with sd (pooled: sum of R_c - 1; assumed: inf)")
    if not sd == sd:
        return Comparison(float(scores.mean()) - anchor_mean, *[math.nan] * 6, level)
    return welch_difference(float(scores.mean()), sd**2 / scores.size, df, anchor_mean, anchor_sd**2 / anchor_n,
                            anchor_n - 1, level)


def two_way_residual_var(x: np.ndarray) -> float:
    """Run x problem residual variance of one arm (eval sampling + run-specific problem effects).

    Args:
        x: shape (R, n_problems), per-run per-problem mean correctness, R >= 2.
    Returns:
        sum of squared two-way residuals / ((R - 1)(n - 1)), in the squared unit of x.
    """
    r, n = x.shape
    resid = x - x.mean(axis=1, keepdims=True) - x.mean(axis=0, keepdims=True) + x.mean()
    return float((resid**2).sum() / ((r - 1) * (n - 1)))


def paired_by_problem(a: np.ndarray, b: np.ndarray, level: float = 0.95) -> Comparison:
    """Difference of two configs on the same problems, paired by problem.

    d_i = (mean over arm a's runs of a_ri) - (same for b); delta = mean_i d_i.
    With one run per arm (1-D inputs) this is the paired t-test over problems (df = n - 1). With
    several runs per arm the SE also holds the run-to-run (training-seed) variance, which moves every
    problem of a run together and so never shows in the spread of d_i:
        SE^2 = s_a^2/R_a + s_b^2/R_b + max(0, var_i(d_i) - s2e_a/R_a - s2e_b/R_b) / n
    where s^2 is the variance of run scores and s2e the run x problem residual variance (already in
    s^2 / R, so removed from the problem term). df by Welch-Satterthwaite.

    Args:
        a, b: shape (n_problems,) or (R, n_problems): per-problem mean correctness of each run
            (fraction or percent; the result keeps the unit). Same problems in the same order.
    """
    a, b = np.atleast_2d(np.asarray(a, dtype=float)), np.atleast_2d(np.asarray(b, dtype=float))
    if a.shape[1] != b.shape[1]:
        raise ValueError(f"paired_by_problem: {a.shape[1]} vs {b.shape[1]} problems; pair the same problem set")
    n = a.shape[1]
    d = a.mean(axis=0) - b.mean(axis=0)
    problem_var = float(d.var(ddof=1))
    components = []
    for arm in (a, b):
        r = arm.shape[0]
        if r >= 2:
            components.append((float(arm.mean(axis=1).var(ddof=1)) / r, r - 1))
            problem_var -= two_way_residual_var(arm) / r
    components.append((max(0.0, problem_var) / n, n - 1))
    return _compare(float(d.mean()), components, level)


# --- many configs --------------------------------------------------------------------------------

def _adjust(p: Sequence[float], step) -> np.ndarray:
    """Apply `step(sorted_p, m) -> adjusted` to the non-nan p-values in ascending order; keep input order."""
    p = np.asarray(p, dtype=float)
    out = np.full(p.shape, np.nan)
    valid = np.flatnonzero(~np.isnan(p))
    order = valid[np.argsort(p[valid], kind="stable")]
    out[order] = np.minimum(step(p[order], valid.size), 1.0)
    return out


def holm(p: Sequence[float]) -> np.ndarray:
    """Holm step-down adjusted p-values (family-wise error; for claims).

    Args:
        p: shape (m,), raw p-values; nan entries are ignored and stay nan.
    Returns:
        shape (m,), in input order, monotone in the sorted order, capped at 1.
    """
    return _adjust(p, lambda ranked, m: np.maximum.accumulate((m - np.arange(m)) * ranked))


def benjamini_hochberg(p: Sequence[float]) -> np.ndarray:
    """Benjamini-Hochberg q-values (false discovery rate; for screening).

    Args:
        p: shape (m,), raw p-values; nan entries are ignored and stay nan.
    Returns:
        shape (m,), in input order, monotone in the sorted order, capped at 1.
    """
    return _adjust(p, lambda ranked, m: np.minimum.accumulate((ranked * m / np.arange(1, m + 1))[::-1])[::-1])


def verdict(delta: float, p_adjusted: float, alpha: float) -> str:
    """'better' / 'worse' when the adjusted p is <= alpha (sign of delta), else 'inconclusive'."""
    if p_adjusted == p_adjusted and p_adjusted <= alpha:
        return "better" if delta > 0 else "worse"
    return "inconclusive"


# --- power ---------------------------------------------------------------------------------------

def _difference_se_df(sd: float, n_runs: int, ref_sd: float | None, ref_n: int | None) -> tuple[float, float]:
    """SE and df of (config mean - reference mean); reference = another arm like this one by default."""
    ref_sd, ref_n = (sd, n_runs) if ref_n is None else (ref_sd or 0.0, ref_n)
    components = [(sd**2 / n_runs, n_runs - 1)]
    if ref_n > 0 and ref_sd > 0:
        components.append((ref_sd**2 / ref_n, ref_n - 1 if ref_n > 1 else math.inf))
    return math.sqrt(sum(v for v, _ in components)), satterthwaite_df(components)


def min_detectable_effect(sd: float, n_runs: int, alpha: float = 0.05, power: float = 0.80, *,
                          ref_sd: float | None = None, ref_n: int | None = None) -> float:
    """Smallest true difference detected with the given power by a two-sided t-test at alpha.

    MDE = (t_{1-alpha/2, df} + t_{power, df}) * SE, SE^2 = sd^2/R + ref_sd^2/ref_n (the
    normal-theory version is 2.80 sigma sqrt(2/R) at alpha 0.05, power 0.8, two equal arms).

    Args:
        sd: run-to-run SD of a config, in score units.
        n_runs: runs (seeds) of the config, R >= 2.
        ref_sd, ref_n: the reference arm. Both None: an in-sweep baseline with R runs and the same sd.
            An anchor: its published sd and n. ref_n = 0: a value known exactly.
    Returns:
        The MDE in score units.
    """
    if n_runs < 2:
        raise ValueError(f"min_detectable_effect: n_runs={n_runs}; a t-test needs at least 2 runs")
    se, df = _difference_se_df(sd, n_runs, ref_sd, ref_n)
    return (t_ppf(1 - alpha / 2, df) + t_ppf(power, df)) * se


def seeds_needed(delta: float, sd: float, alpha: float = 0.05, power: float = 0.80, *,
                 ref_sd: float | None = None, ref_n: int | None = None, max_seeds: int = 10_000) -> int | None:
    """Runs (training seeds) per config needed to detect a true difference `delta` with this power.

    Searches the smallest R with min_detectable_effect(sd, R) <= delta (t quantiles, so small R is
    priced honestly; the MDE falls monotonically with R): doubling, then bisection.

    Args:
        delta: target effect, score units (> 0).
        sd, alpha, power, ref_sd, ref_n: as in `min_detectable_effect`.
        max_seeds: give up beyond this.
    Returns:
        The smallest R >= 2, or None when no R <= max_seeds reaches the power (e.g. the anchor's own
        uncertainty alone exceeds what delta allows).
    """
    if delta <= 0:
        raise ValueError(f"seeds_needed: delta={delta}; the target effect must be > 0")

    def enough(r: int) -> bool:
        return min_detectable_effect(sd, r, alpha, power, ref_sd=ref_sd, ref_n=ref_n) <= delta

    if not enough(max_seeds):
        return None
    low, high = 1, 2  # invariant: not enough(low) (or low = 1), enough(high)
    while not enough(high):
        low, high = high, min(2 * high, max_seeds)
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (low, mid) if enough(mid) else (mid, high)
    return high


# --- bootstrap -----------------------------------------------------------------------------------

def hierarchical_bootstrap_ci(x: np.ndarray, rng: np.random.Generator, *, baseline: np.ndarray | None = None,
                              level: float = 0.95, n_boot: int = 2000) -> Interval:
    """Percentile interval for a config's mean (or its difference to a baseline) resampling runs, then problems.

    Each replicate draws R runs with replacement within each arm, then n problems with replacement,
    using the same problem indices in both arms (so problem difficulty stays paired).

    Args:
        x: shape (R, n_problems), per-run per-problem mean correctness of the config.
        rng: the only source of randomness.
        baseline: shape (R_b, n_problems) of the reference config, or None for the config's mean.
        level: two-sided coverage.
        n_boot: replicates.
    Returns:
        Interval in the unit of x; se = SD of the replicates, df = inf.
    """
    x = np.asarray(x, dtype=float)
    n = x.shape[1]
    problems = rng.integers(0, n, size=(n_boot, 1, n))

    def replicate_means(arm: np.ndarray) -> np.ndarray:
        runs = rng.integers(0, arm.shape[0], size=(n_boot, arm.shape[0]))
        return np.take_along_axis(arm[runs], problems, axis=2).mean(axis=(1, 2))

    reps = replicate_means(x)
    estimate = float(x.mean())
    if baseline is not None:
        baseline = np.asarray(baseline, dtype=float)
        if baseline.shape[1] != n:
            raise ValueError(f"hierarchical_bootstrap_ci: {n} vs {baseline.shape[1]} problems; pair the same set")
        reps = reps - replicate_means(baseline)
        estimate -= float(baseline.mean())
    low, high = np.quantile(reps, [(1 - level) / 2, (1 + level) / 2])
    return Interval(estimate, float(reps.std(ddof=1)), math.inf, float(low), float(high), level)
