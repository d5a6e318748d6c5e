"""Which run-to-run SD each arm's statistics use, and the comparison of two arms on run scores.

An arm is a config (or the published anchor) summarised by its mean, runs and the SD its intervals
and tests use. The rule (docs/statistics.md, "Verdicts, the SD they use"):
- `--assumed-sd X` declares the run-to-run SD known: configs with fewer than two runs use X, and with
  `--no-pool-sd` (the default) every config does; normal quantiles.
- `--pool-sd`: configs use the SD pooled across configs (df = sum of R_c - 1).
- `--pool-anchor`: the anchor's runs come from this pipeline: its n and SD enter the pool, and every
  comparison with the anchor gives both arms that pooled SD (SE = s_pool sqrt(1/R + 1/n0), the pool's
  df), the SD the power plan against the anchor assumes for both (a declared --assumed-sd without
  --pool-sd: that known SD for both).
- otherwise each config uses its sample SD (R - 1 df); a 1-run config the pooled SD, if any.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from opsd_sweep.inference import stats

# Sources whose value is one number shared by every arm that uses it: two such arms share one estimate.
SHARED = ("pooled", "pooled (1 run)", "known")


@dataclass(frozen=True)
class Anchor:
    """A published result: mean and SD of `metric` over n runs (conf/anchor/; a run config's `anchor`)."""

    label: str
    metric: str
    mean: float
    sd: float
    n: int
    note: str = ""  # where it comes from and how far to trust it

    @classmethod
    def of(cls, section) -> "Anchor":
        """From a conf/anchor/ file or a run config's `anchor` section (a mapping)."""
        return cls(label=str(section["label"]), metric=str(section["metric"]), mean=float(section["mean"]),
                   sd=float(section["sd"]), n=int(section["n"]), note=str(section.get("note") or ""))


@dataclass(frozen=True)
class RunSD:
    """A run-to-run SD, its degrees of freedom (inf = known) and where it comes from."""

    value: float
    df: float
    source: str  # sample | pooled | pooled (1 run) | known | published | none


@dataclass(frozen=True)
class Arm:
    mean: float
    n: int
    sd: RunSD


def run_sd(n: int, sample_sd: float, pool: tuple[float, int], pool_sd: bool, assumed_sd: float | None) -> RunSD:
    """The SD an arm with n runs and this sample SD uses (the rule in the module docstring)."""
    pooled, pooled_df = pool
    if assumed_sd is not None and (n < 2 or not pool_sd):
        return RunSD(assumed_sd, math.inf, "known")
    if pool_sd and pooled_df:
        return RunSD(pooled, pooled_df, "pooled")
    if n >= 2:
        return RunSD(sample_sd, n - 1, "sample")
    if pooled_df:
        return RunSD(pooled, pooled_df, "pooled (1 run)")
    return RunSD(math.nan, 0, "none")


def anchor_arm(anchor: Anchor, pool: tuple[float, int], pool_sd: bool, assumed_sd: float | None,
               pool_anchor: bool) -> Arm:
    """The published anchor as an arm: its own SD over its n runs, or, when its runs come from our
    pipeline (--pool-anchor), the pooled SD (or the declared known SD, as every config then uses)."""
    if pool_anchor:
        return Arm(anchor.mean, anchor.n, run_sd(anchor.n, anchor.sd, pool, pool_sd or assumed_sd is None,
                                                 assumed_sd))
    return Arm(anchor.mean, anchor.n, RunSD(anchor.sd, anchor.n - 1, "published"))


def compare_arms(arm: Arm, ref: Arm, level: float) -> stats.Comparison:
    """arm - ref on run scores: one SD shared by both arms gives SE^2 = sd^2 (1/R + 1/R_ref) with that
    SD's df; otherwise Welch with each arm's own SD and df (Satterthwaite)."""
    if arm.sd.source in SHARED and ref.sd.source in SHARED and arm.sd.value == ref.sd.value \
            and arm.sd.df == ref.sd.df:
        var = arm.sd.value**2 * (1 / arm.n + 1 / ref.n)
        return stats.difference(arm.mean - ref.mean, [(var, arm.sd.df)], level)
    return stats.welch_difference(arm.mean, arm.sd.value**2 / arm.n, arm.sd.df, ref.mean,
                                  ref.sd.value**2 / ref.n, ref.sd.df, level)
