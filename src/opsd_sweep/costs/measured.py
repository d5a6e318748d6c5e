"""What a cycle of the 1.7B recipe costs on each GPU kind, as measured (BENCHMARKS.md, benchmarks/measured/).

A run's GPU-seconds are its training steps x the steady step, plus its eval samples priced by the step model
fitted to a traced real-length eval part on that GPU (decision_model.CostModel: a sample of n tokens after a
prompt of P costs n a / C + b (P n + n (n + 1) / 2)). Every figure names the record it was read from;
tests/costs/test_eval_costs.py checks them against those records.
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
    train_step_floor_s: float  # the steady step with every kernel at its floor, the samples unchanged (PROJECTED)
    train_floor_source: str


H200 = GpuCosts(
    "H200", 5.24, "make gpu-check on f2ccf53 (2026-12-04): the cold cycle's steady step",
    0.005556088741069245, 0.026959504991876593, 64,
    "eval_step_model_2026-12-04_published_part.json: a 96-request part at the published lengths on the cycle's "
    "engine (LoRARequest), 64 sequences decoding together",
    3.45, "2026-12-06_gpu_check_h100_kv_sized.md: the H100 profile's floors at the H200's 4.3 TB/s (rollout ~1.8 s "
    "beside its gpu-checks' 1.64-1.68 s training part), PROJECTED",
)
# The H100's eval is the cycle's default path for a recipe-length adapter: an engine of its own at 0.9 of the GPU
# serving merged weights. A 100-step adapter (lr 2e-5) passed the merge check on 2026-12-06 (0.0189 nats against
# its effect 0.605); a 3-step one fails it and is served as a LoRARequest instead (1.39x its floor, not 1.25x).
# C is the concurrency at which the step model gives the record's own 360-sample projection (3,366.9 s).
H100 = GpuCosts(
    "H100", 5.76, "benchmarks/gpu_session.sh merge_100 on a394880 (2026-12-06): the median step of a 100-step cycle",
    0.003679087189784381, 0.03623086809119496, 45,
    "eval_step_model_2026-12-05_h100_auto_without_adapter_share0.9.json: a 96-request part at the published lengths "
    "on an engine of its own at 0.9 of the GPU, merged weights, C fitted to its 360-sample projection",
    4.3, "2026-12-06_gpu_check_h100_kv_sized.md: rollout at its kernels' floor (~2.5 s) + training 1.76 s, PROJECTED",
)
GPU_COSTS = {costs.kind: costs for costs in (H200, H100)}
# what one decode step reads besides the KV cache: Qwen3-1.7B's 1.72 B parameters in bf16, the LM head tied to the
# embedding (read once a step, for the logits). At a GPU's copy rate it is the floor of an engine step's fixed part.
WEIGHT_BYTES = 3.44e9
