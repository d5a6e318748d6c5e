"""Comparisons paired by training seed (`pairing: seed`), declared before looking at the scores.

Two configs run with the same seed share the LoRA init, the data order and the rollout seeds. Pairing
their run scores by seed removes what the seed does to both; it costs degrees of freedom (n - 1 of
the differences instead of those of two arms), so it pays only when the scores correlate by seed.
Arms are {seed: run score} mappings; the summary and the race both compare through `paired_by_seed`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from opsd_sweep.inference import stats
from opsd_sweep.inference.design import SeedCorrelation, paired_difference, seed_correlation

PAIRINGS = ("none", "seed")  # the values of the summary's `pairing` and the race's hydra.sweeper.pairing
MIN_PAIRS = 2  # a paired t-test needs two differences; with fewer the comparison stays unpaired


def by_seed(seeds: Sequence[int], scores: Sequence[float]) -> dict[int, float]:
    """{seed: score}; a seed run twice by one config (two results roots) counts once, at its mean."""
    grouped: dict[int, list[float]] = {}
    for seed, score in zip(seeds, scores):
        grouped.setdefault(int(seed), []).append(float(score))
    return {seed: float(np.mean(values)) for seed, values in grouped.items()}


@dataclass(frozen=True)
class SeedPairing:
    """An arm against its reference over the seeds both ran."""

    comparison: stats.Comparison  # mean of (arm - reference) over the common seeds, paired t (n - 1 df)
    common: int  # seeds both ran
    dropped_arm: int  # the arm's seeds the reference did not run
    dropped_ref: int  # the reference's seeds the arm did not run
    correlation: SeedCorrelation  # of the two arms' scores over the common seeds

    @property
    def paired(self) -> bool:
        return self.common >= MIN_PAIRS


def paired_by_seed(arm: Mapping[int, float], ref: Mapping[int, float], level: float) -> SeedPairing:
    """arm - ref by paired differences over the common seeds (design.paired_difference). With fewer than
    MIN_PAIRS common seeds the comparison is not paired (`paired` is False): the caller compares unpaired."""
    common = sorted(set(arm) & set(ref))
    a = np.array([arm[s] for s in common], float)
    b = np.array([ref[s] for s in common], float)
    return SeedPairing(paired_difference(a, b, level), len(common), len(arm) - len(common), len(ref) - len(common),
                       seed_correlation(a, b, level))


# No library pools correlations over samples that share one arm; this is the textbook Fisher-z mean
# weighted by n - 3 (Hedges & Olkin), whose interval treats the configs as independent.
def pooled_seed_correlation(correlations: Sequence[SeedCorrelation], level: float = 0.95) -> SeedCorrelation:
    """One seed correlation from several configs' correlations with the same reference: the Fisher-z mean
    weighted by n - 3 over those with >= 4 seeds (nan when none). The configs share the reference's runs, so
    they are not independent and the interval is somewhat too narrow."""
    usable = [c for c in correlations if c.n >= 4 and c.r == c.r]
    if not usable:
        return SeedCorrelation(math.nan, math.nan, math.nan, sum(c.n for c in correlations))
    weights = np.array([c.n - 3 for c in usable], float)
    z = float((weights * np.arctanh(np.clip([c.r for c in usable], -0.999999, 0.999999))).sum() / weights.sum())
    half = stats.t_ppf(0.5 + level / 2, math.inf) / math.sqrt(weights.sum())
    return SeedCorrelation(math.tanh(z), math.tanh(z - half), math.tanh(z + half), sum(c.n for c in usable))
