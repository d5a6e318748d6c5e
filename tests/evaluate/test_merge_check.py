"""eval.merge_check: merged weights stand in for the adapter only where a check of this very checkpoint passed.

The check's figures (merge_check.compare_logprobs) come from the rollout engine on the GPU; here the choice the
evaluator makes from a check on file, the record eval.json keeps of it, and the refusal of a failed one are
exercised on the tiny world with a real merge (PEFT, float32 merge saved in the model's dtype)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from opsd_sweep.evaluate import evaluator
from opsd_sweep.evaluate.generate import HFEngine
from opsd_sweep.evaluate.merge_check import MERGED_DIR, compare_logprobs, failure, serve_merged, write_check
from opsd_sweep.evaluate.vllm_engine import HEADROOM_BYTES, engine_share
from opsd_sweep.run.identity import evaluation_problem
from tests.evaluate.conftest import eval_run
from tests.reliability.test_standalone_guarantees import write_adapter

GB = 10**9


def test_the_check_passes_on_the_mean_gap_and_reports_the_adapters_own_effect():
    lora = [[-1.0, -2.0, -3.0], [-0.5]]
    merged = [[-1.01, -2.0, -2.97], [-0.5]]
    base = [[-1.5, -2.0, -3.0], [-1.0]]
    figures = compare_logprobs(lora, merged, base, tolerance=0.02)
    assert figures["positions"] == 4 and figures["prompts"] == 2
    assert figures["mean_abs_diff"] == pytest.approx(0.01) and figures["max_abs_diff"] == pytest.approx(0.03)
    assert figures["adapter_mean_abs_effect"] == pytest.approx(0.25) and figures["passed"]
    assert not compare_logprobs(lora, merged, base, tolerance=0.005)["passed"]
    with pytest.raises(ValueError, match="same prompts and positions"):
        compare_logprobs(lora, [[-1.0, -2.0], [-0.5]], base, 0.02)


def test_a_merge_that_lost_a_small_adapter_fails_within_the_tolerance():
    """As on an H100 gpu-check (a 3-step adapter whose delta rounded away in bf16): merged weights that give the
    base model's log-probs differ from the LoRARequest by all the adapter does, however small that is."""
    lora, base = [[-1.0, -2.0]], [[-1.018, -2.018]]
    lost = compare_logprobs(lora, base, base, tolerance=0.02)
    assert lost["mean_abs_diff"] == pytest.approx(0.018) and not lost["passed"]  # within the tolerance of 0.02
    assert "lost the adapter" in failure(lost, 0.02)
    kept = compare_logprobs(lora, [[-1.002, -2.002]], base, tolerance=0.02)  # a ninth of the adapter's effect
    assert kept["passed"] and failure(kept, 0.02) is None


@pytest.fixture
def checked_run(tiny_world, tmp_path, monkeypatch):
    """A run on 'vllm' (the backend resolution faked; the engine is hf on the CPU), its adapter checkpoint and the
    eval dir with the checkpoint merged into it, as the end of training leaves them."""
    run = eval_run(tiny_world, tmp_path)
    checkpoint = tmp_path / "checkpoint-4"
    write_adapter(checkpoint, 0, run.model.path)
    monkeypatch.setattr(evaluator, "resolve_backend", lambda *_args, **_kw: ("vllm", "vllm on this GPU"))
    eval_dir = tmp_path / "eval"
    evaluator.merge_adapter(evaluator.engine_spec(replace(run, eval=replace(run.eval, backend="vllm")), checkpoint),
                            eval_dir / MERGED_DIR)
    return run, checkpoint, eval_dir


def served(run, checkpoint, eval_dir):
    handed = []

    def attach(spec):  # stands in for the vLLM engine: what it was asked to serve, served by hf on the CPU
        handed.append(spec)
        return HFEngine.from_spec(replace(spec, backend="hf"), "cpu")

    return evaluator.evaluate(run, checkpoint, eval_dir, attach=attach), handed


def test_without_a_check_on_file_the_adapter_is_served_as_a_lora_request(checked_run, capsys):
    run, checkpoint, eval_dir = checked_run
    result, (spec,) = served(run, checkpoint, eval_dir)
    assert spec.adapter_path == str(checkpoint) and result["evaluator"]["serving"] == "vllm LoRARequest"
    assert "merge_check" not in result["evaluator"]
    assert "serving: no merge check on file" in capsys.readouterr().out


def test_a_passed_check_of_this_checkpoint_serves_the_merged_dir_and_is_recorded(checked_run, capsys):
    run, checkpoint, eval_dir = checked_run
    write_check(eval_dir, checkpoint, compare_logprobs([[-1.0]], [[-1.001]], [[-2.0]], run.eval.merge_tolerance))
    result, (spec,) = served(run, checkpoint, eval_dir)
    assert spec.adapter_path is None and spec.model_path == str(eval_dir / MERGED_DIR)
    record = result["evaluator"]
    assert record["serving"] == "vllm merge_lora" and record["merge_check"]["passed"]
    assert record["merge_check"]["tolerance"] == run.eval.merge_tolerance
    assert "serving: merged weights: the merge check passed" in capsys.readouterr().out
    assert evaluation_problem(result, checkpoint, False, run.eval.n_samples) is None  # it counts
    failed = result | {"evaluator": record | {"merge_check": record["merge_check"] | {"passed": False}}}
    assert "failed the merge check" in evaluation_problem(failed, checkpoint, False, run.eval.n_samples)


def test_a_failed_or_stale_check_falls_back_to_the_lora_request(checked_run):
    run, checkpoint, eval_dir = checked_run
    tolerance = run.eval.merge_tolerance
    write_check(eval_dir, checkpoint, compare_logprobs([[-1.0]], [[-1.5]], [[-2.0]], tolerance))
    merged, why, _ = serve_merged(True, "vllm", checkpoint, eval_dir, tolerance)
    assert not merged and "merge check failed" in why
    write_check(eval_dir, checkpoint, compare_logprobs([[-1.0]], [[-1.001]], [[-2.0]], tolerance))
    assert serve_merged(True, "vllm", checkpoint, eval_dir, tolerance)[0]
    merged, why, _ = serve_merged(True, "vllm", checkpoint, eval_dir, tolerance / 10)
    assert not merged and "looser tolerance" in why  # checked at a looser tolerance
    write_check(eval_dir, checkpoint, compare_logprobs([[-1.0]], [[-1.01]], [[-1.02]], tolerance))
    merged, why, _ = serve_merged(True, "vllm", checkpoint, eval_dir, tolerance)
    assert not merged and "lost the adapter" in why
    assert not serve_merged(False, "vllm", checkpoint, eval_dir, tolerance)[0]  # eval.merge_check=false
    assert not serve_merged(True, "hf", checkpoint, eval_dir, tolerance)[0]
    write_adapter(checkpoint, 1, run.model.path)  # the checkpoint rewritten since it was checked
    merged, why, _ = serve_merged(True, "vllm", checkpoint, eval_dir, tolerance)
    assert not merged and "checked another checkpoint" in why


def test_an_engine_of_its_own_asks_for_its_share_or_what_is_free():
    assert engine_share(0.9, free_bytes=140 * GB, total_bytes=141 * GB) == 0.9
    held = engine_share(0.9, free_bytes=120 * GB, total_bytes=141 * GB)  # a kept student and sleeping engine
    assert held == round((120 * GB - HEADROOM_BYTES) / (141 * GB), 3) < 0.9
    with pytest.raises(RuntimeError, match="only 5.0 of 141.0 GB of the GPU are free"):
        engine_share(0.9, free_bytes=5 * GB, total_bytes=141 * GB)
