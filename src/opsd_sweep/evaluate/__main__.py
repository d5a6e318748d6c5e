"""Four entry points:

    python -m opsd_sweep.evaluate RUN_DIR                      # the cycle's eval phase
    python -m opsd_sweep.evaluate model=... eval=... [-m ...]  # standalone (Hydra overrides)
    python -m opsd_sweep.evaluate compare A B [--margin 1]     # may evaluator B replace A? (compare.py)
    python -m opsd_sweep.evaluate regrade RESULTS              # stored completions, today's grader (regrade.py)
"""

import sys

from opsd_sweep.cli import check_overrides
from opsd_sweep.evaluate.evaluator import main as evaluate_run_dir
from opsd_sweep.evaluate.standalone import main as evaluate_standalone
from opsd_sweep.interrupt import exit_code

if __name__ == "__main__":
    args = sys.argv[1:]
    if args[:1] == ["compare"]:  # before Hydra, which would read its arguments as overrides
        from opsd_sweep.evaluate.compare import main as compare_evaluations  # statsmodels: ~4 s, only here

        compare_evaluations(args[1:])
    elif args[:1] == ["regrade"]:  # likewise before Hydra
        from opsd_sweep.evaluate.regrade import main as regrade_evaluations

        regrade_evaluations(args[1:])
    elif len(args) == 1 and "=" not in args[0] and not args[0].startswith("-"):
        evaluate_run_dir(args[0])
    else:
        check_overrides(args, "opsd_sweep.evaluate")  # a typo'd key exits here, with the key it meant
        try:
            evaluate_standalone()
        except KeyboardInterrupt as err:  # marked interrupted (standalone.py); finished shards are kept
            print(f"[evaluate] {err or 'interrupted by SIGINT'}: run the same command again to resume",
                  file=sys.stderr)
            sys.exit(exit_code(err))
