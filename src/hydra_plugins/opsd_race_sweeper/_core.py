"""The race as a Hydra sweep: grid from the sweep overrides, runs through Hydra's launcher, race.jsonl.

Follows Hydra's sweeper contract: parse the overrides, expand only sweep overrides, save
multirun.yaml, validate every batch before launching it, advance the job index across batches.
A failed job is a failed run of the race (JobReturn.status is checked; return_value is only read from
completed jobs), never the end of the sweep; a collapsed run is one of its config's seeds (race.policy).
"""

from __future__ import annotations

import itertools
import logging
import time
from pathlib import Path
from typing import Any, Callable, Sequence

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.utils import JobReturn, JobStatus
from omegaconf import OmegaConf

from hydra_plugins.opsd_local_gpus._grid import NOTHING_DONE, SweepConfigError, remove_empty_folders
from hydra_plugins.opsd_race_sweeper._metric_scope import race_metric_problem
from opsd_sweep.run.collapse import collapse_count
from opsd_sweep.inference.arms import Anchor
from opsd_sweep.race import RaceSettings, RaceSpec, RunRequest, RunResult, run_race
from opsd_sweep.race.log import RaceLog
from opsd_sweep.race.results import read_run_result
from opsd_sweep.run.claims import current_owner, owner_alive
from opsd_sweep.run.rundir import RunDir
from opsd_sweep.selector import select_config

log = logging.getLogger(__name__)

SETTING_KEYS = ("min_seeds", "max_seeds", "seeds_per_round", "alpha", "stop_alpha", "eliminate_alpha", "anchor_alpha",
                "target_half_width", "budget_gpu_hours", "confirm_seeds", "first_seed", "max_failures",
                "futility_effect", "collapsed_score", "pairing")
SEED_ERROR = "the race chooses seeds: remove seed=... (hydra.sweeper.first_seed sets the first one)"
ONE_FOLDER = ("group", "results_root")  # race.jsonl lives in <results_root>/<group>: one value each


def race_sweep(sweeper, arguments: list[str]) -> list[dict]:
    """Run (or resume) the race of the grid in `arguments`; returns the final decision records."""
    config = sweeper.config
    fixed, grid, spec = plan_race(sweeper, arguments)
    metric = sweeper.settings["metric"]
    race_log = RaceLog(Path(config.results_root).expanduser().absolute() / config.group / "race.jsonl")
    try:
        state, results = race_log.start_or_resume(spec, metric)
    except ValueError as err:  # the folder's log is another race's: refused before the sweep dir is made
        refuse_if(str(err))
        raise
    sweep_dir = Path(config.hydra.sweep.dir)
    sweep_dir.mkdir(parents=True, exist_ok=True)
    OmegaConf.save(config, sweep_dir / "multirun.yaml")
    if results:
        log.info(f"race: resuming from {race_log.path}: {len(results)} runs, round {state.round}, phase {state.phase}")
    finals: list[dict] = []

    def emit(record: dict) -> None:
        race_log.append(record)
        _print(record)
        if record.get("phase") == "final":
            finals.append(record)

    launch = LaunchRuns(sweeper, fixed, grid, metric)
    try:
        state, _ = run_race(spec, launch, state=state, results=results, emit=emit)
    except SweepConfigError:  # the launcher refused the first batch: a new race leaves no log (it says so)
        if len(race_log.records()) == 1:
            race_log.path.unlink()
            remove_empty_folders(race_log.path.parent)
        raise
    log.info(f"race: done ({state.stop_reason}); winner {state.winner!r}; log {race_log.path}")
    return finals


