"""Issue 23: the phases of a local sweep's cycles run in warm phase workers (opsd_sweep.worker), one per
GPU set or CPU slot. A cycle in a worker that already ran another gives exactly what it gives in
processes of its own; a worker killed mid-phase fails only its run (resumable) and is replaced; Ctrl-C
stops the sweep as before and leaves no worker behind."""

from __future__ import annotations

import json
import os
import shutil
import signal
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from opsd_sweep.cycle import phase_starts
from tests.conftest import run_sweep
from tests.orchestration.conftest import TINY, has_checkpoint, run_dirs, start_sweep, status, steps_logged, wait_until

pytestmark = pytest.mark.slow

ONE_SLOT = ["hydra.launcher.max_parallel=1"]  # one CPU worker runs every cycle, one after another
TIMING = {"step_seconds", "tokens_per_s", "rollout_tokens_per_s"}  # metrics.jsonl's clock readings (+ time_*)


def phase_workers(run_dir: Path, phase: str = "train") -> list[int | None]:
    """The worker pid of each start of the phase in its log (None: a process of its own)."""
    return phase_starts(run_dir / "logs" / ("train.log" if phase == "train" else "eval.log"), phase)


def metrics(run_dir: Path) -> list[dict]:
    lines = [json.loads(line) for line in (run_dir / "train" / "metrics.jsonl").read_text().splitlines()]
    return [{k: v for k, v in line.items() if k not in TIMING and not k.startswith("time_")} for line in lines]


def evaluation(run_dir: Path) -> dict:
    result = json.loads((run_dir / "eval" / "eval.json").read_text())
    assert result["checkpoint"].startswith(str(run_dir))
    # timing and created_at are clock readings; checkpoint and the plan's fingerprint name the results root;
    # checkpoint_identity hashes the whole checkpoint dir, its trainer state's clock readings too (the
    # adapter weights are compared byte for byte instead: adapter_bytes)
    return {k: v for k, v in result.items()
            if k not in ("timing", "created_at", "checkpoint", "fingerprint", "checkpoint_identity")}


def adapter_bytes(run_dir: Path) -> dict[str, bytes]:
    """Each checkpoint's adapter weights, by checkpoint."""
    return {path.parent.name: path.read_bytes()
            for path in sorted((run_dir / "train").glob("checkpoint-*/adapter_model.safetensors"))}


def test_cycles_in_a_warm_worker_give_what_processes_of_their_own_give(tmp_path, tiny_cache):
    args = ["-m", *TINY, *ONE_SLOT, "train.max_steps=2", "seed=1,2,3"]
    warm, cold = tmp_path / "worker", tmp_path / "per_phase"
    for results, extra in ((warm, []), (cold, ["hydra.launcher.phase_workers=false"])):
        done = run_sweep(args + extra, results, tiny_cache)
        assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    warm_runs, cold_runs = run_dirs(warm), run_dirs(cold)
    assert sorted(warm_runs) == sorted(cold_runs) == [1, 2, 3]
    # every phase of the three cycles ran in one worker: cycles 2 and 3 in a worker that had run cycle 1
    workers = {pid for seed in warm_runs for phase in ("train", "evaluate")
               for pid in phase_workers(warm_runs[seed], phase)}
    assert len(workers) == 1 and None not in workers, workers
    assert all(phase_workers(cold_runs[seed]) == [None] for seed in cold_runs)
    for seed in (1, 2, 3):
        assert metrics(warm_runs[seed]) == metrics(cold_runs[seed]), seed
        assert evaluation(warm_runs[seed]) == evaluation(cold_runs[seed]), seed
        assert adapter_bytes(warm_runs[seed]) == adapter_bytes(cold_runs[seed]), seed
    assert metrics(warm_runs[1]) != metrics(warm_runs[2])  # the seeds differ: the comparison can fail


