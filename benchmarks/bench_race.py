"""Racing vs a fixed grid, in simulation (CPU): runs needed to declare a +3-point config better.

Noise from the simulator (opsd_sweep.simulate, conf/simulate/default.yaml): training-seed SD 2 / 3 / 4
points, 30 problems x 12 samples (eval-sampling SD ~1.8), problem difficulties shared by all configs.
Both designs use the same statistics (opsd_sweep.race.policy.assess: run scores with the SD pooled
across configs, Holm across configs vs the in-sweep baseline at alpha 0.05).

- Fixed grid: R seeds for every config; R* = the smallest R with >= 80% power (the +3 config declared
  better and no other config declared better); runs = configs x R*.
- Racing: the policy of opsd_sweep.race (driver.run_race), settings (stop_alpha x futility_effect,
  then max_seeds per SD) chosen on TUNING scenarios (random streams seeded with TUNE_SEED) and
  reported on fresh REPORT scenarios (REPORT_SEED).

    python -m benchmarks.bench_race            # full run (1,000 sweeps per reported scenario)
    python -m benchmarks.bench_race --quick    # smoke run (few sweeps; figures are noisy)
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import time
from dataclasses import dataclass

import numpy as np
from omegaconf import OmegaConf
from tqdm import tqdm

from opsd_sweep import CONF_DIR
from opsd_sweep.config import SimulateConfig
from opsd_sweep.inference.arms import Anchor
from opsd_sweep.inference.stats import welch_difference, welch_vs_anchor
from opsd_sweep.race import RaceSettings, RaceSpec, RunResult, run_race
from opsd_sweep.race.compare import ConfigSummary
from opsd_sweep.race.policy import assess
from opsd_sweep.simulate import draw_correct_counts

TUNE_SEED, REPORT_SEED = 20_240, 90_210
SDS = (2.0, 3.0, 4.0)
K = 12
ANCHOR = Anchor("published anchor", "avg_at_n", 54.22, 1.48, 5)
POWER = 0.80

# True scores relative to the baseline (config 0). Six configs: one +3, two equal, two 8+ worse.
GRIDS = {
    "six": (0.0, 3.0, 0.0, 0.0, -8.0, -10.0),
    "six-equal": (0.0,) * 6,
    "eighteen": (0.0, 3.0, 0.0, 0.0, 0.0, 0.0, -1.0, -1.0, -2.0, -2.0, -3.0, -4.0, -6.0, -8.0, -8.0, -10.0,
                 -12.0, -15.0),
    "eighteen-equal": (0.0,) * 18,
}

# Settings shared by every candidate (the defaults of conf/hydra/sweeper/race.yaml); the tuned ones
# come from CANDIDATES, and max_seeds per SD from MAX_SEEDS (the smallest one reaching 80% power).
BASE = dict(min_seeds=3, alpha=0.05, anchor_alpha=0.01, target_half_width=1.0, budget_gpu_hours=None,
            confirm_seeds=3, first_seed=1, max_failures=2, seeds_per_round=1)
# futility_effect None = off. eliminate_alpha 0.1 left out to fit the 2-core time box: it was never chosen
# (more false claims at every stop_alpha) when it was a candidate without futility.
CANDIDATES = [dict(stop_alpha=s, eliminate_alpha=0.05, futility_effect=f)
              for s, f in itertools.product((0.005, 0.01, 0.02), (None, 1.5, 2.0))]
MAX_SEEDS = (8, 10, 12, 14, 16, 20, 24, 28, 32, 40, 48, 56, 64, 80)
SEED_POOL = MAX_SEEDS[-1] + BASE["confirm_seeds"] + 1  # seeds drawn per config: every sweep can ask for them
FALSE_LIMIT_TUNING = 0.04  # tuning keeps a margin under the 5% target


def noise_model(sd: float) -> SimulateConfig:
    conf = OmegaConf.merge(OmegaConf.structured(SimulateConfig), OmegaConf.load(CONF_DIR / "simulate/default.yaml"))
    return dataclasses.replace(OmegaConf.to_object(conf), train_seed_sd=sd)


def draw_sweep(grid: tuple, sd: float, seeds: int, rng: np.random.Generator, shift: float = 0.0) -> np.ndarray:
    """Per-problem scores (percent) [configs, seeds, problems] of every run a sweep could ask for."""
    sim = noise_model(sd)
    true = ANCHOR.mean + shift + np.repeat(np.asarray(grid)[:, None], seeds, axis=1)
    return draw_correct_counts(true, sim, K, rng) * (100.0 / K)


def labels(grid: tuple) -> tuple[str, ...]:
    return tuple(f"c{i}" for i in range(len(grid)))


# --- the two designs -----------------------------------------------------------------------------

@dataclass
class Outcome:
    claims: set  # configs declared better than the baseline
    runs: int
    anchor_above: bool = False  # the winner sits significantly above the anchor (reported, not a claim)


def race_sweep(data: np.ndarray, settings: RaceSettings, anchor: Anchor | None = None) -> Outcome:
    configs = labels(data[:, 0, 0])
    spec = RaceSpec(configs, configs[0], anchor, settings)

    def execute(requests):
        return [RunResult(q.config, q.seed, q.phase, "done", float(data[int(q.config[1:]), q.seed - 1].mean()),
                          1.0) for q in requests]

    finals = []
    _, results = run_race(spec, execute, emit=lambda r: finals.append(r) if r.get("phase") == "final" else None)
    return Outcome({r["config"] for r in finals if r["action"] == "better"}, len(results),
                   any(r.get("winner") and r.get("anchor") == "better" for r in finals))


def fixed_grid_claims(data: np.ndarray, seeds: int, settings: RaceSettings) -> set:
    configs = labels(data[:, 0, 0])
    spec = RaceSpec(configs, configs[0], None, settings)
    summaries = {c: ConfigSummary(c, data[i, :seeds].mean(axis=1)) for i, c in enumerate(configs)}
    rows = assess(summaries, spec, 0, "fixed")
    return {r["config"] for r in rows
            if r["p_baseline"] is not None and r["p_baseline"] <= settings.alpha and r["delta_baseline"] > 0}


def naive_race_sweep(data: np.ndarray, max_seeds: int, alpha: float = 0.05) -> Outcome:
    """The naive rule: 2-seed start, each config's own SD, Welch vs the anchor, no multiplicity control."""
    scores = data.mean(axis=2)
    live, n = list(range(scores.shape[0])), 2
    runs = len(live) * n
    while True:
        means = {c: scores[c, :n].mean() for c in live}
        best = max(live, key=means.get)
        vs_anchor = welch_vs_anchor(scores[best, :n], ANCHOR.mean, ANCHOR.sd, ANCHOR.n)
        if vs_anchor.delta > 0 and vs_anchor.p <= alpha:
            return Outcome({f"c{best}"}, runs)
        sd_best = scores[best, :n].std(ddof=1)
        for c in [c for c in live if c != best]:
            gap = welch_difference(means[c], scores[c, :n].var(ddof=1) / n, n - 1, means[best], sd_best**2 / n, n - 1)
            if gap.p <= alpha:
                live.remove(c)
        if n >= max_seeds:
            return Outcome(set(), runs)
        n += 1
        runs += len(live)


