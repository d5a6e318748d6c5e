"""The planner (python -m opsd_sweep.plan): its figures against a Monte Carlo of the design they price, the sentence
when a budget cannot resolve the gain, --from on hand-built run dirs, the grid of the sweep's own overrides, and the
refusal of bad input."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
from statsmodels.stats.power import TTestPower

from benchmarks.decision_validity import deltas
from opsd_sweep.testing.rundirs import draw_correct, write_run
from opsd_sweep.costs.decision_designs import SamplePolicy, fixed_grid, grid_runs
from opsd_sweep.costs.decision_model import DifficultyModel, Sweep, World, measured_cost_model, published_by_correctness
from opsd_sweep.inference import stats
from opsd_sweep.inference.stats import holm
from opsd_sweep.plan.__main__ import main
from opsd_sweep.plan.designs import Noise, Scenario, analytic_designs, race_settings, race_world
from opsd_sweep.plan.grid import expand
from opsd_sweep.plan.planner import make_plan
from opsd_sweep.plan.settings import load_settings

SWEEPS = 240  # Monte Carlo sweeps per check: power SE <= 0.032


def scenario(sd: float = 3.0, arms: int = 3, rho: float = 0.0) -> Scenario:
    world = World(DifficultyModel(), published_by_correctness(), measured_cost_model())
    noise = Noise(sd, world.difficulty.eval_var(world.base_score, 12), 12, "test")
    return Scenario(noise, world, arms, arms - 1, 12, (2, 16), 4, 2, 0.8, 0.05, rho)


def simulated_fixed_grid(s: Scenario, effect: float, seeds: int, seed: int) -> tuple[float, float]:
    """(power, mean GPU-hours) of the fixed grid at `seeds` seeds per arm on SWEEPS simulated sweeps: the baseline,
    one config at +effect, the rest equal; Holm at the scenario's FW over the comparisons (race.policy.assess)."""
    world = race_world(s)
    grid = [0.0, effect] + [0.0] * (s.arms - 2)
    outcomes = [fixed_grid(Sweep(world, grid, [seed, i], seeds=seeds + 1), SamplePolicy(k=s.k), seeds,
                           race_settings(seeds)) for i in range(SWEEPS)]
    return float(np.mean([o.claims == {1} for o in outcomes])), float(np.mean([o.gpu_seconds for o in outcomes])) / 3600


def within_mc(simulated: float, expected: float, extra: float = 0.0) -> bool:
    """|simulated - expected| inside 3 Monte Carlo SEs of a rate (plus `extra` for a known small bias)."""
    return abs(simulated - expected) <= 3 * math.sqrt(expected * (1 - expected) / SWEEPS) + extra


def test_fixed_grid_figures_match_a_simulation_of_the_grid():
    """The seeds and GPU-hours to find +3.5, and the gain a budget resolves, have the power the planner says when
    the fixed grid is simulated. The simulated test pools the SD over the arms (more df than the planner's two-arm
    t), so its power may sit a little above: 0.03 is allowed for that."""
    s = scenario()
    fixed = analytic_designs(s)["fixed"]
    row = fixed.row(3.5, budget=40.0, s=s)
    planned = stats.power(3.5, fixed.sd, row.seeds, s.alpha)
    assert 0.8 <= planned < 0.85 and row.seeds > 10
    power, gpu_hours = simulated_fixed_grid(s, 3.5, row.seeds, seed=5101)
    assert within_mc(power, planned, extra=0.03)
    assert gpu_hours == pytest.approx(row.gpu_hours, rel=0.02)  # the +3.5 arm's shorter (right) samples cost less
    # the budget's seeds find the planner's smallest gain at 80% power
    assert 4 <= row.budget_seeds < row.seeds
    power_at_mde, _ = simulated_fixed_grid(s, row.mde, row.budget_seeds, seed=5102)
    assert within_mc(power_at_mde, 0.8, extra=0.03)


def test_allocated_paired_figures_match_a_simulation_of_the_design():
    """With K held at 12 (auto_k bounds [12, 12], a pilot of 12 a problem), the paired design's seeds for +3 at a
    training-seed correlation of 0.8 have the power the planner says when its design is simulated: Neyman
    allocation from the baseline's first runs, the paired t over common seeds, Holm."""
    s = replace(scenario(rho=0.8), k_bounds=(12, 12), k_first=12)
    paired = analytic_designs(s)["paired"]
    seeds = paired.seeds(3.0, s)
    assert seeds < stats.seeds_needed(3.0, paired.sd, s.alpha, s.power)  # pairing pays at this correlation
    planned = float(TTestPower().power(3.0 / (paired.sd * math.sqrt(2 * (1 - paired.paired_r))), seeds, s.alpha))
    assert 0.8 <= planned < 0.86
    world = race_world(s)
    hits = 0
    for i in range(SWEEPS):
        _, scores = grid_runs(Sweep(world, [0.0, 3.0, 0.0], [5103, i], s.rho, seeds=seeds + 1),
                              SamplePolicy(k=12, allocate=True), seeds)
        comparisons = deltas(scores, paired=True)
        adjusted = holm([c.p for c in comparisons.values()])
        hits += {c for (c, cmp), p in zip(comparisons.items(), adjusted) if p <= s.fw and cmp.delta > 0} == {1}
    assert within_mc(hits / SWEEPS, planned, extra=0.03)


