"""Loading the base model and tokenizer by hub id or path, with a clear error when unavailable."""

from __future__ import annotations

from opsd_sweep.config import ModelConfig


class ModelUnavailableError(RuntimeError):
    """The model is neither a local directory nor in the hub cache."""


def load_tokenizer(cfg: ModelConfig):
    from transformers import AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(cfg.path)
    except OSError as err:
        raise ModelUnavailableError(_unavailable(cfg, err)) from err
    tokenizer.padding_side = "left"
    return tokenizer


def load_model(cfg: ModelConfig, device=None):
    import torch
    from transformers import AutoModelForCausalLM

    try:
        model = AutoModelForCausalLM.from_pretrained(cfg.path, dtype=getattr(torch, cfg.dtype),
                                                     attn_implementation=cfg.attn_implementation)
    except OSError as err:
        raise ModelUnavailableError(_unavailable(cfg, err)) from err
    return model.to(device) if device is not None else model


def _unavailable(cfg: ModelConfig, err: Exception) -> str:
    return (f"model {cfg.name!r} at {cfg.path!r} could not be loaded ({err.__class__.__name__}: {err}). "
            "Point model.path at a local directory with config.json and weights, or download the hub id "
            "where there is network (huggingface-cli download) and copy the cache.")
