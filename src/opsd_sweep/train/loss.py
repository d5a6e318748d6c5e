"""The OPSD loss: generalized JSD between teacher and student next-token distributions.

Per completion position and vocabulary entry v (both logits divided by the temperature first):
  beta = 0       D_v = p_T (log p_T - log p_S)                      forward KL(teacher || student)
  beta = 1       D_v = p_S (log p_S - log p_T)                      reverse KL
  0 < beta < 1   D_v = beta p_T log(p_T / M) + (1 - beta) p_S log(p_S / M),  M = beta p_T + (1 - beta) p_S
Clip modes: `elementwise` D_v <- min(D_v, clip) before the sum over v (the paper's jsd_token_clip);
`per_token` L = min(sum_v D_v, clip) (a trust region); `none`. top_k: both distributions are
gathered at the teacher's k largest logits and renormalised over that subset.
Loss = mean over valid completion tokens of the (clipped) vocabulary sum.

Memory and speed: the divergence is computed in fp32 one chunk of tokens at a time, and its gradient
with respect to the chunk's logits is formed right there in closed form, so no fp32 [tokens, V]
tensor outlives its chunk. On CUDA the chunk function is compiled (torch.compile), which fuses its
element-wise passes into a few kernels; on CPU it runs eagerly, reusing its buffers in place. `opsd_loss_from_hidden` goes one step further and projects hidden states
through the LM head chunk by chunk, so full-vocabulary logits for the whole completion never exist
at once (the trainer's path). Both equal the plain formula above, values and gradients (tests).

Gradient: the loss sees the student only through p_S = softmax(z_S). With r_v = p_S,v dD_v/dp_S,v
and w_v the clip's pass-through weight (1; [D_v <= clip] elementwise; [sum_v D_v <= clip] per
token): dL/dz_S,u = (w_u r_u - p_S,u sum_v w_v r_v) / temperature, where r_v = -p_T,v (beta 0),
p_S,v (log p_S,v - log p_T,v + 1) (beta 1), (1 - beta) p_S,v (log p_S,v - log M_v) in between.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import torch

from opsd_sweep.train.transfer import to_device

CLIP_MODES = ("none", "elementwise", "per_token")
DIAGNOSTICS = ("kl_true", "kl_discarded", "clipped_vocab_per_tok", "kl_p50", "kl_p75", "kl_p90",
               "frac_tok_over_clip")


@dataclass(frozen=True)
class LossSpec:
    """Everything that defines the loss; `clip=None` or `clip_mode='none'` means no clipping."""

    beta: float = 0.0
    temperature: float = 1.0
    clip: float | None = None
    clip_mode: str = "elementwise"
    top_k: int | None = None
    chunk_size: int = 256  # tokens per fp32 chunk: memory and speed only, never the result

    def __post_init__(self):
        problems = []
        if self.clip_mode not in CLIP_MODES:
            problems.append(f"clip_mode={self.clip_mode!r} is not one of {list(CLIP_MODES)}")
        if self.clip is not None and self.clip <= 0:
            problems.append(f"clip={self.clip} must be > 0 (or None for no clip)")
        if not 0.0 <= self.beta <= 1.0:
            problems.append(f"beta={self.beta} must be in [0, 1] (0 = forward KL, 1 = reverse KL)")
        if self.temperature <= 0:
            problems.append(f"temperature={self.temperature} must be > 0")
        if self.top_k is not None and self.top_k < 1:
            problems.append(f"top_k={self.top_k} must be >= 1 or None")
        if self.chunk_size < 1:
            problems.append(f"chunk_size={self.chunk_size} must be >= 1")
        if problems:
            raise ValueError("; ".join(problems))

    @property
    def mode(self) -> str:
        """The clip mode in effect ('none' when no clip value is given)."""
        return "none" if self.clip is None else self.clip_mode


# --- one chunk of tokens, fp32 -------------------------------------------------------------------

def chunk_divergence(zs: torch.Tensor, zt: torch.Tensor, row_weight: torch.Tensor, spec: LossSpec,
                     need_grad: bool, grad_dtype: torch.dtype = torch.float32, grad_out: torch.Tensor | None = None):
    """Per-token statistics [n, 5] and row_weight[i] * d(loss of token i)/d(student logits) [n, V] (or None).

    zs, zt: logits [n, V] in any float dtype (read, not modified); the maths is fp32 and the
    gradient comes back in grad_dtype, or is written into grad_out [n, V] when given (on CUDA that
    saves a copy of the largest tensor of the loss). row_weight [n]: 1 / (valid tokens) at valid
    rows, 0 at padding, so a chunk may include rows it does not own. Statistics columns: loss
    (clipped), raw (unclipped divergence), forward KL, clipped vocab entries, clip touched (0/1).
    """
    vocab = zs.shape[-1]
    zs = zs.to(torch.float32, copy=True).div_(spec.temperature)  # fresh fp32 workspace
    zt = zt.to(torch.float32, copy=True).div_(spec.temperature)
    index = None
    if spec.top_k is not None and spec.top_k < vocab:
        index = zt.topk(spec.top_k, dim=-1).indices
        zs, zt = zs.gather(-1, index), zt.gather(-1, index)
    log_ps = _log_softmax_(zs)
    log_pt = _log_softmax_(zt)
    terms, r, kl = _divergence_terms(log_ps, log_pt, spec.beta)
    raw = terms.sum(-1)
    keep, n_clipped = None, torch.zeros_like(raw)
    if spec.mode == "elementwise":
        keep = terms <= spec.clip  # clamp passes the gradient where D_v <= clip
        n_clipped = (~keep).sum(-1, dtype=torch.float32)
        loss, touched = terms.clamp_(max=spec.clip).sum(-1), n_clipped > 0
    elif spec.mode == "per_token":
        keep = (raw <= spec.clip)[:, None]
        loss, touched = raw.clamp(max=spec.clip), raw > spec.clip
    else:
        loss, touched = raw, torch.zeros_like(raw, dtype=torch.bool)
    del terms
    stats = torch.stack([loss, raw, kl, n_clipped, touched.float()], dim=1)
    if not need_grad:
        return stats, None
    if keep is not None:
        r.mul_(keep)
    grad = r.sub_(log_ps.exp_().mul_(r.sum(-1, keepdim=True)))
    grad.mul_((row_weight / spec.temperature)[:, None])
    if index is not None:
        grad = grad.new_zeros(grad.shape[0], vocab).scatter_(-1, index, grad)
    if grad_out is not None:
        grad_out.copy_(grad)
        return stats, grad_out
    return stats, grad.to(grad_dtype)


@functools.cache
def _compiled_chunk_divergence(spec: LossSpec, need_grad: bool, grad_dtype: torch.dtype):
    """chunk_divergence compiled for one loss and one chunk shape: on CUDA its ~20 fp32 passes fuse
    into a few kernels (and the gradient is stored straight into its destination). Every call has
    the shape [chunk_size, V] (see _windows)."""
    return torch.compile(functools.partial(chunk_divergence, spec=spec, need_grad=need_grad,
                                           grad_dtype=grad_dtype), dynamic=False)


def _log_softmax_(z: torch.Tensor) -> torch.Tensor:
    """log_softmax over the last dim, in place (saves one fp32 [n, V] buffer per distribution)."""
    return z.sub_(z.logsumexp(-1, keepdim=True))


def _divergence_terms(log_ps: torch.Tensor, log_pt: torch.Tensor, beta: float):
    """(D [n, V], r [n, V], forward KL per token [n]) with r as in the module docstring.

    log_pt may be consumed; log_ps is kept (the gradient needs p_S).
    """
    pt = log_pt.exp()
    if beta == 0.0:
        terms = log_pt.sub_(log_ps).mul_(pt)
        return terms, pt.neg_(), terms.sum(-1)
    diff = log_ps - log_pt
    kl = -(pt * diff).sum(-1)
    ps = log_ps.exp()
    if beta == 1.0:
        terms = ps * diff
        return terms, diff.add_(1.0).mul_(ps), kl
    log_m = torch.logaddexp(log_pt + math.log(beta), log_ps + math.log(1.0 - beta))
    student_part = (log_ps - log_m).mul_(ps).mul_(1.0 - beta)  # this is r as well
    terms = log_pt.sub_(log_m).mul_(pt).mul_(beta).add_(student_part)
    return terms, student_part, kl


# --- all tokens, chunked, differentiable ---------------------------------------------------------

def _windows(valid: torch.Tensor, size: int) -> list[tuple[int, int, int]]:
    """(window start, first owned row, owned rows) covering every valid row of valid [N] once.

    Owned rows are consecutive valid rows, at most `size`, so every chunk is a plain slice (no
    gather, no scatter). Every window has exactly min(size, N) rows, the shape the compiled
    chunk function was built for: a short run's window reaches past it into rows another chunk
    owns or padding; those rows are computed too, but their statistics are dropped and their
    gradients (exact per row, zero at padding) are the values that belong there anyway.
    """
    total, size = valid.numel(), min(size, valid.numel())
    flags = valid.to("cpu", torch.int8)
    edges = torch.diff(flags, prepend=flags.new_zeros(1), append=flags.new_zeros(1)).nonzero().flatten().tolist()
    out = []
    for run_start, run_end in zip(edges[0::2], edges[1::2]):  # runs of valid rows: [start, end)
        for first in range(run_start, run_end, size):
            out.append((min(first, total - size), first, min(size, run_end - first)))
    return out


class _ChunkedDivergence(torch.autograd.Function):
    """Mean over the valid rows of the per-token loss; the gradient is formed during forward.

    student, teacher: [N, D] rows (logits when weight is None, else hidden states projected by
    weight [V, D]); valid: [N] bool, best on the host: the chunks are planned from it there, and a
    mask on the GPU would make the host wait for every kernel queued before. Returns (mean loss,
    per-token stats [valid rows, 5]).
    """

    @staticmethod
    def forward(ctx, student, teacher, weight, valid, spec):
        want_input = ctx.needs_input_grad[0]
        want_weight = weight is not None and ctx.needs_input_grad[2]
        need_grad = want_input or want_weight
        grad_dtype = student.dtype if weight is None else weight.dtype
        grad_input = torch.zeros_like(student) if want_input else None
        grad_weight = torch.zeros_like(weight, dtype=torch.float32) if want_weight else None
        windows = _windows(valid, spec.chunk_size)
        n_valid = sum(n for _, _, n in windows)
        row_weight = to_device(valid.to(torch.float32) / max(n_valid, 1), student.device)
        divergence = (_compiled_chunk_divergence(spec, need_grad, grad_dtype) if student.is_cuda else
                      functools.partial(chunk_divergence, spec=spec, need_grad=need_grad, grad_dtype=grad_dtype))
        stats = [student.new_zeros((0, 5), dtype=torch.float32)]
        for start, first, n in windows:
            window = slice(start, start + min(spec.chunk_size, valid.numel()))
            owned = slice(first - start, first - start + n)
            s_rows = student[window]
            grad_out = grad_input[window] if weight is None and want_input else None
            chunk_stats, grad = divergence(_project(s_rows, weight), _project(teacher[window], weight),
                                           row_weight[window], grad_out=grad_out)
            stats.append(chunk_stats[owned])
            if grad is None or weight is None:  # logits: the gradient is already in place
                continue
            grad = grad[owned]
            if want_input:
                grad_input[first:first + n] = grad @ weight
            if want_weight:
                grad_weight.add_(grad.T @ s_rows[owned])
        stats = torch.cat(stats)
        ctx.mark_non_differentiable(stats)
        ctx.weight_dtype = None if weight is None else weight.dtype
        ctx.save_for_backward(grad_input, grad_weight)
        return stats[:, 0].sum() / max(n_valid, 1), stats

    @staticmethod
    def backward(ctx, grad_mean, _grad_stats):
        grad_input, grad_weight = ctx.saved_tensors
        # always rescaled: skipping it for grad_mean == 1 would make the host wait for the GPU to read it
        if grad_input is not None:
            grad_input = grad_input * grad_mean.to(grad_input.dtype)
        if grad_weight is not None:
            grad_weight = (grad_weight * grad_mean).to(ctx.weight_dtype)
        return grad_input, None, grad_weight, None, None


def _project(rows: torch.Tensor, weight: torch.Tensor | None) -> torch.Tensor:
    """Logits of some rows, in the model's dtype: the rows themselves, or hidden states through the LM head."""
    return rows if weight is None else rows @ weight.T


