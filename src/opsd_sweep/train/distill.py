"""Student and teacher behind one forward: hidden states in, OPSD loss out.

Student = the PEFT model with its LoRA adapter; teacher = the same model with the weights the teacher
strategy gives (train/teacher.py: adapter disabled, an EMA of the adapter, or the student's). Both run the transformer body only; the LM head is applied inside the
loss, chunk by chunk, and only at completion positions, so neither model's full-vocabulary logits
are ever materialised. One nn.Module call per micro-batch lets DDP / FSDP wrap the whole thing.
"""

from __future__ import annotations

from contextlib import nullcontext

import torch

from opsd_sweep.train.collate import Batch, completion_hidden
from opsd_sweep.train.loss import LossSpec, opsd_loss_from_hidden
from opsd_sweep.train.teacher import Teacher


class DistillationModel(torch.nn.Module):
    def __init__(self, peft_model, spec: LossSpec, teacher: Teacher):
        super().__init__()
        head = peft_model.get_base_model().get_output_embeddings()
        if getattr(head, "bias", None) is not None:
            raise ValueError(f"the LM head of {type(peft_model.get_base_model()).__name__} has a bias; "
                             "the chunked OPSD loss supports bias-free heads (Qwen3, Llama, ...)")
        self.peft_model = peft_model
        self.spec = spec
        self.teacher = teacher

    def forward(self, student: Batch, teacher: Batch, timer=None) -> tuple[torch.Tensor, torch.Tensor]:
        """Loss (mean over the student's completion tokens) and diagnostics (loss.summarize) for one
        micro-batch, both left on the device."""
        phase = timer or (lambda _name: nullcontext())
        base = self.peft_model.get_base_model()
        decoder, head = base.get_decoder(), base.get_output_embeddings()
        with phase("teacher"), torch.no_grad(), self.teacher.weights():
            teacher_hidden = completion_hidden(decoder, teacher)
        with phase("student"):
            student_hidden = completion_hidden(decoder, student)
        with phase("loss"):
            return opsd_loss_from_hidden(student_hidden, teacher_hidden, head.weight, student.completion_mask,
                                         self.spec)
