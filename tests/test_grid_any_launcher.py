"""The grid check runs whatever the launcher: under Hydra's plain launcher (hydra/launcher=basic) a grid the default
launcher refuses is refused the same way, before the first job starts, and a valid grid still runs."""

from __future__ import annotations

import json

import pytest

from tests.conftest import run_sweep

BASIC = ["-m", "hydra/launcher=basic"]
SIM = ["executor=simulate", "group=basic"]  # synthetic cycles: a grid that is not refused finishes in seconds


@pytest.mark.parametrize("grid, expected", [
    # Hydra reads 1e-2 and 0.01 as one value: two jobs, one run
    ([*SIM, "learning_rate=1e-2,0.01", "seed=1"],
     ["would all be the one run", "#0 executor=simulate group=basic learning_rate=0.01 seed=1, "
                                "#1 executor=simulate group=basic learning_rate=0.01 seed=1:"]),
    # the bad seed is job #1: job #0 must not run before it is seen
    ([*SIM, "seed=1,-1"], ["1 of 2 jobs cannot run", "#1 seed=-1:",
                              "seed=-1 must be in [0, 4294967295]"]),
    # the tiny profile's loss never clips: the two values are one config
    (["profile=tiny", "clip=0.05,0.5", "seed=1"], ["clip=0.05,0.5 would be 2 configs that are one",
                                                  "loss.clip_mode=none"]),
], ids=["one-value-twice", "bad-seed-second", "inert-clip"])
def test_the_plain_launcher_gets_the_grid_check_before_any_job(tmp_path, cache_dir, grid, expected):
    proc = run_sweep([*BASIC, *grid], tmp_path, cache_dir, timeout=120)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 1, output
    assert "the sweep was not started" in output, output
    for text in expected:
        assert text in output, output
    assert "Traceback" not in output
    assert not list(tmp_path.rglob("status.json")) and not list(tmp_path.rglob("config.yaml"))
    assert not list(tmp_path.rglob("multirun.yaml"))  # the sweeper was never reached


def test_a_valid_grid_runs_under_the_plain_launcher(tmp_path, cache_dir):
    proc = run_sweep([*BASIC, *SIM, "learning_rate=1e-3,3e-3", "seed=1"], tmp_path, cache_dir, timeout=120)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    states = [json.loads(p.read_text())["state"] for p in tmp_path.rglob("status.json")]
    assert states == ["done", "done"]
