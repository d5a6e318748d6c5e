"""Loading the base model and tokenizer by hub id or path, with a clear error when unavailable."""

from __future__ import annotations

from pathlib import Path

from opsd_sweep.config import ModelConfig, is_local_path


class ModelUnavailableError(RuntimeError):
    """The model is neither a local directory nor in the hub cache."""


def load_tokenizer(cfg: ModelConfig):
    from transformers import AutoTokenizer

    _check_local(cfg)
    try:
        tokenizer = AutoTokenizer.from_pretrained(cfg.path)
    except OSError as err:
        raise ModelUnavailableError(_unavailable(cfg, err)) from err
    tokenizer.padding_side = "left"
    return tokenizer


def load_model(cfg: ModelConfig, device=None):
    import torch
    from transformers import AutoModelForCausalLM

    _check_local(cfg)
    try:
        model = AutoModelForCausalLM.from_pretrained(cfg.path, dtype=getattr(torch, cfg.dtype),
                                                     attn_implementation=cfg.attn_implementation)
    except OSError as err:
        raise ModelUnavailableError(_unavailable(cfg, err)) from err
    return model.to(device) if device is not None else model


def eos_token_ids(model, tokenizer) -> list[int]:
    """Every id that ends a completion: the tokenizer's EOS plus the generation config's (Qwen3 lists
    both <|im_end|> and <|endoftext|>)."""
    ids = {tokenizer.eos_token_id}
    configured = getattr(model.generation_config, "eos_token_id", None)
    ids.update(configured if isinstance(configured, (list, tuple)) else [configured])
    return sorted(i for i in ids if i is not None)


def _check_local(cfg: ModelConfig) -> None:
    if is_local_path(cfg.path) and not Path(cfg.path).is_dir():
        raise ModelUnavailableError(f"model {cfg.name!r}: local directory {cfg.path!r} does not exist. "
                                    "Set model.path to a directory with config.json, tokenizer and weights.")


def _unavailable(cfg: ModelConfig, err: Exception) -> str:
    return (f"model {cfg.name!r} at {cfg.path!r} could not be loaded ({err.__class__.__name__}: {err}). "
            "Point model.path at a local directory with config.json and weights, or download the hub id "
            "where there is network (huggingface-cli download) and copy the cache.")
