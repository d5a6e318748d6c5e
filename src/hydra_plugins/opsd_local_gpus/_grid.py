"""Compose and check every job of a sweep before the first one starts."""

from __future__ import annotations

import importlib
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, Optional

from hydra.core.global_hydra import GlobalHydra
from hydra.core.hydra_config import HydraConfig
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.utils import JobReturn, JobStatus, configure_log, filter_overrides, setup_globals
from hydra.errors import CompactHydraException
from hydra.experimental.callback import Callback
from hydra.core.config_loader import ConfigLoader
from omegaconf import DictConfig, OmegaConf, open_dict

from opsd_sweep.config import RunConfig, load_run_config
from opsd_sweep.inert import inert_twin_problems

from .config import LocalGpusConf, OpsdSlurmConf


NOTHING_DONE = "Nothing was run or written."  # the last line of a refusal, as python -m opsd_sweep's own


# Compact: Hydra prints only the message of these errors, which says everything (no traceback).
class SweepConfigError(CompactHydraException, ValueError):
    """Some jobs of the sweep cannot run; nothing was started. The message lists each problem."""


class JobFailedError(CompactHydraException, RuntimeError):
    """A job of the sweep failed; the message lists every failed job of the sweep. `answer` is what the
    job itself returned or raised (None when it never ran)."""

    def __init__(self, message: str, answer: object = None):
        super().__init__(message)
        self.answer = answer


@dataclass
class PlannedJob:
    num: int                  # hydra.job.num: the job's index in the whole sweep
    overrides: list[str]
    config: DictConfig        # the composed job config, hydra node included
    gpus: int                 # GPUs it needs

    @property
    def label(self) -> str:
        return f"#{self.num} " + (" ".join(filter_overrides(self.overrides)) or "(no overrides)")

    def task_config(self) -> DictConfig:
        """The job config as the task sees it (without the hydra node)."""
        cfg = OmegaConf.masked_copy(self.config, [k for k in self.config if k != "hydra"])
        assert isinstance(cfg, DictConfig)
        return cfg

    def job_return(self, status: JobStatus, value: object) -> JobReturn:
        """A JobReturn for a job that never returned one itself (not started, lost, run elsewhere)."""
        return JobReturn(overrides=self.overrides, cfg=self.task_config(),
                         hydra_cfg=OmegaConf.create({"hydra": self.config.hydra}),
                         task_name=str(self.config.hydra.job.name), status=status, _return_value=value)


def prepare_sweep(launcher: Any, job_overrides: Sequence[Sequence[str]], initial_job_idx: int,
                  job_id: str, setting_problems: Sequence[str] = ()) -> tuple[ModuleType | None, list[PlannedJob]]:
    """What every launch starts with: Hydra's globals and logging, the sweep dir, the application's
    hooks (launcher.hooks) and the checked grid. `setting_problems` (the launcher's own invalid settings)
    refuse the sweep as a bad grid does, before any job is composed."""
    assert launcher.config is not None and launcher.hydra_context is not None
    setup_globals()
    configure_log(launcher.config.hydra.hydra_logging, launcher.config.hydra.verbose)
    hooks = importlib.import_module(launcher.hooks) if launcher.hooks else None
    sweep_dir = Path(str(launcher.config.hydra.sweep.dir))
    try:
        if setting_problems:
            raise SweepConfigError("\n".join(["the sweep was not started:", *(f"* {p}" for p in setting_problems),
                                              NOTHING_DONE]))
        jobs = plan_jobs(launcher.hydra_context.config_loader, launcher.config, job_overrides, initial_job_idx, hooks,
                         job_id)
    except SweepConfigError:
        remove_rejected_sweep_dir(sweep_dir, Path(str(launcher.config.get("results_root", "."))))
        raise
    sweep_dir.mkdir(parents=True, exist_ok=True)
    return hooks, jobs


def remove_rejected_sweep_dir(sweep_dir: Path, results_root: Path) -> None:
    """A rejected sweep leaves nothing on disk: remove the sweep dir when it holds no more than the
    multirun.yaml that Hydra's sweeper saved, then every folder above it and above the results root that
    is left empty (Hydra made them for this sweep); never the working directory."""
    if not sweep_dir.is_dir() or any(p.name != "multirun.yaml" for p in sweep_dir.iterdir()):
        return
    (sweep_dir / "multirun.yaml").unlink(missing_ok=True)
    for start in (sweep_dir, results_root):
        remove_empty_folders(start)


def remove_empty_folders(start: Path) -> None:
    """Remove `start` and each folder above it while it is empty, never the working directory."""
    folder = Path(os.path.normpath(start.absolute()))
    while folder.is_dir() and folder != Path.cwd() and not any(folder.iterdir()):
        folder.rmdir()
        folder = folder.parent


