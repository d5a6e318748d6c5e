"""`python -m opsd_sweep [-m] overrides...`: the Hydra app. One job = one train-then-eval cycle."""

from __future__ import annotations

import sys

import hydra
from omegaconf import DictConfig

from opsd_sweep import CONF_DIR
from opsd_sweep.cli import check_overrides, exit_unless_finished, refuse_config
from opsd_sweep.config import ConfigError
from opsd_sweep.cycle import load_cycle_config, run_cycle
from opsd_sweep.interrupt import exit_code
from opsd_sweep.tiny import ensure_tiny_assets


@hydra.main(version_base="1.3", config_path=str(CONF_DIR), config_name="config")
def main(cfg: DictConfig) -> dict:
    try:
        run = load_cycle_config(cfg)  # a bad config raises here, before any compute
    except ConfigError as err:
        refuse_config(err, cfg)
    if run.tiny is not None:
        ensure_tiny_assets(run.tiny)
    return exit_unless_finished(run_cycle(run))  # a single job that did not finish its run exits 1


if __name__ == "__main__":
    check_overrides(sys.argv[1:], "opsd_sweep")  # a typo'd key exits here, with the key it meant
    try:
        main()
    except KeyboardInterrupt as err:  # a single run (no -m) stopped by Ctrl-C or SIGTERM; marked interrupted
        print(f"[opsd_sweep] {err or 'interrupted by SIGINT'}: run the same command again to resume", file=sys.stderr)
        sys.exit(exit_code(err))
