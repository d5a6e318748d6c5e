"""Seconds per named phase of a training step (rollout, teacher, student, loss, backward, optimizer)."""

from __future__ import annotations

import time
from collections import defaultdict
from contextlib import contextmanager

import torch


class PhaseTimer:
    """Adds up wall seconds per phase. On CUDA each phase starts and ends with a synchronize, so GPU
    work is charged to the phase that launched it (a few syncs per step; negligible next to a step)."""

    def __init__(self, device: torch.device):
        self.cuda = torch.device(device).type == "cuda"
        self.seconds: dict[str, float] = defaultdict(float)

    @contextmanager
    def __call__(self, phase: str):
        self._sync()
        started = time.perf_counter()
        try:
            yield
        finally:
            self._sync()
            self.seconds[phase] += time.perf_counter() - started

    def _sync(self) -> None:
        if self.cuda:
            torch.cuda.synchronize()


class StepMemory:
    """Peak GPU memory of one training step, the trainer's own apart from the colocated vLLM engine.

    torch's allocator counts the engine's weights and KV cache too (126 GB 'peak' on an H200 with
    the engine awake), so the engine's resident share is taken off each part of the step: the rollout
    (engine awake) and the rest (engine asleep with rollout.vllm_sleep). Nothing to report on CPU."""

    def __init__(self, device: torch.device, rollout):
        self.cuda, self.rollout = torch.device(device).type == "cuda", rollout
        self.peaks: list[int] = []
        if self.cuda:
            torch.cuda.reset_peak_memory_stats(device)
        self.device = device
        self.engine_awake = getattr(rollout, "engine_bytes", 0)  # the engine is awake while it samples

    def rollout_done(self) -> None:
        self._take(self.engine_awake)

    def end(self) -> None:
        self._take(self.rollout.resident_bytes)

    def _take(self, engine_share: int) -> None:
        if self.cuda:
            self.peaks.append(torch.cuda.max_memory_allocated(self.device) - engine_share)
            torch.cuda.reset_peak_memory_stats(self.device)

    def figures(self) -> dict:
        if not self.cuda:
            return {}
        return {"peak_mem_gb": max(self.peaks) / 1e9, "engine_mem_gb": getattr(self.rollout, "engine_bytes", 0) / 1e9}
