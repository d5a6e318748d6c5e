"""The racing rule of eval.checkpoints=race, pure: which of a run's checkpoints get more samples.

Round 1 gives every checkpoint `first_samples` samples per problem. After each round, every checkpoint
still in the race is compared with the round's best (the highest mean) on the same problems: a one-sided
paired t-test over problems of the per-problem solve rates (scipy.stats.ttest_rel), Holm across the
others (inference.stats.holm). Those worse at `alpha` stop; the rest get `samples_per_round` more,
up to n_samples. The race ends when one checkpoint remains or the remaining ones have n_samples.

Treating problems as drawn at random makes the test conservative for this benchmark's fixed problems (the
spread of the true per-problem differences counts as noise): it drops fewer checkpoints than a test of
eval sampling alone would, never more. The rule decides only where samples go; the score the summary
reports is made honest elsewhere (analysis.checkpoints).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np


def schedule(first_samples: int, samples_per_round: int, n_samples: int) -> list[int]:
    """Samples per problem a checkpoint has after each round it takes part in: first, first + per round,
    ..., n_samples (the last step may be shorter)."""
    return [*range(first_samples, n_samples, samples_per_round), n_samples]


def worse_than_best(rates: np.ndarray, alpha: float) -> tuple[np.ndarray, np.ndarray]:
    """Which checkpoints are worse than the best one, paired over problems.

    Args:
        rates: shape (C, P), C >= 1 checkpoints x P >= 2 problems: each checkpoint's share of correct
            samples per problem.
        alpha: family-wise level (Holm over the C - 1 comparisons with the best).
    Returns:
        (worse, p): bool (C,) and the Holm-adjusted one-sided p-values (C,), nan for the best (the first of
        tied means). Identical per-problem rates give p = 1.
    """
    means = rates.mean(axis=1)
    best = int(np.argmax(means))
    others = np.flatnonzero(np.arange(len(rates)) != best)
    p = np.full(len(rates), np.nan)
    if others.size:
        # here, not at import: every eval phase imports this module, and these two take ~0.9 s to load
        from scipy import stats as scipy_stats

        from opsd_sweep.inference.stats import holm

        with warnings.catch_warnings():  # no spread in the differences: nan (-> 1 below) or an exact 0
            warnings.simplefilter("ignore", RuntimeWarning)
            raw = scipy_stats.ttest_rel(rates[others], np.broadcast_to(rates[best], rates[others].shape), axis=1,
                                        alternative="less").pvalue
        raw = np.where(np.isnan(raw), 1.0, raw)
        p[others] = holm(raw)
    return np.nan_to_num(p, nan=1.0) < alpha, p


@dataclass
class RaceResult:
    """samples[c]: samples per problem checkpoint c got; rounds: one record per round (JSON-ready)."""

    samples: list[int]
    rounds: list[dict] = field(default_factory=list)


def race(n_checkpoints: int, stages: list[int], alpha: float,
         correct: Callable[[int, int], np.ndarray]) -> RaceResult:
    """Run the race. `correct(c, m)` evaluates checkpoint c with m samples per problem (drawing only the
    samples it lacks) and returns its correct counts per problem over its first m samples, shape (P,)."""
    live = list(range(n_checkpoints))
    result = RaceResult(samples=[0] * n_checkpoints)
    for round_, m in enumerate(stages, start=1):
        rates = np.stack([correct(c, m) / m for c in live])
        for c in live:
            result.samples[c] = m
        record = {"round": round_, "samples": m, "checkpoints": list(live),
                  "means": [round(100 * float(x), 3) for x in rates.mean(axis=1)]}
        if m == stages[-1] or len(live) == 1:
            result.rounds.append(record)
            break
        worse, p = worse_than_best(rates, alpha)
        record |= {"p_vs_best": [None if np.isnan(x) else float(x) for x in p],
                   "stopped": [c for c, w in zip(live, worse) if w]}
        result.rounds.append(record)
        live = [c for c, w in zip(live, worse) if not w]
        if len(live) == 1:
            break
    return result
