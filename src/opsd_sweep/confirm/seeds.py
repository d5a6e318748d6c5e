"""How many fresh seeds per arm confirm plans when --seeds is left out.

Confirm runs both arms on the same fresh seeds and judges config - baseline by paired differences, so the count
comes from the paired formula (inference.design.seeds_needed_paired) on the summary's power inputs (its
run-to-run SD, target_effect, power) at confirm's level, not from the summary's unpaired advice. The seed
correlation it needs is the sweep's own, between the chosen config and the baseline over the seeds both ran,
planned at the lower bound of its interval and never below 0: the point estimate of a handful of seeds can be
near 1 and would plan a confirmation too small to decide; at 0 (no estimate: fewer than 4 common seeds) the
paired test gains nothing and asks a little more than the unpaired one (n - 1 df).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from opsd_sweep.inference.design import seeds_needed_paired
from opsd_sweep.inference.pairing import by_seed, paired_by_seed
from opsd_sweep.summarize.config_stats import Analysis

# the most seeds per arm confirm takes from the advice unasked: 2 x 24 full training runs is already a large GPU
# bill, and the advice can reach 10,000; more must be declared
MAX_ADVISED_SEEDS = 24


class SeedsAdviceError(ValueError):
    """The advice is more seeds than confirm launches unasked (or none reaches the power)."""


@dataclass(frozen=True)
class SeedsAdvice:
    """Seeds per arm for the paired test (None: beyond 10,000), the unpaired count beside it, and its inputs."""

    paired: int | None
    unpaired: int | None
    rho: float  # the seed correlation planned with
    rho_how: str
    sd: float
    sd_source: str
    target_effect: float
    power: float
    alpha: float

    def words(self) -> str:
        return (f"+{self.target_effect:g} points at {self.power:.0%} power, {self.sd_source} {self.sd:.2f}, seed "
                f"correlation {self.rho:.2f} ({self.rho_how}); unpaired it would be "
                f"{self.unpaired if self.unpaired else 'more than 10000'}")

    def as_dict(self) -> dict:
        return asdict(self)


def planning_correlation(analysis: Analysis, config: str, metric: str, level: float) -> tuple[float, str]:
    """(the seed correlation to plan with, how it was chosen) from the sweep's runs of `config` and the baseline."""
    runs = analysis.usable
    if "cfg.seed" not in runs or metric not in runs:
        return 0.0, "no seeds recorded in the sweep: planned at 0, where pairing gains nothing"
    scored = runs[runs["cfg.seed"].notna() & runs[metric].notna()]
    arms = [scored[scored["label"] == label] for label in (config, analysis.baseline)]
    pairing = paired_by_seed(*(by_seed(arm["cfg.seed"].astype(int), arm[metric].astype(float)) for arm in arms),
                             level)
    r = pairing.correlation
    if math.isnan(r.low):
        return 0.0, (f"not estimable from the sweep's {r.n} common seed(s) of the two arms (4 needed): planned at 0, "
                     "where pairing gains nothing")
    return max(0.0, r.low), (f"the lower {level:.0%} bound of the sweep's, r = {r.r:.2f} over {r.n} common seeds "
                             "(never below 0)")


def advise(analysis: Analysis, config: str, metric: str, level: float) -> SeedsAdvice | None:
    """The paired seeds advice for `config` vs the in-sweep baseline; None without the summary's power inputs
    (no in-sweep baseline as its power reference, or no run-to-run SD)."""
    power = analysis.power or {}
    if power.get("reference") != "baseline" or power.get("sd") is None:
        return None
    rho, how = planning_correlation(analysis, config, metric, level)
    alpha = 1 - level  # confirm's verdict is its paired interval at `level`
    paired, unpaired = seeds_needed_paired(power["target_effect"], power["sd"], rho, alpha, power["power"],
                                           known=bool(power.get("known")))
    return SeedsAdvice(paired, unpaired, rho, how, float(power["sd"]), str(power["sd_source"]),
                       float(power["target_effect"]), float(power["power"]), alpha)


def default_seed_count(advice: SeedsAdvice | None, fallback: int = 3) -> tuple[int, str]:
    """(seeds per arm, how chosen): the paired advice, else `fallback`. Refused (SeedsAdviceError, before any run)
    when the advice exceeds MAX_ADVISED_SEEDS or no count up to 10,000 reaches its power."""
    if advice is None:
        return fallback, f"{fallback} (the default: the summary gives no seeds advice against the in-sweep baseline)"
    if advice.paired is None or advice.paired > MAX_ADVISED_SEEDS:
        advised = f"{advice.paired} seeds per arm" if advice.paired else "more than 10000 seeds per arm"
        raise SeedsAdviceError(
            f"the paired seeds advice is {advised} ({advice.words()}), more than the {MAX_ADVISED_SEEDS} confirm "
            "launches unasked; declare the count with --seeds N (e.g. --seeds 8; a rerun with more seeds reuses "
            "the finished ones)")
    return advice.paired, f"the paired seeds advice: {advice.paired} seeds per arm for {advice.words()}"
