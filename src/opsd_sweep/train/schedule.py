"""Learning-rate schedules: constant, linear or cosine decay after a linear warmup."""

from __future__ import annotations

import math

import torch

from opsd_sweep.config import TrainConfig


def lr_factor(step: int, kind: str, total_steps: int, warmup_steps: int) -> float:
    """Multiplier of the base learning rate for optimizer step `step` (0-based).

    Warmup rises linearly to 1 over `warmup_steps` (the first step gets 1 / (warmup + 1), never 0);
    then constant stays at 1, linear and cosine decay towards 0 at `total_steps`.
    """
    if step < warmup_steps:
        return (step + 1) / (warmup_steps + 1)
    progress = (step - warmup_steps) / max(total_steps - warmup_steps, 1)
    if kind == "linear":
        return max(0.0, 1.0 - progress)
    if kind == "cosine":
        return 0.5 * (1.0 + math.cos(math.pi * min(progress, 1.0)))
    if kind == "constant":
        return 1.0
    raise ValueError(f"train.lr_scheduler={kind!r} is not one of ['constant', 'linear', 'cosine']")


def make_scheduler(optimizer: torch.optim.Optimizer, cfg: TrainConfig) -> torch.optim.lr_scheduler.LambdaLR:
    warmup = math.ceil(cfg.warmup_ratio * cfg.max_steps)
    return torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: lr_factor(step, cfg.lr_scheduler, cfg.max_steps, warmup))
