"""inference.pairing: seeds matched across arms, dropped seeds counted, correlations pooled by Fisher z."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sps

from opsd_sweep.inference.design import seed_correlation
from opsd_sweep.inference.pairing import by_seed, paired_by_seed, pooled_seed_correlation


def test_paired_by_seed_matches_seeds_not_positions_and_counts_the_dropped():
    arm = {1: 50.0, 2: 53.0, 3: 49.0, 7: 60.0}
    ref = {3: 47.5, 2: 50.0, 1: 49.0, 5: 40.0, 6: 41.0}
    pairing = paired_by_seed(arm, ref, 0.95)
    t = sps.ttest_rel([50.0, 53.0, 49.0], [49.0, 50.0, 47.5])
    assert pairing.paired and pairing.common == 3 and (pairing.dropped_arm, pairing.dropped_ref) == (1, 2)
    assert pairing.comparison.p == pytest.approx(t.pvalue) and pairing.comparison.delta == pytest.approx(5.5 / 3)
    assert not paired_by_seed({1: 50.0, 9: 52.0}, ref, 0.95).paired  # one common seed: no paired test


def test_by_seed_averages_a_seed_run_twice():
    assert by_seed([1, 2, 1], [50.0, 40.0, 52.0]) == {1: 51.0, 2: 40.0}


def test_pooled_correlation_is_the_fisher_z_mean_weighted_by_n_minus_3():
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=(2, 12))
    one = seed_correlation(a, a + b, 0.95)
    alone = pooled_seed_correlation([one])  # a single config: its own correlation and Fisher-z interval
    assert (alone.r, alone.low, alone.high, alone.n) == pytest.approx((one.r, one.low, one.high, one.n))
    c, d = rng.normal(size=(2, 7))
    two = seed_correlation(c, c + 2 * d, 0.95)
    pooled = pooled_seed_correlation([one, two, seed_correlation(c[:3], d[:3])])  # < 4 seeds: left out
    z = (9 * math.atanh(one.r) + 4 * math.atanh(two.r)) / 13
    assert pooled.r == pytest.approx(math.tanh(z)) and pooled.n == 19
    assert pooled.high - pooled.low < one.high - one.low
    assert math.isnan(pooled_seed_correlation([seed_correlation(c[:3], d[:3])]).r)
