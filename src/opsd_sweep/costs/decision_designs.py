"""The designs of a 6-config decision, run on one simulated sweep (opsd_sweep.costs.decision_model.Sweep).

How a run's eval spends samples (`SamplePolicy`, carried out per sweep by `Planner`):
- fixed K: every problem K samples;
- K auto: the first runs K0 samples of every problem; once the pool's pooled run-to-run variance has
  `min_pool_df` degrees of freedom, each batch of runs uses inference.design.choose_k with the pool's measured
  components: training-seed variance = pooled within-config variance of run scores - the mean eval-sampling
  variance of a run (each run's own, at its own samples), and the eval's variance x GPU-seconds (constant in K,
  so runs at any K pool) per GPU-second of one sample of every problem;
- allocation: per-problem counts by inference.design.neyman_allocation from a pilot that is not the run: the
  baseline's first `pilot_runs` uniform runs (their correct counts, shrunk, and the GPU-seconds of their samples'
  token counts), the budget of the uniform K in pilot-estimated GPU-seconds, a floor per problem; every run is
  scored by inference.design.stratified_score (the mean over problems of per-problem means).

How runs become a decision:
- `fixed_grid`: R seeds of every config, Holm vs the baseline at alpha (race.policy.assess, as bench_race);
- `race`: opsd_sweep.race's policy (driver.run_race), the sweeper's settings; paired seeds are the race's own
  `pairing: seed` (comparisons by paired differences over common seeds, the baseline runs the winner's
  confirmation seeds too).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from opsd_sweep.costs.decision_model import Sweep
from opsd_sweep.inference.design import choose_k, neyman_allocation, shrunk_rates, stratified_score
from opsd_sweep.race import RaceSettings, RaceSpec, RunResult, run_race
from opsd_sweep.race.compare import ConfigSummary
from opsd_sweep.race.policy import assess

BASELINE = 0  # config 0 of every grid is the in-sweep baseline


@dataclass(frozen=True)
class SamplePolicy:
    """How a run's eval spends samples (module docstring). k: a fixed K, or None for K auto."""

    k: Optional[int] = 12
    k0: int = 4
    bounds: tuple[int, int] = (2, 12)
    min_pool_df: int = 6
    allocate: bool = False
    floor: int = 2
    pilot_runs: int = 3

    def __post_init__(self):
        if self.allocate and self.floor < 2:
            raise ValueError(f"floor={self.floor}: the allocation keeps >= 2 samples a problem, so each run's eval "
                             "variance stays estimable (K auto needs it)")


@dataclass
class Run:
    config: int
    seed: int
    score: float  # percent
    eval_var: float  # points^2, the run's own estimate
    eval_s: float
    k: float  # uniform-equivalent K of its budget
    samples: np.ndarray
    correct: np.ndarray
    uniform: bool

    @property
    def samples_drawn(self) -> int:
        return int(self.samples.sum())


@dataclass
class Plan:
    samples: np.ndarray  # per problem
    k: int  # uniform K, or the K whose budget the allocation spends
    uniform: bool
    reason: str


class Planner:
    """Carries out a SamplePolicy on one sweep: plans each batch of runs from the runs before it, draws the runs."""

    def __init__(self, policy: SamplePolicy, sweep: Sweep):
        self.policy, self.sweep = policy, sweep
        self.pool: list[Run] = []
        self.problems = sweep.rates.shape[-1]
        self._pilot_cost: Optional[np.ndarray] = None
        self.k_used: list[int] = []

    def plan(self) -> Plan:
        k, reason = self._k()
        pilot = self._pilot()
        if pilot is None:
            return Plan(np.full(self.problems, k), k, True, reason)
        rates, cost = pilot
        samples = neyman_allocation(rates, cost, k * cost.sum(), self.policy.floor)
        return Plan(samples, k, False, reason + "; Neyman allocation from the baseline's pilot")

    def run(self, config: int, seed: int, plan: Plan) -> Run:
        correct = self.sweep.correct(config, seed, plan.samples)
        scored = stratified_score(correct, plan.samples)
        run = Run(config, seed, 100 * scored.score, 1e4 * scored.eval_var,
                  self.sweep.world.eval_seconds(correct, plan.samples), plan.k, plan.samples, correct, plan.uniform)
        self.pool.append(run)
        self.k_used.append(plan.k)
        return run

    def gpu_seconds(self, run: Run) -> float:
        return self.sweep.world.cost.train_s + run.eval_s

    # --- K ---

    def _k(self) -> tuple[int, str]:
        p = self.policy
        if p.k is not None:
            return p.k, f"fixed K = {p.k}"
        components = self.components()
        if components is None:
            return p.k0, f"K0 = {p.k0}: the pool has under {p.min_pool_df} degrees of freedom"
        train_var, eval_var_s, per_k_s = components
        hours = 1 / 3600
        choice = choose_k(eval_var_s / per_k_s, 1, train_var, self.sweep.world.cost.train_s * hours, per_k_s * hours,
                          p.bounds)
        return choice.k, choice.reason

    def components(self) -> Optional[tuple[float, float, float]]:
        """(training-seed variance, eval variance x eval GPU-seconds, eval GPU-seconds per K) of the pool, points^2;
        None while the pooled variance has fewer than min_pool_df degrees of freedom."""
        by_config: dict[int, list[Run]] = {}
        for run in self.pool:
            by_config.setdefault(run.config, []).append(run)
        groups = [runs for runs in by_config.values() if len(runs) >= 2]
        df = sum(len(g) - 1 for g in groups)
        if df < self.policy.min_pool_df:
            return None
        within = sum(((s := np.array([r.score for r in g])) - s.mean()) @ (s - s.mean()) for g in groups) / df
        pooled_runs = [r for g in groups for r in g]
        train_var = within - float(np.mean([r.eval_var for r in pooled_runs]))
        eval_var_s = float(np.mean([r.eval_var * r.eval_s for r in self.pool]))
        per_k_s = float(np.mean([r.eval_s / r.k for r in self.pool]))
        return train_var, eval_var_s, per_k_s

    # --- allocation ---

    def _pilot(self) -> Optional[tuple[np.ndarray, np.ndarray]]:
        """(shrunk solve rates, GPU-seconds per sample) of every problem from the baseline's first uniform runs;
        None before they exist (or without allocation)."""
        p = self.policy
        if not p.allocate:
            return None
        pilot = [r for r in self.pool if r.config == BASELINE and r.uniform][:p.pilot_runs]
        if len(pilot) < p.pilot_runs:
            return None
        correct = sum(r.correct for r in pilot)
        samples = sum(r.samples for r in pilot)
        if self._pilot_cost is None:  # per-problem GPU-seconds of the pilot's samples, from their token counts
            cost = self.sweep.world.cost
            seconds = [[cost.sample_seconds(n).sum() for n in self.sweep.lengths(r.config, r.seed, r.correct,
                                                                                 r.samples)] for r in pilot]
            self._pilot_cost = np.sum(seconds, axis=0) / samples
        return shrunk_rates(correct, samples), self._pilot_cost


