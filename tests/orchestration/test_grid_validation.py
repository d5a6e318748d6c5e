"""The whole grid is composed and checked before the first job: one clear error, nothing runs."""

from __future__ import annotations

import pytest

from tests.conftest import run_sweep


@pytest.mark.parametrize("grid, expected, unexpected", [
    (["train.max_step=3", "seed=1,2"], ["unknown config key 'train.max_step'", "did you mean 'train.max_steps'?"], []),
    (["learning_rate=-1,1e-3", "seed=1,2"],
     # the problem is named by the override it comes from, with the jobs it hits
     ["the sweep was not started: 2 of 4 jobs cannot run.", "* learning_rate=-1 (#0, #1):\n"
      "    learning_rate=-1.0 must be > 0"], ["#2", "#3"]),
    (["train.global_batch_size=16", "seed=1,2"],
     ["train.global_batch_size=16 != GPUs 1 x per_device_batch_size 8 x grad_accum_steps 1 = 8"], []),
    (["train.num_gpus=2", "train.global_batch_size=16", "seed=1,2", "hydra.launcher.gpus=[0]"],
     ["needs 2 GPUs but the launcher (GPUs ['0']) has 1", "hydra.launcher.gpus=[...]"], []),
    # the published anchor's group was called baseline; the old name is refused with the new one
    (["baseline=tiny", "seed=1,2"], ["override 'baseline=tiny': the published anchor", "is now called 'anchor'",
                                     "write 'anchor=tiny'"], []),
    (["baseline.mean=40", "seed=1,2"], ["override 'baseline.mean=40'", "write 'anchor.mean=40'"], []),
    # one value written twice: the jobs are named by their overrides, though nothing tells them apart
    (["learning_rate=1e-2,0.01", "seed=1"], ["would all be the one run", "#0 profile=tiny learning_rate=0.01 seed=1, "
                                             "#1 profile=tiny learning_rate=0.01 seed=1:"], ["#0 , #1"]),
], ids=["unknown-key", "invalid-value", "batch-sizes", "too-many-gpus", "old-anchor-group", "old-anchor-key",
        "one-value-twice"])
def test_an_invalid_grid_fails_at_once_with_every_problem(tmp_path, cache_dir, grid, expected, unexpected):
    proc = run_sweep(["-m", "profile=tiny", *grid], tmp_path, cache_dir, timeout=120)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 1, output
    for text in expected:
        assert text in output
    for text in unexpected:
        assert text not in output
    assert not list(tmp_path.rglob("status.json")) and not list(tmp_path.rglob("config.yaml"))
    assert "Traceback" not in output


def test_the_standalone_evaluation_refuses_the_old_anchor_name_with_the_new_one(tmp_path):
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-m", "opsd_sweep.evaluate", "baseline=tiny", f"results_root={tmp_path}"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1 and "write 'anchor=tiny'" in proc.stderr, proc.stdout + proc.stderr
    assert not list(tmp_path.rglob("status.json"))
