"""The racing policy as pure functions: hand-built result tables in, decisions and next runs out."""

from __future__ import annotations

import math

import numpy as np
import pytest

from scipy import stats as sps

from opsd_sweep.inference.arms import Anchor, Arm, RunSD, compare_arms
from opsd_sweep.inference.stats import holm, pooled_sd
from opsd_sweep.race import RaceSettings, RaceSpec, RaceState, RunResult, decide, run_race
from opsd_sweep.race.policy import live_configs
from opsd_sweep.race.compare import ConfigSummary, Pooled, compare

SETTINGS = dict(min_seeds=3, max_seeds=8, seeds_per_round=1, alpha=0.05, stop_alpha=0.02, eliminate_alpha=0.05,
                anchor_alpha=0.01, target_half_width=0.0, budget_gpu_hours=None, confirm_seeds=2, first_seed=1,
                max_failures=2)
ANCHOR = Anchor("paper", "avg_at_n", 54.22, 1.48, 5)


def spec(configs=("base", "a", "b"), baseline="base", anchor=ANCHOR, **changes) -> RaceSpec:
    return RaceSpec(tuple(configs), baseline, anchor, RaceSettings(**SETTINGS | changes))


def done(config, seed, score, phase="race", gpu_hours=1.0):
    return RunResult(config, seed, phase, "done", float(score), gpu_hours)


def table(scores: dict[str, list[float]]) -> list[RunResult]:
    return [done(c, i + 1, s) for c, values in scores.items() for i, s in enumerate(values)]


def decisions(step) -> dict[str, dict]:
    return {r["config"]: r for r in step.records if r["type"] == "decision"}


def test_first_round_asks_min_seeds_of_every_config_and_tests_nothing_before():
    step = decide([], RaceState(), spec())
    assert sorted((q.config, q.seed) for q in step.runs) == [(c, s) for c in ("a", "b", "base") for s in (1, 2, 3)]
    partial = table({"base": [50, 51], "a": [40, 41, 40], "b": [50, 52, 51]})
    step = decide(partial, RaceState(), spec())
    assert [(q.config, q.seed) for q in step.runs] == [("base", 3)] and step.records == []


def test_round_statistics_are_pooled_holm_adjusted_and_eliminate_the_clearly_worse():
    scores = {"base": [50.0, 53.0, 51.0], "a": [40.0, 43.0, 41.5], "b": [52.0, 55.0, 50.0]}
    s = spec()
    step = decide(table(scores), RaceState(), s)
    rows = decisions(step)
    sd, df = pooled_sd([np.array(v) for v in scores.values()])
    assert all(r["pooled_sd"] == pytest.approx(sd) for r in rows.values())
    summaries = {c: ConfigSummary(c, np.array(v)) for c, v in scores.items()}
    pooled = Pooled(sd * sd, df)
    assert rows["b"]["best"] and rows["b"]["p_best"] is None
    raw_best = [compare(summaries["a"], summaries["b"], pooled, 0.95).p]  # base is never tested for elimination
    assert rows["a"]["p_best"] == pytest.approx(holm(raw_best)[0])
    raw_base = [compare(summaries[c], summaries["base"], pooled, 0.95).p for c in ("a", "b")]
    assert [rows["a"]["p_baseline"], rows["b"]["p_baseline"]] == pytest.approx(list(holm(raw_base)))
    ci = rows["b"]["ci"]
    assert ci[1] - ci[0] == pytest.approx(2 * 2.446912 * sd / math.sqrt(3), rel=1e-5)  # t(0.975, df=6)
    assert rows["a"]["action"] == "eliminate" and rows["b"]["action"] == rows["base"]["action"] == "continue"
    assert step.state.eliminated == {"a": 0} and step.state.round == 1
    assert sorted((q.config, q.seed) for q in step.runs) == [("b", 4), ("base", 4)]


def test_the_baseline_is_never_eliminated():
    step = decide(table({"base": [40.0, 41.0, 40.5], "a": [55.0, 56.0, 55.5], "b": [55.2, 56.1, 55.0]}),
                  RaceState(), spec(stop_alpha=1e-9))
    assert decisions(step)["base"]["action"] == "continue" and "base" not in step.state.eliminated


