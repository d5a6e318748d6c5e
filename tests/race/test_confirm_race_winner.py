"""After a race, `python -m opsd_sweep.confirm` (no --config) confirms the winner the race declared, not the summary's
best mean: a real simulated race (baseline lr=5e-6, lr=1e-5, lr=2e-5; 3 seeds each, no confirmation phase) whose
folder then gets 2 runs of lr=3e-5 from a plain sweep with a +20-point simulated offset, so the best mean is a config
the race never saw. Simulated arms are refused before any run (test_confirm_simulated), after the choice is printed:
these tests read that choice. An explicit --config still wins; a race with no winner leaves the best mean, and says so.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from opsd_sweep.race.log import RaceLog
from tests.conftest import REPO, run_sweep

RACE = ["-m", "hydra/sweeper=race", "hydra/launcher=basic", "executor=simulate", "group=raced",
        "learning_rate=5e-6,1e-5,2e-5", "hydra.sweeper.baseline='learning_rate=5e-6'", "hydra.sweeper.max_seeds=3",
        "hydra.sweeper.confirm_seeds=0"]
BEST_MEAN = ["-m", "hydra/launcher=basic", "executor=simulate", "group=raced", "learning_rate=3e-5", "seed=1,2",
             "simulate.offsets=[{key:learning_rate,value:3e-5,points:20}]"]


@pytest.fixture(scope="module")
def raced(tmp_path_factory, cache_dir) -> Path:
    results = tmp_path_factory.mktemp("raced")
    for args in (RACE, BEST_MEAN):
        proc = run_sweep(args, results, cache_dir, timeout=300)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return results / "raced"


def confirm_choice(folder: Path, *flags: str) -> str:
    """The console line naming the config confirm chose (printed before the simulated arms are refused)."""
    proc = subprocess.run([sys.executable, "-m", "opsd_sweep.confirm", str(folder), "--seeds", "2", *flags], cwd=REPO,
                          text=True, capture_output=True, timeout=300)
    assert proc.returncode == 1 and "executor=simulate" in proc.stderr, proc.stdout[-3000:] + proc.stderr[-3000:]
    return next(line for line in proc.stdout.splitlines() if line.startswith("[confirm] config "))


def test_confirm_takes_the_race_winner_over_the_best_mean(raced):
    winner = next(r for r in RaceLog(raced / "race.jsonl").records() if r["type"] == "stop")["winner"]
    assert winner == "learning_rate=1e-05"  # the race's pick; lr=3e-5 (+20 points) has the best mean
    line = confirm_choice(raced)
    assert line.startswith("[confirm] config 'lr=1e-05 "), line
    assert f"(the winner the race in {raced / 'race.jsonl'} declared)" in line


def test_an_explicit_config_still_wins_over_the_race(raced):
    line = confirm_choice(raced, "--config", "lr=2e-05")
    assert line.startswith("[confirm] config 'lr=2e-05 ") and "(named with --config lr=2e-05)" in line, line


def test_a_race_with_no_winner_leaves_the_best_mean_and_says_so(raced, tmp_path):
    """The race's log as a kill before its stop leaves it: no stop record, so no winner (the copy's log names the
    original's run dirs, so its declared baseline is not found here: named with --baseline)."""
    cut = tmp_path / "raced"
    shutil.copytree(raced, cut)
    log = cut / "race.jsonl"
    lines = log.read_text().splitlines(keepends=True)
    log.write_text("".join(lines[:next(i for i, text in enumerate(lines) if '"type": "stop"' in text)]))
    line = confirm_choice(cut, "--baseline", "lr=5e-06")
    assert line.startswith("[confirm] config \"lr=3e-05 "), line  # repr in double quotes: the offsets hold quotes
    assert "the best mean of the 3 configs that are not the baseline" in line
    assert f"the race in {log} declares no winner (not finished)" in line
