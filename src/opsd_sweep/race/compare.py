"""Per-config summaries and the comparisons a race makes: pooled run-to-run variance, paired by problem.

The unit of replication is the training run. Within a round every live config shares one pooled
run-to-run variance (equal-variance assumption; it buys degrees of freedom when configs have 3-5 runs).
When both arms have per-problem data the difference is also paired by problem, which adds the
config x problem interaction term of `analysis.stats.paired_by_problem` to the pooled run term.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Optional

import numpy as np

from opsd_sweep.analysis.stats import Comparison, pooled_sd, two_way_residual_var, welch_difference


@dataclass(frozen=True)
class ConfigSummary:
    """One config's runs: scores (R,) and, when known, per-problem scores (R, n_problems), same unit."""

    config: str
    scores: np.ndarray
    problems: Optional[np.ndarray]

    @property
    def n(self) -> int:
        return int(self.scores.size)

    @cached_property
    def mean(self) -> float:
        return float(self.scores.mean())

    @cached_property
    def problem_means(self) -> np.ndarray:
        """shape (n_problems,): mean over this config's runs."""
        return self.problems.mean(axis=0)

    @cached_property
    def residual_var(self) -> float:
        """Run x problem residual variance (eval sampling + run-specific problem effects)."""
        return two_way_residual_var(self.problems)


@dataclass(frozen=True)
class Pooled:
    """Run-to-run variance pooled across configs and its degrees of freedom (sum of R_c - 1)."""

    var: float
    df: int

    @classmethod
    def of(cls, summaries: list[ConfigSummary]) -> "Pooled":
        sd, df = pooled_sd([s.scores for s in summaries])
        return cls(sd * sd, df)


def problem_interaction_var(arm: ConfigSummary, ref: ConfigSummary) -> float:
    """Variance of the mean per-problem difference that the run term does not hold (>= 0).

    var_i(d_i) minus each arm's run x problem residual variance over its runs, as in
    `paired_by_problem`; needs per-problem data and >= 2 runs in both arms (else 0).
    """
    if arm.problems is None or ref.problems is None or min(arm.n, ref.n) < 2:
        return 0.0
    d = arm.problem_means - ref.problem_means
    excess = float(d.var(ddof=1)) - arm.residual_var / arm.n - ref.residual_var / ref.n
    return max(0.0, excess) / d.size


def compare(arm: ConfigSummary, ref: ConfigSummary, pooled: Pooled, level: float) -> Comparison:
    """arm - ref with SE^2 = pooled var (1/R_arm + 1/R_ref) + problem interaction; two-sided p."""
    run_part = pooled.var * (1.0 / arm.n + 1.0 / ref.n)
    n_problems = arm.problems.shape[1] if arm.problems is not None else 2
    return welch_difference(arm.mean, run_part, pooled.df, ref.mean, problem_interaction_var(arm, ref),
                            n_problems - 1, level)
