"""Is the best checkpoint's score honest? Bias and 95% coverage of two ways to pick and score it (CPU).

Noise model (opsd_sweep.summarize.calibration.CheckpointModel): one config, 3 runs x 10 checkpoints with
the same true score at every step, 30 problems x 16 samples, training-seed SD 2 points per run, and run x
step training noise of 0 / 1.1 / 2.8 points. Any score above the truth is selection bias.

- split half (the old rule): the step with the top mean over the even samples of every run, scored by
  the t-interval over runs of the odd samples at that step;
- cross-run (analysis.checkpoints, what summarise_checkpoints reports): each run scored at the step with
  the top mean over the other runs; crossover_interval (the runs' scores are correlated through the
  choice: the interval adds that covariance). "plain t" shows the same scores with a plain t-interval.

    python -m benchmarks.bench_checkpoint_choice                    # 4000 replicates per level
    python -m benchmarks.bench_checkpoint_choice --replicates 400   # quicker, coverage SE ~1.1%
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from opsd_sweep.summarize.calibration import CheckpointModel
from opsd_sweep.summarize.checkpoints import cross_run_choice, crossover_interval
from opsd_sweep.inference import stats

STEP_SDS = (0.0, 1.1, 2.8)
LEVEL = 0.95
SEED = 20_261_201


def split_half(even: np.ndarray, odd: np.ndarray, n_samples: int) -> np.ndarray:
    """Per replicate, the odd-sample scores (replicates, runs) of the step chosen on the even samples."""
    half = n_samples // 2
    chosen = (100 * even.mean(-1) / half).mean(axis=1).argmax(axis=-1)  # (replicates,)
    odd_scores = 100 * odd.mean(-1) / half  # (replicates, runs, steps)
    return np.take_along_axis(odd_scores, chosen[:, None, None], axis=-1)[..., 0]


def bias_and_coverage(intervals: list[stats.Interval], truth: np.ndarray) -> tuple[float, float]:
    """Mean error of the estimates and share of intervals holding the truth (one per replicate)."""
    bias = np.mean([ci.estimate for ci in intervals] - truth)
    coverage = np.mean([ci.low <= t <= ci.high for ci, t in zip(intervals, truth)])
    return float(bias), float(coverage)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--replicates", type=int, default=4000)
    replicates = parser.parse_args().replicates
    rng = np.random.default_rng(SEED)
    started = time.perf_counter()
    coverage_se = (LEVEL * (1 - LEVEL) / replicates) ** 0.5
    print(f"{replicates} replicates per level (coverage SE {100 * coverage_se:.1f}%); 3 runs x 10 steps, "
          "30 problems x 16 samples, training-seed SD 2 points, same true score at every step\n")
    print("| run x step SD | split half: bias | split half: coverage | cross-run: bias | cross-run: coverage "
          "| cross-run, plain t: coverage |")
    print("|---|---|---|---|---|---|")
    for step_sd in STEP_SDS:
        model = CheckpointModel(runs=3, steps=10, n_problems=30, n_samples=16, run_sd=2.0, step_sd=step_sd)
        even, odd, truth = model.draw(replicates, rng)
        old = bias_and_coverage([stats.t_interval(v, LEVEL) for v in split_half(even, odd, model.n_samples)], truth)
        scores = 100 * (even + odd).mean(-1) / model.n_samples
        new = bias_and_coverage([crossover_interval(s, LEVEL) for s in scores], truth)
        plain = bias_and_coverage([stats.t_interval(v, LEVEL) for v in cross_run_choice(scores)[0]], truth)
        print(f"| {step_sd:.1f} | {old[0]:+.2f} | {100 * old[1]:.1f}% | {new[0]:+.2f} | {100 * new[1]:.1f}% "
              f"| {100 * plain[1]:.1f}% |")
    print(f"\n{time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
