"""Compose and check every job of a sweep before the first one starts (and a single job, as a grid of one)."""

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

from ._slots import discover_gpus
from .config import LocalGpusConf, OpsdSlurmConf


NOTHING_DONE = "Nothing was run or written."  # the last line of a refusal, as python -m opsd_sweep's own


# Compact: Hydra prints only the message of these errors, which says everything (no traceback).
class SweepConfigError(CompactHydraException, ValueError):
    """Some jobs of the sweep cannot run; nothing was started. The message lists each problem; `problems` maps
    each problem to the jobs it hits, named (describe_problems), for a caller that words the refusal itself."""

    def __init__(self, message: str, problems: dict[str, list[str]] | None = None):
        super().__init__(message)
        self.problems = problems or {}


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
    """Compose every job (Hydra's launch contract: load_sweep_config, job.id, job.num) and check them all
    (check_jobs); raise one SweepConfigError naming every invalid job."""
    jobs, failed = [], {}
    for offset, overrides in enumerate(job_overrides):
        num = initial_job_idx + offset
        try:
            cfg = config_loader.load_sweep_config(config, list(overrides))
            with open_dict(cfg):
                cfg.hydra.job.id = job_id.format(num=num)
                cfg.hydra.job.num = num
            jobs.append(PlannedJob(num, list(overrides), cfg, job_gpus(cfg)))
        except Exception as err:  # gather every problem, then report them together
            failed[num] = err
    return check_jobs(jobs, hooks, [list(o) for o in job_overrides], initial_job_idx, failed)


def job_gpus(cfg: DictConfig) -> int:
    """The GPUs a composed job asks for (hydra.launcher.gpus_per_job); a launcher without GPU slots
    (hydra/launcher=basic) has no gpus_per_job: its jobs take none of ours."""
    return int(OmegaConf.select(cfg, "hydra.launcher.gpus_per_job", default=0))


def check_jobs(jobs: list[PlannedJob], hooks: ModuleType | None, grid: list[list[str]], initial_job_idx: int = 0,
               failed: dict[int, Exception] | None = None) -> list[PlannedJob]:
    """Check composed jobs with the hooks (validate_job), refuse jobs that would run one run and grid points that
    differ only in inert settings; raise one SweepConfigError naming every problem with the jobs it hits. `grid`
    is every job's overrides (job initial_job_idx + i); `failed` the jobs that did not even compose, by number."""
    errors = dict(failed or {})
    by_run: dict[str, list[PlannedJob]] = {}  # jobs by the run they would run
    for job in jobs:
        try:
            HydraConfig.instance().set_config(job.config)  # the hooks see the job's HydraConfig, as the job will
            run = hooks.validate_job(job.task_config()) if hooks is not None else None
        except Exception as err:  # gather every problem, then report them together
            errors[job.num] = err
            continue
        if run is not None:
            by_run.setdefault(str(run), []).append(job)
    hit: dict[str, list[int]] = {}  # each problem, once, with every job it hits (a job may have several)
    for num in sorted(errors):
        for problem in problems_of(errors[num]):
            hit.setdefault(problem, []).append(num)
    problems = {problem: [name_jobs(nums, grid, initial_job_idx)] for problem, nums in hit.items()}
    refused = set(errors)
    for run, same in by_run.items():
        if len(same) > 1:
            common = set.intersection(*(set(job.overrides) for job in same))
            problems.setdefault(f"these jobs would all be the one run {run}: they differ only in settings that do "
                                "not change what is computed, or in paths to files of identical content; drop "
                                "the duplicates from the grid", []).extend(
                # overrides Hydra read as one value (1e-2 and 0.01) have no difference to show: show them whole
                f"#{job.num} " + (" ".join(o for o in job.overrides if o not in common) or " ".join(job.overrides))
                for job in same)
            refused.update(job.num for job in same)
    if len(by_run) > 1:  # twins in inert settings need two runs
        valid = [same[0] for same in by_run.values()]  # one job per run
        shared = set.intersection(*(set(job.overrides) for same in by_run.values() for job in same))
        labelled = {label: (job.num, run) for job in valid for label, run in [_loaded(job, shared)]}
        twins = inert_twin_problems([(label, run) for label, (_, run) in labelled.items()])
        problems.update(twins)
        refused.update(labelled[label][0] for labels in twins.values() for label in labels)
    if problems:
        raise SweepConfigError(describe_problems(problems, len(grid), len(refused)), problems)
    return [job for job in jobs if job.num not in errors]


def problems_of(err: Exception) -> list[str]:
    """The problems an error names: each item of a ConfigError's list ('invalid run config:\n  - a\n  - b'), so
    that each problem is reported with every job it hits and none under another's message; else its whole text."""
    text = str(err).strip()
    head, *items = text.split("\n  - ")
    return items if items and head.endswith(":") and "\n" not in head else [text]


