"""GPU-hours per design to find a gain at the asked power with the family-wise error held, and the smallest gain a
budget resolves.

A config is compared with the baseline by a two-sided test at fw / m (Bonferroni over the grid's m comparisons:
Holm's first step, so its power for one better config among equals), each arm running the same seeds. A run costs
its training plus its eval samples (costs.decision_model's World: the measured GPU costs, the length model, the
difficulty model's per-problem solve rates at the anchor's score). The designs build on each other:
- fixed: every arm R seeds at the grid's K (inference.stats.seeds_needed);
- k_auto: the same at the cost-optimal K (inference.design.choose_k within eval.auto_k's bounds; the run SD at
  that K by inference.cost_by_k.sd_at_k);
- allocation: + per-problem counts by inference.design.neyman_allocation at K auto's budget, from the rates a
  pilot of 3 runs at auto_k.first would give (shrunk), which cuts the eval-sampling variance;
- paired: + the paired t over common seeds (inference.design.seeds_needed_paired), at the correlation of two
  configs' run scores that a correlation rho of their training-seed effects gives (eval sampling never pairs);
- race: opsd_sweep.race's policy (the sweeper's settings, conf/hydra/sweeper/race.yaml) run by the race simulator
  (costs.decision_designs.race) on simulated sweeps of the grid with one config at +effect and the rest equal to
  the baseline; max_seeds the smallest of a ladder whose simulated power reaches the target. Its smallest gain for
  the budget takes its simulated cost ratio to the fixed grid as holding at other gains.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Callable, Optional

import numpy as np
from omegaconf import OmegaConf

from opsd_sweep import CONF_DIR
from opsd_sweep.costs.decision_designs import SamplePolicy, race
from opsd_sweep.costs.decision_model import Sweep, World
from opsd_sweep.inference import stats
from opsd_sweep.inference.cost_by_k import sd_at_k
from opsd_sweep.inference.design import (choose_k, min_detectable_effect_paired, neyman_allocation,
                                         seeds_needed_paired, shrunk_rates)
from opsd_sweep.race import RaceSettings

MAX_SEEDS = 10_000  # the power search's limit (inference.stats.seeds_needed's)
PILOT_RUNS = 3  # runs of the baseline an allocation's pilot takes (costs.decision_designs.SamplePolicy's)
RACE_LADDER = (8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024)


@dataclass(frozen=True)
class Noise:
    """The run-to-run SD of a config's run score at k samples per problem, and its eval-sampling part."""

    sd: float
    eval_var: float  # points^2
    k: int
    source: str

    @property
    def train_var(self) -> float:
        return max(0.0, self.sd ** 2 - self.eval_var)

    def at(self, k: float) -> float:
        """The run-to-run SD at another K (eval sampling scales as 1/K)."""
        return sd_at_k(self.sd, math.sqrt(min(self.eval_var, self.sd ** 2)), self.k, k)

    def eval_var_at(self, k: float) -> float:
        return min(self.eval_var, self.sd ** 2) * self.k / k


@dataclass(frozen=True)
class Scenario:
    """What every design is priced in: the grid's shape, its noise, its costs, the targets."""

    noise: Noise
    world: World  # costs, lengths and the difficulty model
    arms: int
    comparisons: int
    k: int  # the grid's samples per problem
    k_bounds: tuple[int, int]  # eval.auto_k's [low, high]
    k_first: int  # eval.auto_k.first: the pilot's K
    floor: int  # eval.allocation_floor
    power: float
    fw: float
    rho: float  # correlation of two configs' training-seed effects at one seed

    @property
    def alpha(self) -> float:
        return self.fw / max(self.comparisons, 1)

    @property
    def rates(self) -> np.ndarray:
        return self.world.difficulty.rates(np.array([self.world.base_score]))[0]

    @property
    def sample_h(self) -> np.ndarray:
        """Expected GPU-hours of one sample of each problem (lengths follow correctness)."""
        right, wrong = self.world.sample_seconds
        p = self.rates
        return (p * right + (1 - p) * wrong) / 3600

    @property
    def train_h(self) -> float:
        return self.world.cost.train_s / 3600

    def run_h(self, samples) -> float:
        """GPU-hours of a run drawing `samples` (K, or per-problem counts) samples of every problem."""
        return self.train_h + float(np.sum(np.broadcast_to(samples, self.sample_h.shape) * self.sample_h))


