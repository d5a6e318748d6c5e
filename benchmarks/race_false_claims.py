"""The family-wise false "better" of one race design, measured on many all-equal sweeps (bench_decision_cost's
"six-equal" grid, its world and designs). bench_decision_cost measures it on 500 sweeps beside everything else
(SE ~1 point); this measures one design at a fixed max_seeds on as many sweeps as a claim about the 5% limit needs.

    python -m benchmarks.race_false_claims race_kauto_alloc --max-seeds 112 --run-sd 4.6 --sweeps 2000
"""

from __future__ import annotations

import argparse
import math
import time

from benchmarks.bench_decision_cost import DESIGNS, RACE_DEFAULTS, outcomes
from opsd_sweep.costs.decision_model import default_world
from benchmarks.records import record_head, write_record


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("design", choices=sorted(DESIGNS), help="a design of bench_decision_cost")
    parser.add_argument("--max-seeds", type=int, required=True, help="the race's max_seeds")
    parser.add_argument("--run-sd", type=float, default=3.0, help="run-to-run SD (points) at K = 12 (default 3)")
    parser.add_argument("--stop-alpha", type=float, default=RACE_DEFAULTS["stop_alpha"])
    parser.add_argument("--sweeps", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=777, help="seed of the sweeps (another seed, other sweeps)")
    args = parser.parse_args(argv)
    if DESIGNS[args.design].fixed:
        parser.error(f"{args.design} is a fixed grid, not a race: its seeds are chosen for power, not max_seeds")
    started = time.time()
    null = outcomes(DESIGNS[args.design], default_world(args.run_sd), "six-equal", args.sweeps, args.seed,
                    args.max_seeds, RACE_DEFAULTS | {"stop_alpha": args.stop_alpha})
    rate = sum(bool(o.claims) for o in null) / len(null)
    record = {**record_head("race_false_claims", argv), "design": args.design, "max_seeds": args.max_seeds,
              "run_sd": args.run_sd, "stop_alpha": args.stop_alpha, "sweeps": args.sweeps, "sweep_seed": args.seed,
              "fw_false_better": rate, "fw_se": math.sqrt(rate * (1 - rate) / len(null)),
              "runs": sum(o.runs for o in null) / len(null), "seconds": round(time.time() - started, 1)}
    print(f"{args.design} at max_seeds {args.max_seeds}, run SD {args.run_sd:g}, stop_alpha {args.stop_alpha:g}: "
          f"false 'better' {rate:.4f} ± {record['fw_se']:.4f} over {args.sweeps} all-equal sweeps "
          f"({record['runs']:.0f} runs a sweep, {record['seconds']:.0f} s)")
    write_record(record, f"race_false_claims_{args.design}_sd{args.run_sd:g}_seed{args.seed}", None)
    return record


if __name__ == "__main__":
    main()
