"""The vllm backend end to end: data-parallel engines over the visible GPUs, the LoRA checkpoint served
with a LoRARequest or merged. Runs only where vllm is installed and CUDA GPUs are visible."""

from __future__ import annotations

import importlib.util
import json

import pytest

from opsd_sweep.evaluate.standalone import locate_eval_dir
from opsd_sweep.run.rundir import read_json
from tests.evaluate.conftest import eval_overrides, eval_run, evaluate_cli


def cuda_gpus() -> int:
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


pytestmark = [
    pytest.mark.vllm, pytest.mark.gpu,
    pytest.mark.skipif(importlib.util.find_spec("vllm") is None, reason="needs vllm (pip install -e '.[gpu]')"),
    pytest.mark.skipif(cuda_gpus() == 0, reason="needs CUDA GPUs"),
]


@pytest.fixture(scope="module")
def vllm_world(tiny_world, tmp_path_factory):
    """The tiny tokenizer and data with a small Qwen3 whose head size vLLM's attention kernels take,
    and a LoRA adapter for it."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoTokenizer, Qwen3Config, Qwen3ForCausalLM

    root = tmp_path_factory.mktemp("vllm_world")
    tokenizer = AutoTokenizer.from_pretrained(tiny_world / "tiny" / "model")
    torch.manual_seed(0)
    model = Qwen3ForCausalLM(Qwen3Config(
        vocab_size=len(tokenizer), hidden_size=256, intermediate_size=512, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, head_dim=64, max_position_embeddings=1024,
        tie_word_embeddings=True, pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id))
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.save_pretrained(root / "model")
    tokenizer.save_pretrained(root / "model")
    lora = LoraConfig(r=8, lora_alpha=16, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
    get_peft_model(model, lora).save_pretrained(root / "adapter")
    return root


@pytest.mark.parametrize("merge_lora", [False, True])
def test_vllm_engines_cover_every_sample(vllm_world, tiny_world, tmp_path, merge_lora):
    extra = (f"model.path={vllm_world / 'model'}", "model.dtype=bfloat16", "eval.backend=vllm",
             f"eval.checkpoint={vllm_world / 'adapter'}", f"eval.merge_lora={str(merge_lora).lower()}",
             "eval.max_model_len=512", "eval.gpu_memory_utilization=0.3", "eval.max_problems=16",
             "eval.n_samples=3", "eval.shard_size=5")
    proc = evaluate_cli(eval_overrides(tiny_world, tmp_path, *extra))
    out, _ = proc.communicate(timeout=1800)
    assert proc.returncode == 0, out[-5000:]
    _, run_dir = locate_eval_dir(eval_run(tiny_world, tmp_path, *extra))
    result = read_json(run_dir.eval_json)
    assert result["backend"] == "vllm" and result["timing"]["engines"] == cuda_gpus()
    assert result["checkpoint"] == str(vllm_world / "adapter")
    assert all(len(p["samples"]) == 3 for p in result["problems"]) and result["n_problems"] == 16
    lines = (run_dir.eval_dir / "completions.jsonl").read_text().splitlines()
    assert len({(json.loads(line)["id"], json.loads(line)["sample"]) for line in lines}) == 48
    assert not (run_dir.eval_dir / "merged").exists()
