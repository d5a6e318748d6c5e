"""Schemas of the two launchers, stored under `hydra/launcher` (values live in conf/hydra/launcher/).

Both take `hooks`: the dotted name of a module that knows the application's runs, or null. A hooks
module provides (opsd_sweep.cycle does):
  validate_job(job_cfg) -> run | None    raise on a job that cannot run (checked for the whole grid first);
                                         the run it would run (jobs naming one run are refused), or None
  record_lost_job(job_cfg, error, owner) a job's process died without returning (SIGKILL, OOM, scancel)
  probe_job(job_cfg) -> (action, detail, run)
                                         'done' | 'failed' (settled, not submitted),
                                         'wait' (a live process or SLURM job holds it), 'submit'; `run` is a
                                         dict (the run's key and run_dir) that the job's answer carries
  record_submitted_job(job_cfg, job_id)  SLURM only: the job now queued for this run
"""

from dataclasses import dataclass
from typing import Any, List, Optional

from hydra.core.config_store import ConfigStore
from hydra_plugins.hydra_submitit_launcher.config import SlurmQueueConf
from omegaconf import MISSING


@dataclass
class LocalGpusConf:
    _target_: str = "hydra_plugins.opsd_local_gpus.local_launcher.LocalGpusLauncher"
    # GPU ids to pack jobs onto; null = CUDA_VISIBLE_DEVICES, else every GPU torch sees
    gpus: Optional[List[Any]] = MISSING
    # GPUs one job needs (resolved per job, e.g. ${train.num_gpus}); 0 = a CPU-only job
    gpus_per_job: int = MISSING
    # CPU-only jobs run at most this many at once (GPU jobs are limited by free GPUs)
    max_parallel: int = MISSING
    # stop starting jobs after the first failure (running jobs finish)
    fail_fast: bool = MISSING
    # module with the application's job hooks (see above), or null
    hooks: Optional[str] = MISSING
    # seconds between looks at runs that another live sweep holds (probe_job), while waiting for them
    poll_s: float = MISSING
    # opsd_sweep cycles: run the phases of 1-GPU and CPU jobs in warm workers, one per GPU set
    # (opsd_sweep.worker); false: each phase in a process of its own (debugging)
    phase_workers: bool = False


@dataclass
class OpsdSlurmConf(SlurmQueueConf):
    _target_: str = "hydra_plugins.opsd_local_gpus.slurm_launcher.OpsdSlurmLauncher"
    # GPUs one job needs (resolved per job); must not exceed gpus_per_node
    gpus_per_job: int = MISSING
    # module with the application's job hooks (see above), or null
    hooks: Optional[str] = MISSING
    # seconds between looks at the queue while waiting for jobs
    poll_s: float = MISSING


ConfigStore.instance().store(group="hydra/launcher", name="local_gpus_schema", node=LocalGpusConf,
                             provider="opsd_sweep")
ConfigStore.instance().store(group="hydra/launcher", name="opsd_slurm_schema", node=OpsdSlurmConf,
                             provider="opsd_sweep")
