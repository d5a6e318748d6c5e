"""Which runs a collapse rule flags, and at which step, for a grid of thresholds: how to choose
train.collapse from runs whose fate is known.

    python scripts/collapse_thresholds.py RESULTS_DIR [...] [--patience 2,3,4] [--kl-ratio 1.5,2]
        [--length-band 0.25] [--cap-rise 0.25] [--early-steps 2]

Reads every run dir's train/metrics.jsonl under the given folders and prints, per rule, each run's
collapse step (`-` where the rule does not fire), runs named RESULTS_DIR/<run dir without its key> (RESULTS_DIR/<group>/<run dir>).
"""

from __future__ import annotations

import argparse
import itertools
from pathlib import Path

from opsd_sweep.run.collapse import find_collapse
from opsd_sweep.config import CollapseConfig
from opsd_sweep.run.rundir import find_run_dirs


def floats(text: str) -> list[float]:
    return [float(x) for x in text.split(",")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("roots", nargs="+", type=Path)
    parser.add_argument("--early-steps", default="2")
    parser.add_argument("--patience", default="2,3,4")
    parser.add_argument("--kl-ratio", default="1.5,2")
    parser.add_argument("--length-band", default="0.25")
    parser.add_argument("--cap-rise", default="0.25")
    args = parser.parse_args()
    runs = {f"{rd.path.parent.parent.name}/{rd.path.name.rsplit('-', 1)[0]}": rd.training_steps()
            for rd in find_run_dirs(args.roots)}
    runs = {name: steps for name, steps in sorted(runs.items()) if steps}
    print("early patience kl_ratio length_band cap_rise | " + " ".join(runs))
    for early, patience, kl, band, cap in itertools.product(floats(args.early_steps), floats(args.patience),
                                                           floats(args.kl_ratio), floats(args.length_band),
                                                           floats(args.cap_rise)):
        rule = CollapseConfig(early_steps=int(early), patience=int(patience), kl_ratio=kl, length_band=band,
                              cap_rise=cap)
        steps = [find_collapse(lines, rule) for lines in runs.values()]
        print(f"{int(early)} {int(patience)} {kl:g} {band:g} {cap:g} | "
              + " ".join(str(c.step) if c else "-" for c in steps))


if __name__ == "__main__":
    main()
