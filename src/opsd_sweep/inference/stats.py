"""Statistics of noisy train-then-evaluate runs: small pure functions, formulas in reference/statistics.md.

Inferential target: the benchmark's problems are held fixed. A config's score is the expected score
of a training run on these problems (over training seeds and eval samples), so the only noise is
run-to-run and every interval, test, MDE and seeds-needed figure works on run scores. Per-problem
data serves the noise split (eval sampling vs training seed), not the tests.

Conventions (restated in each docstring):
- The unit of replication is the training run. `scores` is a 1-D array, shape (R,), one score per run
  of one config (e.g. avg@K in percent points).
- Per-problem pass rates are a 2-D array, shape (R, n_problems), fractions in [0, 1].
- A run-to-run SD comes with its degrees of freedom: R - 1 (a sample SD), sum of R_c - 1 (pooled
  across configs) or inf (declared as known: normal quantiles).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np
from scipy import optimize, special
from scipy import stats as sps
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.power import NormalIndPower, TTestIndPower


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
    train_var: float  # run_var - eval_var; nan when the runs spread less than eval sampling alone predicts
    train_var_low: float  # interval of the training-seed variance (chi-square on run_var, eval_var as known)
    train_var_high: float
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


# scipy.stats.ttest_ind_from_stats fixes the df to the two arms' own (Welch, or pooled over the two);
# an SD pooled over every config, or a known SD, needs the general sum of components.
def difference(delta: float, components: Sequence[tuple[float, float]], level: float) -> Comparison:
    """A difference with SE^2 = sum of (variance, df) components, Satterthwaite df, t-interval, two-sided p."""
    var = sum(v for v, _ in components)
    if components and var == 0 and all(d > 0 for _, d in components):
        # every run of both arms scored alike (or every per-seed difference is equal): no spread to test with.
        # p = 1 keeps the comparison in its Holm family (leaving it would loosen the others' adjustment) and
        # claims nothing; there is no interval
        return Comparison(delta, 0.0, math.nan, math.nan, math.nan, math.nan, 1.0, level)
    se = math.sqrt(var) if var > 0 else math.nan
    df = satterthwaite_df(components)
    if not se > 0 or not df > 0:
        return Comparison(delta, se, df, math.nan, math.nan, math.nan, math.nan, level)
    t = delta / se
    half = _t_quantile(level, df) * se
    return Comparison(delta, se, df, delta - half, delta + half, t, 2 * t_sf(abs(t), df), level)


# --- bounded scores ------------------------------------------------------------------------------

# A t-interval of a percent score can pass 0 or 100 (3 runs at 98-100: [95, 102]); the score cannot. Cutting
# the interval at the bounds keeps its coverage (the true value lies inside them) and is said in the report.
SCORE_BOUNDS = (0.0, 100.0)
DIFFERENCE_BOUNDS = (-100.0, 100.0)


def is_percent_score(metric: str) -> bool:
    """Whether a metric is a percentage in [0, 100]: avg@n, pass@k, maj@n, the rates, an eval suite's
    `pooled` score, and each benchmark's own (`<benchmark>.<metric>`)."""
    name = metric.rsplit(".", 1)[-1]
    return name.startswith(("avg_at", "pass_at", "maj_at")) or name.endswith("_rate") or name == "pooled"


def bounded(low: float, high: float, bounds: tuple[float, float]) -> tuple[float, float]:
    """An interval cut at the bounds (nan stays nan)."""
    return float(np.clip(low, *bounds)), float(np.clip(high, *bounds))


# --- one config ----------------------------------------------------------------------------------