def test_the_race_compares_as_the_summary_does_with_a_pooled_sd():
    """One model for racing and verdicts: the race's comparison is the summary's --pool-sd comparison
    of run scores (inference.arms.compare_arms), and with two arms it is scipy's pooled two-sample t."""
    rng = np.random.default_rng(1)
    a, b = rng.normal(52, 3, 5), rng.normal(50, 3, 7)
    arm, ref = ConfigSummary("a", a), ConfigSummary("b", b)
    pooled = Pooled.of([arm, ref])
    ours = compare(arm, ref, pooled, 0.95)
    sd = RunSD(float(np.sqrt(pooled.var)), pooled.df, "pooled")
    summary = compare_arms(Arm(a.mean(), 5, sd), Arm(b.mean(), 7, sd), 0.95)
    assert (ours.delta, ours.se, ours.df, ours.p) == pytest.approx((summary.delta, summary.se, summary.df, summary.p))
    scipy_t = sps.ttest_ind(a, b, equal_var=True)
    assert ours.t == pytest.approx(scipy_t.statistic) and ours.p == pytest.approx(scipy_t.pvalue)


def test_stop_when_decided_then_confirm_the_winner_on_fresh_seeds():
    scores = {"base": [50.0, 51.0, 50.5], "a": [58.0, 59.0, 58.5], "b": [49.0, 50.5, 49.5]}
    step = decide(table(scores), RaceState(), spec())
    stop = [r for r in step.records if r["type"] == "stop"][0]
    assert stop["reason"].startswith("decided") and stop["winner"] == "a"
    assert decisions(step)["a"]["action"] == "confirm"
    assert step.state.phase == "confirm" and step.state.confirm_from == 4
    assert [(q.config, q.seed, q.phase) for q in step.runs] == [("a", 4, "confirm"), ("a", 5, "confirm")]
    confirmed = table(scores) + [done("a", 4, 57.0, "confirm"), done("a", 5, 59.0, "confirm")]
    final = decide(confirmed, step.state, spec())
    rows = decisions(final)
    assert final.state.phase == "done" and final.runs == []
    assert rows["a"]["action"] == "better" and rows["a"]["winner"] and rows["a"]["confirm_n"] == 2
    assert rows["a"]["n"] == 5 and rows["base"]["action"] == "baseline"


def test_fresh_seeds_enter_the_final_verdict_and_can_withdraw_the_claim():
    scores = {"base": [50.0, 51.0, 50.5, 50.0, 51.0], "a": [54.0, 55.5, 54.5, 54.0, 55.0]}
    s = spec(configs=("base", "a"), confirm_seeds=2)
    step = decide(table(scores), RaceState(), s)
    assert step.state.phase == "confirm"  # decided on the race's runs
    final = decide(table(scores) + [done("a", 6, 44.0, "confirm"), done("a", 7, 45.0, "confirm")], step.state, s)
    row = decisions(final)["a"]
    assert row["n"] == 7 and row["confirm_n"] == 2 and row["confirm_mean"] == 44.5
    assert row["action"] == "inconclusive"  # the winner's fresh seeds pulled it back


def test_an_undecided_race_claims_only_at_the_stricter_stop_level():
    """Ended by max_seeds, not decided: the last look gets stop_alpha, not the looser alpha."""
    scores = {"base": [50.0, 52.0, 51.0], "a": [52.2, 54.2, 52.7]}
    s = spec(configs=("base", "a"), max_seeds=3, confirm_seeds=1, stop_alpha=0.02)
    step = decide(table(scores), RaceState(), s)
    assert step.state.stop_reason.startswith("max_seeds")
    row = decisions(decide(table(scores) + [done("a", 4, 53.2, "confirm")], step.state, s))["a"]
    assert 0.02 < row["p_baseline"] <= 0.05 and row["action"] == "inconclusive"


def test_the_anchor_alone_never_makes_a_claim():
    """Without an in-sweep baseline a config far above the anchor is labelled, not declared better."""
    s = spec(configs=("a", "b"), baseline=None)
    records = []
    state, _ = run_race(s, lambda runs: [done(q.config, q.seed, 70.5 + q.seed % 2 if q.config == "a" else 50.5 + q.seed % 3,
                                               q.phase) for q in runs], emit=records.append)
    a = next(r for r in records if r.get("phase") == "final" and r["config"] == "a")
    assert a["anchor"] == "better" and a["p_anchor"] <= 0.01
    assert a["action"] == "no baseline"
    assert state.winner == "a" and state.stop_reason == "decided: one config left"


