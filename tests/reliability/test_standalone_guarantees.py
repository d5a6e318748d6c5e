"""Issue 21, item 4: the standalone evaluation has the cycle's interrupt states and exit codes, and its
checkpoint enters its key by content: an adapter rewritten at the same path is evaluated again."""

from __future__ import annotations

import signal

import pytest

from opsd_sweep.evaluate.standalone import evaluate_standalone, locate_eval_dir
from tests.evaluate.conftest import eval_overrides, eval_run, evaluate_cli
from tests.orchestration.conftest import wait_until

pytestmark = pytest.mark.slow

# one sample per shard and per generate call: the signal lands while shards are still to do
SLOW = ("eval.max_problems=null", "eval.n_samples=2", "eval.shard_size=1", "eval.batch_size=1")


@pytest.mark.parametrize("signum, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_an_interrupted_standalone_evaluation_is_marked_interrupted_and_exits_with_the_signal(
        tiny_cache, tmp_path, signum, code):
    _, run_dir = locate_eval_dir(eval_run(tiny_cache, tmp_path, *SLOW))
    proc = evaluate_cli(eval_overrides(tiny_cache, tmp_path, *SLOW))
    wait_until(lambda: any((run_dir.eval_dir / "shards").glob("shard-*.json")) or proc.poll() is not None, 300,
               "the first shard")
    proc.send_signal(signum)
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == code, out[-3000:]
    assert "Traceback" not in out and f"interrupted by {signum.name}: run the same command again" in out
    status = run_dir.read_status()
    assert status["state"] == "interrupted", status
    assert f"interrupted by {signum.name} while evaluating" in status["error"]["message"]


def write_adapter(path, seed: int, model_path: str) -> None:
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(seed)
    lora = LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
    get_peft_model(AutoModelForCausalLM.from_pretrained(model_path), lora).save_pretrained(path)


def test_an_adapter_rewritten_at_the_same_path_is_evaluated_again(tiny_cache, tmp_path, capsys):
    adapter = tmp_path / "adapter"
    run = eval_run(tiny_cache, tmp_path, f"eval.checkpoint={adapter}")
    write_adapter(adapter, 0, run.model.path)
    first = evaluate_standalone(eval_run(tiny_cache, tmp_path, f"eval.checkpoint={adapter}"))
    write_adapter(adapter, 1, run.model.path)  # other weights, same path
    capsys.readouterr()
    second = evaluate_standalone(eval_run(tiny_cache, tmp_path, f"eval.checkpoint={adapter}"))
    assert "is up to date" not in capsys.readouterr().out
    assert second["created_at"] != first["created_at"]
    from opsd_sweep.run.identity import content_identity

    assert second["checkpoint_identity"] == content_identity(adapter) != first["checkpoint_identity"]


def test_a_finished_evaluation_run_again_is_skipped_and_says_so(tiny_cache, tmp_path, capsys):
    first = evaluate_standalone(eval_run(tiny_cache, tmp_path))
    _, run_dir = locate_eval_dir(eval_run(tiny_cache, tmp_path))
    status = run_dir.read_status()
    assert status["host"] and status["pid"]  # `python -m opsd_sweep.status` shows where it ran
    capsys.readouterr()
    again = evaluate_standalone(eval_run(tiny_cache, tmp_path))
    out = capsys.readouterr().out
    assert f"[evaluate] skip {run_dir.path.name}: already done, with today's scores" in out and "avg@" in out
    assert again["created_at"] == first["created_at"] and run_dir.read_status() == status  # nothing rewritten


def test_a_finished_evaluation_whose_evaluator_is_since_found_wrong_is_not_skipped(tiny_cache, tmp_path, capsys):
    import json

    evaluate_standalone(eval_run(tiny_cache, tmp_path))
    _, run_dir = locate_eval_dir(eval_run(tiny_cache, tmp_path))
    evaluation = json.loads(run_dir.eval_json.read_text())
    evaluation["evaluator"]["version"] = 0  # a version since bumped: its scores are not today's
    run_dir.eval_json.write_text(json.dumps(evaluation))
    capsys.readouterr()
    again = evaluate_standalone(eval_run(tiny_cache, tmp_path))
    assert "skip" not in capsys.readouterr().out
    assert again["evaluator"]["version"] != 0 and json.loads(run_dir.eval_json.read_text())["evaluator"]["version"] != 0
