"""Evaluator benchmarks: hf generation throughput and grading throughput.

    # GPU: random-init Qwen3-1.7B shape, fixed lengths (min_new_tokens = max_new_tokens), tokens/s
    python -m benchmarks.bench_eval generation --out gen.json
    # CPU check of the same code path with tiny shapes
    python -m benchmarks.bench_eval generation --tiny --batch-sizes 1,4 --new-tokens 8
    # grading: 360 synthetic completions (AIME-like and MATH-like answers), main thread vs a process pool
    python -m benchmarks.bench_eval grading --samples 360 --workers 0,2

Generation goes through the evaluator's HFEngine (the `hf` backend), so it needs only torch and
transformers (no project config, no tokenizer: random token ids stand in for prompts).
"""

from __future__ import annotations

import argparse
import json
import random
import time
from pathlib import Path

from opsd_sweep.evaluate.engine import Sampling
from opsd_sweep.evaluate.generate import HFEngine

QWEN3_1P7B = dict(hidden_size=2048, num_hidden_layers=28, num_attention_heads=16, num_key_value_heads=8, head_dim=128,
                  intermediate_size=6144, vocab_size=151936, tie_word_embeddings=True)
TINY = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
            intermediate_size=128, vocab_size=512, tie_word_embeddings=True)


class IdsOnly:
    """The three things HFEngine needs from a tokenizer, for a model without one."""

    pad_token_id = 0
    eos_token_id = 1

    def decode(self, ids, skip_special_tokens=True):
        return " ".join(map(str, ids))


def build_model(shape: dict, device: str):
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    config = Qwen3Config(**shape, max_position_embeddings=4096, pad_token_id=0, eos_token_id=1, bos_token_id=None)
    torch.manual_seed(0)
    with torch.device(device):
        model = Qwen3ForCausalLM(config).to(dtype)
    model.generation_config.eos_token_id = 1
    model.generation_config.pad_token_id = 0
    return model


def bench_generation(args) -> list[dict]:
    import torch

    device = "cuda" if torch.cuda.is_available() and not args.tiny else "cpu"
    started = time.monotonic()
    model = build_model(TINY if args.tiny else QWEN3_1P7B, device)
    vocab = model.config.vocab_size
    print(f"model on {device} ({sum(p.numel() for p in model.parameters()) / 1e9:.2f}B params) built in "
          f"{time.monotonic() - started:.1f}s; prompt {args.prompt_len} tokens, {args.new_tokens} forced new tokens",
          flush=True)
    sampling = Sampling(temperature=1.0, top_p=0.95, top_k=-1, max_new_tokens=args.new_tokens,
                        min_new_tokens=args.new_tokens)
    rng = random.Random(0)
    rows, warmed = [], False
    deadline = time.monotonic() + args.budget_s
    print(f"{'cache':8} {'batch':>5} {'first call s':>12} {'timed s':>8} {'tokens/s':>10} {'ms/step':>8}", flush=True)
    for cache in args.caches.split(","):
        for batch in [int(b) for b in args.batch_sizes.split(",")]:
            if time.monotonic() > deadline:
                print(f"{cache:8} {batch:>5} skipped: --budget-s {args.budget_s} spent", flush=True)
                continue
            engine = HFEngine(model, IdsOnly(), sampling, batch_size=batch, cache=cache, device=device)
            prompts = [[rng.randrange(2, vocab) for _ in range(args.prompt_len)] for _ in range(batch)]
            # warm-up call: static cache compiles its decode step for every new batch shape; the dynamic
            # cache needs one warm-up in all (CUDA context, kernels), not one per batch size
            first = _timed(engine, prompts, device) if cache == "static" or not warmed else None
            warmed = warmed or cache == "dynamic"
            timed = _timed(engine, prompts, device)
            first = first or timed
            assert all(s.n_tokens == args.new_tokens for s in timed[1]), "lengths were not fixed"
            tokens = batch * args.new_tokens
            row = {"cache": cache, "batch": batch, "first_call_s": round(first[0], 2), "seconds": round(timed[0], 3),
                   "tokens_per_s": round(tokens / timed[0], 1), "ms_per_step": round(1000 * timed[0] / args.new_tokens, 2)}
            rows.append(row)
            print(f"{cache:8} {batch:>5} {row['first_call_s']:>12.2f} {row['seconds']:>8.3f} {row['tokens_per_s']:>10.1f} "
                  f"{row['ms_per_step']:>8.2f}", flush=True)
    _print_ratios(rows)
    return rows


