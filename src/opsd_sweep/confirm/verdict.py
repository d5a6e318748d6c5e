"""The statistics of a confirmation: config - baseline on fresh seeds, paired by seed, and its verdict.

Unit of replication = the training run (one seed); both arms run the same fresh seeds, so seed s of the
config is paired with seed s of the baseline. The paired t-interval is over the per-seed differences
(df = n - 1); the unpaired Welch interval of the same scores is reported beside it (when the seed fixes
little that both arms share, the two agree; pairing is only as good as that correlation).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np
from scipy import stats as sps

CONFIRMED = "confirmed"
NOT_CONFIRMED = "not confirmed"
INCONCLUSIVE = "inconclusive"


@dataclass(frozen=True)
class Difference:
    """config - baseline over the seeds both arms finished (scores in the metric's unit, e.g. points)."""

    n: int  # seeds finished by both arms (pairs)
    config_mean: float
    baseline_mean: float
    delta: float  # mean of the per-seed differences (= difference of the means over the pairs)
    paired_low: float  # paired t-interval (df = n - 1)
    paired_high: float
    paired_p: float  # two-sided, H0: delta = 0
    sd_diff: float  # SD of the per-seed differences
    correlation: float  # between the arms' per-seed scores (nan below 3 pairs or with no spread)
    welch_low: float  # unpaired Welch interval of the same scores
    welch_high: float
    welch_p: float
    level: float

    def as_dict(self) -> dict:
        return {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in asdict(self).items()}


def paired_difference(config: np.ndarray, baseline: np.ndarray, level: float = 0.95) -> Difference:
    """config - baseline with a paired t-interval over seeds and the unpaired Welch interval.

    Args:
        config: shape (n,), the config's score on seed i.
        baseline: shape (n,), the baseline's score on the same seed i (the pair).
        level: two-sided coverage of both intervals.
    Returns:
        Difference; intervals and p are nan with fewer than 2 pairs. With identical differences (SD 0) the
        paired interval is the point itself and p is 0 (or 1 when every difference is 0).
    """
    x, y = np.asarray(config, float), np.asarray(baseline, float)
    if x.shape != y.shape or x.ndim != 1:
        raise ValueError(f"paired_difference: config {x.shape} and baseline {y.shape} must be equal 1-d arrays")
    n = x.size
    nan = math.nan
    if n == 0:
        return Difference(0, nan, nan, nan, nan, nan, nan, nan, nan, nan, nan, nan, level)
    d = x - y
    delta = float(d.mean())
    if n < 2:
        return Difference(n, float(x.mean()), float(y.mean()), delta, nan, nan, nan, nan, nan, nan, nan, nan, level)
    sd = float(d.std(ddof=1))
    half = float(sps.t.ppf(0.5 + level / 2, n - 1)) * sd / math.sqrt(n)
    if sd > 0:
        p = float(2 * sps.t.sf(abs(delta) / (sd / math.sqrt(n)), n - 1))
    else:
        p = 1.0 if delta == 0 else 0.0
    corr = float(np.corrcoef(x, y)[0, 1]) if n >= 3 and x.std() > 0 and y.std() > 0 else nan
    welch_low, welch_high, welch_p = welch_interval(x, y, level)
    return Difference(n, float(x.mean()), float(y.mean()), delta, delta - half, delta + half, p, sd, corr,
                      welch_low, welch_high, welch_p, level)


def welch_interval(x: np.ndarray, y: np.ndarray, level: float) -> tuple[float, float, float]:
    """(low, high, p) of mean(x) - mean(y), unequal variances, Welch-Satterthwaite df; nan when undefined."""
    vx, vy = x.var(ddof=1) / x.size, y.var(ddof=1) / y.size
    se = math.sqrt(vx + vy)
    delta = float(x.mean() - y.mean())
    if not se > 0:
        return (delta, delta, 1.0 if delta == 0 else 0.0)
    df = (vx + vy) ** 2 / (vx**2 / (x.size - 1) + vy**2 / (y.size - 1))
    half = float(sps.t.ppf(0.5 + level / 2, df)) * se
    return delta - half, delta + half, float(2 * sps.t.sf(abs(delta) / se, df))


def verdict(low: float, high: float) -> str:
    """The confirmation verdict of a paired interval of config - baseline on the locked benchmark.

    confirmed: low > 0 (the interval excludes no improvement); not confirmed: high <= 0 (no improvement is
    inside the interval: the config is no better than the baseline, or worse); inconclusive: low <= 0 < high,
    or no interval (fewer than 2 pairs).
    """
    if not (low == low and high == high):
        return INCONCLUSIVE
    if low > 0:
        return CONFIRMED
    if high <= 0:
        return NOT_CONFIRMED
    return INCONCLUSIVE


def verdict_line(word: str, benchmark: str, diff: Difference, locked: bool, seen_runs: int, metric: str) -> str:
    """The one line a user reads: the verdict, on what, with the interval, and whether the benchmark was locked."""
    pct = f"{100 * diff.level:.4g}%"  # 97.5% at a second look
    interval = (f"{diff.delta:+.2f} [{diff.paired_low:+.2f}, {diff.paired_high:+.2f}]"
                if diff.paired_low == diff.paired_low else f"{diff.delta:+.2f} (no interval: {diff.n} pair(s))")
    line = (f"{word.upper()}: config - baseline on {benchmark} ({metric}, {diff.n} fresh seeds, paired "
            f"{pct} CI) = {interval}")
    if not locked:
        line += (f"; NOT from a locked benchmark: {seen_runs} run(s) of the sweep evaluated {benchmark}, "
                 "so this is no locked confirmation")
    return line