def runs_by_steps(results: Path) -> dict[int, Path]:
    """Run dirs of the tiny group by their train.max_steps."""
    return {OmegaConf.load(path / "config.yaml").train.max_steps: path
            for path in (results / "tiny").glob("*-s*-*") if (path / "config.yaml").exists()}


def test_a_worker_killed_mid_phase_fails_its_run_only_and_is_replaced(tmp_path, tiny_cache):
    args = ["-m", *TINY, *ONE_SLOT, "train.max_steps=40,3", "seed=1"]  # the long run first, then a short one
    log = tmp_path / "sweep.log"
    sweep = start_sweep(args, tmp_path, tiny_cache, log)
    long = lambda: runs_by_steps(tmp_path).get(40)  # noqa: E731
    wait_until(lambda: long() is not None and has_checkpoint(long(), 1), 600, "the first checkpoint")
    [killed] = phase_workers(long())
    os.kill(killed, signal.SIGKILL)
    assert sweep.wait(600) == 1, log.read_text()[-3000:]
    s = status(long())
    assert s["state"] == "failed", s
    assert f"train phase stopped: phase worker {killed} died" in s["error"]["message"]
    short = runs_by_steps(tmp_path)[3]
    assert status(short)["state"] == "done"
    [replacement] = phase_workers(short)
    assert replacement not in (None, killed)
    again = run_sweep(args + ["rerun_failed=true"], tmp_path, tiny_cache)  # resumes from its checkpoint
    assert again.returncode == 0, (again.stdout + again.stderr)[-3000:]
    assert status(long())["state"] == "done" and status(long())["attempts"] == 2
    assert "resumed from" in (long() / "logs" / "train.log").read_text()
    assert steps_logged(long()) == list(range(1, 41))


def test_a_failing_phase_ends_its_worker_and_the_next_cycle_gets_a_new_one(tmp_path, tiny_cache):
    base = ["-m", *TINY, *ONE_SLOT, "train.max_steps=2"]
    first = run_sweep([*base, "seed=1"], tmp_path, tiny_cache)
    assert first.returncode == 0, (first.stdout + first.stderr)[-3000:]
    damaged = run_dirs(tmp_path)[1]  # its final adapter no longer loads: the eval phase fails
    shutil.rmtree(damaged / "eval")
    (damaged / "train" / "checkpoint-2" / "adapter_model.safetensors").write_bytes(b"not safetensors")
    (damaged / "status.json").write_text(json.dumps(status(damaged) | {"state": "evaluating"}))
    again = run_sweep([*base, "seed=1,2"], tmp_path, tiny_cache)
    assert again.returncode == 1, (again.stdout + again.stderr)[-3000:]
    assert status(damaged)["error"]["message"].startswith("evaluate phase exited with code 1: ")
    failed_in = phase_workers(damaged, "evaluate")[-1]  # the first sweep evaluated it too
    other = run_dirs(tmp_path)[2]
    assert status(other)["state"] == "done"
    assert phase_workers(other)[0] not in (None, failed_in)


def test_ctrl_c_on_the_worker_path_marks_the_run_interrupted_and_stops_the_worker(tmp_path, tiny_cache):
    log = tmp_path / "sweep.log"
    sweep = start_sweep(["-m", *TINY, "train.max_steps=40", "seed=1"], tmp_path, tiny_cache, log)
    run = lambda: run_dirs(tmp_path).get(1)  # noqa: E731
    wait_until(lambda: run() is not None and has_checkpoint(run(), 1), 600, "the first checkpoint")
    [worker] = phase_workers(run())
    os.killpg(sweep.pid, signal.SIGINT)  # a terminal's Ctrl-C: the sweep's process group
    assert sweep.wait(120) == 130, log.read_text()[-3000:]
    output = log.read_text()
    assert "Traceback" not in output, output[-3000:]
    s = status(run())
    assert s["state"] == "interrupted" and "interrupted by SIGINT while training" in s["error"]["message"], s
    with pytest.raises(ProcessLookupError):  # the worker went with the sweep (it is not in its process group)
        os.kill(worker, 0)
