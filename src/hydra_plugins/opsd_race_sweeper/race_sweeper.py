"""The racing sweeper class. Light on imports: Hydra imports this module at every start; the race
itself (numpy, scipy) is imported inside `sweep` from `_core`."""

from __future__ import annotations

from typing import Any, List, Optional

from hydra.plugins.sweeper import Sweeper
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig


class RaceSweeper(Sweeper):
    """Runs the grid of sweep overrides as a race over seeds (see opsd_sweep.race.policy)."""

    def __init__(self, **settings: Any) -> None:
        self.settings = settings
        self.hydra_context: Optional[HydraContext] = None
        self.config: Optional[DictConfig] = None
        self.launcher = None

    def setup(self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig) -> None:
        from hydra.core.plugins import Plugins

        self.hydra_context = hydra_context
        self.config = config
        self.launcher = Plugins.instance().instantiate_launcher(hydra_context=hydra_context,
                                                                task_function=task_function, config=config)

    def sweep(self, arguments: List[str]) -> Any:
        from hydra_plugins.opsd_race_sweeper._core import race_sweep  # pandas, statsmodels: only when a race runs

        return race_sweep(self, arguments)
