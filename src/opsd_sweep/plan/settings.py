"""Typed settings of the planner (defaults in conf/plan.yaml), validated with the value and the fix named."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from omegaconf import MISSING

from opsd_sweep import settings_from_conf
from opsd_sweep.costs.measured import GPU_COSTS

DESIGNS = ("fixed", "race", "k_auto", "allocation", "paired")


@dataclass
class PlanSettings:
    sd: float = MISSING
    sd_k: int = MISSING
    from_results: Optional[str] = MISSING
    metric: str = MISSING
    effect: float = MISSING
    budget: float = MISSING
    gpu: str = MISSING
    lengths: str = MISSING
    power: float = MISSING
    fw: float = MISSING
    rho: float = MISSING
    baseline: Optional[str] = MISSING
    designs: list[str] = field(default_factory=lambda: MISSING)
    race_sweeps: int = MISSING
    race_max_seeds: int = MISSING
    seed: int = MISSING


def load_settings(overrides: dict) -> PlanSettings:
    """conf/plan.yaml merged with the given (non-None) overrides, type-checked and validated."""
    s: PlanSettings = settings_from_conf(PlanSettings, "plan.yaml", overrides)
    problems = []
    if s.effect <= 0:
        problems.append(f"--effect {s.effect:g}: the gain to find must be > 0 points, e.g. --effect 1.6")
    if s.budget <= 0:
        problems.append(f"--budget {s.budget:g}: the GPU-hours to spend must be > 0, e.g. --budget 100")
    if s.sd <= 0:
        problems.append(f"--sd {s.sd:g}: the run-to-run SD must be > 0 points, e.g. --sd 4.6")
    if s.sd_k < 1:
        problems.append(f"--sd-k {s.sd_k}: the samples per problem the SD was measured at must be >= 1, e.g. 12")
    if not 0 < s.power < 1:
        problems.append(f"--power {s.power:g} must be in (0, 1), e.g. 0.8")
    if not 0 < s.fw < 1:
        problems.append(f"--fw {s.fw:g} must be in (0, 1), e.g. 0.05")
    if not 0 <= s.rho < 1:
        problems.append(f"--rho {s.rho:g}: a seed correlation in [0, 1), e.g. 0.5 (0: pairing gains nothing)")
    if s.gpu not in GPU_COSTS:
        problems.append(f"--gpu {s.gpu!r}: no measured costs for it; give one of {sorted(GPU_COSTS)} "
                        "(src/opsd_sweep/costs/measured.py)")
    if unknown := [d for d in s.designs if d not in DESIGNS]:
        problems.append(f"--designs {' '.join(unknown)}: unknown design; give some of {' '.join(DESIGNS)}")
    if not s.designs:
        problems.append(f"--designs is empty; give some of {' '.join(DESIGNS)}")
    if s.race_sweeps < 0:
        problems.append(f"--race-sweeps {s.race_sweeps} must be >= 0 (0 leaves the race out), e.g. 60")
    if s.race_max_seeds < 3:
        problems.append(f"--race-max-seeds {s.race_max_seeds} must be >= 3 (the race's min_seeds), e.g. 256")
    if problems:
        raise ValueError("invalid plan settings (conf/plan.yaml or flags):\n  - " + "\n  - ".join(problems))
    return s
