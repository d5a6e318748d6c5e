"""Student/teacher batches: prompts left-padded, completions right-padded after them.

Layout per row: [pad ... pad | prompt | completion | pad ... pad] with explicit position ids that
count only real tokens, so prompt + completion are contiguous for student and teacher alike (no pad
between them, no RoPE position spent on padding), and the completion occupies the same columns in
every row (the last T columns of the batch).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class Batch:
    input_ids: torch.Tensor        # [B, P + T]
    attention_mask: torch.Tensor   # [B, P + T]
    position_ids: torch.Tensor     # [B, P + T]
    completion_mask: torch.Tensor  # [B, T]: True where a completion token is
    completion_len: int            # T

    def to(self, device) -> "Batch":
        return Batch(self.input_ids.to(device), self.attention_mask.to(device), self.position_ids.to(device),
                     self.completion_mask.to(device), self.completion_len)

    @property
    def n_tokens(self) -> int:
        return int(self.attention_mask.sum())


def collate(prompts: list[list[int]], completions: list[list[int]], pad_id: int) -> Batch:
    """Build one batch; the hidden state that predicts completion token j sits at column P + j - 1."""
    prompt_len = max(len(p) for p in prompts)
    comp_len = max(max(len(c) for c in completions), 1)
    rows, masks, comp_masks = [], [], []
    for prompt, completion in zip(prompts, completions):
        left = prompt_len - len(prompt)
        right = comp_len - len(completion)
        rows.append([pad_id] * left + list(prompt) + list(completion) + [pad_id] * right)
        masks.append([0] * left + [1] * (len(prompt) + len(completion)) + [0] * right)
        comp_masks.append([True] * len(completion) + [False] * right)
    attention_mask = torch.tensor(masks)
    position_ids = (attention_mask.cumsum(-1) - 1).clamp(min=0)
    return Batch(torch.tensor(rows), attention_mask, position_ids, torch.tensor(comp_masks), comp_len)


def completion_hidden(decoder, batch: Batch) -> torch.Tensor:
    """Final hidden states [B, T, H] at the columns that predict the completion tokens.

    `decoder` is the transformer body without the LM head (model.get_decoder()): the head is applied
    later, chunk by chunk, inside the loss.
    """
    out = decoder(input_ids=batch.input_ids, attention_mask=batch.attention_mask,
                  position_ids=batch.position_ids, use_cache=False)
    start = batch.input_ids.shape[1] - batch.completion_len - 1
    return out.last_hidden_state[:, start:start + batch.completion_len]
