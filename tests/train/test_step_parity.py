"""gpu-check's first stage: one micro-batch on the GPU against the CPU. On CPU both sides run on the CPU,
which checks that equal paths pass and that a misaligned batch on the second side is caught."""

from __future__ import annotations

from dataclasses import replace

from opsd_sweep.train import step_parity


def test_the_same_step_on_both_sides_passes():
    parity = step_parity.check_step_parity("cpu")
    assert parity.problems == []
    assert parity.loss_rel_diff == 0.0 and parity.worst_grad_rel_diff == 0.0
    assert parity.n_grads == 2 * 2 * len(step_parity.TARGETS)  # A and B of every adapted layer, both layers
    assert set(parity.gpu_phase_seconds) == {"teacher", "student", "loss", "backward"}


def test_a_batch_gathered_one_column_off_on_the_second_side_is_caught(monkeypatch):
    real, calls = step_parity.collate, []

    def collate_second_side_off(prompts, completions, pad):  # the bug a GPU-only gather could have
        batch = real(prompts, completions, pad)
        calls.append(1)
        return batch if len(calls) <= 2 else replace(batch, completion_start=batch.completion_start + 1)

    monkeypatch.setattr(step_parity, "collate", collate_second_side_off)
    parity = step_parity.check_step_parity("cpu")
    # the loss, a mean over tokens of a random model's KL, moves little; the gradients show the shift
    assert parity.loss_rel_diff > 0 and parity.worst_grad_rel_diff > 10 * step_parity.TOLERANCE
    assert any(p.startswith("a LoRA gradient differs") for p in parity.problems), parity.problems
