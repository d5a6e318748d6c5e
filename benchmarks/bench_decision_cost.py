"""GPU-hours per 6-config decision at real costs (issue 40, item 5): is +3 points real, found at 80% power with
family-wise false "better" <= 5%?

World (opsd_sweep.costs.decision_model): training 524 GPU-s a run, eval samples priced by the measured step model at
lengths tied to correctness (wrong answers longer; --lengths: `trained`, the default, is the published model x the
trained-checkpoint growth, `published` the base model's, `sweep:RESULTS` a sweep's own), 30 problems of which 6 are never and 4 always solved,
run-to-run SD 3 points at K = 12 (eval sampling 1.73 of it, the training seed the rest).
Grids (bench_race's): "six" = baseline, one +3, two equal, two 8 and 10 worse; "six-equal" = all equal.
Designs (opsd_sweep.costs.decision_designs), each on the SAME simulated sweeps (common random numbers):
  fixed_k12                  fixed grid at K = 12, seeds per config the smallest reaching 80% power
  race_k12                   the race (opsd_sweep.race, the sweeper's settings) at K = 12
  race_kauto                 + K0 = 4 for the first round, then the cost-optimal K from the pool
  race_kauto_alloc           + a cost-aware Neyman allocation from the baseline's first runs (floor 2)
  race_kauto_alloc_paired0   + paired seeds (the race's pairing: seed); simulated seed correlation 0
  race_kauto_alloc_paired05  the same at a seed correlation of 0.5
A further row, race_kauto_alloc_fp8kv_after_compare_pm3, is that design at FP8 KV eval cost plus the
`evaluate compare` that showed FP8 equivalent within ±3 points first: the compare's samples a problem from its
planner (opsd_sweep.inference.equivalence_plan) at the published noise, both arms at the published lengths.
A race's max_seeds is the smallest of RACE_MAX_SEEDS (bench_race's, to 112) reaching 80% power on TUNING sweeps (as the
fixed grid's seeds); every figure is then measured on fresh REPORT sweeps. What-if rows reprice the best design
(FP8 KV halves the KV part; a cheaper training part) and a higher seed correlation; race_kauto_alloc_at_floors is the
exact bf16 design with every cost at its floor (decision_model.floor_cost_model): what no faster engine goes below.

    python -m benchmarks.bench_decision_cost            # full run (~10-15 min on one core)
    python -m benchmarks.bench_decision_cost --quick    # smoke run (few sweeps; noisy figures)
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from tqdm import tqdm

from benchmarks.bench_race import GRIDS, MAX_SEEDS, settings_of
from opsd_sweep.costs.decision_designs import Outcome, SamplePolicy, fixed_grid, race
from benchmarks.records import MEASURED, record_head, write_record
from opsd_sweep.costs import length_model
from opsd_sweep.costs.decision_model import (LENGTH_SPECS, LengthsByCorrectness, Sweep, World, default_world,
                                             eval_lengths, floor_cost_model, measured_cost_model)
from opsd_sweep.costs.measured import GPU_COSTS
from opsd_sweep.inference.equivalence_plan import published_noise, samples_needed

TUNE_SEED, REPORT_SEED = 40_401, 40_402
POWER, FW_LIMIT = 0.80, 0.05
BETTER = {1}  # the +3 config of the "six" grid
# bench_race's candidates, and beyond for a noisier world (run SD 4.6: a race at K ~ 2 needs more than 80 seeds),
# up to what a Sweep draws (128 seeds a config, less the confirmation seeds)
RACE_MAX_SEEDS = (*MAX_SEEDS, 96, 112)
RACE_DEFAULTS = dict(stop_alpha=0.005, eliminate_alpha=0.05, futility_effect=None)  # conf/hydra/sweeper/race.yaml
DESIGN_NAMES = ("fixed_k12", "race_k12", "race_kauto", "race_kauto_alloc", "race_kauto_alloc_paired0",
                "race_kauto_alloc_paired05")


@dataclass(frozen=True)
class Design:
    policy: SamplePolicy
    rho: float = 0.0  # the simulated seed correlation between configs
    pairing: str = "none"  # the race's pairing setting
    world: World | None = None  # None: the benchmark's world
    note: str = ""
    fixed: bool = False  # a fixed grid (seeds per config chosen for power) instead of the race


AUTO, AUTO_ALLOC = SamplePolicy(k=None), SamplePolicy(k=None, allocate=True)
DESIGNS = {
    "fixed_k12": Design(SamplePolicy(k=12), fixed=True),
    "race_k12": Design(SamplePolicy(k=12)),
    "race_kauto": Design(AUTO),
    "race_kauto_alloc": Design(AUTO_ALLOC),
    "race_kauto_alloc_paired0": Design(AUTO_ALLOC, 0.0, "seed"),
    "race_kauto_alloc_paired05": Design(AUTO_ALLOC, 0.5, "seed"),
}


def what_if_designs(run_sd: float, lengths: LengthsByCorrectness, gpu: str) -> dict[str, Design]:
    """Rows that reprice the best design: what would bring a decision to <= 15 GPU-hours."""
    fp8 = default_world(run_sd, measured_cost_model(kv_factor=0.5, gpu=gpu), lengths)
    fp8_half_train = default_world(run_sd, measured_cost_model(train_s=measured_cost_model(gpu=gpu).train_s / 2,
                                                               kv_factor=0.5, gpu=gpu), lengths)
    return {
        "race_kauto_alloc_paired05_fp8kv": Design(AUTO_ALLOC, 0.5, "seed", fp8,
                                                  "FP8 KV cache: half the KV part"),
        "race_kauto_alloc_paired05_fp8kv_train_half": Design(AUTO_ALLOC, 0.5, "seed", fp8_half_train,
                                                             "+ training at half the GPU-seconds (50 steps, or 2x step)"),
        "race_kauto_alloc_paired08_fp8kv_train_half": Design(AUTO_ALLOC, 0.8, "seed", fp8_half_train,
                                                             "+ a seed correlation of 0.8"),
        "race_kauto_alloc_at_floors": Design(AUTO_ALLOC, world=default_world(run_sd, floor_cost_model(gpu), lengths),
                                             note="exact bf16 at every floor: the training step at its projected "
                                                  "floor, an eval step's fixed part at one read of the weights"),
    }


def check_published_eval(gpu: str = "H200", seed: int = 0) -> dict:
    """GPU-minutes of one 360-sample eval at the published preset's lengths under the GPU's cost model, beside the
    step model's own projections of it (in the record its eval costs name)."""
    cost = measured_cost_model(gpu=gpu)
    record = MEASURED / GPU_COSTS[gpu].eval_source.split(":")[0]
    drawn = length_model.published().draw(30, 12, seed)
    return {"samples": len(drawn), "mean_tokens": round(float(np.mean(drawn)), 1),
            "gpu_minutes": round(float(cost.sample_seconds(drawn).sum()) / 60, 1),
            "step_model_projection_minutes": sorted(round(p["seconds"] / 60, 1) for p in json.loads(
                record.read_text())["projections"] if p["requests"] == 360)}


