"""Issue 48, part 2: a single job (no -m) gets every check a sweep gets before any compute, with the problems `-m`
names, and exits non-zero whenever its run did not finish: failed, skipped as failed before, failed again with
rerun_failed=true. A failure's cause is the line the console prints, also under a multi-process launch."""

from __future__ import annotations

import re

import pytest

from tests.conftest import run_sweep
from tests.orchestration.conftest import TINY, run_dirs, status, tiny_cache  # noqa: F401 (a fixture)

BROKEN = '{"problem": "1+2*3=?", "solution": "7"}\n{"problem": \n'  # the pre-flight reads its first record only


def problems(output: str) -> list[str]:
    """The problem lines of a refusal, single (`* problem`) or of a sweep (`    problem` under `* jobs:`)."""
    return [line.strip().removeprefix("* ") for line in output.splitlines()
            if line.startswith("    ") or (line.startswith("* ") and not line.endswith(":"))]


@pytest.fixture
def cpu_box(monkeypatch):
    """This machine as the issue's: no GPU, CUDA_VISIBLE_DEVICES unset (the cycle would assume GPUs 0..3)."""
    import torch

    if torch.cuda.is_available():
        pytest.skip("torch sees a GPU here; the refusal is about a machine without one")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def test_the_default_single_job_on_a_cpu_box_is_refused_before_compute_with_the_sweeps_problems(
        tmp_path, cache_dir, cpu_box):
    args = ["learning_rate=1.4e-5", "seed=1"]
    single = run_sweep(args, tmp_path / "single", cache_dir, timeout=120)
    sweep = run_sweep(["-m", *args], tmp_path / "sweep", cache_dir, timeout=120)
    said, swept = single.stdout + single.stderr, sweep.stdout + sweep.stderr
    assert single.returncode == 1 and sweep.returncode == 1, said + swept
    assert said.startswith("the run was not started:") and said.rstrip().endswith("Nothing was run or written.")
    # every problem -m names (the hub sources not cached offline), in the same words, and the GPU count
    assert problems(swept) and set(problems(swept)) <= set(problems(said)), (said, swept)
    assert "data.path=siyanzhao/Openthoughts_math_30k_opsd: the hub dataset is not in the local cache" in said
    assert ("needs 4 GPUs but this machine (GPUs []) has 0; lower the job's GPU count (train.num_gpus and the batch "
            "sizes) or give it more GPUs with CUDA_VISIBLE_DEVICES") in said
    assert "Traceback" not in said and "ChildFailedError" not in said
    assert not (tmp_path / "single").exists()  # no run dir, no status.json with 4 GPUs, no Hydra output dir


def test_a_single_job_needing_more_gpus_than_visible_gets_the_launchers_problem(tmp_path, cache_dir):
    """The GPU problem alone (a tiny cycle's sources all exist), against CUDA_VISIBLE_DEVICES as set."""
    args = [*TINY, "train.num_gpus=2", "train.per_device_batch_size=4", "train.global_batch_size=8", "seed=1"]
    proc = run_sweep(args, tmp_path / "results", cache_dir, timeout=120, env_extra={"CUDA_VISIBLE_DEVICES": "3"})
    output = proc.stdout + proc.stderr
    assert proc.returncode == 1, output
    assert problems(output) == ["needs 2 GPUs but this machine (GPUs ['3']) has 1; lower the job's GPU count "
                                "(train.num_gpus and the batch sizes) or give it more GPUs with CUDA_VISIBLE_DEVICES"]
    assert not (tmp_path / "results").exists()


@pytest.mark.parametrize("grid", [["learning_rate=-1", "seed=-1"], ["clip=-1"]], ids=["two-values", "clip"])
def test_a_single_jobs_bad_values_are_refused_with_the_problems_of_its_sweep(tmp_path, cache_dir, grid):
    args = ["executor=simulate", "group=single", *grid]
    single = run_sweep(args, tmp_path / "single", cache_dir, timeout=120)
    sweep = run_sweep(["-m", *args], tmp_path / "sweep", cache_dir, timeout=120)
    said, swept = single.stdout + single.stderr, sweep.stdout + sweep.stderr
    assert single.returncode == 1 and sweep.returncode == 1
    assert problems(said) == problems(swept) and len(problems(said)) >= len(grid), (said, swept)
    assert not (tmp_path / "single").exists()
    assert not (tmp_path / "sweep").exists() or not any((tmp_path / "sweep").rglob("*"))


@pytest.mark.slow
def test_a_single_job_that_fails_at_run_time_exits_non_zero_and_so_do_its_reruns(tmp_path, tiny_cache):
    broken = tmp_path / "train.jsonl"
    broken.write_text(BROKEN)
    args = [*TINY, "train.max_steps=1", f"data.path={broken}", "seed=1"]
    results = tmp_path / "results"
    first = run_sweep(args, results, tiny_cache, env_extra={"CUDA_VISIBLE_DEVICES": ""})
    assert first.returncode == 1, first.stdout[-3000:] + first.stderr[-3000:]
    assert re.search(r"FAILED \S+: train phase exited with code 1: \S*JSONDecodeError: ", first.stdout)
    assert status(run_dirs(results)[1])["state"] == "failed"
    again = run_sweep(args, results, tiny_cache)  # skipped: failed before
    assert again.returncode == 1 and "failed before (rerun_failed=true retries it)" in again.stdout
    retried = run_sweep([*args, "rerun_failed=true"], results, tiny_cache)  # retried, fails again
    assert retried.returncode == 1 and "FAILED" in retried.stdout
    assert status(run_dirs(results)[1])["attempts"] == 2


@pytest.mark.slow
def test_a_multi_process_phase_failure_names_the_ranks_exception_not_child_failed_error(tmp_path, tiny_cache):
    """Two ranks (torchrun via accelerate, gloo on CPU) each fail on the data: the console prints the
    JSONDecodeError, not the launcher's ChildFailedError."""
    broken = tmp_path / "train.jsonl"
    broken.write_text(BROKEN)
    args = [*TINY, "train.max_steps=1", "train.num_gpus=2", "train.per_device_batch_size=4",
            "train.global_batch_size=8", f"data.path={broken}", "seed=1"]
    proc = run_sweep(args, tmp_path / "results", tiny_cache, env_extra={"CUDA_VISIBLE_DEVICES": "0,1"})
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    failed = [line for line in proc.stdout.splitlines() if "FAILED" in line]
    assert len(failed) == 1 and "JSONDecodeError: Expecting value" in failed[0], proc.stdout[-3000:]
    assert "ChildFailedError" not in failed[0]
    log = (run_dirs(tmp_path / "results")[1] / "logs" / "train.log").read_text()
    assert "ChildFailedError" in log  # the launcher's wrapper is there, below the cause
    assert status(run_dirs(tmp_path / "results")[1])["error"]["message"] == failed[0].split(": ", 1)[1]