@pytest.mark.parametrize("changes, reason", [
    (dict(target_half_width=5.0), "precise"),
    (dict(max_seeds=3), "max_seeds"),
    (dict(budget_gpu_hours=9.5), "budget"),
])
def test_precision_max_seeds_and_budget_stop_the_race(changes, reason):
    scores = {"base": [50.0, 53.0, 51.0], "a": [51.0, 52.0, 50.0], "b": [52.0, 50.0, 51.5]}
    step = decide(table(scores), RaceState(), spec(**changes))
    assert step.state.stop_reason.startswith(reason), step.state.stop_reason


def test_failed_runs_get_fresh_seeds_and_a_config_that_keeps_failing_leaves():
    failed = RunResult("a", 2, "race", "failed", error="boom")
    results = table({"base": [50, 51, 52], "a": [50, 51], "b": [50, 51, 52]})
    results = [r for r in results if not (r.config == "a" and r.seed == 2)] + [failed]
    step = decide(results, RaceState(), spec())
    assert [(q.config, q.seed) for q in step.runs] == [("a", 3), ("a", 4)]
    step = decide(results + [RunResult("a", 3, "race", "failed")], RaceState(), spec())
    assert step.state.dropped == {"a": "2 failed runs"}
    assert decisions(step)["a"]["action"] == "drop"
    assert "a" not in decisions(step) or decisions(step)["a"]["action"] == "drop"


