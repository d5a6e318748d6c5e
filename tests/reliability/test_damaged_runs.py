"""Issue 16, items 3-6 and 11: damage injected into the run dir of a real tiny cycle (torn metrics line,
a restart before the first checkpoint, a truncated eval.json, an unreadable status.json, a corrupted
checkpoint); the rerun ends right and says what it did."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from opsd_sweep.status import main as status_main
from tests.conftest import run_sweep
from tests.orchestration.conftest import TINY, phase_starts, run_dirs, status, steps_logged

pytestmark = pytest.mark.slow

ARGS = ["-m", *TINY, "train.max_steps=2", "seed=1"]


@pytest.fixture
def run(finished, tmp_path) -> tuple[Path, Path]:
    """A private copy of the finished results root and its run dir: (results root, run dir)."""
    results = tmp_path / "results"
    shutil.copytree(finished, results)
    return results, run_dirs(results)[1]


def rerun(results: Path, tiny_cache: Path, *extra: str):
    proc = run_sweep([*ARGS, *extra], results, tiny_cache)
    return proc, proc.stdout + proc.stderr


def interrupt_after_step_1(run_dir: Path) -> None:
    """What a kill during step 2 leaves: checkpoint 1, no eval, the run marked training."""
    shutil.rmtree(run_dir / "train" / "checkpoint-2")
    shutil.rmtree(run_dir / "eval")
    s = status(run_dir) | {"state": "training"}
    (run_dir / "status.json").write_text(json.dumps(s))


def test_a_torn_last_metrics_line_does_not_stop_the_resume(run, tiny_cache):
    results, run_dir = run
    interrupt_after_step_1(run_dir)
    with open(run_dir / "train" / "metrics.jsonl", "a") as handle:
        handle.write('{"step": 3, "loss": 0.')  # a kill in the middle of a write
    proc, output = rerun(results, tiny_cache)
    assert proc.returncode == 0, output[-3000:]
    assert status(run_dir)["state"] == "done" and status(run_dir)["attempts"] == 2
    assert steps_logged(run_dir) == [1, 2]
    assert "resumed from" in (run_dir / "logs" / "train.log").read_text()


def test_a_restart_before_the_first_checkpoint_logs_each_step_once(run, tiny_cache):
    results, run_dir = run
    interrupt_after_step_1(run_dir)
    shutil.rmtree(run_dir / "train" / "checkpoint-1")  # killed before the first checkpoint
    proc, output = rerun(results, tiny_cache)
    assert proc.returncode == 0, output[-3000:]
    assert steps_logged(run_dir) == [1, 2]
    assert status(run_dir)["state"] == "done"


def test_a_truncated_eval_json_is_evaluated_again_without_retraining(run, tiny_cache):
    results, run_dir = run
    eval_json = run_dir / "eval" / "eval.json"
    eval_json.write_text(eval_json.read_text()[:200])
    proc, output = rerun(results, tiny_cache)
    assert proc.returncode == 0, output[-3000:]
    assert "eval.json does not read back; evaluating again from the final checkpoint (no retraining)" in output
    assert phase_starts(run_dir, "train") == 1 and phase_starts(run_dir, "evaluate") == 2
    assert json.loads(eval_json.read_text())["metrics"]["avg_at_n"] >= 0
    assert status(run_dir)["state"] == "done" and status(run_dir)["attempts"] == 2


@pytest.mark.parametrize("garbage, copy_kept", [(b"\xff\xfe not utf-8 \x00", True), (b"plain text", False)])
def test_an_unreadable_status_json_is_reported_and_recovered(run, tiny_cache, capsys, garbage, copy_kept):
    results, run_dir = run
    before = status(run_dir)
    if not copy_kept:
        (run_dir / "status.prev.json").unlink()
    (run_dir / "status.json").write_bytes(garbage)
    status_main([str(results)])  # the status table does not crash, and names the file
    shown = capsys.readouterr()
    assert f"unreadable {run_dir / 'status.json'}" in shown.err and "done" in shown.out
    proc, output = rerun(results, tiny_cache)
    assert proc.returncode == 0, output[-3000:]
    assert "skip" in output and "already done" in output  # nothing ran again
    after = status(run_dir)
    assert after["state"] == "done" and after["attempts"] == before["attempts"]
    if copy_kept:
        assert after["phase_seconds"] == before["phase_seconds"]


def test_a_failing_phase_names_its_exception_in_the_console_and_status(run, tiny_cache):
    results, run_dir = run
    shutil.rmtree(run_dir / "eval")
    (run_dir / "train" / "checkpoint-2" / "adapter_model.safetensors").write_bytes(b"not safetensors")
    (run_dir / "status.json").write_text(json.dumps(status(run_dir) | {"state": "evaluating"}))
    proc, output = rerun(results, tiny_cache)
    assert proc.returncode == 1
    error = status(run_dir)["error"]["message"]
    assert error.startswith("evaluate phase exited with code 1: ") and "Error" in error.split(";")[0], error
    assert error.endswith(f"see {run_dir / 'logs' / 'eval.log'}")
    assert f"FAILED {run_dir.name}: {error}" in output
