"""The tiny world's warm start: a short supervised phase that turns the random tiny Qwen3 into a base
model worth self-distilling.

It trains on two views of the training problems, rendered exactly as the OPSD trainer renders them:
- teacher view (problem + reference solution in the prompt, thinking on) -> the reference solution:
  the model learns to follow a reference, so as a teacher it answers nearly always correctly;
- student view (problem only, thinking off) -> a worked solution that, with probability `slip_rate`,
  evaluates left to right, (a + b) * c, instead of multiplying first: as a student it makes that slip
  part of the time, which leaves room for OPSD to teach it the rule its teacher reads off the reference.
"""

from __future__ import annotations

import math
import random

import torch
from tqdm import tqdm

from opsd_sweep.config import WarmStartConfig
from opsd_sweep.prompts import render_prompt_ids


def student_prompt(cfg: WarmStartConfig, tokenizer, row: dict) -> list[int]:
    return render_prompt_ids(tokenizer, cfg.student_prompt.format(problem=row["problem"]), cfg.student_thinking)


def teacher_prompt(cfg: WarmStartConfig, tokenizer, row: dict) -> list[int]:
    text = cfg.teacher_prompt.format(problem=row["problem"], solution=row["solution"])
    return render_prompt_ids(tokenizer, text, cfg.teacher_thinking)


def completion_ids(tokenizer, text: str) -> list[int]:
    """A completion as the rollout would produce it: the solution's tokens, then EOS."""
    return tokenizer(text, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]


class ExampleBank:
    """Token ids of every row in both views, rendered once; `sample` draws a training batch."""

    def __init__(self, cfg: WarmStartConfig, tokenizer, rows: list[dict], facts: list[str] = ()):
        self.cfg = cfg
        self.student = [student_prompt(cfg, tokenizer, r) for r in rows]
        self.teacher = [teacher_prompt(cfg, tokenizer, r) for r in rows]
        self.reference = [completion_ids(tokenizer, r["solution"]) for r in rows]
        self.slip = [completion_ids(tokenizer, r["slip_solution"]) for r in rows]
        self.facts = [_split_fact(tokenizer, f) for f in facts]

    def sample(self, rng: random.Random, size: int) -> list[tuple[list[int], list[int]]]:
        """Half teacher view, half student view (a fresh slip coin per example), as (prompt, completion)."""
        batch = []
        for k in range(size):
            i = rng.randrange(len(self.reference))
            if k % 2 == 0:
                batch.append((self.teacher[i], self.reference[i]))
            else:
                batch.append((self.student[i], self.slip[i] if rng.random() < self.cfg.slip_rate else self.reference[i]))
        return batch


    def sample_facts(self, rng: random.Random, size: int) -> list[tuple[list[int], list[int]]]:
        return [rng.choice(self.facts) for _ in range(size)]


def _split_fact(tokenizer, fact: str) -> tuple[list[int], list[int]]:
    """'5*5=25' as (ids of '5*5=', ids of '25'): the loss falls on the result only."""
    question, result = fact.split("=")
    return (tokenizer(question + "=", add_special_tokens=False)["input_ids"],
            tokenizer(result, add_special_tokens=False)["input_ids"])


def pad_batch(pairs: list[tuple[list[int], list[int]]], pad_id: int) -> dict[str, torch.Tensor]:
    """Right-padded prompt + completion rows; labels only on completion tokens (positions start at 0,
    as the trainer's right-padded and the evaluator's left-padded batches count them)."""
    width = max(len(p) + len(c) for p, c in pairs)
    ids, mask, labels = [], [], []
    for prompt, completion in pairs:
        pad = width - len(prompt) - len(completion)
        ids.append(prompt + completion + [pad_id] * pad)
        mask.append([1] * (len(prompt) + len(completion)) + [0] * pad)
        labels.append([-100] * len(prompt) + completion + [-100] * pad)
    return {"input_ids": torch.tensor(ids), "attention_mask": torch.tensor(mask), "labels": torch.tensor(labels)}


def warmup_stable_decay(steps: int, warmup: float = 0.05, decay: float = 0.3):
    """LR factor per step: linear warmup, constant, then cosine to zero over the last `decay` share.

    A long constant phase matters here: when the copy skill appears late in a run, a decaying rate
    would already be too small to finish learning it."""
    warm, decay_start = max(1, round(warmup * steps)), round((1 - decay) * steps)

    def factor(step: int) -> float:
        if step < warm:
            return (step + 1) / warm
        if step < decay_start:
            return 1.0
        return 0.5 * (1 + math.cos(math.pi * (step - decay_start) / max(1, steps - decay_start)))

    return factor


def warm_start(model, tokenizer, rows: list[dict], facts: list[str], cfg: WarmStartConfig, seed: int) -> list[float]:
    """Train every weight of `model` in place for cfg.steps steps; returns the loss per step.

    AdamW on a warmup-stable-decay schedule, so the base model ends in a settled state.
    """
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the same base model whatever the machine's core count, and no thread contention
    try:
        return _train(model, tokenizer, ExampleBank(cfg, tokenizer, rows, facts), cfg, seed)
    finally:
        torch.set_num_threads(threads)


def _train(model, tokenizer, bank: ExampleBank, cfg: WarmStartConfig, seed: int) -> list[float]:
    torch.manual_seed(seed)
    rng = random.Random(seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=cfg.learning_rate, weight_decay=0.0)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, warmup_stable_decay(cfg.steps))
    model.train()
    losses = []
    with tqdm(range(cfg.steps), desc="tiny warm start", unit="step") as bar:
        for _ in bar:
            loss = (model(**pad_batch(bank.sample(rng, cfg.batch_size), tokenizer.pad_token_id)).loss
                    + model(**pad_batch(bank.sample_facts(rng, cfg.batch_size), tokenizer.pad_token_id)).loss)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad(set_to_none=True)
            losses.append(loss.item())
            bar.set_postfix(loss=f"{loss.item():.3f}")
    model.eval()
    return losses


@torch.no_grad()
def reference_probability(model, tokenizer, rows: list[dict], cfg: WarmStartConfig) -> dict[str, float]:
    """Mean probability of the reference solution, token for token, under each view's prompt.

    At temperature 1 this is the chance of sampling exactly the reference: a lower bound on accuracy
    (here close to it, since every correct solution of this task is written the same way).
    """
    bank = ExampleBank(cfg, tokenizer, rows)
    result = {}
    for view, prompts in (("teacher", bank.teacher), ("student", bank.student)):
        batch = pad_batch(list(zip(prompts, bank.reference)), tokenizer.pad_token_id)
        logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits[:, :-1]
        labels = batch["labels"][:, 1:]
        logp = logits.float().log_softmax(-1).gather(-1, labels.clamp(min=0)[..., None])[..., 0]
        sequence_logp = (logp * (labels != -100)).sum(-1)
        result[view] = float(sequence_logp.exp().mean())
    return result
