"""The racing policy as one pure function: `decide(results, state, spec) -> Step`.

A race runs the grid in rounds of seeds. Round r gives every live config
min(max_seeds, min_seeds + r * seeds_per_round) finished runs; then it assesses the round:
- every live config gets a mean and a t-interval with the run-to-run SD pooled across live configs;
- every live config is compared with the current best; Holm across them; those significantly worse
  (at eliminate_alpha) get no more seeds. The in-sweep baseline is never eliminated: it is the reference;
- futility (futility_effect > 0): a live config that is neither the round's best nor the baseline and
  whose one-sided upper bound (at eliminate_alpha) of its gain over the baseline is below futility_effect
  points gets no more seeds either ("futile"). Such configs stay in the Holm family of the claims vs
  the baseline with p = 1, so stopping them never loosens a claim (eliminated configs leave the family);
- every live config is compared with the baseline (Holm across live configs and the futile ones, at
  alpha) and with the published anchor (Welch, at the stricter anchor_alpha; reported, never the only
  evidence for "better");
- the race stops when the best is significantly better than the baseline or is the only config left
  (decided), when every live config's CI half-width is <= target_half_width (precise), at max_seeds,
  or before a round that would exceed the GPU-hour budget;
- then the winner runs confirm_seeds fresh seeds (winner's curse): they enter the final verdict (Holm
  across the configs live at the stop and the futile ones, on all their runs: at alpha after a decided
  race, at stop_alpha after an undecided one), and their mean alone is reported as the winner's
  unbiased score.
Every Holm family and verdict word comes from inference.verdicts.family_verdicts, the summary's rule. With
pairing=seed (declared in hydra.sweeper.pairing) the comparisons with the best and with the baseline are paired
differences over the seeds both ran, and the baseline runs the confirmation seeds beside the winner.
Every decision row and the stop record carry the runs and GPU-hours spent (the runs' own gpu_hours).
Failed runs are replaced by fresh seeds; a config with max_failures failed race runs leaves the race. Failures
are counted per phase: max_failures failed confirmation runs end that config's confirmation (no more fresh seeds),
and the race's verdict stands: the winner stays the winner, judged on the runs that finished, its final row
counting the failed confirmation runs (confirm_failed). A confirmation's failures never rewrite the race's verdict.
A collapsed run (opsd_sweep.run.collapse) is a finding, not a failure: it counts as one of its config's seeds
and is not replaced. As in the summary, a run stopped at its collapse (train.stop_on_collapse) enters at the
declared collapsed_score; with none declared it has no score, and its config leaves the race (judged on the
seeds that did not collapse, a config that mostly collapses could win). A collapsed run keeps its score in
its config's mean, but stays out of the pooled run-to-run SD; its config is then judged on its own SD (Welch).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Optional, Sequence

import numpy as np

from opsd_sweep.run.collapse import collapse_count
from opsd_sweep.inference.stats import t_interval, t_ppf, verdict, welch_vs_anchor
from opsd_sweep.inference.verdicts import family_verdicts
from opsd_sweep.race.compare import ConfigSummary, Pooled, compare
from opsd_sweep.race.settings import RaceSpec

@dataclass(frozen=True)
class RunRequest:
    """One training run the race wants: a config (grid label), a seed, and the phase it serves."""

    config: str
    seed: int
    phase: str


@dataclass(frozen=True)
class RunResult:
    """A finished run as the race sees it."""

    config: str
    seed: int
    phase: str
    state: str  # done | collapsed (stopped at its collapse: no score) | failed
    score: Optional[float] = None
    gpu_hours: float = 0.0
    run_dir: Optional[str] = None
    error: Optional[str] = None
    collapse_step: Optional[int] = None  # where it collapsed (a done run may have trained on through it)

    def to_record(self) -> dict:
        return {"type": "run", "config": self.config, "seed": self.seed, "phase": self.phase, "state": self.state,
                "score": self.score, "gpu_hours": self.gpu_hours, "run_dir": self.run_dir,
                "error": self.error, "collapse_step": self.collapse_step}


@dataclass(frozen=True)
class RaceState:
    """Where a race stands; everything `decide` needs besides the results. Restored from race.jsonl."""

    round: int = 0
    phase: str = "race"  # race -> confirm -> done
    eliminated: dict = field(default_factory=dict)  # config -> round it was eliminated in
    futile: dict = field(default_factory=dict)  # config -> round it was stopped for futility in
    dropped: dict = field(default_factory=dict)  # config -> why it left the race (failures)
    winner: Optional[str] = None
    stop_reason: Optional[str] = None
    confirm_from: Optional[int] = None  # first seed of the confirmation round

    def to_record(self) -> dict:
        return {"type": "state", "round": self.round, "phase": self.phase, "eliminated": dict(self.eliminated),
                "futile": dict(self.futile), "dropped": dict(self.dropped), "winner": self.winner,
                "stop_reason": self.stop_reason, "confirm_from": self.confirm_from}

    @classmethod
    def from_record(cls, record: dict) -> "RaceState":
        return cls(round=record["round"], phase=record["phase"], eliminated=dict(record["eliminated"]),
                   futile=dict(record.get("futile", {})),  # logs written before futility have none
                   dropped=dict(record["dropped"]), winner=record["winner"], stop_reason=record["stop_reason"],
                   confirm_from=record["confirm_from"])


@dataclass(frozen=True)
class Step:
    """What to do next: the new state, records for race.jsonl, and the runs to launch (none when done)."""

    state: RaceState
    records: list[dict]
    runs: list[RunRequest]


def live_configs(spec: RaceSpec, state: RaceState) -> list[str]:
    return [c for c in spec.configs if c not in state.eliminated and c not in state.futile and c not in state.dropped]


def target_seeds(spec: RaceSpec, round_: int) -> int:
    s = spec.settings
    return min(s.max_seeds, s.min_seeds + round_ * s.seeds_per_round)


def decide(results: Sequence[RunResult], state: RaceState, spec: RaceSpec) -> Step:
    """The next step of a race, from every run result so far (any order) and the current state."""
    if state.phase == "done":
        return Step(state, [], [])
    # failures of the confirmation do not take a config out of the race: they end its confirmation (_confirm_step)
    state, records = _drop_failing(results, state, spec) if state.phase == "race" else (state, [])
    live = live_configs(spec, state)
    if not live:
        done = replace(state, phase="done", stop_reason="no config left (all failed)")
        return Step(done, records + [_stop_record(done, results)], [])
    if state.phase == "confirm":
        return _confirm_step(results, state, spec, records)
    missing = _missing_runs(results, live, target_seeds(spec, state.round), "race", spec.settings.first_seed)
    if missing:
        return Step(state, records, missing)
    return _assess_round(results, state, spec, records)


# --- bookkeeping ---------------------------------------------------------------------------------

def _failures(results, phase: str) -> dict[str, int]:
    """{config: failed runs} in one phase (race or confirm)."""
    failures: dict[str, int] = {}
    for r in results:
        if r.state == "failed" and r.phase == phase:
            failures[r.config] = failures.get(r.config, 0) + 1
    return failures


def _drop_failing(results, state: RaceState, spec: RaceSpec) -> tuple[RaceState, list[dict]]:
    """Live configs with max_failures failed race runs leave the race."""
    failures = _failures(results, "race")
    records, dropped = [], dict(state.dropped)
    for config in live_configs(spec, state):
        if failures.get(config, 0) >= spec.settings.max_failures:
            dropped[config] = f"{failures[config]} failed runs"
            records.append({"type": "decision", "round": state.round, "phase": state.phase, "config": config,
                            "action": "drop", "reason": dropped[config]})
    return (replace(state, dropped=dropped) if records else state), records


SEEDS_RUN = ("done", "collapsed")  # states of a seed that counts (a failed one is replaced)


def _missing_runs(results, configs: list[str], target: int, phase: str, first_seed: int) -> list[RunRequest]:
    """Runs that bring each config to `target` seeds run in this phase, collapsed ones included (a collapse is
    a finding, not replaced); failed seeds are not reused."""
    runs = []
    for config in configs:
        mine = [r for r in results if r.config == config and r.phase == phase]
        need = target - sum(r.state in SEEDS_RUN for r in mine)
        tried = {r.seed for r in mine}
        seed = first_seed
        while need > 0:
            if seed not in tried:
                runs.append(RunRequest(config, seed, phase))
                need -= 1
            seed += 1
    return runs


def _summaries(results, configs: list[str], phases: tuple[str, ...]) -> dict[str, ConfigSummary]:
    out = {}
    for config in configs:
        mine = [r for r in results if r.config == config and r.phase in phases and r.state in SEEDS_RUN]
        mine.sort(key=lambda r: (r.phase, r.seed))
        scored = [r for r in mine if r.score is not None]  # a stopped collapse has one when declared
        out[config] = ConfigSummary(
            config, np.array([r.score for r in scored], dtype=float),
            pool_scores=np.array([r.score for r in scored if r.collapse_step is None], dtype=float),
            stopped=len(mine) - len(scored),
            collapse_steps=tuple(r.collapse_step for r in mine if r.collapse_step is not None),
            seed_ids=tuple(r.seed for r in scored))
    return out


def _drop_unscored(summaries: dict[str, ConfigSummary], state: RaceState) -> tuple[RaceState, list[dict]]:
    """Configs with a seed stopped at its collapse and no declared collapsed_score leave the race: judged on
    the seeds that did not collapse, they would be judged on their survivors."""
    gone = {c: (f"{collapse_count(s.seeds, list(s.collapse_steps))}; {s.stopped} stopped there with no score: "
                "declare hydra.sweeper.collapsed_score (e.g. 0) or run with train.stop_on_collapse=false")
            for c, s in summaries.items() if s.stopped}
    records = [{"type": "decision", "round": state.round, "phase": state.phase, "config": c, "action": "drop",
                "reason": why} for c, why in gone.items()]
    return (replace(state, dropped=dict(state.dropped) | gone) if gone else state), records


def _gpu_hours_used(results) -> tuple[float, float]:
    """(GPU-hours used so far by every run of the race, mean GPU-hours of a run that finished). A planned run is
    projected at a finished run's cost: failed runs (often refused or ended before any GPU time) would pull the
    projection down and let the race pass its budget; their GPU-hours count in what was used."""
    used = sum(r.gpu_hours for r in results)
    finished = [r.gpu_hours for r in results if r.state in SEEDS_RUN] or [r.gpu_hours for r in results]
    return used, float(np.mean(finished)) if finished else 0.0


def spent(results, config: str) -> tuple[int, float]:
    """(runs, GPU-hours) a config has taken so far, every phase, failed and collapsed runs included (each run's
    own gpu_hours from its status.json)."""
    mine = [r for r in results if r.config == config]
    return len(mine), float(sum(r.gpu_hours for r in mine))


# --- one round -----------------------------------------------------------------------------------

def _assess_round(results, state: RaceState, spec: RaceSpec, records: list[dict]) -> Step:
    s = spec.settings
    summaries = _summaries(results, live_configs(spec, state), ("race",))
    state, unscored = _drop_unscored(summaries, state)
    records = records + unscored
    live = live_configs(spec, state)
    if not live:
        done = replace(state, phase="done", stop_reason="no config left (every seed collapsed or failed)")
        return Step(done, records + [_stop_record(done, results)], [])
    summaries = {c: summaries[c] for c in live}
    rows = assess(summaries, spec, state.round, "race", futile=len(state.futile), claim_alpha=s.stop_alpha,
                  results=results)
    best = max(live, key=lambda c: summaries[c].mean)
    eliminated, futile = dict(state.eliminated), dict(state.futile)
    for row in rows:
        if row["verdict_best"] == "worse":
            row["action"] = "eliminate"
            eliminated[row["config"]] = state.round
        elif _futile(row, best, s.futility_effect):
            row["action"] = "futile"
            futile[row["config"]] = state.round
        else:
            row["action"] = "continue"
    state = replace(state, eliminated=eliminated, futile=futile)
    still = live_configs(spec, state)
    reason = _stop_reason(rows, still, best, results, state, spec)
    if reason is None:
        state = replace(state, round=state.round + 1)
        target = target_seeds(spec, state.round)
        return Step(state, records + rows, _missing_runs(results, still, target, "race", s.first_seed))
    state = replace(state, stop_reason=reason, winner=best)
    for row in rows:
        if row["action"] == "continue":
            row["action"] = "confirm" if row["config"] == best and _confirms(best, spec) else "stop"
    records = records + rows + [_stop_record(state, results)]
    if _confirms(best, spec):
        confirm_from = max(r.seed for r in results) + 1
        state = replace(state, phase="confirm", confirm_from=confirm_from)
        return Step(state, records, _missing_runs(results, _confirming(best, spec), s.confirm_seeds, "confirm",
                                                  confirm_from))
    return _final(results, state, spec, records)


def _futile(row: dict, best: str, effect: Optional[float]) -> bool:
    """The config cannot beat the baseline by `effect` points: more seeds would not make it a claim worth
    having. Never the round's best (it may still win) nor the baseline (the reference)."""
    if not effect or row["config"] == best or row["baseline"] or row["upper_baseline"] is None:
        return False
    return row["upper_baseline"] < effect


