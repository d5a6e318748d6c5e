"""What per-request seeds cost a vLLM decode step (issue 23: the rollout's sampler).

    export PYTHONPATH=/tmp/site:$PWD/src NCCL_NVLS_ENABLE=0
    python3 -m benchmarks.bench_vllm_sampling --work /tmp/gc --out $OUT [--adapter CHECKPOINT_DIR]

A request with its own `seed` gets its own torch.Generator in vLLM's sampler, which then leaves its
batched top-k/top-p path for a loop over the seeded requests (vllm/v1/sample/ops/topk_topp_sampler.py).
The trainer seeds every rollout request that way today. This times the same generate call, on one
engine set up as the trainer's colocated rollout engine (in process, LoRA enabled, 0.5 of the GPU), with
per-request seeds and with none (the process's CUDA generator seeded once before the call), at the
rollout's shape (32 x 1,024 tokens) and at an eval-like batch (256 x 256 tokens), and checks that the
unseeded call repeats itself token for token when the generator is seeded the same way. Random
weights never emit EOS, so every request runs to its max_tokens. Writes vllm_sampling.json.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import torch

from opsd_sweep import random_world
from opsd_sweep.train.rollout_vllm import set_launcher_env

SHAPES = ((32, 1024), (256, 256))  # (requests, tokens each): the rollout's step, an eval-like batch


def timed_generate(llm, prompts, tokens: int, seeded: bool, lora_request) -> tuple[float, list[list[int]]]:
    from vllm import SamplingParams
    from vllm.inputs import TokensPrompt

    params = [SamplingParams(temperature=1.1, top_p=0.95, top_k=20, max_tokens=tokens, ignore_eos=True,
                             seed=i if seeded else None, detokenize=False) for i in range(len(prompts))]
    if not seeded:
        torch.cuda.manual_seed(1234)
    torch.cuda.synchronize()
    start = time.perf_counter()
    outputs = llm.generate([TokensPrompt(prompt_token_ids=p) for p in prompts], params, use_tqdm=False,
                           lora_request=lora_request)
    torch.cuda.synchronize()
    return time.perf_counter() - start, [list(o.outputs[0].token_ids) for o in outputs]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, required=True, help="the random world is built (or found) here")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--adapter", type=Path, default=None, help="a checkpoint's adapter dir: also time it as a LoRARequest")
    args = parser.parse_args()
    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    world = random_world.build(args.work / "world")
    set_launcher_env(torch.device("cuda", 0))
    from vllm import LLM
    from vllm.lora.request import LoRARequest

    started = time.perf_counter()
    llm = LLM(model=str(world / "model"), dtype="bfloat16", tensor_parallel_size=1,
              distributed_executor_backend="external_launcher", gpu_memory_utilization=0.5, enable_lora=True,
              max_lora_rank=64, max_loras=1, seed=0, max_num_seqs=256, max_model_len=4096)
    report = {"gpu": torch.cuda.get_device_name(0), "engine_start_s": round(time.perf_counter() - started, 1), "runs": []}
    prompt = list(range(10, 310))  # 300 token ids of the world's vocabulary
    adapters = [None] + ([LoRARequest("checkpoint", 1, str(args.adapter))] if args.adapter else [])
    for lora in adapters:
        for requests, tokens in SHAPES:
            prompts = [[(t + i) % 900 + 10 for t in prompt] for i in range(requests)]  # distinct: no prefix sharing
            for seeded in (True, False):
                timed_generate(llm, prompts, 16, seeded, lora)  # warm-up: sampler kernels for this batch
                seconds, ids = timed_generate(llm, prompts, tokens, seeded, lora)
                row = {"requests": requests, "tokens": tokens, "per_request_seeds": seeded,
                       "adapter": lora is not None, "seconds": round(seconds, 3),
                       "ms_per_decode_step": round(1000 * seconds / tokens, 2)}
                if not seeded:
                    _, again = timed_generate(llm, prompts, tokens, seeded, lora)
                    row["repeats_token_for_token"] = again == ids
                report["runs"].append(row)
                print(json.dumps(row), flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "vllm_sampling.json").write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