def test_a_race_cut_anywhere_and_resumed_decides_exactly_as_an_uncut_one():
    rng = np.random.default_rng(7)
    true = {"base": 54.0, "a": 57.0, "b": 54.0, "c": 46.0}
    draws = {(c, seed, phase): rng.normal(m, 3.5) for c, m in true.items() for seed in range(1, 40)
             for phase in ("race", "confirm")}

    def execute(runs):
        return [done(q.config, q.seed, draws[(q.config, q.seed, q.phase)], q.phase) for q in runs]

    s = spec(configs=tuple(true), max_seeds=12)
    whole = []
    run_race(s, execute, emit=whole.append)
    for cut in (5, len(whole) // 2, len(whole) - 3):
        kept = whole[:cut]
        states = [RaceState.from_record(r) for r in kept if r["type"] == "state"]
        results = [done(r["config"], r["seed"], r["score"], r["phase"]) for r in kept if r["type"] == "run"]
        resumed = []
        run_race(s, execute, state=states[-1] if states else None, results=results, emit=resumed.append)
        assert _decisions(kept + resumed) == _decisions(whole)


def _decisions(records: list[dict]) -> list[dict]:
    """Decision and stop records by (type, round, phase, config); a round cut before its state snapshot
    is decided again after the restart, to the same records."""
    merged: dict = {}
    for r in records:
        if r["type"] in ("decision", "stop"):
            key = (r["type"], r["round"], r.get("phase"), r.get("config"))
            assert merged.setdefault(key, r) == r
    return list(merged.values())


def test_settings_are_checked_with_the_fix():
    with pytest.raises(ValueError) as err:
        spec(min_seeds=1, stop_alpha=2.0, baseline="nope")
    text = str(err.value)
    assert "min_seeds=1 must be >= 2" in text and "stop_alpha=2.0 must be in (0, 1)" in text
    assert "baseline 'nope' is not one of the configs" in text


# --- futility --------------------------------------------------------------------------------------

FUTILITY = {"base": [50.0, 52.0, 51.0], "a": [52.5, 54.5, 53.0], "b": [50.5, 52.5, 51.0], "c": [51.5, 53.5, 52.5]}


def futility_spec(effect, **changes) -> RaceSpec:
    return spec(configs=tuple(FUTILITY), stop_alpha=1e-9, futility_effect=effect, **changes)


def test_futility_stops_a_config_whose_upper_bound_vs_the_baseline_is_below_the_effect():
    step = decide(table(FUTILITY), RaceState(), futility_spec(3.0))
    rows = decisions(step)
    summaries = {c: ConfigSummary(c, np.array(v)) for c, v in FUTILITY.items()}
    sd, df = pooled_sd([np.array(v) for v in FUTILITY.values()])
    one_sided = compare(summaries["b"], summaries["base"], Pooled(sd * sd, df), 1 - 2 * 0.05)  # at eliminate_alpha
    assert rows["b"]["upper_baseline"] == pytest.approx(one_sided.high) and one_sided.high < 3.0
    assert rows["b"]["p_best"] > 0.05  # not significantly worse than the best: futility alone stops it
    assert rows["b"]["action"] == "futile" and step.state.futile == {"b": 0} and step.state.eliminated == {}
    # c's upper bound reaches the effect (it could still beat the baseline by 3): it goes on
    assert rows["c"]["upper_baseline"] >= 3.0 and rows["c"]["action"] == "continue"
    assert sorted(q.config for q in step.runs) == ["a", "base", "c"]
    # never re-enters: the next round neither assesses nor seeds it
    later = decide(table(FUTILITY) + [done("base", 4, 51.5), done("a", 4, 53.5), done("c", 4, 52.0)],
                   step.state, futility_spec(3.0))
    assert "b" not in decisions(later) and "b" not in {q.config for q in later.runs}
    assert later.state.futile["b"] == 0  # kept with the round it left in


def test_futility_never_stops_the_best_or_the_baseline_and_is_off_at_zero_or_null():
    rows = decisions(decide(table(FUTILITY), RaceState(), futility_spec(10.0)))
    assert rows["a"]["best"] and rows["a"]["upper_baseline"] < 10.0 and rows["a"]["action"] == "continue"
    assert rows["base"]["action"] == "continue" and rows["base"]["upper_baseline"] is None
    assert rows["b"]["action"] == rows["c"]["action"] == "futile"
    for off in (0.0, None):
        rows = decisions(decide(table(FUTILITY), RaceState(), futility_spec(off)))
        assert {r["action"] for r in rows.values()} == {"continue"}


def test_futile_configs_stay_in_the_holm_family_of_the_claims():
    """Stopping b for futility must not make a's claim vs the baseline easier: b counts with p = 1."""
    s = futility_spec(3.0, max_seeds=4, confirm_seeds=1)
    step = decide(table(FUTILITY), RaceState(), s)
    more = [done("base", 4, 51.5), done("a", 4, 55.5), done("c", 4, 52.0)]
    step = decide(table(FUTILITY) + more, step.state, s)
    assert step.state.stop_reason.startswith("max_seeds") and step.state.winner == "a"
    results = table(FUTILITY) + more + [done("a", 5, 54.0, "confirm")]
    final = decisions(decide(results, step.state, s))
    assert set(step.state.futile) == {"b", "c"}  # c's upper bound fell below 3 in round 1
    assert set(final) == {"base", "a"}  # futile configs get no verdict row, like eliminated ones
    live = {c: np.array([r.score for r in results if r.config == c]) for c in ("base", "a")}
    summaries = {c: ConfigSummary(c, v) for c, v in live.items()}
    sd, df = pooled_sd(list(live.values()))
    raw = compare(summaries["a"], summaries["base"], Pooled(sd * sd, df), 0.95).p
    assert final["a"]["p_baseline"] == pytest.approx(holm([raw, 1.0, 1.0])[0]) == pytest.approx(3 * raw)
    assert 3 * raw < 1  # not capped: a shrunken family (p = raw) would differ


def test_the_futile_configs_survive_a_resume_and_old_logs_read_without_them():
    state = RaceState(round=3, eliminated={"c": 1}, futile={"b": 2})
    assert RaceState.from_record(state.to_record()) == state
    old = {k: v for k, v in state.to_record().items() if k != "futile"}
    assert RaceState.from_record(old) == RaceState(round=3, eliminated={"c": 1})


def test_a_negative_futility_effect_is_refused_with_the_fix():
    with pytest.raises(ValueError, match=r"futility_effect=-1.0 must be >= 0 points, or null / 0 \(off\)"):
        spec(futility_effect=-1.0)


# --- collapsed runs: a finding, not a failure ----------------------------------------------------------

def stopped(config, seed, step, phase="race", score=None):
    """A run stopped at its collapse (train.stop_on_collapse): no score, or the declared collapsed_score."""
    return RunResult(config, seed, phase, "collapsed", score=score, gpu_hours=0.5, collapse_step=step)


def test_a_collapsed_run_is_not_replaced_and_enters_its_config_at_the_declared_score():
    scores = {"base": [50.0, 53.0, 51.0], "a": [52.0, 54.0], "b": [52.0, 55.0, 50.0]}
    results = table(scores) + [stopped("a", 3, 7, score=0.0)]
    step = decide(results, RaceState(), spec(collapsed_score=0.0))
    # seed 3 counts: the round is assessed at once. a is judged on its own spread (the pool leaves its collapse
    # out), so one collapse in 3 seeds does not yet prove it worse than the best: it gets more seeds
    assert step.state.round == 1 and step.state.eliminated == {}
    a = decisions(step)["a"]
    assert a["sd_source"] == "sample" and decisions(step)["b"]["sd_source"] == "pooled"
    assert (a["seeds"], a["n"], a["collapse_steps"]) == (3, 3, [7])
    assert a["mean"] == pytest.approx((52.0 + 54.0 + 0.0) / 3)  # every training run of the config, as the summary
    # a failed run, by contrast, is replaced
    failed = decide(table(scores) + [RunResult("a", 3, "race", "failed", error="boom")], RaceState(), spec())
    assert failed.state.round == 0 and [(q.config, q.seed) for q in failed.runs] == [("a", 4)]


def test_a_baseline_with_a_scored_collapse_is_judged_on_its_own_spread_not_the_pools():
    """The pool leaves collapsed runs out; a baseline whose mean holds a collapse at 0 but whose SD came from the
    working configs would make every config look better by a wide margin. Its own SD keeps the claim honest."""
    scores = {"base": [50.0, 51.0], "a": [51.0, 52.0, 50.5], "b": [50.5, 51.5, 50.0]}
    results = table(scores) + [stopped("base", 3, 9, score=0.0)]
    rows = decisions(decide(results, RaceState(), spec(collapsed_score=0.0, min_seeds=3, max_seeds=3,
                                                       confirm_seeds=0)))
    base = np.array([50.0, 51.0, 0.0])
    assert rows["base"]["mean"] == pytest.approx(base.mean()) and rows["base"]["sd_source"] == "sample"
    sd, df = pooled_sd([np.array(v) for v in scores.values()])
    for config in ("a", "b"):
        arm = Arm(float(np.mean(scores[config])), 3, RunSD(sd, df, "pooled"))
        own = compare_arms(arm, Arm(base.mean(), 3, RunSD(float(base.std(ddof=1)), 2, "sample")), 0.95)
        pooled = compare_arms(arm, Arm(base.mean(), 3, RunSD(sd, df, "pooled")), 0.95)
        assert pooled.p * 2 < 1e-5  # what the pool's SD would have claimed for it
        assert rows[config]["verdict_baseline"] == "inconclusive" and own.p > 0.05


def test_a_config_that_mostly_collapses_is_never_crowned_on_its_survivors():
    """Three of five seeds stopped at their collapse, the two survivors far above the baseline: without a
    declared collapsed_score the config leaves the race saying why; with 0 declared it is judged on all five."""
    scores = {"base": [50.0, 51.0, 49.0, 50.0, 50.5], "a": [70.0, 71.0]}
    results = table(scores) + [stopped("a", s, 8) for s in (3, 4, 5)]
    step = decide(results, RaceState(), spec(("base", "a"), min_seeds=5, max_seeds=5, confirm_seeds=0))
    assert "a" in step.state.dropped and "3 stopped there with no score" in step.state.dropped["a"]
    assert "hydra.sweeper.collapsed_score" in step.state.dropped["a"] and step.state.winner != "a"
    floored = table(scores) + [stopped("a", s, 8, score=0.0) for s in (3, 4, 5)]
    rows = decisions(decide(floored, RaceState(), spec(("base", "a"), min_seeds=5, max_seeds=5, confirm_seeds=0,
                                                       collapsed_score=0.0)))
    assert rows["a"]["n"] == 5 and rows["a"]["mean"] == pytest.approx(141.0 / 5)


def test_a_collapsed_run_that_trained_on_keeps_its_score_but_stays_out_of_the_pooled_sd():
    scores = {"base": [50.0, 53.0, 51.0], "a": [52.0, 54.0, 53.0], "b": [52.0, 55.0, 50.0]}
    results = table(scores) + [RunResult("a", 4, "race", "done", 5.0, 1.0, collapse_step=12)]
    rows = decisions(decide(results, RaceState(), spec(min_seeds=3, max_seeds=3)))
    assert rows["a"]["mean"] == pytest.approx((52 + 54 + 53 + 5) / 4) and rows["a"]["collapse_steps"] == [12]
    sd, _ = pooled_sd([np.array(v) for v in scores.values()])  # the pool of the summary: no collapsed run
    assert rows["a"]["pooled_sd"] == pytest.approx(sd)


def test_a_config_whose_every_seed_collapsed_leaves_the_race_saying_so():
    results = table({"base": [50.0, 53.0, 51.0], "b": [52.0, 55.0, 50.0]}) + [stopped("a", s, 5 + s) for s in (1, 2, 3)]
    step = decide(results, RaceState(), spec())
    assert step.state.dropped["a"].startswith("collapsed in 3 of 3 seeds, at steps 6, 7, 8; 3 stopped there with no score")
    assert decisions(step)["a"]["action"] == "drop" and "a" not in live_configs(spec(), step.state)
    assert all(q.config != "a" for q in step.runs)
