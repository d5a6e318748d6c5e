"""`python -m opsd_sweep.train RUN_DIR`: the cycle's training phase (reads RUN_DIR/config.yaml)."""

import sys

from opsd_sweep.train.trainer import main

if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python -m opsd_sweep.train RUN_DIR")
    main(sys.argv[1])
