"""`python -m opsd_sweep [-m] overrides...`: the Hydra app. One job = one train-then-eval cycle."""

from __future__ import annotations

import hydra
from omegaconf import DictConfig

from opsd_sweep import CONF_DIR
from opsd_sweep.config import load_run_config
from opsd_sweep.cycle import run_cycle
from opsd_sweep.tiny import ensure_tiny_assets


@hydra.main(version_base="1.3", config_path=str(CONF_DIR), config_name="config")
def main(cfg: DictConfig) -> dict:
    run = load_run_config(cfg)  # a bad config raises here, before any compute
    if run.tiny is not None:
        ensure_tiny_assets(run.tiny)
    return run_cycle(run)


if __name__ == "__main__":
    main()
