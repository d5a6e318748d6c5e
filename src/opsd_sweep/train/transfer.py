"""Host-to-device copies that do not wait for the GPU.

A plain copy from pageable host memory may wait for every kernel queued before it, so the GPU runs dry
while the host prepares what comes next. Staged through pinned memory, the copy is queued like a kernel.
"""

from __future__ import annotations

import torch


def to_device(tensor: torch.Tensor, device) -> torch.Tensor:
    """`tensor` on `device`; a CPU tensor goes to a GPU through pinned memory, without blocking."""
    device = torch.device(device)
    if device.type != "cuda" or tensor.is_cuda:
        return tensor.to(device)
    return tensor.pin_memory().to(device, non_blocking=True)