def _confirms(winner: str, spec: RaceSpec) -> bool:
    return spec.settings.confirm_seeds > 0 and winner != spec.baseline


def _confirming(winner: str, spec: RaceSpec) -> list[str]:
    """The configs that run the confirmation seeds: the winner, and under pairing=seed the baseline too (fresh
    seeds the baseline never ran would have no partner in the paired final verdict)."""
    paired = spec.settings.pairing == "seed" and spec.baseline is not None
    return [winner, spec.baseline] if paired else [winner]


def _stop_reason(rows: list[dict], still: list[str], best: str, results, state: RaceState,
                 spec: RaceSpec) -> Optional[str]:
    s = spec.settings
    by_config = {row["config"]: row for row in rows}
    if by_config[best]["verdict_baseline"] == "better":  # at stop_alpha (assess's claim_alpha in a round)
        return "decided: the best config is better than the baseline"
    if len(still) == 1:
        return "decided: one config left"
    if s.target_half_width > 0 and all(by_config[c]["half_width"] <= s.target_half_width for c in still):
        return f"precise: every CI half-width <= {s.target_half_width}"
    if target_seeds(spec, state.round) >= s.max_seeds:
        return f"max_seeds: {s.max_seeds} seeds per config"
    if s.budget_gpu_hours is not None:
        used, per_run = _gpu_hours_used(results)
        next_runs = len(still) * s.seeds_per_round + (s.confirm_seeds * len(_confirming(best, spec))
                                                       if _confirms(best, spec) else 0)
        if used + per_run * next_runs > s.budget_gpu_hours:
            return f"budget: {used:.1f} GPU-hours used, next round would pass {s.budget_gpu_hours}"
    return None


