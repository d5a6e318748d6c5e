"""How CUDA runs the training phase's fp32 matmuls (`train.fp32_matmul`).

PEFT keeps the LoRA adapter in fp32 next to a bf16 base model (its autocast_adapter_dtype), so the
adapter's matmuls are the fp32 ones of a training step. In full fp32 ("ieee") cuBLAS runs them on
the CUDA cores: 29% of the GPU time of a micro-batch on an H200 (BENCHMARKS.md, the step's kernels).
"tf32" runs them on the tensor cores with 10-bit mantissa inputs and fp32 accumulation: the inputs
from the bf16 model are exact in TF32, the result is added to a bf16 output, and the weights, the
gradients and AdamW stay fp32. With model.dtype=float32 the setting covers the whole model. Like
train.compile it changes roundings, not the recipe, so it stays out of the run key.

The setting is process-wide in torch, so it holds for the training phase only and is put back after
(a phase worker runs the next cycle's phases in the same process). CPU matmuls do not use it. It goes
through torch's `allow_tf32` flag: torch refuses to read that flag once its newer `fp32_precision`
was set, and other code in this process may read it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch


@contextlib.contextmanager
def fp32_matmul(mode: str) -> Iterator[None]:
    """CUDA fp32 matmuls as `mode` says ("tf32" or "ieee") inside the block, as they were after it."""
    setting = torch.backends.cuda.matmul
    before = setting.allow_tf32
    setting.allow_tf32 = mode == "tf32"
    try:
        yield
    finally:
        setting.allow_tf32 = before
