"""The race loop shared by the Hydra sweeper and the benchmark: decide -> run -> record, until done."""

from __future__ import annotations

from typing import Callable, Iterable, Optional, Sequence

from opsd_sweep.race.policy import RaceState, RunRequest, RunResult, decide
from opsd_sweep.race.settings import RaceSpec

Execute = Callable[[Sequence[RunRequest]], Sequence[RunResult]]


def run_race(spec: RaceSpec, execute: Execute, *, state: Optional[RaceState] = None,
             results: Iterable[RunResult] = (), emit: Callable[[dict], None] = lambda record: None,
             ) -> tuple[RaceState, list[RunResult]]:
    """Run a race to its end; resume from `state` and earlier `results` when given.

    Args:
        spec: configs, baseline, anchor and settings.
        execute: runs a batch of requests and returns one result per request (done or failed),
            in any order. The sweeper launches Hydra jobs; the benchmark draws simulated scores.
        emit: receives every record for race.jsonl (decisions, stops, run results, state snapshots).
    Returns:
        The final state and every run result.
    """
    state = state or RaceState()
    results = list(results)
    while True:
        step = decide(results, state, spec)
        for record in step.records:
            emit(record)
        if step.state != state:
            emit(step.state.to_record())
        state = step.state
        if state.phase == "done":
            return state, results
        new = list(execute(step.runs))
        if sorted((r.config, r.seed, r.phase) for r in new) != sorted((q.config, q.seed, q.phase) for q in step.runs):
            raise RuntimeError(f"execute returned results for {[(r.config, r.seed) for r in new]} but was asked "
                               f"for {[(q.config, q.seed) for q in step.runs]}; return one result per request")
        for result in new:
            emit(result.to_record())
        results.extend(new)