def _timed(engine: HFEngine, prompts: list[list[int]], device: str):
    import torch

    if device == "cuda":
        torch.cuda.synchronize()
    started = time.monotonic()
    samples = engine.generate(prompts, seeds=range(len(prompts)))
    if device == "cuda":
        torch.cuda.synchronize()
    return time.monotonic() - started, samples


def _print_ratios(rows: list[dict]) -> None:
    by_key = {(r["cache"], r["batch"]): r["tokens_per_s"] for r in rows}
    for (cache, batch), rate in sorted(by_key.items()):
        if cache == "static" and ("dynamic", batch) in by_key:
            print(f"static / dynamic at batch {batch}: {rate / by_key['dynamic', batch]:.1f}x", flush=True)
    for cache in ("dynamic", "static"):
        batches = sorted(b for c, b in by_key if c == cache)
        if len(batches) > 1:
            low, high = batches[0], batches[-1]
            print(f"{cache}: batch {high} / batch {low} = {by_key[cache, high] / by_key[cache, low]:.1f}x tokens/s",
                  flush=True)


def synthetic_completions(n: int, seed: int) -> list[tuple[str, str, str]]:
    """(completion, gold, kind): ~4 kB of reasoning then an answer, in the mix real outputs show."""
    rng = random.Random(seed)
    filler = "We consider the cases carefully and simplify each term. " * 70
    latex = [("\\frac{3}{4}", "0.75"), ("2\\sqrt{2}", "\\sqrt{8}"), ("(0, 1]", "(0,1]"), ("\\frac{\\pi}{2}", "\\pi/2"),
             ("x^2+2x+1", "(x+1)^2"), ("\\{1, 2\\}", "\\{2,1\\}"), ("5\\text{ cm}", "5"), ("50\\%", "50")]
    items = []
    for _ in range(n):
        gold = str(rng.randrange(1000))
        kind = rng.choices(["int-correct", "int-wrong", "latex", "no-box"], [0.5, 0.25, 0.15, 0.1])[0]
        if kind == "int-correct":
            answer = f"\\boxed{{{gold.zfill(3)}}}"
        elif kind == "int-wrong":
            answer = f"\\boxed{{{(int(gold) + 7) % 1000}}}"
        elif kind == "latex":
            pred, gold = rng.choice(latex)
            answer = f"\\boxed{{{pred}}}"
        else:
            answer = "so the answer must be"
        items.append((f"<think>\n{filler}\n</think>\nThe final answer is {answer}", gold, kind))
    return items


def bench_grading(args) -> list[dict]:
    from opsd_sweep.scoring.grade import grade_many

    items = synthetic_completions(args.samples, seed=0)
    pairs = [(text, gold) for text, gold, _ in items]
    rows = []
    for workers in [int(w) for w in args.workers.split(",")]:
        started = time.monotonic()
        grades = grade_many(pairs, timeout=5, workers=workers, progress=False)
        seconds = time.monotonic() - started
        row = {"workers": workers, "samples": len(pairs), "seconds": round(seconds, 3),
               "samples_per_s": round(len(pairs) / seconds, 1),
               "correct": sum(g.correct for g in grades), "formatted": sum(g.formatted for g in grades)}
        rows.append(row)
        print(f"grading {row['samples']} samples, workers={workers}: {row['seconds']:.2f}s = "
              f"{row['samples_per_s']:.1f} samples/s ({row['correct']} correct, {row['formatted']} formatted)",
              flush=True)
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("part", choices=["generation", "grading"])
    parser.add_argument("--tiny", action="store_true", help="tiny model shapes on CPU (a check of the script)")
    parser.add_argument("--batch-sizes", default="1,2,4,8,16,32,64")
    parser.add_argument("--caches", default="dynamic,static", help="hf cache implementations to compare")
    parser.add_argument("--prompt-len", type=int, default=256)
    parser.add_argument("--new-tokens", type=int, default=64)
    parser.add_argument("--budget-s", type=float, default=1e9, help="skip remaining configurations after this")
    parser.add_argument("--samples", type=int, default=360)
    parser.add_argument("--workers", default="0,2", help="grading: 0 = main thread, N = process pool")
    parser.add_argument("--out", type=Path, help="write the rows as JSON here")
    args = parser.parse_args(argv)
    rows = bench_generation(args) if args.part == "generation" else bench_grading(args)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({"part": args.part, "args": {k: str(v) for k, v in vars(args).items()},
                                        "rows": rows}, indent=2))


if __name__ == "__main__":
    main()
