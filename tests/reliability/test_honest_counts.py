"""Issue 16, item 10: a rerun counts runs that failed before (and were skipped) and runs another live
sweep holds; it exits non-zero while any run of the grid is failed or unfinished, and waits for held runs."""

from __future__ import annotations

import json

import pytest

from opsd_sweep.run.claims import claim_run, release_run
from opsd_sweep.run.rundir import RunDir
from tests.conftest import run_sweep
from tests.orchestration.conftest import start_sweep, wait_until

pytestmark = pytest.mark.slow

SIM = ["-m", "executor=simulate", "group=counts", "hydra.launcher.poll_s=0.2"]


def runs_by_seed(results) -> dict[int, RunDir]:
    return {int(p.name.rsplit("-", 2)[1][1:]): RunDir(p) for p in (results / "counts").glob("lr*")}


def test_a_skipped_failed_run_is_counted_and_fails_the_sweep(tmp_path, cache_dir):
    assert run_sweep([*SIM, "seed=1,2"], tmp_path, cache_dir).returncode == 0
    failed = runs_by_seed(tmp_path)[2]
    failed.update_status(state="failed", error={"message": "boom", "log": None})
    proc = run_sweep([*SIM, "seed=1,2"], tmp_path, cache_dir)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 1, output[-3000:]
    assert "done 1, running 0, failed 0, pending 0, skipped-failed 1" in output
    assert "skipped-failed: skipped (failed before (rerun_failed=true retries it))" in output
    assert run_sweep([*SIM, "seed=1,2", "rerun_failed=true"], tmp_path, cache_dir).returncode == 0


def test_a_run_held_by_another_live_process_is_waited_for(tmp_path, cache_dir):
    assert run_sweep([*SIM, "seed=1"], tmp_path, cache_dir).returncode == 0
    run_dir = runs_by_seed(tmp_path)[1]
    status = json.loads(run_dir.status.read_text())
    run_dir.update_status(state="training")  # as another sweep that is running it would show it
    claim = claim_run(run_dir)  # held by this (live) test process
    log = tmp_path / "sweep.log"
    sweep = start_sweep([*SIM, "seed=1"], tmp_path, cache_dir, log)
    wait_until(lambda: "waiting for 1 held by another sweep" in log.read_text(), 120, "the sweep to wait")
    assert sweep.poll() is None  # still waiting, not reported done
    run_dir.update_status(**status)  # the other sweep finishes the run and lets go
    release_run(claim)
    assert sweep.wait(120) == 0, log.read_text()[-3000:]
    output = log.read_text()
    assert "skipped (already done)" in output and "done 1, running 0, failed 0, pending 0" in output
