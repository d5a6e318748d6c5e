"""The chunked OPSD loss equals a plain full-tensor formula: values, gradients, diagnostics, every mode."""

from __future__ import annotations

import itertools

import pytest
import torch

from opsd_sweep.testing.loss_reference import reference
from opsd_sweep.train.loss import LossSpec, _windows, diagnostics_dict, opsd_loss, opsd_loss_from_hidden

B, T, V, H = 3, 6, 40, 16


def make_inputs(seed=0):
    gen = torch.Generator().manual_seed(seed)
    student = (torch.randn(B, T, V, generator=gen) * 2).requires_grad_()
    teacher = torch.randn(B, T, V, generator=gen) * 2
    teacher[:, :3] = student.detach()[:, :3] + 0.1 * torch.randn(B, 3, V, generator=gen)  # near: unclipped
    mask = torch.ones(B, T, dtype=torch.bool)
    mask[0, 4:] = False
    mask[2, 1:] = False
    return student, teacher, mask


CLIPS = {"none": None, "elementwise": 0.01, "per_token": 0.1}
GRID = list(itertools.product([0.0, 0.3, 1.0], ["none", "elementwise", "per_token"], [None, 7]))


@pytest.mark.parametrize("beta, clip_mode, top_k", GRID)
def test_chunked_logits_loss_equals_reference(beta, clip_mode, top_k):
    student, teacher, mask = make_inputs()
    kwargs = dict(beta=beta, temperature=1.1, clip=CLIPS[clip_mode], clip_mode=clip_mode, top_k=top_k)
    ref_loss, ref_diag = reference(student, teacher, mask, **kwargs)
    (ref_grad,) = torch.autograd.grad(ref_loss, student)
    if clip_mode != "none":  # the test must see both clipped and unclipped tokens to mean anything
        assert 0 < ref_diag["frac_tok_over_clip"] < 1, ref_diag
    for chunk_size in (1, 4, 1000):
        loss, diag = opsd_loss(student, teacher, mask, chunk_size=chunk_size, **kwargs)
        (grad,) = torch.autograd.grad(loss, student)
        torch.testing.assert_close(loss, ref_loss, rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(grad, ref_grad, rtol=1e-5, atol=1e-7)
        assert diagnostics_dict(diag) == pytest.approx(ref_diag, rel=1e-5, abs=1e-6)


@pytest.mark.parametrize("beta, clip_mode, top_k", [(0.0, "elementwise", None), (0.3, "per_token", 7),
                                                   (1.0, "none", None), (0.0, "none", 7)])
def test_hidden_state_path_equals_reference_through_the_head(beta, clip_mode, top_k):
    gen = torch.Generator().manual_seed(1)
    student_hidden = torch.randn(B, T, H, generator=gen).requires_grad_()
    teacher_hidden = torch.randn(B, T, H, generator=gen)
    weight = (torch.randn(V, H, generator=gen) * 0.6).requires_grad_()
    _, _, mask = make_inputs()
    kwargs = dict(beta=beta, temperature=1.1, clip=CLIPS[clip_mode], clip_mode=clip_mode, top_k=top_k)
    ref_loss, ref_diag = reference(student_hidden @ weight.T, teacher_hidden @ weight.T, mask, **kwargs)
    ref_grads = torch.autograd.grad(ref_loss, [student_hidden, weight])
    loss, diag = opsd_loss_from_hidden(student_hidden, teacher_hidden, weight, mask,
                                       LossSpec(chunk_size=4, **kwargs))
    grads = torch.autograd.grad(loss, [student_hidden, weight])
    torch.testing.assert_close(loss, ref_loss, rtol=1e-5, atol=1e-6)
    for got, want in zip(grads, ref_grads):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    assert diagnostics_dict(diag) == pytest.approx(ref_diag, rel=1e-5, abs=1e-6)


def test_windows_own_every_valid_row_once_in_fixed_size_slices():
    valid = torch.tensor([1, 1, 1, 1, 1, 0, 0, 1, 1, 1, 0, 1], dtype=torch.bool)
    windows = _windows(valid, 4)
    owned = [row for _, first, n in windows for row in range(first, first + n)]
    assert owned == valid.nonzero().flatten().tolist()
    for start, first, n in windows:  # one compiled shape, inside the rows, holding what it owns
        assert 0 <= start <= first and first + n <= start + 4 <= valid.numel()
    assert _windows(valid, 100) == [(0, 0, 5), (0, 7, 3), (0, 11, 1)]  # fewer rows than a chunk
    assert _windows(torch.zeros(5, dtype=torch.bool), 4) == []


def test_a_scaled_loss_scales_the_gradient():
    """The trainer backpropagates loss / grad_accum: the rescaling path of backward."""
    student, teacher, mask = make_inputs()
    kwargs = dict(beta=0.0, temperature=1.1, clip=0.01, clip_mode="elementwise", top_k=None)
    (want,) = torch.autograd.grad(reference(student, teacher, mask, **kwargs)[0] * 0.25, student)
    (got,) = torch.autograd.grad(opsd_loss(student, teacher, mask, chunk_size=4, **kwargs)[0] * 0.25, student)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-7)


