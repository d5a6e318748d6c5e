"""A randomly initialised model of a real Qwen3 shape, with an offline tokenizer and datasets whose
rendered prompts have the recipe's lengths: what `make gpu-check` and the GPU benchmarks run on a
machine without network or weights. Random weights never emit EOS, so every completion runs to its cap.

    python -m opsd_sweep.random_world DIR [--shape qwen3-1.7b]   # DIR/model, DIR/train.jsonl, DIR/eval.jsonl
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

from opsd_sweep.run.rundir import atomic_write_json, atomic_write_text, read_json
from opsd_sweep.tiny import build_tokenizer

# (hidden, layers, heads, kv heads, head_dim, intermediate) of the published checkpoints' configs
SHAPES = {"qwen3-1.7b": (2048, 28, 16, 8, 128, 6144), "qwen3-4b": (2560, 36, 32, 8, 128, 9728),
          "qwen3-8b": (4096, 36, 32, 8, 128, 12288)}
VOCAB, CONTEXT = 151_936, 40_960
TEMPLATE_TOKENS = 40  # the chat template and the recipe's instructions around a problem


def text_of_length(tokenizer, words: list[str], rng: random.Random, n_tokens: int) -> str:
    """Random words, as many as fit in n_tokens tokens (binary search over the word count)."""
    pool = rng.choices(words, k=2 * n_tokens)
    low, high = 1, len(pool)
    while low < high:
        mid = (low + high + 1) // 2
        fits = len(tokenizer(" ".join(pool[:mid]))["input_ids"]) <= n_tokens
        low, high = (mid, high) if fits else (low, mid - 1)
    return " ".join(pool[:low])


def build(root: Path, shape: str = "qwen3-1.7b", n_train: int = 64, n_eval: int = 30, student_prompt: int = 300,
          teacher_prompt: int = 1500) -> Path:
    """Write root/model (random weights, bf16), root/train.jsonl and root/eval.jsonl once; reuse them after."""
    import torch
    from transformers import AutoModelForCausalLM, Qwen3Config

    settings = {"shape": shape, "n_train": n_train, "n_eval": n_eval, "student_prompt": student_prompt,
                "teacher_prompt": teacher_prompt}
    marker = root / "world.json"
    if marker.exists() and read_json(marker) == settings:
        return root
    if shape not in SHAPES:
        raise ValueError(f"shape {shape!r} is not one of {sorted(SHAPES)}")
    rng = random.Random(2)
    words = ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(3, 8))) for _ in range(400)]
    tokenizer = build_tokenizer([" ".join(rng.choices(words, k=50)) for _ in range(200)], vocab_size=1000)
    hidden, layers, heads, kv_heads, head_dim, intermediate = SHAPES[shape]
    config = Qwen3Config(vocab_size=VOCAB, hidden_size=hidden, intermediate_size=intermediate,
                         num_hidden_layers=layers, num_attention_heads=heads, num_key_value_heads=kv_heads,
                         head_dim=head_dim, max_position_embeddings=CONTEXT, rope_theta=1e6, tie_word_embeddings=True,
                         bos_token_id=None, eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id)
    torch.manual_seed(0)
    with torch.device("cuda" if torch.cuda.is_available() else "cpu"):
        model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
    model.generation_config.eos_token_id = [tokenizer.eos_token_id, tokenizer.pad_token_id]
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.save_pretrained(root / "model")
    tokenizer.save_pretrained(root / "model")
    train = [{"problem": text_of_length(tokenizer, words, rng, student_prompt - TEMPLATE_TOKENS),
              "solution": text_of_length(tokenizer, words, rng, teacher_prompt - student_prompt - TEMPLATE_TOKENS)}
             for _ in range(n_train)]
    evaluation = [{"id": f"p{i}", "problem": text_of_length(tokenizer, words, rng, 100), "answer": str(i)}
                  for i in range(n_eval)]
    for name, rows in (("train.jsonl", train), ("eval.jsonl", evaluation)):
        atomic_write_text(root / name, "".join(json.dumps(row) + "\n" for row in rows))
    atomic_write_json(marker, settings)
    return root


def cli_overrides(root: Path, shape: str = "qwen3-1.7b") -> list[str]:
    """The `python -m opsd_sweep` overrides that train and evaluate on this world."""
    return [f"model.path={root / 'model'}", f"model.name=random-{shape}", "data=local", f"data.path={root / 'train.jsonl'}",
            "eval=local", f"eval.path={root / 'eval.jsonl'}", "eval.id_field=id", "eval.name=random-30"]


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("root", type=Path)
    parser.add_argument("--shape", default="qwen3-1.7b", choices=sorted(SHAPES))
    args = parser.parse_args()
    print(build(args.root, args.shape))
