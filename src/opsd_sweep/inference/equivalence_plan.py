"""How many samples a problem an evaluator equivalence check needs: TOST's power over problems, planned from a
pilot (`python -m opsd_sweep.evaluate compare --margin M`, opsd_sweep.inference.equivalence). No I/O.

The test (equivalence.paired_equivalence) is a paired t over the n problems, df = n - 1, on d_i = B's solve rate
minus A's, each a mean of K samples. Its SE at K samples a problem is

    SE(K)^2 = (tau^2 + v / K) / n

- v: the variance of one paired sample difference x_B,is - x_A,is (sample s of problem i has the same seed in
  both), averaged over problems: both evaluators' sampling noise, less what the shared seeds make them agree;
- tau^2: how much B's true effect varies between problems, which no K removes.

A pilot (both evaluators on the same problems, a few samples each) estimates both (`paired_noise`); the plan is
the smallest K whose TOST power at a true difference of 0 reaches the target (`samples_needed`). Values are in
percent points.

Power of TOST: statsmodels has TOST itself (ttost_paired) but no power for it (its power classes are for one
t-test; power_equivalence_oneway is the F-test's), so it is computed from the noncentral t with scipy: TOST
passes when both one-sided tests reject, and both fail together only when the estimated SE exceeds margin / t
crit (at the plan's power 0.8 on 30 problems, 1.77x its true value: chi-square probability 3e-8), so power =
P(lower test rejects) + P(upper test rejects) - 1 (a Monte Carlo check is in
tests/inference/test_equivalence_plan.py).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import optimize
from scipy import stats as sps

from opsd_sweep.inference.stats import smallest_enough

# The published eval-sampling noise (docs/statistics.md; /work/shared/reference/statistics.md): the SD of avg@12 on
# AIME24's 30 problems is ~1.5-2.2 points, ~1.8 in the calibration simulation.
PUBLISHED_EVAL_SD, PUBLISHED_EVAL_SD_BAND, PUBLISHED_K, PUBLISHED_PROBLEMS = 1.8, (1.5, 2.2), 12, 30
MAX_SAMPLES = 1_000_000  # samples a problem beyond which a plan is called unreachable


@dataclass(frozen=True)
class PairedNoise:
    """The noise of B - A per problem (points^2) and how many problems the test averages over."""

    per_sample_var: float  # v: variance of one paired sample difference, mean over problems
    between_var: float     # tau^2: variance of the true per-problem difference across problems
    n_problems: int
    source: str            # where the figures come from, in words

    def se(self, k: float) -> float:
        """SE of the mean difference over problems at k samples a problem per arm (k = inf: tau alone)."""
        return math.sqrt((self.between_var + (0.0 if math.isinf(k) else self.per_sample_var / k)) / self.n_problems)


def published_noise(eval_sd: float = PUBLISHED_EVAL_SD, n_problems: int = PUBLISHED_PROBLEMS,
                    k: int = PUBLISHED_K) -> PairedNoise:
    """The noise of B - A when each evaluator alone has the published eval-sampling SD of avg@k on n problems and
    their samples are independent (different kernels move a thinking-length sample early, so shared seeds
    barely pair them: fp8 against bf16 KV changed 120 of 120 completions, BENCHMARKS.md) and B has no effect:
    v = 2 x (one sample's variance, mean over problems) = 2 x eval_sd^2 x n x k, tau^2 = 0."""
    return PairedNoise(2 * eval_sd ** 2 * n_problems * k, 0.0, n_problems,
                       f"published noise: SD of avg@{k} {eval_sd:g} points on {n_problems} problems per evaluator, "
                       "independent samples, no effect of B")


def paired_noise(a: Sequence[np.ndarray], b: Sequence[np.ndarray], source: str = "the pilot") -> PairedNoise:
    """v and tau^2 from a pilot: a[i], b[i] are problem i's per-sample outcomes (0/1 or bool) under A and B, sample
    s of both drawn with the same seed (pass the samples both drew).

    v is the mean over problems of the sample variance of x_B,is - x_A,is (ddof 1: unbiased), and tau^2 the
    variance of the per-problem mean differences less their sampling part (method of moments, held >= 0). Problems
    with one paired sample count in n but not in the estimates.

    Raises:
        ValueError: a and b hold other numbers of problems or of samples of one problem, or no problem has 2
        paired samples.
    """
    if len(a) != len(b):
        raise ValueError(f"paired_noise: {len(a)} problems under A, {len(b)} under B; pass the same problems")
    diffs = []
    for i, (x, y) in enumerate(zip(a, b)):
        x, y = np.asarray(x, float), np.asarray(y, float)
        if x.shape != y.shape:
            raise ValueError(f"paired_noise: problem {i} has {x.size} samples under A, {y.size} under B; pass the "
                             "samples both drew")
        diffs.append(100.0 * (y - x))
    usable = [d for d in diffs if d.size >= 2]
    if not usable:
        raise ValueError("paired_noise: no problem has 2 paired samples; a pilot needs eval.n_samples >= 2 in both "
                         "evaluations to measure the per-sample noise")
    within = np.array([d.var(ddof=1) for d in usable])
    means = np.array([d.mean() for d in usable])
    sizes = np.array([d.size for d in usable])
    between = float(means.var(ddof=1) - np.mean(within / sizes)) if len(usable) >= 2 else 0.0
    return PairedNoise(float(within.mean()), max(0.0, between), len(diffs),
                       f"{source}: {int(sizes.sum())} paired samples over {len(usable)} problems")


def tost_power(se: float, df: float, margin: float, alpha: float, difference: float = 0.0) -> float:
    """Power of TOST at +-margin and level alpha (each one-sided test at alpha) when the true mean difference is
    `difference` and its SE is `se` (estimated with df degrees of freedom)."""
    if se == 0:
        return float(abs(difference) < margin)
    crit = float(sps.t.ppf(1 - alpha, df))
    lower, upper = (difference + margin) / se, (difference - margin) / se  # noncentralities of the two tests
    passes = float(sps.nct.sf(crit, df, lower) + sps.nct.cdf(-crit, df, upper))
    if not math.isfinite(passes):  # scipy's nct gives nan far in the tails, where t is normal
        passes = float(sps.norm.sf(crit - lower) + sps.norm.cdf(-crit - upper))
    return max(0.0, passes - 1.0)


def check_plan_inputs(margin: float, level: float, power: float) -> None:
    """ValueError naming the value and the fix for a margin, level or power a plan cannot use."""
    if not margin > 0:
        raise ValueError(f"margin={margin}: the equivalence margin must be > 0 points (e.g. --margin 1)")
    if not 0.5 < level < 1:
        raise ValueError(f"level={level}: the interval's coverage must be in (0.5, 1) (e.g. --level 0.95; TOST "
                         "runs at alpha = 1 - level)")
    if not 0 < power < 1:
        raise ValueError(f"power={power}: the power to show equivalence must be in (0, 1) (e.g. --power 0.8)")


def samples_needed(noise: PairedNoise, margin: float, level: float = 0.95, power: float = 0.8) -> int | None:
    """The smallest K (samples a problem per arm) at which TOST at +-margin, alpha = 1 - level, shows equivalence
    with this power when B's true effect is 0; None when no K can (tau alone is too wide for `margin` on these
    problems, or K would pass MAX_SAMPLES)."""
    check_plan_inputs(margin, level, power)
    df, alpha = noise.n_problems - 1, 1 - level

    def enough(k: float) -> bool:
        return tost_power(noise.se(k), df, margin, alpha) >= power

    if not enough(math.inf):
        return None
    return smallest_enough(enough, 0, MAX_SAMPLES)


def margin_shown(noise: PairedNoise, k: float, level: float = 0.95, power: float = 0.8) -> float:
    """The smallest margin TOST shows with this power at K = k samples a problem per arm (true effect 0)."""
    se, df, alpha = noise.se(k), noise.n_problems - 1, 1 - level
    if se == 0:
        return 0.0
    # power rises with the margin; at margin = se x (crit + 40) both tests all but surely reject
    upper = se * (float(sps.t.ppf(1 - alpha, df)) + 40.0)
    return float(optimize.brentq(lambda m: tost_power(se, df, m, alpha) - power, 1e-12, upper))