# --- decisions -----------------------------------------------------------------------------------

@dataclass
class Outcome:
    """One design on one sweep: the configs declared better than the baseline, and what it spent."""

    claims: set[int]
    runs: int
    samples: int
    gpu_seconds: float
    k_used: list[int] = field(default_factory=list)


def labels(n: int) -> tuple[str, ...]:
    return tuple(f"c{i}" for i in range(n))


def outcome(planner: Planner, claims: set[int]) -> Outcome:
    pool = planner.pool
    return Outcome(claims, len(pool), sum(r.samples_drawn for r in pool),
                   sum(planner.gpu_seconds(r) for r in pool), list(planner.k_used))


def grid_runs(sweep: Sweep, policy: SamplePolicy, seeds: int, first: int = 3) -> tuple[Planner, dict[int, dict]]:
    """Seeds 1..`seeds` of every config: `first` of them in one batch, then one seed of every config a batch (as a
    race's rounds, so K auto and the allocation plan later batches from earlier ones). -> config -> seed -> score."""
    planner = Planner(policy, sweep)
    scores: dict[int, dict[int, float]] = {c: {} for c in range(sweep.grid.size)}
    batches = [range(1, min(first, seeds) + 1)] + [[s] for s in range(first + 1, seeds + 1)]
    for batch in batches:
        plan = planner.plan()
        for c in scores:
            for s in batch:
                scores[c][s] = planner.run(c, s, plan).score
    return planner, scores


def fixed_grid(sweep: Sweep, policy: SamplePolicy, seeds: int, settings: RaceSettings) -> Outcome:
    """`seeds` seeds of every config; Holm vs the baseline at settings.alpha on pooled run scores."""
    planner, scores = grid_runs(sweep, policy, seeds)
    configs = labels(sweep.grid.size)
    spec = RaceSpec(configs, configs[BASELINE], None, settings)
    rows = assess({configs[c]: ConfigSummary(configs[c], np.array(list(v.values()))) for c, v in scores.items()},
                  spec, 0, "fixed")
    claims = {configs.index(r["config"]) for r in rows if r["p_baseline"] is not None
              and r["p_baseline"] <= settings.alpha and r["delta_baseline"] > 0}
    return outcome(planner, claims)


def race(sweep: Sweep, policy: SamplePolicy, settings: RaceSettings) -> Outcome:
    """opsd_sweep.race's policy; each batch of runs is planned from the runs before it."""
    planner = Planner(policy, sweep)
    configs = labels(sweep.grid.size)
    spec = RaceSpec(configs, configs[BASELINE], None, settings)

    def execute(requests):
        plan = planner.plan()
        results = []
        for q in requests:
            run = planner.run(configs.index(q.config), q.seed, plan)
            results.append(RunResult(q.config, q.seed, q.phase, "done", run.score, planner.gpu_seconds(run) / 3600))
        return results

    finals: list[dict] = []
    run_race(spec, execute, emit=lambda r: finals.append(r) if r.get("phase") == "final" else None)
    return outcome(planner, {configs.index(r["config"]) for r in finals if r["action"] == "better"})
