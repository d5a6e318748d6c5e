"""`python -m opsd_sweep.evaluate RUN_DIR`: the cycle's evaluation phase (writes RUN_DIR/eval/eval.json)."""

import sys

from opsd_sweep.evaluate.evaluator import main

if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python -m opsd_sweep.evaluate RUN_DIR")
    main(sys.argv[1])
