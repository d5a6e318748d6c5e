"""One micro-batch of the OPSD step on the GPU against the same one on the CPU, in fp32.

gpu-check runs this before its sweep, so a bug only the GPU path has fails in seconds and by name, not
as a sweep whose numbers are subtly wrong. Examples: the right-padded batches' gathers, the copies to
the GPU that do not wait, the chunk plan read from the host's mask, the compiled loss chunk. The model
is a small Qwen3 built from a config. Its rows have mixed prompt and completion lengths, so padding
is in play. The adapter gets random A and B, so every LoRA matrix has a gradient.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch

from opsd_sweep.train.collate import collate
from opsd_sweep.train.distill import DistillationModel
from opsd_sweep.train.loss import LossSpec
from opsd_sweep.train.teacher import Teacher
from opsd_sweep.train.timing import PhaseTimer

TOLERANCE = 1e-3  # relative; fp32 on both sides, TF32 off: kernels differ only in summation order
TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


@dataclass(frozen=True)
class StepParity:
    loss_rel_diff: float
    worst_grad_rel_diff: float  # over the LoRA matrices: max |cpu - gpu| / max |cpu|
    n_grads: int
    gpu_phase_seconds: dict[str, float]
    gpu_wall_s: float

    @property
    def problems(self) -> list[str]:
        found = []
        if not self.loss_rel_diff <= TOLERANCE:
            found.append(f"loss differs by {self.loss_rel_diff:.2e} (relative) from the CPU's")
        if not self.worst_grad_rel_diff <= TOLERANCE:
            found.append(f"a LoRA gradient differs by {self.worst_grad_rel_diff:.2e} (relative) from the CPU's")
        phases = sum(self.gpu_phase_seconds.values())
        if not 0 < phases <= 1.05 * self.gpu_wall_s + 0.01:
            found.append(f"the step's phases add up to {phases:.4f} s against its wall {self.gpu_wall_s:.4f} s")
        return found


def _model(device: str, seed: int) -> DistillationModel:
    from peft import LoraConfig, get_peft_model
    from transformers import Qwen3Config, Qwen3ForCausalLM

    torch.manual_seed(seed)  # the same weights on both devices
    config = Qwen3Config(vocab_size=512, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=1024,
                         tie_word_embeddings=True)
    model = Qwen3ForCausalLM(config).to(device)
    peft_model = get_peft_model(model, LoraConfig(r=4, lora_alpha=8, lora_dropout=0.0, target_modules=TARGETS))
    draws = torch.Generator().manual_seed(seed)  # on the CPU, in name order: the same values on both devices
    with torch.no_grad():
        for name, param in sorted(peft_model.named_parameters(), key=lambda item: item[0]):
            if "lora_" in name:
                param.copy_(torch.randn(param.shape, generator=draws) * 0.2)
    return DistillationModel(peft_model, LossSpec(clip=0.05, chunk_size=7), Teacher("fixed", 0.0, peft_model,
                                                                                       sharded=False)).eval()


def _rows(lengths: tuple[int, ...], generator: torch.Generator) -> list[list[int]]:
    return [torch.randint(5, 500, (n,), generator=generator).tolist() for n in lengths]


def _step(device: str, seed: int) -> tuple[float, dict[str, torch.Tensor], dict[str, float], float]:
    model = _model(device, seed)
    generator = torch.Generator().manual_seed(seed)
    student_prompts, teacher_prompts = _rows((30, 41, 25, 37), generator), _rows((60, 52, 71, 48), generator)
    completions = _rows((20, 33, 9, 27), generator)
    timer = PhaseTimer(torch.device(device))
    started = time.perf_counter()
    student = collate(student_prompts, completions, 0).to(device)
    teacher = collate(teacher_prompts, completions, 0).to(device)
    loss, _ = model(student, teacher, timer)
    with timer("backward"):
        loss.backward()
    seconds = timer.seconds  # on CUDA: the one wait for the GPU
    wall = time.perf_counter() - started
    grads = {name: p.grad.detach().cpu() for name, p in model.named_parameters() if p.requires_grad}
    return loss.item(), grads, seconds, wall


def check_step_parity(device: str = "cuda", seed: int = 0) -> StepParity:
    """Run the micro-batch on the CPU and on `device` and compare (TF32 off for the comparison)."""
    tf32 = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        cpu_loss, cpu_grads, _, _ = _step("cpu", seed)
        loss, grads, seconds, wall = _step(device, seed)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = tf32
    worst = max(((cpu_grads[n] - grads[n]).abs().max() / cpu_grads[n].abs().max().clamp(min=1e-12)).item()
                for n in cpu_grads)
    return StepParity(abs(cpu_loss - loss) / abs(cpu_loss), worst, len(cpu_grads), seconds, wall)