# --- measurements --------------------------------------------------------------------------------

def settings_of(candidate: dict, max_seeds: int) -> RaceSettings:
    return RaceSettings(**BASE, **candidate, max_seeds=max_seeds)


def race_stats(grid_name: str, sd: float, settings: RaceSettings, sweeps: int, seed: int, *, shift: float = 0.0,
               anchor: Anchor | None = None) -> dict:
    """Racing over `sweeps` simulated sweeps: power (claims == the truly better configs), false-claim rate
    (any other config claimed), mean runs, and how often the winner is labelled above the anchor.
    The same `seed` gives the same sweeps whatever the settings (common random numbers)."""
    grid = GRIDS[grid_name]
    rng = np.random.default_rng([seed, int(sd * 10), len(grid), int(shift * 10)])
    better = {f"c{i}" for i, d in enumerate(grid) if d > 0}
    hits = false = above = runs = 0
    for _ in tqdm(range(sweeps), desc=f"race {grid_name} sd={sd:g} max_seeds={settings.max_seeds}", leave=False):
        out = race_sweep(draw_sweep(grid, sd, SEED_POOL, rng, shift), settings, anchor)
        hits += bool(better) and out.claims == better
        false += bool(out.claims - better)
        above += out.anchor_above
        runs += out.runs
    return {"power": hits / sweeps, "false": false / sweeps, "runs": runs / sweeps, "anchor_above": above / sweeps}