def _reduce(student: torch.Tensor, teacher: torch.Tensor, weight, mask: torch.Tensor, spec: LossSpec):
    loss, stats = _ChunkedDivergence.apply(student, teacher.detach(), weight, mask.reshape(-1), spec)
    return loss, summarize(stats)


def summarize(stats: torch.Tensor) -> torch.Tensor:
    """Diagnostics from per-token statistics [n, 5]: a tensor of one value per DIAGNOSTICS name, on the
    statistics' device (zeros when there are no tokens). It is left there: reading it waits for the
    GPU, so the trainer reads a whole step's at once (diagnostics_dict names the values)."""
    if stats.shape[0] == 0:
        return stats.new_zeros(len(DIAGNOSTICS))
    loss, raw, kl, n_clipped, touched = stats.T
    quantiles = torch.quantile(kl, to_device(torch.tensor([0.5, 0.75, 0.9]), kl.device))
    return torch.stack([kl.mean(), (raw - loss).mean(), n_clipped.mean(), *quantiles, touched.mean()])


def diagnostics_dict(values: torch.Tensor) -> dict[str, float]:
    """The diagnostics summarize gives, as floats by name."""
    return dict(zip(DIAGNOSTICS, values.tolist()))


def opsd_loss(student_logits: torch.Tensor, teacher_logits: torch.Tensor, mask: torch.Tensor, *,
              beta: float = 0.0, temperature: float = 1.0, clip: float | None = None,
              clip_mode: str = "elementwise", top_k: int | None = None,
              chunk_size: int = 256) -> tuple[torch.Tensor, torch.Tensor]:
    """The OPSD loss from logits.

    student_logits, teacher_logits: [B, T, V] over completion positions (any float dtype; the
    teacher gets no gradient); mask: [B, T] bool, True at completion tokens. Returns (loss, diagnostics):
    loss is a scalar fp32 tensor, the mean over valid tokens of the vocab-summed (clipped)
    divergence, differentiable in student_logits; diagnostics is a tensor of the DIAGNOSTICS in
    order (diagnostics_dict names them): kl_true (unclipped forward KL per token), kl_discarded
    (unclipped minus clipped divergence per token), clipped_vocab_per_tok, kl_p50/p75/p90 (per-token
    forward KL quantiles), frac_tok_over_clip (share of tokens the clip changed). With top_k the KL
    is over the renormalised top-k subset.
    """
    spec = LossSpec(beta, temperature, clip, clip_mode, top_k, chunk_size)
    vocab = student_logits.shape[-1]
    return _reduce(student_logits.reshape(-1, vocab), teacher_logits.reshape(-1, vocab), None, mask, spec)


def opsd_loss_from_hidden(student_hidden: torch.Tensor, teacher_hidden: torch.Tensor,
                          head_weight: torch.Tensor, mask: torch.Tensor,
                          spec: LossSpec) -> tuple[torch.Tensor, torch.Tensor]:
    """The same loss from final hidden states [B, T, H] and the LM head weight [V, H] (no bias).

    Logits are formed chunk by chunk (both models), so [B, T, V] never exists; gradients flow to
    student_hidden and, when it requires grad, to head_weight.
    """
    hidden = student_hidden.shape[-1]
    return _reduce(student_hidden.reshape(-1, hidden), teacher_hidden.reshape(-1, hidden), head_weight,
                   mask, spec)
