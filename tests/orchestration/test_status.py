"""`python -m opsd_sweep.status`: one row per run with state, progress, ETA and GPU-hours."""

from __future__ import annotations

import json

import pytest

from opsd_sweep.run.claims import claim_run, release_run
from opsd_sweep.run.rundir import RunDir, atomic_write_json
from opsd_sweep.status import find_runs, main, run_row


def make_run(root, name: str, status: dict | None, steps: list[float] = (), max_steps: int = 10) -> RunDir:
    run_dir = RunDir(root / "grp" / name)
    run_dir.train_dir.mkdir(parents=True)
    run_dir.config.write_text(f"train:\n  max_steps: {max_steps}\n")
    run_dir.metrics.write_text("".join(json.dumps({"step": i + 1, "step_seconds": s}) + "\n"
                                       for i, s in enumerate(steps)))
    if status is not None:
        atomic_write_json(run_dir.status, status)
    return run_dir


@pytest.fixture
def results(tmp_path):
    make_run(tmp_path, "done-run", {"state": "done", "started_at": "2026-11-30T10:00:00.000+00:00",
                                    "ended_at": "2026-11-30T11:30:00.000+00:00", "gpu_hours": 6.0,
                                    "host": "node1", "pid": 7, "gpus": ["0", "1", "2", "3"]},
             steps=[1.0] * 10)
    make_run(tmp_path, "dead-run", {"state": "training", "host": "gone-host", "pid": 1, "job_id": None,
                                    "started_at": "2026-11-30T10:00:00.000+00:00"}, steps=[2.0, 2.0])
    make_run(tmp_path, "failed-run", {"state": "failed", "error": {"message": "train phase exited with code 1\nmore",
                                                                   "log": "x"}, "gpu_hours": 0.5})
    queued = RunDir(tmp_path / "grp" / "queued-run")
    queued.path.mkdir(parents=True)
    atomic_write_json(queued.submission, {"job_id": "41_2"})
    (tmp_path / "grp" / ".hydra" / "multirun" / "x").mkdir(parents=True)
    atomic_write_json(tmp_path / "grp" / ".hydra" / "multirun" / "x" / "status.json", {"state": "done"})
    return tmp_path


def test_rows_say_state_progress_eta_and_gpu_hours(results):
    live = make_run(results, "live-run", None, steps=[3.0, 3.0])
    claim = claim_run(live)
    live.update_status(state="training", host=claim.owner["host"], pid=claim.owner["pid"],
                       started_at="2026-11-30T10:00:00.000+00:00")
    rows = {r.name.removeprefix("grp/"): r for r in (run_row(d, results) for d in find_runs(results))}
    release_run(claim)
    assert set(rows) == {"done-run", "dead-run", "failed-run", "queued-run", "live-run"}  # .hydra ignored
    assert (rows["done-run"].state, rows["done-run"].step, rows["done-run"].elapsed_s) == ("done", 10, 5400.0)
    assert rows["done-run"].gpu_hours == 6.0 and rows["done-run"].where == "node1:7 GPU 0,1,2,3"
    assert rows["live-run"].state == "training" and rows["live-run"].eta_s == 8 * 3.0
    assert rows["dead-run"].state == "interrupted"  # its owner is gone (claims hold no live owner)
    assert rows["failed-run"].note == "train phase exited with code 1"
    assert rows["queued-run"].state == "queued" and rows["queued-run"].where == "SLURM 41_2"


def test_the_table_lists_runs_by_state_with_totals(results, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    main([str(results)])
    out = capsys.readouterr().out
    order = [line.split()[1] for line in out.splitlines() if "grp/" in line]
    assert order == ["grp/queued-run", "grp/dead-run", "grp/failed-run", "grp/done-run"]
    assert "4 runs: queued 1 interrupted 1 failed 1 done 1 | GPU-hours 6.500" in out


def test_a_missing_results_root_is_a_clear_error(tmp_path, capsys):
    with pytest.raises(SystemExit):
        main([str(tmp_path / "nowhere")])
    assert "no results root at" in capsys.readouterr().err
