"""A real Hydra multirun of real train-then-eval cycles on the tiny CPU profile."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from opsd_sweep.summary import main as summary_main
from tests.conftest import run_sweep

GRID = ["-m", "profile=tiny", "learning_rate=1e-3,3e-3", "seed=1,2", "train.max_steps=2", "train.save_steps=1",
        "eval.n_samples=2", "eval.max_problems=8"]


@pytest.fixture(scope="module")
def swept(tmp_path_factory, cache_dir):
    results = tmp_path_factory.mktemp("results")
    first = run_sweep(GRID, results, cache_dir)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    return results, first


def test_multirun_writes_four_complete_run_dirs(swept):
    results, _ = swept
    run_dirs = sorted(p.parent for p in (results / "tiny").glob("*/status.json"))
    assert len(run_dirs) == 4
    for run_dir in run_dirs:
        status = json.loads((run_dir / "status.json").read_text())
        assert status["state"] == "done", status
        assert set(status["phase_seconds"]) == {"train", "evaluate"}
        steps = [json.loads(line) for line in (run_dir / "train/metrics.jsonl").read_text().splitlines()]
        assert [s["step"] for s in steps] == [1, 2]
        assert {"loss", "kl_true", "grad_norm", "lr", "rollout_len"} <= set(steps[0])
        evaluation = json.loads((run_dir / "eval/eval.json").read_text())
        assert evaluation["n_problems"] == 8 and evaluation["n_samples"] == 2
        assert all(len(p["samples"]) == 2 for p in evaluation["problems"])
        assert (run_dir / "train/checkpoint-2/adapter_model.safetensors").exists()


def test_rerun_skips_finished_runs(swept, cache_dir):
    results, _ = swept
    again = run_sweep(GRID, results, cache_dir)
    assert again.returncode == 0
    assert again.stdout.count("skipped (already done)") == 4, again.stdout


def test_summary_has_one_row_per_run_and_per_config(swept, tmp_path):
    results, _ = swept
    summary_main([str(results / "tiny"), "--out", str(tmp_path)])
    runs = pd.read_csv(tmp_path / "runs.csv")
    summary = pd.read_csv(tmp_path / "summary.csv")
    assert len(runs) == 4 and set(runs["state"]) == {"done"}
    assert sorted(summary["cfg.learning_rate"]) == [1e-3, 3e-3]
    assert list(summary["n"]) == [2, 2]
    assert summary["mean"].between(0, 100).all()


@pytest.mark.parametrize("override, message", [
    ("lerning_rate=1e-3", "did you mean 'learning_rate'"),
    ("learning_rate=-1", "learning_rate=-1.0 must be > 0"),
])
def test_bad_override_fails_clearly_before_any_job(tmp_path, cache_dir, override, message):
    proc = run_sweep(["-m", "profile=tiny", override, "seed=1,2"], tmp_path, cache_dir, timeout=120)
    assert proc.returncode != 0
    assert message in proc.stdout + proc.stderr
    assert not list(tmp_path.rglob("status.json"))
