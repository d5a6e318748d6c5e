"""A scripted model: a real Qwen3 (transformers, saved like any model dir, loaded by path by the evaluator) whose
weights are set by hand so that what it writes is fixed by construction, on every CPU.

Its decoder layers are zero, so the residual stream at each position is the current token's embedding; each
token of the script has its own embedding dimension and the untied lm_head maps it to the next token of the
script with a logit margin of about 110 (every other token: probability below 1e-40, so sampling at temperature
1 draws the script). After the prompt's last token (that of the tiny tokenizer's chat template, the same for
every problem) it writes `\\boxed{ANSWER}` and stops: an evaluation with it is right exactly on the problems
whose answer is ANSWER. `stopping_adapter` is a LoRA checkpoint of it that writes nothing (EOS at once).
"""

from __future__ import annotations

from pathlib import Path

MARGIN = 20.0  # lm_head weight of each scripted successor; times sqrt(hidden_size) after the final RMSNorm
HIDDEN = 32


def script(tokenizer, answer: str) -> list[int]:
    """The token ids the model reads last (the prompt's) and then writes: prompt end, \\boxed{answer}, EOS."""
    from opsd_sweep.prompts import render_prompt_ids

    last = render_prompt_ids(tokenizer, "1+2*3=?", False)[-1]  # the template's, whatever the problem
    written = tokenizer(f"\\boxed{{{answer}}}", add_special_tokens=False)["input_ids"]
    ids = [last, *written, tokenizer.eos_token_id]
    if len(set(ids)) != len(ids) or len(ids) >= HIDDEN:
        raise ValueError(f"script {tokenizer.convert_ids_to_tokens(ids)}: each token must be distinct (the "
                         f"next token depends on the current one only) and fewer than {HIDDEN}")
    return ids


def build_scripted_model(tokenizer_dir: Path, out: Path, answer: str) -> list[int]:
    """Save a scripted model (and the tokenizer of `tokenizer_dir`) to `out`; returns its script."""
    import torch
    from transformers import AutoTokenizer, Qwen3Config, Qwen3ForCausalLM

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    ids = script(tokenizer, answer)
    model = Qwen3ForCausalLM(Qwen3Config(
        vocab_size=len(tokenizer), hidden_size=HIDDEN, intermediate_size=64, num_hidden_layers=1,
        num_attention_heads=4, num_key_value_heads=2, head_dim=8, max_position_embeddings=512,
        tie_word_embeddings=False, pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id,
        bos_token_id=None))
    other = HIDDEN - 1  # the dimension of every token outside the script: followed by EOS
    with torch.no_grad():
        for name, param in model.named_parameters():
            if not name.endswith("norm.weight"):  # the RMSNorm gains stay 1
                param.zero_()
        embed, head = model.model.embed_tokens.weight, model.lm_head.weight
        embed[:, other] = 1.0
        head[tokenizer.eos_token_id, other] = MARGIN
        for dim, (token, successor) in enumerate(zip(ids[:-1], ids[1:])):
            embed[token] = 0.0
            embed[token, dim] = 1.0
            head[successor, dim] = MARGIN
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return ids


def stopping_adapter(model_dir: Path, out: Path) -> None:
    """A LoRA adapter (PEFT format, on lm_head) of the scripted model at `model_dir` under which it writes no
    token but EOS: after the prompt's last token EOS outscores the script's first token by the margin."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    first_dim = 0  # the prompt's last token (script()[0]) has embedding dimension 0
    peft_model = get_peft_model(AutoModelForCausalLM.from_pretrained(model_dir),
                                LoraConfig(r=1, lora_alpha=1, target_modules=["lm_head"]))
    with torch.no_grad():
        for name, param in peft_model.named_parameters():
            if "lora_A" in name:
                param.zero_()
                param[0, first_dim] = 1.0
            elif "lora_B" in name:
                param.zero_()
                param[tokenizer.eos_token_id, 0] = 2 * MARGIN
    peft_model.save_pretrained(out, save_embedding_layers=False)  # the adapter alone: lm_head is the model's


def zero_adapter(model_dir: Path, out: Path) -> None:
    """A LoRA adapter (PEFT format, on lm_head) that changes nothing: B = 0, as a fresh LoRA starts."""
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    peft_model = get_peft_model(AutoModelForCausalLM.from_pretrained(model_dir),
                                LoraConfig(r=1, lora_alpha=1, target_modules=["lm_head"]))
    peft_model.save_pretrained(out, save_embedding_layers=False)  # the adapter alone: lm_head is the model's
