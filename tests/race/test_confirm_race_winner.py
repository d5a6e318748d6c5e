"""After a race, `python -m opsd_sweep.confirm` (no --config) confirms the winner the race declared, not the summary's
best mean: a real simulated race (baseline lr=5e-6, lr=1e-5, lr=2e-5; 3 seeds each, no confirmation phase) whose
folder then gets 2 runs of lr=3e-5 from a plain sweep with a +20-point simulated offset, so the best mean is a config
the race never saw. Simulated arms are refused before any run (test_confirm_simulated), after the choice is printed:
these tests read that choice. An explicit --config still wins; a race with no winner leaves the best mean, and says so.
A race won by its baseline, and races that disagree on the winner, are refused before the choice, naming --config;
with --config both go on (their copies of the folder have the log's run dirs rewritten to the copy's runs).
"""

from __future__ import annotations

import json
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


def copy_with_winner(raced: Path, to: Path, winner: str) -> Path:
    """A copy of the raced folder whose race declared `winner` (its stop record rewritten); the log's run dirs
    point at the copy's runs, so its winner and its baseline are found there."""
    shutil.copytree(raced, to)
    log = to / "race.jsonl"
    log.write_text(with_winner(log.read_text().replace(str(raced), str(to)), winner))
    return to


def with_winner(text: str, winner: str) -> str:
    """A race log's text with the winner of its stop (and of its state records) replaced."""
    out = []
    for line in text.splitlines(keepends=True):
        record = json.loads(line)
        if record.get("type") in ("stop", "state") and record.get("winner") is not None:
            record["winner"] = winner
        out.append(json.dumps(record) + "\n")
    return "".join(out)


def confirm_refusal(folder: Path, *flags: str) -> str:
    """confirm's refusal (stderr), which must come before any run and before the choice line."""
    proc = subprocess.run([sys.executable, "-m", "opsd_sweep.confirm", str(folder), "--seeds", "2", *flags], cwd=REPO,
                          text=True, capture_output=True, timeout=300)
    assert proc.returncode == 1 and "executor=simulate" not in proc.stderr, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "[confirm] config " not in proc.stdout, proc.stdout
    return proc.stderr


def test_a_race_won_by_its_baseline_is_refused_not_replaced_by_the_best_mean(raced, tmp_path):
    """Nothing beat the baseline: confirming the best mean of the others would spend 2 x seeds training runs on a
    config the race judged no better; confirm says so and names --config as the way to confirm one anyway."""
    cut = copy_with_winner(raced, tmp_path / "raced", "learning_rate=5e-06")
    err = confirm_refusal(cut)
    assert f"the race in {cut / 'race.jsonl'} declared its baseline 'lr=5e-06" in err, err
    assert "no config beat it: nothing to confirm" in err and "--config" in err, err


def test_a_race_won_by_its_baseline_still_confirms_a_named_config(raced, tmp_path):
    cut = copy_with_winner(raced, tmp_path / "raced", "learning_rate=5e-06")
    line = confirm_choice(cut, "--config", "lr=2e-05")
    assert line.startswith("[confirm] config 'lr=2e-05 ") and "(named with --config lr=2e-05)" in line, line


def two_disagreeing_races(raced: Path, to: Path) -> tuple[Path, Path]:
    """The raced folder plus a second race log one level below it (as find_race_logs finds one) that declares
    another winner over the same runs."""
    cut = copy_with_winner(raced, to, "learning_rate=1e-05")
    other = cut / "rerun" / "race.jsonl"
    other.parent.mkdir()
    other.write_text(with_winner((cut / "race.jsonl").read_text(), "learning_rate=2e-05"))
    return cut / "race.jsonl", other


def test_races_that_disagree_on_the_winner_are_refused_and_named(raced, tmp_path):
    first, second = two_disagreeing_races(raced, tmp_path / "raced")
    err = confirm_refusal(first.parent)
    assert "declare different winners" in err and "--config" in err, err
    assert f"{first} ('lr=1e-05" in err and f"{second} ('lr=2e-05" in err, err


def test_races_that_disagree_yield_to_an_explicit_config(raced, tmp_path):
    """--config is the fix the refusal names: it must work (the races' winners are not read then)."""
    first, _ = two_disagreeing_races(raced, tmp_path / "raced")
    line = confirm_choice(first.parent, "--config", "lr=2e-05")
    assert line.startswith("[confirm] config 'lr=2e-05 ") and "(named with --config lr=2e-05)" in line, line