def plan_race(sweeper, arguments: Sequence[str]) -> tuple[list[str], dict[str, tuple[str, ...]], RaceSpec]:
    """(fixed overrides, grid, spec) of the race, checked before anything runs or is written: a seed or
    one-folder axis, invalid hydra.sweeper.* settings, a baseline that picks no config or several, a metric
    whose meaning changes with the runs' K. Every problem found goes into one SweepConfigError, which Hydra
    prints as its message alone (as the launcher's grid check does), not as a traceback."""
    problems: list[str] = []

    def checked(step: Callable[[], Any]) -> Any:
        try:
            return step()
        except ValueError as err:
            problems.append(str(err).strip())
            return None

    parser = OverridesParser.create(config_loader=sweeper.hydra_context.config_loader)
    fixed, grid = checked(lambda: expand_grid(parser, arguments)) or ([], {})
    metric = sweeper.settings["metric"]
    settings = checked(lambda: RaceSettings(**{key: sweeper.settings[key] for key in SETTING_KEYS}))
    spec = None
    if grid:  # the rest needs the grid
        baseline = checked(lambda: find_baseline(sweeper.settings["baseline"], grid))
        spec = checked(lambda: RaceSpec(tuple(grid), baseline, _anchor(sweeper.config, metric), settings))
        if problem := race_metric_problem(metric, grid_evals(sweeper, fixed, grid)):
            problems.append(problem)
    refuse_if(*problems)
    return fixed, grid, spec


def refuse_if(*problems: str) -> None:
    """Raise the SweepConfigError that refuses the race, one bullet per problem (none: go on)."""
    if problems:
        bullets = ["* " + problem.replace("\n", "\n  ") for problem in problems]
        raise SweepConfigError("\n".join(["the race was not started:", *bullets, NOTHING_DONE]))


def grid_evals(sweeper, fixed: list[str], grid: dict[str, tuple[str, ...]]) -> dict[str, Any]:
    """{config label: its eval node}, each config composed as the launcher will compose its jobs (a profile or
    eval group on an axis included). A config that does not compose is left to the launcher, which reports it
    with its jobs."""
    evals = {}
    for label, overrides in grid.items():
        try:
            evals[label] = sweeper.hydra_context.config_loader.load_sweep_config(
                sweeper.config, [*fixed, *overrides]).eval
        except Exception:  # noqa: BLE001 - any composition error: the launcher reports it as the job's failure
            continue
    return evals


def expand_grid(parser: OverridesParser, arguments: Sequence[str]) -> tuple[list[str], dict[str, tuple[str, ...]]]:
    """(overrides every job gets, {config label: its sweep overrides}) in grid order."""
    fixed, axes = [], []
    for override in parser.parse_overrides(list(arguments)):
        key = override.get_key_element()
        if key == "seed":
            raise ValueError(f"hydra/sweeper=race: {override.input_line!r}: {SEED_ERROR}")
        if key in ONE_FOLDER and override.is_sweep_override():
            raise ValueError(f"hydra/sweeper=race: {override.input_line!r}: one race per results folder; "
                             f"give {key} a single value and start one race per folder")
        if not override.is_sweep_override():
            fixed.append(f"{key}={override.get_value_element_as_str()}")
        elif override.is_discrete_sweep():
            axes.append([f"{key}={value}" for value in override.sweep_string_iterator()])
        else:
            raise ValueError(f"hydra/sweeper=race: {override.input_line!r} is a {override.value_type.name} sweep; "
                             "list the values instead (a,b,c or range(...))")
    grid = {(" ".join(combo) or "default"): combo for combo in itertools.product(*axes)}
    return fixed, grid


def find_baseline(baseline: str | None, grid: dict[str, tuple[str, ...]]) -> str | None:
    """The one config of the grid that the selector `baseline` picks (opsd_sweep.selector: the summary's
    --baseline syntax), matched on each config's sweep overrides by value; None: no baseline."""
    if baseline is None:
        return None
    configs = {label: dict(o.split("=", 1) for o in overrides) for label, overrides in grid.items()}
    return select_config(baseline, configs, "hydra.sweeper.baseline")


def _anchor(config, metric: str) -> Anchor | None:
    """The run config's published anchor (conf/anchor/) when it reports the metric the race decides on."""
    section = config.get("anchor")
    if section is None or section.get("metric") != metric:
        return None
    return Anchor.of(section)


