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
