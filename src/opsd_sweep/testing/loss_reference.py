"""The OPSD loss as the textbook formula over full [B, T, V] tensors: the slow, obvious reference that the
chunked loss (opsd_sweep.train.loss) is tested against and bench_train measures its errors from."""

from __future__ import annotations

import torch


def reference(student_logits, teacher_logits, mask, *, beta, temperature, clip, clip_mode, top_k):
    """The textbook formula over full [B, T, V] tensors, differentiated by autograd."""
    zs = student_logits.float() / temperature
    zt = teacher_logits.detach().float() / temperature
    if top_k is not None:
        index = zt.topk(top_k, dim=-1).indices
        zs, zt = zs.gather(-1, index), zt.gather(-1, index)
    log_ps, log_pt = zs.log_softmax(-1), zt.log_softmax(-1)
    ps, pt = log_ps.exp(), log_pt.exp()
    if beta == 0:
        terms = pt * (log_pt - log_ps)
    elif beta == 1:
        terms = ps * (log_ps - log_pt)
    else:
        log_m = (beta * pt + (1 - beta) * ps).log()
        terms = beta * pt * (log_pt - log_m) + (1 - beta) * ps * (log_ps - log_m)
    raw = terms.sum(-1)
    if clip_mode == "elementwise":
        per_token = terms.clamp(max=clip).sum(-1)
    elif clip_mode == "per_token":
        per_token = raw.clamp(max=clip)
    else:
        per_token = raw
    kl = (pt * (log_pt - log_ps)).sum(-1)[mask]
    if clip_mode == "elementwise":
        touched, clipped = (terms > clip).any(-1), (terms > clip).sum(-1).float()
    else:
        touched, clipped = (raw > clip) if clip_mode == "per_token" else torch.zeros_like(mask), torch.zeros_like(raw)
    diagnostics = {"kl_true": kl.mean(), "kl_discarded": (raw - per_token)[mask].mean(),
                   "clipped_vocab_per_tok": clipped[mask].mean(),
                   "kl_p50": kl.quantile(0.5), "kl_p75": kl.quantile(0.75), "kl_p90": kl.quantile(0.9),
                   "frac_tok_over_clip": touched[mask].float().mean()}
    return per_token[mask].mean(), {k: v.item() for k, v in diagnostics.items()}
