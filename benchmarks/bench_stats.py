"""What the summary's statistics promise, checked on hundreds of simulated sweeps (CPU).

Noise model (opsd_sweep.summarize.calibration): 30 problems x 12 samples, problem difficulty SD 1.5
logits, training-seed SD 0.1 logits (run-to-run SD ~3 points, eval-sampling SD ~2.3), fixed problems.
Every sweep goes through the summary's own table (config_stats.analyse, defaults of conf/summary.yaml,
in-sweep baseline c0, target effect +3, no anchor). Grid SIX: baseline, one +3 config, two equal, two
8-10 points worse (as in bench_race.py).

- seeds: at R seeds per config, the Holm verdicts (power for +3, false 'better'), the coverage of the
  95% intervals of delta, and how often the table says R seeds already give 80% power for +3, with its
  pooled SD and (the old rule) with the +3 config's own SD;
- pilot: 5 seeds of the grid, then a fresh 2-arm sweep at the seeds the pilot's table advises (one
  comparison): the power the report's advice delivers;
- interaction: a config x problem interaction (SD 0.6 logits): coverage of delta on these problems (the
  target) and of delta over problems drawn anew (problems as a sample, not the target);
- noise split at 5 seeds: exact zeros, 'below eval noise', coverage of the training-seed interval.

    python -m benchmarks.bench_stats            # full run (500 sweeps per figure)
    python -m benchmarks.bench_stats --quick    # smoke run (40 sweeps; figures are noisy)
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np
import pandas as pd

from opsd_sweep.summarize.calibration import Benchmark, NoiseModel, benchmark, run_scores
from opsd_sweep.summarize.config_stats import analyse
from opsd_sweep.summarize.settings import load_settings
from opsd_sweep.inference import stats

MODEL = NoiseModel(n_problems=30, n_samples=12, difficulty_sd=1.5, seed_sd=0.1, interaction_sd=0.0)
SIX = (0.0, 3.0, 0.0, 0.0, -8.0, -10.0)
EFFECT = 3.0
SETTINGS = load_settings({"baseline": "c0", "anchor": "none", "plots": False, "target_effect": EFFECT})
SEED = 20_261_201


def runs_table(counts: np.ndarray) -> pd.DataFrame:
    """The runs table of one sweep (counts: configs x runs x problems), as collect would write it."""
    configs, runs, _ = counts.shape
    scores = run_scores(counts, MODEL.n_samples)
    eval_var = 1e4 * stats.eval_sampling_variance(counts / MODEL.n_samples, MODEL.n_samples)
    return pd.DataFrame({"label": np.repeat([f"c{i}" for i in range(configs)], runs), "avg_at_n": scores.ravel(),
                         "eval_var": eval_var.ravel(), "cfg.seed": np.tile(np.arange(runs), configs), "state": "done",
                         "external": False, "simulated": False, "n_samples": MODEL.n_samples,
                         "counts": True})  # every simulated run is done on today's inputs: it counts


def tables(bench: Benchmark, sweeps: int, runs: int, rng: np.random.Generator) -> list[pd.DataFrame]:
    return [analyse(runs_table(c), SETTINGS, None).table.set_index("label") for c in bench.draw(sweeps, runs, rng)]


def covered(table: pd.DataFrame, truth: np.ndarray) -> list[bool]:
    """Per non-baseline config: does its interval of delta hold the true delta?"""
    return [table.loc[f"c{i}", "baseline_low"] <= truth[i] <= table.loc[f"c{i}", "baseline_high"]
            for i in range(1, truth.size)]


def seeds_study(sweeps: int, rng: np.random.Generator) -> None:
    bench = benchmark(MODEL, SIX, 50.0, rng)
    sd = float(bench.run_sd().mean())
    truth = bench.true_scores() - bench.true_scores()[0]
    single = stats.seeds_needed(EFFECT, sd, 0.05, 0.8)
    bonferroni = stats.seeds_needed(EFFECT, sd, 0.05 / 5, 0.8)
    print(f"true run-to-run SD {sd:.2f} points; at it the report advises {single} seeds (one comparison), "
          f"{bonferroni} (alpha / 5, Bonferroni for Holm over 5)")
    print(f"{'R':>4} {'power +3 (Holm)':>16} {'false better':>13} {'CI coverage':>12} "
          f"{'says R enough: pooled SD':>25} {'own SD (old)':>13}")
    for runs in sorted({5, 10, single, bonferroni, 26}):
        result = tables(bench, sweeps, runs, rng)
        power = np.mean([t.loc["c1", "verdict"] == "better" for t in result])
        false = np.mean([any(t.loc[f"c{i}", "verdict"] == "better" for i in (2, 3, 4, 5)) for t in result])
        coverage = np.mean([c for t in result for c in covered(t, truth)])
        says = np.mean([t.loc["c1", "seeds_needed_bonferroni"] <= runs for t in result])
        own = np.mean([(stats.seeds_needed(EFFECT, t.loc["c1", "sd"], 0.05 / 5, 0.8) or math.inf) <= runs
                       for t in result])
        print(f"{runs:>4} {power:>16.3f} {false:>13.3f} {coverage:>12.3f} {says:>25.3f} {own:>13.3f}")


def pilot_study(sweeps: int, rng: np.random.Generator) -> None:
    bench = benchmark(MODEL, SIX, 50.0, rng)
    pair = Benchmark(MODEL, bench.difficulty, bench.interaction[:2], bench.mu[:2])
    advised = np.array([int(t.loc["c1", "seeds_needed"]) for t in tables(bench, sweeps, 5, rng)])
    detected = [tables(pair, 1, r, rng)[0].loc["c1", "verdict"] == "better" for r in advised]
    print(f"pilot of 5 seeds x 6 configs -> advised seeds for +{EFFECT:g} (one comparison): median "
          f"{int(np.median(advised))}, 10-90% {int(np.quantile(advised, 0.1))}-{int(np.quantile(advised, 0.9))}; "
          f"a fresh baseline + (+3) sweep at those seeds detects it in {np.mean(detected):.3f} of {sweeps} sweeps "
          f"(promised 0.80)")


def interaction_study(sweeps: int, rng: np.random.Generator) -> None:
    model = NoiseModel(30, 12, 1.5, 0.1, interaction_sd=0.6)
    effects = (0.0, 2.0, 0.0, -3.0, 1.0, 0.0)
    fixed, population = [], []
    anchor = benchmark(model, effects, 50.0, rng)  # config logits set on one draw of problems
    redraws = [Benchmark(model, rng.normal(0, model.difficulty_sd, 30),
                         rng.normal(0, model.interaction_sd, (len(effects), 30)), anchor.mu) for _ in range(2000)]
    population_truth = np.mean([b.true_scores() - b.true_scores()[0] for b in redraws], axis=0)
    for bench in redraws[:sweeps]:  # each sweep on its own problems: one benchmark among many
        table = tables(bench, 1, 10, rng)[0]
        fixed += covered(table, bench.true_scores() - bench.true_scores()[0])
        population += covered(table, population_truth)
    print(f"interaction SD 0.6 logits, 10 seeds x 6 configs, {sweeps} sweeps on fresh problems: the intervals of "
          f"delta cover the effect on the sweep's problems (the target) {np.mean(fixed):.3f}, the effect over "
          f"problems drawn anew {np.mean(population):.3f}")


def noise_split_study(sweeps: int, rng: np.random.Generator) -> None:
    bench = benchmark(NoiseModel(30, 12, 1.5, 0.115, 0.0), SIX, 50.0, rng)
    seed_var = bench.variances()[0]
    result = tables(bench, sweeps, 5, rng)
    rows = [(t.loc[f"c{i}"], seed_var[i]) for t in result for i in range(len(SIX))]
    zero = np.mean([row["train_sd"] == 0 for row, _ in rows])
    below = np.mean([math.isnan(row["train_sd"]) for row, _ in rows])
    cover = np.mean([row["train_sd_low"] ** 2 <= v <= row["train_sd_high"] ** 2 for row, v in rows])
    print(f"noise split at 5 seeds (true training-seed SD {np.sqrt(seed_var).min():.2f}-{np.sqrt(seed_var).max():.2f}):"
          f" exact 0 in {zero:.3f} of configs, 'below eval noise' in {below:.3f}, the 95% interval covers "
          f"{cover:.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="40 sweeps per figure instead of 500")
    sweeps = 40 if parser.parse_args().quick else 500
    rng = np.random.default_rng(SEED)
    for study in (seeds_study, pilot_study, interaction_study, noise_split_study):
        started = time.monotonic()
        study(sweeps, rng)
        print(f"  ({study.__name__}: {time.monotonic() - started:.0f} s)\n", flush=True)


if __name__ == "__main__":
    main()
