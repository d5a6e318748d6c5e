"""The tiny offline world: a small Qwen3 built from config, a byte-level BPE tokenizer trained on the
fly, a synthetic arithmetic task with worked reference solutions, and a supervised warm start
(opsd_sweep.warm_start) that makes the model a competent teacher and a fallible student.

Everything is saved like a real model directory and a JSONL dataset, so the trainer and evaluator
load it by path exactly as they load Qwen3 and a hub dataset. Nothing touches the network.
"""

from __future__ import annotations

import fcntl
import json
import random
import re
import shutil
import time
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path

from opsd_sweep.config import RunConfig, TinyConfig, WarmStartConfig, template_problems
from opsd_sweep.run.rundir import atomic_write_json, atomic_write_text

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
# Problems 'a+b*c'. The reference solution multiplies first; the classic slip evaluates left to
# right, (a+b)*c (never the same answer, since c >= 2). Numbers are written without spaces, so each
# is one and the same token wherever it appears, and every solution has the same length.

ADDENDS = range(1, 10)   # a
FACTORS = range(2, 6)    # b and c


def worked_solution(a: int, b: int, c: int, precedence: bool) -> tuple[str, int]:
    """The step-by-step solution text and its answer, multiplying first or (the slip) left to right."""
    if precedence:
        first, answer = b * c, a + b * c
        steps = f"{b}*{c}={first},{a}+{first}={answer}."
    else:
        first, answer = a + b, (a + b) * c
        steps = f"{a}+{b}={first},{first}*{c}={answer}."
    return f"{steps} \\boxed{{{answer}}}", answer


def make_problem(a: int, b: int, c: int) -> dict:
    solution, answer = worked_solution(a, b, c, precedence=True)
    slip, _ = worked_solution(a, b, c, precedence=False)
    return {"problem": f"{a}+{b}*{c}=?", "solution": solution, "answer": str(answer), "slip_solution": slip}


def all_problems() -> list[dict]:
    return [make_problem(a, b, c) for a in ADDENDS for b in FACTORS for c in FACTORS]


def arithmetic_facts() -> list[str]:
    """Every one-step fact ('5*5=25') in the task's solutions, correct or slipped: the tables the model knows."""
    steps = (re.findall(r"\d+[+*]\d+=\d+", p["solution"] + p["slip_solution"]) for p in all_problems())
    return sorted({fact for found in steps for fact in found})


def make_datasets(n_train: int, n_eval: int, seed: int) -> tuple[list[dict], list[dict]]:
    """Disjoint train and held-out eval problems drawn from all the distinct problems."""
    problems = all_problems()
    if n_train + n_eval > len(problems):
        raise ValueError(f"tiny.n_train={n_train} + tiny.n_eval={n_eval} exceeds the {len(problems)} distinct "
                         "tiny problems; lower one of them")
    random.Random(seed).shuffle(problems)
    eval_rows = [{"id": f"e{i:03d}", **p} for i, p in enumerate(problems[:n_eval])]
    train_rows = [{"id": f"t{i:03d}", **p} for i, p in enumerate(problems[n_eval:n_eval + n_train])]
    return train_rows, eval_rows


def locked_problems() -> list[dict]:
    """The locked problems (conf/eval/tiny_locked.yaml, python -m opsd_sweep.confirm): problems a+b*c outside
    all_problems() (b from 6 to 14, so disjoint from the train and held-out sets, and never trained on) whose every
    reference step is a fact the tiny model knows (arithmetic_facts: 'b*c' and 'a+first' seen in other
    problems' solutions or slips), so it can solve them with the skill OPSD trains. Deterministic: a pure
    function of the task's tables."""
    known = set(arithmetic_facts())
    rows = []
    for a in ADDENDS:
        for b in range(max(FACTORS) + 1, 15):
            for c in FACTORS:
                problem = make_problem(a, b, c)
                if all(step in known for step in re.findall(r"\d+[+*]\d+=\d+", problem["solution"])):
                    rows.append({"id": f"l{len(rows):03d}", **problem})
    return rows


def write_locked_set(root: Path) -> None:
    """locked.jsonl in a tiny world's dir (its model, train and held-out files are left as they are)."""
    atomic_write_text(root / "locked.jsonl", "".join(json.dumps(r) + "\n" for r in locked_problems()))


# --- tokenizer and model -----------------------------------------------------------------------