def assess(summaries: dict[str, ConfigSummary], spec: RaceSpec, round_: int, phase: str, *,
           futile: int = 0, claim_alpha: Optional[float] = None, results: Sequence[RunResult] = ()) -> list[dict]:
    """One decision row per config (any set of configs: a round's live ones, or a fixed grid):
    n, mean, t-interval with the SD pooled across them, Holm-adjusted p vs the best and vs the baseline with
    their verdict words (inference.verdicts: "worse" than the best at eliminate_alpha, better / worse than the
    baseline at `claim_alpha`, default alpha), the one-sided upper bound (at eliminate_alpha) of the gain over
    the baseline, Welch p vs the anchor, and the runs and GPU-hours each config has taken (from `results`).
    Under pairing=seed the comparisons with the best and the baseline are paired by seed.
    `futile`: configs stopped for futility, kept in the Holm family vs the baseline with p = 1 (a fixed
    family: stopping them never loosens a claim). The action is left to the caller."""
    s = spec.settings
    pooled = Pooled.of(list(summaries.values()))
    level = 1 - s.alpha
    paired = s.pairing == "seed"
    best = max(summaries, key=lambda c: summaries[c].mean)
    baseline = summaries.get(spec.baseline)
    vs_best = {c: compare(summ, summaries[best], pooled, level, paired=paired) for c, summ in summaries.items()
               if c not in (best, spec.baseline)}
    vs_base = {c: compare(summ, baseline, pooled, level, paired=paired) for c, summ in summaries.items()
               if baseline is not None and c != spec.baseline}
    on_best = _family(vs_best, s.eliminate_alpha)
    on_base = _family(vs_base, s.alpha if claim_alpha is None else claim_alpha, held_out=futile)
    upper = {c: cmp.delta + t_ppf(1 - s.eliminate_alpha, cmp.df) * cmp.se for c, cmp in vs_base.items()}
    rows = []
    for config, summ in summaries.items():
        sd = summ.sd(pooled)
        ci = t_interval(summ.scores, level, sd=sd.value, df=sd.df)
        anchor = (welch_vs_anchor(summ.scores, spec.anchor.mean, spec.anchor.sd, spec.anchor.n,
                                  1 - s.anchor_alpha, sd=sd.value, df=sd.df)
                  if spec.anchor is not None else None)
        runs, gpu_hours = spent(results, config)
        rows.append(_clean({
            "type": "decision", "round": round_, "phase": phase, "config": config, "n": summ.n, "mean": summ.mean,
            "ci": [ci.low, ci.high], "half_width": (ci.high - ci.low) / 2, "pooled_sd": math.sqrt(pooled.var),
            "sd_source": sd.source,
            "seeds": summ.seeds, "collapse_steps": list(summ.collapse_steps),
            "best": config == best, "baseline": config == spec.baseline,
            "delta_best": vs_best[config].delta if config in vs_best else None,
            "p_best": on_best[config][0] if config in on_best else None,
            "verdict_best": on_best[config][1] if config in on_best else None,
            "delta_baseline": vs_base[config].delta if config in vs_base else None,
            "p_baseline": on_base[config][0] if config in on_base else None,
            "verdict_baseline": on_base[config][1] if config in on_base else None,
            "upper_baseline": upper.get(config),
            "delta_anchor": anchor.delta if anchor else None, "p_anchor": anchor.p if anchor else None,
            "runs": runs, "gpu_hours": gpu_hours, "action": None}))
    return rows


