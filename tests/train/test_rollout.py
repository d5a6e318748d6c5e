"""Rollouts: trimming at any of several EOS ids, cap accounting, seeding, static cache = dynamic, and the
merged copy the hf backend samples from follows the student after every optimizer step."""

from __future__ import annotations

import copy

import pytest
import torch

from opsd_sweep.modeling import eos_token_ids
from opsd_sweep.train.rollout import HFRollout, MergedCopy, Rollouts, trim_completion
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


def lora_student(model, seed: int):
    """The model with a LoRA adapter whose B is non-zero, so the student differs from the base."""
    from peft import LoraConfig, get_peft_model

    peft_model = get_peft_model(copy.deepcopy(model), LoraConfig(r=4, lora_alpha=8, lora_dropout=0.1,
                                                                 target_modules=["q_proj", "v_proj", "down_proj"]))
    randomize_lora(peft_model, seed)
    return peft_model


def randomize_lora(peft_model, seed: int) -> None:
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, param in peft_model.named_parameters():
            if "lora_" in name:
                param.copy_(torch.randn(param.shape, generator=gen) * 0.3)


def test_eos_ids_join_tokenizer_and_generation_config(model_and_tokenizer):
    model, tokenizer = model_and_tokenizer
    assert eos_token_ids(model, tokenizer) == sorted({tokenizer.eos_token_id, tokenizer.pad_token_id})


def cut_at(completion: list[int], eos: set[int]) -> list[int]:
    """A completion as it ends at the first of `eos` (kept), or whole."""
    ends = [i for i, t in enumerate(completion) if t in eos]
    return completion[:ends[0] + 1] if ends else completion


def test_hf_rollout_stops_at_any_eos_reports_the_cap_and_is_seeded(world, tmp_path, model_and_tokenizer):
    model, tokenizer = model_and_tokenizer
    run = train_run(world, tmp_path, "rollout.max_new_tokens=8")
    prompts = [[10 + i] * (3 + i % 4) for i in range(12)]
    student = lora_student(model, seed=0)
    # What a random model draws is the CPU's, so the EOS ids are chosen from its draws: first with an id it cannot
    # draw (past its vocabulary) every completion runs to the cap; two tokens it drew then end some completions
    # early and, chosen so that one completion holds neither, leave one at the cap: both outcomes, by construction.
    unbounded = HFRollout(run.rollout, student, tokenizer.pad_token_id, [len(tokenizer)], static_cache=False)
    unbounded.update(0)
    drawn = unbounded.generate(prompts, seed=3).completions
    assert all(len(c) == 8 for c in drawn)
    eos = next({a, b} for a in drawn[0] for b in drawn[1] if a != b
               and any(a not in c and b not in c for c in drawn))
    rollout = HFRollout(run.rollout, student, tokenizer.pad_token_id, sorted(eos), static_cache=False)
    rollout.update(0)
    first = rollout.generate(prompts, seed=3)
    assert first.completions == [cut_at(c, eos) for c in drawn]  # the same draws, each cut at its first EOS id
    assert 0 < first.cap_fraction < 1
    for completion, capped in zip(first.completions, first.hit_cap):
        assert 1 <= len(completion) <= 8
        assert capped == (completion[-1] not in eos) and (len(completion) == 8 or not capped)
        assert not any(t in eos for t in completion[:-1])
    assert rollout.generate(prompts, seed=3).completions == first.completions
    assert rollout.generate(prompts, seed=4).completions != first.completions
    static = HFRollout(run.rollout, student, tokenizer.pad_token_id, sorted(eos), static_cache=True)
    static.update(0)
    assert static.generate(prompts, seed=3).completions == first.completions
    # (the static cache's extra left padding of the bucket changes nothing)


def test_merged_copy_samples_from_the_current_student_and_leaves_the_teacher_alone(model_and_tokenizer):
    model, _ = model_and_tokenizer
    student = lora_student(model, seed=1).eval()  # eval: the copy has no LoRA dropout to match
    merged = MergedCopy(student)
    ids = torch.tensor([[5, 17, 33, 8, 21, 40]])

    def logits(m):
        with torch.no_grad():
            return m(input_ids=ids).logits

    def teacher_logits():
        with student.disable_adapter():
            return logits(student)

    teacher_before = teacher_logits()
    torch.testing.assert_close(logits(merged.model), logits(student), rtol=1e-5, atol=1e-5)
    randomize_lora(student, seed=2)  # what an optimizer step does to the adapter
    assert not torch.allclose(logits(merged.model), logits(student), atol=1e-3)  # stale until refreshed
    merged.refresh()
    torch.testing.assert_close(logits(merged.model), logits(student), rtol=1e-5, atol=1e-5)
    assert torch.equal(teacher_logits(), teacher_before)  # the base weights were never modified
    assert not any(p.requires_grad for p in merged.model.parameters())