# --- measuring a design ----------------------------------------------------------------------------

def sweeps(world: World, grid: str, n: int, seed: int, rho: float) -> list[Sweep]:
    return [Sweep(world, GRIDS[grid], [seed, i], rho) for i in range(n)]


def outcomes(design: Design, world: World, grid: str, n: int, seed: int, knob: int,
             race_settings: dict = RACE_DEFAULTS) -> list[Outcome]:
    """The design on n sweeps of `grid` (the same n sweeps for any design and knob: common random numbers).
    knob: seeds per config (fixed grid) or max_seeds (race); race_settings: the race's tuned settings."""
    world = design.world or world
    if design.fixed:
        return [fixed_grid(s, design.policy, knob, settings_of(race_settings, MAX_SEEDS[-1]))
                for s in sweeps(world, grid, n, seed, design.rho)]
    settings = settings_of(race_settings | {"pairing": design.pairing}, knob)
    return [race(s, design.policy, settings) for s in sweeps(world, grid, n, seed, design.rho)]


def power_of(results: list[Outcome]) -> float:
    return float(np.mean([o.claims == BETTER for o in results]))


def smallest_knob(design: Design, world: World, n: int, candidates: list[int], race_settings: dict) -> int:
    """The smallest candidate whose power on TUNING sweeps is >= POWER (bisection: power rises with seeds);
    the largest when none reaches it."""
    low, high = -1, len(candidates) - 1
    if power_of(outcomes(design, world, "six", n, TUNE_SEED, candidates[high], race_settings)) < POWER:
        return candidates[high]
    while high - low > 1:
        mid = (low + high) // 2
        enough = power_of(outcomes(design, world, "six", n, TUNE_SEED, candidates[mid], race_settings)) >= POWER
        low, high = (low, mid) if enough else (mid, high)
    return candidates[high]