def plan_jobs(config_loader: ConfigLoader, config: DictConfig, job_overrides: Sequence[Sequence[str]],
              initial_job_idx: int, hooks: ModuleType | None, job_id: str) -> list[PlannedJob]:
    """Compose every job (Hydra's launch contract: load_sweep_config, job.id, job.num) and check it with
    the hooks; raise one SweepConfigError naming every invalid job."""
    jobs, problems = [], {}
    by_run: dict[str, list[PlannedJob]] = {}  # jobs by the run they would run
    for offset, overrides in enumerate(job_overrides):
        num = initial_job_idx + offset
        try:
            cfg = config_loader.load_sweep_config(config, list(overrides))
            with open_dict(cfg):
                cfg.hydra.job.id = job_id.format(num=num)
                cfg.hydra.job.num = num
            # a launcher without GPU slots (hydra/launcher=basic) has no gpus_per_job: its jobs take none of ours
            job = PlannedJob(num, list(overrides), cfg, int(OmegaConf.select(cfg, "hydra.launcher.gpus_per_job",
                                                                             default=0)))
            HydraConfig.instance().set_config(cfg)  # the hooks see the job's HydraConfig, as the job will
            run = hooks.validate_job(job.task_config()) if hooks is not None else None
        except Exception as err:  # gather every problem, then report them together
            problems.setdefault(str(err).strip(), []).append(f"#{num} {' '.join(overrides)}")
            continue
        jobs.append(job)
        if run is not None:
            by_run.setdefault(str(run), []).append(job)
    for run, same in by_run.items():
        if len(same) > 1:
            common = set.intersection(*(set(job.overrides) for job in same))
            problems.setdefault(f"these jobs would all be the one run {run}: they differ only in settings that do "
                                "not change what is computed, or in paths to files of identical content; drop "
                                "the duplicates from the grid", []).extend(
                # overrides Hydra read as one value (1e-2 and 0.01) have no difference to show: show them whole
                f"#{job.num} " + (" ".join(o for o in job.overrides if o not in common) or " ".join(job.overrides))
                for job in same)
    shared = set.intersection(*(set(job.overrides) for job in jobs)) if jobs else set()
    problems.update(inert_twin_problems([_loaded(same[0], shared) for same in by_run.values()]))  # one job per run
    if problems:
        raise SweepConfigError(describe_problems(problems, len(job_overrides)))
    return jobs


def _loaded(job: PlannedJob, shared: set[str]) -> tuple[str, RunConfig]:
    """The job's label (its overrides but those every job shares) and run config, loaded under its own
    HydraConfig (as the hooks checked it)."""
    HydraConfig.instance().set_config(job.config)
    return f"#{job.num} " + " ".join(o for o in job.overrides if o not in shared), load_run_config(job.task_config())


def describe_problems(problems: dict[str, list[str]], total: int) -> str:
    """One message for the whole grid: each distinct problem once, with the jobs it hits."""
    hit = sum(len(jobs) for jobs in problems.values())
    lines = [f"the sweep was not started: {hit} of {total} jobs cannot run."]
    for message, jobs in problems.items():
        shown = ", ".join(jobs[:3]) + (f" and {len(jobs) - 3} more" if len(jobs) > 3 else "")
        lines.append(f"* {shown}:")
        lines.extend("    " + line for line in message.splitlines())
    return "\n".join(lines)


def check_gpu_capacity(jobs: list[PlannedJob], capacity: int, where: str, fix: str) -> None:
    """Raise SweepConfigError when a job needs more GPUs than one place to run it has."""
    too_big = {}
    for job in jobs:
        if job.gpus > capacity:
            too_big.setdefault(f"needs {job.gpus} GPUs but {where} has {capacity}; {fix}", []).append(job.label)
        elif job.gpus < 0:
            too_big.setdefault(f"gpus_per_job={job.gpus} must be >= 0", []).append(job.label)
    if too_big:
        raise SweepConfigError(describe_problems(too_big, len(jobs)))


# --- the same check for launchers that do not run it themselves ---

BASIC_SWEEPER = "hydra._internal.core_plugins.basic_sweeper.BasicSweeper"
SELF_CHECKING_LAUNCHERS = (LocalGpusConf._target_, OpsdSlurmConf._target_)  # both start with prepare_sweep


class GridCheck(Callback):
    """`hydra.callbacks.grid_check` (conf/config.yaml): plan_jobs' check of the whole grid, before the sweeper
    starts any job, for a launcher that does not check it itself (hydra/launcher=basic, submitit's own). Such a
    launcher would run the grid's valid jobs first and stop at the first bad one, or run one run twice under two
    spellings (learning_rate=1e-2,0.01). Only Hydra's basic sweeper's grid is known before it starts; other
    sweepers (the race) choose their jobs as they go and leave the check to the launcher."""

    def __init__(self, hooks: str) -> None:
        self.hooks = hooks  # the module with validate_job (as hydra.launcher.hooks of our launchers)

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        if (config.hydra.launcher.get("_target_") in SELF_CHECKING_LAUNCHERS
                or config.hydra.sweeper.get("_target_") != BASIC_SWEEPER):
            return
        config_loader = GlobalHydra.instance().config_loader()
        try:
            plan_jobs(config_loader, config, basic_sweep_jobs(config, config_loader), 0,
                      importlib.import_module(self.hooks), job_id="{num}")
        except SweepConfigError as err:  # Hydra turns a callback's Exception into a warning and goes on: exit
            raise SystemExit(f"{err}\n{NOTHING_DONE}") from None
        finally:
            HydraConfig.instance().set_config(config)  # plan_jobs left the last job's config there


def basic_sweep_jobs(config: DictConfig, config_loader: ConfigLoader) -> list[list[str]]:
    """Every job's overrides as Hydra's basic sweeper will expand them (its params, then the command line), in
    its order, whatever its max_batch_size: the whole grid."""
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper

    params = [f"{key}={value}" for key, value in (config.hydra.sweeper.get("params") or {}).items()]
    arguments = params + list(OmegaConf.to_container(config.hydra.overrides.task, resolve=False))
    overrides = OverridesParser.create(config_loader=config_loader).parse_overrides(arguments)
    return BasicSweeper.split_arguments(overrides, max_batch_size=None)[0]
