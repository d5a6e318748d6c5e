"""Read a finished run back as the race sees it: through its run record (opsd_sweep.run.record), so the
race counts exactly the scores the summary counts."""

from __future__ import annotations

from pathlib import Path

from opsd_sweep.race.policy import RunResult
from opsd_sweep.run.record import RunRecord, UnreadableRun


def read_run_result(run_dir: str | Path, config: str, seed: int, phase: str, metric: str,
                    collapsed_score: float | None = None) -> RunResult:
    """The run's score (eval.json metrics[metric], when it counts) and, if it collapsed, the step.

    A run stopped at its collapse (state collapsed, train.stop_on_collapse) is a collapsed result: a finding
    about its config, scored at `collapsed_score` (hydra.sweeper.collapsed_score) when declared, else with no
    score (its config then leaves the race: judged on its survivors it could look better than it is). A run
    that does not count otherwise (not done, no eval.json, scores known to be wrong) or lacks the metric is a
    failed result whose error says why (the race replaces it with a fresh seed).
    """
    base = dict(config=config, seed=seed, phase=phase, run_dir=str(run_dir))
    try:
        record = RunRecord.read(Path(run_dir))
    except (UnreadableRun, OSError) as err:
        return RunResult(state="failed", error=f"{run_dir}: {err}", **base)
    base["gpu_hours"] = record.gpu_hours.get("gpu_hours.total", 0.0)
    collapse_step = record.collapse.step
    if record.collapse.stopped:
        return RunResult(state="collapsed", score=collapsed_score, collapse_step=collapse_step, **base)
    if record.state != "done":
        error = record.status.get("error")
        message = error.get("message") if isinstance(error, dict) else error
        return RunResult(state="failed", error=message or f"state {record.state!r} in {record.run_dir.status}",
                         **base)
    if not record.counts:
        return RunResult(state="failed", error=f"{record.path}: {record.left_out}", **base)
    score = record.score(metric)
    if score is None:
        return RunResult(state="failed", error=f"{record.run_dir.eval_json}: no metric {metric!r}", **base)
    return RunResult(state="done", score=score, collapse_step=collapse_step, **base)
