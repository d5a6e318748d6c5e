"""Generation backends for evaluation behind one interface: generate(prompts, n) -> samples.

`hf` runs transformers generate in batches; `vllm` is imported only when selected.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from tqdm import tqdm

from opsd_sweep.config import EvalConfig


@dataclass
class Sample:
    text: str
    n_tokens: int
    finish_reason: str  # "stop" | "length"


class HFGenerator:
    def __init__(self, cfg: EvalConfig, model, tokenizer, device):
        self.cfg, self.model, self.tokenizer, self.device = cfg, model.eval(), tokenizer, device

    @torch.no_grad()
    def generate(self, prompts: list[list[int]], seed: int) -> list[list[Sample]]:
        """n_samples completions for every prompt; prompts x samples are batched together."""
        cfg, tok = self.cfg, self.tokenizer
        jobs = [(i, p) for i, p in enumerate(prompts) for _ in range(cfg.n_samples)]
        results: list[list[Sample]] = [[] for _ in prompts]
        torch.manual_seed(seed)
        with tqdm(total=len(jobs), desc="eval samples", unit="sample") as bar:
            for start in range(0, len(jobs), cfg.batch_size):
                chunk = jobs[start:start + cfg.batch_size]
                for (i, _), sample in zip(chunk, self._generate_batch([p for _, p in chunk])):
                    results[i].append(sample)
                bar.update(len(chunk))
        return results

    def _generate_batch(self, prompts: list[list[int]]) -> list[Sample]:
        cfg, tok = self.cfg, self.tokenizer
        width = max(len(p) for p in prompts)
        ids = torch.tensor([[tok.pad_token_id] * (width - len(p)) + p for p in prompts], device=self.device)
        mask = (torch.arange(width, device=self.device)[None] >= torch.tensor(
            [width - len(p) for p in prompts], device=self.device)[:, None]).long()
        sampling = cfg.temperature > 0
        out = self.model.generate(input_ids=ids, attention_mask=mask, do_sample=sampling,
                                  temperature=cfg.temperature if sampling else None,
                                  top_p=cfg.top_p if sampling else None,
                                  top_k=cfg.top_k if cfg.top_k > 0 else None,
                                  max_new_tokens=cfg.max_new_tokens, pad_token_id=tok.pad_token_id,
                                  eos_token_id=tok.eos_token_id)
        samples = []
        for row in out[:, width:].tolist():
            stop = row.index(tok.eos_token_id) + 1 if tok.eos_token_id in row else None
            completion = row[:stop] if stop else row
            samples.append(Sample(tok.decode(completion, skip_special_tokens=True), len(completion),
                                  "stop" if stop else "length"))
        return samples
