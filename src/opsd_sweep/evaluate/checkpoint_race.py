"""eval.checkpoints=race over a run's saved checkpoints: the rounds of race_rule on real evaluations.

Each round evaluates a checkpoint into its own eval dir (eval/checkpoint-<step>/; the final one eval/)
with the round's samples per problem, and evaluate() draws only the samples it lacks: the shards of
earlier rounds stay until the checkpoint has all eval.n_samples or leaves the race. eval.json's n_samples
is how many samples per problem a checkpoint got, and eval/checkpoint_race.json records the rounds. A
rerun replays the race from the eval.json files: the same samples give the same decisions, and nothing
is drawn twice.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np

from opsd_sweep.config import RunConfig
from opsd_sweep.evaluate.race_rule import race, schedule
from opsd_sweep.run.rundir import RunDir, atomic_write_json

RACE_RECORD = "checkpoint_race.json"  # in the run's eval dir


def race_stages(run: RunConfig) -> tuple[int, ...]:
    """The samples per problem after each round of eval.checkpoints=race; () for the other modes."""
    e = run.eval
    if e.checkpoints != "race":
        return ()
    r = e.checkpoint_race
    return tuple(schedule(r.first_samples, r.samples_per_round, e.n_samples))


def discard_partial(eval_dir: Path) -> None:
    """Remove what an evaluation keeps for a later round: its shards and a merged model."""
    shutil.rmtree(eval_dir / "shards", ignore_errors=True)
    shutil.rmtree(eval_dir / "merged", ignore_errors=True)


def correct_counts(evaluation: dict, samples: int) -> np.ndarray:
    """Correct samples per problem among each problem's first `samples` samples of an eval.json, shape (P,)."""
    return np.array([sum(s["correct"] for s in p["samples"][:samples]) for p in evaluation["problems"]])


def race_checkpoints(run: RunConfig, run_dir: RunDir,
                     evaluate_at: Callable[[Path, Path, int], dict]) -> dict[int, dict]:
    """Race every saved checkpoint; return the eval.json of each one before the final, by step.

    `evaluate_at(checkpoint, eval_dir, samples)` evaluates with that many samples per problem. The final
    checkpoint takes part like the others; the caller then gives it all eval.n_samples (the run's result).
    """
    checkpoints = run_dir.checkpoints()
    steps = [step for step, _ in checkpoints]
    dirs = [run_dir.checkpoint_eval_dir(step) for step in steps[:-1]] + [run_dir.eval_dir]
    results: dict[int, dict] = {}

    def correct(c: int, samples: int) -> np.ndarray:
        results[c] = evaluate_at(checkpoints[c][1], dirs[c], samples)
        return correct_counts(results[c], samples)

    r = run.eval.checkpoint_race
    stages = list(race_stages(run))
    outcome = race(len(checkpoints), stages, r.alpha, correct)
    for c, samples in enumerate(outcome.samples[:-1]):
        if samples < run.eval.n_samples:  # out of the race: its leftover shards will never be read
            discard_partial(dirs[c])
    rounds = [record | {"checkpoints": [steps[c] for c in record["checkpoints"]],
                        "stopped": [steps[c] for c in record.get("stopped", [])]} for record in outcome.rounds]
    atomic_write_json(run_dir.eval_dir / RACE_RECORD, {
        "stages": stages, "alpha": r.alpha, "n_problems": len(results[0]["problems"]),
        # what each checkpoint ends with: the final one gets all eval.n_samples next, whatever its race
        "samples": {str(step): samples for step, samples in zip(steps, [*outcome.samples[:-1], run.eval.n_samples])},
        "rounds": rounds})
    print(f"[evaluate] checkpoint race: samples per problem {dict(zip(steps, outcome.samples))} "
          f"(of {run.eval.n_samples}); the final checkpoint gets all {run.eval.n_samples}", flush=True)
    return {step: results[c] for c, step in enumerate(steps[:-1])}