def se(rate: float, n: int) -> float:
    return math.sqrt(max(rate * (1 - rate), 1 / n) / n)


def measure(name: str, design: Design, world: World, tune_n: int, report_n: int, equal_n: int,
            race_settings: dict = RACE_DEFAULTS) -> dict:
    candidates = list(range(2, 97)) if design.fixed else list(RACE_MAX_SEEDS)
    knob = smallest_knob(design, world, tune_n, candidates, race_settings)
    alt = outcomes(design, world, "six", report_n, REPORT_SEED, knob, race_settings)
    null = outcomes(design, world, "six-equal", equal_n, REPORT_SEED, knob, race_settings)
    power, fw = power_of(alt), float(np.mean([bool(o.claims) for o in null]))
    gpu_h = [o.gpu_seconds / 3600 for o in alt]
    ks = [k for o in alt for k in o.k_used]
    return {"gpu_hours": round(float(np.mean(gpu_h)), 2), "runs": round(float(np.mean([o.runs for o in alt])), 1),
            "samples": round(float(np.mean([o.samples for o in alt])), 0), "power": round(power, 4),
            "fw_false_better": round(fw, 4), "power_se": round(se(power, report_n), 4),
            "fw_se": round(se(fw, equal_n), 4), "gpu_hours_se": round(float(np.std(gpu_h) / math.sqrt(report_n)), 2),
            "gpu_hours_all_equal": round(float(np.mean([o.gpu_seconds / 3600 for o in null])), 2),
            ("seeds_per_config" if design.fixed else "max_seeds"): knob,
            "mean_k": round(float(np.mean(ks)), 2), "seed_correlation": design.rho, "pairing": design.pairing,
            **({"note": design.note} if design.note else {}),
            **({"cost_model": (design.world or world).cost.describe()} if design.world else {})}


# --- FP8 adopted after an equivalence check (issue 49, item 4) -------------------------------------

FP8_AFTER_COMPARE, COMPARE_MARGIN = "race_kauto_alloc_fp8kv_after_compare_pm3", 3.0


def compare_cost(world: World, fp8: World, margin: float = COMPARE_MARGIN) -> dict:
    """GPU-hours of `evaluate compare` showing FP8 KV equivalent to bf16 within +-margin on one checkpoint: K
    samples a problem per arm from the compare's planner at the published noise (power 0.8, level 0.95), each
    arm's samples at the world's lengths (its mean over right and wrong samples at the base score)."""
    noise = published_noise()
    k = samples_needed(noise, margin)
    right = world.base_score / 100
    arm_h = {name: k * world.difficulty.problems * (right * w.sample_seconds[0] + (1 - right) * w.sample_seconds[1])
             / 3600 for name, w in (("bf16", world), ("fp8", fp8))}
    return {"margin": margin, "samples_per_problem": k, "gpu_hours": round(sum(arm_h.values()), 2),
            "gpu_hours_per_arm": {n: round(h, 2) for n, h in arm_h.items()}, "noise": noise.source,
            "length_model": world.lengths.name, "planner": "opsd_sweep.inference.equivalence_plan.samples_needed"}


