"""`hydra/launcher=local_gpus`: run a sweep's jobs concurrently on one machine, each on its own GPUs."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hydra.core.utils import JobReturn
from hydra.plugins.launcher import Launcher
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig


class LocalGpusLauncher(Launcher):
    """Packs jobs onto disjoint GPU sets: each job is a process with CUDA_VISIBLE_DEVICES set to the
    GPUs it asked for (hydra.launcher.gpus_per_job), started as soon as they are free; CPU-only jobs
    share hydra.launcher.max_parallel slots. The whole grid is checked before the first job starts; a
    failed job is reported and the others go on (unless fail_fast); a job whose run another live sweep
    holds is waited for (looked at every poll_s seconds) and then run or skipped as that run stands.
    With phase_workers, the phases of 1-GPU and CPU jobs run in warm workers (_phase_workers.py)."""

    def __init__(self, gpus: list[Any] | None, gpus_per_job: int, max_parallel: int, fail_fast: bool,
                 hooks: str | None, poll_s: float, phase_workers: bool = False) -> None:
        del gpus_per_job  # read from each job's own config: it may differ across the grid
        self.gpus = list(gpus) if gpus is not None else None
        self.max_parallel = max_parallel
        self.fail_fast = fail_fast
        self.hooks = hooks
        self.poll_s = poll_s
        self.phase_workers = phase_workers
        self.config: DictConfig | None = None
        self.hydra_context: HydraContext | None = None
        self.task_function: TaskFunction | None = None

    def setup(self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig) -> None:
        self.config = config
        self.hydra_context = hydra_context
        self.task_function = task_function

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[JobReturn]:
        from ._local import launch_local  # the scheduler loads only when a sweep runs

        return launch_local(self, job_overrides, initial_job_idx)
