"""Per-config summaries and the comparisons a race makes: run scores with a pooled run-to-run variance.

The unit of replication is the training run and the benchmark's problems are held fixed, as in the
summary's verdicts (inference.stats): a difference of two configs is a difference of mean run scores.
Within a round every live config shares one pooled run-to-run variance (equal-variance assumption;
it buys degrees of freedom when configs have 3-5 runs), except a config with a scored collapse: the pool leaves
collapsed runs out, so that config is judged on its own spread (Welch).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from opsd_sweep.inference.arms import Arm, RunSD, compare_arms
from opsd_sweep.inference.pairing import paired_by_seed
from opsd_sweep.inference.stats import Comparison, pooled_sd


@dataclass(frozen=True)
class ConfigSummary:
    """One config's runs: scores (R,) of its scored runs, and its collapses (opsd_sweep.run.collapse).

    `pool_scores`: the scores that enter the pooled run-to-run SD, those of runs that did not collapse (None:
    all of them). A collapsed run that trained on keeps its score here, as in the summary, but its spread says
    nothing about a working config's noise. `stopped`: runs stopped at their collapse, with no score;
    `collapse_steps`: the step of every collapsed run, stopped or not.
    """

    config: str
    scores: np.ndarray
    pool_scores: np.ndarray | None = None
    stopped: int = 0
    collapse_steps: tuple[int, ...] = ()
    seed_ids: tuple[int, ...] = ()  # the seed of each score (aligned with scores): what pairing=seed pairs on

    @property
    def seeds(self) -> int:
        """Seeds run: scored or stopped at a collapse."""
        return self.n + self.stopped

    @property
    def n(self) -> int:
        return int(self.scores.size)

    @cached_property
    def mean(self) -> float:
        return float(self.scores.mean())

    def sd(self, pooled: "Pooled") -> RunSD:
        """The run-to-run SD this config is judged with: the pooled one, except for a config with a scored
        collapse, whose spread the pool leaves out (equal variance does not hold for it): its own."""
        collapsed = self.pool_scores is not None and self.pool_scores.size < self.n
        if collapsed and self.n > 1:
            return RunSD(float(self.scores.std(ddof=1)), self.n - 1, "sample")
        return RunSD(pooled.var**0.5, pooled.df, "pooled")


@dataclass(frozen=True)
class Pooled:
    """Run-to-run variance pooled across configs and its degrees of freedom (sum of R_c - 1)."""

    var: float
    df: int

    @classmethod
    def of(cls, summaries: list[ConfigSummary]) -> "Pooled":
        sd, df = pooled_sd([s.scores if s.pool_scores is None else s.pool_scores for s in summaries])
        return cls(sd * sd, df)


def compare(arm: ConfigSummary, ref: ConfigSummary, pooled: Pooled, level: float, *, paired: bool = False
            ) -> Comparison:
    """arm - ref with SE^2 = pooled var (1/R_arm + 1/R_ref), df of the pool (Welch where an arm has a scored
    collapse: ConfigSummary.sd); two-sided p. The summary's
    comparison of two arms sharing the pooled SD (inference.arms), so race and summary test alike.
    `paired` (pairing=seed): the mean of the per-seed differences over the seeds both ran, paired t, as the
    summary's --pairing seed (inference.pairing); with fewer than 2 common seeds, the unpaired comparison."""
    if paired:
        pairing = paired_by_seed(dict(zip(arm.seed_ids, arm.scores)), dict(zip(ref.seed_ids, ref.scores)), level)
        if pairing.paired:
            return pairing.comparison
    return compare_arms(Arm(arm.mean, arm.n, arm.sd(pooled)), Arm(ref.mean, ref.n, ref.sd(pooled)), level)
