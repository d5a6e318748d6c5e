"""Read a finished run back from its run dir (status.json, eval/eval.json) as the race sees it."""

from __future__ import annotations

import json
from pathlib import Path


from opsd_sweep.race.policy import RunResult
from opsd_sweep.run.rundir import RunDir, read_json


def gpu_hours_of(status: dict) -> float:
    """Total GPU-hours in a status.json: a number, or a dict of per-phase numbers; 0 when absent."""
    value = status.get("gpu_hours") or 0.0
    return float(sum(value.values())) if isinstance(value, dict) else float(value)


def read_run_result(run_dir: str | Path, config: str, seed: int, phase: str, metric: str) -> RunResult:
    """The run's score (eval.json metrics[metric]) and, for avg_at_n, per-problem scores in percent.

    A run that is not done, or whose eval.json is missing or lacks the metric, is a failed result
    whose error says why (the race replaces it with a fresh seed).
    """
    run = RunDir(Path(run_dir))
    status = run.read_status()
    base = dict(config=config, seed=seed, phase=phase, gpu_hours=gpu_hours_of(status), run_dir=str(run.path))
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
    return RunResult(state="done", score=score, **base)
