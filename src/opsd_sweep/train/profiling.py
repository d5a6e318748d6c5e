"""Where a training step's time goes: torch.profiler's table of one call, kernels by their own GPU time
(`train.profile_step`, benchmarks/bench_train.py --profile). On CPU the table lists the CPU ops."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import torch

T = TypeVar("T")


def profiled(fn: Callable[[], T], rows: int = 40, sort_by: str = "self_cuda_time_total") -> tuple[T, str]:
    """fn's result and the profiler's table of that call (the `rows` largest entries by `sort_by`)."""
    from torch.profiler import ProfilerActivity, profile

    cuda = torch.cuda.is_available()
    with profile(activities=[ProfilerActivity.CPU, *([ProfilerActivity.CUDA] if cuda else [])]) as prof:
        result = fn()
        if cuda:
            torch.cuda.synchronize()
    table = prof.key_averages().table(sort_by=sort_by if cuda else "self_cpu_time_total", row_limit=rows,
                                      max_name_column_width=60)
    return result, table