def _family(comparisons: dict, alpha: float, held_out: int = 0) -> dict[str, tuple[float, str]]:
    """{config: (Holm-adjusted p, verdict word)} of one family of comparisons (inference.verdicts)."""
    if not comparisons:
        return {}
    family = family_verdicts([c.delta for c in comparisons.values()], [c.p for c in comparisons.values()], alpha,
                             held_out=held_out)
    return {c: (float(q), word) for c, q, word in zip(comparisons, family.adjusted, family.words)}


def _clean(row: dict) -> dict:
    """nan -> None (JSON has no nan), numpy floats -> float."""
    def fix(v):
        if isinstance(v, list):
            return [fix(x) for x in v]
        if isinstance(v, (float, np.floating)):
            return None if math.isnan(v) else float(v)
        return v
    return {k: fix(v) for k, v in row.items()}


def _stop_record(state: RaceState, results=()) -> dict:
    """The stop, with the GPU-hours every run of the race took so far (its runs' own gpu_hours)."""
    return {"type": "stop", "round": state.round, "reason": state.stop_reason, "winner": state.winner,
            "runs": len(results), "gpu_hours": float(sum(r.gpu_hours for r in results))}


# --- confirmation and the final verdict ------------------------------------------------------------

def _confirm_step(results, state: RaceState, spec: RaceSpec, records: list[dict]) -> Step:
    """Fresh seeds for the confirming configs until each has confirm_seeds or max_failures failed confirmation
    runs: then its confirmation ends, and the race's verdict on it stands (judged on the runs that finished)."""
    if state.winner in state.dropped:  # a log of the old rule (confirmation failures dropped the winner)
        return _final(results, state, spec, records)
    failures = _failures(results, "confirm")
    confirming = [c for c in _confirming(state.winner, spec)
                  if c not in state.dropped and failures.get(c, 0) < spec.settings.max_failures]
    missing = _missing_runs(results, confirming, spec.settings.confirm_seeds, "confirm", state.confirm_from)
    if missing:
        return Step(state, records, missing)
    return _final(results, state, spec, records)


