"""Is evaluator B interchangeable with evaluator A on one checkpoint? A paired difference over problems with
its intervals and a TOST equivalence test at a declared margin (`python -m opsd_sweep.evaluate compare`)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats as sps
from statsmodels.stats.weightstats import ttost_paired

EQUIVALENT, DIFFERENT, INCONCLUSIVE = "equivalent", "different", "inconclusive"


@dataclass(frozen=True)
class Equivalence:
    """B minus A in points, averaged over problems, with a two-sided interval at `level` and the TOST test."""

    n_problems: int
    difference: float      # mean over problems of (solve rate under B - under A), points
    se: float              # its standard error (sample SD of the per-problem differences / sqrt(n))
    df: int                # n_problems - 1
    level: float           # coverage of (low, high), e.g. 0.95; the TOST level alpha is 1 - level
    low: float
    high: float
    tost_low: float        # the (1 - 2 alpha) interval: TOST passes exactly when it lies inside +-margin
    tost_high: float
    tost_p: float          # p of TOST (the larger of the two one-sided p's)
    margin: float          # points
    verdict: str           # EQUIVALENT | DIFFERENT | INCONCLUSIVE

    @property
    def alpha(self) -> float:
        return 1.0 - self.level


def paired_equivalence(a: np.ndarray, b: np.ndarray, *, margin: float, level: float) -> Equivalence:
    """Equivalence of two evaluators from per-problem solve rates of the same checkpoint on the same problems.

    Estimand: the mean over the benchmark's problems of (expected solve rate under B - under A), in points:
    how much the headline avg@n moves when B replaces A. The unit is the problem: d_i = b_i - a_i, the mean
    of d with a t-interval (df = n - 1). The SD of d holds the eval-sampling noise of both evaluations
    (reduced when the same per-sample seeds make the evaluators draw alike) and how much the true effect of
    B varies between problems, so for the problems held fixed the interval is conservative.

    Verdict: EQUIVALENT within +-margin when TOST rejects |difference| >= margin at alpha = 1 - level (the
    (1 - 2 alpha) interval lies inside +-margin); else DIFFERENT when the `level` interval excludes 0;
    else INCONCLUSIVE (more problems or samples per problem narrow it). When every d_i is the same (e.g. two
    evaluations that drew identical samples) the SD is 0 and both intervals are that one value.

    Args:
        a, b: shape (n_problems,), per-problem solve rates in percent points (avg over that problem's
            samples) under evaluator A and B; row i of both is the same problem.
        margin: the equivalence margin in points (> 0), e.g. 1.
        level: two-sided coverage of the reported interval, in (0.5, 1); TOST runs at alpha = 1 - level.
    Returns:
        Equivalence, all values in points.
    Raises:
        ValueError: shapes differ, fewer than 2 problems, margin <= 0 or level outside (0.5, 1).
    """
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if a.shape != b.shape or a.ndim != 1:
        raise ValueError(f"paired_equivalence needs two 1-D arrays of one solve rate per problem, paired by "
                         f"position; got shapes {a.shape} and {b.shape}")
    n = a.size
    if n < 2:
        raise ValueError(f"paired_equivalence needs at least 2 problems for an interval; got {n}")
    if not margin > 0:
        raise ValueError(f"margin={margin}: the equivalence margin must be > 0 points (e.g. 1)")
    if not 0.5 < level < 1:
        raise ValueError(f"level={level}: the interval's coverage must be in (0.5, 1) (e.g. 0.95)")
    d = b - a
    mean, sd, df = float(d.mean()), float(d.std(ddof=1)), n - 1
    se = sd / math.sqrt(n)
    alpha = 1.0 - level
    if se > 0:
        half = float(sps.t.ppf(1 - alpha / 2, df)) * se
        tost_half = float(sps.t.ppf(1 - alpha, df)) * se
        tost_p = float(ttost_paired(b, a, -margin, margin)[0])
    else:  # every d_i equal: the t statistics are +-inf (or 0/0 on the margin); decide it directly
        half = tost_half = 0.0
        tost_p = 0.0 if abs(mean) < margin else 1.0
    low, high = mean - half, mean + half
    if tost_p <= alpha:
        verdict = EQUIVALENT
    elif low > 0 or high < 0:
        verdict = DIFFERENT
    else:
        verdict = INCONCLUSIVE
    return Equivalence(n_problems=n, difference=mean, se=se, df=df, level=level, low=low, high=high,
                       tost_low=mean - tost_half, tost_high=mean + tost_half, tost_p=tost_p, margin=margin,
                       verdict=verdict)