@dataclass(frozen=True)
class Row:
    """One design's figures: the seeds per arm and GPU-hours to find the gain, the smallest gain the budget
    resolves (None when it buys too few seeds for a test), and how the design runs."""

    design: str
    how: str
    k: float
    sd: float  # the SD each comparison's runs have (points)
    run_h: float
    seeds: Optional[int]
    gpu_hours: Optional[float]
    budget_seeds: Optional[int]  # None: a design the plan could not price
    mde: Optional[float]
    note: str = ""


@dataclass(frozen=True)
class Analytic:
    """A design with a closed-form power: runs at `k` (or per-problem counts) with run SD `sd`, paired or not."""

    name: str
    how: str
    k: float
    sd: float
    run_h: float
    paired_r: Optional[float] = None  # the run scores' correlation of a paired design

    def seeds(self, effect: float, s: Scenario) -> Optional[int]:
        if self.paired_r is None:
            return stats.seeds_needed(effect, self.sd, s.alpha, s.power, max_seeds=MAX_SEEDS)
        return seeds_needed_paired(effect, self.sd, self.paired_r, s.alpha, s.power, max_seeds=MAX_SEEDS)[0]

    def mde(self, n: int, s: Scenario) -> Optional[float]:
        if n < 2:
            return None
        if self.paired_r is None:
            return stats.min_detectable_effect(self.sd, n, s.alpha, s.power)
        return min_detectable_effect_paired(self.sd, self.paired_r, n, s.alpha, s.power)

    def row(self, effect: float, budget: float, s: Scenario, note: str = "") -> Row:
        seeds = self.seeds(effect, s)
        budget_seeds = int(budget // (s.arms * self.run_h))
        return Row(self.name, self.how, self.k, self.sd, self.run_h, seeds,
                   None if seeds is None else s.arms * seeds * self.run_h, budget_seeds, self.mde(budget_seeds, s),
                   note)


def analytic_designs(s: Scenario) -> dict[str, Analytic]:
    """fixed, k_auto, allocation and paired (module docstring), each built on the one before."""
    fixed = Analytic("fixed", f"fixed grid, K = {s.k}", s.k, s.noise.at(s.k), s.run_h(s.k))
    eval_h = s.run_h(s.k) - s.train_h
    choice = choose_k(s.noise.eval_var_at(s.k), s.k, s.noise.train_var, s.train_h, eval_h, s.k_bounds)
    k_auto = Analytic("k_auto", f"fixed grid, K auto = {choice.k}", choice.k, s.noise.at(choice.k),
                      s.run_h(choice.k))
    p = s.rates
    pilot = PILOT_RUNS * s.k_first
    counts = neyman_allocation(shrunk_rates(p * pilot, np.full(p.size, pilot)), s.sample_h,
                               choice.k * s.sample_h.sum(), s.floor)
    uniform_var = float((p * (1 - p)).sum())
    ratio = float((p * (1 - p) / counts).sum() * choice.k / uniform_var) if uniform_var > 0 else 1.0
    alloc_sd = math.sqrt(s.noise.train_var + ratio * s.noise.eval_var_at(choice.k))
    spread = (f"{counts.min()}-{counts.max()} a problem" if counts.min() < counts.max()
              else f"{counts.min()} a problem: K auto's budget is the floor, nothing to move")
    allocation = Analytic("allocation", f"+ Neyman allocation ({spread})", float(counts.mean()), alloc_sd,
                          s.run_h(counts))
    r = s.rho * s.noise.train_var / alloc_sd ** 2
    paired = replace(allocation, name="paired", how=f"+ paired seeds (rho {s.rho:g} assumed: score correlation "
                                                    f"{r:.2f})", paired_r=r)
    return {d.name: d for d in (fixed, k_auto, allocation, paired)}


# --- the race, simulated ---------------------------------------------------------------------------

def race_settings(max_seeds: int, precision_stop: bool = True) -> RaceSettings:
    """The sweeper's race settings (conf/hydra/sweeper/race.yaml) at this max_seeds; precision_stop False: with
    target_half_width 0 (no stop when every interval is narrow, which can end a race before it finds a small gain)."""
    conf = OmegaConf.load(CONF_DIR / "hydra" / "sweeper" / "race.yaml")
    fields = set(RaceSettings.__dataclass_fields__)
    return RaceSettings(**{k: v for k, v in OmegaConf.to_container(conf).items() if k in fields} | {
        "max_seeds": max_seeds} | ({} if precision_stop else {"target_half_width": 0.0}))


@dataclass(frozen=True)
class RaceResult:
    max_seeds: int  # the rung chosen: the smallest reaching the power, else the top one tried
    reached: bool
    power: float
    power_se: float
    gpu_hours: float
    runs: float
    sweeps: int
    precision_stop: bool


def race_world(s: Scenario) -> World:
    """The scenario's world with the run SD at K = 12 (World's convention) that keeps its training-seed variance."""
    eval_12 = s.world.difficulty.eval_var(s.world.base_score, 12)
    return replace(s.world, run_sd=math.sqrt(s.noise.train_var + eval_12))


def simulate_race(effect: float, s: Scenario, sweeps: int, seed: int, max_seeds: int,
                  precision_stop: bool = True) -> list:
    """The race (the grid's K) on `sweeps` simulated sweeps: the baseline, one config at +effect, the rest equal."""
    grid = [0.0, effect] + [0.0] * (s.arms - 2)
    settings = race_settings(max_seeds, precision_stop)
    world = race_world(s)
    pool = max_seeds + settings.confirm_seeds + 2 * settings.max_failures + 1
    return [race(Sweep(world, grid, [seed, i], 0.0, seeds=pool), SamplePolicy(k=s.k), settings)
            for i in range(sweeps)]


def race_row(effect: float, s: Scenario, sweeps: int, seed: int, ladder_top: int,
             progress: Callable[[str], None] = lambda _: None, precision_stop: bool = True) -> RaceResult:
    """The smallest rung of RACE_LADDER (up to ladder_top) whose simulated power reaches s.power (bisection: power
    rises with max_seeds), with its power and mean GPU-hours on those sweeps."""
    ladder = [m for m in RACE_LADDER if m <= ladder_top] or [ladder_top]
    measured: dict[int, list] = {}

    def outcomes(m: int) -> list:
        if m not in measured:
            progress(f"race: simulating {sweeps} sweeps at max_seeds {m}"
                     + ("" if precision_stop else ", target_half_width=0"))
            measured[m] = simulate_race(effect, s, sweeps, seed, m, precision_stop)
        return measured[m]

    def power(m: int) -> float:
        return float(np.mean([o.claims == {1} for o in outcomes(m)]))

    low, high = -1, len(ladder) - 1
    found = power(ladder[high]) >= s.power
    if found:
        while high - low > 1:
            mid = (low + high) // 2
            low, high = (low, mid) if power(ladder[mid]) >= s.power else (mid, high)
    m = ladder[high]
    results, p = outcomes(m), power(m)
    return RaceResult(m, found, p, math.sqrt(max(p * (1 - p), 1 / sweeps) / sweeps),
                      float(np.mean([o.gpu_seconds for o in results])) / 3600,
                      float(np.mean([o.runs for o in results])), sweeps, precision_stop)


def race_design_row(effect: float, budget: float, s: Scenario, fixed: Row, result: RaceResult) -> Row:
    """The race's row: its simulated GPU-hours; its smallest gain for the budget from the fixed grid's at the
    budget divided by the race's cost ratio (module docstring)."""
    sd = s.noise.at(s.k)
    name = "race" if result.precision_stop else "race_no_precision_stop"
    how = f"race, K = {s.k}" + ("" if result.precision_stop else ", hydra.sweeper.target_half_width=0")
    simulated = (f"simulated: {result.sweeps} sweeps, power {result.power:.2f} ± {result.power_se:.2f}, "
                 f"{result.runs:.0f} runs")
    if not result.reached or not fixed.gpu_hours:
        return Row(name, how, s.k, sd, s.run_h(s.k), None, None, None, None,
                   f"no max_seeds up to {result.max_seeds} reaches {s.power:.0%} power ({simulated}, "
                   f"{result.gpu_hours:.0f} GPU-hours)" + ("; the next row turns its precision stop off"
                                                          if result.precision_stop else ""))
    ratio = result.gpu_hours / fixed.gpu_hours
    fixed_design = analytic_designs(s)["fixed"]
    budget_seeds = int(budget / ratio // (s.arms * fixed_design.run_h))
    return Row(name, f"{how}, max_seeds {result.max_seeds}", s.k, sd, s.run_h(s.k), None,
               result.gpu_hours, budget_seeds, fixed_design.mde(budget_seeds, s),
               f"{simulated}; {ratio:.2f}x the fixed grid's GPU-hours, a ratio its smallest gain for the budget "
               "takes as holding at other gains")
