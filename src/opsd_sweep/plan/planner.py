"""A plan from settings and grid overrides: the grid composed, its noise and costs priced, each design's figures."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from opsd_sweep.config import AUTO
from opsd_sweep.costs.decision_model import DifficultyModel, World, measured_cost_model
from opsd_sweep.costs.measured import GPU_COSTS
from opsd_sweep.plan import report
from opsd_sweep.plan.designs import Row, Scenario, analytic_designs, race_design_row, race_row
from opsd_sweep.plan.grid import Grid, expand
from opsd_sweep.plan.prior import lengths_for, published_noise, sweep_noise
from opsd_sweep.plan.settings import PlanSettings

MEASURED_MODEL = "qwen3-1.7b"  # the model the measured costs are of (costs/measured.py)


@dataclass(frozen=True)
class Plan:
    grid: Grid
    scenario: Scenario
    rows: list[Row]
    lines: list[str]  # the printout


def scenario_of(s: PlanSettings, grid: Grid) -> tuple[Scenario, list[str]]:
    """The scenario the designs are priced in, and the lines that say what it is made of."""
    run = grid.run
    cost = measured_cost_model(train_s=run.train.max_steps * GPU_COSTS[s.gpu].train_step_s, gpu=s.gpu)
    lengths = lengths_for(s.lengths, s.from_results)
    world = World(DifficultyModel(), lengths, cost)
    noise = (sweep_noise(s.from_results, s.metric) if s.from_results is not None
             else published_noise(s.sd, s.sd_k, world.difficulty, world.base_score))
    k = s.sd_k if run.eval.n_samples == AUTO else int(run.eval.n_samples)
    scenario = Scenario(noise, world, grid.arms, grid.comparisons, k, (run.eval.auto_k.low, run.eval.auto_k.high),
                        run.eval.auto_k.first, run.eval.allocation_floor, s.power, s.fw, s.rho)
    right, wrong = world.sample_seconds
    g = cost.gpu
    words = [f"costs on one {g.kind}: training {run.train.max_steps} steps x {g.train_step_s} s ({g.train_source}); "
             f"eval samples by the step model of {g.eval_source}",
             f"eval lengths: {lengths.name}, mean {lengths.describe()['overall_mean']:,} tokens: a sample costs "
             f"{right:.1f} GPU-s right, {wrong:.1f} wrong; a run at K = {k} costs {scenario.run_h(k):.2f} GPU-hours "
             f"({scenario.train_h:.2f} training) on {len(scenario.rates)} AIME24-like problems"]
    if run.model.name != MEASURED_MODEL:
        words.append(f"note: the costs are the measured {MEASURED_MODEL} cycle's; this grid's model is "
                     f"{run.model.name}, so its GPU-hours are what the grid would cost at {MEASURED_MODEL}'s scale")
    if run.eval.n_samples == AUTO:
        words.append(f"note: eval.n_samples=auto: the fixed grid's row is at K = {k} (--sd-k)")
    return scenario, words


def grid_words(grid: Grid) -> str:
    baseline = (f"baseline {grid.baseline!r} of the grid" if grid.baseline is not None
                else "a baseline outside the grid, priced as one more trained config")
    seeds = "" if grid.seeds is None else f"; seed={','.join(map(str, grid.seeds))}"
    return f"{len(grid.configs)} config{'s' if len(grid.configs) != 1 else ''} ({', '.join(grid.configs)}), {baseline}{seeds}"


def make_plan(s: PlanSettings, overrides: list[str], progress: Callable[[str], None] = lambda _: None) -> Plan:
    grid = expand(overrides, s.baseline)
    if grid.comparisons < 1:
        raise ValueError(f"the grid {list(grid.configs)} has no config besides its baseline {grid.baseline!r}: add "
                         "a sweep override (e.g. learning_rate=1e-5,2e-5) or leave --baseline out")
    if s.designs == ["race"] and s.race_sweeps == 0:
        raise ValueError("--race-sweeps 0 leaves the race out and no other design is asked: add designs "
                         "(--designs fixed race) or give --race-sweeps 60")
    scenario, cost_words = scenario_of(s, grid)
    analytic = analytic_designs(scenario)
    fixed = analytic["fixed"].row(s.effect, s.budget, scenario)
    rows = []
    for name in s.designs:
        if name == "race":
            if s.race_sweeps == 0:
                continue
            result = race_row(s.effect, scenario, s.race_sweeps, s.seed, s.race_max_seeds, progress)
            rows.append(race_design_row(s.effect, s.budget, scenario, fixed, result))
            if not result.reached:  # the sweeper's precision stop can end a race before a small gain shows
                result = race_row(s.effect, scenario, s.race_sweeps, s.seed, s.race_max_seeds, progress, False)
                rows.append(race_design_row(s.effect, s.budget, scenario, fixed, result))
        else:
            rows.append(analytic[name].row(s.effect, s.budget, scenario))
    lines = report.header(grid_words(grid), scenario.noise.source, cost_words, scenario)
    notes = [f"- {r.design}: {r.note}" for r in rows if r.note]
    if grid.seeds is not None and len(grid.seeds) >= 2:
        mde = analytic["fixed"].mde(len(grid.seeds), scenario)
        notes.append(f"- the grid's own {len(grid.seeds)} seeds per config resolve >= {mde:.1f} points (fixed grid, "
                     f"{grid.arms * len(grid.seeds) * fixed.run_h:,.1f} GPU-hours)")
    lines += ["", report.table(rows, s.effect, s.budget), *([""] + notes if notes else [])]
    lines += ["", report.sentence(rows, s.effect, s.budget, scenario)]
    return Plan(grid, scenario, rows, lines)
