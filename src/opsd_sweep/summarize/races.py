"""Races in the summary: find race.jsonl logs under the results roots and turn each into small tables.

A log is read with `RaceLog.records()` (a line cut short by a kill is skipped there). A resumed race
may log a round's decisions twice (the round is assessed again after the restart): the last record of
each (round, phase, config) counts, and so does the last record of each run (config, seed, phase).
"""

from __future__ import annotations

import glob
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from opsd_sweep.inference import stats
from opsd_sweep.race.log import RaceLog

LOG_NAME = "race.jsonl"
FINAL_COLUMNS = ["config", "n", "mean", "ci_low", "ci_high", "delta_baseline", "p_baseline", "delta_anchor",
                 "p_anchor", "anchor", "action", "winner", "baseline", "confirm_n", "confirm_mean", "confirm_failed"]
ELIMINATION_COLUMNS = ["config", "round", "action", "n", "mean", "delta_best", "p_best", "reason"]
TIMELINE_COLUMNS = ["round", "config", "n", "mean", "ci_low", "ci_high", "action", "baseline"]


@dataclass(frozen=True)
class Race:
    """One race log as tables. `stop` is None while the race runs (or was cut before its stop)."""

    path: Path
    header: dict  # the first "race" record: configs, baseline, metric, anchor, settings
    resumes: int  # "resume" records: restarts whose settings changed
    state: dict | None  # the last "state" record (phase race / confirm / done)
    stop: dict | None  # round, reason, winner
    final: pd.DataFrame  # FINAL_COLUMNS, one row per config live at the stop
    eliminations: pd.DataFrame  # ELIMINATION_COLUMNS: configs eliminated (worse than the best), futile or dropped
    timeline: pd.DataFrame  # TIMELINE_COLUMNS: every race-phase assessment, for the progress plot
    totals: dict  # runs, done, collapsed, failed, confirm_runs, gpu_hours, by_config, simulated, grid_runs
    baseline_dirs: frozenset[str]  # resolved run dirs of the declared in-sweep baseline's runs
    run_dirs: dict[str, list[str]] = field(default_factory=dict)  # config -> its runs' dirs (collapse lines)
    confirm_finished: dict[str, int] = field(default_factory=dict)  # config -> its confirmation runs not failed

    @property
    def finished(self) -> bool:
        return self.state is not None and self.state.get("phase") == "done"

    @property
    def winner(self) -> str | None:
        return self.stop.get("winner") if self.stop else None


def find_race_logs(roots: list[str]) -> list[Path]:
    """race.jsonl directly in each root and one level below it (<root>/<group>/race.jsonl); globs allowed."""
    found: set[Path] = set()
    for root in roots:
        for base in glob.glob(str(Path(root).expanduser())):
            for pattern in (LOG_NAME, f"*/{LOG_NAME}"):
                found.update(Path(p) for p in glob.glob(os.path.join(glob.escape(base), pattern)))
    return sorted(p for p in found if p.is_file())


def read_race(path: Path, simulated_dirs: frozenset[str] = frozenset()) -> Race | None:
    """The race logged in `path`; None when the file holds no race header. `simulated_dirs`: resolved
    paths of the run dirs the summary found simulated (the log itself does not say)."""
    return race_from_records(path, RaceLog(path).records(), simulated_dirs)


def race_from_records(path: Path, records: list[dict], simulated_dirs: frozenset[str] = frozenset()
                      ) -> Race | None:
    """Tables of one race from its records (in log order)."""
    headers = [r for r in records if r.get("type") == "race"]
    if not headers:
        return None
    decisions = latest_decisions(records)
    metric = str(headers[0].get("metric", "avg_at_n"))
    stops = [r for r in records if r.get("type") == "stop"]
    states = [r for r in records if r.get("type") == "state"]
    return Race(path=path, header=headers[0], resumes=sum(r.get("type") == "resume" for r in records),
                state=states[-1] if states else None, stop=stops[-1] if stops else None,
                final=final_table(decisions, metric), eliminations=eliminations_table(decisions),
                timeline=timeline_table(decisions, metric), totals=run_totals(records, headers[0], simulated_dirs),
                baseline_dirs=frozenset(str(Path(r["run_dir"]).resolve()) for r in records
                                        if r.get("type") == "run" and r.get("run_dir")
                                        and r["config"] == headers[0].get("baseline")),
                run_dirs=_run_dirs(records), confirm_finished=_confirm_finished(records))


def _run_dirs(records: list[dict]) -> dict[str, list[str]]:
    runs = {(r["config"], r["seed"], r["phase"]): r for r in records if r.get("type") == "run" and r.get("run_dir")}
    out: dict[str, list[str]] = {}
    for (config, _, _), record in runs.items():
        out.setdefault(config, []).append(record["run_dir"])
    return out