def fp8_after_compare(run_sd: float, world: World, tune_n: int, report_n: int, equal_n: int,
                      race_settings: dict) -> dict:
    """race + K auto + allocation at FP8 KV eval cost, with the compare that licensed FP8 added to its GPU-hours."""
    fp8 = default_world(run_sd, measured_cost_model(kv_factor=0.5, gpu=world.cost.gpu.kind), lengths=world.lengths)
    check = compare_cost(world, fp8)
    design = Design(AUTO_ALLOC, world=fp8, note=f"FP8 KV after a compare at ±{check['margin']:g} "
                                                f"({check['gpu_hours']:.1f} GPU-h, K = {check['samples_per_problem']})")
    row = measure(FP8_AFTER_COMPARE, design, world, tune_n, report_n, equal_n, race_settings)
    return row | {"gpu_hours": round(row["gpu_hours"] + check["gpu_hours"], 2), "decision_gpu_hours": row["gpu_hours"],
                  "gpu_hours_all_equal": round(row["gpu_hours_all_equal"] + check["gpu_hours"], 2), "compare": check}


# --- report --------------------------------------------------------------------------------------

def table(rows: dict[str, dict], reference: float) -> str:
    lines = ["| design | GPU-hours / decision | x race_k12 | runs | samples | mean K | power | FW false 'better' | "
             "max_seeds or R | GPU-hours, all equal |", "|---|---|---|---|---|---|---|---|---|---|"]
    for name, r in rows.items():
        knob = r.get("max_seeds", r.get("seeds_per_config"))
        lines.append(f"| {name} | {r['gpu_hours']:.1f} ± {r['gpu_hours_se']:.1f} | {r['gpu_hours'] / reference:.2f} | "
                     f"{r['runs']:.1f} | {r['samples']:.0f} | {r['mean_k']:.2f} | {r['power']:.3f} ± {r['power_se']:.3f} | "
                     f"{r['fw_false_better']:.3f} ± {r['fw_se']:.3f} | {knob} | {r['gpu_hours_all_equal']:.1f} |")
    return "\n".join(lines)


