"""Exact padding: an example's loss and gradients are the same alone and inside a mixed batch."""

from __future__ import annotations

import pytest
import torch

from opsd_sweep.train.collate import collate, completion_hidden
from opsd_sweep.train.distill import DistillationModel
from opsd_sweep.train.loss import LossSpec
from opsd_sweep.train.teacher import Teacher

TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


@pytest.fixture(scope="module")
def student_teacher(world):
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(world / "model", dtype=torch.float32, attn_implementation="sdpa")
    peft_model = get_peft_model(model, LoraConfig(r=4, lora_alpha=8, lora_dropout=0.0, target_modules=TARGETS))
    torch.manual_seed(0)
    with torch.no_grad():  # a student that differs from its teacher, so every LoRA matrix gets a gradient
        for name, param in peft_model.named_parameters():
            if "lora_B" in name:
                param.normal_(0, 0.2)
    return DistillationModel(peft_model, LossSpec(clip=0.05, clip_mode="elementwise", chunk_size=5),
                             Teacher("fixed", 0.0, peft_model, sharded=False)).eval()


def loss_and_grads(model, student, teacher):
    model.zero_grad(set_to_none=True)
    loss, _ = model(student, teacher)
    loss.backward()
    return loss.detach(), {n: p.grad.clone() for n, p in model.named_parameters() if p.requires_grad}


def ids(n: int, offset: int) -> list[int]:
    return [10 + (offset + 7 * i) % 250 for i in range(n)]


def test_layout_is_prompt_then_completion_right_padded_with_each_rows_completion_start():
    batch = collate([ids(3, 0), ids(5, 1)], [ids(2, 2), ids(4, 3)], pad_id=0)
    assert batch.input_ids.shape == (2, 9) and batch.completion_len == 4 and batch.n_tokens == 5 + 9
    assert batch.input_ids[0].tolist() == ids(3, 0) + ids(2, 2) + [0] * 4
    assert batch.input_ids[1].tolist() == ids(5, 1) + ids(4, 3)
    assert batch.completion_start.tolist() == [3, 5]
    assert batch.completion_mask.tolist() == [[True, True, False, False], [True] * 4]


def test_completion_hidden_takes_the_columns_that_predict_each_rows_completion():
    class Echo(torch.nn.Module):  # hidden state = the input id, so the gathered columns can be read off
        def forward(self, input_ids, use_cache):
            return type("Out", (), {"last_hidden_state": input_ids[..., None].float()})

    batch = collate([[1, 2, 3], [4, 5, 6, 7, 8]], [[9, 10], [11, 12, 13, 14]], pad_id=0)
    got = completion_hidden(Echo(), batch)[..., 0]
    assert got[1].tolist() == [8, 11, 12, 13]  # the last prompt token predicts the first completion token
    assert got[0, :2].tolist() == [3, 9]  # past the row's completion: masked, clamped to the last column


def test_example_is_the_same_alone_and_among_longer_and_shorter_prompts(student_teacher):
    model = student_teacher
    student_prompt, teacher_prompt, completion = ids(9, 1), ids(21, 2), ids(7, 3)
    alone = loss_and_grads(model, collate([student_prompt], [completion], 0),
                           collate([teacher_prompt], [completion], 0))
    # neighbours: one with longer prompts and completion, one with shorter
    students = [ids(14, 4), student_prompt, ids(4, 5)]
    teachers = [ids(30, 6), teacher_prompt, ids(11, 7)]
    completions = [ids(10, 8), completion, ids(3, 9)]
    student, teacher = collate(students, completions, 0), collate(teachers, completions, 0)
    student.completion_mask[[0, 2]] = False  # the loss of the middle example only
    batched = loss_and_grads(model, student, teacher)
    assert alone[0].item() > 0
    torch.testing.assert_close(batched[0], alone[0], rtol=1e-5, atol=1e-5)
    assert alone[1].keys() == batched[1].keys() and len(alone[1]) == 2 * len(TARGETS) * 2
    for name, grad in alone[1].items():
        assert grad.abs().max() > 0, name
        torch.testing.assert_close(batched[1][name], grad, rtol=1e-5, atol=1e-5, msg=name)
