"""The race with hydra.sweeper.pairing=seed, and the GPU-hours its records carry."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats as sps

from opsd_sweep.race import RaceSettings, RaceSpec, RaceState, RunResult, decide, run_race

SETTINGS = dict(min_seeds=3, max_seeds=12, seeds_per_round=1, alpha=0.05, stop_alpha=0.02, eliminate_alpha=0.05,
                anchor_alpha=0.01, target_half_width=0.0, budget_gpu_hours=None, confirm_seeds=2, first_seed=1,
                max_failures=2)
SEED_EFFECT = np.array([0.0, 6.0, -5.0, 3.0, -2.0, 4.0, -6.0, 1.0, 5.0, -3.0, 2.0, -4.0, 0.5, -1.0, 3.5])


def spec(pairing="seed", configs=("base", "a", "b"), **changes) -> RaceSpec:
    return RaceSpec(tuple(configs), "base", None, RaceSettings(**SETTINGS | changes, pairing=pairing))


def score(config: str, seed: int) -> float:
    """A world where the seed moves every config alike (common random numbers) and a is +2 points."""
    shift = {"base": 0.0, "a": 2.0, "b": -0.5}[config]
    wobble = np.random.default_rng([seed, len(config)]).normal(0, 0.4)
    return 50.0 + shift + SEED_EFFECT[seed - 1] + wobble


def results(seeds: int, configs=("base", "a", "b"), gpu_hours=lambda c: 1.0) -> list[RunResult]:
    return [RunResult(c, s, "race", "done", score(c, s), gpu_hours(c)) for c in configs for s in range(1, seeds + 1)]


def rows(step) -> dict[str, dict]:
    return {r["config"]: r for r in step.records if r["type"] == "decision"}


def test_paired_comparisons_are_the_paired_t_over_the_seeds_both_ran():
    done = results(3) + [RunResult("a", 4, "race", "done", score("a", 4), 1.0)]  # a is one seed ahead
    step = decide(done, RaceState(), spec(stop_alpha=1e-9))
    row = rows(step)
    a = np.array([score("a", s) for s in (1, 2, 3)])
    base = np.array([score("base", s) for s in (1, 2, 3)])
    b = np.array([score("b", s) for s in (1, 2, 3)])
    raw = [sps.ttest_rel(a, base).pvalue, sps.ttest_rel(b, base).pvalue]
    holm = np.minimum(1, np.maximum.accumulate(np.sort(raw) * [2, 1]))[np.argsort(np.argsort(raw))]
    assert row["a"]["delta_baseline"] == pytest.approx((a - base).mean())
    assert [row["a"]["p_baseline"], row["b"]["p_baseline"]] == pytest.approx(list(holm))
    unpaired = rows(decide(done, RaceState(), spec("none", stop_alpha=1e-9)))
    assert unpaired["a"]["delta_baseline"] == pytest.approx(np.append(a, score("a", 4)).mean() - base.mean())


def test_a_paired_race_decides_sooner_and_confirms_the_winner_beside_the_baseline():
    def execute(requests):
        return [RunResult(q.config, q.seed, q.phase, "done", score(q.config, q.seed), 1.5) for q in requests]

    finals, stops = {}, []
    for pairing in ("seed", "none"):
        records = []
        state, done = run_race(spec(pairing), execute, emit=records.append)
        stops.append(next(r for r in records if r["type"] == "stop"))
        finals[pairing] = ({r["config"]: r for r in records if r.get("phase") == "final"}, done)
    paired, runs_paired = finals["seed"]
    _, runs_unpaired = finals["none"]
    assert stops[0]["reason"].startswith("decided") and stops[0]["winner"] == "a"
    assert stops[0]["round"] < stops[1]["round"]  # the seed effect no longer hides +2 points
    confirm = sorted((r.config, r.seed) for r in runs_paired if r.phase == "confirm")
    first = stops[0]["round"] + SETTINGS["min_seeds"] + 1
    assert confirm == [("a", first), ("a", first + 1), ("base", first), ("base", first + 1)]
    assert paired["a"]["action"] == "better" and paired["a"]["confirm_n"] == 2
    assert paired["base"]["n"] == paired["a"]["n"]  # the baseline's confirmation seeds pair with the winner's
    assert all(r.config == "a" for r in runs_unpaired if r.phase == "confirm")


def test_decisions_and_the_stop_carry_runs_and_gpu_hours_spent():
    done = results(3, gpu_hours=lambda c: {"base": 0.5, "a": 1.25, "b": 2.0}[c])
    done.append(RunResult("b", 4, "race", "failed", None, 0.75, error="oom"))  # a failed run costs too
    step = decide(done, RaceState(), spec("none", max_seeds=3))  # stops at max_seeds
    row = rows(step)
    assert (row["a"]["runs"], row["a"]["gpu_hours"]) == (3, 3.75)
    assert (row["b"]["runs"], row["b"]["gpu_hours"]) == (4, 6.75)
    stop = next(r for r in step.records if r["type"] == "stop")
    assert (stop["runs"], stop["gpu_hours"]) == (10, 0.5 * 3 + 3.75 + 6.75)


def test_an_unknown_pairing_is_refused_naming_the_setting():
    with pytest.raises(ValueError, match=r"(?s)hydra.sweeper.*pairing='seeds' must be one of \['none', 'seed'\]"):
        spec("seeds")