def name_jobs(nums: list[int], grid: list[list[str]], initial_job_idx: int = 0) -> str:
    """The jobs one problem hits, named by the overrides it comes from: the ones they all have that not every job
    of the grid has ('learning_rate=-1 (#0, #1)'), else each job by its own overrides ('#3 seed=-1'); all jobs of a
    larger grid as 'every job (#0, #1)'; the one job of a grid of one by all its overrides."""
    overrides = {num: grid[num - initial_job_idx] for num in nums}
    if len(grid) == 1:
        return f"#{nums[0]} " + (" ".join(overrides[nums[0]]) or "(no overrides)")
    numbers = ", ".join(f"#{num}" for num in nums[:6]) + (f" and {len(nums) - 6} more" if len(nums) > 6 else "")
    if len(nums) == len(grid):
        return f"every job ({numbers})"
    everywhere = set.intersection(*map(set, grid))
    own = {num: [o for o in overrides[num] if o not in everywhere] or overrides[num] for num in nums}
    common = [o for o in own[nums[0]] if all(o in own[num] for num in nums)]
    if len(nums) > 1 and common:
        return f"{' '.join(common)} ({numbers})"
    shown = ", ".join(f"#{num} {' '.join(own[num])}" for num in nums[:3])
    return shown + (f" and {len(nums) - 3} more" if len(nums) > 3 else "")


def _loaded(job: PlannedJob, shared: set[str]) -> tuple[str, RunConfig]:
    """The job's label (its overrides but those every job shares) and run config, loaded under its own
    HydraConfig (as the hooks checked it)."""
    HydraConfig.instance().set_config(job.config)
    return f"#{job.num} " + " ".join(o for o in job.overrides if o not in shared), load_run_config(job.task_config())


def describe_problems(problems: dict[str, list[str]], total: int, refused: int | None = None) -> str:
    """One message for the whole grid: each distinct problem once, with the jobs it hits (`refused` jobs in all;
    by default one per name)."""
    hit = refused if refused is not None else sum(len(jobs) for jobs in problems.values())
    lines = [f"the sweep was not started: {hit} of {total} jobs cannot run."]
    for message, jobs in problems.items():
        shown = ", ".join(jobs[:3]) + (f" and {len(jobs) - 3} more" if len(jobs) > 3 else "")
        lines.append(f"* {shown}:")
        lines.extend("    " + line for line in message.splitlines())
    return "\n".join(lines)


def describe_run_problems(problems: dict[str, list[str]]) -> str:
    """The same problems for a single job (no -m): there is one job, so each problem alone."""
    lines = ["the run was not started:"]
    for message in problems:
        first, *rest = message.splitlines()
        lines += [f"* {first}", *("  " + line for line in rest)]
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
        raise SweepConfigError(describe_problems(too_big, len(jobs)), too_big)


# --- the same check for launchers that do not run it themselves ---

BASIC_SWEEPER = "hydra._internal.core_plugins.basic_sweeper.BasicSweeper"
SELF_CHECKING_LAUNCHERS = (LocalGpusConf._target_, OpsdSlurmConf._target_)  # both start with prepare_sweep


class GridCheck(Callback):
    """`hydra.callbacks.grid_check` (conf/config.yaml): plan_jobs' check of the whole grid, before the sweeper
    starts any job, for a launcher that does not check it itself (hydra/launcher=basic, submitit's own). Such a
    launcher would run the grid's valid jobs first and stop at the first bad one, or run one run twice under two
    spellings (learning_rate=1e-2,0.01). Only Hydra's basic sweeper's grid is known before it starts; other
    sweepers (the race) choose their jobs as they go and leave the check to the launcher.

    A single job (no -m) is checked as a grid of one, before Hydra makes its output dir: the same checks (the
    hooks' validate_job, with the pre-flight of its sources) and, as the local launcher checks each job of a
    sweep, its GPUs (hydra.launcher.gpus_per_job) against this machine's, unless `single_job_gpus` is false (the
    standalone evaluation uses the GPUs it sees). The problems are the ones `-m` names."""

    def __init__(self, hooks: str, single_job_gpus: bool) -> None:
        self.hooks = hooks  # the module with validate_job (as hydra.launcher.hooks of our launchers)
        self.single_job_gpus = single_job_gpus

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

    def on_run_start(self, config: DictConfig, **kwargs: Any) -> None:
        overrides = list(config.hydra.overrides.task)
        job = PlannedJob(0, overrides, config, job_gpus(config))
        problems: dict[str, list[str]] = {}
        try:
            check_jobs([job], importlib.import_module(self.hooks), [overrides])
        except SweepConfigError as err:
            problems |= err.problems
        finally:
            HydraConfig.instance().set_config(config)
        if self.single_job_gpus and job.gpus:
            gpus = discover_gpus(None)  # what the cycle will use: CUDA_VISIBLE_DEVICES, else every GPU
            try:
                check_gpu_capacity([job], len(gpus), f"this machine (GPUs {gpus})",
                                   "lower the job's GPU count (train.num_gpus and the batch sizes) or give it more "
                                   "GPUs with CUDA_VISIBLE_DEVICES")
            except SweepConfigError as err:
                problems |= err.problems
        if problems:  # as above: exit, before any compute and before any file is written
            raise SystemExit(f"{describe_run_problems(problems)}\n{NOTHING_DONE}")


def basic_sweep_jobs(config: DictConfig, config_loader: ConfigLoader) -> list[list[str]]:
    """Every job's overrides as Hydra's basic sweeper will expand them (its params, then the command line), in
    its order, whatever its max_batch_size: the whole grid."""
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper

    params = [f"{key}={value}" for key, value in (config.hydra.sweeper.get("params") or {}).items()]
    arguments = params + list(OmegaConf.to_container(config.hydra.overrides.task, resolve=False))
    overrides = OverridesParser.create(config_loader=config_loader).parse_overrides(arguments)
    return BasicSweeper.split_arguments(overrides, max_batch_size=None)[0]
