"""The run config conf/ composes with some overrides, as `python -m opsd_sweep` composes it, without
running it."""

from __future__ import annotations

from hydra import compose, initialize_config_dir

from opsd_sweep import CONF_DIR
from opsd_sweep.config import RunConfig, load_run_config


def composed_run_config(overrides: list[str]) -> RunConfig:
    """A validated RunConfig from the real conf/ and `overrides` (Hydra override strings)."""
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return load_run_config(compose(config_name="config", overrides=overrides, return_hydra_config=False))
