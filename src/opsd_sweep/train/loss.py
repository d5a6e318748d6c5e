"""The OPSD loss: generalized JSD between teacher and student next-token distributions.

Shapes: logits [B, T, V] over completion positions, mask [B, T] bool (True = a completion token).
Per position the vocab-wise divergence D_v is computed in fp32, optionally clipped, summed over the
vocabulary, and averaged over valid positions.
"""

from __future__ import annotations

import math

import torch

CLIP_MODES = ("none", "elementwise", "per_token")


def vocab_divergence(logp_s: torch.Tensor, logp_t: torch.Tensor, beta: float) -> torch.Tensor:
    """Per-vocab-entry generalized JSD terms [..., V] from log-probabilities (fp32).

    beta = 0: p_T (log p_T - log p_S) (forward KL); beta = 1: p_S (log p_S - log p_T) (reverse KL);
    else with M = beta p_T + (1 - beta) p_S: beta p_T log(p_T / M) + (1 - beta) p_S log(p_S / M).
    """
    if beta == 0.0:
        return logp_t.exp() * (logp_t - logp_s)
    if beta == 1.0:
        return logp_s.exp() * (logp_s - logp_t)
    log_m = torch.logsumexp(torch.stack([logp_t + math.log(beta), logp_s + math.log(1 - beta)]), dim=0)
    return beta * logp_t.exp() * (logp_t - log_m) + (1 - beta) * logp_s.exp() * (logp_s - log_m)


def restrict_to_teacher_top_k(student_logits: torch.Tensor, teacher_logits: torch.Tensor, k: int):
    """Both logits gathered at the teacher's k largest entries (renormalised later by log_softmax)."""
    index = teacher_logits.topk(min(k, teacher_logits.shape[-1]), dim=-1).indices
    return student_logits.gather(-1, index), teacher_logits.gather(-1, index)


def opsd_loss(student_logits: torch.Tensor, teacher_logits: torch.Tensor, mask: torch.Tensor, *,
              beta: float = 0.0, temperature: float = 1.0, clip: float | None = None,
              clip_mode: str = "elementwise", top_k: int | None = None) -> tuple[torch.Tensor, dict]:
    """Mean over valid tokens of the vocab-summed (clipped) divergence, and diagnostics.

    Returns (loss, diagnostics): loss is a scalar tensor with grad through student_logits;
    diagnostics are floats: kl_true (unclipped forward KL per token), kl_discarded (unclipped minus
    clipped divergence per token), clipped_vocab_per_tok, kl_p50/p75/p90, frac_tok_over_clip.
    """
    if clip_mode not in CLIP_MODES:
        raise ValueError(f"clip_mode={clip_mode!r} is not one of {list(CLIP_MODES)}")
    if clip_mode != "none" and (clip is None or clip <= 0):
        raise ValueError(f"clip={clip} must be > 0 with clip_mode={clip_mode!r}")
    if top_k is not None:
        student_logits, teacher_logits = restrict_to_teacher_top_k(student_logits, teacher_logits, top_k)
    mask = mask.bool()
    zs = student_logits[mask].float() / temperature  # [N, V]: valid positions only
    zt = teacher_logits[mask].float().detach() / temperature
    logp_s, logp_t = zs.log_softmax(-1), zt.log_softmax(-1)
    terms = vocab_divergence(logp_s, logp_t, beta)  # [N, V]
    per_token_raw = terms.sum(-1)
    if clip_mode == "elementwise":
        per_token = terms.clamp(max=clip).sum(-1)
    elif clip_mode == "per_token":
        per_token = per_token_raw.clamp(max=clip)
    else:
        per_token = per_token_raw
    n = per_token.shape[0]
    loss = per_token.sum() / max(n, 1) if n else student_logits.sum() * 0.0
    with torch.no_grad():
        kl = (logp_t.exp() * (logp_t - logp_s)).sum(-1) if beta != 0.0 else per_token_raw
        diagnostics = _diagnostics(kl, per_token_raw, per_token, terms, clip, clip_mode)
    return loss, diagnostics


def _diagnostics(kl: torch.Tensor, raw: torch.Tensor, clipped: torch.Tensor, terms: torch.Tensor,
                 clip: float | None, clip_mode: str) -> dict:
    if kl.numel() == 0:
        return {k: 0.0 for k in ("kl_true", "kl_discarded", "clipped_vocab_per_tok", "kl_p50", "kl_p75",
                                 "kl_p90", "frac_tok_over_clip")}
    q = torch.quantile(kl, torch.tensor([0.5, 0.75, 0.9], dtype=kl.dtype, device=kl.device)).tolist()
    clipped_entries = (terms > clip).sum(-1).float().mean().item() if clip_mode == "elementwise" else 0.0
    over = (raw > clip).float().mean().item() if clip is not None and clip_mode != "none" else 0.0
    return {"kl_true": kl.mean().item(), "kl_discarded": (raw - clipped).mean().item(),
            "clipped_vocab_per_tok": clipped_entries, "kl_p50": q[0], "kl_p75": q[1], "kl_p90": q[2],
            "frac_tok_over_clip": over}
