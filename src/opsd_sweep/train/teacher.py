"""Which weights the teacher forward runs with (train.teacher).

  fixed    the LoRA adapter disabled: the initial model, as in the paper.
  student  the current student weights (no grad): the teacher moves with every step.
  ema      an exponential moving average of the trainable (LoRA) weights, created at the first
           optimizer step from the weights that step's teacher sees (the initial ones), and after
           every optimizer step moved as ema <- decay * ema + (1 - decay) * weights. So decay 1 is
           the fixed teacher (LoRA starts at zero) and decay 0 the student teacher. (The official
           code snapshots the weights after the first step instead: its decay-1 teacher is step 1's.)

The student and EMA teachers run in eval mode, so the target is not perturbed by LoRA dropout.
The EMA lives beside the model, not in it (DDP never sees it), in fp32 (a bf16 EMA could not move by
0.1% of a weight); it is swapped into the LoRA tensors for the teacher forward only and travels in the
checkpoint's state.pt.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

import torch

from opsd_sweep.config import TEACHERS


class Teacher:
    def __init__(self, kind: str, decay: float, peft_model, *, sharded: bool):
        if kind not in TEACHERS:
            raise ValueError(f"train.teacher={kind!r} is not one of {list(TEACHERS)}")
        if kind == "ema" and sharded:
            raise ValueError("train.teacher=ema keeps a full copy of the LoRA weights per rank, which FSDP "
                             "shards; use train.strategy=ddp or train.teacher=fixed")
        self.kind, self.decay, self.peft_model = kind, decay, peft_model
        # The same Parameter objects DDP wraps: in-place swaps reach the wrapped model too.
        self.params = {name: p for name, p in peft_model.named_parameters() if p.requires_grad}
        self.ema: dict[str, torch.Tensor] | None = None
        self._student: dict[str, torch.Tensor] = {}  # the student weights while the EMA is swapped in

    @contextmanager
    def weights(self) -> Iterator[None]:
        """The teacher's weights for the body of the block (call under no_grad)."""
        if self.kind == "fixed":
            with self.peft_model.disable_adapter():
                yield
            return
        was_training = self.peft_model.training
        self.peft_model.eval()
        try:
            if self.kind == "student":
                yield
            else:
                with self._swapped_in_ema():
                    yield
        finally:
            self.peft_model.train(was_training)

    @contextmanager
    def _swapped_in_ema(self) -> Iterator[None]:
        if self.ema is None:  # the first optimizer step: its teacher sees the initial weights
            self.ema = {name: p.detach().float().clone() for name, p in self.params.items()}
        if not self._student:
            self._student = {name: torch.empty_like(p) for name, p in self.params.items()}
        for name, p in self.params.items():
            self._student[name].copy_(p.detach())
            p.data.copy_(self.ema[name])  # .data: values only, the autograd version counter stays
        try:
            yield
        finally:
            for name, p in self.params.items():
                p.data.copy_(self._student[name])

    @torch.no_grad()
    def update(self) -> None:
        """After each optimizer step: move the EMA toward the new weights."""
        if self.kind == "ema" and self.ema is not None:
            for name, p in self.params.items():
                self.ema[name].lerp_(p.detach().float(), 1.0 - self.decay)

    def state_dict(self) -> dict | None:
        """What a checkpoint must hold to resume this teacher exactly (None: nothing, it is stateless)."""
        if self.kind != "ema" or self.ema is None:
            return None
        return {"ema": {name: t.cpu() for name, t in self.ema.items()}}

    def load_state_dict(self, state: dict | None, step: int) -> None:
        if self.kind != "ema" or step == 0:
            return
        if state is None or set(state["ema"]) != set(self.params):
            raise RuntimeError(f"the checkpoint of step {step} holds no EMA of these LoRA weights, but "
                               "train.teacher=ema needs it to resume; start the run again from scratch (force=true)")
        self.ema = {name: state["ema"][name].to(p.device, torch.float32) for name, p in self.params.items()}