def _confirm_finished(records: list[dict]) -> dict[str, int]:
    """{config: confirmation runs that did not fail}, the last record of each run counting."""
    runs = {(r["config"], r["seed"], r["phase"]): r for r in records if r.get("type") == "run"}
    out: dict[str, int] = {}
    for (config, _, phase), record in runs.items():
        if phase == "confirm" and record["state"] != "failed":
            out[config] = out.get(config, 0) + 1
    return out


def latest_decisions(records: list[dict]) -> list[dict]:
    """Decision records, the last one of each (round, phase, config, drop or not), in log order."""
    latest: dict[tuple, dict] = {}
    for record in records:
        if record.get("type") == "decision":
            key = (record["round"], record["phase"], record["config"], record.get("action") == "drop")
            latest.pop(key, None)  # re-insert: order follows the last write
            latest[key] = record
    return list(latest.values())


def _ci(record: dict, metric: str) -> tuple[float, float]:
    """The logged interval of a config's mean, cut at 0 and 100 for a percent score (as the summary's)."""
    low, high = record.get("ci") or [None, None]
    if low is None or not stats.is_percent_score(metric):
        return low, high
    return stats.bounded(low, high, stats.SCORE_BOUNDS)


def final_table(decisions: list[dict], metric: str) -> pd.DataFrame:
    """The final verdicts (phase "final"), winner first, then by mean. Empty before the race ends."""
    rows = []
    for d in decisions:
        if d["phase"] == "final":
            low, high = _ci(d, metric)
            rows.append({"config": d["config"], "n": d["n"], "mean": d["mean"], "ci_low": low, "ci_high": high,
                         "delta_baseline": d.get("delta_baseline"), "p_baseline": d.get("p_baseline"),
                         "delta_anchor": d.get("delta_anchor"), "p_anchor": d.get("p_anchor"),
                         "anchor": d.get("anchor"), "action": d["action"], "winner": bool(d.get("winner")),
                         "baseline": bool(d.get("baseline")), "confirm_n": d.get("confirm_n"),
                         "confirm_mean": d.get("confirm_mean"), "confirm_failed": d.get("confirm_failed")})
    table = pd.DataFrame(rows, columns=FINAL_COLUMNS)
    return table.sort_values(["winner", "mean"], ascending=False, kind="stable").reset_index(drop=True)


def eliminations_table(decisions: list[dict]) -> pd.DataFrame:
    """Configs that left the race: eliminated (significantly worse than the best), futile (cannot beat the
    baseline by futility_effect) or dropped (failures)."""
    rows = []
    for d in decisions:
        if d.get("action") in ("eliminate", "futile"):
            upper = d.get("upper_baseline")
            reason = ("worse than the best" if d["action"] == "eliminate" else
                      "cannot beat the baseline by futility_effect"
                      + (f" (upper bound of Δ vs baseline {upper:+.2f})" if upper is not None else ""))
            rows.append({"config": d["config"], "round": d["round"], "action": d["action"], "n": d["n"],
                         "mean": d["mean"], "delta_best": d.get("delta_best"), "p_best": d.get("p_best"),
                         "reason": reason})
        elif d.get("action") == "drop":
            rows.append({"config": d["config"], "round": d["round"], "action": "drop", "n": None, "mean": None,
                         "delta_best": None, "p_best": None, "reason": d.get("reason")})
    return pd.DataFrame(rows, columns=ELIMINATION_COLUMNS).sort_values("round", kind="stable").reset_index(drop=True)


def timeline_table(decisions: list[dict], metric: str) -> pd.DataFrame:
    """Every racing-round assessment: round, config, n, mean, CI and what the race did with the config."""
    rows = []
    for d in decisions:
        if d["phase"] == "race" and d.get("mean") is not None:
            low, high = _ci(d, metric)
            rows.append({"round": d["round"], "config": d["config"], "n": d["n"], "mean": d["mean"],
                         "ci_low": low, "ci_high": high, "action": d["action"], "baseline": bool(d.get("baseline"))})
    return pd.DataFrame(rows, columns=TIMELINE_COLUMNS).sort_values(["round"], kind="stable").reset_index(drop=True)