def t_interval(scores: np.ndarray, level: float = 0.95, *, sd: float | None = None,
               df: float | None = None) -> Interval:
    """Mean of per-run scores with a t-interval.

    Args:
        scores: shape (R,), one score per training run of one config.
        level: two-sided coverage, e.g. 0.95.
        sd: run-to-run SD to use instead of the sample SD (pooled across configs, or declared known);
            same unit as scores.
        df: degrees of freedom of `sd` (pooled: sum of R_c - 1; known: inf). Ignored when sd is None
            (then df = R - 1).
    Returns:
        Interval in the unit of scores; low/high are nan when R = 1 and no sd is given.
    """
    scores = np.asarray(scores, dtype=float)
    n = scores.size
    mean = float(scores.mean()) if n else math.nan
    if sd is None:
        sd, df = (float(scores.std(ddof=1)), n - 1) if n > 1 else (math.nan, 0)
    elif df is None:
        raise ValueError("t_interval: pass df together with sd (pooled: sum of R_c - 1; known: inf)")
    se = sd / math.sqrt(n) if n else math.nan
    if not (df > 0 and se == se):
        return Interval(mean, se, df, math.nan, math.nan, level)
    half = _t_quantile(level, df) * se
    return Interval(mean, se, df, mean - half, mean + half, level)


def pooled_sd(groups: Sequence[np.ndarray], summaries: Sequence[tuple[float, int]] = ()) -> tuple[float, int]:
    """Run-to-run SD pooled across configs, assuming equal variance in every config.

    Args:
        groups: one array of per-run scores, shape (R_c,), per config; configs with R_c < 2 add nothing.
        summaries: (sd, n) of runs known only by their summary (a published anchor from the same
            pipeline); each adds (n - 1) sd^2 to the sum of squares and n - 1 degrees of freedom.
    Returns:
        (sd, df) with sd = sqrt(sum (R_c - 1) s_c^2 / sum (R_c - 1)) and df = sum (R_c - 1);
        (nan, 0) when nothing has two runs.
    """
    ss, df = 0.0, 0
    for group in groups:
        group = np.asarray(group, dtype=float)
        if group.size >= 2:
            ss += float(((group - group.mean()) ** 2).sum())
            df += group.size - 1
    for sd, n in summaries:
        if n >= 2:
            ss += (n - 1) * sd * sd
            df += n - 1
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


# No library splits a variance into a known-by-design part and a remainder; the interval is the
# chi-square interval of the run variance (R - 1 df) minus the eval variance, which has ~n K df.
def variance_decomposition(scores: np.ndarray, eval_var: np.ndarray, level: float = 0.95) -> VarianceSplit:
    """Split the run-to-run variance of one config into eval-sampling and training-seed parts.

    The point estimate of the training-seed variance is run_var - eval_var, left nan (not 0) when it is
    negative: the runs then spread less than eval sampling alone predicts, and only the interval
    (floored at 0) says how large the training-seed part can be.

    Args:
        scores: shape (R,), per-run scores.
        eval_var: shape (R,), each run's eval-sampling variance (`eval_sampling_variance`, in the
            squared unit of scores).
        level: coverage of the training-seed interval.
    Returns:
        VarianceSplit; everything but eval_var is nan when R < 2.
    """
    scores = np.asarray(scores, dtype=float)
    eval_mean = float(np.mean(eval_var)) if np.size(eval_var) else math.nan
    r = scores.size
    if r < 2:
        return VarianceSplit(math.nan, eval_mean, math.nan, math.nan, math.nan, math.nan)
    run_var = float(scores.var(ddof=1))
    excess = run_var - eval_mean
    low, high = ((r - 1) * run_var / sps.chi2.ppf([(1 + level) / 2, (1 - level) / 2], r - 1) - eval_mean)
    share = min(1.0, eval_mean / run_var) if run_var > 0 else math.nan
    return VarianceSplit(run_var, eval_mean, excess if excess > 0 else math.nan, max(0.0, float(low)),
                         max(0.0, float(high)), share)


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
    return difference(mean - ref_mean, [(var_of_mean, df), (ref_var_of_mean, ref_df)], level)


