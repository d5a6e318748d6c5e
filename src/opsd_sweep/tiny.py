"""The tiny offline world: a small Qwen3 built from config, a byte-level BPE tokenizer trained on the
fly, and a synthetic arithmetic task with worked reference solutions.

Everything is saved like a real model directory and a JSONL dataset, so the trainer and evaluator
load it by path exactly as they load Qwen3 and a hub dataset. Nothing touches the network.
"""

from __future__ import annotations

import fcntl
import json
import random
import shutil
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path

from opsd_sweep.config import TinyConfig
from opsd_sweep.runs import atomic_write_text

SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<think>", "</think>"]

# Qwen-style template. enable_thinking=False appends an empty think block, as Qwen3's does. Newlines
# are emitted inside {{- '...' }} because a literal newline before {%- would be trimmed.
CHAT_TEMPLATE = (
    "{%- for message in messages -%}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' -}}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}"
    "{{- '<|im_start|>assistant\\n' -}}"
    "{%- if enable_thinking is defined and enable_thinking is false -%}"
    "{{- '<think>\\n\\n</think>\\n\\n' -}}"
    "{%- endif -%}"
    "{%- endif -%}"
)


# --- synthetic task ----------------------------------------------------------------------------

def make_problem(rng: random.Random) -> dict:
    """One problem 'a + b * c' (or with '-') with a worked solution and an integer answer."""
    a, b, c = rng.randint(2, 60), rng.randint(2, 12), rng.randint(2, 12)
    op = rng.choice(["+", "-"])
    product = b * c
    answer = a + product if op == "+" else a - product
    problem = f"Compute {a} {op} {b} * {c}."
    solution = f"First {b} * {c} = {product}. Then {a} {op} {product} = {answer}. So the answer is \\boxed{{{answer}}}."
    return {"problem": problem, "solution": solution, "answer": str(answer)}


def make_dataset(n: int, seed: int, exclude: set[str] = frozenset()) -> list[dict]:
    """n distinct problems; `exclude` keeps held-out problems out of the training set."""
    rng = random.Random(seed)
    rows, seen = [], set(exclude)
    while len(rows) < n:
        row = make_problem(rng)
        if row["problem"] not in seen:
            seen.add(row["problem"])
            rows.append({"id": f"p{len(rows):04d}", **row})
    return rows


# --- tokenizer and model -----------------------------------------------------------------------

def build_tokenizer(corpus: list[str], vocab_size: int):
    """Byte-level BPE trained on the corpus, wrapped with a Qwen-style chat template."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIAL_TOKENS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(corpus, trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                                   chat_template=CHAT_TEMPLATE)


def build_model(cfg: TinyConfig, vocab_size: int, pad_token_id: int, eos_token_id: int):
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    torch.manual_seed(cfg.seed)
    config = Qwen3Config(
        vocab_size=vocab_size, hidden_size=cfg.hidden_size, intermediate_size=cfg.intermediate_size,
        num_hidden_layers=cfg.num_layers, num_attention_heads=cfg.num_heads,
        num_key_value_heads=cfg.num_kv_heads, head_dim=cfg.head_dim, max_position_embeddings=1024,
        tie_word_embeddings=True, pad_token_id=pad_token_id, eos_token_id=eos_token_id,
        bos_token_id=None,
    )
    return Qwen3ForCausalLM(config)


def _corpus(rows: list[dict], tokenizer_free_template: str) -> list[str]:
    texts = []
    for row in rows:
        texts += [row["problem"], row["solution"], tokenizer_free_template.format(**row)]
    return texts


# --- assets on disk ----------------------------------------------------------------------------

@contextmanager
def _file_lock(path: Path):
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def ensure_tiny_assets(cfg: TinyConfig) -> Path:
    """Build model/, train.jsonl and eval.jsonl under cfg.dir unless they exist with these settings.

    Safe under concurrency: builders serialise on a lock file and build into a temp dir first.
    """
    root = Path(cfg.dir)
    settings = json.dumps(asdict(cfg) | {"dir": None, "format": 1}, sort_keys=True)
    with _file_lock(root.parent / f".{root.name}.lock"):
        marker = root / "settings.json"
        if marker.exists() and marker.read_text() == settings:
            return root
        tmp = root.parent / f".{root.name}.building"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        _build(cfg, tmp)
        atomic_write_text(tmp / "settings.json", settings)
        shutil.rmtree(root, ignore_errors=True)
        tmp.rename(root)
    return root


def _build(cfg: TinyConfig, out: Path) -> None:
    eval_rows = make_dataset(cfg.n_eval, seed=cfg.seed + 1)
    train_rows = make_dataset(cfg.n_train, seed=cfg.seed, exclude={r["problem"] for r in eval_rows})
    for name, rows in (("train.jsonl", train_rows), ("eval.jsonl", eval_rows)):
        atomic_write_text(out / name, "".join(json.dumps(r) + "\n" for r in rows))
    corpus = _corpus(train_rows + eval_rows, "{problem} Reason step by step and give the final answer as \\boxed{{answer}}.")
    corpus += ["<think>\n\n</think>\n\n", "\n\n", "reference", "Now solve the problem yourself"]
    tokenizer = build_tokenizer(corpus, cfg.vocab_size)
    model = build_model(cfg, len(tokenizer), tokenizer.pad_token_id, tokenizer.eos_token_id)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.save_pretrained(out / "model")
    tokenizer.save_pretrained(out / "model")