def verdict(rows: dict[str, dict]) -> dict:
    best, ref = rows["race_kauto_alloc"], rows["race_k12"]
    ratio = best["gpu_hours"] / ref["gpu_hours"]
    return {"race_kauto_alloc_over_race_k12": round(ratio, 3), "target_ratio": 0.5,
            "met": bool(ratio <= 0.5 and best["power"] >= POWER and best["fw_false_better"] <= FW_LIMIT)}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="a smoke run with few sweeps (noisy figures)")
    parser.add_argument("--run-sd", type=float, default=3.0, help="run-to-run SD (points) at K = 12 (default 3)")
    parser.add_argument("--stop-alpha", type=float, default=RACE_DEFAULTS["stop_alpha"],
                        help=f"the races' stop_alpha (default {RACE_DEFAULTS['stop_alpha']}, conf/hydra/sweeper/race.yaml)")
    parser.add_argument("--lengths", default="trained", metavar=LENGTH_SPECS,
                        help="the eval's length model: trained (the published lengths x the trained-checkpoint growth "
                             "17,575 -> 19,757 tokens; the default), published (the base model's) or sweep:RESULTS "
                             "(the lengths a sweep's runs wrote)")
    parser.add_argument("--gpu", default="H200", choices=sorted(GPU_COSTS),
                        help="the GPU kind whose measured costs (opsd_sweep.costs.measured) price the runs")
    parser.add_argument("--out", type=Path, default=None,
                        help="where to write the record (default benchmarks/measured/decision_cost_<date>.json)")
    args = parser.parse_args(argv)
    if not 0 < args.stop_alpha < 1:
        parser.error(f"--stop-alpha {args.stop_alpha}: a level in (0, 1), e.g. 0.002")
    try:
        lengths = eval_lengths(args.lengths)
    except ValueError as err:
        parser.error(str(err))
    race_settings = RACE_DEFAULTS | {"stop_alpha": args.stop_alpha}
    tune_n, report_n, equal_n = (12, 16, 16) if args.quick else (150, 400, 500)
    world = default_world(args.run_sd, measured_cost_model(gpu=args.gpu), lengths)
    started = time.time()
    print(f"world: train SD {world.train_sd:.2f} + eval SD {math.sqrt(world.difficulty.eval_var(world.base_score, 12)):.2f}"
          f" at K = 12 = run SD {args.run_sd:g}; lengths: {lengths.name} (mean {lengths.describe()['overall_mean']:,}); "
          f"seconds per (correct, wrong) sample {tuple(round(x, 2) for x in world.sample_seconds)}; 360 "
          f"published-length samples {check_published_eval(args.gpu)['gpu_minutes']} GPU-min on the {args.gpu}",
          flush=True)
    designs = DESIGNS | ({} if args.quick else what_if_designs(args.run_sd, lengths, args.gpu))
    rows = {}
    for name, design in tqdm(designs.items(), desc="designs"):
        rows[name] = measure(name, design, world, tune_n, report_n, equal_n, race_settings)
        tqdm.write(f"  {name}: {rows[name]['gpu_hours']:.1f} GPU-h, power {rows[name]['power']:.3f}, "
                   f"FW {rows[name]['fw_false_better']:.3f}")
    rows[FP8_AFTER_COMPARE] = fp8_after_compare(args.run_sd, world, tune_n, report_n, equal_n, race_settings)
    print(f"\n## GPU-hours per 6-config decision at run SD {args.run_sd:g}, eval lengths: {lengths.name} (REPORT "
          f"sweeps: {report_n} six, {equal_n} six-equal; ± = Monte-Carlo SE)")
    print(table(rows, rows["race_k12"]["gpu_hours"]))
    check = rows[FP8_AFTER_COMPARE]["compare"]
    print(f"\n{FP8_AFTER_COMPARE}: {rows[FP8_AFTER_COMPARE]['decision_gpu_hours']:.1f} GPU-h decision at FP8 KV + "
          f"{check['gpu_hours']:.1f} GPU-h compare (K = {check['samples_per_problem']} samples a problem per arm for "
          f"±{check['margin']:g}; {check['noise']}; length model {check['length_model']})")
    record = {**record_head("bench_decision_cost", argv),
              "quick": args.quick, "seconds": round(time.time() - started, 1),
              "designs": {n: rows[n] for n in DESIGN_NAMES}, "what_if": {n: r for n, r in rows.items()
                                                                           if n not in DESIGN_NAMES},
              "verdict": verdict(rows), "sweeps": {"tune": tune_n, "report_six": report_n, "report_six_equal": equal_n,
                                                   "tune_seed": TUNE_SEED, "report_seed": REPORT_SEED},
              "scenario": {"grids": {g: GRIDS[g] for g in ("six", "six-equal")}, "power_target": POWER,
                           "fw_limit": FW_LIMIT, "race_settings": dataclasses.asdict(settings_of(race_settings, 0)),
                           "sample_policies": {n: dataclasses.asdict(d.policy) for n, d in designs.items()}},
              "gpu": args.gpu, "published_eval_check": check_published_eval(args.gpu), **world.describe()}
    print(f"\nrace + K auto + allocation / race K = 12: {record['verdict']['race_kauto_alloc_over_race_k12']} "
          f"(target <= 0.5 with power >= {POWER:.0%} and FW <= {FW_LIMIT:.0%}: "
          f"{'met' if record['verdict']['met'] else 'NOT met'})  ({record['seconds']:.0f} s)")
    write_record(record, "decision_cost", args.out)
    return record


if __name__ == "__main__":
    main()
