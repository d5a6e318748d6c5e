"""The GPU-hour budget of a real (simulated) race: `python -m opsd_sweep -m hydra/sweeper=race executor=simulate`.
The race stops before a round (and the confirmation after it) that would pass hydra.sweeper.budget_gpu_hours,
projecting each planned run at what a finished run cost: a failed run that took no GPU time (here a config the
run check refuses) is no estimate of the next round's runs, which are planned to finish."""

from __future__ import annotations

import json

import pytest

from tests.conftest import run_sweep

pytestmark = pytest.mark.slow

# every run costs simulate.gpu_hours_per_run = 6; learning_rate=-1 fails its run check (0 GPU-hours) 3 times
RACE = ["-m", "hydra/sweeper=race", "hydra/launcher=basic", "executor=simulate", "group=budget",
        "learning_rate=-1,5e-6,1e-5", "hydra.sweeper.baseline='learning_rate=5e-6'", "hydra.sweeper.max_seeds=10",
        "hydra.sweeper.target_half_width=0", "hydra.sweeper.budget_gpu_hours=60"]


def test_a_race_with_failed_runs_does_not_pass_its_gpu_hour_budget(tmp_path, cache_dir):
    proc = run_sweep(RACE, tmp_path, cache_dir, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    records = [json.loads(line) for line in (tmp_path / "budget" / "race.jsonl").read_text().splitlines()]
    runs = [r for r in records if r["type"] == "run"]
    assert sum(r["state"] == "failed" and r["gpu_hours"] == 0 for r in runs) == 3
    spent = sum(r["gpu_hours"] for r in runs)
    # round 0 took 6 runs (36 GPU-h); round 1 (2 runs) and the confirmation (3 runs) would take 30 more: 66 > 60
    assert spent <= 60, f"spent {spent} GPU-hours of a 60 budget"
    stop = next(r for r in records if r["type"] == "stop")
    assert (stop["round"], stop["gpu_hours"]) == (0, 36.0)
    assert stop["reason"].startswith("budget: 36.0 GPU-hours used")
