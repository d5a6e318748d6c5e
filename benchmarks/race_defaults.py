"""The race sweeper's defaults (conf/hydra/sweeper/race.yaml: stop_alpha 0.005, futility off, max_seeds
24 / 40 / 64 at training-seed SD 2 / 3 / 4) on bench_race's REPORT scenarios, as one markdown table row per SD.

    .venv/bin/python -m benchmarks.race_defaults     # ~10 min on 2 cores
"""

from __future__ import annotations

import argparse

from benchmarks.bench_race import REPORT_SEED, SDS, race_stats, settings_of

FIXED_GRID_RUNS = {2.0: 108, 3.0: 180, 4.0: 294}      # 6 configs x R* (bench_race's fixed-grid part)
FIXED_GRID_RUNS_18 = {2.0: 378, 3.0: 666, 4.0: 1026}  # 18 configs x R*
DEFAULTS = dict(stop_alpha=0.005, eliminate_alpha=0.05, futility_effect=None)


def main() -> None:
    """One markdown row per training-seed SD (the table's header first), printed as each row finishes."""
    print("| training-seed SD | max_seeds | fixed grid runs (6 x R*) | racing runs | ratio | racing power | false \"better\", "
          "6 equal | false, 18 equal | racing runs, 6 equal | 18 configs: ratio | 18 configs: power |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for sd, max_seeds in zip(SDS, (24, 40, 64)):
        settings = settings_of(DEFAULTS, max_seeds)
        six = race_stats("six", sd, settings, 1000, REPORT_SEED)
        six_equal = race_stats("six-equal", sd, settings, 1000, REPORT_SEED)
        eighteen_equal = race_stats("eighteen-equal", sd, settings, 500, REPORT_SEED)
        eighteen = race_stats("eighteen", sd, settings, 500, REPORT_SEED)
        print(f"| {sd:g} | {max_seeds} | {FIXED_GRID_RUNS[sd]} | {six['runs']:.1f} | {six['runs'] / FIXED_GRID_RUNS[sd]:.3f} | "
              f"{six['power']:.3f} | {six_equal['false']:.3f} | {eighteen_equal['false']:.3f} | {six_equal['runs']:.0f} | "
              f"{eighteen['runs'] / FIXED_GRID_RUNS_18[sd]:.3f} | {eighteen['power']:.3f} |", flush=True)


if __name__ == "__main__":
    # no options: the parser only answers --help (and refuses a stray argument) before minutes of sweeps
    argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter).parse_args()
    main()
