"""On-policy rollouts: one sampled completion per student prompt, behind one small interface.

Backends: `hf` (transformers generate) here; `vllm` (colocated engine) lives in rollout_vllm.py and
is imported only when selected.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from opsd_sweep.config import RolloutConfig


@dataclass
class Rollouts:
    completions: list[list[int]]  # completion token ids, EOS kept when the model stopped
    hit_cap: list[bool]           # True when generation stopped at max_new_tokens


def trim_completion(ids: list[int], eos_id: int, pad_id: int) -> tuple[list[int], bool]:
    """Cut a generated row after its first EOS (kept); report whether it ran to the cap instead."""
    for i, token in enumerate(ids):
        if token == eos_id:
            return ids[: i + 1], False
    while ids and ids[-1] == pad_id and pad_id != eos_id:
        ids = ids[:-1]
    return ids, True


class HFRollout:
    """transformers `generate` on the training model itself (adapter on = the current student)."""

    def __init__(self, cfg: RolloutConfig, tokenizer, device):
        self.cfg, self.tokenizer, self.device = cfg, tokenizer, device

    @torch.no_grad()
    def generate(self, model, prompts: list[list[int]], seed: int) -> Rollouts:
        tok = self.tokenizer
        width = max(len(p) for p in prompts)
        ids = torch.tensor([[tok.pad_token_id] * (width - len(p)) + p for p in prompts], device=self.device)
        mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts], device=self.device)
        torch.manual_seed(seed)
        was_training = model.training
        model.eval()
        out = model.generate(input_ids=ids, attention_mask=mask, do_sample=True,
                             temperature=self.cfg.temperature, top_p=self.cfg.top_p,
                             top_k=self.cfg.top_k if self.cfg.top_k > 0 else None,
                             max_new_tokens=self.cfg.max_new_tokens, pad_token_id=tok.pad_token_id,
                             eos_token_id=tok.eos_token_id, use_cache=True)
        model.train(was_training)
        trimmed = [trim_completion(row[width:].tolist(), tok.eos_token_id, tok.pad_token_id) for row in out]
        return Rollouts([c for c, _ in trimmed], [cap for _, cap in trimmed])


def make_rollout(cfg: RolloutConfig, tokenizer, device):
    if cfg.backend == "hf":
        return HFRollout(cfg, tokenizer, device)
    raise ValueError(f"rollout.backend={cfg.backend!r} is not available yet; use rollout.backend=hf")
