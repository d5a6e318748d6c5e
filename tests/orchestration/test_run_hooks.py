"""What the launchers ask of a run (skip, wait, submit; record a lost job) and the cycle's GPU choice."""

from __future__ import annotations

import json
import os
import socket

import pytest

from opsd_sweep.config import load_run_config
from opsd_sweep.cycle import (locate_run, probe_job, record_lost_job, record_submitted_job, run_gpus,
                              skip_reason)
from opsd_sweep.run.claims import claim_run, release_run
from tests.conftest import compose


@pytest.fixture
def job(tmp_path):
    """A composed tiny job config (as a launcher hands it to the hooks) and its run dir."""
    cfg = compose(["profile=tiny", f"results_root={tmp_path}", "seed=3"])
    return cfg, locate_run(load_run_config(cfg))[1]


@pytest.mark.parametrize("state, flags, reason", [
    (None, [], None),
    ("training", [], None),
    ("done", [], ("done", "already done")),
    ("done", ["force=true"], None),
    ("failed", [], ("failed", "failed before (rerun_failed=true retries it)")),
    ("failed", ["rerun_failed=true"], None),
])
def test_skip_reason(state, flags, reason):
    run = load_run_config(compose(["profile=tiny", *flags]))
    assert skip_reason(run, {"state": state} if state else {}) == reason


def test_a_requeued_slurm_job_continues_the_run_its_kill_marked_failed(monkeypatch):
    run = load_run_config(compose(["profile=tiny"]))
    monkeypatch.setenv("SLURM_JOB_ID", "77")
    assert skip_reason(run, {"state": "failed", "job_id": "77"}) is None
    assert skip_reason(run, {"state": "failed", "job_id": "76"}) is not None


def test_probe_says_submit_wait_or_settled(job):
    cfg, run_dir = job
    assert probe_job(cfg)[0] == "submit"
    claim = claim_run(run_dir)
    action, detail, run = probe_job(cfg)
    assert action == "wait" and f"pid {os.getpid()}" in detail and run["run_dir"] == str(run_dir.path)
    release_run(claim)
    run_dir.update_status(state="done")
    assert probe_job(cfg)[0] == "submit"  # done, but no eval.json reads back: evaluate again
    run_dir.eval_json.parent.mkdir()
    run_dir.eval_json.write_text(json.dumps({"metrics": {}, "problems": [], "n_samples": 1}))
    assert probe_job(cfg)[0] == "submit"  # fewer samples than eval.n_samples: a race round, not the whole eval
    run_dir.eval_json.write_text(json.dumps({"metrics": {}, "problems": [], "n_samples": cfg.eval.n_samples}))
    assert probe_job(cfg)[:2] == ("done", "already done")
    run_dir.update_status(state="failed")
    assert probe_job(cfg)[0] == "failed"


def test_record_submitted_job_remembers_the_slurm_job(job):
    cfg, run_dir = job
    record_submitted_job(cfg, "123_4")
    assert json.loads(run_dir.submission.read_text())["job_id"] == "123_4"


def test_a_lost_job_is_recorded_failed_only_if_it_held_the_run(job):
    cfg, run_dir = job
    error = {"message": "job process 99 was killed by SIGKILL before returning", "log": None}
    run_dir.update_status(state="training", host=socket.gethostname(), pid=99)
    record_lost_job(cfg, error, {"host": socket.gethostname(), "pid": 98})  # another process's run
    assert run_dir.read_status()["state"] == "training"
    record_lost_job(cfg, error, {"host": socket.gethostname(), "pid": 99})
    status = run_dir.read_status()
    assert status["state"] == "failed" and status["error"] == error and status["ended_at"]


def test_a_lost_job_leaves_a_run_that_a_live_process_holds_now(job):
    cfg, run_dir = job
    run_dir.update_status(state="training", job_id="5_1")
    claim = claim_run(run_dir)  # e.g. the requeued incarnation already runs it
    record_lost_job(cfg, {"message": "SLURM job 5_1 ended CANCELLED", "log": None}, {"job_id": "5_1"})
    assert run_dir.read_status()["state"] == "training"
    release_run(claim)


def test_run_gpus(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4,6")
    assert run_gpus(0) == [] and run_gpus(1) == ["4"] and run_gpus(2) == ["4", "6"]
    with pytest.raises(RuntimeError, match=r"train.num_gpus=4 but only GPUs \['4', '6'\] are visible"):
        run_gpus(4)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert run_gpus(2) == ["0", "1"]  # nothing set: the process sees every GPU
