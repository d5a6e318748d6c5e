"""What eval.merge_lora=true adds to a cycle before its eval: the evaluator's fp32 merge of the adapter into the
base model and the save of the merged model dir (evaluator.merge_adapter), on this machine's CPU.

    python3 -m benchmarks.bench_merge --work /tmp/merge [--rank 64] [--out DIR]

The random-init world of the Qwen3-1.7B shape (opsd_sweep.random_world) and an adapter of the recipe's shape
(conf/recipe/paper.yaml: rank 64, alpha 128, all seven projections), with random A and B so that every
weight moves. Prints the seconds and the weights the merge changes; writes OUT/bench_merge.json.
"""

from __future__ import annotations

import argparse
import json
import shutil
import time
from pathlib import Path

import torch

from opsd_sweep import random_world
from opsd_sweep.evaluate.evaluator import merge_adapter
from opsd_sweep.evaluate.engine import EngineSpec, Sampling

PROJECTIONS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


def recipe_adapter(model_dir: Path, out: Path, rank: int) -> None:
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.bfloat16)
    lora = LoraConfig(r=rank, lora_alpha=2 * rank, target_modules=PROJECTIONS, init_lora_weights=False)
    get_peft_model(model, lora).save_pretrained(out)


def main() -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, required=True)
    parser.add_argument("--rank", type=int, default=64)
    parser.add_argument("--out", type=Path, default=None, help="folder for bench_merge.json (default: --work)")
    args = parser.parse_args()
    model_dir = random_world.build(args.work / "world") / "model"
    adapter = args.work / f"adapter-r{args.rank}"
    if not (adapter / "adapter_config.json").exists():
        recipe_adapter(model_dir, adapter, args.rank)
    spec = EngineSpec(backend="vllm", model_path=str(model_dir), tokenizer_path=str(model_dir),
                      adapter_path=str(adapter), dtype="bfloat16", attn_implementation="sdpa",
                      sampling=Sampling(temperature=1.0, top_p=1.0, top_k=-1, max_new_tokens=1, min_new_tokens=0),
                      batch_size=1, max_num_seqs=1, max_in_flight=1, hf_cache="dynamic", tensor_parallel_size=1,
                      gpu_memory_utilization=0.5, max_model_len=1024, seed=0)
    merged = args.work / "merged"
    shutil.rmtree(merged, ignore_errors=True)  # a timing run never reuses an earlier merge
    started = time.monotonic()
    merge_adapter(spec, merged)
    record = {"merge_s": round(time.monotonic() - started, 1), "cpu_threads": torch.get_num_threads(),
              "rank": args.rank, "model": "random-init Qwen3-1.7B shape, bf16"}
    out = args.out or args.work
    out.mkdir(parents=True, exist_ok=True)
    (out / "bench_merge.json").write_text(json.dumps(record, indent=1))
    print(f"[bench_merge] {record}", flush=True)
    return record


if __name__ == "__main__":
    main()