def fixed_power(grid_name: str, sd: float, seeds: int, settings: RaceSettings, sweeps: int, seed: int) -> float:
    grid = GRIDS[grid_name]
    rng = np.random.default_rng([seed, int(sd * 10), len(grid)])
    better = {f"c{i}" for i, d in enumerate(grid) if d > 0}
    hits = sum(fixed_grid_claims(draw_sweep(grid, sd, seeds, rng), seeds, settings) == better for _ in range(sweeps))
    return hits / sweeps


def fixed_seeds_needed(grid_name: str, sd: float, settings: RaceSettings, sweeps: int, seed: int) -> tuple[int, float]:
    """Smallest R with power >= POWER (doubling, then bisection: power rises with R)."""
    power = {}

    def enough(r: int) -> bool:
        power[r] = fixed_power(grid_name, sd, r, settings, sweeps, seed)
        return power[r] >= POWER

    low, high = 2, 8
    while not enough(high):
        low, high = high, high * 2
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (low, mid) if enough(mid) else (mid, high)
    return high, power[high]


def smallest_max_seeds(grid_name: str, sd: float, candidate: dict, sweeps: int, seed: int) -> tuple[int, dict]:
    """The smallest max_seeds in MAX_SEEDS whose racing power is >= POWER, with its stats (bisection;
    the largest when none reaches it)."""
    measured = {}

    def enough(i: int) -> bool:
        measured[i] = race_stats(grid_name, sd, settings_of(candidate, MAX_SEEDS[i]), sweeps, seed)
        return measured[i]["power"] >= POWER

    low, high = -1, len(MAX_SEEDS) - 1  # invariant: MAX_SEEDS[high] is enough (or the largest); low is not
    if not enough(high):
        return MAX_SEEDS[high], measured[high]
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (low, mid) if enough(mid) else (mid, high)
    return MAX_SEEDS[high], measured[high]


@dataclass
class Tuned:
    candidate: dict
    max_seeds: dict  # sd -> max_seeds
    alt: dict  # sd -> race_stats on the six grid
    false: dict  # sd -> false-claim rate on six equal configs
    ratio: float  # mean over SDs of racing runs / fixed-grid runs


def tune(sweeps: int, fixed_runs: dict) -> tuple[Tuned, list[Tuned]]:
    """On TUNING scenarios only: per candidate and SD the smallest max_seeds with 80% power, and the
    false-claim rate on six equal configs at that max_seeds (twice the sweeps: it is the tighter number).
    Pick the lowest runs ratio among candidates with >= 80% power (some max_seeds reaches it: futility
    can cap the power below it) and false claims <= FALSE_LIMIT_TUNING at every SD; when none qualifies,
    the candidate with the lowest worst-SD false-claim rate."""
    table = []
    for candidate in tqdm(CANDIDATES, desc="tuning"):
        max_seeds, alt, false = {}, {}, {}
        for sd in SDS:
            max_seeds[sd], alt[sd] = smallest_max_seeds("six", sd, candidate, sweeps, TUNE_SEED)
            false[sd] = race_stats("six-equal", sd, settings_of(candidate, max_seeds[sd]), 2 * sweeps,
                                   TUNE_SEED)["false"]
        ratio = float(np.mean([alt[sd]["runs"] / fixed_runs[sd] for sd in SDS]))
        table.append(Tuned(candidate, max_seeds, alt, false, ratio))
        tqdm.write(f"  {candidate}: max_seeds {list(max_seeds.values())}, power "
                   f"{[round(alt[sd]['power'], 3) for sd in SDS]}, false {[round(false[sd], 3) for sd in SDS]}, "
                   f"runs/fixed {ratio:.3f}")
    eligible = [t for t in table if max(t.false.values()) <= FALSE_LIMIT_TUNING
                and min(t.alt[sd]["power"] for sd in SDS) >= POWER]
    if not eligible:
        return min(table, key=lambda t: (max(t.false.values()), t.ratio)), table
    return min(eligible, key=lambda t: t.ratio), table


# --- report --------------------------------------------------------------------------------------

