"""The simulated sweeps tests/summarize/test_calibration.py puts bands on, and their figures printed.

    .venv/bin/python -m benchmarks.calibration_figures   # ~15 s
"""

from __future__ import annotations

import argparse
import math

import numpy as np

from opsd_sweep.inference import stats
from opsd_sweep.inference.arms import Arm, compare_arms, run_sd
from opsd_sweep.summarize.calibration import NoiseModel, benchmark, run_scores

# The setting: 30 problems x 12 samples, difficulty SD 1.5 logits, run-to-run SD ~3 points.
MODEL = NoiseModel(n_problems=30, n_samples=12, difficulty_sd=1.5, seed_sd=0.1, interaction_sd=0.0)
SWEEPS = 2000  # power SE 0.9%, coverage SE 0.5%: test_calibration.py's bands are >= 4 SE wide


def verdicts_vs_baseline(scores: np.ndarray, pool_sd: bool = False) -> list[list]:
    """Per sweep and config (scores: sweeps x configs x runs; config 0 = baseline): the summary's
    comparison with its default SD rule (each arm's own sample SD, Welch) or --pool-sd."""
    out = []
    for sweep in scores:
        pool = stats.pooled_sd(list(sweep))
        arms = [Arm(float(s.mean()), s.size, run_sd(s.size, float(s.std(ddof=1)), pool, pool_sd, None)) for s in sweep]
        out.append([compare_arms(arm, arms[0], 0.95) for arm in arms[1:]])
    return out


def power_at_advised_seeds(pool_sd: bool) -> dict:
    """Baseline vs a true +3 config at the seeds seeds_needed advises at the true SD."""
    rng = np.random.default_rng(11)
    bench = benchmark(MODEL, [0.0, 3.0], 50.0, rng)
    sd = float(bench.run_sd().mean())
    seeds = stats.seeds_needed(3.0, sd, 0.05, 0.8)  # what the report advises at this SD
    comparisons = [row[0] for row in verdicts_vs_baseline(run_scores(bench.draw(SWEEPS, seeds, rng), 12), pool_sd)]
    truth = float(np.diff(bench.true_scores())[0])
    return {"sd": sd, "seeds": seeds, "detected": np.mean([c.p <= 0.05 and c.delta > 0 for c in comparisons]),
            "covered": np.mean([c.low <= truth <= c.high for c in comparisons])}


def interaction_coverage() -> float:
    """Coverage of delta on the fixed problems with a config x problem interaction of SD 0.6 logits."""
    rng = np.random.default_rng(12)
    model = NoiseModel(30, 12, 1.5, 0.1, interaction_sd=0.6)
    covered = []
    for effects in ([0.0, 0.0, 2.0, -3.0], [0.0, 1.0, 4.0, 0.0]):
        bench = benchmark(model, effects, 45.0, rng)
        truth = bench.true_scores()[1:] - bench.true_scores()[0]
        for row in verdicts_vs_baseline(run_scores(bench.draw(SWEEPS // 2, 6, rng), 12)):
            covered += [c.low <= t <= c.high for c, t in zip(row, truth)]
    return float(np.mean(covered))


def five_seed_advice() -> dict:
    """How often 5 seeds x 6 configs make the advice say 5 seeds give 80% power for +3: with the +3
    config's own SD (the old rule) and with the pooled SD; and the true power at 5 seeds."""
    rng = np.random.default_rng(13)
    bench = benchmark(MODEL, [0.0, 3.0, 0.0, 0.0, -3.0, 1.0], 50.0, rng)
    scores = run_scores(bench.draw(SWEEPS, 5, rng), 12)
    enough_at = 3.0 / stats.min_detectable_effect(1.0, 5)  # seeds_needed(3, sd) <= 5 exactly when sd <= this
    pooled = np.array([stats.pooled_sd(list(sweep))[0] for sweep in scores])
    own = scores[:, 1].std(axis=1, ddof=1)
    return {"enough_at": enough_at, "own": np.mean(own <= enough_at), "pooled": np.mean(pooled <= enough_at),
            "true_power": stats.power(3.0, float(bench.run_sd()[1]), 5, 0.05)}


def noise_split_at_5_seeds() -> dict:
    """The training-seed split of 5-run configs whose true training-seed SD is ~2 points."""
    rng = np.random.default_rng(14)
    bench = benchmark(NoiseModel(30, 12, 1.5, 0.115, 0.0), [0.0], 50.0, rng)
    seed_var = float(bench.variances()[0][0])
    counts = bench.draw(SWEEPS, 5, rng)[:, 0]
    eval_var = 1e4 * stats.eval_sampling_variance(counts / 12, 12)
    splits = [stats.variance_decomposition(s, e) for s, e in zip(run_scores(counts, 12), eval_var)]
    return {"true_sd": math.sqrt(seed_var), "zero": np.mean([split.train_var == 0 for split in splits]),
            "below": np.mean([math.isnan(split.train_var) for split in splits]),
            "covered": np.mean([split.train_var_low <= seed_var <= split.train_var_high for split in splits])}


def main() -> None:
    for pool_sd in (False, True):
        f = power_at_advised_seeds(pool_sd)
        print(f"pool_sd={pool_sd}: true SD {f['sd']:.2f}, advised {f['seeds']} seeds for +3 -> detected "
              f"{f['detected']:.3f} (promise 0.80 +- 0.04), interval of delta covers {f['covered']:.3f}")
    print(f"interaction SD 0.6 logits, 6 seeds: interval of delta covers {interaction_coverage():.3f}")
    f = five_seed_advice()
    print(f"6 configs x 5 seeds: advice says 5 seeds give 80% for +3 in {f['own']:.3f} of sweeps with the config's "
          f"own SD, {f['pooled']:.4f} with the pooled SD; true power at 5 seeds {f['true_power']:.3f}")
    f = noise_split_at_5_seeds()
    print(f"noise split, 5 seeds, true training-seed SD {f['true_sd']:.2f}: exact 0 in {f['zero']:.3f}, below eval "
          f"noise in {f['below']:.3f}, interval covers {f['covered']:.3f}")


if __name__ == "__main__":
    # no options: the parser only answers --help (and refuses a stray argument) before minutes of sweeps
    argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter).parse_args()
    main()
