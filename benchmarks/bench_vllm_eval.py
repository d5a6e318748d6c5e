"""The evaluator's vllm backend for real: data-parallel engines serving a LoRA adapter, vs the hf
backend (static cache), on a randomly initialised Qwen3-1.7B-shaped model.

    python -m benchmarks.bench_vllm_eval --work /tmp/vbench --out $OUT [--backends vllm,hf]

Builds (once, under --work) the model dir with an offline-trained tokenizer, a PEFT LoRA adapter
(r 64, the trainer's target modules, non-zero B so it changes outputs) and 30 synthetic problems,
then runs opsd_sweep.evaluate.evaluator.evaluate on every GPU in CUDA_VISIBLE_DEVICES and prints
tokens/s per backend. Each eval.json is copied to --out for a schema check.
"""

from __future__ import annotations

import argparse
import json
import shutil
import time
from pathlib import Path

from opsd_sweep.testing.run_config import composed_run_config

QWEN3_1P7B = dict(hidden_size=2048, num_hidden_layers=28, num_attention_heads=16, num_key_value_heads=8,
                  head_dim=128, intermediate_size=6144, vocab_size=151936, tie_word_embeddings=True)
TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


TINY = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
            intermediate_size=128, vocab_size=2048, tie_word_embeddings=True)


def build_assets(work: Path, tiny: bool, max_positions: int = 4096) -> tuple[Path, Path, Path]:
    """The model dir (random weights, offline tokenizer), a LoRA adapter and 30 problems, built once
    under `work`; rebuilt when the saved model's max_position_embeddings is not `max_positions`."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import Qwen3Config, Qwen3ForCausalLM

    from opsd_sweep.tiny import build_tokenizer

    model_dir, adapter_dir, problems = work / "model", work / "adapter", work / "problems.jsonl"
    if ((adapter_dir / "adapter_config.json").exists()
            and json.loads((model_dir / "config.json").read_text())["max_position_embeddings"] == max_positions):
        return model_dir, adapter_dir, problems
    rows = [{"id": f"q{i:02d}", "problem": f"Compute {i + 3} * {i + 7} + {2 * i}.",
             "answer": str((i + 3) * (i + 7) + 2 * i)} for i in range(30)]
    problems.parent.mkdir(parents=True, exist_ok=True)
    problems.write_text("".join(json.dumps(r) + "\n" for r in rows))
    tokenizer = build_tokenizer([r["problem"] for r in rows] * 4 + ["Reason step by step \\boxed{answer}"], 2048)
    torch.manual_seed(0)
    device = "cpu" if tiny else "cuda"
    config = Qwen3Config(**(TINY if tiny else QWEN3_1P7B), max_position_embeddings=max_positions, pad_token_id=tokenizer.pad_token_id,
                         eos_token_id=tokenizer.eos_token_id, bos_token_id=None, torch_dtype="bfloat16")
    with torch.device(device):
        model = Qwen3ForCausalLM(config).to(torch.float32 if tiny else torch.bfloat16)
    model.save_pretrained(model_dir)
    tokenizer.save_pretrained(model_dir)
    peft_model = get_peft_model(model, LoraConfig(r=64, lora_alpha=128, target_modules=TARGETS, task_type="CAUSAL_LM"))
    with torch.no_grad():
        for name, param in peft_model.named_parameters():
            if "lora_B" in name:
                param.normal_(0, 0.02)
    peft_model.save_pretrained(adapter_dir)
    del model, peft_model
    torch.cuda.empty_cache()  # the engines run in their own processes: leave them the GPU
    return model_dir, adapter_dir, problems


def run_backend(backend: str, model_dir: Path, adapter_dir: Path, problems: Path, work: Path, args) -> dict:
    from opsd_sweep.evaluate.evaluator import evaluate

    overrides = ["model.dtype=float32"] if args.tiny else []
    overrides += ["hydra/launcher=basic", f"model.path={model_dir}", "model.name=qwen3-1.7b-random", f"eval.path={problems}",
                 "eval.name=synthetic30", "eval.id_field=id", f"eval.n_samples={args.samples}",
                 f"eval.max_new_tokens={args.new_tokens}", f"eval.backend={backend}", "eval.thinking=false",
                 f"eval.batch_size={args.batch}", "eval.hf_cache=static", "eval.gpu_memory_utilization=0.6",
                 f"eval.max_model_len={args.new_tokens + 256}", f"eval.shard_size={args.shard}"]
    run = composed_run_config(overrides)
    eval_dir = work / f"eval-{backend}"
    shutil.rmtree(eval_dir, ignore_errors=True)
    started = time.monotonic()
    result = evaluate(run, adapter_dir, eval_dir)
    wall = time.monotonic() - started
    tokens = sum(s["n_tokens"] for p in result["problems"] for s in p["samples"])
    row = {"backend": backend, "engines": result["timing"]["engines"], "samples": len(result["problems"]) * args.samples,
           "tokens": tokens, "wall_s": round(wall, 1), "generation_s": result["timing"]["generation_seconds"],
           "tokens_per_s_wall": round(tokens / wall, 1), "metrics": result["metrics"]["avg_at_n"]}
    print(json.dumps(row), flush=True)
    shutil.copy(eval_dir / "eval.json", Path(args.out) / f"eval_{backend}.json")
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work", default="/tmp/vbench")
    parser.add_argument("--out", default=".")
    parser.add_argument("--backends", default="vllm,hf")
    parser.add_argument("--samples", type=int, default=12)
    parser.add_argument("--new-tokens", type=int, default=512)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--shard", type=int, default=12)
    parser.add_argument("--tiny", action="store_true", help="CPU smoke test: tiny shapes, model.dtype=float32")
    args = parser.parse_args()
    work = Path(args.work)
    Path(args.out).mkdir(parents=True, exist_ok=True)  # written only after minutes of generation
    started = time.monotonic()
    assets = build_assets(work, args.tiny)
    print(f"assets ready in {time.monotonic() - started:.1f}s", flush=True)
    rows = [run_backend(b, *assets, work, args) for b in args.backends.split(",")]
    (Path(args.out) / "bench_vllm_eval.json").write_text(json.dumps(rows, indent=2))
    for row in rows:
        print(f"{row['backend']:>5}: {row['engines']} engine(s) {row['tokens']} tokens in {row['wall_s']}s wall "
              f"(generation {row['generation_s']}s) = {row['tokens_per_s_wall']} tokens/s", flush=True)


if __name__ == "__main__":
    main()