def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="a smoke run with few sweeps (noisy figures)")
    args = parser.parse_args(argv)
    report_n, tune_n, fixed_n = (40, 30, 60) if args.quick else (1000, 300, 1000)
    started = time.time()
    reference = settings_of(CANDIDATES[0], MAX_SEEDS[-1])  # the fixed grid uses only alpha of these

    print(f"## Fixed grid: seeds per config for {POWER:.0%} power ({fixed_n} sweeps per R, REPORT scenarios)")
    fixed, fixed18 = {}, {}
    for sd in SDS:
        seeds, power = fixed_seeds_needed("six", sd, reference, fixed_n, REPORT_SEED)
        seeds18, power18 = fixed_seeds_needed("eighteen", sd, reference, fixed_n // 4, REPORT_SEED)
        fixed[sd], fixed18[sd] = 6 * seeds, 18 * seeds18
        print(f"  sd={sd:g}: 6 configs R*={seeds} -> {6 * seeds} runs (power {power:.3f}); "
              f"18 configs R*={seeds18} -> {18 * seeds18} runs (power {power18:.3f})", flush=True)

    print(f"\n## Tuning on TUNING scenarios ({tune_n} sweeps per point)", flush=True)
    chosen, _ = tune(tune_n, fixed)
    print(f"  chosen: {chosen.candidate}, max_seeds by SD {chosen.max_seeds}", flush=True)

    print(f"\n## Report on REPORT scenarios ({report_n} sweeps each; 18-config grids {report_n // 2})")
    print("| training-seed SD | max_seeds | fixed grid runs | racing runs | ratio | racing power | "
          "false 'better', 6 equal | false, 18 equal | runs, 6 equal |")
    print("|---|---|---|---|---|---|---|---|---|")
    for sd in SDS:
        settings = settings_of(chosen.candidate, chosen.max_seeds[sd])
        alt = race_stats("six", sd, settings, report_n, REPORT_SEED)
        null6 = race_stats("six-equal", sd, settings, report_n, REPORT_SEED)
        null18 = race_stats("eighteen-equal", sd, settings, report_n // 2, REPORT_SEED)
        print(f"| {sd:g} | {settings.max_seeds} | {fixed[sd]} | {alt['runs']:.1f} | {alt['runs'] / fixed[sd]:.3f} | "
              f"{alt['power']:.3f} | {null6['false']:.3f} | {null18['false']:.3f} | {null6['runs']:.0f} |", flush=True)

    print("\n## 18-config grid (one +3, four equal to the baseline, twelve 1-15 points worse)")
    print("| training-seed SD | fixed grid runs | racing runs | ratio | racing power |")
    print("|---|---|---|---|---|")
    for sd in SDS:
        alt = race_stats("eighteen", sd, settings_of(chosen.candidate, chosen.max_seeds[sd]), report_n // 2,
                         REPORT_SEED)
        print(f"| {sd:g} | {fixed18[sd]} | {alt['runs']:.1f} | {alt['runs'] / fixed18[sd]:.3f} | {alt['power']:.3f} |",
              flush=True)

    print("\n## Baseline 1 point above the published anchor (6 equal configs); the naive rule for contrast")
    print("| training-seed SD | ours: false 'better' | ours: winner labelled above the anchor (not a claim) | "
          "naive: false 'better', anchor exact | naive, anchor 1 point off |")
    print("|---|---|---|---|---|")
    for sd in SDS:
        shifted = race_stats("six-equal", sd, settings_of(chosen.candidate, chosen.max_seeds[sd]), report_n,
                             REPORT_SEED, shift=1.0, anchor=ANCHOR)
        naive = [naive_false_rate(sd, shift, report_n) for shift in (0.0, 1.0)]
        print(f"| {sd:g} | {shifted['false']:.3f} | {shifted['anchor_above']:.3f} | {naive[0]:.3f} | {naive[1]:.3f} |",
              flush=True)
    print(f"\n({time.time() - started:.0f} s)")


def naive_false_rate(sd: float, shift: float, sweeps: int, max_seeds: int = 20) -> float:
    rng = np.random.default_rng([REPORT_SEED, int(sd * 10), 99, int(shift * 10)])
    return float(np.mean([bool(naive_race_sweep(draw_sweep(GRIDS["six-equal"], sd, max_seeds, rng, shift),
                                                max_seeds).claims) for _ in range(sweeps)]))


if __name__ == "__main__":
    main()
