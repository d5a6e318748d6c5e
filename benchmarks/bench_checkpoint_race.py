"""The checkpoint race (eval.checkpoints=race) against evaluating every checkpoint fully (=all): samples,
accuracy of the chosen step, and the honest score (CPU, simulation).

Noise model: opsd_sweep.summarize.calibration.CheckpointModel, as benchmarks/bench_checkpoint_choice.py,
with a true score curve over the steps (PROFILES: "gentle" rises 5 points to a peak at step 7 and falls
off by 3.5; "collapse" peaks at step 6 and then falls 8 / 17 / 27 points, as OPSD runs that collapse do;
below 0 a few problems clip, which lowers only those never-chosen steps' truth), 3 runs x
10 checkpoints, 30 problems x 12 samples (AIME24's avg@12), training-seed SD 2 points per run, run x step
training noise 1.1 / 2.8 points. Every design sees the same draws (sample j of a checkpoint is the same
Bernoulli draw whichever design asks for it).

- all@K: every checkpoint gets K samples per problem (K = 12 is eval.checkpoints=all; 6 and 3 cost what
  the race costs, to see whether the race beats simply drawing fewer samples);
- race: evaluate.race_rule.race per run (the code the evaluator runs), the final checkpoint then topped
  up to 12 (as the cycle does); the step is chosen on all samples, the honest score on the first round's.
- race, scored on all samples: the same race, the held-out run scored on all the samples it drew: the
  bias of scoring a race's adaptive sample counts (why the summary does not).

Per design: samples drawn per run (the GPU-minutes proxy), how often the step with the top mean over the
3 runs (the pick) is the truly best step, the mean true-score regret of the pick (points below the best
step), and the cross-run ("best (held out)") score: bias and 95% coverage against the rule's expected
score (the mean true score at the steps it chooses), and the mean half-width of its interval.

    python -m benchmarks.bench_checkpoint_race                    # 2000 replicates per level, gentle
    python -m benchmarks.bench_checkpoint_race --profile collapse
    python -m benchmarks.bench_checkpoint_race --replicates 300   # quicker
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass

import numpy as np

from opsd_sweep.summarize.calibration import CheckpointModel
from opsd_sweep.summarize.checkpoints import cross_run_choice, crossover_interval
from opsd_sweep.evaluate.race_rule import race, schedule

PROFILES = {"gentle": (-5.0, -3.5, -2.0, -1.0, 0.0, 1.0, 2.0, 1.0, 0.0, -1.5),  # points per step
            "collapse": (-4.0, -2.5, -1.0, 0.0, 1.0, 2.0, 1.0, -6.0, -15.0, -25.0)}
N_SAMPLES = 12
STEP_SDS = (1.1, 2.8)
LEVEL = 0.95
SEED = 20_261_202
CHUNK = 250  # replicates drawn at once (memory)


@dataclass(frozen=True)
class Design:
    name: str
    samples: int  # all@K: K; race: n_samples
    first: int | None = None  # race: first_samples (None: all@K)
    per_round: int = 0
    alpha: float = 0.05
    score_all_drawn: bool = False


DESIGNS = (Design("all@12", 12), Design("all@6", 6), Design("all@3", 3),
           Design("race 3+3, alpha 0.05 (default)", N_SAMPLES, 3, 3, 0.05),
           Design("race 3+3, alpha 0.2", N_SAMPLES, 3, 3, 0.2),
           Design("race 2+2, alpha 0.05", N_SAMPLES, 2, 2, 0.05),
           Design("race 3+3, alpha 0.05, scored on all samples", N_SAMPLES, 3, 3, 0.05, score_all_drawn=True))


def race_counts(cum: np.ndarray, design: Design) -> tuple[np.ndarray, np.ndarray]:
    """One run's race. cum: (steps, n_samples, problems) cumulative correct counts. Returns the samples
    per problem each step ends with (the final one topped up to n) and each step's score over them."""
    steps = cum.shape[0]
    outcome = race(steps, schedule(design.first, design.per_round, design.samples), design.alpha,
                   lambda c, m: cum[c, m - 1])
    samples = np.array(outcome.samples)
    samples[-1] = design.samples
    return samples, 100 * cum[np.arange(steps), samples - 1].mean(-1) / samples