def welch_vs_anchor(scores: np.ndarray, anchor_mean: float, anchor_sd: float, anchor_n: int,
                    level: float = 0.95, *, sd: float | None = None, df: float | None = None) -> Comparison:
    """Config versus a published anchor (mean m0, SD s0 over n0 runs): Welch t-test.

    t = (xbar - m0) / sqrt(s^2/R + s0^2/n0), df by Welch-Satterthwaite. Caveat for reports: the
    anchor was measured on another cluster and eval stack; a shift of 1 point there inflates false
    "better" verdicts, so prefer an in-sweep baseline.

    Args:
        scores: shape (R,), per-run scores of the config (same unit as the anchor).
        sd, df: a pooled or known run-to-run SD and its df, used instead of the sample SD
            (required when R = 1).
    """
    scores = np.asarray(scores, dtype=float)
    if sd is None:
        sd, df = (float(scores.std(ddof=1)), scores.size - 1) if scores.size > 1 else (math.nan, 0)
    elif df is None:
        raise ValueError("welch_vs_anchor: pass df together with sd (pooled: sum of R_c - 1; known: inf)")
    if not sd == sd:
        return Comparison(float(scores.mean()) - anchor_mean, *[math.nan] * 6, level)
    return welch_difference(float(scores.mean()), sd**2 / scores.size, df, anchor_mean, anchor_sd**2 / anchor_n,
                            anchor_n - 1, level)


# --- many configs --------------------------------------------------------------------------------