def test_a_budget_too_small_says_what_the_gain_needs_and_what_the_budget_resolves():
    settings = load_settings({"effect": 1.6, "budget": 20.0, "designs": ["fixed", "k_auto"]})
    plan = make_plan(settings, ["learning_rate=1e-5,2e-5"])
    cheapest = min(r.gpu_hours for r in plan.rows)
    finest = min(r.mde for r in plan.rows)
    assert cheapest > 20
    assert plan.lines[-1] == (f"+1.6 needs ~{cheapest:,.0f} GPU-hours (the k_auto design); your budget of 20 GPU-hours "
                              f"resolves >= {finest:.1f} points (the k_auto design).")
    broke = make_plan(load_settings({"budget": 0.5, "designs": ["fixed"]}), ["learning_rate=1e-5,2e-5"])
    assert "buys fewer than 2 seeds per arm of any design, so it resolves nothing" in broke.lines[-1]
    rich = make_plan(load_settings({"effect": 10.0, "budget": 1000.0, "designs": ["fixed"]}),
                     ["learning_rate=1e-5,2e-5"])
    assert rich.lines[-1].startswith("+10 fits the budget: the fixed design finds it with ~")


def test_the_papers_grid_is_the_sweeps_own_axes_with_its_baseline_in_it():
    grid = expand(["+sweep=lr_grid", "seed=1,2,3"], baseline="lr_scheduler=constant")
    assert list(grid.configs) == [f"+sweep/lr_grid={arm}" for arm in ("paper", "lr1.4e-5", "lr2e-5", "lr4e-5")]
    assert grid.baseline == "+sweep/lr_grid=paper" and grid.seeds == (1, 2, 3)
    assert (grid.arms, grid.comparisons) == (4, 3)
    assert grid.run.train.max_steps == 100 and grid.run.eval.n_samples == 12


def test_from_takes_the_pooled_sd_and_lengths_of_a_sweeps_runs(tmp_path):
    rng = np.random.default_rng(7)
    difficulty = rng.normal(0, 1.5, 30)
    scores, eval_vars = {}, []
    for lr, shift in ((1e-5, 0.0), (2e-5, 0.4)):
        for seed in (1, 2, 3):
            correct = draw_correct(rng, difficulty, shift + rng.normal(0, 0.3), 8)
            write_run(tmp_path / "g", learning_rate=lr, seed=seed, correct=correct, rng=rng)
            scores.setdefault(lr, []).append(100 * correct.mean())
            p = correct.mean(1)
            eval_vars.append(1e4 * (p * (1 - p) / 7).sum() / 30 ** 2)
    sd, _ = stats.pooled_sd([np.array(v) for v in scores.values()])
    settings = load_settings({"from_results": str(tmp_path / "g"), "designs": ["fixed"]})
    plan = make_plan(settings, ["learning_rate=1e-5,2e-5"])
    noise = plan.scenario.noise
    assert noise.sd == pytest.approx(sd) and noise.k == 8 and noise.eval_var == pytest.approx(np.mean(eval_vars))
    assert plan.scenario.world.lengths.name.startswith(f"the sweep's own lengths ({tmp_path / 'g'}, 1440 samples)")
    assert any(line.startswith(f"run SD: --from {tmp_path / 'g'}: pooled over 2 configs, 6 runs (4 df)")
               for line in plan.lines)


def test_from_refuses_a_sweep_without_two_runs_of_a_config(tmp_path, capsys):
    rng = np.random.default_rng(8)
    write_run(tmp_path / "g", learning_rate=1e-5, seed=1, correct=draw_correct(rng, np.zeros(30), 0.0, 4), rng=rng)
    with pytest.raises(SystemExit) as refused:
        main(["learning_rate=1e-5,2e-5", "--from", str(tmp_path / "g"), "--designs", "fixed"])
    assert "no trained config there has >= 2 finished runs" in str(refused.value.code)
    assert "give the SD with --sd" in str(refused.value.code)


@pytest.mark.parametrize("flags, named, fix", [
    (["--effect", "-1"], "--effect -1", "e.g. --effect 1.6"),
    (["--budget", "0"], "--budget 0", "e.g. --budget 100"),
    (["--designs", "fixed", "lottery"], "--designs lottery: unknown design", "fixed race k_auto allocation paired"),
    (["--gpu", "A100"], "--gpu 'A100'", "H100"),
    (["--baseline", "learning_rate=9"], "--baseline='learning_rate=9' matches 0 configs", "leave --baseline out"),
])
def test_bad_input_is_refused_naming_the_value_and_the_fix(flags, named, fix):
    with pytest.raises(SystemExit) as refused:
        main(["learning_rate=1e-5,2e-5", "--race-sweeps", "0", *flags])
    message = str(refused.value.code)
    assert named in message and fix in message


def test_help_says_what_it_prints_with_examples(capsys):
    with pytest.raises(SystemExit) as done:
        main(["--help"])
    text = capsys.readouterr().out
    assert done.value.code == 0 and text.startswith("usage: python -m opsd_sweep.plan")
    assert "smallest gain a budget" in text and "+sweep=lr_grid --baseline lr_scheduler=constant" in text