def test_frozen_head_gets_no_gradient_and_bf16_gradients_keep_their_dtype():
    student, teacher, mask = make_inputs()
    loss, _ = opsd_loss(student.detach().bfloat16().requires_grad_(), teacher.bfloat16(), mask)
    loss.backward()
    hidden = torch.randn(B, T, H, dtype=torch.bfloat16, requires_grad=True)
    weight = torch.randn(V, H, dtype=torch.bfloat16)
    loss, _ = opsd_loss_from_hidden(hidden, hidden.detach(), weight, mask, LossSpec())
    loss.backward()
    assert hidden.grad.dtype == torch.bfloat16 and weight.grad is None and loss.dtype == torch.float32


def test_forward_kl_matches_kl_div_and_full_top_k_matches_full_vocab():
    student, teacher, mask = make_inputs()
    loss, diag = opsd_loss(student, teacher, mask, clip=None)
    expected = torch.nn.functional.kl_div(student.log_softmax(-1), teacher.log_softmax(-1), log_target=True,
                                          reduction="none").sum(-1)[mask].mean()
    torch.testing.assert_close(loss, expected)
    assert diagnostics_dict(diag)["kl_true"] == pytest.approx(expected.item(), rel=1e-5)
    full, _ = opsd_loss(student, teacher, mask, clip=0.02, top_k=V)
    also_full, _ = opsd_loss(student, teacher, mask, clip=0.02, top_k=None)
    torch.testing.assert_close(full, also_full)


def test_no_valid_token_gives_a_clean_zero():
    student, teacher, mask = make_inputs()
    loss, diag = opsd_loss(student, teacher, torch.zeros_like(mask), clip=0.05)
    loss.backward()
    assert loss.item() == 0.0 and set(diagnostics_dict(diag).values()) == {0.0}
    assert torch.count_nonzero(student.grad) == 0


def test_identical_distributions_give_zero_loss():
    student, _, mask = make_inputs()
    for beta in (0.0, 0.5, 1.0):
        loss, diag = opsd_loss(student, student.detach(), mask, beta=beta)
        assert abs(loss.item()) < 1e-6 and abs(diagnostics_dict(diag)["kl_true"]) < 1e-6


@pytest.mark.parametrize("kwargs, message", [
    (dict(clip_mode="clamp"), r"clip_mode='clamp' is not one of \['none', 'elementwise', 'per_token'\]"),
    (dict(beta=1.5), r"beta=1.5 must be in \[0, 1\]"),
    (dict(clip=-0.1), r"clip=-0.1 must be > 0"),
    (dict(top_k=0), r"top_k=0 must be >= 1"),
    (dict(temperature=0.0), r"temperature=0.0 must be > 0"),
])
def test_bad_settings_are_named(kwargs, message):
    student, teacher, mask = make_inputs()
    with pytest.raises(ValueError, match=message):
        opsd_loss(student, teacher, mask, **kwargs)
