"""Reading an eval step's profile (benchmarks/profile_eval_step.py): kernel time by kind and the GPU's idle time,
from a chrome trace as torch.profiler writes it. The engine itself runs only on a GPU."""

from __future__ import annotations

import gzip
import json

import pytest

from benchmarks import profile_eval_step


def kernel(name: str, ts: float, dur: float) -> dict:
    return {"ph": "X", "cat": "kernel", "name": name, "ts": ts, "dur": dur}


def test_kernels_are_split_by_kind_per_step_and_overlapping_kernels_count_once_toward_busy(tmp_path):
    events = [
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 0.0, "dur": 500.0},  # host op: not GPU time
        kernel("flash_fwd_splitkv_kernel<...>", 0.0, 300.0),
        kernel("nvjet_tst_128x64_64x4_1x2_h_bz_coopA_NNT", 300.0, 400.0),
        kernel("_topk_topp_kernel", 700.0, 100.0),
        kernel("_gumbel_sample_kernel", 750.0, 100.0),  # overlaps the one before by 50 us (another stream)
        kernel("void at::native::elementwise_kernel<...>", 1000.0, 100.0),  # after a 150 us gap: host time
        # the second step, the same kernels
        kernel("flash_fwd_splitkv_kernel<...>", 1100.0, 300.0),
        kernel("nvjet_tst_128x64_64x4_1x2_h_bz_coopA_NNT", 1400.0, 400.0),
        kernel("_topk_topp_kernel", 1800.0, 100.0),
        kernel("_gumbel_sample_kernel", 1900.0, 100.0),
        kernel("void at::native::elementwise_kernel<...>", 2000.0, 100.0),
    ]
    path = tmp_path / "engine.pt.trace.json.gz"
    with gzip.open(path, "wt") as handle:
        json.dump({"traceEvents": events}, handle)
    split = profile_eval_step.kernel_split(profile_eval_step.read_trace(path), steps=2)
    assert split["kernel_ms_per_step"] == {"gemm": 0.4, "attention": 0.3, "sampling": 0.2, "other": 0.1}
    assert list(split["kernel_ms_per_step"]) == ["gemm", "attention", "sampling", "other"]  # largest first
    assert split["window_ms_per_step"] == 1.05  # 0 .. 2,100 us over 2 steps
    assert split["gpu_busy_ms_per_step"] == 0.975  # 2,100 less the 150 us gap, the 50 us overlap once
    assert split["gpu_idle_share"] == round(150 / 2100, 3)
    assert next(iter(split["top_kernels_ms_per_step"])).startswith("nvjet")


def test_a_trace_without_gpu_kernels_is_refused_not_read_as_an_idle_gpu():
    with pytest.raises(ValueError, match="no GPU kernels"):
        profile_eval_step.kernel_split([], steps=40)
