"""On-policy rollouts: one sampled completion per student prompt, behind one small interface.

    backend.generate(prompts, seed) -> Rollouts   sample one completion per prompt from the student

    backend.update(step)                          sample from the student after `step` optimizer steps

Backends: `hf` (transformers generate on a merged copy of the student, below; on GPU with a static
KV cache so transformers compiles the decode step, eager on CPU) here, and `vllm` (a colocated
engine per rank into which the student's merged weights are pushed after each optimizer step) in
rollout_vllm.py, imported only when selected.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import torch

from opsd_sweep.config import RolloutConfig

# Static caches are sized by prompt width + max_new_tokens, and a new size means a new compile:
# prompts are left-padded up to a multiple of this so a run sees only a few sizes.
STATIC_PROMPT_BUCKET = 64


@dataclass
class Rollouts:
    completions: list[list[int]]  # completion token ids, the EOS kept when the model stopped
    hit_cap: list[bool]           # True when generation stopped at max_new_tokens

    @property
    def mean_length(self) -> float:
        return sum(len(c) for c in self.completions) / max(len(self.completions), 1)

    @property
    def cap_fraction(self) -> float:
        return sum(self.hit_cap) / max(len(self.hit_cap), 1)

    @property
    def n_tokens(self) -> int:
        return sum(len(c) for c in self.completions)


def trim_completion(ids: list[int], eos_ids: set[int]) -> tuple[list[int], bool]:
    """Cut a generated row after its first EOS (kept); without one it ran to the cap."""
    for i, token in enumerate(ids):
        if token in eos_ids:
            return ids[: i + 1], False
    return ids, True


def left_pad(prompts: list[list[int]], pad_id: int, width: int, device) -> tuple[torch.Tensor, torch.Tensor]:
    """(input_ids, attention_mask) [B, width] with each prompt at the right end."""
    ids = torch.tensor([[pad_id] * (width - len(p)) + p for p in prompts], device=device)
    mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts], device=device)
    return ids, mask


class MergedCopy:
    """A LoRA-free copy of the student for sampling: every adapted projection holds W + scaling * B A.

    Decoding through PEFT costs three matmuls, a dropout module and an add per projection per
    token; the copy costs one, which matters most in the small-batch, launch-bound decode loop. It
    is refreshed in place after every optimizer step, so a compiled decode step (and its CUDA
    graphs) keeps reading the same tensors. The base weights of the training model are never
    touched: the teacher (adapter disabled) stays exactly the initial model. Costs one more copy
    of the weights in memory (3.4 GB for Qwen3-1.7B in bf16).
    """

    def __init__(self, peft_model):
        from peft.tuners.lora import LoraLayer

        self.peft_model = peft_model
        self.model = copy.deepcopy(peft_model).merge_and_unload()
        self.model.requires_grad_(False).eval()
        for module in self.model.modules():  # a copied Module.compile() would still run the original's layers
            module._compiled_call_impl = None
        plain = dict(self.model.named_modules())
        prefix = "base_model.model."  # PeftModel -> LoraModel -> the transformers model
        self.pairs = [(module, plain[name.removeprefix(prefix)]) for name, module in peft_model.named_modules()
                      if isinstance(module, LoraLayer)]

    @torch.no_grad()
    def refresh(self) -> None:
        adapter = self.peft_model.active_adapter
        for lora, linear in self.pairs:
            linear.weight.copy_(lora.get_base_layer().weight + lora.get_delta_weight(adapter))


class HFRollout:
    """transformers `generate` on a MergedCopy of the student, seeded per call."""

    engine_bytes = resident_bytes = 0  # no separate engine: all its memory is the trainer's own

    def __init__(self, cfg: RolloutConfig, peft_model, pad_id: int, eos_ids: list[int], static_cache: bool):
        self.cfg, self.pad_id, self.eos_ids = cfg, pad_id, eos_ids
        self.policy = MergedCopy(peft_model)
        self.static_cache = static_cache

    def update(self, step: int) -> None:
        self.policy.refresh()

    def generate(self, prompts: list[list[int]], seed: int) -> Rollouts:
        return sample(self.policy.model, prompts, self.cfg, self.pad_id, self.eos_ids, seed, self.static_cache)


@torch.no_grad()
def sample(model, prompts: list[list[int]], cfg: RolloutConfig, pad_id: int, eos_ids: list[int], seed: int,
           static_cache: bool) -> Rollouts:
    """One sampled completion per prompt from `model` with transformers generate, seeded."""
    width = max(len(p) for p in prompts)
    if static_cache:
        width = -(-width // STATIC_PROMPT_BUCKET) * STATIC_PROMPT_BUCKET
    ids, mask = left_pad(prompts, pad_id, width, model.device)
    torch.manual_seed(seed)
    out = model.generate(input_ids=ids, attention_mask=mask, do_sample=True, temperature=cfg.temperature,
                         top_p=cfg.top_p, top_k=max(cfg.top_k, 0), max_new_tokens=cfg.max_new_tokens,
                         pad_token_id=pad_id, eos_token_id=eos_ids, use_cache=True,
                         cache_implementation="static" if static_cache else None)
    eos = set(eos_ids)
    trimmed = [trim_completion(row, eos) for row in out[:, width:].tolist()]
    return Rollouts([c for c, _ in trimmed], [cap for _, cap in trimmed])
