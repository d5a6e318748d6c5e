"""Statistical validity of issue 40's estimators on the project's simulator: Delta CI coverage (target 93-97%),
|bias| <= 0.2 points and family-wise false "better" <= 5% on all-equal grids, for K auto, the allocation and
pairing, each alone and together.

World: opsd_sweep.costs.decision_model (problems at 0 and 1, lengths tied to correctness, run-to-run SD 3 at K = 12).
Each sweep runs SEEDS seeds of six configs the way a race does (3 seeds of every config in one batch, then one
seed of every config a batch, each batch planned from the runs before it: opsd_sweep.costs.decision_designs.grid_runs).
- Delta: every config minus the baseline on the "six" grid (true Delta 3, 0, 0, -8, -10 points): unpaired as the
  race and summary compare (run scores, the SD pooled across the six configs, t with its df), paired as the
  race's and the summary's pairing: seed (inference.pairing.paired_by_seed: differences by seed, n - 1 df);
  95% intervals. Coverage and bias pool
  the five comparisons.
- FW: the "six-equal" grid, any config declared better (Holm over the five at 0.05, Delta > 0).

    python -m benchmarks.decision_validity            # full run (~10 min on one core)
    python -m benchmarks.decision_validity --quick    # smoke run
"""

from __future__ import annotations

import argparse
import math
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
from tqdm import tqdm

from benchmarks.bench_race import GRIDS
from opsd_sweep.costs.decision_designs import BASELINE, SamplePolicy, grid_runs
from opsd_sweep.costs.decision_model import Sweep, default_world
from benchmarks.records import record_head, write_record
from opsd_sweep.inference.pairing import paired_by_seed
from opsd_sweep.inference.stats import holm
from opsd_sweep.race.compare import ConfigSummary, Pooled, compare

SEED = 40_403
SEEDS = 10  # seeds per config
LEVEL, ALPHA = 0.95, 0.05
COVERAGE_BAND, BIAS_LIMIT, FW_LIMIT = (0.93, 0.97), 0.2, 0.05


@dataclass(frozen=True)
class Estimator:
    policy: SamplePolicy
    paired: bool = False
    rho: float = 0.0  # the simulated seed correlation


K12, AUTO = SamplePolicy(k=12), SamplePolicy(k=None)
ALLOC12, AUTO_ALLOC = SamplePolicy(k=12, allocate=True), SamplePolicy(k=None, allocate=True)
ESTIMATORS = {
    "k12 (reference)": Estimator(K12),
    "k_auto": Estimator(AUTO),
    "allocation": Estimator(ALLOC12),
    "paired, rho 0": Estimator(K12, True, 0.0),
    "paired, rho 0.5": Estimator(K12, True, 0.5),
    "k_auto + allocation": Estimator(AUTO_ALLOC),
    "k_auto + allocation + paired, rho 0": Estimator(AUTO_ALLOC, True, 0.0),
    "k_auto + allocation + paired, rho 0.5": Estimator(AUTO_ALLOC, True, 0.5),
}


def deltas(scores: dict[int, dict[int, float]], paired: bool) -> dict[int, object]:
    """config -> Comparison (config - baseline) at LEVEL."""
    if paired:
        return {c: paired_by_seed(by_seed, scores[BASELINE], LEVEL).comparison
                for c, by_seed in scores.items() if c != BASELINE}
    summaries = {c: ConfigSummary(str(c), np.array(list(v.values()))) for c, v in scores.items()}
    pooled = Pooled.of(list(summaries.values()))
    return {c: compare(summ, summaries[BASELINE], pooled, LEVEL) for c, summ in summaries.items() if c != BASELINE}


def rate_se(rate: float, n: int) -> float:
    return math.sqrt(max(rate * (1 - rate), 1 / n) / n)


