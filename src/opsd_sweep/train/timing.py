"""Seconds per named phase of a training step (rollout, teacher, student, loss, backward, optimizer)."""

from __future__ import annotations

import time
from collections import defaultdict
from contextlib import contextmanager

import torch


class PhaseTimer:
    """Adds up seconds per phase.

    On CUDA a phase is timed by two CUDA events on the current stream, and the events are read once,
    when `seconds` is first asked for: no phase boundary waits for the GPU. (A synchronize at every
    boundary drained the queue each time, and the GPU then idled while the host queued the next phase.)
    A phase's time is the stream's time from its first event to its last. It counts the phase's
    kernels and any wait for the host inside it. A phase that returns only once its GPU work is done,
    such as the vLLM rollout handing back finished tokens, leaves the stream idle at its end event and
    reads as its wall time.
    On CPU every phase is wall time.
    """

    def __init__(self, device: torch.device):
        self.cuda = torch.device(device).type == "cuda"
        self._wall: dict[str, float] = defaultdict(float)
        self._events: list[tuple[str, torch.cuda.Event, torch.cuda.Event]] = []
        self._seconds: dict[str, float] | None = None

    @contextmanager
    def __call__(self, phase: str):
        if self.cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            try:
                yield
            finally:
                end.record()
                self._events.append((phase, start, end))
                self._seconds = None
            return
        started = time.perf_counter()
        try:
            yield
        finally:
            self._wall[phase] += time.perf_counter() - started

    @property
    def seconds(self) -> dict[str, float]:
        """Seconds per phase so far (on CUDA this waits for the last timed phase to finish on the GPU)."""
        if not self.cuda:
            return dict(self._wall)
        if self._seconds is None:
            totals: dict[str, float] = defaultdict(float)
            if self._events:
                self._events[-1][2].synchronize()
            for phase, start, end in self._events:
                totals[phase] += start.elapsed_time(end) / 1e3
            self._seconds = dict(totals)
        return self._seconds


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
