"""Rollouts: trimming at any of several EOS ids, cap accounting, seeding, static cache = dynamic."""

from __future__ import annotations

import pytest
import torch

from opsd_sweep.modeling import eos_token_ids
from opsd_sweep.train.rollout import HFRollout, Rollouts, trim_completion
from tests.train.conftest import train_run


def test_trim_cuts_after_the_first_of_several_eos_ids():
    assert trim_completion([5, 6, 2, 7, 1], {1, 2}) == ([5, 6, 2], False)
    assert trim_completion([5, 6, 1, 2], {1, 2}) == ([5, 6, 1], False)
    assert trim_completion([5, 6, 7], {1, 2}) == ([5, 6, 7], True)
    rollouts = Rollouts([[1, 2], [3, 4, 5, 6]], [False, True])
    assert (rollouts.mean_length, rollouts.cap_fraction, rollouts.n_tokens) == (3.0, 0.5, 6)


@pytest.fixture(scope="module")
def model_and_tokenizer(world):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    return AutoModelForCausalLM.from_pretrained(world / "model", dtype=torch.float32), \
        AutoTokenizer.from_pretrained(world / "model")


def test_eos_ids_join_tokenizer_and_generation_config(model_and_tokenizer):
    model, tokenizer = model_and_tokenizer
    assert eos_token_ids(model, tokenizer) == sorted({tokenizer.eos_token_id, tokenizer.pad_token_id})


def test_hf_rollout_stops_at_any_eos_reports_the_cap_and_is_seeded(world, tmp_path, model_and_tokenizer):
    model, tokenizer = model_and_tokenizer
    run = train_run(world, tmp_path, "rollout.max_new_tokens=8")
    eos = list(range(40, 90))  # a sixth of the vocabulary ends a completion: both outcomes occur
    prompts = [[10 + i] * (3 + i % 4) for i in range(12)]
    rollout = HFRollout(run.rollout, model, tokenizer.pad_token_id, eos, static_cache=False)
    first = rollout.generate(prompts, seed=3)
    assert 0 < first.cap_fraction < 1
    for completion, capped in zip(first.completions, first.hit_cap):
        assert 1 <= len(completion) <= 8
        assert capped == (completion[-1] not in eos) and (len(completion) == 8 or not capped)
        assert not any(t in eos for t in completion[:-1])
    assert rollout.generate(prompts, seed=3).completions == first.completions
    assert rollout.generate(prompts, seed=4).completions != first.completions
    static = HFRollout(run.rollout, model, tokenizer.pad_token_id, eos, static_cache=True).generate(prompts, seed=3)
    assert static.completions == first.completions  # extra left padding of the bucket changes nothing