class LaunchRuns:
    """The race's `execute`: one Hydra launcher batch per request list, read back from the run dirs."""

    def __init__(self, sweeper, fixed: list[str], grid: dict[str, tuple[str, ...]], metric: str):
        self.sweeper, self.fixed, self.grid, self.metric = sweeper, fixed, grid, metric
        self.job_index = 0

    def __call__(self, requests: Sequence[RunRequest]) -> list[RunResult]:
        batch = [[*self.fixed, *self.grid[q.config], f"seed={q.seed}"] for q in requests]
        self.sweeper.validate_batch_is_legal(batch)
        log.info(f"race: launching {len(batch)} runs: " + ", ".join(f"{q.config} s{q.seed}" for q in requests))
        returns = self.sweeper.launcher.launch(batch, initial_job_idx=self.job_index)
        self.job_index += len(batch)
        return [self._result(q, r) for q, r in zip(requests, returns)]

    def _result(self, request: RunRequest, job: JobReturn) -> RunResult:
        where = dict(config=request.config, seed=request.seed, phase=request.phase)
        value: Any = job._return_value
        if job.status != JobStatus.COMPLETED:
            # A launcher that marks failed or unfinished runs FAILED keeps the task's answer (a run that
            # failed, or failed before): read that run back; else the task raised: record it, go on.
            value = getattr(value, "answer", None)
            if not isinstance(value, dict) or "run_dir" not in value:
                return RunResult(state="failed", error=f"job failed: {job._return_value!r}", **where)
        if not isinstance(value, dict) or "run_dir" not in value:
            return RunResult(state="failed", error=f"the task returned {value!r}, not a run_cycle dict", **where)
        if value.get("state") == "skipped" and value.get("reason") == "claimed":
            self._wait_for_owner(RunDir(Path(value["run_dir"])))
        return read_run_result(value["run_dir"], metric=self.metric,
                               collapsed_score=self.sweeper.settings["collapsed_score"], **where)

    def _wait_for_owner(self, run_dir: RunDir) -> None:
        """Another sweep runs this run right now: wait until it lets go of the claim."""
        log.info(f"race: {run_dir.path.name} is being run by another sweep; waiting for it")
        while (owner := current_owner(run_dir)) is not None and owner_alive(owner):
            time.sleep(self.sweeper.settings["claim_poll_seconds"])


def _print(record: dict) -> None:
    kind = record["type"]
    if kind == "decision" and "mean" in record:
        ci = record["ci"]
        ci_text = f"[{ci[0]:.2f}, {ci[1]:.2f}]" if ci[0] is not None else "[-]"
        p = " ".join(f"p_{k}={record[f'p_{k}']:.3g}" for k in ("best", "baseline", "anchor")
                     if record.get(f"p_{k}") is not None)
        steps = record.get("collapse_steps") or []
        collapsed = f" ({collapse_count(record['seeds'], steps)}; scored n={record['n']})" if steps else ""
        spent = f", {record['runs']} runs {record['gpu_hours']:.2f} GPU-h so far" if "gpu_hours" in record else ""
        log.info(f"race round {record['round']} ({record['phase']}): {record['config']}: n={record['n']} "
                 f"mean={record['mean']:.2f} CI {ci_text} {p} -> {record['action']}{collapsed}{spent}")
    elif kind == "decision":
        log.info(f"race round {record['round']}: {record['config']} -> {record['action']} ({record.get('reason')})")
    elif kind == "stop":
        spent = f"; {record['runs']} runs, {record['gpu_hours']:.2f} GPU-hours so far" if "gpu_hours" in record else ""
        log.info(f"race: stop after round {record['round']}: {record['reason']}; winner {record['winner']!r}{spent}")
    elif kind == "run" and record["state"] == "collapsed":
        log.info(f"race: run {record['config']} s{record['seed']} collapsed at step {record['collapse_step']}"
                 ": a finding about the config, counted as one of its seeds and not replaced (no score)")
    elif kind == "run" and record["state"] != "done":
        log.info(f"race: run {record['config']} s{record['seed']} failed: {record['error']}")
