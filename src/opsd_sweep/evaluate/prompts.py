"""Evaluation prompts: the problem in the configured template, through the model's chat template."""

from __future__ import annotations

from opsd_sweep.config import EvalConfig
from opsd_sweep.evaluate.datasets import Problem
from opsd_sweep.prompts import render_prompt_ids


def render_eval_prompts(tokenizer, cfg: EvalConfig, problems: list[Problem]) -> list[list[int]]:
    """Prompt token ids per problem: cfg.prompt filled with the problem, one user turn, the assistant
    header with thinking on or off (cfg.thinking)."""
    if getattr(tokenizer, "chat_template", None) is None:
        name = getattr(tokenizer, "name_or_path", "?")
        raise ValueError(f"tokenizer {name!r} has no chat template; evaluate a chat model (e.g. "
                         "Qwen/Qwen3-1.7B) or one whose tokenizer_config.json has a chat_template")
    return [render_prompt_ids(tokenizer, cfg.prompt.format(problem=p.problem), cfg.thinking)
            for p in problems]