def train_bpe(corpus: list[str], vocab_size: int):
    """Byte-level BPE (a tokenizers.Tokenizer) trained on the corpus."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIAL_TOKENS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)  # its bars: 12 lines in a terminal, 3 blank in a log
    tok.train_from_iterator(corpus, trainer)
    return tok


def build_tokenizer(corpus: list[str], vocab_size: int):
    """Byte-level BPE trained on the corpus, wrapped with a Qwen-style chat template."""
    from transformers import PreTrainedTokenizerFast

    return PreTrainedTokenizerFast(tokenizer_object=train_bpe(corpus, vocab_size), eos_token="<|im_end|>",
                                   pad_token="<|endoftext|>", chat_template=CHAT_TEMPLATE)


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


def tokenizer_corpus(rows: list[dict], cfg: WarmStartConfig) -> list[str]:
    """Every text the tiny model will see: both prompt views, both solution styles, the template parts."""
    texts = ["user\n", "assistant\n", "<think>\n\n</think>\n\n", *arithmetic_facts()]
    for row in rows:
        texts += [cfg.student_prompt.format(problem=row["problem"]),
                  cfg.teacher_prompt.format(problem=row["problem"], solution=row["solution"]),
                  row["solution"], row["slip_solution"]]
    return texts


def check_numbers_are_single_tokens(tokenizer, rows: list[dict]) -> None:
    """Constant-length solutions keep the tiny task learnable in seconds; fail loudly if BPE split a number."""
    lengths = solution_lengths(lambda text: tokenizer(text, add_special_tokens=False)["input_ids"], rows)
    if len(lengths) != 1:
        raise ValueError(f"tiny tokenizer: solutions tokenize to lengths {sorted(lengths)}, not one length; "
                         "raise tiny.vocab_size so every number is a single token")


def solution_lengths(encode, rows: list[dict]) -> set[int]:
    """The token counts of every solution and slip (one count when every number is a single token)."""
    return {len(encode(r[key])) for r in rows for key in ("solution", "slip_solution")}


# --- settings checked before the world is built --------------------------------------------------

POSITIVE_SETTINGS = ("hidden_size", "num_layers", "num_heads", "num_kv_heads", "head_dim", "intermediate_size",
                     "n_train", "n_eval", "warm_start.steps", "warm_start.batch_size")


def tiny_problems(run: RunConfig) -> list[str]:
    """The problems of a run's tiny.* settings (none without a tiny world): the loaders pass this check to
    load_run_config, as they pass the pre-flight, so a sweep is refused before any world is built."""
    return setting_problems(run.tiny) if run.tiny is not None else []


def setting_problems(cfg: TinyConfig) -> list[str]:
    """tiny.* values no world can be built with, each naming the value and the fix. Unchecked, each one failed
    inside ensure_tiny_assets (or the warm start, or the first forward pass), after the sweep had started."""
    problems = [f"tiny.{key}={value} must be >= 1; drop the override for the profile's value "
                f"(conf/profile/tiny.yaml)" for key in POSITIVE_SETTINGS if (value := _dotted(cfg, key)) < 1]
    if cfg.num_heads >= 1 and cfg.num_kv_heads >= 1 and cfg.num_heads % cfg.num_kv_heads:
        problems.append(f"tiny.num_kv_heads={cfg.num_kv_heads} must divide tiny.num_heads={cfg.num_heads} (each "
                        f"key/value head serves a group of query heads), e.g. tiny.num_kv_heads="
                        f"{max(d for d in range(1, cfg.num_kv_heads + 1) if cfg.num_heads % d == 0)}")
    if cfg.head_dim >= 1 and cfg.head_dim % 2:
        problems.append(f"tiny.head_dim={cfg.head_dim} must be even (rotary embeddings turn each head's dims in "
                        f"pairs), e.g. tiny.head_dim={cfg.head_dim + 1}")
    available = len(all_problems())
    if cfg.n_train + cfg.n_eval > available:
        problems.append(f"tiny.n_train={cfg.n_train} + tiny.n_eval={cfg.n_eval} exceeds the {available} distinct "
                        f"tiny problems (train and held-out sets are disjoint); lower one of them so they sum to "
                        f"at most {available}")
    w = cfg.warm_start
    if not w.learning_rate > 0:
        problems.append(f"tiny.warm_start.learning_rate={w.learning_rate} must be > 0 (e.g. 5e-3)")
    if not 0 <= w.slip_rate <= 1:
        problems.append(f"tiny.warm_start.slip_rate={w.slip_rate} is a share of examples: it must be in [0, 1] "
                        "(e.g. 0.5)")
    for key, template, fields in (("student_prompt", w.student_prompt, ("problem",)),
                                  ("teacher_prompt", w.teacher_prompt, ("problem", "solution"))):
        problems.extend(template_problems(f"tiny.warm_start.{key}", template, fields))
    return problems or _vocab_problems(cfg)  # the tokenizer is trained on the split and prompts checked above


def _vocab_problems(cfg: TinyConfig) -> list[str]:
    """tiny.vocab_size too small for every number to be one token (the build refuses such a tokenizer): the
    tokenizer is trained here as the build would (tokenizers alone, well under a second; nothing written)."""
    train_rows, eval_rows = make_datasets(cfg.n_train, cfg.n_eval, cfg.seed)
    rows = train_rows + eval_rows
    bpe = train_bpe(tokenizer_corpus(rows, cfg.warm_start), cfg.vocab_size)
    lengths = solution_lengths(lambda text: bpe.encode(text, add_special_tokens=False).ids, rows)
    if len(lengths) == 1:
        return []
    return [f"tiny.vocab_size={cfg.vocab_size} is too small: the tiny tokenizer splits some numbers into several "
            f"tokens (solutions tokenize to lengths {sorted(lengths)}, not one); raise it (e.g. tiny.vocab_size=1024)"]


def _dotted(cfg: TinyConfig, key: str):
    for part in key.split("."):
        cfg = getattr(cfg, part)
    return cfg


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
    """Build model/, train.jsonl, eval.jsonl, locked.jsonl and warm_start.json under cfg.dir unless they exist with
    these settings (every tiny.* key, the warm start's included); a changed setting rebuilds them.

    Safe under concurrency: builders serialise on a lock file and build into a temp dir first, so
    concurrent sweeps with the same settings build once and never see half a world. One cfg.dir holds
    one world: sweeps with different tiny settings at the same time need different cache_dir values.
    """
    root = Path(cfg.dir)
    settings = _settings_text(cfg)
    with _file_lock(root.parent / f".{root.name}.lock"):
        if _is_current(cfg):
            if not (root / "locked.jsonl").exists():  # a world built before the locked set: add it, rebuild nothing
                write_locked_set(root)
            return root
        tmp = root.parent / f".{root.name}.building"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        _build(cfg, tmp)
        atomic_write_text(tmp / "settings.json", settings)
        shutil.rmtree(root, ignore_errors=True)
        tmp.rename(root)
    return root


def _settings_text(cfg: TinyConfig) -> str:
    """What settings.json holds for a world built with these settings (its dir left out: a world may move)."""
    return json.dumps(asdict(cfg) | {"dir": None, "format": 2}, sort_keys=True)


def _is_current(cfg: TinyConfig) -> bool:
    marker = Path(cfg.dir) / "settings.json"
    return marker.exists() and marker.read_text() == _settings_text(cfg)


_VOCAB_SIZES: dict[str, int] = {}  # settings -> trained tokenizer's length: a grid asks once per job


def tiny_vocab_size(cfg: TinyConfig) -> int:
    """The vocabulary (the model's vocab_size) of the world these settings build, before it is built: far below
    tiny.vocab_size, the BPE trainer's upper bound. Read from the world on disk when it was built with these
    settings; else the tokenizer alone is trained as the build would (under a second, nothing written)."""
    built = Path(cfg.dir) / "model" / "config.json"
    if _is_current(cfg) and built.is_file():
        return json.loads(built.read_text())["vocab_size"]
    settings = _settings_text(cfg)
    if settings not in _VOCAB_SIZES:
        train_rows, eval_rows = make_datasets(cfg.n_train, cfg.n_eval, cfg.seed)
        _VOCAB_SIZES[settings] = len(_tokenizer(cfg, train_rows + eval_rows))
    return _VOCAB_SIZES[settings]


def _tokenizer(cfg: TinyConfig, rows: list[dict]):
    return build_tokenizer(tokenizer_corpus(rows, cfg.warm_start), cfg.vocab_size)


def _build(cfg: TinyConfig, out: Path) -> None:
    from opsd_sweep.warm_start import reference_probability, warm_start  # torch: only when building

    train_rows, eval_rows = make_datasets(cfg.n_train, cfg.n_eval, cfg.seed)
    for name, rows in (("train.jsonl", train_rows), ("eval.jsonl", eval_rows)):
        atomic_write_text(out / name, "".join(json.dumps(r) + "\n" for r in rows))
    write_locked_set(out)
    tokenizer = _tokenizer(cfg, train_rows + eval_rows)
    check_numbers_are_single_tokens(tokenizer, train_rows + eval_rows)
    model = build_model(cfg, len(tokenizer), tokenizer.pad_token_id, tokenizer.eos_token_id)
    started = time.monotonic()
    losses = warm_start(model, tokenizer, train_rows, arithmetic_facts(), cfg.warm_start, cfg.seed)
    report = {"seconds": round(time.monotonic() - started, 1), "final_loss": sum(losses[-20:]) / len(losses[-20:]),
              "heldout_reference_probability": reference_probability(model, tokenizer, eval_rows, cfg.warm_start)}
    atomic_write_json(out / "warm_start.json", report)
    print(f"[opsd_sweep] tiny warm start: {report}", flush=True)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.save_pretrained(out / "model")
    tokenizer.save_pretrained(out / "model")
