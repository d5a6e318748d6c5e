"""make gpu-check's own logic on the CPU: the sweep it runs composes and validates, and a run dir is
judged right (one metrics line per step, a complete eval.json) with its fixed cost computed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from opsd_sweep.config import load_run_config
from opsd_sweep.gpu_check import CheckFailed, check_kept_worker, cycle_figures, sweep_args
from tests.conftest import compose


def test_the_sweep_it_runs_is_a_valid_one_gpu_recipe_batch(tmp_path):
    args = sweep_args(tmp_path / "world", None, 3, 1024, 2, "1,2", tmp_path / "results", "gpu-check")
    assert args[0] == "-m" and "seed=1,2" in args
    run = load_run_config(compose([a.replace("seed=1,2", "seed=1") for a in args[1:]]))
    assert (run.train.num_gpus, run.train.global_batch_size, run.train.max_steps) == (1, 32, 3)
    assert run.rollout.backend == run.eval.backend == "auto"  # the defaults, as a user gets them
    assert run.model.path == str(tmp_path / "world" / "model") and run.eval.n_samples == 2


def write_run(root: Path, steps: list[int], samples_per_problem: int, merge_checked: bool = True) -> Path:
    run_dir = root / "lr5e-06-s1-abcd1234"
    (run_dir / "train").mkdir(parents=True)
    (run_dir / "eval").mkdir()
    (run_dir / "logs").mkdir()  # a cycle's headers, as cycle._run_phase writes them: trained in phase worker 4242
    (run_dir / "logs/train.log").write_text("\n=== 2026-12-06T20:00:00Z phase worker 4242: train ===\n[train] ...\n")
    (run_dir / "status.json").write_text(json.dumps({"state": "done", "phase_seconds": {"train": 100.0, "evaluate": 20.0}}))
    lines = [{"step": s, "step_seconds": 40.0 if s == 1 else 5.0, "time_rollout": 30.0 if s == 1 else 3.0, "rollout_backend": "vllm",
              "peak_mem_gb": 50.0, "engine_mem_gb": 74.0} for s in steps]
    (run_dir / "train/metrics.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    problems = [{"id": f"p{i}", "samples": [{"correct": False}] * samples_per_problem} for i in range(3)]
    evaluation = {"n_problems": 3, "problems": problems, "metrics": {"avg_at_n": 0.0}, "backend": "vllm",
                  "evaluator": {"backend": "vllm", "serving": "vllm merge_lora", "version": 1},
                  "timing": {"engine": "own", "generation_seconds": 10.0, "grading_seconds": 1.0}}
    (run_dir / "eval/eval.json").write_text(json.dumps(evaluation))
    if merge_checked:
        (run_dir / "eval/merge_check.json").write_text(json.dumps({"passed": True, "mean_abs_diff": 0.001}))
    return run_dir


def test_a_good_run_gives_its_steady_step_and_fixed_cost(tmp_path):
    figures = cycle_figures(write_run(tmp_path, [1, 2, 3], 2), steps=3, eval_samples=2, n_eval=3)
    assert figures["steady_step_s"] == 5.0 and figures["first_step_s"] == 40.0
    assert figures["fixed_cost_s"] == 120.0 - 3 * 5.0 - 10.0
    assert figures["steady_step_parts_s"] == {"rollout": 3.0} and figures["first_step_parts_s"] == {"rollout": 30.0}
    assert figures["rollout_backend"] == "vllm"
    assert figures["eval_serving"] == "vllm merge_lora" and figures["merge_check"]["passed"]
    assert figures["train_worker"] == 4242


def test_a_second_cycle_that_did_not_train_in_the_first_ones_worker_fails_the_check():
    check_kept_worker([{"train_worker": 4242}, {"train_worker": 4242}])
    with pytest.raises(CheckFailed, match="trained in phase worker 5150, not in the first cycle's phase worker 4242"):
        check_kept_worker([{"train_worker": 4242}, {"train_worker": 5150}])
    with pytest.raises(CheckFailed, match="trained in a process of its own"):
        check_kept_worker([{"train_worker": 4242}, {"train_worker": None}])


def test_a_vllm_cycle_whose_merge_check_never_ran_fails_the_check(tmp_path):
    with pytest.raises(CheckFailed, match="the merge check did not run at the end of training"):
        cycle_figures(write_run(tmp_path, [1, 2, 3], 2, merge_checked=False), steps=3, eval_samples=2, n_eval=3)


@pytest.mark.parametrize("steps, samples, message", [([1, 2, 2, 3], 2, "expected one line per step 1..3"),
                                                     ([1, 2, 3], 1, "3 problems and 3 samples, expected 3 x 2")])
def test_a_repeated_step_or_a_short_eval_fails_the_check(tmp_path, steps, samples, message):
    with pytest.raises(CheckFailed, match=message):
        cycle_figures(write_run(tmp_path, steps, samples), steps=3, eval_samples=2, n_eval=3)
