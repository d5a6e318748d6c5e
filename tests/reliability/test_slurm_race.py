"""Issue 16, item 2: a racing sweep resumed on SLURM reads the runs it finished before the cut as done
(the launcher answers a settled run with its run_dir), so it reaches the decisions of an uncut race."""

from __future__ import annotations

import json

import pytest

from tests.conftest import run_sweep
from tests.orchestration.test_slurm import slurm_missing

pytestmark = [pytest.mark.slurm, pytest.mark.slow,
              pytest.mark.skipif(slurm_missing() is not None, reason=str(slurm_missing()))]

RACE = ["-m", "hydra/sweeper=race", "hydra/launcher=slurm_ci", "executor=simulate", "group=race",
        "learning_rate=2e-6,5e-6,2e-5", "simulate.lr_curvature=6", "hydra.sweeper.baseline='learning_rate=5e-6'",
        "hydra.sweeper.max_seeds=4", "hydra.sweeper.confirm_seeds=1"]


def records(log) -> list[dict]:
    return [json.loads(line) for line in log.read_text().splitlines()]


def decisions(recs: list[dict]) -> list[tuple]:
    return [(r["round"], r["phase"], r["config"], r.get("n"), round(r.get("mean") or 0, 9), r["action"])
            for r in recs if r["type"] == "decision"]


def test_a_slurm_race_cut_after_its_runs_finished_resumes_to_the_same_decisions(tmp_path, cache_dir):
    proc = run_sweep(RACE, tmp_path, cache_dir, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    log = tmp_path / "race" / "race.jsonl"
    whole = log.read_text().splitlines()
    complete = decisions(records(log))
    # Cut where a kill during round 1 leaves it: the runs of the rounds after are finished on disk, unlogged.
    cut = next(i for i, line in enumerate(whole) if '"round": 1' in line and '"decision"' in line)
    log.write_text("\n".join(whole[:cut]) + "\n")

    again = run_sweep(RACE, tmp_path, cache_dir, timeout=600)
    output = again.stdout + again.stderr
    assert again.returncode == 0, output[-3000:]
    assert "skipped (already done)" in output  # the launcher answered for settled runs
    resumed = records(log)
    assert not [r for r in resumed if r["type"] == "run" and r["state"] != "done"], output[-3000:]
    assert decisions(resumed) == complete
    statuses = [json.loads(s.read_text()) for s in (tmp_path / "race").glob("*/status.json")]
    assert statuses and all(s["attempts"] == 1 for s in statuses)  # no finished run ran again
