"""What a race is given: its settings (values from conf/hydra/sweeper/race.yaml), the grid and the anchor."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from opsd_sweep.config import SEED_RANGE, collapsed_score_problems
from opsd_sweep.inference.arms import Anchor
from opsd_sweep.inference.pairing import PAIRINGS
from opsd_sweep.inference.stats import SCORE_BOUNDS


@dataclass(frozen=True)
class RaceSettings:
    """How a race spends seeds and when it claims. Meanings in conf/hydra/sweeper/race.yaml."""

    min_seeds: int  # seeds every config gets before any test (3: eliminating after 2 inflates false verdicts)
    max_seeds: int  # per config, racing phase
    seeds_per_round: int  # seeds added to every live config per round
    alpha: float  # family-wise level of the final "better than the baseline" claim (Holm across live configs)
    stop_alpha: float  # Holm level at which a round's best vs the baseline stops the race (interim look)
    eliminate_alpha: float  # Holm level of "worse than the current best" (drops a config)
    anchor_alpha: float  # level of the test against the published anchor (stricter; never alone)
    target_half_width: float  # stop when every live config's CI half-width is <= this (score points)
    budget_gpu_hours: Optional[float]  # stop before a round that would exceed it (None: no budget)
    confirm_seeds: int  # fresh seeds for the winner after the race (0: no confirmation)
    first_seed: int  # seeds are first_seed, first_seed + 1, ...
    # failed race runs after which a config leaves the race; as many failed confirmation runs end its confirmation
    # (the race's verdict stands): counted per phase
    max_failures: int
    # stop seeding a config (neither the best nor the baseline) whose one-sided upper bound (at
    # eliminate_alpha) of its gain over the baseline is below this many points; None or 0: off
    futility_effect: Optional[float] = None
    # the score a run stopped at its collapse (train.stop_on_collapse) enters with; None: such a run has no
    # score and its config leaves the race
    collapsed_score: Optional[float] = None
    # none: configs are compared as independent arms; seed: by paired differences over the seeds both ran
    # (declared before the race, never chosen from its scores; the baseline then runs the confirmation seeds too)
    pairing: str = "none"

    def problems(self) -> list[str]:
        """Every invalid setting, each with the key (under hydra.sweeper), the value and the fix."""
        out = []
        if self.min_seeds < 2:
            out.append(f"min_seeds={self.min_seeds} must be >= 2 (a t-test needs 2 runs; 3 is the safe start)")
        if self.max_seeds < self.min_seeds:
            out.append(f"max_seeds={self.max_seeds} must be >= min_seeds={self.min_seeds}")
        if self.seeds_per_round < 1:
            out.append(f"seeds_per_round={self.seeds_per_round} must be >= 1")
        for key in ("alpha", "stop_alpha", "eliminate_alpha", "anchor_alpha"):
            if not 0 < getattr(self, key) < 1:
                out.append(f"{key}={getattr(self, key)} must be in (0, 1), e.g. 0.05")
        if self.anchor_alpha > self.alpha:
            out.append(f"anchor_alpha={self.anchor_alpha} must be <= alpha={self.alpha}: the published anchor was "
                       "measured elsewhere, so its test is the stricter one")
        if self.target_half_width < 0:
            out.append(f"target_half_width={self.target_half_width} must be >= 0 (0 = never stop on precision)")
        if self.budget_gpu_hours is not None and self.budget_gpu_hours <= 0:
            out.append(f"budget_gpu_hours={self.budget_gpu_hours} must be > 0 or null (no budget)")
        if self.confirm_seeds < 0:
            out.append(f"confirm_seeds={self.confirm_seeds} must be >= 0")
        if self.futility_effect is not None and self.futility_effect < 0:
            out.append(f"futility_effect={self.futility_effect} must be >= 0 points, or null / 0 (off)")
        if self.pairing not in PAIRINGS:
            out.append(f"pairing={self.pairing!r} must be one of {list(PAIRINGS)} (seed: paired differences over "
                       "the seeds both configs ran)")
        if self.max_failures < 1:
            out.append(f"max_failures={self.max_failures} must be >= 1")
        # RaceSettings does not carry hydra.sweeper.metric (it is read beside them, and the settings are the
        # race.jsonl header a resume compares): the race's metrics are percentages (avg_at_n by default), so a
        # collapsed run's score is held to [0, 100]
        out += collapsed_score_problems("collapsed_score", self.collapsed_score,
                                        "hydra.sweeper.metric (a percentage: avg_at_n by default)", SCORE_BOUNDS)
        out += self._first_seed_problems()
        return out

    def _first_seed_problems(self) -> list[str]:
        """Every seed the race may draw must be one numpy and torch take. It draws first_seed, first_seed + 1, ...:
        each config's race seeds (max_seeds, failed ones replaced until max_failures), then the confirmation's above
        them (a confirmation with more failures draws further; each run's own check refuses such a seed before
        it runs)."""
        drawn = self.max_seeds + self.confirm_seeds + 2 * self.max_failures
        low, high = SEED_RANGE[0], SEED_RANGE[1] - drawn + 1
        if low <= self.first_seed <= high:
            return []
        return [f"first_seed={self.first_seed} must be in [{low}, {high}]: the race draws up to {drawn} seeds from it "
                f"(max_seeds + confirm_seeds + 2 x max_failures) and each must be in [{SEED_RANGE[0]}, "
                f"{SEED_RANGE[1]}] (numpy's and torch's seed range); e.g. first_seed=1"]


@dataclass(frozen=True)
class RaceSpec:
    """One race: the configs (labels in grid order), the in-sweep baseline among them, the anchor."""

    configs: tuple[str, ...]
    baseline: Optional[str]
    anchor: Optional[Anchor]
    settings: RaceSettings

    def __post_init__(self):
        problems = self.settings.problems()
        if len(set(self.configs)) != len(self.configs) or not self.configs:
            problems.append(f"configs {list(self.configs)} must be a non-empty list of distinct labels")
        if self.baseline is not None and self.baseline not in self.configs:
            problems.append(f"baseline {self.baseline!r} is not one of the configs {list(self.configs)}")
        if problems:
            raise ValueError("invalid race settings (hydra.sweeper.*):\n  - " + "\n  - ".join(problems))
