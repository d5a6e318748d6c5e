"""Forced completion lengths (Job.length) are a vllm-only benchmark hook: the hf engine refuses them."""

from __future__ import annotations

import pytest

from opsd_sweep.evaluate.engine import Job, Sampling, Shard
from opsd_sweep.evaluate.generate import HFEngine
from opsd_sweep.tiny import build_tokenizer


def test_hf_engine_refuses_jobs_with_a_forced_length():
    from transformers import Qwen3Config, Qwen3ForCausalLM

    tokenizer = build_tokenizer(["one two three four"] * 4, 300)
    model = Qwen3ForCausalLM(Qwen3Config(vocab_size=len(tokenizer), hidden_size=16, intermediate_size=32,
                                         num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=1,
                                         head_dim=8, eos_token_id=tokenizer.eos_token_id))
    sampling = Sampling(temperature=1.0, top_p=1.0, top_k=0, max_new_tokens=4, min_new_tokens=0)
    engine = HFEngine(model, tokenizer, sampling, batch_size=2, cache="dynamic", device="cpu")
    shards = iter([Shard(0, 1, (Job(0, 0, 7), Job(0, 1, 8, length=4)))])
    finished = []
    with pytest.raises(ValueError, match=r"shard 0 forces completion lengths.*eval.backend=vllm"):
        engine.serve([[1, 2, 3]], lambda: next(shards, None), lambda *done: finished.append(done),
                     lambda n: None)
    assert finished == []
