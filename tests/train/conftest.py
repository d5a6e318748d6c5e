"""A small offline world for the trainer tests: a Qwen3 built from a config (two EOS ids, as Qwen3's
generation config lists), a tokenizer trained on the fly, and an arithmetic dataset with solutions."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from opsd_sweep.config import RunConfig, load_run_config, to_dict
from opsd_sweep.run.rundir import RunDir, atomic_write_text
from tests.conftest import compose


@pytest.fixture(scope="session")
def world(tmp_path_factory) -> Path:
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    from opsd_sweep.tiny import build_tokenizer

    root = tmp_path_factory.mktemp("train_world")
    rng = random.Random(0)
    rows = []
    for i in range(64):
        a, b, c = rng.randint(2, 50), rng.randint(2, 9), rng.randint(2, 9)
        rows.append({"id": f"p{i}", "problem": f"Compute {a} + {b} * {c}." + " Show the steps." * (i % 3),
                     "solution": f"{b} * {c} = {b * c}. {a} + {b * c} = {a + b * c}. \\boxed{{{a + b * c}}}"})
    atomic_write_text(root / "train.jsonl", "".join(json.dumps(r) + "\n" for r in rows))
    corpus = [r["problem"] for r in rows] + [r["solution"] for r in rows] + ["reference", "Reason step by step"]
    tokenizer = build_tokenizer(corpus, vocab_size=300)
    torch.manual_seed(0)
    model = Qwen3ForCausalLM(Qwen3Config(
        vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, head_dim=8, max_position_embeddings=512,
        tie_word_embeddings=True, pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id))
    model.generation_config.eos_token_id = [tokenizer.eos_token_id, tokenizer.pad_token_id]
    model.save_pretrained(root / "model")
    tokenizer.save_pretrained(root / "model")
    return root


def train_run(world: Path, results: Path, *overrides: str) -> RunConfig:
    """The real conf/ composed for a CPU run on the small world (the paper recipe, shrunk)."""
    base = [f"model.path={world / 'model'}", "model.name=tiny", "model.dtype=float32", "data=local",
            f"data.path={world / 'train.jsonl'}", f"results_root={results}", "learning_rate=1e-3",
            "train.num_gpus=0", "train.per_device_batch_size=4", "train.grad_accum_steps=2",
            "train.global_batch_size=8", "train.max_steps=4", "train.save_steps=2",
            "train.gradient_checkpointing=false", "train.lora.r=4", "train.lora.alpha=8",
            "rollout.max_new_tokens=12", "rollout.top_k=0", "rollout.top_p=1.0", "rollout.temperature=1.0",
            "loss.chunk_size=16"]
    return load_run_config(compose(base + list(overrides)))


def make_run_dir(path: Path, run: RunConfig) -> RunDir:
    """A run directory as the cycle writes it: the resolved config is the phase's only input."""
    run_dir = RunDir(path)
    atomic_write_text(run_dir.config, OmegaConf.to_yaml(OmegaConf.create(to_dict(run))))
    return run_dir

