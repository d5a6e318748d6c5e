"""Each statistic against scipy / statsmodels or a hand-computed value, plus coverage and power simulations."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sps
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.power import NormalIndPower, TTestIndPower

from opsd_sweep.scoring.metrics import pass_at_k
from opsd_sweep.inference import stats as S

# --- one config ----------------------------------------------------------------------------------


def test_t_interval_matches_scipy_and_hand_values():
    scores = np.array([50.0, 52.0, 57.0])
    ci = S.t_interval(scores, 0.95)
    low, high = sps.t.interval(0.95, 2, loc=53.0, scale=sps.sem(scores))
    assert ci.estimate == 53.0 and ci.df == 2
    assert ci.se == pytest.approx(math.sqrt(13 / 3))  # sample variance (9 + 1 + 16) / 2 = 13, over R = 3
    assert (ci.low, ci.high) == pytest.approx((low, high))
    assert ci.high - ci.low == pytest.approx(2 * 4.302653 * math.sqrt(13 / 3), rel=1e-6)  # t_{0.975, 2}


@pytest.mark.parametrize("df", [1.0, 3.0, 17.3, 250.0])
def test_fast_student_t_functions_equal_scipy_stats(df):
    for q in (0.6, 0.9, 0.975, 0.995):
        assert S.t_ppf(q, df) == pytest.approx(sps.t.ppf(q, df), rel=1e-12)
    for x in (0.0, 0.5, 2.1, 6.0):
        assert S.t_sf(x, df) == pytest.approx(sps.t.sf(x, df), rel=1e-12)
    assert S.t_ppf(0.975, math.inf) == pytest.approx(sps.norm.ppf(0.975), rel=1e-12)
    assert S.t_sf(1.5, math.inf) == pytest.approx(sps.norm.sf(1.5), rel=1e-12)


def test_t_interval_one_run_needs_an_assumed_sd():
    alone = S.t_interval(np.array([55.0]))
    assert math.isnan(alone.low) and math.isnan(alone.high)
    assumed = S.t_interval(np.array([55.0]), 0.95, sd=3.0, df=math.inf)
    assert (assumed.low, assumed.high) == pytest.approx((55 - 1.959964 * 3, 55 + 1.959964 * 3), rel=1e-6)
    with pytest.raises(ValueError, match="pass df together with sd"):
        S.t_interval(np.array([55.0]), sd=3.0)


def test_pooled_sd_is_the_df_weighted_variance():
    sd, df = S.pooled_sd([np.array([1.0, 2.0, 3.0]), np.array([4.0, 6.0]), np.array([9.0])])
    assert df == 3  # 2 + 1; the 1-run config adds nothing
    assert sd == pytest.approx(math.sqrt((2.0 + 2.0) / 3))  # SS = 2 and 2
    assert S.pooled_sd([np.array([1.0])]) == (pytest.approx(math.nan, nan_ok=True), 0)


def test_eval_sampling_variance_hand_value_and_monte_carlo():
    p = np.array([0.5, 0.25, 1.0])
    assert S.eval_sampling_variance(p, 4) == pytest.approx((0.25 + 0.1875 + 0) / 3 / 9)
    # unbiased: its mean over many simulated runs equals the true variance of the run's avg@K
    rng = np.random.default_rng(0)
    truth, k = rng.uniform(0.05, 0.95, 30), 12
    draws = rng.binomial(k, truth, size=(20000, 30)) / k
    estimates = S.eval_sampling_variance(draws, k)
    assert estimates.shape == (20000,)
    true_var = (truth * (1 - truth) / k).sum() / 30**2
    assert estimates.mean() == pytest.approx(true_var, rel=0.02)
    assert draws.mean(axis=1).var() == pytest.approx(true_var, rel=0.05)
    with pytest.raises(ValueError, match="fractions"):
        S.eval_sampling_variance(np.array([50.0]), 12)


def test_variance_decomposition_splits_with_a_chi_square_interval():
    split = S.variance_decomposition(np.array([50.0, 52.0, 57.0]), np.array([3.0, 4.0, 5.0]))
    assert (split.run_var, split.eval_var, split.train_var) == pytest.approx((13.0, 4.0, 9.0))
    assert split.eval_share == pytest.approx(4 / 13)
    assert split.train_var_high == pytest.approx(2 * 13.0 / sps.chi2.ppf(0.025, 2) - 4.0)
    assert split.train_var_low == 0.0  # 2 * 13 / chi2_{0.975, 2} = 3.55 < 4: floored at 0
    noisy_eval = S.variance_decomposition(np.array([50.0, 51.0, 50.5]), np.array([2.0, 2.0, 2.0]))
    assert math.isnan(noisy_eval.train_var) and noisy_eval.eval_share == 1.0  # not a made-up exact 0
    assert noisy_eval.train_var_high == pytest.approx(2 * 0.25 / sps.chi2.ppf(0.025, 2) - 2.0)


# --- comparisons ---------------------------------------------------------------------------------


def test_welch_df_and_p_match_hand_formula_and_scipy():
    a = np.array([55.0, 58.0, 53.5, 57.0])
    ref_mean, ref_sd, ref_n = 54.22, 1.48, 5
    comp = S.welch_vs_anchor(a, ref_mean, ref_sd, ref_n, 0.95)
    va, v0 = a.var(ddof=1) / 4, ref_sd**2 / ref_n
    df = (va + v0) ** 2 / (va**2 / 3 + v0**2 / 4)
    assert comp.df == pytest.approx(df)
    assert comp.delta == pytest.approx(a.mean() - ref_mean)
    scipy_result = sps.ttest_ind_from_stats(a.mean(), a.std(ddof=1), 4, ref_mean, ref_sd, ref_n, equal_var=False)
    assert comp.t == pytest.approx(scipy_result.statistic)
    assert comp.p == pytest.approx(scipy_result.pvalue)
    half = sps.t.ppf(0.975, df) * math.sqrt(va + v0)
    assert (comp.low, comp.high) == pytest.approx((comp.delta - half, comp.delta + half))


def test_welch_vs_anchor_with_one_run_uses_the_given_sd():
    assert math.isnan(S.welch_vs_anchor(np.array([56.0]), 54.22, 1.48, 5).p)
    comp = S.welch_vs_anchor(np.array([56.0]), 54.22, 1.48, 5, sd=3.0, df=math.inf)
    assert comp.se == pytest.approx(math.sqrt(9 + 1.48**2 / 5))
    assert comp.df == pytest.approx((9 + 1.48**2 / 5) ** 2 / ((1.48**2 / 5) ** 2 / 4))  # only the anchor's SD is estimated


# --- many configs --------------------------------------------------------------------------------


@pytest.mark.parametrize("ours, method", [(S.holm, "holm"), (S.benjamini_hochberg, "fdr_bh")])
def test_corrections_match_statsmodels(ours, method):
    rng = np.random.default_rng(3)
    for m in (1, 2, 6, 25):
        p = rng.uniform(0, 0.2, m) ** 2
        assert ours(p) == pytest.approx(multipletests(p, method=method)[1])


def test_corrections_keep_order_monotone_capped_and_skip_nan():
    p = np.array([0.04, 0.01, np.nan, 0.03, 0.9])
    holm = S.holm(p)
    assert holm[1] == pytest.approx(0.04) and holm[3] == pytest.approx(0.09) and holm[0] == pytest.approx(0.09)
    assert holm[4] == 0.9 and math.isnan(holm[2])  # 0.9 * 1 = 0.9; nan ignored (m = 4)
    bh = S.benjamini_hochberg(p)
    assert bh[[1, 3, 0, 4]] == pytest.approx([0.04, 0.04 * 4 / 3, 0.04 * 4 / 3, 0.9])  # 0.03 * 4/2 > 0.04 * 4/3
    assert S.holm([0.5, 0.6]).max() <= 1.0 and S.benjamini_hochberg([0.99, 0.98]).max() <= 1.0
    order = np.argsort(p[~np.isnan(p)])
    assert np.all(np.diff(S.holm(p)[~np.isnan(p)][order]) >= 0)


def test_verdict_words():
    assert S.verdict(2.0, 0.01, 0.05) == "better"
    assert S.verdict(-2.0, 0.01, 0.05) == "worse"
    assert S.verdict(2.0, 0.2, 0.05) == "inconclusive"
    assert S.verdict(2.0, math.nan, 0.05) == "inconclusive"


# --- power ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("sd, expected", [(1.5, 10), (2.0, 17), (2.5, 26), (3.0, 37), (3.9, 61)])
def test_seeds_needed_matches_the_reference_table(sd, expected):
    """reference/statistics.md: +2 points, alpha 0.05, power 0.8, two equal arms."""
    assert S.seeds_needed(2.0, sd) == expected
    assert expected == math.ceil(TTestIndPower().solve_power(effect_size=2.0 / sd, alpha=0.05, power=0.8, ratio=1))


def test_mde_is_statsmodels_solve_power_and_approaches_the_normal_formula():
    assert S.min_detectable_effect(3.0, 2000) == pytest.approx(2.80 * 3.0 * math.sqrt(2 / 2000), rel=0.01)
    assert S.min_detectable_effect(3.0, 5) > S.min_detectable_effect(3.0, 6)
    # 5 runs against a baseline with 8: statsmodels' effect size (in SDs) times the SD
    effect = TTestIndPower().solve_power(effect_size=None, nobs1=5, alpha=0.05, power=0.8, ratio=8 / 5)
    assert S.min_detectable_effect(3.0, 5, ref=S.PowerReference(n=8)) == pytest.approx(3.0 * effect)
    known = NormalIndPower().solve_power(effect_size=None, nobs1=5, alpha=0.05, power=0.8, ratio=1)
    assert S.min_detectable_effect(3.0, 5, known=True) == pytest.approx(3.0 * known)
    assert S.min_detectable_effect(3.0, 5, known=True) < S.min_detectable_effect(3.0, 5)  # no SD to estimate


def test_mde_and_seeds_needed_rest_on_one_power_function():
    """The MDE at R runs is where `power` reaches 80%, and seeds_needed is the first R whose MDE <= delta,
    for an equal arm, a larger fixed arm and the anchor alike (one set of assumptions per row)."""
    anchor = S.PowerReference(var_of_mean=1.48**2 / 5, df=4)
    for ref in (S.SAME_ARM, S.PowerReference(n=12), anchor):
        mde = S.min_detectable_effect(3.0, 9, ref=ref)
        assert S.power(mde, 3.0, 9, 0.05, ref) == pytest.approx(0.8, abs=1e-4)  # solve_power tolerance
        r = S.seeds_needed(3.5, 3.0, ref=ref)
        assert S.min_detectable_effect(3.0, r, ref=ref) <= 3.5 < S.min_detectable_effect(3.0, r - 1, ref=ref)


def test_the_welch_power_of_two_equal_arms_is_statsmodels_power():
    for r in (3, 8, 20):
        se = 3.0 * math.sqrt(2 / r)
        assert S.welch_power(2.5, se, 2 * r - 2, 0.05) == pytest.approx(TTestIndPower().power(2.5 / 3.0, r, 0.05))
    assert S.welch_power(2.5, 1.0, math.inf, 0.05) == pytest.approx(NormalIndPower().power(2.5, 1, 0.05, ratio=0))


def test_seeds_needed_against_simulated_power():
    """At the advised R the simulated power of the Welch test reaches 80%, at R - 1 it does not (± MC error)."""
    rng = np.random.default_rng(4)
    sd, delta, trials = 3.0, 3.0, 20000
    r = S.seeds_needed(delta, sd)

    def power(runs):
        a = rng.normal(delta, sd, (trials, runs))
        b = rng.normal(0.0, sd, (trials, runs))
        return float(np.mean(sps.ttest_ind(a, b, axis=1, equal_var=False).pvalue < 0.05))

    assert 0.79 <= power(r) <= 0.87
    assert power(r - 1) < 0.805


def test_seeds_needed_vs_anchor_can_be_unreachable():
    anchor = S.PowerReference(var_of_mean=1.48**2 / 5, df=4)
    assert S.seeds_needed(3.0, 2.7, ref=anchor) is not None
    assert S.seeds_needed(1.0, 2.7, ref=anchor) is None  # the anchor's own error is too large
    with pytest.raises(ValueError, match="must be > 0"):
        S.seeds_needed(0.0, 2.0)


# --- coverage ----------------------------------------------------------------------


def test_t_interval_coverage_over_thousands_of_configs():
    rng = np.random.default_rng(5)
    covered = total = 0
    for runs in (2, 3, 5, 10):
        means = rng.uniform(40, 60, 1500)
        sds = rng.uniform(1, 5, 1500)
        for mean, sd in zip(means, sds):
            ci = S.t_interval(rng.normal(mean, sd, runs), 0.95)
            covered += ci.low <= mean <= ci.high
            total += 1
    assert 0.93 <= covered / total <= 0.97


def test_pass_at_k_is_the_evaluators_unbiased_estimator():
    for n, c, k in [(12, 3, 1), (12, 3, 4), (12, 11, 2), (16, 0, 5), (5, 5, 5)]:
        expected = 1 - math.comb(n - c, k) / math.comb(n, k)
        assert pass_at_k(n, c, k) == pytest.approx(expected)
    assert pass_at_k(12, 3, 1) == pytest.approx(3 / 12)  # pass@1 = avg@n
