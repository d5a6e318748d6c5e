"""race.jsonl: every record of a race, one JSON object per line, appended as it happens.

Record types: "race" (header: configs, baseline, anchor, settings), "run" (one finished run: config,
seed, phase, state done | collapsed | failed, score, collapse_step, run_dir), "decision" (round, phase,
config, n, mean, ci, p_best, p_baseline, p_anchor, seeds, collapse_steps, action), "stop" (round, reason,
winner) and "state" (a snapshot `RaceState` restores).
A restarted race reads the file back: the last state, and the runs (re-read from their run dirs).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
from pathlib import Path

from opsd_sweep.race.policy import RaceState, RunResult
from opsd_sweep.race.results import read_run_result
from opsd_sweep.race.settings import RaceSpec
from opsd_sweep.run.rundir import utc_now

log = logging.getLogger(__name__)


class RaceLog:
    """Append-only race.jsonl in the sweep's results folder."""

    def __init__(self, path: str | Path):
        self.path = Path(path)

    def records(self) -> list[dict]:
        """Every complete record; a line cut short by a crash (the last one) is ignored."""
        if not self.path.exists():
            return []
        out = []
        for line in self.path.read_text().splitlines():
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                continue
        return out

    def append(self, record: dict) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a") as handle:
            handle.write(json.dumps(record) + "\n")
            handle.flush()
            os.fsync(handle.fileno())

    def start_or_resume(self, spec: RaceSpec, metric: str) -> tuple[RaceState, list[RunResult]]:
        """Write the header of a new race, or restore the state and results of the race logged here.

        Raises ValueError when the log belongs to another grid or baseline (it names the fix).
        """
        records = self.records()
        header = _header(spec, metric)
        if self.path.exists() and not self.path.read_bytes().endswith(b"\n"):
            with open(self.path, "a") as handle:  # end the line a kill cut short, so new records stay whole
                handle.write("\n")
        if not records:
            self.append(header)
            return RaceState(), []
        old = records[0]
        if (old.get("configs"), old.get("baseline"), old.get("metric")) != \
                (header["configs"], header["baseline"], header["metric"]):
            raise ValueError(f"{self.path} logs another race (configs {old.get('configs')}, baseline "
                             f"{old.get('baseline')!r}, metric {old.get('metric')!r}); give this race its own "
                             f"folder with group=<name>, or move that file away to start over")
        states = [r for r in records if r["type"] == "state"]
        state = RaceState.from_record(states[-1]) if states else RaceState()
        latest = [r for r in records if r["type"] in ("race", "resume")][-1]
        if latest.get("settings") != header["settings"]:
            self.append(header | {"type": "resume", "note": "settings changed on resume"})
            log.warning(settings_change(latest.get("settings") or {}, header["settings"], state))
        runs = {(r["config"], r["seed"], r["phase"]): r for r in records if r["type"] == "run"}
        results = [_reread(r, metric, spec.settings.collapsed_score) for r in runs.values()]
        return state, results


def settings_change(old: dict, new: dict, state: RaceState) -> str:
    """What a user is told when a race resumes under other settings: which changed, and whether they act."""
    changed = ", ".join(f"{key} {old.get(key)} -> {value}" for key, value in new.items() if old.get(key) != value)
    if state.phase == "done":
        # more seeds after the stop would be looks the race never planned: its claims would not hold their level
        return (f"race: settings changed ({changed}), but this race has ended ({state.stop_reason}): a finished "
                "race is not reopened, so they change nothing. To race again, give it its own folder: group=<name>")
    return f"race: settings changed on resume ({changed}); they apply from round {state.round} on"


def _header(spec: RaceSpec, metric: str) -> dict:
    return {"type": "race", "started_at": utc_now(), "configs": list(spec.configs), "baseline": spec.baseline,
            "metric": metric, "anchor": dataclasses.asdict(spec.anchor) if spec.anchor else None,
            "settings": dataclasses.asdict(spec.settings)}


def _reread(record: dict, metric: str, collapsed_score: float | None) -> RunResult:
    """A logged run as a result: done and collapsed runs are read again from their run record (a score
    since found wrong no longer counts)."""
    if record["state"] in ("done", "collapsed") and record.get("run_dir"):
        return read_run_result(record["run_dir"], record["config"], record["seed"], record["phase"], metric,
                               collapsed_score)
    return RunResult(record["config"], record["seed"], record["phase"], "failed", gpu_hours=record["gpu_hours"],
                     run_dir=record.get("run_dir"), error=record.get("error"))
