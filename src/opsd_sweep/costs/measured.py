"""What a cycle of the 1.7B recipe costs on each GPU kind, as measured (BENCHMARKS.md, benchmarks/measured/).

A run's GPU-seconds are its training steps x the steady step, plus its eval samples priced by the step model
fitted to a traced real-length eval part on that GPU (decision_model.CostModel: a sample of n tokens after a
prompt of P costs n a / C + b (P n + n (n + 1) / 2)). Every figure names the record it was read from;
tests/benchmarks/test_measured_costs.py checks them against those records.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class GpuCosts:
    kind: str
    train_step_s: float  # the recipe's steady training step (32 prompts x 1,024 tokens)
    train_source: str
    eval_step_s: float  # a: an engine step's fixed part
    eval_s_per_million_kv_tokens: float  # b x 1e6
    concurrency: int  # C: sequences sharing a step's fixed part
    eval_source: str


H200 = GpuCosts(
    "H200", 5.24, "make gpu-check on f2ccf53 (2026-12-04): the cold cycle's steady step",
    0.005556088741069245, 0.026959504991876593, 64,
    "eval_step_model_2026-12-04_published_part.json: a 96-request part at the published lengths on the cycle's "
    "engine (LoRARequest), 64 sequences decoding together",
)
# No training step was measured on an H100 (its only gpu-check ran out of memory in training, 2026-12-05), so the
# H100's training part is the H200's step: an underestimate (the H100 has 0.7x the H200's memory bandwidth).
# C is the concurrency at which the step model gives the 360-sample projection of the same record (4,250.5 s at the
# published lengths): its KV cache (330,544 tokens) holds ~18 sequences of 18k tokens, not the H200's 64.
H100 = GpuCosts(
    "H100", 5.24, "the H200's step (make gpu-check on f2ccf53): no H100 training step is measured",
    0.00620672528556316, 0.034235339012347786, 26,
    "eval_step_model_2026-12-05_h100_auto.json: a 96-request part at the published lengths on the cycle's default "
    "path (LoRARequest), C fitted to its 360-sample projection",
)
GPU_COSTS = {costs.kind: costs for costs in (H200, H100)}
