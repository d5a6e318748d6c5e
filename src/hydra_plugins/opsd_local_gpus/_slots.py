"""The resources one machine lends to concurrent jobs: GPU ids, CPU-job slots, network ports."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Sequence
from typing import Any, Optional


def discover_gpus(configured: Sequence[Any] | None) -> list[str]:
    """GPU ids to pack onto: the configured list, else CUDA_VISIBLE_DEVICES, else every GPU torch sees."""
    if configured is not None:
        return [str(g) for g in configured]
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        return [g.strip() for g in visible.split(",") if g.strip()]
    # Ask torch in a child process: the launcher forks its workers and must not hold a CUDA context.
    proc = subprocess.run([sys.executable, "-c", "import torch; print(torch.cuda.device_count())"],
                          capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:
        raise RuntimeError(f"could not count GPUs with torch: {proc.stderr.strip()[-500:]}; "
                           "set hydra.launcher.gpus=[0,1,...] or CUDA_VISIBLE_DEVICES")
    return [str(i) for i in range(int(proc.stdout.strip()))]


def max_parallel_problems(max_parallel: int) -> list[str]:
    """What is wrong with hydra.launcher.max_parallel, with the fix; empty when it can run jobs."""
    if max_parallel >= 1:
        return []
    return [f"hydra.launcher.max_parallel={max_parallel} must be >= 1: it is how many CPU-only jobs run at once "
            "(GPU jobs are limited by the free GPUs); e.g. hydra.launcher.max_parallel=4"]


class Slots:
    """Which GPUs are free and how many CPU-only jobs run; a job starts when its share is free."""

    def __init__(self, gpus: Sequence[str], max_parallel: int):
        if problems := max_parallel_problems(max_parallel):
            raise ValueError(problems[0])
        self.free_gpus = list(gpus)
        self.cpu_free = max_parallel

    def take(self, n_gpus: int) -> list[str] | None:
        """The GPU ids for a job needing n_gpus (an empty list for a CPU-only job), or None if it must wait."""
        if n_gpus == 0:
            if self.cpu_free == 0:
                return None
            self.cpu_free -= 1
            return []
        if len(self.free_gpus) < n_gpus:
            return None
        taken, self.free_gpus = self.free_gpus[:n_gpus], self.free_gpus[n_gpus:]
        return taken

    def give(self, gpus: list[str]) -> None:
        if gpus:
            self.free_gpus.extend(gpus)
        else:
            self.cpu_free += 1


def reserve_ports(in_use: set[int], count: int) -> list[int]:
    """`count` free TCP ports that no other running job of this sweep holds (the OS picks them)."""
    ports: list[int] = []
    while len(ports) < count:
        with socket.socket() as sock:
            sock.bind(("", 0))
            port = sock.getsockname()[1]
        if port not in in_use and port not in ports:
            ports.append(port)
    return ports