def _without_nan(p: Sequence[float], adjust: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
    """Apply `adjust` to the non-nan p-values; nan entries stay nan and do not count in the family."""
    p = np.asarray(p, dtype=float)
    out = np.full(p.shape, np.nan)
    valid = ~np.isnan(p)
    if valid.any():
        out[valid] = adjust(p[valid])
    return out


# statsmodels' multipletests(method="holm") computes the same numbers but runs gc.collect() on every
# call (~16 ms; the racing benchmark makes ~10^6 calls): Holm is this step-down, checked against it in tests.
def holm(p: Sequence[float]) -> np.ndarray:
    """Holm step-down adjusted p-values (family-wise error; for claims).

    Args:
        p: shape (m,), raw p-values; nan entries are ignored and stay nan.
    Returns:
        shape (m,), in input order, monotone in the sorted order, capped at 1.
    """
    def step_down(q: np.ndarray) -> np.ndarray:
        order = np.argsort(q, kind="stable")
        adjusted = np.empty_like(q)
        adjusted[order] = np.minimum(np.maximum.accumulate((q.size - np.arange(q.size)) * q[order]), 1.0)
        return adjusted
    return _without_nan(p, step_down)


def benjamini_hochberg(p: Sequence[float]) -> np.ndarray:
    """Benjamini-Hochberg q-values (false discovery rate; for screening), by statsmodels' multipletests.

    Args:
        p: shape (m,), raw p-values; nan entries are ignored and stay nan.
    Returns:
        shape (m,), in input order, monotone in the sorted order, capped at 1.
    """
    return _without_nan(p, lambda q: multipletests(q, method="fdr_bh")[1])


def verdict(delta: float, p_adjusted: float, alpha: float) -> str:
    """'better' / 'worse' when the adjusted p is <= alpha (sign of delta), else 'inconclusive'."""
    if p_adjusted == p_adjusted and p_adjusted <= alpha:
        return "better" if delta > 0 else "worse"
    return "inconclusive"


# --- power ---------------------------------------------------------------------------------------
#
# The reference of a power calculation is either an arm with the same run-to-run SD as the config
# (an in-sweep baseline, or an anchor whose runs are pooled with ours): statsmodels' TTestIndPower
# (estimated SD) or NormalIndPower (known SD) with ratio = reference runs / config runs. Or it is a
# published anchor with its own SD: its error is fixed whatever R is.

@dataclass(frozen=True)
class PowerReference:
    """What a config is compared with in a power calculation.

    n: the reference's runs; None = as many as the config (an in-sweep baseline planned alongside).
    var_of_mean, df: set for a published anchor with its own SD (s0^2 / n0 and n0 - 1); then n is unused.
    """

    n: int | None = None
    var_of_mean: float | None = None
    df: float | None = None


SAME_ARM = PowerReference()


# statsmodels' power classes assume both arms share one SD; an anchor with its own published SD needs
# the Welch version: noncentral t with the Satterthwaite df (both tails).
def welch_power(delta: float, se: float, df: float, alpha: float) -> float:
    """Power of the two-sided Welch test at alpha when the true difference is delta and its SE is se."""
    crit, ncp = t_ppf(1 - alpha / 2, df), delta / se
    if math.isinf(df):
        return float(sps.norm.sf(crit - ncp) + sps.norm.cdf(-crit - ncp))
    result = float(sps.nct.sf(crit, df, ncp) + sps.nct.cdf(-crit, df, ncp))
    return result if result == result else float(abs(ncp) > crit)  # scipy's nct gives nan far in the tails


def power(delta: float, sd: float, n_runs: int, alpha: float, ref: PowerReference = SAME_ARM, *,
          known: bool = False) -> float:
    """Power of the two-sided test of (config - reference) at alpha for a true difference delta.

    Args:
        delta: true difference, score units.
        sd: the config's run-to-run SD (score units); known = True: declared, normal quantiles.
        n_runs: runs of the config, R >= 2 (R >= 1 when known).
        ref: the reference (`PowerReference`).
    """
    if ref.var_of_mean is not None:
        components = [(sd**2 / n_runs, math.inf if known else n_runs - 1), (ref.var_of_mean, ref.df)]
        se = math.sqrt(sum(v for v, _ in components))
        return welch_power(delta, se, satterthwaite_df(components), alpha)
    ratio = (ref.n or n_runs) / n_runs
    result = float((NormalIndPower() if known else TTestIndPower()).power(effect_size=delta / sd, nobs1=n_runs,
                                                                            alpha=alpha, ratio=ratio))
    if result != result:  # statsmodels' noncentral t gives nan at thousands of runs, where t is normal
        result = float(NormalIndPower().power(effect_size=delta / sd, nobs1=n_runs, alpha=alpha, ratio=ratio))
    return result


def min_detectable_effect(sd: float, n_runs: int, alpha: float = 0.05, power_: float = 0.80,
                          ref: PowerReference = SAME_ARM, *, known: bool = False) -> float:
    """Smallest true difference detected with the given power by the two-sided test at alpha.

    Normal theory with two equal arms: 2.80 sigma sqrt(2/R) at alpha 0.05, power 0.8; t quantiles
    (estimated SD) price small R. Args as in `power`. Returns the MDE in score units.
    """
    if n_runs < (1 if known else 2):
        raise ValueError(f"min_detectable_effect: n_runs={n_runs}; a test with an estimated SD needs >= 2 runs")
    if ref.var_of_mean is None:
        engine = NormalIndPower() if known else TTestIndPower()
        effect = engine.solve_power(effect_size=None, nobs1=n_runs, alpha=alpha, power=power_,
                                    ratio=(ref.n or n_runs) / n_runs, alternative="two-sided")
        return float(np.squeeze(effect)) * sd
    upper = 100.0 * sd + 100.0 * math.sqrt(ref.var_of_mean)
    return float(optimize.brentq(lambda d: power(d, sd, n_runs, alpha, ref, known=known) - power_, 1e-9, upper))


def seeds_needed(delta: float, sd: float, alpha: float = 0.05, power_: float = 0.80,
                 ref: PowerReference = SAME_ARM, *, known: bool = False, max_seeds: int = 10_000) -> int | None:
    """Runs (training seeds) per config needed to detect a true difference `delta` with this power.

    The smallest R whose `power` reaches power_ (power rises with R): doubling, then bisection.

    Args:
        delta: target effect, score units (> 0).
        sd, alpha, ref, known: as in `power`.
        max_seeds: give up beyond this.
    Returns:
        The smallest R >= 2, or None when no R <= max_seeds reaches the power (e.g. the anchor's own
        uncertainty alone exceeds what delta allows).
    """
    if delta <= 0:
        raise ValueError(f"seeds_needed: delta={delta}; the target effect must be > 0")

    return smallest_enough(lambda r: power(delta, sd, r, alpha, ref, known=known) >= power_, 1, max_seeds)


def smallest_enough(enough: Callable[[int], bool], floor: int, cap: int) -> int | None:
    """The smallest n in (floor, cap] for which `enough` holds, `enough` being monotone in n (power in seeds or
    samples); None when even `cap` is not enough. Doubling from floor + 1, then bisection."""
    low, high = floor, floor + 1  # invariant: not enough(low) (or low = floor), enough(high)
    while not enough(high):
        if high >= cap:
            return None
        low, high = high, min(2 * high, cap)
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (low, mid) if enough(mid) else (mid, high)
    return high
