"""`python -m opsd_sweep.confirm` on a sweep of simulated runs (executor=simulate, a real `-m` sweep): a simulated
run scores one synthetic problem set, never an eval suite's members, so its confirmation runs would all finish
with no score on the tuning or the locked benchmark and be reported as "none has finished; rerun" forever. The
confirmation is refused before any run, naming the executor and the fix."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import REPO, run_sweep


def test_a_simulated_sweep_is_refused_before_any_confirmation_run(tmp_path, cache_dir):
    sweep = ["-m", "executor=simulate", "group=sim", "learning_rate=5e-6,1e-5", "seed=1,2,3"]
    proc = run_sweep(sweep, tmp_path, cache_dir, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    confirm = subprocess.run([sys.executable, "-m", "opsd_sweep.confirm", str(tmp_path / "sim"), "--baseline",
                              "lr=5e-06", "--seeds", "2"], cwd=REPO, text=True, capture_output=True, timeout=300)
    output = confirm.stdout + confirm.stderr
    assert confirm.returncode == 1, output[-3000:]
    assert "executor=simulate" in output and "none of the" not in output, output[-3000:]
    assert not (tmp_path / "sim-confirm").exists()  # nothing ran, no overlay written
    assert not (tmp_path / "sim" / "confirm.json").exists()


def test_the_baseline_a_race_declared_is_confirms_auto_baseline_as_the_summarys(tmp_path, cache_dir):
    """`--baseline auto` (the default) of a race's folder with no untrained base model: the summary falls back on the
    baseline the race declared; confirm read the same folder as having none ("no race declares a baseline")."""
    race = ["-m", "hydra/sweeper=race", "hydra/launcher=basic", "executor=simulate", "group=raced",
            "learning_rate=5e-6,1e-5", "hydra.sweeper.baseline='learning_rate=5e-6'", "hydra.sweeper.max_seeds=3",
            "hydra.sweeper.confirm_seeds=0"]
    proc = run_sweep(race, tmp_path, cache_dir, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    confirm = subprocess.run([sys.executable, "-m", "opsd_sweep.confirm", str(tmp_path / "raced"), "--seeds", "2"],
                             cwd=REPO, text=True, capture_output=True, timeout=300)
    output = confirm.stdout + confirm.stderr
    assert "no in-sweep baseline" not in output, output[-3000:]
    # the race's baseline is taken, then the simulated arms are refused before any run
    assert "the baseline 'lr=5e-06 [simulated]'" in output and "executor=simulate" in output, output[-3000:]