def _claim_level(state: RaceState, spec: RaceSpec) -> float:
    """The final verdict's level. A race decided at stop_alpha keeps its claim while the runs of the
    winner's confirmation hold it at alpha; a race that ended undecided (max_seeds, precision, budget)
    must reach stop_alpha on all its runs: its last look gets no looser level than the ones before."""
    decided = state.stop_reason is not None and state.stop_reason.startswith("decided")
    return spec.settings.alpha if decided else spec.settings.stop_alpha


def _final(results, state: RaceState, spec: RaceSpec, records: list[dict]) -> Step:
    """Verdicts of the live configs on all their runs (the fresh seeds of the confirmation included)."""
    live = live_configs(spec, state)
    summaries = _summaries(results, live, ("race",))
    for config in _confirming(state.winner, spec):
        if config in summaries:
            summaries[config] = _summaries(results, [config], ("race", "confirm"))[config]
    # a confirmation seed stopped at its collapse with no declared score: as in every round, the config leaves
    # (judged on its surviving seeds, the winner could be confirmed by the seeds that did not collapse)
    state, unscored = _drop_unscored(summaries, state)
    records = records + unscored
    summaries = {c: summ for c, summ in summaries.items() if c not in state.dropped}
    if not summaries:
        return Step(replace(state, phase="done"), records, [])
    confirm = _summaries(results, [state.winner], ("confirm",))[state.winner]
    confirm_failures = _failures(results, "confirm")
    rows = assess(summaries, spec, state.round, "final", futile=len(state.futile),
                  claim_alpha=_claim_level(state, spec), results=results)
    for row in rows:
        row["winner"] = row["config"] == state.winner
        # vs the anchor: a label at the stricter level, reported beside the verdict, never a claim by itself
        row["anchor"] = verdict(row["delta_anchor"], row["p_anchor"], spec.settings.anchor_alpha) \
            if row["p_anchor"] is not None else None
        if row["winner"] and confirm.n:
            row["confirm_n"], row["confirm_mean"] = confirm.n, confirm.mean
        if row["config"] in confirm_failures:  # the confirmation ended short of confirm_seeds (or was retried)
            row["confirm_failed"] = confirm_failures[row["config"]]
        if row["baseline"]:
            row["action"] = "baseline"
        elif row["verdict_baseline"] is None:
            row["action"] = "no baseline"
        else:
            row["action"] = row["verdict_baseline"]  # the one verdict rule, at the claim level
    done = replace(state, phase="done")
    return Step(done, records + rows, [])
