"""Prompt rendering shared by the trainer and the evaluator: a user turn through the chat template."""

from __future__ import annotations


def render_prompt_ids(tokenizer, text: str, thinking: bool) -> list[int]:
    """Token ids of one user turn plus the assistant header (thinking on or off), exactly as the
    chat template renders them; ids are kept as ids so no special token is lost on a decode."""
    rendered = tokenizer.apply_chat_template([{"role": "user", "content": text}], tokenize=False,
                                             add_generation_prompt=True, enable_thinking=thinking)
    return tokenizer(rendered, add_special_tokens=False)["input_ids"]
