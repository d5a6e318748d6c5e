"""Real sweeps of tiny cycles on the local launcher: GPU packing, concurrent sweeps, kill -9 and rerun,
failures."""

from __future__ import annotations

import json
import re
from datetime import datetime

import pytest

from tests.conftest import run_sweep
from tests.orchestration.conftest import (TINY, has_checkpoint, kill_sweep, phase_starts, run_dirs,
                                          start_sweep, status, steps_logged, wait_until)

pytestmark = pytest.mark.slow


def interval(s: dict) -> tuple[datetime, datetime]:
    return datetime.fromisoformat(s["started_at"]), datetime.fromisoformat(s["ended_at"])


def test_two_gpu_slots_run_four_one_gpu_cycles_two_at_a_time_on_disjoint_gpus(tmp_path, tiny_cache):
    proc = run_sweep(["-m", *TINY, "train.max_steps=1", "train.num_gpus=1", "seed=1,2,3,4",
                      "hydra.launcher.gpus=[5,7]"], tmp_path, tiny_cache)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    statuses = [status(d) for d in run_dirs(tmp_path).values()]
    assert len(statuses) == 4 and {s["state"] for s in statuses} == {"done"}
    # both GPUs serve (the first two cycles start together); which slot frees first and takes a third is the CPU's
    assert {s["gpus"][0] for s in statuses} == {"5", "7"}
    spans = [(interval(s), s["gpus"]) for s in statuses]
    overlaps = [(a, b) for i, a in enumerate(spans) for b in spans[i + 1:] if a[0][0] < b[0][1] and b[0][0] < a[0][1]]
    assert overlaps, "two GPU slots but no two cycles ran at the same time"
    assert all(a[1] != b[1] for a, b in overlaps)  # side by side only on different GPUs
    for (start, _), _ in spans:  # never more than two at once
        assert sum(a <= start < b for (a, b), _ in spans) <= 2
    for run_dir in run_dirs(tmp_path).values():  # the CPU tiny profile resolves `auto` to hf, and says so
        assert {line["rollout_backend"] for line in map(json.loads, (run_dir / "train/metrics.jsonl").open())} == {"hf"}
        assert json.loads((run_dir / "eval/eval.json").read_text())["backend"] == "hf"
        assert "[evaluate] backend: hf (eval.backend=auto: " in (run_dir / "logs/eval.log").read_text()
    log = proc.stderr + proc.stdout
    assert len(re.findall(r"start #\d .* on GPUs [57] \| done \d, running [12], failed 0, pending \d", log)) == 4
    assert "done 4, running 0, failed 0, pending 0" in log


def test_two_concurrent_sweeps_over_overlapping_grids_run_each_run_once(tmp_path, tiny_cache):
    common = ["-m", *TINY, "train.max_steps=1", "hydra.launcher.max_parallel=1"]
    # Both start with seed 2, at the same moment.
    first = start_sweep([*common, "seed=2,1"], tmp_path, tiny_cache, tmp_path / "first.log")
    second = start_sweep([*common, "seed=2,3"], tmp_path, tiny_cache, tmp_path / "second.log")
    assert first.wait(600) == 0 and second.wait(600) == 0
    runs = run_dirs(tmp_path)
    assert sorted(runs) == [1, 2, 3]
    for run_dir in runs.values():
        assert status(run_dir)["state"] == "done" and status(run_dir)["attempts"] == 1
        assert phase_starts(run_dir, "train") == 1 and phase_starts(run_dir, "evaluate") == 1
    logs = (tmp_path / "first.log").read_text() + (tmp_path / "second.log").read_text()
    # The sweep that lost s2 either found it done, or found it held, waited for it, and then found it done.
    assert len(re.findall(r"skip lr\S+-s2-\S+: already done", logs)) == 1
    held = re.findall(r"skip lr\S+-s2-\S+: is being run by", logs)
    assert len(held) == len(re.findall(r"#0 .*seed=2: skipped \(is being run by .*\); waiting for it to end", logs)) <= 1


def test_kill_9_of_a_sweep_then_rerun_finishes_the_rest_resuming_training(tmp_path, tiny_cache):
    args = ["-m", *TINY, "train.max_steps=6", "hydra.launcher.max_parallel=1", "seed=1,2"]
    sweep = start_sweep(args, tmp_path, tiny_cache, tmp_path / "killed.log")
    runs = lambda: run_dirs(tmp_path)
    wait_until(lambda: 2 in runs() and has_checkpoint(runs()[2], 1) and status(runs()[2])["state"] == "training",
               600, "run s2 to checkpoint its first step")
    kill_sweep(sweep)
    done_before = status(runs()[1])
    assert done_before["state"] == "done" and status(runs()[2])["state"] == "training"
    step_at_kill = max(steps_logged(runs()[2]))

    again = run_sweep(args, tmp_path, tiny_cache)
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    assert re.search(r"skip lr\S+-s1-\S+: already done", again.stdout)
    first, resumed = status(runs()[1]), status(runs()[2])
    assert first == done_before and phase_starts(runs()[1], "evaluate") == 1  # not done twice
    assert resumed["state"] == "done" and resumed["attempts"] == 2, again.stdout[-3000:]
    restart = re.search(r"resumed from \S+checkpoint-(\d+) at step (\d+)", (runs()[2] / "logs/train.log").read_text())
    assert restart and 1 <= int(restart.group(2)) <= step_at_kill
    assert max(steps_logged(runs()[2])) == 6 and phase_starts(runs()[2], "evaluate") == 1


def test_a_failing_cycle_is_recorded_and_fail_fast_stops_the_sweep(tmp_path, tiny_cache):
    broken = tmp_path / "train.jsonl"  # the pre-flight reads its first record only; the trainer reads them all
    broken.write_text('{"problem": "1+2*3=?", "solution": "7"}\n{"problem": \n')
    proc = run_sweep(["-m", *TINY, "train.max_steps=1", f"data.path={broken}", "seed=1,2",
                      "hydra.launcher.fail_fast=true", "hydra.launcher.max_parallel=1"], tmp_path, tiny_cache)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 1
    assert "2 job(s) of the sweep failed or are unfinished:" in output
    assert re.search(r"#0 .*seed=1: train phase exited with code 1: \S*JSONDecodeError: .*; see \S+/logs/train.log",
                     output), output[-3000:]
    assert re.search(r"#1 .*seed=2: not started: fail_fast stopped the sweep after #0", output)
    failed = status(run_dirs(tmp_path)[1])
    assert failed["state"] == "failed" and failed["error"]["log"].endswith("logs/train.log")
    assert 2 not in run_dirs(tmp_path)
