"""Failed runs of the race's confirmation phase do not rewrite the race's verdict: `max_failures` counts a config's
failed runs per phase. max_failures failed race runs take a config out of the race; max_failures failed confirmation
runs end its confirmation (no more fresh seeds), and the winner stays the winner, judged on the runs that finished,
with the failed confirmation runs counted in its final row. Before this, one race failure plus one confirmation
failure (max_failures=2) dropped the declared winner from its own final verdict."""

from __future__ import annotations

from opsd_sweep.race import RaceSettings, RaceSpec, RaceState, RunResult, decide
from opsd_sweep.summarize.races import outcome_line, race_from_records

SETTINGS = dict(min_seeds=3, max_seeds=8, seeds_per_round=1, alpha=0.05, stop_alpha=0.02, eliminate_alpha=0.05,
                anchor_alpha=0.01, target_half_width=0.0, budget_gpu_hours=None, confirm_seeds=2, first_seed=1,
                max_failures=2)
SPEC = RaceSpec(("base", "a", "b"), "base", None, RaceSettings(**SETTINGS))
RACE_SCORES = {"base": {1: 50.0, 2: 51.0, 3: 50.5}, "a": {1: 40.0, 2: 41.0, 3: 40.5}, "b": {1: 60.0, 3: 61.0, 4: 62.0}}


def race_with_one_failure_of_the_winner() -> list[RunResult]:
    """b, the clear winner, failed once in the race (seed 2, replaced by seed 4)."""
    done = [RunResult(c, seed, "race", "done", score, 1.0) for c, runs in RACE_SCORES.items()
            for seed, score in runs.items()]
    return done + [RunResult("b", 2, "race", "failed", error="node lost")]


def stopped() -> tuple[list[RunResult], RaceState]:
    results = race_with_one_failure_of_the_winner()
    step = decide(results, RaceState(), SPEC)
    assert step.state.phase == "confirm" and step.state.winner == "b", step.state
    assert [(q.config, q.seed, q.phase) for q in step.runs] == [("b", 5, "confirm"), ("b", 6, "confirm")]
    return results, step.state


def confirm_failed(seed: int) -> RunResult:
    return RunResult("b", seed, "confirm", "failed", error="OOM")


def test_a_confirmation_failure_after_a_race_failure_keeps_the_winner_and_gets_a_fresh_seed():
    results, state = stopped()
    step = decide(results + [confirm_failed(5)], state, SPEC)
    assert step.state.dropped == {} and step.state.winner == "b" and step.state.phase == "confirm"
    assert not [r for r in step.records if r.get("action") == "drop"], step.records
    assert [(q.config, q.seed, q.phase) for q in step.runs] == [("b", 6, "confirm"), ("b", 7, "confirm")]


def test_max_failures_in_the_confirmation_end_it_and_the_race_verdict_stands():
    results, state = stopped()
    confirm = [confirm_failed(5), RunResult("b", 6, "confirm", "done", 61.5, 1.0), confirm_failed(7)]
    step = decide(results + confirm, state, SPEC)
    assert step.state.phase == "done" and step.runs == [] and step.state.dropped == {}
    final = {r["config"]: r for r in step.records if r.get("phase") == "final"}
    assert set(final) == {"base", "b"}  # a was eliminated in the race
    winner = final["b"]
    assert winner["winner"] and winner["action"] == "better", winner
    assert winner["confirm_n"] == 1 and winner["confirm_failed"] == 2 and winner["n"] == 4  # 3 race + 1 confirm
    assert "confirm_failed" not in final["base"]


def test_a_race_that_fails_max_failures_times_still_leaves_the_race():
    """The race phase's rule is unchanged: a config with max_failures failed race runs leaves it."""
    results = race_with_one_failure_of_the_winner() + [RunResult("b", 5, "race", "failed", error="node lost")]
    step = decide(results, RaceState(), SPEC)
    assert step.state.dropped == {"b": "2 failed runs"}


def test_the_summary_says_the_confirmation_ended_on_failures():
    results, state = stopped()
    confirm = [confirm_failed(5), RunResult("b", 6, "confirm", "done", 61.5, 1.0), confirm_failed(7)]
    records = [{"type": "race", "configs": list(SPEC.configs), "baseline": "base", "metric": "avg_at_n",
                "settings": SETTINGS}]
    records += [r.to_record() for r in results + confirm]
    records += decide(results, RaceState(), SPEC).records + decide(results + confirm, state, SPEC).records
    line = outcome_line(race_from_records(__import__("pathlib").Path("race.jsonl"), records))
    assert "confirmation: 1 of 2 fresh seeds, ended after 2 failed runs" in line, line
