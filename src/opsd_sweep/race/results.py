"""Read a finished run back from its run dir (status.json, eval/eval.json) as the race sees it."""

from __future__ import annotations

import json
from pathlib import Path

from omegaconf.errors import OmegaConfBaseException

from opsd_sweep.collapse import collapse_of_run
from opsd_sweep.race.policy import RunResult
from opsd_sweep.run.rundir import RunDir, read_json


def gpu_hours_of(status: dict) -> float:
    """Total GPU-hours in a status.json: a number, or a dict of per-phase numbers; 0 when absent."""
    value = status.get("gpu_hours") or 0.0
    return float(sum(value.values())) if isinstance(value, dict) else float(value)


def read_run_result(run_dir: str | Path, config: str, seed: int, phase: str, metric: str) -> RunResult:
    """The run's score (eval.json metrics[metric]) and, if it collapsed (opsd_sweep.collapse), the step.

    A run stopped at its collapse (state collapsed, train.stop_on_collapse) is a collapsed result: a finding
    about its config, with no score. A run that is not done otherwise, or whose eval.json is missing or
    lacks the metric, is a failed result whose error says why (the race replaces it with a fresh seed).
    """
    run = RunDir(Path(run_dir))
    status = run.read_status()
    base = dict(config=config, seed=seed, phase=phase, gpu_hours=gpu_hours_of(status), run_dir=str(run.path))
    if status.get("state") == "collapsed":
        return RunResult(state="collapsed", collapse_step=_collapse_step(run, status), **base)
    if status.get("state") != "done":
        error = status.get("error")
        message = error.get("message") if isinstance(error, dict) else error
        return RunResult(state="failed", error=message or f"state {status.get('state', 'unknown')!r} in {run.status}",
                         **base)
    try:
        evaluation = read_json(run.eval_json)
        score = float(evaluation["metrics"][metric])
    except (FileNotFoundError, json.JSONDecodeError, KeyError) as err:
        return RunResult(state="failed", error=f"{run.eval_json}: no metric {metric!r} ({err!r})", **base)
    return RunResult(state="done", score=score, collapse_step=_collapse_step(run, status), **base)


def _collapse_step(run: RunDir, status: dict) -> int | None:
    """Where the run collapsed: the step the trainer stopped at, else the rule applied to its metrics.jsonl
    (a run that trained on through its collapse); None when it did not collapse or cannot be judged."""
    stopped = status.get("collapse")
    if isinstance(stopped, dict) and stopped.get("step") is not None:
        return int(stopped["step"])
    try:
        found = collapse_of_run(run)
    except (OSError, ValueError, KeyError, TypeError, OmegaConfBaseException):  # config.yaml: no usable rule
        return None
    return found.step if found else None
