"""`python -m opsd_sweep.train RUN_DIR`: the cycle's training phase (reads RUN_DIR/config.yaml).

Multi-GPU (the cycle does this): `accelerate launch --config_file launchers/accelerate/<train.strategy>.yaml
--num_processes <train.num_gpus> -m opsd_sweep.train RUN_DIR`.
"""

import sys

from opsd_sweep.train.trainer import run_phase

if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python -m opsd_sweep.train RUN_DIR")
    run_phase(sys.argv[1])
