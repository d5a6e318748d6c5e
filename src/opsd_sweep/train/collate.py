"""Student/teacher batches: each row is prompt + completion, right-padded to the longest row.

Layout per row: [prompt | completion | pad ... pad]. No attention mask goes to the model: causal
attention alone is exact for the real tokens, since every pad comes after them (a token never
attends to a later column) and positions count from each row's first token. Without a mask, SDPA
runs its flash / cuDNN kernels; with a padding mask it falls back to the memory-efficient kernel, 8x
slower per call on an H200 (BENCHMARKS.md, the step's kernels). A row's completion starts at its own
column (its prompt length); completion_hidden gathers the hidden states that predict it.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from opsd_sweep.train.transfer import to_device


@dataclass
class Batch:
    input_ids: torch.Tensor         # [B, W]: W = the longest prompt + completion
    completion_start: torch.Tensor  # [B]: the column of each row's first completion token
    completion_mask: torch.Tensor   # [B, T]: True where a completion token is; stays on the host (the loss
                                    # plans its chunks from it there, without waiting for the GPU)
    completion_len: int             # T: the longest completion
    n_tokens: int                   # real (not pad) tokens

    def to(self, device) -> "Batch":
        """The model's inputs on `device`, queued without waiting for the GPU (train/transfer.py)."""
        return Batch(to_device(self.input_ids, device), to_device(self.completion_start, device), self.completion_mask,
                     self.completion_len, self.n_tokens)


def collate(prompts: list[list[int]], completions: list[list[int]], pad_id: int) -> Batch:
    """Build one batch; the hidden state that predicts completion token j of row i sits at column
    completion_start[i] + j - 1."""
    width = max(len(p) + len(c) for p, c in zip(prompts, completions))
    comp_len = max(max(len(c) for c in completions), 1)
    rows = [list(p) + list(c) + [pad_id] * (width - len(p) - len(c)) for p, c in zip(prompts, completions)]
    comp_masks = [[True] * len(c) + [False] * (comp_len - len(c)) for c in completions]
    return Batch(torch.tensor(rows), torch.tensor([len(p) for p in prompts]), torch.tensor(comp_masks), comp_len,
                 sum(len(p) + len(c) for p, c in zip(prompts, completions)))


def completion_hidden(decoder, batch: Batch) -> torch.Tensor:
    """Final hidden states [B, T, H] at the columns that predict the completion tokens.

    `decoder` is the transformer body without the LM head (model.get_decoder()): the head is applied
    later, chunk by chunk, inside the loss. Columns past a row's end (a completion shorter than T) are
    clamped to the last column: completion_mask leaves them out of the loss.
    """
    hidden = decoder(input_ids=batch.input_ids, use_cache=False).last_hidden_state
    offsets = torch.arange(batch.completion_len, device=hidden.device)
    columns = (batch.completion_start[:, None] - 1 + offsets).clamp(max=hidden.shape[1] - 1)
    return hidden.gather(1, columns[..., None].expand(-1, -1, hidden.shape[-1]))