def evaluate_design(cum: np.ndarray, design: Design) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """cum: (replicates, runs, steps, n_samples, problems). Returns (choose, scores, samples): choose and
    scores (replicates, runs, steps) in points, samples drawn (replicates,) per run."""
    if design.first is None:
        scores = 100 * cum[..., design.samples - 1, :].mean(-1) / design.samples
        return scores, scores, np.full(len(cum), design.samples * cum.shape[2] * 1.0)
    choose = np.empty(cum.shape[:3])
    drawn = np.empty(cum.shape[:2])
    for rep in range(cum.shape[0]):
        for run in range(cum.shape[1]):
            got, choose[rep, run] = race_counts(cum[rep, run], design)
            drawn[rep, run] = got.sum()
    first = 100 * cum[..., design.first - 1, :].mean(-1) / design.first
    return choose, choose if design.score_all_drawn else first, drawn.mean(axis=1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--replicates", type=int, default=2000)
    parser.add_argument("--profile", choices=sorted(PROFILES), default="gentle")
    args = parser.parse_args()
    replicates, profile_points = args.replicates, PROFILES[args.profile]
    rng = np.random.default_rng(SEED)
    started = time.perf_counter()
    profile = np.array(profile_points)
    best = int(profile.argmax())
    print(f"{replicates} replicates per level; 3 runs x {len(profile_points)} steps, 30 problems x {N_SAMPLES} samples, "
          f"training-seed SD 2 points; true profile {args.profile} {list(profile_points)} (best: step {best + 1})\n")
    for step_sd in STEP_SDS:
        model = CheckpointModel(runs=3, steps=len(profile_points), n_problems=30, n_samples=N_SAMPLES, run_sd=2.0,
                                step_sd=step_sd, profile=profile_points)
        out = {d.name: {"samples": [], "hit": [], "regret": [], "est": [], "chosen": [], "low": [], "high": [],
                        "truth": []} for d in DESIGNS}
        for start in range(0, replicates, CHUNK):
            rates, truth = model.rates(min(CHUNK, replicates - start), rng)
            draws = rng.random((*rates.shape[:3], N_SAMPLES, rates.shape[3])) < rates[..., None, :]
            cum = draws.cumsum(axis=3)
            for design in DESIGNS:
                choose, scores, drawn = evaluate_design(cum, design)
                pick = choose.mean(axis=1).argmax(axis=-1)
                o = out[design.name]
                o["samples"].extend(drawn * 30)
                o["hit"].extend(pick == best)
                o["regret"].extend(profile[best] - profile[pick])
                o["truth"].extend(truth)
                for s, c in zip(scores, choose):
                    ci = crossover_interval(s, LEVEL, c)
                    o["est"].append(ci.estimate)
                    o["low"].append(ci.low)
                    o["high"].append(ci.high)
                    o["chosen"].append(profile[cross_run_choice(s, c)[1]].mean())
        full = np.mean(out["all@12"]["samples"])
        print(f"run x step SD {step_sd} points\n")
        print("| design | samples per run | vs all@12 | picks the best step | regret (points) | held-out score: "
              "bias | coverage | CI half-width |")
        print("|---|---|---|---|---|---|---|---|")
        for design in DESIGNS:
            o = {k: np.array(v, dtype=float) for k, v in out[design.name].items()}
            target = o["truth"] + o["chosen"].mean()  # the rule's expected score on these problems
            covered = (o["low"] <= target) & (target <= o["high"])
            print(f"| {design.name} | {o['samples'].mean():.0f} | {o['samples'].mean() / full:.2f} | "
                  f"{o['hit'].mean():.3f} | {o['regret'].mean():.2f} | {np.mean(o['est'] - target):+.2f} | "
                  f"{100 * covered.mean():.1f}% | {np.mean(o['high'] - o['low']) / 2:.2f} |")
        print()
    print(f"{time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
