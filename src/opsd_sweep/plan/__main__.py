"""`python -m opsd_sweep.plan [grid overrides] [--flags]` (= `make plan`): before a sweep, the GPU-hours each design
needs to find a gain (--effect) at the asked power with the family-wise error held, and the smallest gain a budget
(--budget) resolves; one sentence says whether the budget resolves the gain. The grid is given as to
`python -m opsd_sweep -m` (composed with conf/); the run SD is the published prior (--sd) or a sweep's own (--from);
costs are the measured ones of --gpu at the eval's length model (--lengths). Defaults: conf/plan.yaml.
"""

from __future__ import annotations

import argparse
import sys

from opsd_sweep.plan.planner import make_plan
from opsd_sweep.plan.settings import DESIGNS, load_settings

EXAMPLES = """examples:
  python -m opsd_sweep.plan +sweep=lr_grid --baseline lr_scheduler=constant         # the paper's grid
  python -m opsd_sweep.plan learning_rate=1e-5,2e-5 seed=1,2,3 --effect 2 --budget 300 --gpu H100
  python -m opsd_sweep.plan +sweep=lr_grid --from results/lr_grid                   # the SD of a sweep's own runs
"""


def parse_args(argv: list[str] | None) -> tuple[list[str], dict]:
    parser = argparse.ArgumentParser(prog="python -m opsd_sweep.plan", description=__doc__, epilog=EXAMPLES,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("overrides", nargs="*", help="the sweep's Hydra overrides, e.g. learning_rate=1e-5,2e-5 "
                        "seed=1,2,3 or +sweep=lr_grid")
    parser.add_argument("--effect", type=float, help="the gain to find (points), e.g. 1.6")
    parser.add_argument("--budget", type=float, help="GPU-hours to spend, e.g. 100")
    parser.add_argument("--sd", type=float, help="prior run-to-run SD (points) at --sd-k samples per problem")
    parser.add_argument("--sd-k", type=int, help="the samples per problem the prior SD is at (12: avg@12)")
    parser.add_argument("--from", dest="from_results", metavar="RESULTS",
                        help="take the run SD (and the eval's lengths) from a sweep's own runs under RESULTS")
    parser.add_argument("--metric", help="the score --from reads (default avg_at_n)")
    parser.add_argument("--gpu", help="the GPU kind whose measured costs price the runs: H200 or H100")
    parser.add_argument("--lengths", help="the eval's length model: auto, trained, published or sweep:RESULTS")
    parser.add_argument("--power", type=float, help="power to find the gain, e.g. 0.8")
    parser.add_argument("--fw", type=float, help="family-wise error rate of 'better', e.g. 0.05")
    parser.add_argument("--rho", type=float, help="the paired design's correlation of two configs' training-seed "
                        "effects, e.g. 0.5")
    parser.add_argument("--baseline", help="the grid's config the others are compared with (key=value terms); "
                        "default: an arm outside the grid")
    parser.add_argument("--designs", nargs="+", help=f"designs to price (default all: {' '.join(DESIGNS)})")
    parser.add_argument("--race-sweeps", type=int, help="simulated sweeps per max_seeds for the race (0: no race)")
    parser.add_argument("--race-max-seeds", type=int, help="the most seeds per config the race's row tries")
    parser.add_argument("--seed", type=int, help="random seed of the race's simulation")
    args = vars(parser.parse_args(argv))
    return args.pop("overrides"), args


def main(argv: list[str] | None = None) -> None:
    overrides, flags = parse_args(argv)
    try:
        settings = load_settings(flags)
        plan = make_plan(settings, overrides, lambda line: print(line, file=sys.stderr, flush=True))
    except ValueError as err:
        raise SystemExit(str(err)) from None
    print("\n".join(plan.lines))


if __name__ == "__main__":
    main()