def run_totals(records: list[dict], header: dict, simulated_dirs: frozenset[str] = frozenset()) -> dict:
    """Runs done, stopped at their collapse and failed, runs of the confirmation, GPU-hours spent (the runs' own
    gpu_hours, in total and per config: by_config = {config: {runs, gpu_hours}}), simulated runs, and the runs a
    fixed grid of every config at max_seeds would have taken (for scale)."""
    runs = {(r["config"], r["seed"], r["phase"]): r for r in records if r.get("type") == "run"}
    done = [r for r in runs.values() if r["state"] == "done"]
    simulated = sum(r.get("run_dir") is not None and str(Path(r["run_dir"]).resolve()) in simulated_dirs
                    for r in done)
    max_seeds = (header.get("settings") or {}).get("max_seeds")
    collapsed = sum(r["state"] == "collapsed" for r in runs.values())
    by_config: dict[str, dict] = {}
    for r in runs.values():
        mine = by_config.setdefault(r["config"], {"runs": 0, "gpu_hours": 0.0})
        mine["runs"] += 1
        mine["gpu_hours"] += float(r.get("gpu_hours") or 0.0)
    return {"runs": len(runs), "done": len(done), "collapsed": collapsed, "by_config": by_config,
            "failed": len(runs) - len(done) - collapsed,
            "confirm_runs": sum(r["phase"] == "confirm" for r in runs.values()),
            "gpu_hours": float(sum(r.get("gpu_hours") or 0.0 for r in runs.values())),
            "simulated": simulated, "grid_runs": len(header["configs"]) * max_seeds if max_seeds else None}


def simulated_run_dirs(runs: pd.DataFrame) -> frozenset[str]:
    """Resolved paths of the simulated run dirs in the summary's runs table."""
    if runs.empty or "run_dir" not in runs:
        return frozenset()
    chosen = runs.loc[runs["simulated"].astype(bool) & runs["run_dir"].notna(), "run_dir"]
    return frozenset(str(Path(p).resolve()) for p in chosen)


def labels_of_dirs(dirs: Iterable[str], runs: pd.DataFrame) -> list[str]:
    """The config labels (in the summary's runs table) of the runs in these dirs (resolved paths)."""
    dirs = frozenset(dirs)
    if not dirs or runs.empty or "run_dir" not in runs:
        return []
    chosen = runs["run_dir"].map(lambda p: isinstance(p, str) and str(Path(p).resolve()) in dirs)
    return sorted(runs.loc[chosen, "label"].unique())


def declared_baseline_labels(races: list[Race], runs: pd.DataFrame) -> list[str]:
    """The config labels (in the summary's runs table) of the in-sweep baselines the races declared."""
    return labels_of_dirs(frozenset().union(*(race.baseline_dirs for race in races)), runs)


def confirmation_text(n: int, mean: float | None, failed: int, planned: int | None) -> str:
    """A confirmation in words, as the console and summary.md both say it: its fresh seeds and mean, and when
    failed runs ended it short of the planned seeds (max_failures failed confirmation runs), how many failed;
    failed runs that were replaced by fresh seeds are counted as retried. '' with no runs at all."""
    if not n and not failed:
        return ""
    seeds = f"{n} of {planned} fresh seeds" if failed and planned else f"{n} fresh seeds"
    ended = f", ended after {failed} failed runs" if failed and planned and n < planned else \
        f", {failed} failed runs retried" if failed else ""
    shown_mean = f", mean {mean:.2f}" if n and mean is not None and pd.notna(mean) else ""
    return f"{seeds}{ended}{shown_mean}"


def row_confirmation(race: Race, row: pd.Series, with_mean: bool = True) -> str:
    """confirmation_text of a final row: the winner's fresh seeds are its row's confirm_n; the baseline that ran
    them beside it (pairing=seed) has no confirm_n, so its finished confirmation runs are counted from the log."""
    failed = int(row["confirm_failed"]) if pd.notna(row["confirm_failed"]) else 0
    n = int(row["confirm_n"]) if pd.notna(row["confirm_n"]) else race.confirm_finished.get(row["config"], 0)
    planned = (race.header.get("settings") or {}).get("confirm_seeds")
    mean = row["confirm_mean"] if with_mean and pd.notna(row["confirm_n"]) else None
    return confirmation_text(n, mean, failed, planned)


def outcome_line(race: Race) -> str:
    """One line on how the race ended, for the console."""
    t = race.totals
    stopped = f"{t['collapsed']} stopped at a collapse, " if t["collapsed"] else ""
    spent = f"{t['runs']} runs ({stopped}{t['failed']} failed), {t['gpu_hours']:.1f} GPU-hours"
    if race.stop is None:
        last = int(race.timeline["round"].max()) if not race.timeline.empty else None
        where = f"after round {last}" if last is not None else "before its first assessment"
        return f"race {race.path}: not finished ({where}; rerun the sweep command to resume); {spent}"
    text = f"race {race.path}: stopped after round {race.stop['round']} ({race.stop['reason']}); " \
           f"winner {race.winner}"
    winner = race.final[race.final["winner"]]
    if not winner.empty:
        row = winner.iloc[0]
        if words := row_confirmation(race, row):
            text += f" (confirmation: {words})"
        text += f", final verdict: {row['action']}"
    elif not race.finished:
        text += " (confirmation still running)"
    return f"{text}; {len(race.eliminations)} left the race; {spent}"
