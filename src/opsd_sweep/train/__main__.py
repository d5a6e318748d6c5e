"""`python -m opsd_sweep.train RUN_DIR`: the cycle's training phase (reads RUN_DIR/config.yaml).

Multi-GPU (the cycle does this): `accelerate launch --config_file launchers/accelerate/<train.strategy>.yaml
--num_processes <train.num_gpus> -m opsd_sweep.train RUN_DIR`.
"""

import sys

from opsd_sweep.data import DatasetUnavailableError
from opsd_sweep.modeling import ModelUnavailableError
from opsd_sweep.train.trainer import main

if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python -m opsd_sweep.train RUN_DIR")
    try:
        main(sys.argv[1])
    except (ModelUnavailableError, DatasetUnavailableError) as err:
        sys.exit(f"opsd_sweep.train: {err}")  # a clear one-line reason instead of a traceback
