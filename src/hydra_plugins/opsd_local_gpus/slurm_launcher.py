"""`hydra/launcher=slurm_4gpu` (and the other presets): hydra-submitit-launcher's SLURM launcher, plus
the whole grid checked before submission, settled runs skipped, runs held elsewhere re-attached, and
jobs that SLURM killed recorded as failed."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hydra.core.utils import JobReturn
from hydra_plugins.hydra_submitit_launcher.submitit_launcher import SlurmLauncher


class OpsdSlurmLauncher(SlurmLauncher):
    """Inside each SLURM job it is submitit's callable (`__call__`, and `checkpoint` for requeue)."""

    def __init__(self, gpus_per_job: int, hooks: str | None, poll_s: float, **submitit_params: Any) -> None:
        del gpus_per_job  # read from each job's own config: it may differ across the grid
        super().__init__(**submitit_params)
        self.hooks = hooks
        self.poll_s = poll_s

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[JobReturn]:
        from ._slurm import launch_slurm  # submitit loads only when a sweep runs

        return launch_slurm(self, job_overrides, initial_job_idx)
