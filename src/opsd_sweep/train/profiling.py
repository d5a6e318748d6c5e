"""Where a training step's time goes: torch.profiler's table of one call, kernels by their own GPU time
(`train.profile_step`, benchmarks/bench_train.py --profile). On CPU the table lists the CPU ops."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

import torch

T = TypeVar("T")


def profiled(fn: Callable[[], T], rows: int = 40, sort_by: str = "self_cuda_time_total") -> tuple[T, str]:
    """fn's result and the profiler's table of that call (the `rows` largest entries by `sort_by`)."""
    from torch.profiler import ProfilerActivity, profile

    cuda = torch.cuda.is_available()
    started = time.perf_counter()
    with profile(activities=[ProfilerActivity.CPU, *([ProfilerActivity.CUDA] if cuda else [])]) as prof:
        result = fn()
        if cuda:
            torch.cuda.synchronize()
    wall = time.perf_counter() - started
    table = prof.key_averages().table(sort_by=sort_by if cuda else "self_cpu_time_total", row_limit=rows,
                                      max_name_column_width=60)
    if cuda:  # the GPU's idle share is host overhead: launches, scheduling, Python between kernels
        busy = sum(e.device_time_total for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA) / 1e6
        table = f"GPU kernels {busy:.3f} s of {wall:.3f} s wall ({busy / wall:.0%} busy, under the profiler)\n" + table
    return result, table