def measure(estimator: Estimator, n_sweeps: int, seeds: int) -> dict:
    world = default_world()
    grid = np.asarray(GRIDS["six"])
    errors, covered, fw, ks = [], [], [], []
    for i in range(n_sweeps):
        planner, scores = grid_runs(Sweep(world, GRIDS["six"], [SEED, 0, i], estimator.rho), estimator.policy, seeds)
        ks += planner.k_used
        for c, cmp in deltas(scores, estimator.paired).items():
            errors.append(cmp.delta - grid[c])
            covered.append(cmp.low <= grid[c] <= cmp.high)
        _, null = grid_runs(Sweep(world, GRIDS["six-equal"], [SEED, 1, i], estimator.rho), estimator.policy, seeds)
        comparisons = deltas(null, estimator.paired)
        adjusted = holm([cmp.p for cmp in comparisons.values()])
        fw.append(any(cmp.delta > 0 and p <= ALPHA for cmp, p in zip(comparisons.values(), adjusted)))
    errors = np.array(errors)
    coverage, fw_rate = float(np.mean(covered)), float(np.mean(fw))
    # comparisons of one sweep share the baseline: the SE of coverage and bias is taken over sweeps
    per_sweep = np.array(covered, float).reshape(n_sweeps, -1).mean(1)
    bias_by_sweep = errors.reshape(n_sweeps, -1).mean(1)
    row = {"coverage": round(coverage, 4), "coverage_se": round(float(per_sweep.std(ddof=1) / math.sqrt(n_sweeps)), 4),
           "bias": round(float(errors.mean()), 3),
           "bias_se": round(float(bias_by_sweep.std(ddof=1) / math.sqrt(n_sweeps)), 3),
           "fw_false_better": round(fw_rate, 4), "fw_se": round(rate_se(fw_rate, n_sweeps), 4),
           "mean_k": round(float(np.mean(ks)), 2), "seeds_per_config": seeds, "sweeps": n_sweeps,
           "paired": estimator.paired, "seed_correlation": estimator.rho, "policy": asdict(estimator.policy)}
    row["holds"] = bool(COVERAGE_BAND[0] <= coverage <= COVERAGE_BAND[1] and abs(row["bias"]) <= BIAS_LIMIT
                        and fw_rate <= FW_LIMIT)
    return row


def table(rows: dict[str, dict]) -> str:
    lines = ["| estimator | Delta CI coverage | bias (points) | FW false 'better', 6 equal | mean K | holds |",
             "|---|---|---|---|---|---|"]
    for name, r in rows.items():
        lines.append(f"| {name} | {r['coverage']:.3f} ± {r['coverage_se']:.3f} | {r['bias']:+.3f} ± {r['bias_se']:.3f} | "
                     f"{r['fw_false_better']:.3f} ± {r['fw_se']:.3f} | {r['mean_k']:.2f} | {'yes' if r['holds'] else 'NO'} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="a smoke run with few sweeps (noisy figures)")
    parser.add_argument("--out", type=Path, default=None,
                        help="where to write the record (default benchmarks/measured/decision_validity_<date>.json)")
    args = parser.parse_args(argv)
    n_sweeps = 20 if args.quick else 1200
    started = time.time()
    rows = {}
    for name, estimator in tqdm(ESTIMATORS.items(), desc="estimators"):
        rows[name] = measure(estimator, n_sweeps, SEEDS)
    print(f"\n## Validity: {SEEDS} seeds per config, {n_sweeps} sweeps per grid; targets coverage "
          f"{COVERAGE_BAND[0]:.0%}-{COVERAGE_BAND[1]:.0%}, |bias| <= {BIAS_LIMIT}, FW <= {FW_LIMIT:.0%}; ± = Monte-Carlo SE")
    print(table(rows))
    record = {**record_head("decision_validity", argv),
              "quick": args.quick, "seconds": round(time.time() - started, 1), "estimators": rows,
              "targets": {"coverage": list(COVERAGE_BAND), "abs_bias": BIAS_LIMIT, "fw_false_better": FW_LIMIT},
              "all_hold": all(r["holds"] for r in rows.values()), **default_world().describe()}
    print(f"({record['seconds']:.0f} s)")
    write_record(record, "decision_validity", args.out)
    return record


if __name__ == "__main__":
    main()
